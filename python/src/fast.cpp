// The mx.fast submodule: fused layer_norm, rms_norm, rope and
// scaled_dot_product_attention, and the user kernels metal_kernel,
// cuda_kernel and precompiled_cuda_kernel (MLX's names and keyword-only
// parameters).
#include <cstdint>

#include "fluxion/ops/custom_kernel.h"
#include "fluxion/ops/fast.h"

#include "python/src/docs.h"
#include "python/src/convert.h"

namespace ff = fluxion::fast;

namespace {

std::optional<fx::array> opt_array(const py::object& o) {
  if (o.is_none()) {
    return std::nullopt;
  }
  return fxpy::to_array(o);
}

// A kernel call's inputs: a list (arrays or scalars), or a dict keyed by
// the kernel's input names.
std::vector<fx::array> kernel_inputs(const std::string& tag,
                                     const std::vector<std::string>& names,
                                     const py::object& inputs) {
  std::vector<fx::array> in;
  if (py::isinstance<py::dict>(inputs)) {
    auto d = inputs.cast<py::dict>();
    for (auto& n : names) {
      if (!d.contains(n)) {
        throw std::invalid_argument(tag + " Missing input '" + n + "'.");
      }
      in.push_back(fxpy::to_array(d[py::str(n)]));
    }
  } else {
    for (auto x : inputs) {
      in.push_back(fxpy::to_array(x));
    }
  }
  return in;
}

// `template`: a list of (name, value) pairs or a dict; values are bools,
// ints or dtypes.
std::vector<ff::KernelTemplateArg> kernel_template(const std::string& tag,
                                                   const py::object& tmpl) {
  std::vector<ff::KernelTemplateArg> targs;
  if (tmpl.is_none()) {
    return targs;
  }
  auto items = py::isinstance<py::dict>(tmpl)
                   ? py::list(tmpl.cast<py::dict>().attr("items")())
                   : py::list(tmpl);
  for (auto item : items) {
    auto pair = item.cast<py::tuple>();
    ff::KernelTemplateArg t;
    t.name = pair[0].cast<std::string>();
    py::handle v = pair[1];
    if (PyBool_Check(v.ptr())) {
      t.kind = 'b';
      t.value = v.ptr() == Py_True;
    } else if (PyLong_Check(v.ptr())) {
      t.kind = 'i';
      t.value = v.cast<int64_t>();
    } else if (py::isinstance<fx::Dtype>(v)) {
      t.kind = 'd';
      t.dtype = v.cast<fx::Dtype>();
    } else {
      throw std::invalid_argument(tag + " Template argument '" + t.name +
                                  "' must be a bool, an int or a Dtype.");
    }
    targs.push_back(t);
  }
  return targs;
}

py::list to_list(const std::vector<fx::array>& outs) {
  py::list r;
  for (auto& o : outs) {
    r.append(py::cast(o));
  }
  return r;
}

// The callable a kernel factory returns; `call` is metal_kernel_call or
// cuda_kernel_call. Keyword-only arguments, as MLX's.
using KernelCall = std::vector<fx::array> (*)(
    const ff::CustomKernelSpec&, const std::vector<fx::array>&,
    const std::vector<fx::Shape>&, const std::vector<fx::Dtype>&,
    ff::KernelLaunch, bool, fx::StreamOrDevice);

py::cpp_function kernel_object(ff::CustomKernelSpec spec, KernelCall call,
                               const char* tag) {
  return py::cpp_function(
      [spec, call, tag = std::string(tag)](
          const py::object& inputs,
          const std::vector<fx::Shape>& output_shapes,
          const std::vector<fx::Dtype>& output_dtypes,
          const std::vector<int>& grid, const std::vector<int>& threadgroup,
          const py::object& tmpl, std::optional<double> init_value,
          bool verbose, fx::StreamOrDevice s) {
        ff::KernelLaunch launch;
        launch.grid = grid;
        launch.threadgroup = threadgroup;
        launch.template_args = kernel_template(tag, tmpl);
        launch.init_value = init_value;
        auto in = kernel_inputs(tag, spec.input_names, inputs);
        return to_list(call(spec, in, output_shapes, output_dtypes,
                            std::move(launch), verbose, s));
      },
      py::kw_only(), "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
      "grid"_a, "threadgroup"_a, "template"_a = py::none(),
      "init_value"_a = py::none(), "verbose"_a = false,
      "stream"_a = py::none());
}

// A precompiled kernel's scalars: bool, int (int32) or float (float32).
std::vector<ff::KernelScalar> kernel_scalars(const py::list& scalars) {
  std::vector<ff::KernelScalar> out;
  for (auto v : scalars) {
    if (PyBool_Check(v.ptr())) {
      out.push_back({'b', v.ptr() == Py_True ? 1.0 : 0.0});
    } else if (PyLong_Check(v.ptr())) {
      auto i = v.cast<int64_t>();
      if (i < INT32_MIN || i > INT32_MAX) {
        throw std::invalid_argument(
            "[precompiled_cuda_kernel] The scalar " + std::to_string(i) +
            " does not fit the kernel's int (int32).");
      }
      out.push_back({'i', static_cast<double>(i)});
    } else if (PyFloat_Check(v.ptr())) {
      out.push_back({'f', v.cast<double>()});
    } else {
      throw std::invalid_argument(
          "[precompiled_cuda_kernel] Invalid scalar argument type. Received " +
          py::type::of(v).attr("__name__").cast<std::string>() +
          " but must be one of bool, int or float.");
    }
  }
  return out;
}

}  // namespace

void init_fast(py::module_& parent) {
  auto m = parent.def_submodule(
      "fast", "Fused operations of common layers (as MLX's mx.fast).");
  m.def(
      "rms_norm",
      [](const fx::array& x, const py::object& weight, float eps,
         fx::StreamOrDevice s) {
        return ff::rms_norm(x, opt_array(weight), eps, s);
      },
      "x"_a, "weight"_a.none(), "eps"_a, py::kw_only(), "stream"_a = py::none(),
      R"doc(Root-mean-square normalization over the last axis, in one op.

``x / sqrt(mean(x ** 2, axis=-1) + eps) * weight``, accumulated in
``float32``.

Args:
    x (array): Input; normalized over its last axis.
    weight (array or None): Scale of the last axis' size, or ``None``.
    eps (float): Added to the mean square for stability.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The normalized ``x``, with its dtype.
)doc");
  m.def(
      "layer_norm",
      [](const fx::array& x, const py::object& weight, const py::object& bias,
         float eps, fx::StreamOrDevice s) {
        return ff::layer_norm(x, opt_array(weight), opt_array(bias), eps, s);
      },
      "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, py::kw_only(),
      "stream"_a = py::none(),
      R"doc(Layer normalization over the last axis, in one op.

``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis.

Args:
    x (array): Input; normalized over its last axis.
    weight (array or None): Scale, or ``None``.
    bias (array or None): Offset, or ``None``.
    eps (float): Added to the variance for stability.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The normalized ``x``, with its dtype.
)doc");
  m.def(
      "rope",
      [](const fx::array& a, int dims, bool traditional,
         std::optional<float> base, float scale, const py::object& offset,
         const py::object& freqs, fx::StreamOrDevice s) {
        fx::array off = fxpy::to_array(offset);
        return ff::rope(a, dims, traditional, base, scale, off,
                        opt_array(freqs), s);
      },
      "a"_a, "dims"_a, py::kw_only(), "traditional"_a, "base"_a.none(),
      "scale"_a, "offset"_a, "freqs"_a = py::none(), "stream"_a = py::none(),
      R"doc(Rotary positional encoding (RoPE) of the leading features.

Rotates pairs of the first ``dims`` features of the last axis by angles
``position * base ** (-2 i / dims)``; positions are ``offset`` plus the
index along axis -2.

Args:
    a (array): Input, ``(..., L, D)``.
    dims (int): How many features are rotated (even, at most ``D``).
    traditional (bool): Rotate consecutive pairs ``(2i, 2i + 1)``
        (``True``) or the two halves ``(i, i + dims / 2)`` (``False``).
    base (float or None): Base of the frequencies (``None`` with
        ``freqs``).
    scale (float): Multiplies the positions.
    offset (int or array): Position of the first row.
    freqs (array, optional): The ``dims / 2`` frequencies, instead of
        ``base``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The encoded ``a``.
)doc");
  m.def(
      "scaled_dot_product_attention",
      [](const fx::array& q, const fx::array& k, const fx::array& v,
         float scale, const py::object& mask, const py::object& sinks,
         bool /*force_fused*/, fx::StreamOrDevice s) {
        auto sk = opt_array(sinks);
        if (mask.is_none()) {
          return ff::scaled_dot_product_attention(q, k, v, scale, "",
                                                  std::nullopt, sk, s);
        }
        if (py::isinstance<py::str>(mask)) {
          return ff::scaled_dot_product_attention(
              q, k, v, scale, mask.cast<std::string>(), std::nullopt, sk, s);
        }
        return ff::scaled_dot_product_attention(q, k, v, scale, "array",
                                                fxpy::to_array(mask), sk, s);
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "scale"_a, "mask"_a = py::none(),
      "sinks"_a = py::none(), "force_fused"_a = false,
      "stream"_a = py::none(),
      R"doc(Attention ``softmax(scale * q @ k.T + mask) @ v`` in one op.

Grouped-query attention: ``k`` and ``v`` may have fewer heads than ``q``
(a divisor). Hidden keys score the lowest finite value, so a row that sees
none is uniform.

Args:
    q (array): Queries, ``(B, H_q, L_q, D)``.
    k (array): Keys, ``(B, H_kv, L_k, D)``.
    v (array): Values, ``(B, H_kv, L_k, D_v)``.
    scale (float): Scale of the scores, usually ``1 / sqrt(D)``.
    mask (str or array, optional): ``"causal"``, a boolean mask
        (``True`` keeps) or an additive mask broadcastable to the scores.
    sinks (array, optional): One logit per query head that joins every
        row's softmax without a value.
    force_fused (bool, optional): MLX's switch to its fused kernel (a
        testing aid); accepted and ignored: every case here runs fused.
        Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The attention output, ``(B, H_q, L_q, D_v)``.
)doc");
  m.def(
      "metal_kernel",
      [](const std::string& name, const std::vector<std::string>& input_names,
         const std::vector<std::string>& output_names,
         const std::string& source, const std::string& header,
         bool ensure_row_contiguous, bool atomic_outputs,
         const py::object& compile_options) {
        ff::CustomKernelSpec spec;
        spec.name = name;
        spec.input_names = input_names;
        spec.output_names = output_names;
        spec.source = source;
        spec.header = header;
        spec.ensure_row_contiguous = ensure_row_contiguous;
        spec.atomic_outputs = atomic_outputs;
        if (!compile_options.is_none()) {
          for (auto [k, v] : compile_options.cast<py::dict>()) {
            auto key = k.cast<std::string>();
            if (key != "math_mode") {
              throw std::invalid_argument(
                  "[metal_kernel] Unknown compile option '" + key +
                  "' (expected 'math_mode').");
            }
            auto mode = v.cast<std::string>();
            if (mode != "safe" && mode != "fast") {
              throw std::invalid_argument(
                  "[metal_kernel] math_mode must be 'safe' or 'fast'; got '" +
                  mode + "'.");
            }
            spec.math_mode = mode;
          }
        }
        return kernel_object(std::move(spec), &ff::metal_kernel_call,
                             "[metal_kernel]");
      },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a,
      "header"_a = "", "ensure_row_contiguous"_a = true,
      "atomic_outputs"_a = false, "compile_options"_a = py::none(),
      R"doc(Make a custom Metal kernel (MLX's API; no Metal here).

On a build without Metal (as MLX's Linux builds) the kernel object is made,
but calling it raises ``RuntimeError`` "No Metal back-end", except inside
:func:`fluxion.core.export_function`, where the call is recorded (on the GPU;
another device raises ``ValueError``) for a Metal machine to run. The source
is never executed here; ``mx.metal.is_available()`` is ``False``.

Args:
    name (str): The kernel's name.
    input_names (list(str)): Names of the inputs in the source.
    output_names (list(str)): Names of the outputs in the source.
    source (str): The body of the Metal kernel.
    header (str, optional): Code placed before the kernel.
    ensure_row_contiguous (bool, optional): Copy inputs to row-major
        first. Default ``True``.
    atomic_outputs (bool, optional): Outputs are atomic. Default
        ``False``.
    compile_options (dict, optional): ``{"math_mode": "safe" | "fast"}``.

Returns:
    Callable: The kernel, called with ``inputs``, ``output_shapes``,
    ``output_dtypes``, ``grid``, ``threadgroup`` and optionally
    ``template``, ``init_value``, ``verbose`` and ``stream``
    (keyword-only).
)doc");
  m.def(
      "cuda_kernel",
      [](const std::string& name, const std::vector<std::string>& input_names,
         const std::vector<std::string>& output_names,
         const std::string& source, const std::string& header,
         bool ensure_row_contiguous, int shared_memory, bool atomic_outputs) {
        return kernel_object(
            ff::cuda_kernel_spec(name, input_names, output_names, source,
                                 header, ensure_row_contiguous, atomic_outputs,
                                 shared_memory),
            &ff::cuda_kernel_call, "[cuda_kernel]");
      },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a,
      "header"_a = "", "ensure_row_contiguous"_a = true,
      "shared_memory"_a = 0, py::kw_only(), "atomic_outputs"_a = false,
      R"doc(Make a custom CUDA kernel from the body of its function (MLX's API).

The kernel's signature is generated from the inputs and outputs: each
input ``a`` is a ``const T* a`` of its dtype (``__half``,
``__nv_bfloat16``, ``float``, ``int32_t``...), followed by ``a_shape``,
``a_strides`` (``.data()`` and ``[i]``) and ``a_ndim`` when the source
names them; each output is a ``T*``; template arguments become
constants at the top of the body. ``cooperative_groups`` (``cg``),
``WARP_SIZE`` and ``elem_to_loc(elem, shape, strides, ndim)`` are
available. The source is compiled by NVRTC for the GPU on first use and
cached in memory and under ``$FLUXION_CACHE_DIR``; a source that does not
compile raises ``ValueError`` with NVRTC's log when the output is
evaluated. GPU only: a CPU stream raises ``ValueError``.

Args:
    name (str): The kernel's name (a C identifier); the CUDA function is
        ``custom_kernel_<name>``.
    input_names (list(str)): Parameter names of the inputs.
    output_names (list(str)): Parameter names of the outputs.
    source (str): The body of the kernel function.
    header (str, optional): Code placed before the kernel (helpers,
        includes). Default ``""``.
    ensure_row_contiguous (bool, optional): Copy inputs to row-major
        first. Default ``True``.
    shared_memory (int, optional): Dynamic shared memory of each block,
        in bytes. Default ``0``.
    atomic_outputs (bool, optional): Accepted for Metal kernels' sake;
        CUDA's atomics (``atomicAdd``) take the plain ``T*`` outputs, so
        the signature is the same. Default ``False``.

Returns:
    Callable: The kernel, called with ``inputs`` (arrays or scalars),
    ``output_shapes``, ``output_dtypes``, ``grid`` (in threads, as
    MLX's), ``threadgroup`` (threads per block) and optionally
    ``template`` (``[(name, bool | int | Dtype)]``), ``init_value``
    (fills the outputs first), ``verbose`` (prints the generated source)
    and ``stream`` (keyword-only); it returns the list of outputs.
)doc");
  m.def(
      "precompiled_cuda_kernel",
      [](const std::string& name, const py::bytes& compiled_source,
         const py::object& inputs, const std::vector<fx::Shape>& output_shapes,
         const std::vector<fx::Dtype>& output_dtypes, const py::list& scalars,
         const std::vector<int>& grid, const std::vector<int>& threadgroup,
         int shared_memory, std::optional<double> init_value,
         bool ensure_row_contiguous, fx::StreamOrDevice s) {
        ff::KernelLaunch launch;
        launch.grid = grid;
        launch.threadgroup = threadgroup;
        launch.init_value = init_value;
        launch.scalars = kernel_scalars(scalars);
        auto in = kernel_inputs("[precompiled_cuda_kernel]", {}, inputs);
        return to_list(ff::precompiled_cuda_kernel(
            name, std::string(compiled_source), in, output_shapes,
            output_dtypes, std::move(launch), shared_memory,
            ensure_row_contiguous, s));
      },
      py::kw_only(), "name"_a, "compiled_source"_a, "inputs"_a,
      "output_shapes"_a, "output_dtypes"_a, "scalars"_a, "grid"_a,
      "threadgroup"_a, "shared_memory"_a = 0, "init_value"_a = py::none(),
      "ensure_row_contiguous"_a = false, "stream"_a = py::none(),
      R"doc(Run a kernel compiled elsewhere, from its PTX or CUBIN (MLX's API).

The kernel's parameters are the inputs' pointers, the outputs' pointers,
then the scalars by value (bool, int as ``int``, float as ``float``).

Args:
    name (str): The kernel's symbol in the image (unmangled for
        ``extern "C"`` kernels).
    compiled_source (bytes): The PTX, CUBIN or fatbin.
    inputs (list): The input arrays (or scalars).
    output_shapes (list(tuple(int))): Shape of each output.
    output_dtypes (list(Dtype)): Dtype of each output.
    scalars (list): Scalar arguments: bool, int or float.
    grid (tuple(int, int, int)): The grid in threads (as MLX's).
    threadgroup (tuple(int, int, int)): Threads per block.
    shared_memory (int, optional): Dynamic shared memory, in bytes.
        Default ``0``.
    init_value (float, optional): Fills the outputs first. Default
        ``None`` (uninitialized).
    ensure_row_contiguous (bool, optional): Copy inputs to row-major
        first. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    list(array): The outputs.
)doc");
}

// The mx.fast submodule: fused layer_norm, rms_norm, rope and
// scaled_dot_product_attention (MLX's names and keyword-only parameters).
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

// The call of an mx.fast.metal_kernel object (see custom_kernel.h).
py::list call_metal_kernel(const ff::MetalKernelSpec& spec,
                           const py::object& inputs,
                           const std::vector<fx::Shape>& output_shapes,
                           const std::vector<fx::Dtype>& output_dtypes,
                           const std::vector<int>& grid,
                           const std::vector<int>& threadgroup,
                           const py::object& tmpl, std::optional<double> init,
                           bool verbose, fx::StreamOrDevice s) {
  std::vector<fx::array> in;
  if (py::isinstance<py::dict>(inputs)) {
    auto d = inputs.cast<py::dict>();
    for (auto& n : spec.input_names) {
      if (!d.contains(n)) {
        throw std::invalid_argument("[metal_kernel] Missing input '" + n +
                                    "'.");
      }
      in.push_back(fxpy::to_array(d[py::str(n)]));
    }
  } else {
    for (auto x : inputs) {
      in.push_back(fxpy::to_array(x));
    }
  }
  std::vector<ff::KernelTemplateArg> targs;
  if (!tmpl.is_none()) {
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
        throw std::invalid_argument(
            "[metal_kernel] Template argument '" + t.name +
            "' must be a bool, an int or a Dtype.");
      }
      targs.push_back(t);
    }
  }
  auto outs = ff::metal_kernel_call(spec, in, output_shapes, output_dtypes,
                                    grid, threadgroup, targs, init, verbose, s);
  py::list r;
  for (auto& o : outs) {
    r.append(py::cast(o));
  }
  return r;
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
        ff::MetalKernelSpec spec{name,
                                 input_names,
                                 output_names,
                                 source,
                                 header,
                                 ensure_row_contiguous,
                                 atomic_outputs,
                                 ""};
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
        return py::cpp_function(
            [spec](const py::object& inputs,
                   const std::vector<fx::Shape>& output_shapes,
                   const std::vector<fx::Dtype>& output_dtypes,
                   const std::vector<int>& grid,
                   const std::vector<int>& threadgroup,
                   const py::object& tmpl, std::optional<double> init_value,
                   bool verbose, fx::StreamOrDevice s) {
              return call_metal_kernel(spec, inputs, output_shapes,
                                       output_dtypes, grid, threadgroup, tmpl,
                                       init_value, verbose, s);
            },
            py::kw_only(), "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
            "grid"_a, "threadgroup"_a, "template"_a = py::none(),
            "init_value"_a = py::none(), "verbose"_a = false,
            "stream"_a = py::none());
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
}

#include "python/src/convert.h"

#include <pybind11/numpy.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "fluxion/dtype_dispatch.h"
#include "fluxion/ops/layout.h"

bool pybind11::detail::type_caster<fx::StreamOrDevice>::load(handle src, bool) {
  if (src.is_none()) {
    value = fx::StreamOrDevice{};
    return true;
  }
  if (isinstance<fx::Stream>(src)) {
    value = fx::StreamOrDevice(src.cast<fx::Stream>());
    return true;
  }
  if (isinstance<fx::Device>(src)) {
    value = fx::StreamOrDevice(src.cast<fx::Device>());
    return true;
  }
  if (isinstance<fx::Device::DeviceType>(src)) {
    value = fx::StreamOrDevice(src.cast<fx::Device::DeviceType>());
    return true;
  }
  if (isinstance<fx::ThreadLocalStream>(src)) {
    // This thread's stream of a thread-local stream.
    value = fx::StreamOrDevice(
        fx::stream_from_thread_local_stream(src.cast<fx::ThreadLocalStream>()));
    return true;
  }
  return false;
}

namespace fxpy {

void int32_overflow(PyObject* value) {
  std::string v = py::str(value).cast<std::string>();
  PyErr_SetString(PyExc_OverflowError,
                  ("Shape dimension " + v +
                   " is outside the supported range [-2147483648, "
                   "2147483647]: Fluxion uses 32-bit integers for shape "
                   "dimensions and axes.")
                      .c_str());
  throw py::error_already_set();
}

void check_int32(PyObject* value) {
  if (!PyLong_Check(value) || PyBool_Check(value)) {
    return;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow || v < INT32_MIN || v > INT32_MAX) {
    int32_overflow(value);
  }
}

void bad_argument_type(py::handle h, const char* op, const char* what,
                       const char* expected) {
  throw py::type_error(std::string("[") + op + "] " + what + " must be " +
                       expected + "; got " + Py_TYPE(h.ptr())->tp_name + ".");
}

PyTypeObject* array_type = nullptr;

namespace {
// Weak scalar operands (`x + 1.0`, `2 * x`) are immutable constants: the
// same value in the same dtype can be one array. A small direct-mapped
// table keyed by (dtype, kind, bits of the value) keeps the recent ones,
// so a loop of `y = y + 1.0` allocates no array, buffer or Data for its
// operand. Only operand conversions use it (never mx.array(1.0), whose
// result the caller owns), and never inside a transformation or compile
// trace (constants built there belong to the traced graph). The table is
// only touched with the GIL held (these conversions call the C API),
// which is its lock; it is leaked, like the scheduler's state, so that no
// array outlives the allocator at exit.
struct ScalarCache {
  static constexpr size_t kSize = 256;
  struct Entry {
    uint64_t bits = 0;
    uint32_t tag = 0;  // 0: empty; else dtype value and kind, plus one
    std::optional<fx::array> value;
  };
  Entry entries[kSize];
};

ScalarCache& scalar_cache() {
  static auto* c = new ScalarCache();
  return *c;
}

template <typename Make>
fx::array cached_scalar(fx::Dtype t, ScalarKind kind, uint64_t bits,
                        Make make) {
  if (fx::in_tracing() || fx::retain_graph()) {
    return make();
  }
  uint32_t tag = ((static_cast<uint32_t>(t.val) << 4) |
                  static_cast<uint32_t>(kind)) + 1;
  uint64_t h = (bits ^ (uint64_t(tag) * 0x9E3779B97F4A7C15ull)) *
               0xBF58476D1CE4E5B9ull;
  auto& e = scalar_cache().entries[(h >> 56) % ScalarCache::kSize];
  if (e.tag == tag && e.bits == bits && e.value) {
    return *e.value;
  }
  fx::array a = make();
  e.tag = tag;
  e.bits = bits;
  e.value = a;
  return a;
}

uint64_t double_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

// Whether `v` (or, when `big`, a value above int64's range) is a value of
// the integer dtype `t`.
bool int_fits(long long v, bool big, fx::Dtype t) {
  if (big) {
    return t == fx::uint64;
  }
  switch (t.val) {
    case fx::Dtype::Val::int8:
      return v >= INT8_MIN && v <= INT8_MAX;
    case fx::Dtype::Val::int16:
      return v >= INT16_MIN && v <= INT16_MAX;
    case fx::Dtype::Val::int32:
      return v >= INT32_MIN && v <= INT32_MAX;
    case fx::Dtype::Val::uint8:
      return v >= 0 && v <= UINT8_MAX;
    case fx::Dtype::Val::uint16:
      return v >= 0 && v <= UINT16_MAX;
    case fx::Dtype::Val::uint32:
      return v >= 0 && v <= static_cast<long long>(UINT32_MAX);
    case fx::Dtype::Val::uint64:
      return v >= 0;
    default:
      return true;  // int64, and non-integer types
  }
}

// A Python int: with `exact`, of dtype `like`; else weak next to `like`
// (or int32/int64/uint64 by value when there is no `like`). A weak int
// that the integer `like` cannot hold raises ValueError (MLX: an int32
// array plus 3000000000 does not silently wrap).
fx::array int_scalar(py::handle h, std::optional<fx::Dtype> like,
                     bool exact = false) {
  if (like && !exact && fx::is_integral(*like)) {
    int ovf = 0;
    long long w = PyLong_AsLongLongAndOverflow(h.ptr(), &ovf);
    if (ovf == 0 && w == -1 && PyErr_Occurred()) {
      throw py::error_already_set();
    }
    if (ovf < 0 || !int_fits(w, ovf > 0, *like)) {
      throw std::invalid_argument(
          "[array] The Python integer " + py::str(h).cast<std::string>() +
          " does not fit in " + fx::dtype_name(*like) +
          ", the dtype of the array it is combined with; make it an array of "
          "a wider dtype first.");
    }
  }
  auto target = [&](fx::Dtype by_value) {
    if (!like) {
      return by_value;
    }
    return exact ? *like : fx::promote_with_scalar(*like, fx::int32);
  };
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow == 0 && v == -1 && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(h.ptr());
    if (!PyErr_Occurred()) {
      return fx::array(static_cast<uint64_t>(u), target(fx::uint64));
    }
    PyErr_Clear();
  }
  if (overflow != 0) {
    throw std::invalid_argument("[array] Python integer " +
                                py::str(h).cast<std::string>() +
                                " is out of the range of 64-bit integers.");
  }
  bool small = v >= INT32_MIN && v <= INT32_MAX;
  fx::Dtype t = target(small ? fx::int32 : fx::int64);
  auto make = [&] { return fx::array(static_cast<int64_t>(v), t); };
  if (like && !exact) {
    return cached_scalar(t, ScalarKind::integer, static_cast<uint64_t>(v),
                         make);
  }
  return make();
}

// ml_dtypes' bfloat16 (what JAX and PyTorch users hand over): NumPy knows
// it only as a 2-byte extension dtype named "bfloat16" (kind 'V'), so it is
// recognised by name. Its bits are bfloat16's, as Fluxion's.
bool is_ml_dtypes_bfloat16(const py::dtype& d) {
  return d.itemsize() == 2 &&
         py::str(d.attr("name")).cast<std::string>() == "bfloat16";
}

fx::Dtype dtype_from_numpy(const py::dtype& d) {
  char kind = d.kind();
  auto size = d.itemsize();
  if (is_ml_dtypes_bfloat16(d)) {
    return fx::bfloat16;
  }
  switch (kind) {
    case 'b':
      return fx::bool_;
    case 'u':
      switch (size) {
        case 1:
          return fx::uint8;
        case 2:
          return fx::uint16;
        case 4:
          return fx::uint32;
        case 8:
          return fx::uint64;
      }
      break;
    case 'i':
      switch (size) {
        case 1:
          return fx::int8;
        case 2:
          return fx::int16;
        case 4:
          return fx::int32;
        case 8:
          return fx::int64;
      }
      break;
    case 'f':
      switch (size) {
        case 2:
          return fx::float16;
        case 4:
          return fx::float32;
        case 8:
          return fx::float64;
      }
      break;
    case 'c':
      return fx::complex64;  // complex128 narrows, as in MLX
  }
  throw std::invalid_argument(
      "[array] Cannot convert a NumPy array of dtype " +
      py::str(static_cast<py::handle>(d)).cast<std::string>() +
      " to an array.");
}

fx::array from_numpy(py::array a, std::optional<fx::Dtype> dtype) {
  fx::Dtype t = dtype_from_numpy(a.dtype());
  if (a.dtype().kind() == 'c' && a.dtype().itemsize() != 8) {
    a = a.attr("astype")("complex64");
  }
  if (!a.dtype().attr("isnative").cast<bool>()) {
    a = a.attr("astype")(a.dtype().attr("newbyteorder")("="));
  }
  a = py::array::ensure(a, py::array::c_style);
  fx::Shape shape;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) > INT32_MAX) {
      int32_overflow(py::int_(a.shape(i)).ptr());  // OverflowError (MLX)
    }
    shape.push_back(static_cast<int32_t>(a.shape(i)));
  }
  size_t nbytes = std::max<size_t>(a.nbytes(), 1);
  void* p = fx::allocator::malloc(nbytes);
  std::memcpy(p, a.data(), a.nbytes());
  fx::array out(p, std::move(shape), t,
                [nbytes](void* q) { fx::allocator::free(q, nbytes); });
  // Issue 11 (MLX semantics): a float64 NumPy array becomes float32 unless
  // a dtype is asked for, as Python floats do.
  if (!dtype && t == fx::float64) {
    return fx::astype(out, fx::float32);
  }
  return dtype && *dtype != t ? fx::astype(out, *dtype) : out;
}

// Nested lists: shape and the widest scalar kind, or the presence of array
// leaves (which are stacked).
struct ListInfo {
  fx::Shape shape;
  int leaf_depth = -1;
  ScalarKind kind = ScalarKind::boolean;
  bool big_int = false;   // an int outside int32
  bool huge_int = false;  // an int above int64's range (uint64)
  bool has_arrays = false;
  bool empty = true;
};

[[noreturn]] void ragged() {
  throw std::invalid_argument(
      "[array] Initialization encountered non-uniform length (ragged nested "
      "sequences are not supported).");
}

void inspect_list(py::handle h, int depth, ListInfo& info) {
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    auto seq = py::reinterpret_borrow<py::sequence>(h);
    auto n = static_cast<int32_t>(py::len(seq));
    if (static_cast<int>(info.shape.size()) == depth) {
      if (info.leaf_depth >= 0 && info.leaf_depth <= depth) {
        ragged();
      }
      info.shape.push_back(n);
    } else if (info.shape[depth] != n) {
      ragged();
    }
    if (n == 0 && info.leaf_depth < 0 &&
        static_cast<int>(info.shape.size()) != depth + 1) {
      ragged();
    }
    for (auto item : seq) {
      inspect_list(item, depth + 1, info);
    }
    return;
  }
  if (info.leaf_depth < 0) {
    if (static_cast<int>(info.shape.size()) != depth) {
      ragged();
    }
    info.leaf_depth = depth;
  } else if (info.leaf_depth != depth) {
    ragged();
  }
  info.empty = false;
  ScalarKind k = scalar_kind(h);
  if (k == ScalarKind::none) {
    if (array_ptr(h) || py::isinstance<py::array>(h) ||
        py::hasattr(h, "__array__")) {
      info.has_arrays = true;
      return;
    }
    throw std::invalid_argument("[array] Invalid type " + type_name(h) +
                                " received in array initialization.");
  }
  if (k == ScalarKind::integer) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
      info.big_int = true;
    }
    info.huge_int |= overflow > 0;
  }
  info.kind = std::max(info.kind, k);
}

template <typename T>
void fill_list(py::handle h, std::vector<T>& out) {
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    for (auto item : py::reinterpret_borrow<py::sequence>(h)) {
      fill_list(item, out);
    }
    return;
  }
  if constexpr (std::is_same_v<T, fx::complex64_t>) {
    Py_complex c = PyComplex_AsCComplex(h.ptr());
    out.emplace_back(static_cast<float>(c.real), static_cast<float>(c.imag));
  } else if constexpr (std::is_same_v<T, double>) {
    out.push_back(PyFloat_AsDouble(h.ptr()));
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    out.push_back(PyLong_AsUnsignedLongLong(h.ptr()));
  } else {
    out.push_back(PyLong_AsLongLong(h.ptr()));
  }
  if (PyErr_Occurred()) {
    throw py::error_already_set();
  }
}

bool has_array_leaves(py::handle h) {
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    for (auto item : py::reinterpret_borrow<py::sequence>(h)) {
      if (has_array_leaves(item)) {
        return true;
      }
    }
    return false;
  }
  return array_ptr(h) || py::isinstance<py::array>(h) ||
         (scalar_kind(h) == ScalarKind::none && py::hasattr(h, "__array__"));
}

// A list holding arrays (possibly next to nested lists and scalars, as
// MLX allows): each item becomes an array and the items, which must share a
// shape, are stacked (dtypes promote; the arrays stay in the graph).
fx::array from_mixed_list(py::handle h) {
  std::vector<fx::array> parts;
  for (auto item : py::reinterpret_borrow<py::sequence>(h)) {
    if (PyList_Check(item.ptr()) || PyTuple_Check(item.ptr())) {
      parts.push_back(has_array_leaves(item) ? from_mixed_list(item)
                                             : to_array(item));
    } else {
      parts.push_back(to_array(item));
    }
  }
  if (parts.empty()) {
    return fx::zeros({0}, fx::float32);
  }
  for (auto& p : parts) {
    if (p.shape() != parts[0].shape()) {
      ragged();
    }
  }
  return fx::stack(parts, 0);
}

fx::array from_list(py::handle h, std::optional<fx::Dtype> dtype) {
  if (has_array_leaves(h)) {
    fx::array out = from_mixed_list(h);
    return dtype ? fx::astype(out, *dtype) : out;
  }
  ListInfo info;
  inspect_list(h, 0, info);
  using fx::complex64_t;
  switch (info.empty ? ScalarKind::floating : info.kind) {
    case ScalarKind::complex: {
      std::vector<complex64_t> v;
      fill_list(h, v);
      return fx::array(v.begin(), info.shape, dtype.value_or(fx::complex64));
    }
    case ScalarKind::floating: {
      std::vector<double> v;
      fill_list(h, v);
      return fx::array(v.begin(), info.shape, dtype.value_or(fx::float32));
    }
    default: {
      if (info.huge_int) {
        std::vector<uint64_t> v;
        fill_list(h, v);
        return fx::array(v.begin(), info.shape, dtype.value_or(fx::uint64));
      }
      std::vector<int64_t> v;
      fill_list(h, v);
      fx::Dtype t = info.kind == ScalarKind::boolean ? fx::bool_
                    : info.big_int                   ? fx::int64
                                                     : fx::int32;
      return fx::array(v.begin(), info.shape, dtype.value_or(t));
    }
  }
}

}  // namespace


fx::array scalar_to_array(py::handle h, ScalarKind kind,
                          std::optional<fx::Dtype> like) {
  switch (kind) {
    case ScalarKind::boolean: {
      bool v = h.ptr() == Py_True;
      fx::Dtype t = like.value_or(fx::bool_);
      if (!like) {
        return fx::array(v, t);
      }
      return cached_scalar(t, kind, v, [&] { return fx::array(v, t); });
    }
    case ScalarKind::integer:
      return int_scalar(h, like);
    case ScalarKind::floating: {
      double v = PyFloat_AsDouble(h.ptr());
      if (!like) {
        return fx::array(v, fx::float32);
      }
      fx::Dtype t = fx::promote_with_scalar(*like, fx::float32);
      return cached_scalar(t, kind, double_bits(v),
                           [&] { return fx::array(v, t); });
    }
    case ScalarKind::complex: {
      Py_complex c = PyComplex_AsCComplex(h.ptr());
      return fx::array(fx::complex64_t(static_cast<float>(c.real),
                                       static_cast<float>(c.imag)),
                       fx::complex64);
    }
    default:
      throw std::invalid_argument("[array] " + type_name(h) +
                                  " is not a Python scalar.");
  }
}

fx::array to_array(py::handle h, std::optional<fx::Dtype> dtype) {
  if (auto* p = array_ptr(h)) {
    return dtype ? fx::astype(*p, *dtype) : *p;
  }
  ScalarKind k = scalar_kind(h);
  if (k != ScalarKind::none) {
    if (!dtype) {
      return scalar_to_array(h, k, std::nullopt);
    }
    // Built in the requested type directly (no conversion node).
    switch (k) {
      case ScalarKind::boolean:
        return fx::array(h.ptr() == Py_True, *dtype);
      case ScalarKind::integer:
        return int_scalar(h, *dtype, true);
      case ScalarKind::floating:
        return fx::array(PyFloat_AsDouble(h.ptr()), *dtype);
      default: {
        Py_complex c = PyComplex_AsCComplex(h.ptr());
        return fx::array(fx::complex64_t(static_cast<float>(c.real),
                                         static_cast<float>(c.imag)),
                         *dtype);
      }
    }
  }
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    return from_list(h, dtype);
  }
  if (py::isinstance<py::array>(h)) {
    return from_numpy(py::reinterpret_borrow<py::array>(h), dtype);
  }
  if (PyBytes_Check(h.ptr()) || PyByteArray_Check(h.ptr())) {
    // Raw bytes are uint8 values (MLX).
    auto np = py::module_::import("numpy");
    return from_numpy(np.attr("frombuffer")(h, "dtype"_a = "uint8"), dtype);
  }
  if (py::hasattr(h, "__mlx_array__")) {
    // MLX's protocol for objects with an array form (mx.ArrayLike).
    py::object a = h.attr("__mlx_array__")();
    if (!array_ptr(a)) {
      throw std::invalid_argument(
          "[array] __mlx_array__ of an object of type " + type_name(h) +
          " returned " + type_name(a) + ", not an array.");
    }
    return dtype ? fx::astype(*array_ptr(a), *dtype) : *array_ptr(a);
  }
  if (py::hasattr(h, "__dlpack__")) {
    // DLPack first (as MLX's nanobind caster): a PyTorch bfloat16 tensor
    // has no NumPy form. Copied, with MLX's float64 -> float32.
    if (auto a = array_from_dlpack(h)) {
      return dtype && *dtype != a->dtype() ? fx::astype(*a, *dtype) : *a;
    }
  }
  if (!PyUnicode_Check(h.ptr()) && !PyBytes_Check(h.ptr()) &&
      (py::hasattr(h, "__array__") || PyObject_CheckBuffer(h.ptr()))) {
    auto np = py::module_::import("numpy");
    return from_numpy(np.attr("asarray")(h), dtype);
  }
  throw std::invalid_argument("[array] Cannot convert an object of type " +
                              type_name(h) + " to an array.");
}

bool is_array_like(py::handle h) {
  return array_ptr(h) || scalar_kind(h) != ScalarKind::none ||
         PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()) ||
         py::isinstance<py::array>(h) ||
         (!PyUnicode_Check(h.ptr()) && !PyBytes_Check(h.ptr()) &&
          (py::hasattr(h, "__array__") || py::hasattr(h, "__mlx_array__")));
}

std::pair<fx::array, fx::array> to_arrays(py::handle a, py::handle b) {
  fx::array* pa = array_ptr(a);
  fx::array* pb = array_ptr(b);
  if (pa && pb) {
    return {*pa, *pb};
  }
  if (pa) {
    return {*pa, to_array_like(b, *pa)};
  }
  if (pb) {
    return {to_array_like(a, *pb), *pb};
  }
  // Two scalars (or array-likes): like MLX, each is converted on its own.
  // A Python scalar is still weak next to a NumPy array or list.
  ScalarKind ka = scalar_kind(a), kb = scalar_kind(b);
  if (ka != ScalarKind::none && kb == ScalarKind::none) {
    fx::array y = to_array(b);
    return {scalar_to_array(a, ka, y.dtype()), y};
  }
  if (kb != ScalarKind::none && ka == ScalarKind::none) {
    fx::array x = to_array(a);
    return {x, scalar_to_array(b, kb, x.dtype())};
  }
  return {to_array(a), to_array(b)};
}

std::vector<fx::array> array_or_arrays(py::handle h, const char* op,
                                       const char* what) {
  if (auto* p = array_ptr(h)) {
    return {*p};
  }
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    throw py::type_error(std::string("[") + op + "] " + what +
                         " must be an array or a list of arrays; got " +
                         Py_TYPE(h.ptr())->tp_name + ".");
  }
  std::vector<fx::array> out;
  for (auto item : h) {
    auto* p = array_ptr(item);
    out.push_back(p ? *p : to_array(item));
  }
  return out;
}

void flatten_arrays(py::handle tree, std::vector<fx::array>& out, bool strict) {
  if (auto* p = array_ptr(tree)) {
    out.push_back(*p);
  } else if (PyList_Check(tree.ptr()) || PyTuple_Check(tree.ptr())) {
    for (auto item : py::reinterpret_borrow<py::sequence>(tree)) {
      flatten_arrays(item, out, strict);
    }
  } else if (PyDict_Check(tree.ptr())) {
    for (auto kv : py::reinterpret_borrow<py::dict>(tree)) {
      flatten_arrays(kv.second, out, strict);
    }
  } else if (strict) {
    throw std::invalid_argument(
        "[tree_flatten] The argument should contain only arrays; got a " +
        type_name(tree) + ".");
  }
}

std::vector<fx::array> arrays_of(const py::args& args) {
  std::vector<fx::array> out;
  for (auto a : args) {
    flatten_arrays(a, out);
  }
  return out;
}

void eval_nogil(const fx::array& a) {
  // A computed node (fluxion/eager.h) still goes through eval, which
  // detaches its graph, as reading an MLX array evaluates it.
  if (a.status() == fx::array::Status::available && !a.is_computed_node()) {
    return;
  }
  fx::array copy = a;
  py::gil_scoped_release nogil;
  copy.eval();
}

const char* numpy_name(fx::Dtype t) {
  return t == fx::bfloat16 ? nullptr : fx::dtype_name(t);
}

py::object to_numpy(const fx::array& in) {
  fx::array a = in.dtype() == fx::bfloat16 ? fx::astype(in, fx::float32) : in;
  eval_nogil(a);
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  std::vector<py::ssize_t> strides;
  bool broadcast = false;
  for (int i = 0; i < a.ndim(); ++i) {
    strides.push_back(a.strides()[i] * a.itemsize());
    broadcast |= a.strides()[i] == 0 && a.shape(i) > 1;
  }
  // The capsule owns a handle to the array: the buffer lives as long as
  // the NumPy view.
  auto* keep = new fx::array(a);
  py::capsule base(keep, [](void* p) { delete static_cast<fx::array*>(p); });
  py::array out(py::dtype(numpy_name(a.dtype())), shape, strides, a.raw_data(),
                base);
  if (broadcast) {
    // Several elements alias one slot: writing would surprise.
    out.attr("flags").attr("writeable") = false;
  }
  return out;
}

// numpy.dtype(spec), explaining the one NumPy cannot know by itself: a
// bfloat16 asked for without ml_dtypes installed (NumPy's own error says
// only "data type 'bfloat16' not understood").
py::dtype numpy_dtype_or_explain(py::handle spec, const char* op) {
  auto np = py::module_::import("numpy");
  try {
    return py::reinterpret_borrow<py::dtype>(np.attr("dtype")(spec));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError) ||
        py::str(spec).cast<std::string>().find("bfloat16") ==
            std::string::npos) {
      throw;
    }
    throw py::type_error(
        std::string("[") + op + "] NumPy has no dtype bfloat16 (asked for " +
        py::repr(spec).cast<std::string>() +
        "): it comes from the ml_dtypes package, which is not installed. "
        "Install ml_dtypes, or convert with astype(float32) first.");
  }
}

py::object array_protocol(const fx::array& a, py::object dtype,
                          py::object copy) {
  // copy: True always copies, False never does (and raises where a copy is
  // unavoidable), None copies only when it must (NumPy 2's protocol; NumPy
  // 1 passes only dtype).
  int mode = copy.is_none() ? -1 : copy.cast<bool>();
  bool converts = a.dtype() == fx::bfloat16;
  py::object want;
  if (!dtype.is_none()) {
    want = numpy_dtype_or_explain(dtype, "__array__");
    if (is_ml_dtypes_bfloat16(want)) {
      // ml_dtypes' bfloat16: the bits as they are (a view of a bfloat16
      // array, else of its conversion), no float32 round trip.
      fx::array b = a.dtype() == fx::bfloat16 ? a : fx::astype(a, fx::bfloat16);
      converts = a.dtype() != fx::bfloat16;
      py::object out = to_numpy(fx::view(b, fx::uint16)).attr("view")(want);
      if (mode == 0 && converts) {
        throw std::invalid_argument(
            "[__array__] A NumPy array of dtype bfloat16 from an array of " +
            std::string(fx::dtype_name(a.dtype())) +
            " needs a copy, but copy=False.");
      }
      return mode == 1 && !converts ? out.attr("copy")() : out;
    }
  }
  py::object out = to_numpy(a);
  if (want) {
    if (!want.equal(out.attr("dtype"))) {
      converts = true;
      out = out.attr("astype")(want);
    }
  }
  if (mode == 0 && converts) {
    throw std::invalid_argument(
        "[__array__] A NumPy array of dtype " +
        py::str(out.attr("dtype")).cast<std::string>() + " from an array of " +
        fx::dtype_name(a.dtype()) + " needs a copy, but copy=False.");
  }
  if (mode == 1 && !converts) {
    out = out.attr("copy")();
  }
  return out;
}

namespace {

template <typename T>
py::object scalar_object(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return py::bool_(v);
  } else if constexpr (fx::is_complex_v<T>) {
    return py::reinterpret_steal<py::object>(
        PyComplex_FromDoubles(v.real(), v.imag()));
  } else if constexpr (fx::is_float_v<T>) {
    return py::float_(static_cast<double>(v));
  } else if constexpr (std::is_unsigned_v<T>) {
    return py::reinterpret_steal<py::object>(
        PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(v)));
  } else {
    return py::reinterpret_steal<py::object>(
        PyLong_FromLongLong(static_cast<long long>(v)));
  }
}

template <typename T>
py::object list_level(const fx::array& a, const T* p, int dim) {
  if (dim == a.ndim()) {
    return scalar_object(*p);
  }
  int n = a.shape(dim);
  // Not py::list(n): a list that cannot be allocated (a 0-size array of
  // shape (2^31 - 1, 0) is 2^31 lists) raises MemoryError naming the op,
  // not pybind11's RuntimeError "Could not allocate list object!".
  PyObject* raw = PyList_New(n);
  if (raw == nullptr) {
    PyErr_Clear();
    throw std::bad_alloc();
  }
  auto out = py::reinterpret_steal<py::list>(raw);
  for (int i = 0; i < n; ++i) {
    out[i] = list_level(a, p + i * a.strides()[dim], dim + 1);
  }
  return out;
}

}  // namespace

py::object to_list(const fx::array& a) {
  eval_nogil(a);
  try {
    return fx::dispatch_all(a.dtype(), [&](auto tag) -> py::object {
      using T = typename decltype(tag)::type;
      return list_level(a, a.data<T>(), 0);
    });
  } catch (const std::bad_alloc&) {
    PyErr_Format(PyExc_MemoryError,
                 "[tolist] Out of memory building the list of an array of "
                 "shape %s.",
                 fx::shape_str(a.shape()).c_str());
    throw py::error_already_set();
  }
}

py::object item(const fx::array& a) {
  if (a.size() != 1) {
    throw std::invalid_argument(
        "[item] Only one-element arrays can be converted to Python scalars; "
        "got an array of shape " +
        fx::shape_str(a.shape()) + ".");
  }
  eval_nogil(a);
  return fx::dispatch_all(a.dtype(), [&](auto tag) -> py::object {
    using T = typename decltype(tag)::type;
    return scalar_object(*a.data<T>());
  });
}

}  // namespace fxpy

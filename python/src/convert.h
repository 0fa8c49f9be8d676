// Conversions between Python objects and Fluxion values, shared by every
// binding file: argument casters (streams, axes, shapes), Python scalars and
// nested lists to arrays (with MLX's weak typing of Python scalars), NumPy
// interop and pytree flattening.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fluxion/fluxion.h"
#include "fluxion/ops/common.h"

namespace py = pybind11;
namespace fx = fluxion;
using namespace py::literals;

// Shapes and axis lists are int32 (as in MLX): a Python int outside that
// range raises OverflowError naming it, rather than making the argument
// "incompatible" (issue 11). These replace pybind11's casters for
// std::vector<int>, fx::Shape and their variants with int.
namespace fxpy {
[[noreturn]] void int32_overflow(PyObject* value);
// Raises for an int outside int32 (bools and non-ints are left alone).
void check_int32(PyObject* value);
}  // namespace fxpy

namespace pybind11::detail {
// An `int` parameter takes Python ints and objects with __index__ (NumPy
// integers) only: pybind11's default would also truncate np.float32 and
// other objects with __int__, where MLX raises TypeError.
template <>
class type_caster<int> {
 public:
  bool load(handle src, bool convert) {
    if (!src) {
      return false;
    }
    PyObject* o = src.ptr();
    if (PyFloat_Check(o) || (!PyLong_Check(o) && !PyIndex_Check(o))) {
      return false;
    }
    type_caster<long long> wide;
    if (!wide.load(src, convert)) {
      return false;
    }
    long long v = static_cast<long long>(wide);
    if (v < INT32_MIN || v > INT32_MAX) {
      return false;
    }
    value = static_cast<int>(v);
    return true;
  }
  static handle cast(int src, return_value_policy, handle) {
    return PyLong_FromLong(src);
  }
  PYBIND11_TYPE_CASTER(int, const_name("int"));
};

// Int lists (axes as std::vector<int>, shapes as fx::Shape, whose buffer
// comes from another allocator) and int-or-list variants.
template <typename List>
struct int32_list_caster : list_caster<List, typename List::value_type> {
  bool load(handle src, bool convert) {
    if (isinstance<sequence>(src) && !isinstance<str>(src) &&
        !isinstance<bytes>(src)) {
      for (auto item : reinterpret_borrow<sequence>(src)) {
        fxpy::check_int32(item.ptr());
      }
    }
    return list_caster<List, typename List::value_type>::load(src, convert);
  }
};
template <>
struct type_caster<std::vector<int>> : int32_list_caster<std::vector<int>> {};
template <>
struct type_caster<fx::Shape> : int32_list_caster<fx::Shape> {};

template <typename Variant>
struct int32_variant_caster : variant_caster<Variant> {
  bool load(handle src, bool convert) {
    fxpy::check_int32(src.ptr());
    return variant_caster<Variant>::load(src, convert);
  }
};
template <>
struct type_caster<std::variant<int, std::vector<int>>>
    : int32_variant_caster<std::variant<int, std::vector<int>>> {};
template <>
struct type_caster<std::variant<int, fx::Shape>>
    : int32_variant_caster<std::variant<int, fx::Shape>> {};
}  // namespace pybind11::detail

// `stream=None | Stream | Device | DeviceType`, as every op takes it.
namespace pybind11::detail {
template <>
struct type_caster<fx::StreamOrDevice> {
  PYBIND11_TYPE_CASTER(fx::StreamOrDevice,
                       const_name("Union[None, Stream, Device]"));
  bool load(handle src, bool convert);
  static handle cast(const fx::StreamOrDevice&, return_value_policy, handle) {
    return none().release();
  }
};
}  // namespace pybind11::detail

namespace fxpy {

// `axis=None | int | Sequence[int]`.
using Axes = std::optional<std::variant<int, std::vector<int>>>;
// `shape=int | Sequence[int]`.
using ShapeArg = std::variant<int, fx::Shape>;

inline fx::Shape to_shape(const ShapeArg& s) {
  if (auto* i = std::get_if<int>(&s)) {
    return {*i};
  }
  return std::get<fx::Shape>(s);
}

// `h` as a T, for arguments a binding converts by hand (py::handle
// parameters): an int outside int32 raises OverflowError naming it, any
// other mismatch TypeError "[op] <what> must be <expected>; got <type>."
// rather than pybind11's bare "Unable to cast Python instance" RuntimeError.
[[noreturn]] void bad_argument_type(py::handle h, const char* op,
                                    const char* what, const char* expected);
template <typename T>
T cast_arg(py::handle h, const char* op, const char* what,
           const char* expected) {
  if constexpr (std::is_same_v<T, int>) {
    check_int32(h.ptr());
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (py::isinstance<py::sequence>(h) && !py::isinstance<py::str>(h)) {
      for (auto item : py::reinterpret_borrow<py::sequence>(h)) {
        check_int32(item.ptr());
      }
    }
  }
  if constexpr (std::is_base_of_v<py::object, T>) {
    // pybind11's wrapper types (py::sequence...) raise their own TypeError
    // naming no op.
    if (!py::isinstance<T>(h)) {
      bad_argument_type(h, op, what, expected);
    }
  }
  try {
    return h.cast<T>();
  } catch (const py::cast_error&) {
    bad_argument_type(h, op, what, expected);
  }
}

// Set once the `array` class is registered; used for fast type checks on
// the operator paths.
extern PyTypeObject* array_type;

// A new Python array owning `a`, built without pybind11's type lookups
// (array.cpp); and the current C++ exception set as the Python error the
// registered translators map it to (for code outside pybind11's
// dispatcher: the number slots, the fast methods).
py::object wrap_result(fx::array&& a);
void raise_current_exception();

// The array a Python object wraps, or nullptr if it is not an array.
inline fx::array* array_ptr(py::handle h) {
  if (!h || !PyObject_TypeCheck(h.ptr(), array_type)) {
    return nullptr;
  }
  auto* inst = reinterpret_cast<py::detail::instance*>(h.ptr());
  return inst->get_value_and_holder().value_ptr<fx::array>();
}

enum class ScalarKind { none, boolean, integer, floating, complex };

inline ScalarKind scalar_kind(py::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    return ScalarKind::boolean;
  }
  if (PyLong_Check(o)) {
    return ScalarKind::integer;
  }
  if (PyFloat_Check(o)) {
    return ScalarKind::floating;
  }
  if (PyComplex_Check(o)) {
    return ScalarKind::complex;
  }
  return ScalarKind::none;
}

// A Python scalar as an array. With `like`, the scalar is weak: it takes
// `like`'s dtype when that is of the same kind or wider (x * 2 keeps x's
// dtype), as MLX does; without, ints are int32 (int64 if they do not fit),
// floats float32, complex complex64.
fx::array scalar_to_array(py::handle h, ScalarKind kind,
                          std::optional<fx::Dtype> like);

// A copy of a DLPack producer's elements (not NumPy: PyTorch tensors),
// or nullopt when it cannot export (dlpack.cpp).
std::optional<fx::array> array_from_dlpack(py::handle x);
// Any array-like (array, Python scalar, nested list/tuple, NumPy array or
// scalar, buffer) as an array: MLX's `array(obj, dtype)`. Throws
// std::invalid_argument for anything else.
fx::array to_array(py::handle h, std::optional<fx::Dtype> dtype = {});

// An operand next to an array `like`: Python scalars are weakly typed.
inline fx::array to_array_like(py::handle h, const fx::array& like) {
  if (auto* p = array_ptr(h)) {
    return *p;
  }
  ScalarKind k = scalar_kind(h);
  if (k != ScalarKind::none) {
    return scalar_to_array(h, k, like.dtype());
  }
  return to_array(h);
}

// Both operands of a binary op: a scalar is weak next to an array.
std::pair<fx::array, fx::array> to_arrays(py::handle a, py::handle b);

// mx.ArrayLike (array.cpp): an object whose ``__mlx_array__`` gives its
// array form, as MLX's class of that name.
struct ArrayLike {
  py::object obj;
};

// True for objects `to_array` accepts as an operand of arithmetic.
bool is_array_like(py::handle h);

// An argument MLX documents as "array or sequence of arrays": an array is
// one element (never iterated as a sequence of its rows, which a sequence
// caster would do since arrays have len() and indexing); a list or tuple
// gives its elements, each an array or array-like. Anything else raises
// TypeError "[op] <what> must be an array or a list of arrays; got <type>."
std::vector<fx::array> array_or_arrays(py::handle h, const char* op,
                                       const char* what);

// Arrays in a pytree (lists, tuples, dict values); other leaves ignored
// unless `strict`, when they raise.
void flatten_arrays(py::handle tree, std::vector<fx::array>& out,
                    bool strict = false);
// The arrays of the trees in `args` (flatten_arrays of each).
std::vector<fx::array> arrays_of(const py::args& args);

// Evaluate with the GIL released, so other Python threads run meanwhile.
void eval_nogil(const fx::array& a);

// A NumPy array viewing (or, for bfloat16, converting) the evaluated data of
// `a`; the view keeps `a`'s buffer alive.
py::object to_numpy(const fx::array& a);
// NumPy's __array__(dtype, copy) protocol (NumPy 2 passes copy=).
py::object array_protocol(const fx::array& a, py::object dtype,
                          py::object copy);

// Nested Python lists (or a scalar for 0-d) of the values of `a`.
py::object to_list(const fx::array& a);
py::object item(const fx::array& a);

// The NumPy dtype name of `t` ("float32"); bfloat16 has none.
const char* numpy_name(fx::Dtype t);

}  // namespace fxpy

// Registration functions, one per source file.
void init_dtypes(py::module_& m);
void init_devices(py::module_& m);
void init_memory(py::module_& m);
void init_array(py::module_& m);
void init_array_methods(py::module_& m);
void init_array_fast_methods();
void init_indexing(py::module_& m);
void init_ops_elementwise(py::module_& m);
void init_ops_reduce(py::module_& m);
void init_ops_shape(py::module_& m);
void init_ops_creation(py::module_& m);
void init_ops_indexing(py::module_& m);
void init_ops_linalg(py::module_& m);
void init_ops_custom(py::module_& m);
void init_ops_array(py::module_& m);
void init_ops_sort(py::module_& m);
void init_ops_conv(py::module_& m);
void init_linalg(py::module_& m);
void init_fast(py::module_& m);
void init_fft(py::module_& m);
void init_random(py::module_& m);
void init_transforms(py::module_& m);
void init_compile(py::module_& m);
void init_io(py::module_& m);
void init_quantized(py::module_& m);
void init_distributed(py::module_& m);
void init_ops_compat(py::module_& m);
void init_ops_hadamard(py::module_& m);
void init_ops_layout(py::module_& m);
void init_graph_utils(py::module_& m);
// DLPack: array.__dlpack__/__dlpack_device__ and mx.from_dlpack.
void init_dlpack(py::module_& m, py::class_<fx::array>& cls);

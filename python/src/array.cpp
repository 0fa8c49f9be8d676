// The `array` class: construction, properties, NumPy interop (buffer
// protocol, __array__, DLPack), printing, iteration and the operators.
#include <pybind11/numpy.h>

#include <cstring>
#include <sstream>

#include "python/src/convert.h"

namespace {

using BinaryFn = fx::array (*)(const fx::array&, const fx::array&,
                               fx::StreamOrDevice);

py::object not_implemented() {
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

// Operands that an operator rejects outright (MLX raises ValueError for
// them rather than trying the other operand's reflected method): lists,
// tuples, strings and bytes. Other unknown objects get NotImplemented, so
// their own reflected operators can run.
bool rejected_operand(py::handle b) {
  PyObject* o = b.ptr();
  return PyList_Check(o) || PyTuple_Check(o) || PyUnicode_Check(o) ||
         PyBytes_Check(o);
}

[[noreturn]] void bad_operand(py::handle b) {
  throw std::invalid_argument(
      std::string("[array] Cannot use an operand of type ") +
      Py_TYPE(b.ptr())->tp_name +
      " with an array: operators take arrays and scalars (convert with "
      "mx.array first).");
}

// A result as a Python array. py::cast would look the C++ type up in
// pybind11's registry (a hash of the mangled name) twice per call, and the
// result's address among the registered instances once; the instance is
// built here as class_::init_instance builds it for a moved value (owned,
// its unique_ptr holder constructed, the simple layout that
// instance::allocate_layout picks for a type with one pybind11 base and a
// one-pointer holder), without allocate_layout's type lookup, and is not
// registered: pybind11 looks registered instances up only to hand out the
// existing Python object of a C++ pointer it returns by reference, and no
// binding returns an array by reference (each result is a fresh handle
// owned by its Python object). An unregistered instance is what
// pybind11_object_dealloc expects to skip, and array_dealloc's fast path
// below handles exactly this layout. Both cut a tiny op's cost (callgrind:
// the registry's insert and erase with their malloc, get_internals and
// all_type_info were ~20% of the binding's instructions).
using ArrayHolder = std::unique_ptr<fx::array>;  // class_<fx::array>'s holder

bool simple_array_layout() {
  static const bool simple = [] {
    auto* ti = py::detail::get_type_info(typeid(fx::array));
    return ti != nullptr &&
           ti->holder_size_in_ptrs <=
               py::detail::instance_simple_holder_in_ptrs() &&
           py::detail::all_type_info(ti->type).size() == 1;
  }();
  return simple;
}

py::object wrap(fx::array&& a) {
  static const py::detail::type_info* ti =
      py::detail::get_type_info(typeid(fx::array));
  ArrayHolder value(new fx::array(std::move(a)));
  PyObject* obj;
  if (simple_array_layout()) [[likely]] {
    obj = ti->type->tp_alloc(ti->type, 0);  // zeroed; holds the type
    if (obj == nullptr) {
      throw py::error_already_set();
    }
    auto* inst = reinterpret_cast<py::detail::instance*>(obj);
    inst->simple_layout = true;
    inst->owned = true;
  } else {
    obj = py::detail::make_new_instance(ti->type);
    if (obj == nullptr) {
      throw py::error_already_set();
    }
    reinterpret_cast<py::detail::instance*>(obj)->owned = true;
  }
  auto* inst = reinterpret_cast<py::detail::instance*>(obj);
  auto v_h = inst->get_value_and_holder(ti);
  v_h.value_ptr() = value.get();
  new (std::addressof(v_h.holder<ArrayHolder>())) ArrayHolder(std::move(value));
  v_h.set_holder_constructed();
  return py::reinterpret_steal<py::object>(obj);
}

// The type's tp_dealloc: an array built by wrap (exactly of this type, the
// simple layout, not registered, no weak references or kept-alive
// patients) is released directly, as pybind11_object_dealloc would after
// looking its internals up; anything else goes to pybind11's.
destructor pybind_array_dealloc = nullptr;

void array_dealloc(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (type != fxpy::array_type || !inst->simple_layout ||
      inst->simple_instance_registered || !inst->simple_holder_constructed ||
      inst->weakrefs != nullptr || inst->has_patients) {
    pybind_array_dealloc(self);
    return;
  }
  {
    // As class_::dealloc: a destructor must not clobber a pending error
    // (dropping an array may release a NumPy buffer, which runs Python).
    py::error_scope scope;
    py::detail::value_and_holder v_h(inst, nullptr, 0, 0);
    v_h.holder<ArrayHolder>().~ArrayHolder();
    v_h.set_holder_constructed(false);
    v_h.value_ptr() = nullptr;
  }
  type->tp_free(self);
  Py_DECREF(type);
}

// The operator paths are the hottest bindings (a chain of tiny adds is
// bounded by them): array-array first, without building py::objects.
template <BinaryFn Op>
py::object binary_op(const fx::array& a, py::handle b) {
  if (auto* pb = fxpy::array_ptr(b)) {
    return wrap(Op(a, *pb, {}));
  }
  if (rejected_operand(b)) {
    bad_operand(b);
  }
  if (!fxpy::is_array_like(b)) {
    return not_implemented();
  }
  return wrap(Op(a, fxpy::to_array_like(b, a), {}));
}

template <BinaryFn Op>
py::object reflected_op(const fx::array& a, py::handle b) {
  if (rejected_operand(b)) {
    bad_operand(b);
  }
  if (!fxpy::is_array_like(b)) {
    return not_implemented();
  }
  return wrap(Op(fxpy::to_array_like(b, a), a, {}));
}

// `==` and `!=` with anything that is not an array, a scalar or a NumPy
// array are plain (in)equality of objects: False and True (MLX).
template <BinaryFn Op, bool IsEq>
py::object equality_op(const fx::array& a, py::handle b) {
  if (auto* pb = fxpy::array_ptr(b)) {
    return py::cast(Op(a, *pb, {}));
  }
  if (rejected_operand(b) || !fxpy::is_array_like(b)) {
    return py::bool_(!IsEq);
  }
  return py::cast(Op(a, fxpy::to_array_like(b, a), {}));
}

// MLX arrays are immutable: `x += y` rebinds the Python object to a new
// array (other Python references to the same object see the new value).
// The result must keep x's dtype (MLX): `a /= 1` on integers raises.
template <BinaryFn Op>
py::object inplace_op(py::object self, py::handle b) {
  fx::array& a = *fxpy::array_ptr(self);
  fx::array out(0.0f);
  if (auto* pb = fxpy::array_ptr(b)) {
    out = Op(a, *pb, {});
  } else {
    if (rejected_operand(b)) {
      bad_operand(b);
    }
    if (!fxpy::is_array_like(b)) {
      return not_implemented();
    }
    out = Op(a, fxpy::to_array_like(b, a), {});
  }
  if (out.dtype() != a.dtype()) {
    throw std::invalid_argument(
        std::string("[array] An in-place operation on an array of dtype ") +
        fx::dtype_name(a.dtype()) + " would give dtype " +
        fx::dtype_name(out.dtype()) +
        "; in-place results must keep the array's dtype.");
  }
  a = out;
  return self;
}

// The number slots themselves (issue 18): `x + 1.0` through pybind11's
// `__add__` costs a method lookup, an argument tuple, the dispatcher's
// vectors and its overload loop. These slots run binary_op/reflected_op
// directly: the left operand's slot for `x + y`, the right one's for
// `1.0 + x` (as the __r*__ methods). The dunder methods stay for explicit
// calls (x.__add__(y)). Errors go through the registered translators, as
// pybind11's dispatcher would send them.
void translate_current_exception() {
  auto& translators =
      py::detail::get_internals().registered_exception_translators;
  std::exception_ptr last = std::current_exception();
  for (auto& t : translators) {
    try {
      t(last);
      return;
    } catch (...) {
      last = std::current_exception();
    }
  }
  PyErr_SetString(PyExc_SystemError,
                  "[array] An exception escaped the exception translators.");
}

template <BinaryFn Op>
PyObject* number_slot(PyObject* a, PyObject* b) {
  try {
    if (auto* pa = fxpy::array_ptr(a)) {
      return binary_op<Op>(*pa, b).release().ptr();
    }
    if (auto* pb = fxpy::array_ptr(b)) {
      return reflected_op<Op>(*pb, a).release().ptr();
    }
    Py_INCREF(Py_NotImplemented);
    return Py_NotImplemented;
  } catch (...) {
    translate_current_exception();
    return nullptr;
  }
}

template <BinaryFn Op>
PyObject* power_slot(PyObject* a, PyObject* b, PyObject* mod) {
  if (mod != Py_None) {
    Py_INCREF(Py_NotImplemented);
    return Py_NotImplemented;
  }
  return number_slot<Op>(a, b);
}

fx::array matmul_op(const fx::array& a, const fx::array& b,
                    fx::StreamOrDevice s) {
  return fx::matmul(a, b, s);
}

fx::array checked_bitwise(const fx::array& a, const fx::array& b,
                          fx::array (*op)(const fx::array&, const fx::array&,
                                          fx::StreamOrDevice),
                          const char* name) {
  if (fx::is_inexact(a.dtype()) || fx::is_inexact(b.dtype())) {
    throw std::invalid_argument(std::string("[") + name +
                                "] Floating point types are not allowed; got " +
                                fx::dtype_name(a.dtype()) + " and " +
                                fx::dtype_name(b.dtype()) + ".");
  }
  return op(a, b, {});
}

#define FLUXION_CHECKED_BITWISE(NAME)                         \
  fx::array NAME##_op(const fx::array& a, const fx::array& b, \
                      fx::StreamOrDevice) {                   \
    return checked_bitwise(a, b, &fx::NAME, #NAME);           \
  }
FLUXION_CHECKED_BITWISE(bitwise_and)
FLUXION_CHECKED_BITWISE(bitwise_or)
FLUXION_CHECKED_BITWISE(bitwise_xor)
FLUXION_CHECKED_BITWISE(left_shift)
FLUXION_CHECKED_BITWISE(right_shift)
#undef FLUXION_CHECKED_BITWISE

// --- Buffer protocol ---

const char* buffer_format(fx::Dtype t) {
  switch (t.val) {
    case fx::Dtype::Val::bool_:
      return "?";
    case fx::Dtype::Val::uint8:
      return "B";
    case fx::Dtype::Val::uint16:
      return "H";
    case fx::Dtype::Val::uint32:
      return "I";
    case fx::Dtype::Val::uint64:
      return "Q";
    case fx::Dtype::Val::int8:
      return "b";
    case fx::Dtype::Val::int16:
      return "h";
    case fx::Dtype::Val::int32:
      return "i";
    case fx::Dtype::Val::int64:
      return "q";
    case fx::Dtype::Val::float16:
      return "e";
    case fx::Dtype::Val::float32:
      return "f";
    case fx::Dtype::Val::float64:
      return "d";
    case fx::Dtype::Val::complex64:
      return "Zf";
    default:
      // bfloat16 has no PEP 3118 code: the buffer is exposed under this
      // name (MLX), so memoryview works and NumPy refuses it by name.
      return "bfloat16";
  }
}

// What a Py_buffer points into: a handle keeping the data alive even if the
// Python object is later rebound (x[...] = v), plus shape/strides storage.
struct BufferHold {
  fx::array a;
  std::vector<Py_ssize_t> shape, strides;
};

bool is_c_contiguous(const fx::array& a) {
  int64_t expected = 1;
  for (int i = a.ndim() - 1; i >= 0; --i) {
    if (a.shape(i) != 1 && a.strides()[i] != expected) {
      return false;
    }
    expected *= a.shape(i);
  }
  return true;
}

bool is_f_contiguous(const fx::array& a) {
  int64_t expected = 1;
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) != 1 && a.strides()[i] != expected) {
      return false;
    }
    expected *= a.shape(i);
  }
  return true;
}

int array_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  fx::array* p = fxpy::array_ptr(obj);
  if (!p) {
    PyErr_SetString(PyExc_BufferError, "[array] Not an array.");
    return -1;
  }
  const char* fmt = buffer_format(p->dtype());
  try {
    fxpy::eval_nogil(*p);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
  auto* hold = new BufferHold{*p, {}, {}};
  const fx::array& a = hold->a;
  bool c = is_c_contiguous(a);
  const char* err = nullptr;
  if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c) {
    err = "[array] The array is not C-contiguous.";
  } else if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS &&
             !is_f_contiguous(a)) {
    err = "[array] The array is not Fortran-contiguous.";
  } else if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c &&
             !is_f_contiguous(a)) {
    err = "[array] The array is not contiguous.";
  } else if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c) {
    err = "[array] The array is a strided view; request strides.";
  }
  if (err) {
    delete hold;
    PyErr_SetString(PyExc_BufferError, err);
    return -1;
  }
  // Several elements of a broadcast view alias one slot: read-only.
  bool broadcast = false;
  for (int i = 0; i < a.ndim(); ++i) {
    hold->shape.push_back(a.shape(i));
    hold->strides.push_back(a.strides()[i] * a.itemsize());
    broadcast |= a.strides()[i] == 0 && a.shape(i) > 1;
  }
  if (broadcast && (flags & PyBUF_WRITABLE)) {
    delete hold;
    PyErr_SetString(PyExc_BufferError,
                    "[array] A broadcast view cannot be written to.");
    return -1;
  }
  view->buf = a.raw_data();
  view->obj = obj;
  Py_INCREF(obj);
  view->len = static_cast<Py_ssize_t>(a.nbytes());
  view->readonly = broadcast ? 1 : 0;
  view->itemsize = static_cast<Py_ssize_t>(a.itemsize());
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(fmt) : nullptr;
  view->ndim = a.ndim();
  view->shape = (flags & PyBUF_ND) ? hold->shape.data() : nullptr;
  view->strides =
      (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? hold->strides.data() : nullptr;
  view->suboffsets = nullptr;
  view->internal = hold;
  return 0;
}

void array_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferHold*>(view->internal);
}

// --- Iteration over axis 0 ---

struct ArrayIterator {
  fx::array a;
  int index = 0;
};

fx::array row(const fx::array& a, int i) {
  fx::Shape start(a.ndim(), 0), stop = a.shape();
  start[0] = i;
  stop[0] = i + 1;
  return fx::squeeze(fx::slice(a, start, stop), 0);
}

std::string repr(const fx::array& a) {
  fxpy::eval_nogil(a);
  std::ostringstream os;
  os << a;
  return os.str();
}

}  // namespace

namespace fxpy {
py::object wrap_result(fx::array&& a) { return wrap(std::move(a)); }
void raise_current_exception() { translate_current_exception(); }
}  // namespace fxpy

void init_array(py::module_& m) {
  py::class_<fx::array> cls(m, "array", py::buffer_protocol(),
                            "A lazy n-dimensional array.");
  fxpy::array_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  // pybind11's buffer slots hold no reference to the data itself; ours keep
  // the array alive for as long as the buffer is exported.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = array_getbuffer;
  heap->as_buffer.bf_releasebuffer = array_releasebuffer;

  // MLX's name for the iterator over an array's first axis.
  py::class_<ArrayIterator>(m, "ArrayIterator",
                            "An iterator over the first axis of an array.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](ArrayIterator& it) {
        if (it.index >= it.a.shape(0)) {
          throw py::stop_iteration();
        }
        return row(it.a, it.index++);
      });

  cls.def(py::init([](py::handle val, std::optional<fx::Dtype> dtype) {
            return fxpy::to_array(val, dtype);
          }),
          "val"_a, "dtype"_a = py::none(),
          "An array from a scalar, a (nested) list or tuple, a NumPy array "
          "or another array.");
  // Any array-like is accepted where an array is expected.
  py::implicitly_convertible<py::object, fx::array>();

  // MLX's ArrayLike: a wrapper of any object with an ``__mlx_array__``
  // method (its array form); ``mx.array(obj)`` and every op accept such
  // objects directly too (fxpy::to_array).
  py::class_<fxpy::ArrayLike>(m, "ArrayLike",
                              "Any Python object with an ``__mlx_array__`` "
                              "method that returns an array.")
      .def(py::init([](py::object obj) { return fxpy::ArrayLike{obj}; }),
           "obj"_a)
      .def_readonly("obj", &fxpy::ArrayLike::obj)
      .def("__mlx_array__", [](const fxpy::ArrayLike& a) {
        return fxpy::to_array(a.obj);
      });

  cls.def_property_readonly("shape",
                            [](const fx::array& a) {
                              py::tuple t(a.ndim());
                              for (int i = 0; i < a.ndim(); ++i) {
                                t[i] = a.shape(i);
                              }
                              return t;
                            },
      R"doc(The size of each dimension, as a tuple of ints.
)doc")
      .def_property_readonly("ndim", &fx::array::ndim,
      R"doc(The number of dimensions.
)doc")
      .def_property_readonly("size", &fx::array::size,
      R"doc(The number of elements (the product of :attr:`shape`).
)doc")
      .def_property_readonly("itemsize", &fx::array::itemsize,
      R"doc(The size of one element in bytes.
)doc")
      .def_property_readonly("nbytes", &fx::array::nbytes,
      R"doc(The size of the elements in bytes (``size * itemsize``).
)doc")
      .def_property_readonly("dtype", &fx::array::dtype,
      R"doc(The array's element type, a :class:`Dtype`.
)doc")
      .def_property_readonly(
          "T", [](const fx::array& a) { return fx::transpose(a); },
      R"doc(The array with its axes reversed: ``transpose(x)``.
)doc")
      .def_property_readonly("real",
                             [](const fx::array& a) { return fx::real(a); },
      R"doc(The real part of each element (the array itself for real dtypes).
)doc")
      .def_property_readonly("imag",
                             [](const fx::array& a) { return fx::imag(a); },
      R"doc(The imaginary part of each element (zeros for real dtypes).
)doc")
      .def("item", &fxpy::item,
      R"doc(The value of a one-element array as a Python scalar.

Evaluates the array first.

Returns:
    bool, int, float or complex: The element.

Example:
    >>> mx.array([[2.5]]).item()
    2.5
)doc")
      .def("tolist", &fxpy::to_list,
      R"doc(The values as nested Python lists (evaluates the array first).

Returns:
    list or scalar: Lists nested ``ndim`` deep; a scalar for a 0-d
    array.

Example:
    >>> mx.arange(4).reshape(2, 2).tolist()
    [[0, 1], [2, 3]]
)doc")
      .def("__array__", &fxpy::array_protocol, "dtype"_a = py::none(),
           "copy"_a = py::none(),
           "A NumPy view of the evaluated array (copy=True: a copy; "
           "copy=False: raises if a copy would be needed).")
      .def("__repr__", &repr)
      .def("__str__", &repr)
      .def(
          "__format__",
          [](const fx::array& a, const std::string& spec) -> py::object {
            if (spec.empty()) {
              return py::str(repr(a));
            }
            // A spec formats the value of a 0-d array, as a Python scalar.
            if (a.ndim() != 0) {
              throw py::type_error(
                  "[array] Format specs apply to 0-d arrays only; got an "
                  "array of " +
                  std::to_string(a.ndim()) + " dimensions and spec '" + spec +
                  "'.");
            }
            return py::module_::import("builtins")
                .attr("format")(fxpy::item(a), spec);
          },
          "spec"_a)
      .def("__len__",
           [](const fx::array& a) -> size_t {
             if (a.ndim() == 0) {
               throw py::type_error("len() of a 0-d array.");
             }
             return a.shape(0);
           })
      .def("__iter__",
           [](const fx::array& a) {
             if (a.ndim() == 0) {
               throw py::type_error("Iteration over a 0-d array.");
             }
             return ArrayIterator{a, 0};
           })
      .def("__bool__",
           [](const fx::array& a) {
             if (a.size() != 1) {
               throw std::invalid_argument(
                   "[array] The truth value of an array with " +
                   std::to_string(a.size()) +
                   " elements is ambiguous; use any() or all().");
             }
             return py::bool_(fxpy::item(a)).cast<bool>();
           })
      .def("__int__",
           [](const fx::array& a) { return py::int_(fxpy::item(a)); })
      .def("__float__",
           [](const fx::array& a) { return py::float_(fxpy::item(a)); })
      .def("__complex__",
           [](const fx::array& a) {
             return py::module_::import("builtins")
                 .attr("complex")(fxpy::item(a));
           })
      .def("__hash__",
           [](const fx::array& a) { return static_cast<Py_ssize_t>(a.id()); })
      .def("__copy__", [](const fx::array& a) { return a; })
      .def(
          "__deepcopy__",
          [](const fx::array& a, py::handle) { return fx::copy(a); }, "memo"_a)
      .def(py::pickle(
          [](const fx::array& a) {
            fx::Dtype t = a.dtype();
            return py::make_tuple(
                py::module_::import("numpy").attr("array")(fxpy::to_numpy(a)),
                t);
          },
          [](py::tuple state) {
            return fxpy::to_array(state[0], state[1].cast<fx::Dtype>());
          }));

  // Arithmetic, comparisons and bitwise operators.
#define FLUXION_BINARY(NAME, FN)                                  \
  cls.def("__" NAME "__", &binary_op<FN>, py::is_operator());     \
  cls.def("__r" NAME "__", &reflected_op<FN>, py::is_operator()); \
  cls.def("__i" NAME "__", &inplace_op<FN>, py::is_operator());
  FLUXION_BINARY("add", fx::add)
  FLUXION_BINARY("sub", fx::subtract)
  FLUXION_BINARY("mul", fx::multiply)
  FLUXION_BINARY("truediv", fx::divide)
  FLUXION_BINARY("floordiv", fx::floor_divide)
  FLUXION_BINARY("mod", fx::remainder)
  FLUXION_BINARY("pow", fx::power)
  FLUXION_BINARY("matmul", matmul_op)
  FLUXION_BINARY("and", bitwise_and_op)
  FLUXION_BINARY("or", bitwise_or_op)
  FLUXION_BINARY("xor", bitwise_xor_op)
  FLUXION_BINARY("lshift", left_shift_op)
  FLUXION_BINARY("rshift", right_shift_op)
#undef FLUXION_BINARY
  cls.def("__eq__", &equality_op<fx::equal, true>, py::is_operator())
      .def("__ne__", &equality_op<fx::not_equal, false>, py::is_operator())
      .def("__lt__", &binary_op<fx::less>, py::is_operator())
      .def("__le__", &binary_op<fx::less_equal>, py::is_operator())
      .def("__gt__", &binary_op<fx::greater>, py::is_operator())
      .def("__ge__", &binary_op<fx::greater_equal>, py::is_operator())
      .def("__divmod__",
           [](const fx::array& a, py::handle b) -> py::object {
             if (!fxpy::is_array_like(b)) {
               return not_implemented();
             }
             fx::array y = fxpy::to_array_like(b, a);
             auto qr = fx::divmod(a, y);
             return py::make_tuple(qr[0], qr[1]);
           })
      .def("__neg__", [](const fx::array& a) { return fx::negative(a); })
      .def("__pos__", [](const fx::array& a) { return a; })
      .def("__abs__", [](const fx::array& a) { return fx::abs(a); })
      .def("__invert__", [](const fx::array& a) { return ~a; })
      .def(
          "__round__",
          [](const fx::array& a, int decimals) {
            return fx::round(a, decimals);
          },
          "ndigits"_a = 0);
  init_dlpack(m, cls);
  // Set last: defining a dunder method resets its slot to the generic one.
  PyNumberMethods& num = heap->as_number;
  num.nb_add = &number_slot<fx::add>;
  num.nb_subtract = &number_slot<fx::subtract>;
  num.nb_multiply = &number_slot<fx::multiply>;
  num.nb_true_divide = &number_slot<fx::divide>;
  num.nb_floor_divide = &number_slot<fx::floor_divide>;
  num.nb_remainder = &number_slot<fx::remainder>;
  num.nb_power = &power_slot<fx::power>;
  num.nb_matrix_multiply = &number_slot<matmul_op>;
  num.nb_and = &number_slot<bitwise_and_op>;
  num.nb_or = &number_slot<bitwise_or_op>;
  num.nb_xor = &number_slot<bitwise_xor_op>;
  num.nb_lshift = &number_slot<left_shift_op>;
  num.nb_rshift = &number_slot<right_shift_op>;
  pybind_array_dealloc = fxpy::array_type->tp_dealloc;
  fxpy::array_type->tp_dealloc = &array_dealloc;
  PyType_Modified(fxpy::array_type);
}

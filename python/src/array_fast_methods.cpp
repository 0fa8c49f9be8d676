// The methods that inner loops call (x.sum(), x.max(), ..., x.reshape(...),
// x.T) as CPython vectorcall callables (issue 18). Through pybind11 every
// call packs its arguments into a tuple and its keywords into a dict and
// walks the overload list, trying conversions; here the common forms are
// read straight from the argument vector: no Python object is made but the
// result. Anything else (a stream, other argument types, a wrong call) is
// handed to the pybind11 method replaced, so behaviour, errors and
// messages stay the same, and so does the docstring (help() reads it, and
// tests/python/test_stubs.py checks python/fluxion/core.pyi against it).
#include "python/src/convert.h"
#include "python/src/ops_common.h"

namespace {

// An int argument that fits in int (the axes and dims of these calls);
// false for anything else, bool included (MLX refuses bools there).
bool small_int(PyObject* o, int& v) {
  if (!PyLong_CheckExact(o)) {
    return false;
  }
  int overflow = 0;
  long x = PyLong_AsLongAndOverflow(o, &overflow);
  if (overflow != 0 || x < INT32_MIN || x > INT32_MAX) {
    PyErr_Clear();
    return false;
  }
  v = static_cast<int>(x);
  return true;
}

// A tuple or list of such ints.
bool int_sequence(PyObject* o, std::vector<int>& out) {
  if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o)) {
    return false;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!small_int(items[i], out[i])) {
      return false;
    }
  }
  return true;
}

// The pybind11 method a fast one replaced, called with the same arguments.
PyObject* call_original(PyObject* original, PyObject* self,
                        PyObject* const* args, Py_ssize_t n,
                        PyObject* kwnames) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  std::vector<PyObject*> all(static_cast<size_t>(1 + n + nkw));
  all[0] = self;
  for (Py_ssize_t i = 0; i < n + nkw; ++i) {
    all[1 + i] = args[i];
  }
  return PyObject_Vectorcall(original, all.data(), 1 + n, kwnames);
}

// Keyword `name` of a call (interned strings compare by identity first).
bool is_kw(PyObject* kw, const char* name) {
  return PyUnicode_CompareWithASCIIString(kw, name) == 0;
}

template <auto All, auto Many>
struct Reduce {
  static inline PyObject* original = nullptr;

  // x.NAME(axis=None, keepdims=False): axis an int or a sequence of ints.
  static PyObject* call(PyObject* self, PyObject* const* args, Py_ssize_t n,
                        PyObject* kwnames) {
    fx::array* a = fxpy::array_ptr(self);
    PyObject* axis = n > 0 ? args[0] : Py_None;
    PyObject* keep = n > 1 ? args[1] : Py_False;
    bool fast = a != nullptr && n <= 2;
    for (Py_ssize_t k = 0; fast && kwnames && k < PyTuple_GET_SIZE(kwnames);
         ++k) {
      PyObject* kw = PyTuple_GET_ITEM(kwnames, k);
      if (is_kw(kw, "axis") && n == 0) {
        axis = args[n + k];
      } else if (is_kw(kw, "keepdims") && n <= 1) {
        keep = args[n + k];
      } else {
        fast = false;  // a stream, a repeated or unknown keyword
      }
    }
    std::vector<int> axes;
    int one = 0;
    fast = fast && (keep == Py_True || keep == Py_False);
    const bool all = axis == Py_None;
    if (fast && !all) {
      if (small_int(axis, one)) {
        axes.assign(1, one);
      } else {
        fast = int_sequence(axis, axes);
      }
    }
    if (!fast) {
      return call_original(original, self, args, n, kwnames);
    }
    try {
      const bool keepdims = keep == Py_True;
      return fxpy::wrap_result(all ? All(*a, keepdims, {})
                                   : Many(*a, axes, keepdims, {}))
          .release()
          .ptr();
    } catch (...) {
      fxpy::raise_current_exception();
      return nullptr;
    }
  }
};

PyObject* original_reshape = nullptr;

// x.reshape(2, 3) or x.reshape((2, 3)), without a stream.
PyObject* reshape_call(PyObject* self, PyObject* const* args, Py_ssize_t n,
                       PyObject* kwnames) {
  fx::array* a = fxpy::array_ptr(self);
  std::vector<int> dims;
  bool fast = a != nullptr && kwnames == nullptr && n > 0;
  if (fast && n == 1 && !PyLong_CheckExact(args[0])) {
    fast = int_sequence(args[0], dims);
  } else {
    dims.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; fast && i < n; ++i) {
      fast = small_int(args[i], dims[i]);
    }
  }
  if (!fast) {
    return call_original(original_reshape, self, args, n, kwnames);
  }
  try {
    return fxpy::wrap_result(
               fx::reshape(*a, fx::Shape(dims.begin(), dims.end()), {}))
        .release()
        .ptr();
  } catch (...) {
    fxpy::raise_current_exception();
    return nullptr;
  }
}

PyObject* original_T = nullptr;

// The getter of x.T: a one-argument builtin, so property calls it without
// an argument tuple.
PyObject* transpose_getter(PyObject*, PyObject* self) {
  fx::array* a = fxpy::array_ptr(self);
  if (a == nullptr) {
    return PyObject_CallOneArg(original_T, self);
  }
  try {
    return fxpy::wrap_result(fx::transpose(*a, fx::StreamOrDevice{})).release().ptr();
  } catch (...) {
    fxpy::raise_current_exception();
    return nullptr;
  }
}

// METH_FASTCALL | METH_KEYWORDS (CPython names the type only from 3.13).
using FastWithKeywords = PyObject* (*)(PyObject*, PyObject* const*,
                                       Py_ssize_t, PyObject*);

// Replaces `name` in the array type's dict by a vectorcall method, keeping
// the replaced one (returned, a new reference) and its docstring.
PyObject* install(const char* name, FastWithKeywords fn) {
  PyTypeObject* type = fxpy::array_type;
  PyObject* dict = type->tp_dict;
  PyObject* old = PyDict_GetItemString(dict, name);  // borrowed
  if (old == nullptr) {
    throw std::runtime_error(std::string("[fast methods] no method ") + name);
  }
  Py_INCREF(old);
  py::object doc = py::reinterpret_borrow<py::object>(old).attr("__doc__");
  // Leaked on purpose: a method definition must outlive the type.
  auto* keep_doc = new std::string(doc.is_none() ? "" : doc.cast<std::string>());
  auto* def = new PyMethodDef{name, reinterpret_cast<PyCFunction>(
                                        reinterpret_cast<void (*)()>(fn)),
                              METH_FASTCALL | METH_KEYWORDS,
                              keep_doc->c_str()};
  PyObject* descr = PyDescr_NewMethod(type, def);
  if (descr == nullptr || PyDict_SetItemString(dict, name, descr) != 0) {
    throw py::error_already_set();
  }
  Py_DECREF(descr);
  return old;
}

}  // namespace

void init_array_fast_methods() {
#define FLUXION_FAST_REDUCE(NAME)                                             \
  Reduce<static_cast<fx::array (*)(const fx::array&, bool,                   \
                                   fx::StreamOrDevice)>(&fx::NAME),          \
         static_cast<fx::array (*)(const fx::array&, const std::vector<int>&, \
                                   bool, fx::StreamOrDevice)>(&fx::NAME)>
#define FLUXION_INSTALL_REDUCE(NAME)                                    \
  FLUXION_FAST_REDUCE(NAME)::original =                                 \
      install(#NAME, &FLUXION_FAST_REDUCE(NAME)::call);
  FLUXION_INSTALL_REDUCE(sum)
  FLUXION_INSTALL_REDUCE(prod)
  FLUXION_INSTALL_REDUCE(mean)
  FLUXION_INSTALL_REDUCE(max)
  FLUXION_INSTALL_REDUCE(min)
  FLUXION_INSTALL_REDUCE(all)
  FLUXION_INSTALL_REDUCE(any)
#undef FLUXION_INSTALL_REDUCE
#undef FLUXION_FAST_REDUCE
  original_reshape = install("reshape", &reshape_call);
  // x.T: a property whose getter is a builtin of one argument.
  PyTypeObject* type = fxpy::array_type;
  py::object old_T = py::reinterpret_borrow<py::object>(
      PyDict_GetItemString(type->tp_dict, "T"));
  original_T = py::object(old_T.attr("fget")).release().ptr();
  static PyMethodDef getter{"T", &transpose_getter, METH_O, nullptr};
  py::object fget = py::reinterpret_steal<py::object>(
      PyCFunction_New(&getter, nullptr));
  py::object prop = py::module_::import("builtins")
                        .attr("property")(fget, py::none(), py::none(),
                                          old_T.attr("__doc__"));
  if (PyDict_SetItemString(type->tp_dict, "T", prop.ptr()) != 0) {
    throw py::error_already_set();
  }
  PyType_Modified(type);
}

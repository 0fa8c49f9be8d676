// Dtype objects (mx.float32, ...), dtype categories, finfo and iinfo, and
// the numeric constants (mx.pi, mx.e, mx.inf, mx.nan, ...).
#include <cmath>
#include <limits>
#include <string>

#include "fluxion/dtype_dispatch.h"
#include "python/src/convert.h"

namespace {

constexpr fx::Dtype kAllDtypes[] = {
    fx::bool_,   fx::uint8,   fx::uint16,   fx::uint32,   fx::uint64,
    fx::int8,    fx::int16,   fx::int32,    fx::int64,    fx::float16,
    fx::float32, fx::float64, fx::bfloat16, fx::complex64};

struct FInfo {
  fx::Dtype dtype;
  double min, max, eps, smallest_normal;
  int bits;
};

struct IInfo {
  fx::Dtype dtype;
  py::object min, max;
  int bits;
};

FInfo make_finfo(fx::Dtype t) {
  if (!fx::is_inexact(t)) {
    throw std::invalid_argument(std::string("[finfo] ") + fx::dtype_name(t) +
                                " is not an inexact type.");
  }
  // complex64's parts are float32; finfo describes them (the array API).
  fx::Dtype real = t == fx::complex64 ? fx::float32 : t;
  FInfo out{real, 0, 0, 0, 0, static_cast<int>(real.size) * 8};
  fx::dispatch<fx::FloatTypes>(real, "finfo", [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.max = static_cast<double>(std::numeric_limits<T>::max());
    out.min = -out.max;  // IEEE formats are symmetric
    out.eps = static_cast<double>(std::numeric_limits<T>::epsilon());
    out.smallest_normal = static_cast<double>(std::numeric_limits<T>::min());
  });
  return out;
}

IInfo make_iinfo(fx::Dtype t) {
  if (!fx::is_integral(t)) {
    throw std::invalid_argument(std::string("[iinfo] ") + fx::dtype_name(t) +
                                " is not an integer type.");
  }
  IInfo out{t, py::none(), py::none(), static_cast<int>(t.size) * 8};
  fx::dispatch<fx::IntTypes>(t, "iinfo", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_unsigned_v<T>) {
      out.min = py::int_(0);
      out.max = py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(
          static_cast<unsigned long long>(std::numeric_limits<T>::max())));
    } else {
      out.min = py::reinterpret_steal<py::object>(PyLong_FromLongLong(
          static_cast<long long>(std::numeric_limits<T>::min())));
      out.max = py::reinterpret_steal<py::object>(PyLong_FromLongLong(
          static_cast<long long>(std::numeric_limits<T>::max())));
    }
  });
  return out;
}

// The dtype of an argument of result_type / can_cast: a Dtype or an array
// (or anything convertible to one).
fx::Dtype dtype_of(py::handle h) {
  if (py::isinstance<fx::Dtype>(h)) {
    return h.cast<fx::Dtype>();
  }
  if (auto* a = fxpy::array_ptr(h)) {
    return a->dtype();
  }
  return fxpy::to_array(h).dtype();
}

// The array API's dtype kinds.
bool is_kind(fx::Dtype t, const std::string& kind) {
  if (kind == "bool") {
    return t == fx::bool_;
  }
  if (kind == "signed integer") {
    return fx::is_integral(t) && !fx::is_unsigned(t);
  }
  if (kind == "unsigned integer") {
    return fx::is_integral(t) && fx::is_unsigned(t);
  }
  if (kind == "integral") {
    return fx::is_integral(t);
  }
  if (kind == "real floating") {
    return fx::is_floating_point(t);
  }
  if (kind == "complex floating") {
    return fx::is_complex(t);
  }
  if (kind == "numeric") {
    return t != fx::bool_;
  }
  throw std::invalid_argument(
      "[isdtype] Unknown kind '" + kind +
      "'; expected a dtype or one of 'bool', 'signed integer', 'unsigned "
      "integer', 'integral', 'real floating', 'complex floating', "
      "'numeric'.");
}

bool isdtype_one(fx::Dtype t, py::handle kind) {
  if (py::isinstance<fx::Dtype>(kind)) {
    return t == kind.cast<fx::Dtype>();
  }
  if (py::isinstance<py::str>(kind)) {
    return is_kind(t, kind.cast<std::string>());
  }
  throw py::type_error(
      "[isdtype] kind must be a Dtype, a string or a tuple of them; got " +
      std::string(Py_TYPE(kind.ptr())->tp_name) + ".");
}

std::string dtype_repr(fx::Dtype t) {
  return std::string("fluxion.core.") + fx::dtype_name(t);
}

}  // namespace

void init_dtypes(py::module_& m) {
  py::class_<fx::Dtype>(
      m, "Dtype", "An array's element type, e.g. ``fluxion.core.float32``.")
      .def_property_readonly(
          "size", [](const fx::Dtype& t) { return static_cast<int>(t.size); },
          "Size of one element in bytes.")
      .def("__repr__", &dtype_repr)
      .def(
          "__eq__",
          [](const fx::Dtype& a, const fx::Dtype& b) { return a == b; },
          py::is_operator())
      .def(
          "__ne__",
          [](const fx::Dtype& a, const fx::Dtype& b) { return a != b; },
          py::is_operator())
      .def("__hash__",
           [](const fx::Dtype& t) { return static_cast<int>(t.val); })
      .def(py::pickle(
          [](const fx::Dtype& t) { return static_cast<int>(t.val); },
          [](int v) {
            for (fx::Dtype t : kAllDtypes) {
              if (static_cast<int>(t.val) == v) {
                return t;
              }
            }
            throw std::invalid_argument("[Dtype] Invalid pickled dtype " +
                                        std::to_string(v) + ".");
          }));

  for (fx::Dtype t : kAllDtypes) {
    std::string name = fx::dtype_name(t);
    if (name == "bool") {
      name = "bool_";
    }
    m.attr(name.c_str()) = py::cast(t);
  }

  py::enum_<fx::DtypeCategory>(m, "DtypeCategory",
                               "Abstract dtype categories for issubdtype.")
      .value("complexfloating", fx::DtypeCategory::complexfloating)
      .value("floating", fx::DtypeCategory::floating)
      .value("inexact", fx::DtypeCategory::inexact)
      .value("signedinteger", fx::DtypeCategory::signedinteger)
      .value("unsignedinteger", fx::DtypeCategory::unsignedinteger)
      .value("integer", fx::DtypeCategory::integer)
      .value("number", fx::DtypeCategory::number)
      .value("generic", fx::DtypeCategory::generic)
      .export_values();

  m.def(
      "issubdtype",
      [](const fx::Dtype& a, const fx::Dtype& b) {
        return fx::issubdtype(a, b);
      },
      "arg1"_a, "arg2"_a);
  m.def(
      "issubdtype",
      [](const fx::Dtype& a, fx::DtypeCategory b) {
        return fx::issubdtype(a, b);
      },
      "arg1"_a, "arg2"_a);
  m.def(
      "issubdtype",
      [](fx::DtypeCategory a, const fx::Dtype& b) {
        // A category is never a sub-type of a concrete type.
        return false;
      },
      "arg1"_a, "arg2"_a);
  m.def(
      "issubdtype",
      [](fx::DtypeCategory a, fx::DtypeCategory b) {
        return fx::issubdtype(a, b);
      },
      "arg1"_a, "arg2"_a,
      R"doc(Whether ``arg1`` is ``arg2`` or below it in the type hierarchy.

Args:
    arg1 (Dtype or DtypeCategory): The type or category tested.
    arg2 (Dtype or DtypeCategory): The type or category it may belong to.

Returns:
    bool: For example ``issubdtype(mx.float32, mx.floating)`` is ``True``.
)doc");

  m.def(
      "result_type",
      [](py::args args) {
        if (args.size() == 0) {
          throw std::invalid_argument(
              "[result_type] At least one array or dtype is required.");
        }
        // Arrays and dtypes promote strongly; Python scalars are weak, as
        // next to an array in an op.
        std::optional<fx::Dtype> out;
        std::vector<py::handle> scalars;
        for (auto h : args) {
          if (fxpy::scalar_kind(h) != fxpy::ScalarKind::none) {
            scalars.push_back(h);
            continue;
          }
          fx::Dtype t = dtype_of(h);
          out = out ? fx::promote_types(*out, t) : t;
        }
        for (auto h : scalars) {
          fx::Dtype t = fxpy::scalar_to_array(h, fxpy::scalar_kind(h), out)
                            .dtype();
          out = out ? fx::promote_types(*out, t) : t;
        }
        return *out;
      },
      R"doc(The dtype that type promotion gives the arguments.

Arrays and dtypes promote by NumPy-style rules; Python scalars are weak (as
next to an array in an op).

Args:
    *args (array, Dtype or scalar): At least one.

Returns:
    Dtype: The promoted type.

Example:
    >>> mx.result_type(mx.int8, 1.0)
    fluxion.core.float32
)doc");
  m.def(
      "can_cast",
      [](py::handle from, fx::Dtype to) {
        fx::Dtype f = dtype_of(from);
        return fx::promote_types(f, to) == to;
      },
      "from_"_a, "to"_a,
      R"doc(Whether one dtype converts to another without loss under promotion.

Args:
    from_ (Dtype or array): The source type (an array's dtype).
    to (Dtype): The target type.

Returns:
    bool: ``promote_types(from_, to) == to``.
)doc");
  m.def(
      "isdtype",
      [](fx::Dtype t, py::object kind) {
        if (py::isinstance<py::tuple>(kind)) {
          bool any = false;
          for (auto k : kind) {
            any = isdtype_one(t, k) || any;  // validate every entry
          }
          return any;
        }
        return isdtype_one(t, kind);
      },
      "dtype"_a, "kind"_a,
      R"doc(Whether a dtype is of a kind (the array API's ``isdtype``).

Args:
    dtype (Dtype): The type.
    kind (Dtype, str or tuple): A dtype, a kind name (``'bool'``,
        ``'signed integer'``, ``'unsigned integer'``, ``'integral'``,
        ``'real floating'``, ``'complex floating'``, ``'numeric'``), or a
        tuple of them (any matches).

Returns:
    bool: Whether ``dtype`` is of ``kind``.
)doc");

  py::class_<FInfo>(m, "finfo", "Limits of an inexact dtype.")
      .def(py::init(&make_finfo), "dtype"_a)
      .def_readonly("dtype", &FInfo::dtype,
      R"doc(The :class:`Dtype` these limits are of.
)doc")
      .def_readonly("min", &FInfo::min,
      R"doc(The lowest finite value of the dtype.
)doc")
      .def_readonly("max", &FInfo::max,
      R"doc(The largest finite value of the dtype.
)doc")
      .def_readonly("eps", &FInfo::eps,
      R"doc(The difference between 1.0 and the next larger representable value.
)doc")
      .def_readonly("smallest_normal", &FInfo::smallest_normal,
      R"doc(The smallest positive normal value of the dtype.
)doc")
      .def_readonly("bits", &FInfo::bits,
      R"doc(The size of the dtype in bits.
)doc")
      .def("__repr__", [](const FInfo& f) {
        return "finfo(min=" + py::repr(py::float_(f.min)).cast<std::string>() +
               ", max=" + py::repr(py::float_(f.max)).cast<std::string>() +
               ", eps=" + py::repr(py::float_(f.eps)).cast<std::string>() +
               ", dtype=" + fx::dtype_name(f.dtype) + ")";
      });

  py::class_<IInfo>(m, "iinfo", "Limits of an integer dtype.")
      .def(py::init(&make_iinfo), "dtype"_a)
      .def_readonly("dtype", &IInfo::dtype,
      R"doc(The :class:`Dtype` these limits are of.
)doc")
      .def_readonly("min", &IInfo::min,
      R"doc(The lowest finite value of the dtype.
)doc")
      .def_readonly("max", &IInfo::max,
      R"doc(The largest finite value of the dtype.
)doc")
      .def_readonly("bits", &IInfo::bits,
      R"doc(The size of the dtype in bits.
)doc")
      .def("__repr__", [](const IInfo& f) {
        return "iinfo(min=" + py::str(f.min).cast<std::string>() +
               ", max=" + py::str(f.max).cast<std::string>() +
               ", dtype=" + fx::dtype_name(f.dtype) + ")";
      });

  // Constants.
  m.attr("e") = py::float_(M_E);
  m.attr("pi") = py::float_(M_PI);
  m.attr("inf") = py::float_(INFINITY);
  m.attr("nan") = py::float_(NAN);
  m.attr("newaxis") = py::none();
  m.attr("euler_gamma") = py::float_(0.57721566490153286060651209008240243);
}

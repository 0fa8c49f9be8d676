// NumPy-style indexing: __getitem__, __setitem__ and the `.at[]` updates.
//
// An index expression is expanded (Ellipsis, trailing axes) into one item
// per axis plus None items. Basic items (ints, slices) become one `slice`
// view. Integer arrays follow NumPy's advanced indexing: all advanced
// indices (ints count as 0-d arrays when an array is present) broadcast to
// one shape B. One array index is a `take` along its axis; several are one
// multi-axis `gather`, and updates (`__setitem__`, `.at[]`) one `scatter_*`
// over the indexed axes of the sliced region (windows of 1 along them, whole
// along the sliced ones). B's dimensions replace the indexed axes in place when
// the advanced items are adjacent, else they go first.
#include <pybind11/numpy.h>

#include <climits>
#include <cstdint>
#include <numeric>

#include "fluxion/ops/gather_scatter.h"
#include "python/src/convert.h"

namespace {

struct Item {
  // `ellipsis` marks where '...' stood: it takes no axis (its axes are
  // slices) but, as in NumPy, separates advanced indices.
  enum Kind { integer, slice, newaxis, array, ellipsis } kind;
  explicit Item(Kind k) : kind(k) {}
  int64_t value = 0;  // integer: normalized; slice: start
  int64_t stop = 0, step = 1, length = 0;
  std::optional<fx::array> arr;
};

[[noreturn]] void index_error(const char* op, const std::string& msg) {
  throw std::out_of_range(std::string("[") + op + "] " + msg);
}

fx::array index_array(py::handle h, const char* op) {
  fx::array a = fxpy::to_array(h);
  if (a.dtype() == fx::bool_) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Boolean array indices are not supported (there is no boolean "
        "mask indexing); use where() instead.");
  }
  if (!fx::is_integral(a.dtype())) {
    if (a.size() == 0) {
      return fx::astype(a, fx::int32);  // x[[]]: an empty integer index
    }
    throw std::invalid_argument(
        std::string("[") + op +
        "] Arrays used as indices must have an integer type; got " +
        fx::dtype_name(a.dtype()) + ".");
  }
  return a;
}

// Python ints and NumPy integer scalars (not 0-d arrays, not bools).
bool is_int_index(py::handle h) {
  if (PyBool_Check(h.ptr())) {
    return false;
  }
  return PyLong_Check(h.ptr()) ||
         (!fxpy::array_ptr(h) && !py::isinstance<py::array>(h) &&
          PyIndex_Check(h.ptr()));
}

// One item per axis of `a` (plus newaxis items).
std::vector<Item> parse(const fx::array& a, py::handle index, const char* op) {
  std::vector<py::handle> raw;
  if (PyTuple_Check(index.ptr())) {
    for (auto h : py::reinterpret_borrow<py::tuple>(index)) {
      raw.push_back(h);
    }
  } else {
    raw.push_back(index);
  }
  int consumed = 0, ellipsis = -1;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i].ptr() == Py_Ellipsis) {
      if (ellipsis >= 0) {
        // A malformed index is a ValueError, as in MLX (out-of-bounds
        // integers stay IndexError).
        throw std::invalid_argument(
            std::string("[") + op +
            "] An index can only have a single ellipsis ('...').");
      }
      ellipsis = static_cast<int>(i);
    } else if (!raw[i].is_none()) {
      ++consumed;
    }
  }
  if (consumed > 0 && a.ndim() == 0) {
    // MLX: indexing a 0-d array with anything but None / ... is a
    // ValueError.
    throw std::invalid_argument(std::string("[") + op +
                                "] Cannot index a 0-d array with " +
                                std::to_string(consumed) + " index" +
                                (consumed == 1 ? "" : "es") +
                                " (only None and ... apply).");
  }
  if (consumed > a.ndim()) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Too many indices for an array with " +
                                std::to_string(a.ndim()) + " dimensions: got " +
                                std::to_string(consumed) + ".");
  }
  std::vector<Item> items;
  int axis = 0;
  auto full = [&] {
    Item it(Item::slice);
    it.value = 0;
    it.stop = a.shape(axis);
    it.length = a.shape(axis);
    items.push_back(it);
    ++axis;
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    py::handle h = raw[i];
    if (static_cast<int>(i) == ellipsis) {
      items.push_back(Item(Item::ellipsis));
      for (int k = 0; k < a.ndim() - consumed; ++k) {
        full();
      }
      continue;
    }
    if (h.is_none()) {
      items.push_back(Item(Item::newaxis));
      continue;
    }
    int64_t n = a.shape(axis);
    if (PySlice_Check(h.ptr())) {
      // Bounds past int32 cannot address an axis (shapes are int32): MLX
      // raises ValueError rather than clamping them.
      auto* sl = reinterpret_cast<PySliceObject*>(h.ptr());
      for (PyObject* bound : {sl->start, sl->stop, sl->step}) {
        if (bound && bound != Py_None && PyLong_Check(bound)) {
          int overflow = 0;
          long long v = PyLong_AsLongLongAndOverflow(bound, &overflow);
          if (overflow || v < INT32_MIN || v > INT32_MAX) {
            throw std::invalid_argument(
                std::string("[") + op + "] Slice bound " +
                py::str(bound).cast<std::string>() +
                " does not fit in a 32-bit integer.");
          }
        }
      }
      if (sl->step && PyLong_Check(sl->step) && PyLong_AsLong(sl->step) == 0) {
        // Python's own message ("slice step cannot be zero") names no op.
        throw std::invalid_argument(std::string("[") + op +
                                    "] Slice step cannot be zero.");
      }
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) {
        throw py::error_already_set();
      }
      Item it(Item::slice);
      it.length = PySlice_AdjustIndices(n, &start, &stop, step);
      it.step = step;
      if (it.length == 0) {
        it.value = it.stop = 0;
        it.step = 1;
      } else {
        it.value = start;
        it.stop = start + it.length * step;
        if (it.stop < 0) {
          it.stop = -n - 1;  // "before the first element" for slice()
        }
      }
      items.push_back(it);
    } else if (PyBool_Check(h.ptr())) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Boolean indices are not supported.");
    } else if (is_int_index(h)) {
      int overflow = 0;
      py::object as_int =
          py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
      if (!as_int) {
        throw py::error_already_set();
      }
      long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
      if (overflow || v < INT32_MIN || v > INT32_MAX) {
        throw std::invalid_argument(
            std::string("[") + op + "] Index " +
            py::str(h).cast<std::string>() +
            " does not fit in a 32-bit integer.");
      }
      if (v < -n || v >= n) {
        index_error(op, "Index " + py::str(h).cast<std::string>() +
                            " is out of bounds for axis " +
                            std::to_string(axis) + " with size " +
                            std::to_string(n) + ".");
      }
      Item it(Item::integer);
      it.value = v < 0 ? v + n : v;
      items.push_back(it);
    } else if (fxpy::array_ptr(h) || fxpy::is_array_like(h)) {
      Item it(Item::array);
      it.arr = index_array(h, op);
      items.push_back(std::move(it));
    } else {
      throw std::invalid_argument(
          std::string("[") + op +
          "] Cannot index an array with an object of type " +
          Py_TYPE(h.ptr())->tp_name + ".");
    }
    ++axis;
  }
  while (axis < a.ndim()) {
    full();
  }
  return items;
}

// The decomposition of an index expression against an array.
struct Plan {
  // Basic slicing of every axis (ints as width-1 slices only without
  // arrays; with arrays, advanced axes are kept whole).
  fx::Shape start, stop, strides, region_shape;
  bool identity = true;
  std::vector<int> int_axes;  // squeezed after slicing (basic only)
  bool advanced = false;
  std::vector<int> adv_axes, rest_axes;
  std::vector<fx::array> adv_idx;
  fx::Shape B;  // broadcast shape of the advanced indices
  bool adjacent = true;
  int adv_pos = 0;            // rest axes before the first advanced one
  std::vector<int> none_pos;  // positions of new axes in the result
  fx::Shape result_shape;
};

Plan make_plan(const fx::array& a, const std::vector<Item>& items,
               const char* op) {
  Plan p;
  for (auto& it : items) {
    p.advanced |= it.kind == Item::array;
  }
  int axis = 0, first_adv = -1, last_adv = -1;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (it.kind == Item::newaxis || it.kind == Item::ellipsis) {
      continue;
    }
    int n = a.shape(axis);
    if (it.kind == Item::slice) {
      p.start.push_back(static_cast<int32_t>(it.value));
      p.stop.push_back(static_cast<int32_t>(it.stop));
      p.strides.push_back(static_cast<int32_t>(it.step));
      p.region_shape.push_back(static_cast<int32_t>(it.length));
      p.identity &= it.length == n && it.step == 1;
      if (p.advanced) {
        p.rest_axes.push_back(axis);
      }
    } else if (!p.advanced) {  // an int, basic
      p.start.push_back(static_cast<int32_t>(it.value));
      p.stop.push_back(static_cast<int32_t>(it.value + 1));
      p.strides.push_back(1);
      p.region_shape.push_back(1);
      p.identity = false;
      p.int_axes.push_back(axis);
    } else {  // an int or an array, advanced
      p.start.push_back(0);
      p.stop.push_back(n);
      p.strides.push_back(1);
      p.region_shape.push_back(n);
      p.adv_axes.push_back(axis);
      p.adv_idx.push_back(
          it.kind == Item::array
              ? *it.arr
              : fx::array(static_cast<int64_t>(it.value),
                          n > INT32_MAX ? fx::int64 : fx::int32));
      if (first_adv < 0) {
        first_adv = static_cast<int>(i);
        p.adv_pos = static_cast<int>(p.rest_axes.size());
      }
      last_adv = static_cast<int>(i);
    }
    ++axis;
  }
  if (p.advanced) {
    for (int i = first_adv; i <= last_adv; ++i) {
      p.adjacent &=
          items[i].kind == Item::integer || items[i].kind == Item::array;
    }
    for (auto& idx : p.adv_idx) {
      p.B = fx::broadcast_shapes(p.B, idx.shape(), op);
    }
  }
  // Result layout: slices in order, B in place (or first), new axes.
  int nb = static_cast<int>(p.B.size());
  int pos = p.advanced && !p.adjacent ? nb : 0;
  if (p.advanced && !p.adjacent) {
    p.result_shape = p.B;
  }
  bool seen_adv = false;
  axis = 0;
  for (auto& it : items) {
    switch (it.kind) {
      case Item::newaxis:
        p.none_pos.push_back(pos++);
        p.result_shape.push_back(1);
        continue;
      case Item::ellipsis:
        continue;
      case Item::slice:
        p.result_shape.push_back(static_cast<int32_t>(it.length));
        ++pos;
        break;
      default:
        if (p.advanced && p.adjacent && !seen_adv) {
          p.result_shape.insert(p.result_shape.end(), p.B.begin(), p.B.end());
          pos += nb;
        }
        seen_adv = true;
    }
    ++axis;
  }
  return p;
}

// The advanced part as gather/scatter operands on the sliced region (all
// of a's axes, advanced ones kept whole): the index arrays, their axes, and
// the window shape U (1 along indexed axes, whole along the others).
// Negative indices wrap and out-of-range ones raise at eval, in the
// gather/scatter kernels.
fx::Shape window_shape(const fx::array& region, const Plan& p) {
  fx::Shape U = region.shape();
  for (int ax : p.adv_axes) {
    U[ax] = 1;
  }
  return U;
}

// True when an indexed axis has length 0: no window fits there, so with
// no index rows there is nothing to read or write, and with some rows every
// index is out of range (raised here, as no kernel will see them).
bool empty_indexed_axis(const fx::array& region, const Plan& p,
                        const char* op) {
  for (int ax : p.adv_axes) {
    if (region.shape(ax) == 0) {
      if (fx::shape_size(p.B) > 0) {
        index_error(op, "Index out of bounds for axis " + std::to_string(ax) +
                            " with size 0.");
      }
      return true;
    }
  }
  return false;
}

// Move B's dims (first in `g`) to their place in the result, and add the
// new axes.
fx::array arrange_result(fx::array g, const Plan& p) {
  int nb = static_cast<int>(p.B.size());
  if (p.adjacent && p.adv_pos > 0 && nb > 0) {
    std::vector<int> perm;
    for (int i = 0; i < p.adv_pos; ++i) {
      perm.push_back(nb + i);
    }
    for (int i = 0; i < nb; ++i) {
      perm.push_back(i);
    }
    for (int i = nb + p.adv_pos; i < g.ndim(); ++i) {
      perm.push_back(i);
    }
    g = fx::transpose(g, perm);
  }
  return p.none_pos.empty() ? g : fx::expand_dims(g, p.none_pos);
}

fx::array sliced(const fx::array& a, const Plan& p) {
  return p.identity ? a : fx::slice(a, p.start, p.stop, p.strides);
}

fx::array get_item(const fx::array& a, py::handle index) {
  // x[i] with a Python int in range (the commonest index): the same slice
  // and squeeze as the general path builds, without its item and plan
  // vectors. Anything else, errors included, takes the general path.
  if (PyLong_CheckExact(index.ptr()) && a.ndim() >= 1) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    long long n = a.shape()[0];
    if (!overflow && v >= -n && v < n) {
      int32_t i = static_cast<int32_t>(v < 0 ? v + n : v);
      fx::Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
      start[0] = i;
      stop[0] = i + 1;
      return fx::squeeze(fx::slice(a, std::move(start), std::move(stop),
                                   std::move(strides)),
                         std::vector<int>{0});
    }
    PyErr_Clear();
  }
  auto items = parse(a, index, "getitem");
  Plan p = make_plan(a, items, "getitem");
  fx::array region = sliced(a, p);
  if (!p.advanced) {
    if (!p.int_axes.empty()) {
      region = fx::squeeze(region, p.int_axes);
    }
    return p.none_pos.empty() ? region : fx::expand_dims(region, p.none_pos);
  }
  if (p.adv_axes.size() == 1) {
    // One array index: a plain take along its axis (negative indices and
    // range checks are take's).
    int ax = p.adv_axes[0];
    return p.none_pos.empty()
               ? fx::take(region, p.adv_idx[0], ax)
               : fx::expand_dims(fx::take(region, p.adv_idx[0], ax),
                                 p.none_pos);
  }
  // Several array indices: one gather, shaped [B..., rest...].
  fx::Shape U = window_shape(region, p);
  fx::Shape out_shape = p.B;
  for (int ax : p.rest_axes) {
    out_shape.push_back(region.shape(ax));
  }
  if (empty_indexed_axis(region, p, "getitem")) {
    return arrange_result(fx::zeros(out_shape, a.dtype()), p);
  }
  fx::array g = fx::gather(region, p.adv_idx, p.adv_axes, U);
  return arrange_result(fx::reshape(g, out_shape), p);
}

// `value` as the update of the indexed region: broadcast to the result
// shape of a[index] (extra leading unit dims dropped, as NumPy does).
fx::array fit_value(fx::array v, const fx::Shape& result_shape) {
  while (v.ndim() > static_cast<int>(result_shape.size()) && v.shape(0) == 1) {
    v = fx::squeeze(v, 0);
  }
  return fx::broadcast_to(v, result_shape);
}

enum class Update { set, add, subtract, multiply, divide, maximum, minimum };

fx::array apply(Update u, const fx::array& cur, const fx::array& v) {
  switch (u) {
    case Update::add:
      return fx::add(cur, v);
    case Update::subtract:
      return fx::subtract(cur, v);
    case Update::multiply:
      return fx::multiply(cur, v);
    case Update::divide:
      return fx::divide(cur, v);
    case Update::maximum:
      return fx::maximum(cur, v);
    case Update::minimum:
      return fx::minimum(cur, v);
    default:
      return v;
  }
}

fx::array update_item(const fx::array& a, py::handle index, py::handle value,
                      Update u) {
  const char* op = u == Update::set ? "setitem" : "at";
  auto items = parse(a, index, op);
  Plan p = make_plan(a, items, op);
  fx::array v = fxpy::to_array_like(value, a);
  if (!p.advanced) {
    fx::array upd = v.ndim() == 0 ? v
                                  : fx::reshape(fit_value(v, p.result_shape),
                                                p.region_shape);
    if (u != Update::set) {
      upd = apply(u, fx::slice(a, p.start, p.stop, p.strides), upd);
    }
    return fx::slice_update(a, fx::astype(upd, a.dtype()), p.start, p.stop,
                            p.strides);
  }
  fx::array region = sliced(a, p);
  if (empty_indexed_axis(region, p, op)) {
    fit_value(v, p.result_shape);  // still a shape error if it cannot fit
    return a;
  }
  // The value in the [B..., rest...] layout, then as scatter updates
  // [B..., U...] (U: the window, 1 along the indexed axes).
  fx::array vr = fit_value(v, p.result_shape);
  if (!p.none_pos.empty()) {
    vr = fx::squeeze(vr, p.none_pos);
  }
  int nb = static_cast<int>(p.B.size());
  if (p.adjacent && p.adv_pos > 0 && nb > 0) {
    std::vector<int> perm;
    for (int i = 0; i < nb; ++i) {
      perm.push_back(p.adv_pos + i);
    }
    for (int i = 0; i < p.adv_pos; ++i) {
      perm.push_back(i);
    }
    for (int i = p.adv_pos + nb; i < vr.ndim(); ++i) {
      perm.push_back(i);
    }
    vr = fx::transpose(vr, perm);
  }
  fx::Shape U = window_shape(region, p);
  fx::Shape upd_shape = p.B;
  upd_shape.insert(upd_shape.end(), U.begin(), U.end());
  fx::array upd = fx::reshape(vr, upd_shape);
  const auto& idx = p.adv_idx;
  const auto& axes = p.adv_axes;
  fx::Dtype t = a.dtype();
  // Duplicate indices: set keeps the last value in index order; the others
  // combine every value (NumPy's ufunc.at), in one scatter.
  fx::array out = region;
  switch (u) {
    case Update::set:
      out = fx::scatter(region, idx, fx::astype(upd, t), axes);
      break;
    case Update::add:
      out = fx::scatter_add(region, idx, fx::astype(upd, t), axes);
      break;
    case Update::subtract:
      out =
          fx::scatter_add(region, idx, fx::astype(fx::negative(upd), t), axes);
      break;
    case Update::maximum:
      out = fx::scatter_max(region, idx, fx::astype(upd, t), axes);
      break;
    case Update::minimum:
      out = fx::scatter_min(region, idx, fx::astype(upd, t), axes);
      break;
    default:
      if (u == Update::multiply && upd.dtype() == t) {
        out = fx::scatter_prod(region, idx, upd, axes);
      } else {
        // The product of the values at each element (1 where none), then
        // one multiply or divide in the values' type: x / v1 / v2 is
        // computed as x / (v1 * v2).
        fx::array prod = fx::scatter_prod(fx::ones(region.shape(), upd.dtype()),
                                          idx, upd, axes);
        out = fx::astype(apply(u, region, prod), t);
      }
  }
  return p.identity ? out
                    : fx::slice_update(a, out, p.start, p.stop, p.strides);
}

// A boolean mask used as a whole index (x[mask] = v): a Python bool, a
// bool array, or a list / NumPy array of bools. Tuples are index
// expressions, never masks.
std::optional<fx::array> bool_mask(py::handle index) {
  if (PyBool_Check(index.ptr())) {
    return fx::array(index.cast<bool>());
  }
  if (auto* p = fxpy::array_ptr(index)) {
    if (p->dtype() == fx::bool_) {
      return *p;
    }
    return std::nullopt;
  }
  if (PyList_Check(index.ptr()) || py::isinstance<py::array>(index)) {
    fx::array m = fxpy::to_array(index);
    if (m.dtype() == fx::bool_) {
      return m;
    }
  }
  return std::nullopt;
}

// NumPy's x[mask] = v without reading the mask on the host: the mask
// covers x's leading dimensions; v is broadcast to the selected elements
// (a scalar, or the trailing shape), or gives them in order (one entry per
// selected element: its k-th row goes to the k-th selected position, as
// fx::masked_scatter places them).
fx::array masked_update(const fx::array& a, const fx::array& mask,
                        py::handle value) {
  const char* op = "setitem";
  int k = mask.ndim();
  bool fits = k <= a.ndim();
  for (int d = 0; fits && d < k; ++d) {
    fits = mask.shape(d) == a.shape(d);
  }
  if (!fits) {
    throw std::invalid_argument(
        std::string("[") + op + "] A boolean mask of shape " +
        fx::shape_str(mask.shape()) +
        " must match the leading dimensions of the array of shape " +
        fx::shape_str(a.shape()) + ".");
  }
  fx::array v = fxpy::to_array_like(value, a);
  fx::Shape trailing(a.shape().begin() + k, a.shape().end());
  // The mask broadcast over the trailing dimensions.
  fx::Shape mshape = mask.shape();
  mshape.resize(a.ndim(), 1);
  fx::array m = fx::reshape(mask, mshape);
  auto broadcastable = [&](const fx::Shape& from) {
    if (from.size() > trailing.size()) {
      return false;
    }
    for (size_t i = 0; i < from.size(); ++i) {
      int32_t f = from[from.size() - 1 - i];
      int32_t t = trailing[trailing.size() - 1 - i];
      if (f != 1 && f != t) {
        return false;
      }
    }
    return true;
  };
  fx::array update = v;
  if (k == 0 || broadcastable(v.shape())) {
    update = fx::broadcast_to(fx::reshape(v, [&] {
                                fx::Shape s(k, 1);
                                s.insert(s.end(), v.shape().begin(),
                                         v.shape().end());
                                return s;
                              }()),
                              a.shape());
  } else {
    // One row of v per selected position, in order.
    fx::Shape rows{-1};
    rows.insert(rows.end(), trailing.begin(), trailing.end());
    fx::array vr = fx::reshape(v, rows);
    if (!broadcastable(fx::Shape(vr.shape().begin() + 1, vr.shape().end()))) {
      throw std::invalid_argument(
          std::string("[") + op + "] Cannot assign values of shape " +
          fx::shape_str(v.shape()) + " to the elements selected by a mask "
          "of shape " + fx::shape_str(mask.shape()) + " in an array of "
          "shape " + fx::shape_str(a.shape()) + ".");
    }
    // Row-major order of the selected elements is row by row, so this is
    // masked_scatter with the mask spread over the trailing dimensions.
    return fx::masked_scatter(a, m, vr);
  }
  return fx::where(m, fx::astype(update, a.dtype()), a);
}

// The type's subscript slot (issue 18): `x[i]` through pybind11's
// __getitem__ costs an argument tuple and the dispatcher's overload loop;
// the slot calls get_item directly. Errors go through the registered
// translators, as the dispatcher would send them.
PyObject* subscript_slot(PyObject* self, PyObject* index) {
  fx::array* a = fxpy::array_ptr(self);
  if (a == nullptr) {
    PyErr_SetString(PyExc_TypeError, "[getitem] Expected an array.");
    return nullptr;
  }
  try {
    return fxpy::wrap_result(get_item(*a, index)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    fxpy::raise_current_exception();
    return nullptr;
  }
}

// x.at[idx].add(v) and friends: functional updates returning new arrays.
struct ArrayAt {
  fx::array a;
  py::object index;
};

}  // namespace

void init_indexing(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
  cls.def("__getitem__", &get_item, "index"_a);
  cls.def(
      "__setitem__",
      [](fx::array& a, py::handle index, py::handle value) {
        if (auto mask = bool_mask(index)) {
          a = masked_update(a, *mask, value);
          return;
        }
        a = update_item(a, index, value, Update::set);
      },
      "index"_a, "value"_a);

  py::class_<ArrayAt> at(m, "ArrayAt",
                         "Functional updates: ``x.at[idx].add(v)`` returns a "
                         "new array.");
  at.def("__getitem__", [](const ArrayAt& self, py::object index) {
      return ArrayAt{self.a, std::move(index)};
    }).def("__repr__", [](const ArrayAt&) { return "ArrayAt"; });
  auto method = [&](const char* name, Update u, const char* doc) {
    at.def(
        name,
        [u, name](const ArrayAt& self, py::handle value) {
          if (!self.index) {
            throw std::invalid_argument(
                std::string("[at] Index the array first: x.at[idx].") + name +
                "(value).");
          }
          return update_item(self.a, self.index, value, u);
        },
        "value"_a, doc);
  };
  // Unlike ``x[idx] += v``, repeated indices each contribute.
#define FLUXION_AT_DOC(WHAT, RESULT)                                        \
  WHAT " at the index, as a new array.\n\n"                                \
       "Repeated indices each apply (``x.at[[0, 0]].add(1)`` adds 2 to\n"  \
       "``x[0]``), unlike ``x[idx] += v``.\n\n"                              \
       "Args:\n"                                                           \
       "    value (array or scalar): The operand, broadcast to ``x[idx]``.\n" \
       "\nReturns:\n"                                                       \
       "    array: A copy of ``x`` with " RESULT ".\n"
  method("add", Update::add,
         FLUXION_AT_DOC("Add ``value``", "``value`` added at ``idx``"));
  method("subtract", Update::subtract,
         FLUXION_AT_DOC("Subtract ``value``",
                        "``value`` subtracted at ``idx``"));
  method("multiply", Update::multiply,
         FLUXION_AT_DOC("Multiply by ``value``",
                        "the elements at ``idx`` multiplied"));
  method("divide", Update::divide,
         FLUXION_AT_DOC("Divide by ``value``",
                        "the elements at ``idx`` divided"));
  method("maximum", Update::maximum,
         FLUXION_AT_DOC("Take the maximum with ``value``",
                        "the elements at ``idx`` replaced by the maximum"));
  method("minimum", Update::minimum,
         FLUXION_AT_DOC("Take the minimum with ``value``",
                        "the elements at ``idx`` replaced by the minimum"));
#undef FLUXION_AT_DOC
  cls.def_property_readonly(
      "at",
      [](const fx::array& a) {
        return ArrayAt{a, py::object()};
      },
      "Functional updates at an index: ``x.at[idx].add(v)``.");
  // Set last: defining __getitem__ sets the slot to the generic wrapper.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_mapping.mp_subscript = &subscript_slot;
  PyType_Modified(reinterpret_cast<PyTypeObject*>(cls.ptr()));
}

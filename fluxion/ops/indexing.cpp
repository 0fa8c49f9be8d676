#include "fluxion/ops/indexing.h"

#include <limits>
#include <string>

#include "fluxion/ops/common.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

void check_indices(const array& indices, const char* op) {
  if (!is_integral(indices.dtype())) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Indices must be of an integer type; got " +
                                dtype_name(indices.dtype()) + ".");
  }
}

void check_same_ndim(const array& a, const array& indices, const char* op) {
  if (indices.ndim() != a.ndim()) {
    throw std::invalid_argument(std::string("[") + op + "] Indices of shape " +
                                shape_str(indices.shape()) +
                                " must have as many dimensions as the "
                                "array of shape " +
                                shape_str(a.shape()) + ".");
  }
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) {
    return false;
  }
  for (size_t i = 0; i < from.size(); ++i) {
    int d = from[from.size() - 1 - i];
    if (d != 1 && d != to[to.size() - 1 - i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

array take(const array& a, const array& indices, int axis, StreamOrDevice s) {
  check_indices(indices, "take");
  int ax = normalize_axis(axis, a.ndim(), "take");
  auto st = to_stream(s);
  // Gather with the indices flattened: GatherAxis then copies whole blocks
  // a[.., idx, ..] (rows of a matrix: one memcpy each), and the gathered
  // array is row-contiguous, so the final reshape is a free view.
  Shape out_shape(a.shape().begin(), a.shape().begin() + ax);
  out_shape.insert(out_shape.end(), indices.shape().begin(),
                   indices.shape().end());
  out_shape.insert(out_shape.end(), a.shape().begin() + ax + 1,
                   a.shape().end());
  int64_t k = static_cast<int64_t>(indices.size());
  if (k > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("[take] Too many indices (" +
                                std::to_string(k) + ").");
  }
  Shape ishape(a.ndim(), 1);
  ishape[ax] = static_cast<int32_t>(k);
  Shape gshape = a.shape();
  gshape[ax] = static_cast<int32_t>(k);
  auto idx = broadcast_to(reshape(indices, ishape, st), gshape, st);
  auto g = array(gshape, a.dtype(),
                 std::make_shared<GatherAxis>(st, ax, "take"), {a, idx});
  return reshape(g, std::move(out_shape), st);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(reshape(a, {-1}, s), indices, 0, s);
}

array take(const array& a, int index, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "take");
  int n = a.shape(ax);
  int i = index < 0 ? index + n : index;
  if (i < 0 || i >= n) {
    throw std::out_of_range("[take] Index " + std::to_string(index) +
                            " is out of bounds for axis " + std::to_string(ax) +
                            " with size " + std::to_string(n) + ".");
  }
  Shape start(a.ndim(), 0);
  Shape stop = a.shape();
  start[ax] = i;
  stop[ax] = i + 1;
  return squeeze(slice(a, start, stop, s), ax, s);
}

array take_along_axis(const array& a, const array& indices, int axis,
                      StreamOrDevice s) {
  check_indices(indices, "take_along_axis");
  int ax = normalize_axis(axis, a.ndim(), "take_along_axis");
  check_same_ndim(a, indices, "take_along_axis");
  // Broadcast a and the indices against each other except along the axis.
  Shape sa = a.shape();
  Shape si = indices.shape();
  sa[ax] = 1;
  si[ax] = 1;
  Shape b = broadcast_shapes(sa, si, "take_along_axis");
  sa = b;
  si = b;
  sa[ax] = a.shape(ax);
  si[ax] = indices.shape(ax);
  auto st = to_stream(s);
  return array(si, a.dtype(), std::make_shared<GatherAxis>(st, ax),
               {broadcast_to(a, sa, st), broadcast_to(indices, si, st)});
}

array put_along_axis(const array& a, const array& indices, const array& values,
                     int axis, StreamOrDevice s) {
  check_indices(indices, "put_along_axis");
  int ax = normalize_axis(axis, a.ndim(), "put_along_axis");
  check_same_ndim(a, indices, "put_along_axis");
  // The output keeps a's shape (NumPy writes in place), so the indices
  // broadcast to it except along the axis, and the values to the indices.
  Shape si = a.shape();
  si[ax] = indices.shape(ax);
  if (!broadcastable_to(indices.shape(), si)) {
    throw std::invalid_argument(
        "[put_along_axis] Indices of shape " + shape_str(indices.shape()) +
        " cannot be broadcast to the array's shape " + shape_str(a.shape()) +
        " except along axis " + std::to_string(ax) + ".");
  }
  if (!broadcastable_to(values.shape(), si)) {
    throw std::invalid_argument(
        "[put_along_axis] Values of shape " + shape_str(values.shape()) +
        " cannot be broadcast to the indices' shape " + shape_str(si) + ".");
  }
  auto st = to_stream(s);
  return array(a.shape(), a.dtype(), std::make_shared<ScatterAxis>(st, ax),
               {a, broadcast_to(indices, si, st),
                broadcast_to(astype(values, a.dtype(), st), si, st)});
}

bool GatherAxis::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const GatherAxis&>(o).axis_ == axis_;
}

bool ScatterAxis::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const ScatterAxis&>(o).axis_ == axis_;
}

}  // namespace fluxion

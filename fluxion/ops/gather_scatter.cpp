#include "fluxion/ops/gather_scatter.h"

#include <algorithm>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

struct Prepared {
  std::vector<array> idx;  // broadcast to B, one dtype
  std::vector<int> axes;   // normalized
  Shape B;
};

Prepared prepare(const array& a, const std::vector<array>& indices,
                 const std::vector<int>& axes, const char* op, Stream s) {
  if (indices.size() != axes.size()) {
    throw std::invalid_argument(
        std::string("[") + op + "] Got " + std::to_string(indices.size()) +
        " index arrays for " + std::to_string(axes.size()) +
        " axes; there must be one per axis.");
  }
  if (static_cast<int>(axes.size()) > a.ndim()) {
    throw std::invalid_argument(std::string("[") + op + "] Got " +
                                std::to_string(axes.size()) +
                                " indexed axes for an array with " +
                                std::to_string(a.ndim()) + " dimensions.");
  }
  Prepared p;
  for (int ax : axes) {
    int n = normalize_axis(ax, a.ndim(), op);
    if (std::find(p.axes.begin(), p.axes.end(), n) != p.axes.end()) {
      throw std::invalid_argument(std::string("[") + op + "] Axis " +
                                  std::to_string(ax) + " is repeated in " +
                                  vec_str(axes) + ".");
    }
    p.axes.push_back(n);
  }
  for (auto& i : indices) {
    if (!is_integral(i.dtype())) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Indices must be of an integer type; got " +
                                  dtype_name(i.dtype()) + ".");
    }
    p.B = broadcast_shapes(p.B, i.shape(), op);
  }
  Dtype t = indices.empty() ? int32 : indices[0].dtype();
  for (auto& i : indices) {
    if (i.dtype() != t) {
      t = int64;  // mixed index types: one wide type for the kernel
    }
  }
  for (auto& i : indices) {
    p.idx.push_back(broadcast_to(astype(i, t, s), p.B, s));
  }
  return p;
}

array scatter_impl(const array& a, const std::vector<array>& indices,
                   const array& updates, const std::vector<int>& axes,
                   Scatter::ReduceType reduce, const char* op,
                   StreamOrDevice sd) {
  auto s = to_stream(sd);
  Prepared p = prepare(a, indices, axes, op, s);
  int nb = static_cast<int>(p.B.size());
  if (updates.ndim() != nb + a.ndim()) {
    throw std::invalid_argument(std::string("[") + op + "] Updates of shape " +
                                shape_str(updates.shape()) + " must have " +
                                std::to_string(nb + a.ndim()) +
                                " dimensions: the indices' " + shape_str(p.B) +
                                " followed by one per dimension of the array " +
                                shape_str(a.shape()) + ".");
  }
  Shape lead(updates.shape().begin(), updates.shape().begin() + nb);
  Shape U(updates.shape().begin() + nb, updates.shape().end());
  bool fits = true;
  for (int d = 0; d < nb; ++d) {
    fits &= lead[d] == 1 || lead[d] == p.B[d];
  }
  if (!fits) {
    throw std::invalid_argument(std::string("[") + op + "] Updates of shape " +
                                shape_str(updates.shape()) +
                                " cannot be broadcast to the indices' shape " +
                                shape_str(p.B) +
                                " in their leading dimensions.");
  }
  for (int d = 0; d < a.ndim(); ++d) {
    if (U[d] > a.shape(d)) {
      throw std::invalid_argument(
          std::string("[") + op + "] Update slices of shape " + shape_str(U) +
          " do not fit in the array of shape " + shape_str(a.shape()) + ".");
    }
  }
  if ((reduce == Scatter::Max || reduce == Scatter::Min) &&
      a.dtype() == complex64) {
    throw std::invalid_argument(std::string("[") + op +
                                "] complex64 arrays have no order.");
  }
  Shape full = p.B;
  full.insert(full.end(), U.begin(), U.end());
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), p.idx.begin(), p.idx.end());
  inputs.push_back(broadcast_to(astype(updates, a.dtype(), s), full, s));
  return array(a.shape(), a.dtype(),
               std::make_shared<Scatter>(s, reduce, std::move(p.axes)),
               std::move(inputs));
}

}  // namespace

array gather(const array& a, const std::vector<array>& indices,
             const std::vector<int>& axes, const Shape& slice_sizes,
             StreamOrDevice sd) {
  auto s = to_stream(sd);
  Prepared p = prepare(a, indices, axes, "gather", s);
  if (static_cast<int>(slice_sizes.size()) != a.ndim()) {
    throw std::invalid_argument(
        "[gather] Got slice sizes " + shape_str(slice_sizes) +
        " for an array with " + std::to_string(a.ndim()) +
        " dimensions; there must be one per dimension.");
  }
  for (int d = 0; d < a.ndim(); ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > a.shape(d)) {
      throw std::invalid_argument(
          "[gather] Slice sizes " + shape_str(slice_sizes) +
          " do not fit in the array of shape " + shape_str(a.shape()) + ".");
    }
  }
  Shape out = p.B;
  out.insert(out.end(), slice_sizes.begin(), slice_sizes.end());
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), p.idx.begin(), p.idx.end());
  return array(std::move(out), a.dtype(),
               std::make_shared<Gather>(s, std::move(p.axes), slice_sizes),
               std::move(inputs));
}

array gather(const array& a, const array& indices, int axis,
             const Shape& slice_sizes, StreamOrDevice s) {
  return gather(a, std::vector<array>{indices}, std::vector<int>{axis},
                slice_sizes, s);
}

#define FLUXION_SCATTER_OPS(NAME, KIND)                                      \
  array NAME(const array& a, const std::vector<array>& indices,              \
             const array& updates, const std::vector<int>& axes,             \
             StreamOrDevice s) {                                             \
    return scatter_impl(a, indices, updates, axes, Scatter::KIND, #NAME, s); \
  }                                                                          \
  array NAME(const array& a, const array& indices, const array& updates,     \
             int axis, StreamOrDevice s) {                                   \
    return NAME(a, std::vector<array>{indices}, updates,                     \
                std::vector<int>{axis}, s);                                  \
  }

FLUXION_SCATTER_OPS(scatter, None)
FLUXION_SCATTER_OPS(scatter_add, Sum)
FLUXION_SCATTER_OPS(scatter_prod, Prod)
FLUXION_SCATTER_OPS(scatter_max, Max)
FLUXION_SCATTER_OPS(scatter_min, Min)
#undef FLUXION_SCATTER_OPS

std::vector<Shape> Gather::output_shapes(const std::vector<array>& in) {
  Shape out = in.size() > 1 ? in[1].shape() : Shape{};
  out.insert(out.end(), slice_sizes_.begin(), slice_sizes_.end());
  return {out};
}

bool Gather::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& g = static_cast<const Gather&>(o);
  return g.axes_ == axes_ && g.slice_sizes_ == slice_sizes_;
}

std::vector<PrimitiveArg> Gather::state() const {
  return export_state(export_ints(axes_), export_ints(slice_sizes_));
}

std::shared_ptr<Primitive> Gather::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Gather");
  return std::make_shared<Gather>(s, a.ints(0), a.shp(1));
}

bool Scatter::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& g = static_cast<const Scatter&>(o);
  return g.axes_ == axes_ && g.reduce_ == reduce_;
}

std::vector<PrimitiveArg> Scatter::state() const {
  return export_state(int64_t{reduce_}, export_ints(axes_));
}

std::shared_ptr<Primitive> Scatter::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Scatter");
  auto reduce = a.enum_up_to(0, Min);
  return std::make_shared<Scatter>(s, reduce, a.ints(1));
}

const char* Scatter::op_name() const {
  switch (reduce_) {
    case Sum:
      return "scatter_add";
    case Prod:
      return "scatter_prod";
    case Max:
      return "scatter_max";
    case Min:
      return "scatter_min";
    default:
      return "scatter";
  }
}

}  // namespace fluxion

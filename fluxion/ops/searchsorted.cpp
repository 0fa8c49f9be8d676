#include "fluxion/ops/searchsorted.h"

#include <cmath>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;


}  // namespace

array searchsorted(const array& a, const array& v, const std::string& side,
                   const std::optional<array>& sorter, StreamOrDevice sd) {
  auto s = to_stream(sd);
  if (side != "left" && side != "right") {
    throw std::invalid_argument(
        "[searchsorted] side must be 'left' or 'right'; got '" + side + "'.");
  }
  if (a.ndim() != 1) {
    // MLX (and NumPy): one sorted sequence. vmap over it raises too.
    throw std::invalid_argument(
        "[searchsorted] The sorted array must be 1-D; got shape " +
        shape_str(a.shape()) + ".");
  }
  Dtype t = promote_types(a.dtype(), v.dtype());
  if (t == complex64) {
    throw std::invalid_argument("[searchsorted] complex64 is not supported.");
  }
  array sa = a;
  if (sorter) {
    if (!is_integral(sorter->dtype()) || sorter->shape() != a.shape()) {
      throw std::invalid_argument(
          "[searchsorted] sorter must be an integer array of a's shape " +
          shape_str(a.shape()) + "; got " + dtype_name(sorter->dtype()) +
          " of shape " + shape_str(sorter->shape()) + ".");
    }
    sa = take_along_axis(a, *sorter, -1, s);
  }
  sa = astype(sa, t, s);
  array vv = astype(v, t, s);
  auto prim = std::make_shared<SearchSorted>(s, side == "right");
  array flat = reshape(vv, {-1}, s);
  array out = array(flat.shape(), uint32, prim, {sa, flat});
  return reshape(out, v.shape(), s);
}

bool SearchSorted::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const SearchSorted&>(o).right_ == right_;
}

std::vector<PrimitiveArg> SearchSorted::state() const {
  return export_state(right_);
}

std::shared_ptr<Primitive> SearchSorted::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "SearchSorted");
  return std::make_shared<SearchSorted>(s, a.b(0));
}

// --- transformation rules: integer positions, piecewise constant ---

std::vector<array> SearchSorted::jvp(const Arrays& primals, const Arrays&,
                                     const std::vector<int>&) {
  return {zeros(primals[1].shape(), int32, stream())};
}

std::vector<array> SearchSorted::vjp(const Arrays& primals, const Arrays&,
                                     const std::vector<int>& argnums,
                                     const Arrays&) {
  return rules::zero_cotangents(primals, argnums, stream());
}

Batched SearchSorted::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  if (axes[0] >= 0) {
    throw std::invalid_argument(
        "[searchsorted] Cannot vmap over the sorted array: it must stay 1-D "
        "(map over the values instead).");
  }
  // The values may have any shape: the batch axis stays where it is.
  return {{searchsorted(inputs[0], inputs[1], right_ ? "right" : "left",
                        std::nullopt, stream())},
          {axes[1]}};
}

}  // namespace fluxion

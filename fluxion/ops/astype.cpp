#include "fluxion/ops/astype.h"

#include "fluxion/eager.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

// As MLX, a cast passes (co)tangents through, cast: also to and from
// integers (the gradient of an integer input is the cotangent cast to its
// dtype: grad of x * 1.5 at an int32 x is 1). Only bool, which has no
// neighbourhood to vary in, blocks them.
bool passes_gradient(Dtype from, Dtype to) {
  return from != bool_ && to != bool_;
}

}  // namespace

array astype(const array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) {
    return a;
  }
  return detail::elementwise_node(
      a.shape(), dtype, std::make_shared<AsType>(to_stream(s), dtype), {a});
}

// --- transformation rules ---

std::vector<array> AsType::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const auto& x = primals[0];
  if (!passes_gradient(x.dtype(), dtype_)) {
    return {zeros(x.shape(), dtype_, stream())};
  }
  return {astype(tangents[0], dtype_, stream())};
}

std::vector<PrimitiveArg> AsType::state() const { return export_state(dtype_); }

std::shared_ptr<Primitive> AsType::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "AsType");
  return std::make_shared<AsType>(s, a.dt(0));
}

std::vector<array> AsType::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>& outputs) {
  const auto& x = primals[0];
  if (!passes_gradient(x.dtype(), dtype_)) {
    return {zeros_like(x, stream())};
  }
  // Complex to real keeps the real part, so its transpose is ct + 0i; real
  // to complex is the embedding, whose transpose takes the real part: both
  // are the cast back.
  return {astype(cotangents[0], x.dtype(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, axes};
}

}  // namespace fluxion

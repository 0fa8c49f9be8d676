#include "fluxion/ops/ternary.h"

#include "fluxion/compile.h"
#include "fluxion/eager.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s) {
  auto st = to_stream(s);
  auto shape =
      broadcast_shapes(broadcast_shapes(condition.shape(), x.shape(), "where"),
                       y.shape(), "where");
  Dtype t = promote_types(x.dtype(), y.dtype());
  // Each operand's broadcast and the select itself are built by the
  // elementwise node factory (fluxion/eager.h: run at once when small and
  // computed).
  const bool shapeless = detail::in_shapeless_trace();
  const bool aligned = condition.shape() == shape && x.shape() == shape &&
                       y.shape() == shape;
  auto operand = [&](const array& a, Dtype type) {
    auto c = astype(a, type, st);
    if (shapeless && !aligned) {
      // Against the other two, so that a shapeless replay recomputes the
      // shape (shape.h, BroadcastAxes).
      std::vector<array> partners;
      for (auto* p : {&condition, &x, &y}) {
        if (p != &a) {
          partners.push_back(*p);
        }
      }
      return detail::broadcast_against(c, partners, shape, 0, st);
    }
    return detail::elementwise_broadcast(c, shape, st);
  };
  return detail::elementwise_node(
      shape, t, std::make_shared<Select>(st),
      {operand(condition, bool_), operand(x, t), operand(y, t)});
}

array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s) {
  if (!a_min && !a_max) {
    throw std::invalid_argument(
        "[clip] At least one of a_min and a_max must be given.");
  }
  Shape shape = a.shape();
  for (auto* bound : {&a_min, &a_max}) {
    if (*bound) {
      shape = broadcast_shapes(shape, (*bound)->shape(), "clip");
    }
  }
  array out = a;
  if (a_min) {
    out = maximum(out, *a_min, s);
  }
  if (a_max) {
    out = minimum(out, *a_max, s);
  }
  return out;
}

// --- transformation rules ---

std::vector<array> Select::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  auto s = stream();
  const auto& x = primals[1];
  // Tangents of x and y; one not given (or the condition's) is zero.
  std::optional<array> tx, ty;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 1) {
      tx = tangents[i];
    } else if (argnums[i] == 2) {
      ty = tangents[i];
    }
  }
  if (x.dtype() == bool_ || (!tx && !ty)) {
    return {zeros_like(x, s)};
  }
  auto zero = array(0, x.dtype());
  return {where(primals[0], tx ? *tx : zero, ty ? *ty : zero, s)};
}

std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>& outputs) {
  auto s = stream();
  const auto& cond = primals[0];
  const auto& ct = cotangents[0];
  auto zero = array(0, ct.dtype());
  std::vector<array> vjps;
  for (int arg : argnums) {
    if (arg == 0 || primals[arg].dtype() == bool_) {
      vjps.push_back(zeros_like(primals[arg], s));
    } else {
      vjps.push_back(arg == 1 ? where(cond, ct, zero, s)
                              : where(cond, zero, ct, s));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [in, ax] = rules::align_mapped_axes(inputs, axes, stream());
  Shape shape = in[0].shape();
  Dtype t = in[1].dtype();
  return {{array(std::move(shape), t, std::make_shared<Select>(stream()),
                 std::move(in))},
          {ax}};
}

}  // namespace fluxion

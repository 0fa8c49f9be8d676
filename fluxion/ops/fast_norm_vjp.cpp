// The norms' backward pass as one primitive (fast::NormVJP): its op
// function, its composed twin, and its own rules. The kernels are in
// backend/cpu/fast_norm_vjp.cpp and backend/cuda/norm_vjp.cu.
//
// Math, per row of D elements (float for the half types, double for
// float64), with xhat = (x - mean) * rstd (mean 0 for rms_norm) and
// gw = g * weight (g without a weight):
//   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))   (layer_norm)
//   dx = rstd * (gw - xhat * mean(gw * xhat))              (rms_norm)
//   dweight = sum over rows of g * xhat, dbias = sum over rows of g.
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/fast.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/primitive_args.h"
#include "fluxion/transforms.h"

namespace fluxion::fast {

namespace {

using detail::compute_dtype;

// Checks norm_vjp's operands; returns the dtype of the outputs.
Dtype check_norm_vjp(const array& x, const std::optional<array>& weight,
                     const array& g, bool layer, bool has_bias) {
  const std::string tag = "[norm_vjp] ";
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        tag +
        "Input must have at least 1 dimension but got input with 0 "
        "dimensions.");
  }
  if (g.shape() != x.shape()) {
    throw std::invalid_argument(tag + "The cotangent's shape " +
                                shape_str(g.shape()) + " must be the input's " +
                                shape_str(x.shape()) + ".");
  }
  if (has_bias && !layer) {
    throw std::invalid_argument(tag + "rms_norm has no bias.");
  }
  std::vector<array> all{x, g};
  if (weight) {
    if (weight->ndim() != 1 || weight->shape(0) != x.shape(-1)) {
      throw std::invalid_argument(tag + "weight must have shape (" +
                                  std::to_string(x.shape(-1)) +
                                  ") (the last dimension of x) but has shape " +
                                  shape_str(weight->shape()) + ".");
    }
    all.push_back(*weight);
  }
  Dtype t = result_type(all);
  if (!is_floating_point(t)) {
    throw std::invalid_argument(tag + "Received unsupported type " +
                                dtype_name(t) +
                                ": it needs a floating point type.");
  }
  return t;
}

}  // namespace

std::vector<array> norm_vjp(const array& x, const std::optional<array>& weight,
                            const array& g, float eps, bool layer,
                            bool has_bias, StreamOrDevice s) {
  Dtype t = check_norm_vjp(x, weight, g, layer, has_bias);
  auto st = to_stream(s);
  std::vector<array> in{astype(x, t, st)};
  if (weight) {
    in.push_back(astype(*weight, t, st));
  }
  in.push_back(astype(g, t, st));
  const Shape row{x.shape(-1)};
  std::vector<Shape> shapes{x.shape()};
  if (weight) {
    shapes.push_back(row);
  }
  if (has_bias) {
    shapes.push_back(row);
  }
  std::vector<Dtype> dtypes(shapes.size(), t);
  return array::make_arrays(
      std::move(shapes), dtypes,
      std::make_shared<NormVJP>(st, eps, layer, weight.has_value(), has_bias),
      in);
}

std::vector<array> norm_vjp_composed(const array& x,
                                     const std::optional<array>& weight,
                                     const array& g, float eps, bool layer,
                                     bool has_bias, StreamOrDevice s) {
  Dtype t = check_norm_vjp(x, weight, g, layer, has_bias);
  auto st = to_stream(s);
  Dtype ct = compute_dtype(t);
  // The statistics of x in the output dtype's compute type, as the kernels
  // (a float16 x with a float32 weight is normalized in float32 either
  // way).
  auto stats = detail::norm_stats(astype(x, t, st), eps, layer, st);
  auto gf = astype(g, ct, st);
  auto gw = weight ? multiply(gf, astype(*weight, ct, st), st) : gf;
  auto inner = mean(multiply(gw, stats.xhat, st), -1, true, st);
  auto centered = layer ? subtract(gw, mean(gw, -1, true, st), st) : gw;
  auto dx = multiply(subtract(centered, multiply(stats.xhat, inner, st), st),
                     stats.rstd, st);
  const std::vector<int> rows = detail::leading_axes(x.ndim());
  std::vector<array> out{astype(dx, t, st)};
  if (weight) {
    out.push_back(
        astype(sum(multiply(gf, stats.xhat, st), rows, false, st), t, st));
  }
  if (has_bias) {
    out.push_back(astype(sum(gf, rows, false, st), t, st));
  }
  return out;
}

// ---------------------------------------------------------------- rules

namespace {

// NormVJP's outputs as public ops of its inputs (x, [weight], g).
Fn composed_of(const NormVJP& p, Stream s) {
  return [eps = p.eps(), layer = p.layer(), has_weight = p.has_weight(),
          has_bias = p.has_bias(), s](const std::vector<array>& in) {
    std::optional<array> w;
    if (has_weight) {
      w = in[1];
    }
    return norm_vjp_composed(in[0], w, in.back(), eps, layer, has_bias, s);
  };
}

}  // namespace

bool NormVJP::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const NormVJP&>(o);
  return p.eps_ == eps_ && p.layer_ == layer_ && p.has_weight_ == has_weight_ &&
         p.has_bias_ == has_bias_;
}

std::vector<PrimitiveArg> NormVJP::state() const {
  return export_state(double{eps_}, layer_, has_weight_, has_bias_);
}

std::shared_ptr<Primitive> NormVJP::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "NormVJP");
  return std::make_shared<NormVJP>(s, a.f32(0), a.b(1), a.b(2), a.b(3));
}

std::vector<Shape> NormVJP::output_shapes(const std::vector<array>& in) {
  std::vector<Shape> out{in[0].shape()};
  const Shape row{in[0].shape(-1)};
  if (has_weight_) {
    out.push_back(row);
  }
  if (has_bias_) {
    out.push_back(row);
  }
  return out;
}

// Second-order gradients of the norms: the composed backward
// differentiated (a rule, so in the rules' convention; argnums sorted).
std::vector<array> NormVJP::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>&) {
  return fluxion::detail::internal_vjp(composed_of(*this, stream()), primals,
                                       cotangents, argnums)
      .second;
}

std::vector<array> NormVJP::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  // Tangents of the inputs not in argnums are zero.
  std::vector<array> all;
  for (auto& p : primals) {
    all.push_back(zeros_like(p, stream()));
  }
  for (size_t i = 0; i < argnums.size(); ++i) {
    all[argnums[i]] = tangents[i];
  }
  return fluxion::jvp(composed_of(*this, stream()), primals, all).second;
}

// A batch of gradients (per-example gradients, vmap of grad): dweight and
// dbias sum over each batch element's rows alone, which one NormVJP over
// the folded rows cannot give, so the composed form is vectorized; every
// output's batch axis is 0.
std::pair<std::vector<array>, std::vector<int>> NormVJP::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto outs = fluxion::vmap(composed_of(*this, stream()), axes)(inputs);
  std::vector<int> out_axes(outs.size(), 0);
  return {std::move(outs), std::move(out_axes)};
}

}  // namespace fluxion::fast

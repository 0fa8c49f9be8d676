// The mx.fast submodule: fused layer_norm, rms_norm, rope and
// scaled_dot_product_attention (MLX's names and keyword-only parameters).
#include "fluxion/ops/fast.h"

#include "python/src/convert.h"

namespace ff = fluxion::fast;

namespace {

std::optional<fx::array> opt_array(const py::object& o) {
  if (o.is_none()) {
    return std::nullopt;
  }
  return fxpy::to_array(o);
}

}  // namespace

void init_fast(py::module_& parent) {
  auto m = parent.def_submodule(
      "fast", "Fused operations of common layers (as MLX's mx.fast).");
  m.def(
      "rms_norm",
      [](const fx::array& x, const py::object& weight, float eps,
         fx::StreamOrDevice s) {
        return ff::rms_norm(x, opt_array(weight), eps, s);
      },
      "x"_a, "weight"_a.none(), "eps"_a, py::kw_only(), "stream"_a = py::none(),
      "Root mean square normalization over the last axis, scaled by "
      "``weight`` when it is not None.");
  m.def(
      "layer_norm",
      [](const fx::array& x, const py::object& weight, const py::object& bias,
         float eps, fx::StreamOrDevice s) {
        return ff::layer_norm(x, opt_array(weight), opt_array(bias), eps, s);
      },
      "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, py::kw_only(),
      "stream"_a = py::none(),
      "Layer normalization over the last axis with optional weight and "
      "bias.");
  m.def(
      "rope",
      [](const fx::array& a, int dims, bool traditional,
         std::optional<float> base, float scale, const py::object& offset,
         const py::object& freqs, fx::StreamOrDevice s) {
        fx::array off = fxpy::to_array(offset);
        return ff::rope(a, dims, traditional, base, scale, off,
                        opt_array(freqs), s);
      },
      "a"_a, "dims"_a, py::kw_only(), "traditional"_a, "base"_a.none(),
      "scale"_a, "offset"_a, "freqs"_a = py::none(), "stream"_a = py::none(),
      "Rotary positional encoding of the first ``dims`` features of the last "
      "axis; positions are ``offset`` plus the index along axis -2.");
  m.def(
      "scaled_dot_product_attention",
      [](const fx::array& q, const fx::array& k, const fx::array& v,
         float scale, const py::object& mask, const py::object& sinks,
         fx::StreamOrDevice s) {
        auto sk = opt_array(sinks);
        if (mask.is_none()) {
          return ff::scaled_dot_product_attention(q, k, v, scale, "",
                                                  std::nullopt, sk, s);
        }
        if (py::isinstance<py::str>(mask)) {
          return ff::scaled_dot_product_attention(
              q, k, v, scale, mask.cast<std::string>(), std::nullopt, sk, s);
        }
        return ff::scaled_dot_product_attention(q, k, v, scale, "array",
                                                fxpy::to_array(mask), sk, s);
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "scale"_a, "mask"_a = py::none(),
      "sinks"_a = py::none(), "stream"_a = py::none(),
      "softmax(scale * q @ k.T + mask) @ v with grouped-query attention; "
      "mask is None, \"causal\", a boolean mask (True keeps) or an additive "
      "mask. Hidden keys score the lowest finite value (a row that sees none "
      "is uniform). ``sinks`` (one logit per query head) joins every row's "
      "softmax without a value.");
}

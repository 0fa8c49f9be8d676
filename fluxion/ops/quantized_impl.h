// Internals shared by quantize / dequantize (quantized.cpp),
// quantized_matmul and its composites (quantized_matmul.cpp) and
// QuantizedMatmul's rules (quantized_rules.cpp): error-message helpers, the
// packed layout's arithmetic and the argument checks.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "fluxion/array.h"
#include "fluxion/ops/quantized.h"

namespace fluxion::quantized_detail {

// A dtype as operator<< writes it.
inline std::string dtype_str(Dtype t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// The start of the ops' error messages: "[op] ".
inline std::string tag(const char* op) { return std::string("[") + op + "] "; }

// The floating modes (mxfp4, nvfp4, mxfp8): uint8 scale codes, no biases.
inline bool is_fp(QuantizationMode m) { return m != QuantizationMode::affine; }

// A packed matrix holds cols * bits / 32 words per row.
inline int64_t unpacked_cols(int64_t words, int bits) {
  return words * 32 / bits;
}

// Group size and bits after MLX's defaults, validated for the mode.
std::pair<int, int> resolve_params(const char* op, QuantizationMode mode,
                                   std::optional<int> group_size,
                                   std::optional<int> bits);

// The shapes of a packed matrix and its scales (and biases) must agree.
void check_packed(const char* op, const array& w, const array& scales,
                  const std::optional<array>& biases, int group_size, int bits);

// Scales (and biases) of the mode: affine ones share a real floating
// dtype; the floating modes' are uint8 codes.
void check_scales(const char* op, QuantizationMode mode, const array& scales,
                  const std::optional<array>& biases);

// global_scale: nvfp4's only, a real floating scalar.
void check_global_scale(const char* op, QuantizationMode mode,
                        const std::optional<array>& g);

}  // namespace fluxion::quantized_detail

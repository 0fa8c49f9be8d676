// Matrix products composed from public ops: gathered (gather_mm),
// segmented along K (segmented_mm) and block-masked (block_masked_mm).
#pragma once

#include <optional>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

// Matrix products of a's matrices at `lhs_indices` (flat indices into a's
// batch dimensions) with b's at `rhs_indices`; absent indices mean every
// batch in order. Output: broadcast(index shapes) + (M, N).
array gather_mm(const array& a, const array& b,
                std::optional<array> lhs_indices = std::nullopt,
                std::optional<array> rhs_indices = std::nullopt,
                bool sorted_indices = false, StreamOrDevice s = {});

// For each segment [start, end) of the inner dimension K (segments of shape
// (..., 2)), a[:, start:end] @ b[start:end, :]. Output (..., M, N).
array segmented_mm(const array& a, const array& b, const array& segments,
                   StreamOrDevice s = {});

// matmul with block masks (block_size 32 or 64): mask_lhs (..., ceil(M/bs),
// ceil(K/bs)) and mask_rhs (..., ceil(K/bs), ceil(N/bs)) zero (bool) or
// scale (float) blocks of the operands, mask_out (..., ceil(M/bs),
// ceil(N/bs)) blocks of the product.
array block_masked_mm(const array& a, const array& b, int block_size = 64,
                      const std::optional<array>& mask_out = std::nullopt,
                      const std::optional<array>& mask_lhs = std::nullopt,
                      const std::optional<array>& mask_rhs = std::nullopt,
                      StreamOrDevice s = {});

}  // namespace fluxion

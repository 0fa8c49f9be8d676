// Einstein summation, with NumPy's subscripts and contraction order.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

// Einstein summation: "ij,jk->ik", or an implicit output (the letters used
// once, sorted). A letter repeated within an operand takes its diagonal.
// Operands are contracted pairwise with matmul, greedily picking the pair
// with the smallest intermediate result first.
array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s = {});
// The pairwise contraction order einsum uses (each pair indexes the current
// operand list; the pair's result is appended at the end) and a readable
// description of it.
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands);

}  // namespace fluxion

// Array manipulation composites from MLX: diagonals, trace, roll, meshgrid
// and kron. They are built from views, slices, concatenation and
// broadcasting, so they need no primitives or transformation rules of their
// own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

// 1-D input: a square matrix with `a` on diagonal k. 2-D input: diagonal k.
array diag(const array& a, int k = 0, StreamOrDevice s = {});
// The diagonal of the (axis1, axis2) planes, appended as the last axis.
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
               StreamOrDevice s = {});
// Sum of diagonal(a, offset, axis1, axis2), accumulated in `dtype`.
array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype,
            StreamOrDevice s = {});
array trace(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
            StreamOrDevice s = {});

// Elements shifted by `shift` along `axis`, wrapping around; without axes,
// over the flattened array (the shape is kept).
array roll(const array& a, int shift, StreamOrDevice s = {});
array roll(const array& a, int shift, int axis, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s = {});

// Coordinate grids; `indexing` is "xy" (Cartesian) or "ij" (matrix).
std::vector<array> meshgrid(const std::vector<array>& arrays,
                            bool sparse = false,
                            const std::string& indexing = "xy",
                            StreamOrDevice s = {});

// Kronecker product (block matrix of a[i] * b).
array kron(const array& a, const array& b, StreamOrDevice s = {});

}  // namespace fluxion

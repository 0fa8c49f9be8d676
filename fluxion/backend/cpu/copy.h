// Copies between layouts, with dtype conversion.
#pragma once

#include "fluxion/array.h"

namespace fluxion::cpu {

// Copy `src` (any strides, broadcasts included) into `dst`'s memory laid out
// with `dst_strides` starting `dst_offset` elements into dst's buffer,
// converting the dtype. `shape` is the shape of the region copied.
void copy_region(const array& src, const Strides& src_strides,
                 int64_t src_offset, array& dst, const Strides& dst_strides,
                 int64_t dst_offset, const Shape& shape);

// Copy the first `n` elements of `src`'s buffer into `dst`'s, converting the
// dtype (both dense; `n` may pass 2^31, which a Shape cannot hold).
void copy_flat(const array& src, array& dst, int64_t n);

// Give `dst` fresh row-contiguous memory and fill it from `src` in row-major
// order (`dst` may have another shape of the same size, as in Reshape).
void copy_to_row_contiguous(const array& src, array& dst);

// A row-contiguous version of `a`: `a` itself when it already is, else a
// fresh copy (an array outside any graph, for use inside kernels).
array ensure_row_contiguous(const array& a);

}  // namespace fluxion::cpu

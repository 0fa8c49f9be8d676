// The view kernels (see views.h): they only compute strides; the outputs
// share their inputs' buffers, whatever device holds them.
#include "fluxion/backend/common/views.h"

#include "fluxion/backend/common/layout.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "fluxion/ops/custom.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/tracer_copy.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace common {

using detail::view_data_size;

void make_view(const array& in, array& out, const Strides& strides,
               int64_t offset) {
  if (out.size() == 0) {
    // No element is ever read, so any strides do; row-major ones send every
    // kernel down its flat path, which handles size 0 (the strided paths
    // divide by the innermost extent).
    Strides rm = row_major_strides(out.shape());
    out.copy_shared_buffer(in, rm, layout_flags(out.shape(), rm, 0), 0);
    return;
  }
  size_t ds = view_data_size(out.shape(), strides);
  out.copy_shared_buffer(in, strides, layout_flags(out.shape(), strides, ds),
                         ds, offset);
}

}  // namespace common

namespace {

using common::make_view;

// Strides under which `out_shape` walks the elements of (shape, strides) in
// the same row-major order, if there are any (NumPy's no-copy reshape).
// Dimensions are matched in groups of equal product; the input dimensions of
// a group must be nested (stride[k] == stride[k+1] * shape[k+1]), which also
// holds for runs of broadcast (stride 0) dimensions.
std::optional<Strides> reshape_strides(const Shape& shape,
                                       const Strides& strides,
                                       const Shape& out_shape) {
  Shape os;
  Strides ost;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      os.push_back(shape[i]);
      ost.push_back(strides[i]);
    }
  }
  size_t on = os.size(), nn = out_shape.size();
  Strides ns(nn, 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    int64_t np = out_shape[ni], op = os[oi];
    while (np != op) {
      if (np < op) {
        np *= out_shape[nj++];
      } else {
        op *= os[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k) {
      if (ost[k] != ost[k + 1] * os[k + 1]) {
        return std::nullopt;
      }
    }
    ns[nj - 1] = ost[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) {
      ns[k - 1] = ns[k] * out_shape[k];
    }
    ni = nj++;
    oi = oj++;
  }
  // Trailing size-1 dimensions: any stride works.
  int64_t last = ni >= 1 ? ns[ni - 1] : 1;
  for (size_t k = ni; k < nn; ++k) {
    ns[k] = last;
  }
  return ns;
}

// Outputs share the buffers of the inputs from `first` on.
void forward(const std::vector<array>& inputs, std::vector<array>& outputs,
             size_t first) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[first + i]);
  }
}

}  // namespace

// A layout no strides can express is copied to row-major order by the
// backend first (the output has another shape, so viewing the copy with
// the output's row-major strides is the reshape).
bool Reshape::eval_view(const std::vector<array>& in,
                        std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  if (a.flags().row_contiguous || a.size() == 0) {
    make_view(a, o, row_major_strides(o.shape()));
    return true;
  }
  if (auto st = reshape_strides(a.shape(), a.strides(), o.shape())) {
    make_view(a, o, *st);
    return true;
  }
  return false;
}

bool Transpose::eval_view(const std::vector<array>& in,
                          std::vector<array>& out) {
  Strides strides;
  for (int ax : axes_) {
    strides.push_back(in[0].strides()[ax]);
  }
  make_view(in[0], out[0], strides);
  return true;
}

bool Broadcast::eval_view(const std::vector<array>& in,
                          std::vector<array>& out) {
  // The node's shape, not shape_: a BroadcastAxes node replayed by a
  // shapeless compile has a shape recomputed from its inputs'.
  const array& a = in[0];
  const Shape& shape = out[0].shape();
  Strides strides(shape.size(), 0);
  size_t diff = shape.size() - a.ndim();
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) != 1) {
      strides[diff + i] = a.strides()[i];
    }
  }
  make_view(a, out[0], strides);
  return true;
}

bool ExpandDims::eval_view(const std::vector<array>& in,
                           std::vector<array>& out) {
  Strides strides = in[0].strides();
  for (int ax : axes_) {
    // Any stride works for a size-1 axis; this one keeps row-major arrays
    // row-major.
    int64_t st = ax < static_cast<int>(strides.size())
                     ? strides[ax] * out[0].shape(ax + 1)
                     : 1;
    strides.insert(strides.begin() + ax, st);
  }
  make_view(in[0], out[0], strides);
  return true;
}

bool Squeeze::eval_view(const std::vector<array>& in,
                        std::vector<array>& out) {
  Strides strides;
  for (int i = 0; i < in[0].ndim(); ++i) {
    if (!std::binary_search(axes_.begin(), axes_.end(), i)) {
      strides.push_back(in[0].strides()[i]);
    }
  }
  make_view(in[0], out[0], strides);
  return true;
}

bool Slice::eval_view(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  Strides strides(a.ndim());
  int64_t offset = 0;
  for (int i = 0; i < a.ndim(); ++i) {
    strides[i] = a.strides()[i] * strides_[i];
    offset += start_[i] * a.strides()[i];
  }
  make_view(a, out[0], strides, offset);
  return true;
}

// A view of the row-major elements (a strided input is copied first).
bool AsStrided::eval_view(const std::vector<array>& in,
                          std::vector<array>& out) {
  const array& a = in[0];
  if (!a.flags().row_contiguous) {
    return false;
  }
  size_t ds = detail::view_data_size(shape_, strides_);
  out[0].copy_shared_buffer(a, strides_, layout_flags(shape_, strides_, ds),
                            ds, static_cast<int64_t>(offset_));
  return true;
}

// The row-major bytes read as another dtype (a strided input is copied
// first).
bool View::eval_view(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  if (!a.flags().row_contiguous) {
    return false;
  }
  Strides st = row_major_strides(o.shape());
  o.copy_shared_buffer(a, st, layout_flags(o.shape(), st, o.size()), o.size(),
                       0);
  return true;
}

bool Contiguous::eval_view(const std::vector<array>& in,
                           std::vector<array>& out) {
  auto f = in[0].flags();
  if (f.row_contiguous || (allow_col_major_ && f.col_contiguous)) {
    out[0].copy_shared_buffer(in[0]);
    return true;
  }
  return false;
}

bool StopGradient::eval_view(const std::vector<array>& in,
                             std::vector<array>& out) {
  out[0].copy_shared_buffer(in[0]);
  return true;
}

// No kernel: the output is the input's buffer. On the GPU it still copies
// (Copy's kernel) until sharing has run there (branch gpu-next2).
void TracerCopy::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  out[0].copy_shared_buffer(in[0]);
}
void TracerCopy::eval_gpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  Copy::eval_gpu(in, out);
}

bool Depends::eval_view(const std::vector<array>& in,
                        std::vector<array>& out) {
  forward(in, out, 0);
  return true;
}

bool CustomTransforms::eval_view(const std::vector<array>& in,
                                 std::vector<array>& out) {
  forward(in, out, in.size() - out.size());
  return true;
}

}  // namespace fluxion

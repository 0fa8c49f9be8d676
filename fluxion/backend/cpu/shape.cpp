// Views: these kernels only compute strides; the output shares the input's
// buffer. Reshape copies only when the input layout cannot be viewed.
// Slice updates, concatenation and padding write fresh buffers.
#include "fluxion/ops/shape.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

using detail::view_data_size;

void view(const array& in, array& out, const Strides& strides,
          int64_t offset = 0) {
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

}  // namespace

void Reshape::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  if (a.flags().row_contiguous || a.size() == 0) {
    view(a, o, row_major_strides(o.shape()));
    return;
  }
  if (auto st = reshape_strides(a.shape(), a.strides(), o.shape())) {
    view(a, o, *st);
    return;
  }
  // Copy into row-major order, then the reshape is free. (The output has
  // another shape, so the copy walks the input's shape with the row-major
  // strides of that shape.)
  o.set_data(o.nbytes());
  cpu::copy_region(a, a.strides(), 0, o, row_major_strides(a.shape()), 0,
                   a.shape());
}

void Transpose::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  Strides strides;
  for (int ax : axes_) {
    strides.push_back(in[0].strides()[ax]);
  }
  view(in[0], out[0], strides);
}

void Broadcast::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  const array& a = in[0];
  Strides strides(shape_.size(), 0);
  size_t diff = shape_.size() - a.ndim();
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) != 1) {
      strides[diff + i] = a.strides()[i];
    }
  }
  view(a, out[0], strides);
}

void ExpandDims::eval_cpu(const std::vector<array>& in,
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
  view(in[0], out[0], strides);
}

void Squeeze::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  Strides strides;
  for (int i = 0; i < in[0].ndim(); ++i) {
    if (!std::binary_search(axes_.begin(), axes_.end(), i)) {
      strides.push_back(in[0].strides()[i]);
    }
  }
  view(in[0], out[0], strides);
}

void Slice::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  Strides strides(a.ndim());
  int64_t offset = 0;
  for (int i = 0; i < a.ndim(); ++i) {
    strides[i] = a.strides()[i] * strides_[i];
    offset += start_[i] * a.strides()[i];
  }
  view(a, o, strides, offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  const array& src = in[0];
  const array& upd = in[1];
  array& o = out[0];
  if (src.is_donatable()) {
    o.move_shared_buffer(src);
  } else {
    cpu::copy_to_row_contiguous(src, o);
  }
  if (upd.size() == 0) {
    return;
  }
  Strides region(o.ndim());
  int64_t offset = 0;
  for (int i = 0; i < o.ndim(); ++i) {
    region[i] = o.strides()[i] * strides_[i];
    offset += start_[i] * o.strides()[i];
  }
  cpu::copy_region(upd, upd.strides(), 0, o, region, offset, upd.shape());
}

void Concatenate::eval_cpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  array& o = out[0];
  o.set_data(o.nbytes());
  int64_t offset = 0;
  for (auto& x : in) {
    cpu::copy_region(x, x.strides(), 0, o, o.strides(), offset, x.shape());
    offset += x.shape(axis_) * o.strides()[axis_];
  }
}

void Pad::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  const array& value = in[1];
  array& o = out[0];
  o.set_data(o.nbytes());
  // Fill everything, then copy the interior over it: simpler than filling
  // only the border, and the border is usually most of the extra work anyway.
  dispatch_bytes(o.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, value.raw_data(), sizeof(T));
    T* p = o.data<T>();
    cpu::parallel_for(
        o.size(), cpu::kElementwiseGrain * 4,
        [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
  int64_t offset = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    offset += low_[i] * o.strides()[axes_[i]];
  }
  cpu::copy_region(a, a.strides(), 0, o, o.strides(), offset, a.shape());
}

}  // namespace fluxion

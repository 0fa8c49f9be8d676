#include "fluxion/backend/cpu/copy.h"

#include <cstring>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/strided.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion::cpu {

namespace {

template <typename In, typename Out>
void copy_typed(const In* src, Out* dst, Dims shape,
                std::array<Strides, 2> strides) {
  collapse_dims(shape, strides);
  int64_t rows = outer_rows(shape);
  int64_t inner = shape.back();
  bool flat = shape.size() == 1 && strides[0][0] == 1 && strides[1][0] == 1;
  if (flat) {
    if constexpr (std::is_same_v<In, Out>) {
      parallel_for(inner, kElementwiseGrain * 4, [&](int64_t b, int64_t e) {
        std::memcpy(dst + b, src + b, (e - b) * sizeof(In));
      });
    } else {
      parallel_for(inner, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          dst[i] = cast_value<Out>(src[i]);
        }
      });
    }
    return;
  }
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
  parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    for_each_run<2>(shape, strides, b, e,
                    [&](const std::array<int64_t, 2>& off, int64_t n,
                        const std::array<int64_t, 2>& st) {
                      const In* s = src + off[0];
                      Out* d = dst + off[1];
                      if (st[0] == 1 && st[1] == 1) {
                        for (int64_t i = 0; i < n; ++i) {
                          d[i] = cast_value<Out>(s[i]);
                        }
                      } else {
                        for (int64_t i = 0; i < n; ++i) {
                          d[i * st[1]] = cast_value<Out>(s[i * st[0]]);
                        }
                      }
                    });
  });
}

}  // namespace

void copy_flat(const array& src, array& dst, int64_t n) {
  if (n <= 0) {
    return;
  }
  auto run = [&](auto in_tag, auto out_tag) {
    using In = typename decltype(in_tag)::type;
    using Out = typename decltype(out_tag)::type;
    copy_typed<In, Out>(src.data<In>(), dst.data<Out>(), Dims{n},
                        {Strides{1}, Strides{1}});
  };
  if (src.dtype() == dst.dtype()) {
    dispatch_bytes(src.dtype(), [&](auto tag) { run(tag, tag); });
  } else {
    dispatch_all(src.dtype(), [&](auto in_tag) {
      dispatch_all(dst.dtype(), [&](auto out_tag) { run(in_tag, out_tag); });
    });
  }
}

void copy_region(const array& src, const Strides& src_strides,
                 int64_t src_offset, array& dst, const Strides& dst_strides,
                 int64_t dst_offset, const Shape& shape) {
  if (shape_size(shape) == 0) {
    return;
  }
  auto run = [&](auto in_tag, auto out_tag) {
    using In = typename decltype(in_tag)::type;
    using Out = typename decltype(out_tag)::type;
    copy_typed<In, Out>(src.data<In>() + src_offset,
                        dst.data<Out>() + dst_offset, to_dims(shape),
                        {src_strides, dst_strides});
  };
  if (src.dtype() == dst.dtype()) {
    // Moving bytes needs one instantiation per width only.
    dispatch_bytes(src.dtype(), [&](auto tag) { run(tag, tag); });
  } else {
    dispatch_all(src.dtype(), [&](auto in_tag) {
      dispatch_all(dst.dtype(), [&](auto out_tag) { run(in_tag, out_tag); });
    });
  }
}

void copy_to_row_contiguous(const array& src, array& dst) {
  dst.set_data(dst.nbytes());
  // Row-major strides of src's shape: dst may have another shape with the
  // same size (Reshape), and the memory order is the same.
  copy_region(src, src.strides(), 0, dst, row_major_strides(src.shape()), 0,
              src.shape());
}

array ensure_row_contiguous(const array& a) {
  if (a.flags().row_contiguous) {
    return a;
  }
  array out(a.shape(), a.dtype(), nullptr, {});
  copy_to_row_contiguous(a, out);
  out.set_status(array::Status::available);
  return out;
}

}  // namespace fluxion::cpu

// Kernel templates for elementwise unary and binary ops on any layout.
// Paths, fastest first: flat loop over contiguous data (inputs laid out the
// same way), scalar-broadcast against contiguous, and a general strided walk
// over collapsed dimensions. Outputs reuse (donate) an input buffer when
// nothing else can see it.
#pragma once

#include <cstring>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/strided.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion::cpu {

// Output memory for an elementwise op whose output has the layout of `like`
// (dense, `like.data_size()` elements): donate `like` when possible.
template <typename Out>
void alloc_like(const array& like, array& out, bool may_donate) {
  if (may_donate && like.itemsize() == sizeof(Out) && like.is_donatable()) {
    out.move_shared_buffer(like);
    return;
  }
  out.set_data(detail::make_small_shared<Data>(
                   std::max<size_t>(like.data_size(), 1) * sizeof(Out)),
               like.data_size(), like.strides(), like.flags());
}

template <typename In, typename Out, typename Op>
void unary_kernel(const array& in, array& out, Op op,
                  int64_t grain = kElementwiseGrain) {
  using M = opmath_t<In>;
  if (in.flags().contiguous) {
    alloc_like<Out>(in, out, true);
    const In* src = in.data<In>();
    Out* dst = out.data<Out>();
    parallel_for(in.data_size(), grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        dst[i] = static_cast<Out>(op(static_cast<M>(src[i])));
      }
    });
    return;
  }
  out.set_data(out.nbytes());
  auto shape = to_dims(in.shape());
  std::array<Strides, 2> st{in.strides(), out.strides()};
  collapse_dims(shape, st);
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  int64_t rows = outer_rows(shape);
  parallel_for(rows, row_grain(grain, shape.back()),
               [&](int64_t b, int64_t e) {
                 for_each_run<2>(shape, st, b, e,
                                 [&](auto& off, int64_t n, auto& s) {
                                   const In* x = src + off[0];
                                   Out* y = dst + off[1];
                                   for (int64_t i = 0; i < n; ++i) {
                                     y[i * s[1]] = static_cast<Out>(
                                         op(static_cast<M>(x[i * s[0]])));
                                   }
                                 });
               });
}

// Both inputs have the output's shape (ops broadcast before the primitive).
template <typename In, typename Out, typename Op>
void binary_kernel(const array& a, const array& b, array& out, Op op,
                   int64_t grain = kElementwiseGrain) {
  using M = opmath_t<In>;
  const bool a_scalar = a.data_size() == 1;
  const bool b_scalar = b.data_size() == 1;
  const bool same_layout = a.flags().contiguous && b.flags().contiguous &&
                           a.strides() == b.strides() &&
                           a.data_size() == b.data_size();
  auto flat = [&](auto f) {
    parallel_for(out.data_size(), grain, [&](int64_t lo, int64_t hi) {
      f(lo, hi);
    });
  };
  if (same_layout || (a_scalar && b.flags().contiguous) ||
      (b_scalar && a.flags().contiguous)) {
    const array& like = (a_scalar && !b_scalar) ? b : a;
    // Donate an input that has the output's layout and no other user.
    auto donate = [&](const array& x) {
      if (x.data_size() == like.data_size() && x.itemsize() == sizeof(Out) &&
          x.is_donatable()) {
        out.move_shared_buffer(x);
        return true;
      }
      return false;
    };
    if (!donate(a) && !donate(b)) {
      alloc_like<Out>(like, out, false);
    }
    const In* x = a.data<In>();
    const In* y = b.data<In>();
    Out* z = out.data<Out>();
    if (a_scalar && !b_scalar) {
      M xs = static_cast<M>(x[0]);
      flat([&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          z[i] = static_cast<Out>(op(xs, static_cast<M>(y[i])));
        }
      });
    } else if (b_scalar && !a_scalar) {
      M ys = static_cast<M>(y[0]);
      flat([&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          z[i] = static_cast<Out>(op(static_cast<M>(x[i]), ys));
        }
      });
    } else {
      flat([&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          z[i] = static_cast<Out>(
              op(static_cast<M>(x[i]), static_cast<M>(y[i])));
        }
      });
    }
    return;
  }
  out.set_data(out.nbytes());
  auto shape = to_dims(out.shape());
  std::array<Strides, 3> st{a.strides(), b.strides(), out.strides()};
  collapse_dims(shape, st);
  const In* x = a.data<In>();
  const In* y = b.data<In>();
  Out* z = out.data<Out>();
  parallel_for(outer_rows(shape), row_grain(grain, shape.back()),
               [&](int64_t lo, int64_t hi) {
                 for_each_run<3>(
                     shape, st, lo, hi, [&](auto& off, int64_t n, auto& s) {
                       const In* xa = x + off[0];
                       const In* yb = y + off[1];
                       Out* zc = z + off[2];
                       if (s[0] == 1 && s[1] == 1) {
                         for (int64_t i = 0; i < n; ++i) {
                           zc[i] = static_cast<Out>(op(
                               static_cast<M>(xa[i]), static_cast<M>(yb[i])));
                         }
                       } else {
                         for (int64_t i = 0; i < n; ++i) {
                           zc[i] = static_cast<Out>(
                               op(static_cast<M>(xa[i * s[0]]),
                                  static_cast<M>(yb[i * s[1]])));
                         }
                       }
                     });
               });
}

}  // namespace fluxion::cpu

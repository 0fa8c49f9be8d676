// The CPU kernel of Select (where).
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/ops/ternary.h"

namespace fluxion {

void Select::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& c = in[0];
  const array& x = in[1];
  const array& y = in[2];
  array& o = out[0];
  o.set_data(o.nbytes());
  // A bit mask select (T is an unsigned integer of the element's size)
  // rather than `c ? a : b`, which GCC compiles to a branch: with a
  // data-dependent condition (relu masks, dropout) that branch mispredicts
  // half the time, which made where ~20x slower than an add.
  const int64_t n = o.size();
  auto dense_or_scalar = [n](const array& a) {
    return (a.flags().row_contiguous && static_cast<int64_t>(a.data_size()) == n) ||
           a.data_size() == 1;
  };
  if (o.flags().row_contiguous && dense_or_scalar(c) && dense_or_scalar(x) &&
      dense_or_scalar(y)) {
    // Flat path over all elements (split over the pool); a scalar input
    // is read with step 0.
    const int64_t sc = c.data_size() == 1 && n != 1 ? 0 : 1;
    const int64_t sx = x.data_size() == 1 && n != 1 ? 0 : 1;
    const int64_t sy = y.data_size() == 1 && n != 1 ? 0 : 1;
    dispatch_bytes(o.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool* cp = c.data<bool>();
      const T* xp = x.data<T>();
      const T* yp = y.data<T>();
      T* op = o.data<T>();
      cpu::parallel_for(n, cpu::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
        if (sc == 1 && sx == 1 && sy == 1) {
          // The common case; unit strides let the loop vectorize.
          for (int64_t i = lo; i < hi; ++i) {
            T m = T(0) - static_cast<T>(cp[i] != 0);
            op[i] = static_cast<T>((xp[i] & m) | (yp[i] & ~m));
          }
          return;
        }
        for (int64_t i = lo; i < hi; ++i) {
          T m = T(0) - static_cast<T>(cp[i * sc] != 0);
          op[i] = static_cast<T>((xp[i * sx] & m) | (yp[i * sy] & ~m));
        }
      });
    });
    return;
  }
  auto shape = cpu::to_dims(o.shape());
  std::array<Strides, 4> st{c.strides(), x.strides(), y.strides(),
                            o.strides()};
  cpu::collapse_dims(shape, st);
  dispatch_bytes(o.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* cp = c.data<bool>();
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    T* op = o.data<T>();
    cpu::parallel_for(
        cpu::outer_rows(shape),
        cpu::row_grain(cpu::kElementwiseGrain, shape.back()),
        [&](int64_t lo, int64_t hi) {
          cpu::for_each_run<4>(shape, st, lo, hi,
                               [&](auto& off, int64_t len, auto& s) {
                                 for (int64_t i = 0; i < len; ++i) {
                                   T m = T(0) - static_cast<T>(
                                                    cp[off[0] + i * s[0]] != 0);
                                   op[off[3] + i * s[3]] = static_cast<T>(
                                       (xp[off[1] + i * s[1]] & m) |
                                       (yp[off[2] + i * s[2]] & ~m));
                                 }
                               });
        });
  });
}

}  // namespace fluxion

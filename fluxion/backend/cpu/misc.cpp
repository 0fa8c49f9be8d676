#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/ops/misc.h"

namespace fluxion {

void AsType::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  auto& a = in[0];
  auto& o = out[0];
  if (a.flags().contiguous) {
    // Keep the input's (dense) layout; convert element by element.
    o.set_data(std::make_shared<Data>(std::max<size_t>(a.data_size(), 1) *
                                      o.itemsize()),
               a.data_size(), a.strides(), a.flags());
    cpu::copy_flat(a, o, static_cast<int64_t>(a.data_size()));
    return;
  }
  cpu::copy_to_row_contiguous(a, o);
}

void Select::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& c = in[0];
  const array& x = in[1];
  const array& y = in[2];
  array& o = out[0];
  o.set_data(o.nbytes());
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
                               [&](auto& off, int64_t n, auto& s) {
                                 for (int64_t i = 0; i < n; ++i) {
                                   op[off[3] + i * s[3]] =
                                       cp[off[0] + i * s[0]]
                                           ? xp[off[1] + i * s[1]]
                                           : yp[off[2] + i * s[2]];
                                 }
                               });
        });
  });
}

}  // namespace fluxion

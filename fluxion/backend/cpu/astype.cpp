// The CPU kernel of AsType.
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/ops/astype.h"

namespace fluxion {

void AsType::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  auto& a = in[0];
  auto& o = out[0];
  if (a.flags().contiguous) {
    // Keep the input's (dense) layout; convert element by element.
    o.set_data(detail::make_small_shared<Data>(
                   std::max<size_t>(a.data_size(), 1) * o.itemsize()),
               a.data_size(), a.strides(), a.flags());
    cpu::copy_flat(a, o, static_cast<int64_t>(a.data_size()));
    return;
  }
  cpu::copy_to_row_contiguous(a, o);
}

}  // namespace fluxion

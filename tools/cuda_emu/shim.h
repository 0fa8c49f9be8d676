// Host emulation of the CUDA features the fused-layer kernels use, so
// their indexing, reductions and numerics can be checked on a machine
// without a GPU (tools/cuda_emu/run.sh): blocks run one after another, at
// most emu_grid_cap of them (the kernels' grid-stride loops cover the
// rest), each thread of a block a std::thread; __shared__ arrays become
// function-static; __syncthreads and warp shuffles go through
// std::barrier. Not a model of the GPU's memory, timing or limits beyond
// the launch checks in emu_launch.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
struct EmuIdx {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmuIdx emu_threadIdx, emu_blockIdx;
inline EmuIdx emu_blockDim, emu_gridDim;
inline thread_local int emu_lane, emu_warp;
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
#undef __shared__
#define __shared__ static
#undef __global__
#define __global__
#undef __launch_bounds__
#define __launch_bounds__(...)
inline std::barrier<>* emu_bar;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bars;
inline std::vector<uint64_t> emu_slots;
inline void __syncthreads() { emu_bar->arrive_and_wait(); }
template <typename T>
T emu_shfl(T v, int src) {
  static_assert(sizeof(T) <= 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  emu_slots[emu_warp * 32 + emu_lane] = bits;
  emu_warp_bars[emu_warp]->arrive_and_wait();
  uint64_t got = emu_slots[emu_warp * 32 + (src & 31)];
  emu_warp_bars[emu_warp]->arrive_and_wait();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int o) {
  return emu_shfl(v, emu_lane ^ o);
}
template <typename T>
T __shfl_down_sync(unsigned, T v, int d) {
  return emu_shfl(v, emu_lane + d < 32 ? emu_lane + d : emu_lane);
}
inline int atomicCAS(int* p, int c, int v) {
  int o = *p;
  if (o == c) *p = v;
  return o;
}
inline int atomicExch(int* p, int v) {
  int o = *p;
  *p = v;
  return o;
}
inline void __threadfence_system() {}
// FLUXION_SHARED_ARRAY (kernels.cuh) again for the host: `static` cannot
// follow its alignas. emu_post.h redefines it after kernels.cuh.
alignas(16) inline unsigned char emu_dyn_smem[256 * 1024];
inline unsigned emu_grid_cap = 3;
template <typename G, typename B, typename F>
void emu_launch(G grid, B block, size_t smem, cudaStream_t, F f) {
  unsigned g = static_cast<unsigned>(grid), nb = static_cast<unsigned>(block);
  if (g == 0 || nb == 0 || nb > 1024 || smem > 48 * 1024) {
    fprintf(stderr, "bad launch %u %u %zu\n", g, nb, smem);
    abort();
  }
  if (g > emu_grid_cap) g = emu_grid_cap;
  emu_gridDim = {g, 1, 1};
  emu_blockDim = {nb, 1, 1};
  unsigned nw = (nb + 31) / 32;
  if (nb % 32 != 0) {
    fprintf(stderr, "block not a multiple of 32: %u\n", nb);
  }
  for (unsigned b = 0; b < g; ++b) {
    std::barrier<> bar(nb);
    emu_bar = &bar;
    emu_warp_bars.clear();
    for (unsigned w = 0; w < nw; ++w)
      emu_warp_bars.push_back(std::make_unique<std::barrier<>>(32));
    emu_slots.assign(nw * 32, 0);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nb; ++t) {
      ts.emplace_back([&, t, b] {
        emu_threadIdx = {t, 0, 0};
        emu_blockIdx = {b, 0, 0};
        emu_lane = t % 32;
        emu_warp = t / 32;
        f();
      });
    }
    for (auto& t : ts) t.join();
  }
}

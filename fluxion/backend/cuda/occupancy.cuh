// Occupancy queries for kernels that size their grid to the GPU
// (persistent blocks, key splits): cached, since the runtime's query costs
// microseconds of host time, as much as a short kernel runs.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

namespace fluxion::cu {

// Blocks of `threads` threads with `smem` bytes of dynamic shared memory
// that one SM of the current device holds for `kernel` (0 on an error,
// which is cleared), and the device's SM count. Cached: the runtime's
// occupancy query costs microseconds of host time, as much as a short
// kernel runs, and persistent kernels size their grid with it per launch.
inline int blocks_per_sm(const void* kernel, int threads, size_t smem) {
  struct Entry {
    const void* kernel;
    int threads, dev;
    size_t smem;
    int blocks;
  };
  static std::mutex mu;
  static std::vector<Entry> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const Entry& e : cache) {
      if (e.kernel == kernel && e.threads == threads && e.dev == dev &&
          e.smem == smem) {
        return e.blocks;
      }
    }
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads,
                                                    smem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache.push_back({kernel, threads, dev, smem, blocks});
  return blocks;
}
inline int sm_count() {
  static std::mutex mu;
  static std::vector<int> counts;  // by device, 0 = not read yet
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(counts.size()) <= dev) {
    counts.resize(dev + 1, 0);
  }
  if (counts[dev] == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) ==
        cudaSuccess) {
      counts[dev] = n;
    } else {
      cudaGetLastError();
    }
  }
  return counts[dev];
}

}  // namespace fluxion::cu

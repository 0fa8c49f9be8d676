// Tiles of a scan in shared memory (load_scanned, store_tile: scan.cu's
// block-per-row kernel and the look-back scan share them), and a
// single-pass scan of a few long rows with decoupled look-back (the
// method Merrill and Garland describe for CUB): each block scans one tile
// of 4096 elements, publishes the tile's total at once, then looks back
// over the tiles before it, 32 at a time, until it meets one whose
// inclusive prefix is known, and publishes its own. Every element is read
// and written once; the look-back moves a few bytes per tile. scan.cu
// chooses when it applies.
//
// Tiles are numbered in the order blocks start (an atomic counter), not by
// blockIdx: a block then waits only on tiles that running blocks hold, and
// those publish their totals without waiting, so the scan cannot deadlock
// whatever order the GPU schedules blocks in. Tile numbers run over the
// rows one after another; a row's first tile starts its own prefix.
//
// Only for 4-byte accumulators (float, int32, uint32) of sum, product, max
// and min: a tile's state and value then share one 64-bit word, written
// and read whole, so a reader never sees a state with another tile's
// value. Values combine as op(earlier, later) everywhere, as the CPU's
// running accumulator does.
#pragma once

#include <cuda/atomic>

#include "fluxion/backend/cuda/kernels.cuh"

namespace fluxion::scan_tiles {

// Shared-memory slot of tile element k: one pad word per 32 elements, so
// the blocked reads (thread t, items t * IPT + j) hit distinct banks.
__device__ __forceinline__ int slot(int k) { return k + (k >> 5); }

// Tile [base, base + THREADS * IPT) of a row of n elements (scan position
// p at memory position p, or n - 1 - p in reverse; past the end the
// identity), loaded with striped, coalesced reads through `buf` (THREADS
// * IPT + THREADS * IPT / 32 values) and scanned in registers: v[j] of
// thread t is the inclusive scan of its IPT consecutive elements through
// t * IPT + j. Ends with `buf` free to reuse after a barrier.
template <int THREADS, int IPT, typename Op, typename In, typename M,
          typename C>
__device__ __forceinline__ void load_scanned(const In* xr, int64_t n,
                                             int64_t base, bool reverse,
                                             M* buf, M (&v)[IPT], C op) {
  const int t = threadIdx.x;
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    const int k = j * THREADS + t;
    const int64_t p = base + k;
    buf[slot(k)] =
        p < n ? cu::convert<M>(xr[reverse ? n - 1 - p : p]) : Op::init();
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    v[j] = buf[slot(t * IPT + j)];
  }
#pragma unroll
  for (int j = 1; j < IPT; ++j) {
    v[j] = op(v[j - 1], v[j]);
  }
}

// The outputs of the tile's elements, o[j] of thread t for element t * IPT
// + j, written back through `buf` as coalesced stores (positions as in
// load_scanned). The caller syncs before reusing `buf`.
template <int THREADS, int IPT, typename Out, typename M>
__device__ __forceinline__ void store_tile(Out* yr, int64_t n, int64_t base,
                                           bool reverse, M* buf,
                                           const M (&o)[IPT]) {
  const int t = threadIdx.x;
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    buf[slot(t * IPT + j)] = o[j];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    const int k = j * THREADS + t;
    const int64_t p = base + k;
    if (p < n) {
      yr[reverse ? n - 1 - p : p] = cu::convert<Out>(buf[slot(k)]);
    }
  }
}

// The outputs of one thread's elements given `pre`, the combination of
// the row's elements before them (none when !has_pre): an exclusive
// output is the inclusive one of the element before it (never
// op(x, identity): with a complex product, (inf, 0) * (1, 0) is not
// (inf, 0)).
template <int IPT, typename Op, typename M, typename C>
__device__ __forceinline__ void outputs(const M (&v)[IPT], M pre,
                                        bool has_pre, bool inclusive,
                                        M (&o)[IPT], C op) {
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    if (inclusive) {
      o[j] = has_pre ? op(pre, v[j]) : v[j];
    } else if (j == 0) {
      o[j] = has_pre ? pre : Op::init();
    } else {
      o[j] = has_pre ? op(pre, v[j - 1]) : v[j - 1];
    }
  }
}

// The inclusive scan of v over the warp's lanes, lane 0 first.
template <typename M, typename C>
__device__ __forceinline__ M warp_inclusive_scan(M v, C op) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const M u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) {
      v = op(u, v);
    }
  }
  return v;
}

constexpr int kThreads = 256;
constexpr int kItems = 16;  // per thread
constexpr int kTile = kThreads * kItems;

// A tile's state: nothing yet, its own total, or the row's inclusive
// prefix through it.
enum : unsigned { kEmpty = 0, kTotal = 1, kPrefix = 2 };

using Word = unsigned long long;

template <typename M>
__device__ __forceinline__ Word pack(unsigned state, M v) {
  static_assert(sizeof(M) == 4, "look-back scan: 4-byte accumulators");
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return (Word{state} << 32) | bits;
}
template <typename M>
__device__ __forceinline__ M value_of(Word w) {
  const uint32_t bits = static_cast<uint32_t>(w);
  M v;
  memcpy(&v, &bits, 4);
  return v;
}
__device__ __forceinline__ void publish(Word* slot, Word w) {
  cuda::atomic_ref<Word, cuda::thread_scope_device>(*slot).store(
      w, cuda::memory_order_relaxed);
}
__device__ __forceinline__ Word read(Word* slot) {
  return cuda::atomic_ref<Word, cuda::thread_scope_device>(*slot).load(
      cuda::memory_order_relaxed);
}

// This block's tile, numbered in the order blocks start: (tile, its row,
// its number within the row). Every thread of the block calls it.
struct TileSlot {
  int64_t tile, row, in_row;
};
__device__ __forceinline__ TileSlot claim_tile(unsigned* next,
                                               int64_t tiles_per_row) {
  __shared__ unsigned slot;
  if (threadIdx.x == 0) {
    slot = atomicAdd(next, 1u);
  }
  __syncthreads();
  const int64_t tile = slot;
  return {tile, tile / tiles_per_row, tile % tiles_per_row};
}

// The combination, oldest first, of the tiles before `tile` back to the
// nearest one with a known prefix (at the latest the row's first tile,
// `first`). Called by one whole warp; every lane gets the result.
template <typename M, typename C>
__device__ M look_back(Word* status, int64_t tile, int64_t first, C op) {
  const int lane = threadIdx.x % 32;
  bool have = false;
  M prefix{};
  for (int64_t newest = tile - 1;; newest -= 32) {
    const int64_t idx = newest - lane;  // lane 0 the newest tile
    Word w = pack<M>(kPrefix, M{});
    if (idx >= first) {
      do {
        w = read(status + idx);
      } while ((w >> 32) == kEmpty);
    }
    const unsigned known = __ballot_sync(0xffffffffu, (w >> 32) == kPrefix);
    // Lanes past the newest known prefix do not count (a lane with idx <
    // first reads as known, so `stop` never passes the row's start).
    const int stop = known ? __ffs(known) - 1 : 31;
    M v = value_of<M>(w);
    // Ordered tree: lane l takes op(lanes l+o.., lanes l..), older first.
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const M u = __shfl_down_sync(0xffffffffu, v, o);
      if (lane + o <= stop) {
        v = op(u, v);
      }
    }
    const M window = __shfl_sync(0xffffffffu, v, 0);
    prefix = have ? op(window, prefix) : window;
    have = true;
    if (known) {
      return prefix;
    }
  }
}

// Scan of `rows` rows of n elements (x and y row-contiguous), scan
// position p of a row at memory position p (forwards) or n - 1 - p.
// `status` holds rows * tiles_per_row zeroed words, `next` a zeroed
// counter; the grid has one block per tile.
// Op gives the identity (Op::init()), C combines two M.
template <typename In, typename Out, typename M, typename Op, typename C>
__global__ void __launch_bounds__(kThreads)
    lookback_scan(const In* x, Out* y, int64_t n, int64_t tiles_per_row,
                  bool reverse, bool inclusive, Word* status, unsigned* next) {
  __shared__ M buf[kTile + kTile / 32];
  __shared__ M warp_total[kThreads / 32];
  __shared__ M carry_slot;
  C op;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const auto [tile, row, in_row] = claim_tile(next, tiles_per_row);
  const In* xr = x + row * n;
  Out* yr = y + row * n;
  const int64_t base = in_row * kTile;

  M v[kItems];
  load_scanned<kThreads, kItems, Op>(xr, n, base, reverse, buf, v, op);
  // The threads' totals scanned across the warp, then across the warps.
  const M s = warp_inclusive_scan(v[kItems - 1], op);
  const M warp_before = __shfl_up_sync(0xffffffffu, s, 1);  // lane > 0
  if (lane == 31) {
    warp_total[warp] = s;
  }
  __syncthreads();
  M before{};  // the tile's elements before this thread's
  bool has_before = lane > 0;
  if (lane > 0) {
    before = warp_before;
  }
  M tile_total = warp_total[0];
  for (int w = 1; w < kThreads / 32; ++w) {
    if (w == warp) {
      before = has_before ? op(tile_total, before) : tile_total;
      has_before = true;
    }
    tile_total = op(tile_total, warp_total[w]);
  }

  // The prefix of the tiles before this one.
  if (warp == 0) {
    if (in_row == 0) {
      if (lane == 0) {
        publish(status + tile, pack<M>(kPrefix, tile_total));
      }
    } else {
      if (lane == 0) {
        publish(status + tile, pack<M>(kTotal, tile_total));
      }
      const M carry = look_back<M>(status, tile, tile - in_row, op);
      if (lane == 0) {
        publish(status + tile, pack<M>(kPrefix, op(carry, tile_total)));
        carry_slot = carry;
      }
    }
  }
  __syncthreads();
  bool has_pre = has_before;
  M pre = before;
  if (in_row > 0) {
    pre = has_before ? op(carry_slot, before) : carry_slot;
    has_pre = true;
  }
  M o[kItems];
  outputs<kItems, Op>(v, pre, has_pre, inclusive, o, op);
  store_tile<kThreads, kItems>(yr, n, base, reverse, buf, o);
}

}  // namespace fluxion::scan_tiles

namespace fluxion::scan_tiles {

// The look-back scan again, for rows whose length is a multiple of 4 on
// pointers aligned to 4 elements: each thread reads and writes its
// elements as packs of 4 (16 bytes of float32) straight from and to
// registers, with no staging in shared memory (lookback_scan's single-
// element loads and shared-memory round trips), and tiles twice as long.
//
// Pack c of a tile (j * kThreads + t: thread t's j-th pack) holds scan
// positions 4c .. 4c + 3, so the tile's kPackSegments segments (j, warp)
// — 32 consecutive packs each — are in scan order when numbered j * warps
// + warp: one warp scans their totals (kSegsPerLane consecutive ones a
// lane), and looks back.
//
// Tiles of 8192 elements: with 4096 (4 packs a thread) the kernel ran at
// 2.03 TB/s on an H100, no faster than CUB's, and Nsight Compute showed
// why: 63% of the warps' stalls at the barrier where seven warps wait
// for warp 0's look-back, each tile living ~12 us for ~1 us of loads. A
// look-back finds a published prefix at most 32 tiles back, so prefixes
// advance about 32 tiles per round trip to L2, whatever the tiles' size:
// bigger tiles move more bytes per round trip.
constexpr int kPackItems = 4;
constexpr int kPacksPerThread = 8;
constexpr int kPackTile = kThreads * kPackItems * kPacksPerThread;
constexpr int kPackSegments = kPacksPerThread * (kThreads / 32);
constexpr int kSegsPerLane = kPackSegments / 32;
static_assert(kPackSegments % 32 == 0, "whole segments a lane");

template <typename In, typename Out, typename M, typename Op, typename C>
__global__ void __launch_bounds__(kThreads)
    packed_scan(const In* x, Out* y, int64_t n, int64_t tiles_per_row,
                bool reverse, bool inclusive, Word* status, unsigned* next) {
  constexpr int P = kPackItems, J = kPacksPerThread, W = kThreads / 32;
  using PI = cu::Pack<In, P>;
  using PO = cu::Pack<Out, P>;
  // A segment's total, then the combination of everything before it.
  __shared__ M seg[kPackSegments];
  __shared__ bool seg_has[kPackSegments];
  C op;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const auto [tile, row, in_row] = claim_tile(next, tiles_per_row);
  const In* xr = x + row * n;
  Out* yr = y + row * n;
  const int64_t base = in_row * kPackTile;
  auto first_of = [&](int j) {  // scan position of pack j's first element
    return base + int64_t(j * kThreads + t) * P;
  };
  // Every pack's load goes out before any is used.
  PI raw[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int64_t p = first_of(j);
    if (p < n) {
      raw[j] = *reinterpret_cast<const PI*>(xr + (reverse ? n - P - p : p));
    }
  }
  M v[J][P];
  M lane_before[J];  // the warp's packs before this lane's, in segment j
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const bool in = first_of(j) < n;
#pragma unroll
    for (int e = 0; e < P; ++e) {
      v[j][e] = in ? cu::convert<M>(raw[j].v[reverse ? P - 1 - e : e])
                   : Op::init();
      if (e > 0) {
        v[j][e] = op(v[j][e - 1], v[j][e]);
      }
    }
    const M s = warp_inclusive_scan(v[j][P - 1], op);
    lane_before[j] = __shfl_up_sync(0xffffffffu, s, 1);  // lane > 0
    if (lane == 31) {
      seg[j * W + warp] = s;
    }
  }
  __syncthreads();
  if (warp == 0) {
    // Lane l: segments l * kSegsPerLane ..; their running combination,
    // the lanes' scan, the tile's total, and the segments before lane l's.
    constexpr int S = kSegsPerLane;
    M sv[S];
#pragma unroll
    for (int i = 0; i < S; ++i) {
      sv[i] = seg[lane * S + i];
      if (i > 0) {
        sv[i] = op(sv[i - 1], sv[i]);
      }
    }
    const M incl = warp_inclusive_scan(sv[S - 1], op);
    const M tile_total = __shfl_sync(0xffffffffu, incl, 31);
    const M lanes_before = __shfl_up_sync(0xffffffffu, incl, 1);
    M carry{};
    bool has_carry = false;
    if (in_row == 0) {
      if (lane == 0) {
        publish(status + tile, pack<M>(kPrefix, tile_total));
      }
    } else {
      if (lane == 0) {
        publish(status + tile, pack<M>(kTotal, tile_total));
      }
      carry = look_back<M>(status, tile, tile - in_row, op);
      has_carry = true;
      if (lane == 0) {
        publish(status + tile, pack<M>(kPrefix, op(carry, tile_total)));
      }
    }
    // Segment lane * S + i: carry, then the lanes before, then this
    // lane's segments before i.
#pragma unroll
    for (int i = 0; i < S; ++i) {
      bool has = lane > 0;
      M pre = lanes_before;
      if (i > 0) {
        pre = has ? op(pre, sv[i - 1]) : sv[i - 1];
        has = true;
      }
      if (has_carry) {
        pre = has ? op(carry, pre) : carry;
        has = true;
      }
      seg[lane * S + i] = pre;
      seg_has[lane * S + i] = has;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int64_t p = first_of(j);
    M pre = seg[j * W + warp];
    bool has = seg_has[j * W + warp];
    if (lane > 0) {
      pre = has ? op(pre, lane_before[j]) : lane_before[j];
      has = true;
    }
    M o[P];
    outputs<P, Op>(v[j], pre, has, inclusive, o, op);
    if (p < n) {
      PO w;
#pragma unroll
      for (int e = 0; e < P; ++e) {
        w.v[reverse ? P - 1 - e : e] = cu::convert<Out>(o[e]);
      }
      *reinterpret_cast<PO*>(yr + (reverse ? n - P - p : p)) = w;
    }
  }
}

}  // namespace fluxion::scan_tiles

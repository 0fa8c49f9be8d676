// L2 prefetch for the decoding kernels (qmv_lanes.cu, sdpa_decode.cu).
#pragma once

namespace fluxion::cu {

// Asks L2 for the line holding `p`; no register waits for it. The
// decoding kernels run few steps a warp, and a load issued one step
// ahead still waits out most of DRAM's latency: lines asked for several
// steps ahead are in L2 by the time their loads come.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

}  // namespace fluxion::cu

// Batched launches of small elementwise kernels (on by default;
// FLUXION_GPU_BATCH=0 turns them off). A chain of eager ops on small arrays pays CUDA's
// launch per op (a bare cudaLaunchKernel cost 4.7 us of host time on the
// H200 machine, more than the rest of an op's eval). With batching,
// consecutive float32 unary and binary ops of at most kMicroMaxSize
// elements on one stream are queued instead of launched, and run by one
// launch of an interpreter kernel: one block runs them in queue order, a
// __syncthreads between ops ordering each after the ones it may read,
// with the shared functors of their own kernels (same results). The queue
// is launched before anything else is put on the stream: another kernel,
// an event, a checkpoint of its buffers, the stream's end (eval.cpp,
// events.cpp, kept_buffers.cpp, device.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/primitive.h"

namespace fluxion::cu {

// The ops a batch can hold, by arity: each name is both the primitive's
// class and its functor in backend/common (detail::NAME).
#define FLUXION_MICRO_BINARY(X) \
  X(Add) X(Subtract) X(Multiply) X(Divide) X(Maximum) X(Minimum) X(Power)
#define FLUXION_MICRO_UNARY(X)                                         \
  X(Negative) X(Abs) X(Square) X(Exp) X(Log) X(Sqrt) X(Rsqrt) X(Sin)  \
  X(Cos) X(Tanh) X(Sigmoid)

enum class MicroCode : uint8_t {
#define FLUXION_MICRO_ENUM(NAME) NAME,
  FLUXION_MICRO_BINARY(FLUXION_MICRO_ENUM)
  FLUXION_MICRO_UNARY(FLUXION_MICRO_ENUM)
#undef FLUXION_MICRO_ENUM
};

// How an op reads its operands: both over [0, n), a (or b) one element.
// Unary ops read a.
enum MicroMode : uint8_t { kMicroFlat, kMicroScalarA, kMicroScalarB };

struct MicroOp {
  const float* a;
  const float* b;  // a again for unary ops
  float* y;
  int32_t n;
  MicroCode code;
  MicroMode mode;
};

constexpr int64_t kMicroMaxSize = 4096;  // elements of one op
constexpr int kMicroMaxOps = 1000;       // ops of one launch (32 KB params)

// One launch running ops[0, count) in order on s (batch.cu).
void launch_micro(const MicroOp* ops, int count, cudaStream_t s);

// A stream's queue. Not thread-safe: used under the stream's mutex.
class MicroBatch {
 public:
  // Unless FLUXION_GPU_BATCH=0; read once.
  static bool enabled();
  // Queues the kernel of `p` on `in` (allocating `out` as the kernel
  // would) and returns true when it qualifies; false leaves everything
  // untouched. A full queue is launched on s.
  bool add(const Primitive& p, const std::vector<array>& in,
           std::vector<array>& out, cudaStream_t s);
  // Launches the queue on s (nothing when it is empty).
  void flush(cudaStream_t s);
  bool empty() const { return ops_.empty(); }

 private:
  std::vector<MicroOp> ops_;
  std::vector<array> outs_;  // each op's output, for a failed launch
};

}  // namespace fluxion::cu

// The batched small elementwise kernels (batch.h): the interpreter kernel
// and the queue that feeds it.
#include "fluxion/backend/cuda/batch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <typeindex>
#include <unordered_map>

#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/unary.h"

namespace fluxion::cu {

// A MicroMode is the FlatMode of elementwise.cuh, in one byte.
static_assert(int(kMicroFlat) == kFlatBoth &&
              int(kMicroScalarA) == kFlatScalarA &&
              int(kMicroScalarB) == kFlatScalarB);

namespace {

constexpr int kMicroThreads = 256;

__device__ __forceinline__ float micro_apply(MicroCode code, float a,
                                             float b) {
  switch (code) {
#define FLUXION_MICRO_CASE2(NAME) \
  case MicroCode::NAME:           \
    return detail::NAME{}(a, b);
#define FLUXION_MICRO_CASE1(NAME) \
  case MicroCode::NAME:           \
    return detail::NAME{}(a);
    FLUXION_MICRO_BINARY(FLUXION_MICRO_CASE2)
    FLUXION_MICRO_UNARY(FLUXION_MICRO_CASE1)
#undef FLUXION_MICRO_CASE2
#undef FLUXION_MICRO_CASE1
  }
  return 0.0f;
}

// The queue in the kernel's parameters (up to 32 KB on sm_70 and later),
// sized to the queue so a short one does not copy a full block.
template <int N>
struct MicroOps {
  int count;
  MicroOp ops[N];
};

// One block runs the ops in order; each reads what the ones before it
// wrote (visible to the block after __syncthreads).
template <int N>
__global__ void __launch_bounds__(kMicroThreads)
    run_micro(const __grid_constant__ MicroOps<N> q) {
  for (int k = 0; k < q.count; ++k) {
    const MicroOp& op = q.ops[k];
    for (int i = threadIdx.x; i < op.n; i += kMicroThreads) {
      const float x = op.a[op.mode == kMicroScalarA ? 0 : i];
      const float z = op.b[op.mode == kMicroScalarB ? 0 : i];
      op.y[i] = micro_apply(op.code, x, z);
    }
    __syncthreads();
  }
}

template <int N>
void launch_n(const MicroOp* ops, int count, cudaStream_t s) {
  MicroOps<N> q;
  q.count = count;
  std::copy(ops, ops + count, q.ops);
  run_micro<N><<<1, kMicroThreads, 0, s>>>(q);
}

// The code of a primitive the batch can run, by its dynamic type.
const MicroCode* code_of(const Primitive& p) {
  static const auto* codes = new std::unordered_map<std::type_index,
                                                    MicroCode>{
#define FLUXION_MICRO_ENTRY(NAME) {typeid(NAME), MicroCode::NAME},
      FLUXION_MICRO_BINARY(FLUXION_MICRO_ENTRY)
      FLUXION_MICRO_UNARY(FLUXION_MICRO_ENTRY)
#undef FLUXION_MICRO_ENTRY
  };
  auto it = codes->find(typeid(p));
  return it == codes->end() ? nullptr : &it->second;
}

bool is_binary(MicroCode c) {
  switch (c) {
#define FLUXION_MICRO_IS_BINARY(NAME) case MicroCode::NAME:
    FLUXION_MICRO_BINARY(FLUXION_MICRO_IS_BINARY)
#undef FLUXION_MICRO_IS_BINARY
    return true;
    default:
      return false;
  }
}

}  // namespace

void launch_micro(const MicroOp* ops, int count, cudaStream_t s) {
  if (count <= 8) {
    launch_n<8>(ops, count, s);
  } else if (count <= 64) {
    launch_n<64>(ops, count, s);
  } else {
    launch_n<kMicroMaxOps>(ops, count, s);
  }
  check_launch("batched elementwise");
}

bool MicroBatch::enabled() {
  static const bool on = [] {
    const char* v = std::getenv("FLUXION_GPU_BATCH");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool MicroBatch::add(const Primitive& p, const std::vector<array>& in,
                     std::vector<array>& out, cudaStream_t s) {
  if (out.size() != 1 || out[0].dtype() != float32 || in.empty() ||
      in.size() > 2) {
    return false;
  }
  for (auto& x : in) {
    if (x.dtype() != float32) {
      return false;
    }
  }
  const MicroCode* code = code_of(p);
  if (code == nullptr || is_binary(*code) != (in.size() == 2)) {
    return false;
  }
  // The layouts the elementwise kernels take flat (elementwise.cuh): the
  // output is laid out as `like`, whose buffer it may take.
  const array& a = in[0];
  const array& b = in.size() == 2 ? in[1] : in[0];
  FlatMode mode = kFlatBoth;
  const array* like = &a;
  if (in.size() == 2 ? !flat_layout(a, b, mode, like)
                     : !a.flags().contiguous) {
    return false;
  }
  const int64_t n = like->data_size();
  if (n == 0 || n > kMicroMaxSize) {
    return false;
  }
  // The operands' device addresses before the output may take a buffer
  // (uploading host operands now, ordered before the launch).
  MicroOp op{ptr<const float>(a), ptr<const float>(b), nullptr,
             static_cast<int32_t>(n), *code, static_cast<MicroMode>(mode)};
  alloc_like(*like, out[0], true);
  op.y = ptr<float>(out[0]);
  ops_.push_back(op);
  outs_.push_back(out[0]);
  if (static_cast<int>(ops_.size()) == kMicroMaxOps) {
    flush(s);
  }
  return true;
}

void MicroBatch::flush(cudaStream_t s) {
  if (ops_.empty()) {
    return;
  }
  // Emptied whatever happens: a failed launch is not retried, and its
  // ops' outputs carry its error, as if each op's own launch had failed.
  try {
    launch_micro(ops_.data(), static_cast<int>(ops_.size()), s);
  } catch (...) {
    auto e = std::current_exception();
    for (auto& o : outs_) {
      o.set_error(e);
    }
    ops_.clear();
    outs_.clear();
    throw;
  }
  ops_.clear();
  outs_.clear();
}

}  // namespace fluxion::cu

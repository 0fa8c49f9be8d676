// FFT on the GPU through cuFFT (the CPU kernel is backend/cpu/fft.cpp; the
// primitive's contract is in ops/fft.h: complex64 -> complex64, float32 ->
// complex64 with the last axis halved, complex64 -> float32 with it `n`
// long; the op has already cropped or zero-padded the input, and inverse
// transforms scale by 1 / (the product of the lengths)).
//
// Issue 31 item 2; tested on the H200 by tests/cpp/test_cuda_fft.cpp and
// tests/python/test_cuda_fft.py. The steps (which cuFFT plans over which
// buffers, the copies and the two small kernels) come from
// backend/common/fft_program.cpp, plain host code that
// tests/cpp/test_fft_program.cpp runs without a GPU through an
// emulation of cuFFT's documented data layout; this file makes the plans
// and runs the steps.
//
// Layout. The input is made row-contiguous (a copy when it is not), size-1
// dims are dropped (a length-1 transform is the identity) and the
// transformed axes are grouped into runs of consecutive axes, cut into
// chunks of at most 3 (cuFFT's largest rank) from the innermost end. A
// chunk of axes [a, b] of a row-contiguous array of shape (outer, run,
// inner) is one strided batch in cuFFT's advanced layout: n = the run's
// dims (row-major, n[0] slowest), inembed/onembed = the stored dims,
// istride = ostride = inner, and a batch of `outer` transforms idist =
// run size apart (inner == 1) or of `inner` transforms 1 apart (outer ==
// 1). With both outer and inner > 1 the batch has two strides, which one
// plan cannot express: the plan is run once per outer index (or per inner
// index) when that is at most 16 launches or each launch moves at least
// 2^20 elements (fft_program::Options), else the chunk's elements are copied to
// a (outer, inner, run) scratch, transformed as one batch and copied back.
// Complex passes run innermost chunk first: the first reads the input and
// writes the output, later ones work in place (cuFFT's in-place C2C).
//
// Real transforms keep the CPU's decomposition, which is NumPy's: rfftn is
// the R2C along the last axis of `axes` (merged with up to two complex
// axes just before it into one multi-dimensional R2C plan, the same
// arithmetic as R2C then C2C), then forward C2C over the other axes in
// place on the output. irfftn is the inverse C2C over the other axes into
// a scratch, then the 1-D C2R along the last axis out of the scratch (a
// multi-dimensional C2R assumes a Hermitian-symmetric input in every axis,
// which an arbitrary input is not). cuFFT's C2R overwrites its input, so
// the scratch is what it overwrites, never the caller's array. Before the
// C2R, one kernel zeroes the imaginary parts of frequency 0 and (even n)
// n / 2 along the real axis, which the CPU's real plan (and NumPy) ignore
// and cuFFT's algorithms need not, and applies the 1 / N scale. Complex
// inverse transforms are scaled by a separate pass over the output.
// float32 / complex64 only: the op casts everything else (float64
// included, as MLX) before the primitive, as for the CPU.
//
// Plans are cached per (device, type, rank, n, inembed, istride, idist,
// onembed, ostride, odist, batch), least recently used first out past
// kPlanCacheSize. cuFFT does not allocate work areas
// (cufftSetAutoAllocation(0)): each execution takes one from Fluxion's
// allocator (accounted like any buffer), kept alive with the plan until the
// stream has run the transform; the plan is bound to the stream with
// cufftSetStream at each use, under the plan's mutex (threads with their
// own streams may share a plan). Every cuFFT failure raises
// std::runtime_error naming cuFFT's error code, the primitive and the
// input's shape; a plan that fails for lack of memory is retried once after
// giving back the allocator's cache, and a multi-dimensional plan that
// cuFFT refuses falls back to one axis at a time.
#include <cufft.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/allocator.h"
#include "fluxion/backend/common/fft_program.h"
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/common.h"
#include "fluxion/ops/fft.h"

namespace fluxion {

namespace {

constexpr size_t kPlanCacheSize = 64;

// --- kernels ---------------------------------------------------------------

__global__ void scale_kernel(float2* x, int64_t n, float s) {
  FLUXION_GRID_LOOP(i, n) {
    const float2 v = x[i];
    x[i] = make_float2(v.x * s, v.y * s);
  }
}

// y <- x * s (y may be x), with the imaginary parts of frequency 0 and, when
// `nyquist`, of frequency m - 1 along the halved axis (of length m, `inner`
// elements apart) set to zero.
__global__ void c2r_prepare_kernel(const float2* x, float2* y, int64_t total,
                                   int64_t m, int64_t inner, bool nyquist,
                                   float s) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t k = (i / inner) % m;
    const float2 v = x[i];
    const bool self_conjugate = k == 0 || (nyquist && k == m - 1);
    y[i] = make_float2(v.x * s, self_conjugate ? 0.0f : v.y * s);
  }
}

// --- errors ----------------------------------------------------------------

const char* result_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS:
      return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN:
      return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED:
      return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE:
      return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE:
      return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR:
      return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED:
      return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED:
      return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE:
      return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA:
      return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE:
      return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE:
      return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED:
      return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED:
      return "CUFFT_NOT_SUPPORTED";
    default:
      return "cuFFT error";
  }
}

// What failed, for the message: the primitive and its input.
struct Context {
  const FFT* prim;
  const array* input;
  std::string describe() const {
    std::ostringstream os;
    prim->print(os);
    os << " of a " << dtype_name(input->dtype()) << " array of shape "
       << shape_str(input->shape());
    return os.str();
  }
};

// A cuFFT call that failed. Plan errors are caught where a smaller plan can
// do the work instead (multi-dimensional chunks).
class CufftError : public std::runtime_error {
 public:
  CufftError(const std::string& msg, cufftResult r, bool planning)
      : std::runtime_error(msg), result(r), planning(planning) {}
  cufftResult result;
  bool planning;  // making the plan: nothing was computed yet
  // A plan refused for its shape (not for memory): smaller plans may do.
  bool refused_plan() const { return planning && result != CUFFT_ALLOC_FAILED; }
};

[[noreturn]] void fail(const Context& c, const std::string& what, cufftResult r,
                       bool planning = false) {
  // cuFFT's failed CUDA calls (an allocation) leave the runtime's last
  // error set: clear it, so the next kernel's launch check does not report
  // it (a sticky error stays, as everywhere).
  cudaGetLastError();
  throw CufftError("[fft] cuFFT " + what + " failed: " + result_name(r) + " (" +
                       std::to_string(static_cast<int>(r)) + "), computing " +
                       c.describe() + ".",
                   r, planning);
}

// --- plans -----------------------------------------------------------------

using fft_program::Kind;
using fft_program::PlanShape;
using fft_program::Program;
using fft_program::Step;

cufftType cufft_type(Kind k) {
  return k == Kind::C2C ? CUFFT_C2C : k == Kind::R2C ? CUFFT_R2C : CUFFT_C2R;
}

using PlanKey = std::array<long long, 17>;

PlanKey key_of(const PlanShape& p, int device) {
  return {device,       static_cast<long long>(p.kind),
          p.rank,       p.n[0],
          p.n[1],       p.n[2],
          p.inembed[0], p.inembed[1],
          p.inembed[2], p.onembed[0],
          p.onembed[1], p.onembed[2],
          p.istride,    p.idist,
          p.ostride,    p.odist,
          p.batch};
}

struct Plan {
  cufftHandle handle = 0;
  bool created = false;
  int device = 0;
  size_t work = 0;  // bytes of work area each execution needs
  std::mutex mu;    // stream and work area are set per execution

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (!created) {
      return;
    }
    // Destroyed on the plan's device; the thread's device is restored.
    int cur = -1;
    bool other = cudaGetDevice(&cur) == cudaSuccess && cur != device &&
                 cudaSetDevice(device) == cudaSuccess;
    cufftDestroy(handle);
    if (other) {
      cudaSetDevice(cur);
    }
    cudaGetLastError();
  }
};

std::shared_ptr<Plan> make_plan(const PlanShape& p, int device,
                                const Context& c) {
  for (int attempt = 0;; ++attempt) {
    auto plan = std::make_shared<Plan>();
    plan->device = device;
    cufftResult r = cufftCreate(&plan->handle);
    if (r != CUFFT_SUCCESS) {
      fail(c, "plan creation (" + p.str() + ")", r, true);
    }
    plan->created = true;
    r = cufftSetAutoAllocation(plan->handle, 0);
    if (r == CUFFT_SUCCESS) {
      long long n[3], ie[3], oe[3];
      std::copy(p.n, p.n + 3, n);
      std::copy(p.inembed, p.inembed + 3, ie);
      std::copy(p.onembed, p.onembed + 3, oe);
      size_t work = 0;
      r = cufftMakePlanMany64(plan->handle, p.rank, n, ie, p.istride, p.idist,
                              oe, p.ostride, p.odist, cufft_type(p.kind),
                              p.batch, &work);
      plan->work = work;
    }
    if (r == CUFFT_SUCCESS) {
      // Should cuFFT initialize the plan's tables by work on the legacy
      // default stream, our (non-blocking) streams would not be ordered
      // after it: wait for it, once per new plan.
      cu::check(cudaStreamSynchronize(cudaStreamLegacy), "fft");
      return plan;
    }
    plan.reset();  // cufftDestroy
    if (r == CUFFT_ALLOC_FAILED && attempt == 0) {
      cudaGetLastError();
      clear_cache(Device{Device::gpu});
      continue;
    }
    fail(c, "plan creation (" + p.str() + ")", r, true);
  }
}

class PlanCache {
 public:
  std::shared_ptr<Plan> get(const PlanShape& p, int device, const Context& c) {
    const PlanKey key = key_of(p, device);
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
      return it->second->second;
    }
    auto plan = make_plan(p, device, c);
    lru_.emplace_front(key, plan);
    index_[key] = lru_.begin();
    while (lru_.size() > kPlanCacheSize) {
      // Dropped here; destroyed when the last execution holding it is done.
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return plan;
  }

 private:
  using Entry = std::pair<PlanKey, std::shared_ptr<Plan>>;
  std::mutex mu_;
  std::list<Entry> lru_;
  std::map<PlanKey, std::list<Entry>::iterator> index_;
};

PlanCache& plan_cache() {
  static auto* c = new PlanCache();  // leaked: plans outlive static teardown
  return *c;
}

// The plans of the program's transforms (null for other steps), made or
// found before anything runs, so a refused plan leaves nothing half done.
std::vector<std::shared_ptr<Plan>> plans_of(const Program& prog,
                                            const Context& c) {
  int device = 0;
  cu::check(cudaGetDevice(&device), "fft");
  std::vector<std::shared_ptr<Plan>> plans(prog.steps.size());
  for (size_t i = 0; i < prog.steps.size(); ++i) {
    if (prog.steps[i].op == Step::Op::Transform) {
      plans[i] = plan_cache().get(prog.steps[i].plan, device, c);
    }
  }
  return plans;
}

size_t elem_bytes(Kind k, bool input) {
  const bool real = (k == Kind::R2C && input) || (k == Kind::C2R && !input);
  return real ? sizeof(float) : sizeof(float2);
}

// Runs a Transform step on the current stream.
void execute(const Step& s, const std::shared_ptr<Plan>& plan, const void* in,
             void* out, const Context& c) {
  const PlanShape& p = s.plan;
  std::shared_ptr<Data> work;
  if (plan->work > 0) {
    work = std::make_shared<Data>(plan->work, Device{Device::gpu});
  }
  {
    std::lock_guard<std::mutex> lk(plan->mu);
    cufftResult r = cufftSetStream(plan->handle, cu::current_stream());
    if (r != CUFFT_SUCCESS) {
      fail(c, "cufftSetStream", r);
    }
    if (work) {
      r = cufftSetWorkArea(plan->handle, work->ptr());
      if (r != CUFFT_SUCCESS) {
        fail(c, "cufftSetWorkArea", r);
      }
    }
    const int64_t ib = elem_bytes(p.kind, true), ob = elem_bytes(p.kind, false);
    for (int64_t l = 0; l < s.loops; ++l) {
      // cuFFT takes non-const input pointers (C2R overwrites its input,
      // always a scratch here).
      auto* x =
          const_cast<char*>(static_cast<const char*>(in)) + l * s.in_step * ib;
      auto* y = static_cast<char*>(out) + l * s.out_step * ob;
      switch (p.kind) {
        case Kind::C2C:
          r = cufftExecC2C(plan->handle, reinterpret_cast<cufftComplex*>(x),
                           reinterpret_cast<cufftComplex*>(y),
                           s.inverse ? CUFFT_INVERSE : CUFFT_FORWARD);
          break;
        case Kind::R2C:
          r = cufftExecR2C(plan->handle, reinterpret_cast<cufftReal*>(x),
                           reinterpret_cast<cufftComplex*>(y));
          break;
        case Kind::C2R:
          r = cufftExecC2R(plan->handle, reinterpret_cast<cufftComplex*>(x),
                           reinterpret_cast<cufftReal*>(y));
          break;
      }
      if (r != CUFFT_SUCCESS) {
        fail(c, "execution (" + p.str() + ")", r);
      }
    }
  }
  // The work area and the plan live until the stream has run the
  // transform (an evicted plan is destroyed after its last execution).
  if (work) {
    cu::keep_alive(work);
  }
  cu::keep_alive(std::make_shared<Data>(
      nullptr, 0, [plan](void*) {}, Device{Device::gpu}));
}

// A fresh GPU buffer of `shape`'s size, alive until the stream has used it.
array scratch(const Shape& shape, Dtype dtype) {
  array a(shape, dtype, nullptr, {});
  cu::alloc(a);
  a.set_status(array::Status::available);
  cu::keep_alive(a);
  return a;
}

void run(const Program& prog, const std::vector<std::shared_ptr<Plan>>& plans,
         std::vector<array>& bufs, const Context& c) {
  cudaStream_t st = cu::current_stream();
  for (size_t i = 0; i < prog.steps.size(); ++i) {
    const Step& s = prog.steps[i];
    switch (s.op) {
      case Step::Op::Copy:
        cu::copy_region(bufs[s.src], s.src_strides, 0, bufs[s.dst],
                        s.dst_strides, 0, s.shape);
        break;
      case Step::Op::Transform:
        execute(s, plans[i], cu::ptr<const void>(bufs[s.src]),
                cu::ptr<void>(bufs[s.dst]), c);
        break;
      case Step::Op::Scale:
        scale_kernel<<<cu::blocks_for(s.elems, 4), cu::kThreads, 0, st>>>(
            cu::ptr<float2>(bufs[s.dst]), s.elems,
            static_cast<float>(s.factor));
        cu::check_launch("fft");
        break;
      case Step::Op::PrepareC2R:
        c2r_prepare_kernel<<<cu::blocks_for(s.elems, 4), cu::kThreads, 0, st>>>(
            cu::ptr<const float2>(bufs[s.src]), cu::ptr<float2>(bufs[s.dst]),
            s.elems, s.m, s.inner, s.nyquist, static_cast<float>(s.factor));
        cu::check_launch("fft");
        break;
    }
  }
}

}  // namespace

void FFT::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const array& x = inputs[0];
  array& out = outputs[0];
  const Context c{this, &x};
  const Dtype in_t = real_ && !inverse_ ? float32 : complex64;
  const Dtype out_t = real_ && inverse_ ? float32 : complex64;
  if (x.dtype() != in_t || out.dtype() != out_t) {
    throw std::invalid_argument(std::string("[fft] The FFT primitive takes ") +
                                dtype_name(in_t) + " to " + dtype_name(out_t) +
                                "; got " + dtype_name(x.dtype()) + " to " +
                                dtype_name(out.dtype()) + ".");
  }
  if (out.size() == 0 || x.size() == 0) {
    cu::alloc(out);
    return;
  }
  fft_program::Options opt;
  // Buffer 0: the input, row-contiguous (and, as real data, 8-byte
  // aligned). A complex transform's output takes over a row-contiguous
  // input's buffer when it may (then every pass is in place).
  std::optional<array> in;
  if (!real_ && x.flags().row_contiguous) {
    const void* before = cu::ptr<const void>(x);
    cu::alloc_like(x, out, /*may_donate=*/true);
    opt.in_place = cu::ptr<const void>(out) == before;
    in = opt.in_place ? out : x;
  } else {
    in = cu::contiguous(x);
    if (in_t == float32 &&
        reinterpret_cast<uintptr_t>(cu::ptr<const void>(*in)) % 8 != 0) {
      array t(x.shape(), float32, nullptr, {});  // a view at an odd offset
      cu::copy_general(*in, t);
      t.set_status(array::Status::available);
      cu::keep_alive(t);
      in = t;
    }
    cu::alloc(out);
  }
  auto plan = [&] {
    return fft_program::plan(x.shape(), out.shape(), axes_, inverse_, real_, n_,
                             opt);
  };
  Program prog = plan();
  std::vector<std::shared_ptr<Plan>> plans;
  try {
    plans = plans_of(prog, c);
  } catch (const CufftError& e) {
    // A multi-dimensional plan refused for its shape: one axis at a time.
    if (!e.refused_plan() || opt.max_rank == 1) {
      throw;
    }
    opt.max_rank = 1;
    prog = plan();
    plans = plans_of(prog, c);
  }
  std::vector<array> bufs{*in, out};
  for (size_t k = 2; k < prog.buffers.size(); ++k) {
    bufs.push_back(scratch(prog.buffers[k].shape,
                           prog.buffers[k].complex ? complex64 : float32));
  }
  run(prog, plans, bufs, c);
}

}  // namespace fluxion

// cuDNN's fused flash attention through its backend (graph) API. The
// library is dlopen'ed by cudnn_loader.cpp (shared with the convolutions),
// its types from cudnn_graph.h (a build without it compiles all of this
// out and attention keeps sdpa.cu's kernels).
//
// A pass is one operation graph in the pattern cuDNN's runtime-fusion
// SDPA engine recognizes (the one cudnn_frontend's SDPA nodes emit):
//   forward:  S = Q K^T, S *= scale, [causal: row + Lk - Lq >= col, else
//             -inf via gen_index, cmp_ge, binary_select], m = max(S),
//             E = exp(S - m), l = sum(E), Stats = m + log(l) (a virtual
//             tensor for inference),
//             P = E / l (in the I/O type), O = P V;
//   backward: Dsum = rowsum(dO * O) (float, scratch), P = exp(scale Q K^T
//             - Stats) masked, dV = P^T dO, dS = P (dO V^T - Dsum) scale,
//             dK = dS^T Q, dQ = dS K (float accumulator, then converted);
//             grouped-query heads reduce dK and dV over each group.
// Plans (heuristics mode A, the first engine config that finalizes) are
// cached per shapes, strides, dtype, mask and scale, failures too, so a
// shape cuDNN refuses is tried once and then runs the other kernels.
#include "fluxion/backend/cuda/sdpa_cudnn.h"

#include <cstdlib>
#include <cstring>

#include "fluxion/backend/cuda/cudnn_loader.h"
#include "fluxion/backend/gpu.h"

namespace fluxion::cu::cudnn_sdpa {

bool eligible(Dtype t, int B, int Hq, int Hkv, int Lq, int Lk, int D, int Dv,
              bool causal) {
  static const bool enabled = [] {
    const char* e = std::getenv("FLUXION_CUDNN_SDPA");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return enabled && (t == float16 || t == bfloat16) && D == Dv && D % 8 == 0 &&
         D >= 8 && D <= 256 && B > 0 && Hq > 0 && Hkv > 0 && Hq % Hkv == 0 &&
         Lq > 0 && Lk > 0 && (!causal || Lq <= Lk);
}

}  // namespace fluxion::cu::cudnn_sdpa

#if !FLUXION_HAVE_CUDNN

namespace fluxion::cu::cudnn_sdpa {
bool plans_ready(int, Dtype, int, int, int, int, int, int, bool, float) {
  return false;
}
bool forward(const std::vector<array>&, std::vector<array>&, float, bool) {
  return false;
}
bool backward(const std::vector<array>&, std::vector<array>&, float, bool) {
  return false;
}
}  // namespace fluxion::cu::cudnn_sdpa

fluxion::gpu::CudnnSdpaInfo fluxion::gpu::cudnn_sdpa_info() {
  CudnnSdpaInfo s;
  s.error = "Fluxion was built without cuDNN's headers (cudnn_graph.h)";
  return s;
}

#else

#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu::cudnn_sdpa {

namespace {

using cudnn::lib;
using cudnn::Plan;
using cudnn::status_text;

std::atomic<int64_t> g_forward{0}, g_backward{0}, g_failed{0};

// Up to this many queries (FLUXION_CUDNN_SDPA_DECODE_QUERIES), inference
// stays on sdpa.cu's split-key kernel.
int decode_queries() {
  static const int n = [] {
    const char* e = std::getenv("FLUXION_CUDNN_SDPA_DECODE_QUERIES");
    return e && *e ? std::atoi(e) : 8;
  }();
  return n;
}

bool debug() {
  static const bool on = [] {
    const char* e = std::getenv("FLUXION_CUDNN_SDPA_DEBUG");
    return e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

// ---------------------------------------------------------------- graphs

struct Tensor {
  cudnnBackendDescriptor_t d = nullptr;
};

// A [B, H, L, D]-like operand: dims and strides in elements.
struct Layout {
  int64_t dim[4], st[4];
};

// Unique ids of the graphs' memory operands (virtual tensors count up
// from kVirtual).
enum : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kSkv, kSq, kOne,
  kDO, kDQ, kDK, kDV, kDsum, kDQAcc, kVirtual = 100
};

// A detail cuDNN's documentation leaves open, tried in turn when a plan
// fails: GEN_INDEX computed in float (what cudnn_frontend sets today, and
// what cuDNN 9.14 took on the H200) or int32 (what it set before). By-value
// scalars are [1, 1, 1, 1]: cuDNN refuses [1] against 4-d operands
// ("xDesc.getNbDims() != bDesc.getNbDims()").
struct Variant {
  bool index_int;
};
constexpr Variant kVariants[] = {{false}, {true}};

// Operations of one graph, built in order; the first failure is kept and
// makes every later call a no-op, so a build reads straight through.
class Builder : public cudnn::GraphBuilder {
 public:
  explicit Builder(Variant v) : variant_(v) {}

  Tensor tensor(cudnnDataType_t dt, const int64_t* dims, const int64_t* st,
                int64_t uid = -1, bool by_value = false) {
    Tensor t{create(CUDNN_BACKEND_TENSOR_DESCRIPTOR)};
    const bool is_virtual = uid < 0;
    if (is_virtual) {
      uid = next_virtual_++;
    }
    int64_t align = 16;
    set(t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    set(t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st);
    set(t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(t.d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) {
      set(t.d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1,
          &by_value);
    }
    finalize(t.d, "tensor");
    return t;
  }
  Tensor tensor(cudnnDataType_t dt, const Layout& l, int64_t uid = -1) {
    return tensor(dt, l.dim, l.st, uid);
  }
  // A host scalar passed by value at execution.
  Tensor scalar(cudnnDataType_t dt, int64_t uid) {
    static const int64_t ones[4] = {1, 1, 1, 1};
    return tensor(dt, ones, ones, uid, true);
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, Tensor x,
                 Tensor y, Tensor b = {}, Tensor t = {}, int64_t axis = -1) {
    auto pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) {
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    }
    finalize(pw, "pointwise");
    auto op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.d);
    if (b.d) {
      set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b.d);
    }
    if (t.d) {
      set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t.d);
    }
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.d);
    float one = 1.0f;
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    add_op(op, "pointwise op");
  }
  void matmul(Tensor a, Tensor b, Tensor c) {
    auto mm = create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    finalize(mm, "matmul");
    auto op = create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.d);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.d);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.d);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    add_op(op, "matmul op");
  }
  void reduction(cudnnReduceTensorOp_t r, Tensor x, Tensor y) {
    auto rd = create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
        1, &r);
    finalize(rd, "reduction");
    auto op = create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.d);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.d);
    add_op(op, "reduction op");
  }
  void reshape(Tensor x, Tensor y) {
    auto op = create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.d);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.d);
    add_op(op, "reshape op");
  }

  // Hidden scores of the causal mask (bottom-right aligned: query i sees
  // keys j <= i + Lk - Lq) become -inf.
  Tensor causal_mask(Tensor s, const Layout& sl, int Lq, int Lk) {
    const cudnnDataType_t ip =
        variant_.index_int ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
    Tensor row = tensor(CUDNN_DATA_INT32, sl);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, ip, s, row, {}, {}, 2);
    Tensor col = tensor(CUDNN_DATA_INT32, sl);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, ip, s, col, {}, {}, 3);
    if (Lq != Lk) {
      Tensor r1 = tensor(CUDNN_DATA_INT32, sl);
      pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, r1,
                scalar(CUDNN_DATA_INT32, kSkv));
      Tensor r2 = tensor(CUDNN_DATA_INT32, sl);
      pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, r1, r2,
                scalar(CUDNN_DATA_INT32, kSq));
      row = r2;
    }
    Tensor keep_t = tensor(CUDNN_DATA_BOOLEAN, sl);
    pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, keep_t, col);
    Tensor out = tensor(CUDNN_DATA_FLOAT, sl);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, out,
              scalar(CUDNN_DATA_FLOAT, kNegInf), keep_t);
    return out;
  }

 private:
  Variant variant_;
  int64_t next_virtual_ = kVirtual;
};

// The shapes and layouts of one pass.
struct Problem {
  cudnnDataType_t dt;
  int B, Hq, Hkv, Lq, Lk, D;
  bool causal, stats, backward;
  float scale;
  Layout q, k, v, o, d_o;  // o and d_o: the backward's
};

Layout rows(int64_t B, int64_t H, int64_t L, int64_t D) {
  return {{B, H, L, D}, {H * L * D, L * D, D, 1}};
}
// [B, H, Lq, Lk] scores and [B, H, Lq, 1] row statistics.
Layout scores(const Problem& p) {
  return rows(p.B, p.Hq, p.Lq, p.Lk);
}
Layout row_stats(const Problem& p) {
  return {{p.B, p.Hq, p.Lq, 1}, {int64_t{p.Hq} * p.Lq, p.Lq, 1, 1}};
}
// K as K^T: [B, H, D, L] over K's memory.
Layout transposed(const Layout& l) {
  return {{l.dim[0], l.dim[1], l.dim[3], l.dim[2]},
          {l.st[0], l.st[1], l.st[3], l.st[2]}};
}

void build_forward(Builder& g, const Problem& p) {
  const auto F = CUDNN_DATA_FLOAT;
  const Layout sl = scores(p), rl = row_stats(p);
  Tensor q = g.tensor(p.dt, p.q, kQ);
  Tensor kt = g.tensor(p.dt, transposed(p.k), kK);
  Tensor v = g.tensor(p.dt, p.v, kV);
  Tensor o = g.tensor(p.dt, rows(p.B, p.Hq, p.Lq, p.D), kO);
  Tensor s = g.tensor(F, sl);
  g.matmul(q, kt, s);
  Tensor s1 = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_MUL, F, s, s1, g.scalar(F, kScale));
  if (p.causal) {
    s1 = g.causal_mask(s1, sl, p.Lq, p.Lk);
  }
  Tensor mx = g.tensor(F, rl);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s1, mx);
  Tensor sub = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_SUB, F, s1, sub, mx);
  Tensor e = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_EXP, F, sub, e);
  Tensor sum = g.tensor(F, rl);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  // The engine matches the statistics' ops even for inference (without
  // them heuristics offer no engine: seen with cuDNN 9.14), so they stay,
  // into a virtual tensor then, as cudnn_frontend does.
  Tensor lg = g.tensor(F, rl);
  g.pointwise(CUDNN_POINTWISE_LOG, F, sum, lg);
  g.pointwise(CUDNN_POINTWISE_ADD, F, mx,
              p.stats ? g.tensor(F, rl, kStats) : g.tensor(F, rl), lg);
  // P in the I/O type: the second product's operand type.
  Tensor pr = g.tensor(p.dt, sl);
  g.pointwise(CUDNN_POINTWISE_DIV, F, e, pr, sum);
  g.matmul(pr, v, o);
}

void build_backward(Builder& g, const Problem& p) {
  const auto F = CUDNN_DATA_FLOAT;
  const Layout sl = scores(p), rl = row_stats(p);
  const Layout st = {{p.B, p.Hq, p.Lk, p.Lq},
                     {sl.st[0], sl.st[1], 1, p.Lk}};  // scores transposed
  const Layout qrows = rows(p.B, p.Hq, p.Lq, p.D);
  const Layout krows = rows(p.B, p.Hkv, p.Lk, p.D);
  Tensor q = g.tensor(p.dt, p.q, kQ);
  Tensor kt = g.tensor(p.dt, transposed(p.k), kK);
  Tensor vt = g.tensor(p.dt, transposed(p.v), kV);
  Tensor o = g.tensor(p.dt, p.o, kO);
  Tensor d_o = g.tensor(p.dt, p.d_o, kDO);
  Tensor stats = g.tensor(F, rl, kStats);
  Tensor dq = g.tensor(p.dt, qrows, kDQ);
  Tensor dk = g.tensor(p.dt, krows, kDK);
  Tensor dv = g.tensor(p.dt, krows, kDV);
  Tensor scale = g.scalar(F, kScale);

  // Dsum = rowsum(dO * O), kept in float (scratch the caller provides).
  Tensor doo = g.tensor(F, qrows);
  g.pointwise(CUDNN_POINTWISE_MUL, F, d_o, doo, o);
  Tensor red = g.tensor(F, rl);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, doo, red);
  Tensor dsum = g.tensor(F, rl, kDsum);
  g.pointwise(CUDNN_POINTWISE_MUL, F, red, dsum, g.scalar(F, kOne));

  // P = exp(scale Q K^T - Stats), hidden keys -inf before the exp.
  Tensor s = g.tensor(F, sl);
  g.matmul(q, kt, s);
  Tensor s1 = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_MUL, F, s, s1, scale);
  Tensor s2 = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_SUB, F, s1, s2, stats);
  if (p.causal) {
    s2 = g.causal_mask(s2, sl, p.Lq, p.Lk);
  }
  Tensor pr = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_EXP, F, s2, pr);

  // dV = P^T dO (grouped heads: per query head, then summed per group).
  Tensor pt = g.tensor(p.dt, st);
  g.reshape(pr, pt);
  const Layout full = rows(p.B, p.Hq, p.Lk, p.D);
  if (p.Hq == p.Hkv) {
    g.matmul(pt, d_o, dv);
  } else {
    Tensor dvf = g.tensor(p.dt, full);
    g.matmul(pt, d_o, dvf);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dvf, dv);
  }

  // dS = P (dO V^T - Dsum) scale.
  Tensor dp = g.tensor(F, sl);
  g.matmul(d_o, vt, dp);
  Tensor dp1 = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_SUB, F, dp, dp1, dsum);
  Tensor dp2 = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_MUL, F, dp1, dp2, pr);
  Tensor ds = g.tensor(F, sl);
  g.pointwise(CUDNN_POINTWISE_MUL, F, dp2, ds, scale);

  // dK = dS^T Q.
  Tensor dst = g.tensor(p.dt, st);
  g.reshape(ds, dst);
  if (p.Hq == p.Hkv) {
    g.matmul(dst, q, dk);
  } else {
    Tensor dkf = g.tensor(p.dt, full);
    g.matmul(dst, q, dkf);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dkf, dk);
  }

  // dQ = dS K, accumulated in float, then converted.
  Tensor k = g.tensor(p.dt, p.k);
  g.reshape(kt, k);
  Tensor acc = g.tensor(F, qrows, kDQAcc);
  g.matmul(ds, k, acc);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, F, acc, dq);
}

// ---------------------------------------------------------------- plans

// The cache key: every number a plan depends on.
using Key = cudnn::PlanCache::Key;

Key key_of(int device, const Problem& p) {
  uint32_t sbits;
  std::memcpy(&sbits, &p.scale, sizeof(sbits));
  Key k{device, p.dt, p.B, p.Hq, p.Hkv, p.Lq, p.Lk, p.D, p.causal, p.stats,
        p.backward, sbits};
  for (const Layout* l : {&p.q, &p.k, &p.v, &p.o, &p.d_o}) {
    k.insert(k.end(), l->st, l->st + 4);
  }
  return k;
}

// A new plan of `p` on `device` (one without a plan on failure).
std::shared_ptr<Plan> build_plan(int device, const Problem& p) {
  auto plan = std::make_shared<Plan>();
  std::string error;
  cudnnHandle_t handle = cudnn::handle_for(device, error);
  if (!handle) {
    plan->error = error;
  } else {
    for (const Variant& v : kVariants) {
      Builder g(v);
      p.backward ? build_backward(g, p) : build_forward(g, p);
      Plan attempt;
      if (g.ok()) {
        cudnn::make_plan(handle, g, attempt);
      } else {
        attempt.error = g.error;
      }
      if (attempt.plan) {
        *plan = std::move(attempt);
        break;
      }
      if (plan->error.empty()) {
        plan->error = attempt.error;
      }
    }
  }
  if (!plan->plan) {
    ++g_failed;
    if (debug()) {
      std::fprintf(stderr,
                   "[fluxion] cuDNN attention %s B=%d Hq=%d Hkv=%d Lq=%d "
                   "Lk=%d D=%d causal=%d: no plan (%s); using the other "
                   "kernels\n",
                   p.backward ? "backward" : "forward", p.B, p.Hq, p.Hkv,
                   p.Lq, p.Lk, p.D, int{p.causal}, plan->error.c_str());
    }
  }
  return plan;
}

// The plan of `p` on `device` (the current one), built on first sight.
// Null when the library is unusable.
std::shared_ptr<Plan> plan_for(int device, const Problem& p) {
  if (!lib().handle) {
    return nullptr;
  }
  static auto* cache = new cudnn::PlanCache();  // leaked: plans live to exit
  return cache->get(key_of(device, p), [&] { return build_plan(device, p); });
}

// ---------------------------------------------------------------- running

cudnnDataType_t cudnn_type(Dtype t) {
  return t == float16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

// `a`'s layout as cuDNN reads it: unit feature stride, the other strides
// positive multiples of 8 elements and the data 16-byte aligned (vector
// loads), size-1 dims given row-contiguous strides (they are never
// stepped). Else false: the caller copies it row-contiguous.
bool layout_of(const array& a, Layout& l) {
  const auto& st = a.strides();
  for (int i = 3; i >= 0; --i) {
    l.dim[i] = a.shape(i);
    l.st[i] = st[i];
    if (l.dim[i] == 1) {
      l.st[i] = i == 3 ? 1 : l.dim[i + 1] * l.st[i + 1];
    }
  }
  if (l.st[3] != 1) {
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (l.st[i] <= 0 || l.st[i] % 8 != 0) {
      return false;
    }
  }
  return reinterpret_cast<uintptr_t>(cu::ptr(a)) % 16 == 0;
}

// `a` itself when row-contiguous and 16-byte aligned, else a row-contiguous
// copy (queued on the current stream, kept alive until it ran).
array row_contiguous(const array& a) {
  if (a.flags().row_contiguous &&
      reinterpret_cast<uintptr_t>(cu::ptr(a)) % 16 == 0) {
    return a;
  }
  array c = cu::contiguous(a);
  cu::keep_alive(c);
  return c;
}

using cudnn::scratch;

struct Scalars {
  float scale, neg_inf = -INFINITY, one = 1.0f;
  int32_t skv = 0, sq = 0;
};

// Runs `plan` on the current stream with the memory operands `ptrs` (the
// host scalars added here). False when cuDNN refuses.
bool execute(const Plan& plan, const Problem& p, Scalars& sc,
             std::vector<std::pair<int64_t, void*>> ptrs, int device) {
  ptrs.emplace_back(kScale, &sc.scale);
  if (p.backward) {
    ptrs.emplace_back(kOne, &sc.one);
  }
  if (p.causal) {
    ptrs.emplace_back(kNegInf, &sc.neg_inf);
    if (p.Lq != p.Lk) {
      ptrs.emplace_back(kSkv, &sc.skv);
      ptrs.emplace_back(kSq, &sc.sq);
    }
  }
  std::string error;
  const bool ok = cudnn::execute(plan, ptrs, device, error);
  if (!ok && debug()) {
    std::fprintf(stderr, "[fluxion] cuDNN attention execution failed: %s\n",
                 error.c_str());
  }
  return ok;
}

int current_device() {
  return cudnn::current_device("scaled_dot_product_attention");
}

// The problem of row-contiguous operands of these shapes.
Problem problem(Dtype t, int B, int Hq, int Hkv, int Lq, int Lk, int D,
                bool causal, float scale, bool stats, bool backward) {
  Problem p{};
  p.dt = cudnn_type(t);
  p.B = B;
  p.Hq = Hq;
  p.Lq = Lq;
  p.D = D;
  p.Hkv = Hkv;
  p.Lk = Lk;
  p.causal = causal;
  p.stats = stats;
  p.backward = backward;
  p.scale = scale;
  p.q = rows(B, Hq, Lq, D);
  p.k = p.v = rows(B, Hkv, Lk, D);
  p.o = p.d_o = p.q;
  return p;
}

Problem problem(const array& q, const array& k, float scale, bool causal,
                bool stats, bool backward) {
  return problem(q.dtype(), q.shape(0), q.shape(1), k.shape(1), q.shape(2),
                 k.shape(2), q.shape(3), causal, scale, stats, backward);
}

}  // namespace

bool plans_ready(int device, Dtype t, int B, int Hq, int Hkv, int Lq, int Lk,
                 int D, bool causal, float scale) {
  try {
    if (!eligible(t, B, Hq, Hkv, Lq, Lk, D, D, causal) || !lib().handle) {
      return false;
    }
    int prev = current_device();
    if (prev != device) {
      cu::check(cudaSetDevice(device), "scaled_dot_product_attention");
    }
    Problem f = problem(t, B, Hq, Hkv, Lq, Lk, D, causal, scale, true, false);
    Problem b = problem(t, B, Hq, Hkv, Lq, Lk, D, causal, scale, true, true);
    bool ok = plan_for(device, f)->plan && plan_for(device, b)->plan;
    if (prev != device) {
      cu::check(cudaSetDevice(prev), "scaled_dot_product_attention");
    }
    return ok;
  } catch (...) {
    return false;
  }
}

// Whether cuDNN may take attention of q, k, v (in[0..2]): the shapes and
// dtype it runs, and the library loaded.
bool takes(const std::vector<array>& in, bool causal) {
  const array& q = in[0];
  const array& k = in[1];
  return eligible(q.dtype(), q.shape(0), q.shape(1), k.shape(1), q.shape(2),
                  k.shape(2), q.shape(3), in[2].shape(3), causal) &&
         lib().handle;
}

bool forward(const std::vector<array>& in, std::vector<array>& out,
             float scale, bool causal) {
  if (!takes(in, causal)) {
    return false;
  }
  const array& q = in[0];
  const array& k = in[1];
  const array& v = in[2];
  const bool stats = out.size() > 1;
  // Decoding (a few queries, no backward to feed): cuDNN makes a block per
  // 64 queries of each head, too few to fill the GPU; sdpa.cu's kernel
  // splits the keys over blocks instead.
  if (!stats && q.shape(2) <= decode_queries()) {
    return false;
  }
  const int device = current_device();
  // The operands' own layouts when cuDNN reads them and a plan builds for
  // them, else row-contiguous ones (copies where needed).
  Layout lq, lk, lv;
  const bool own_layout =
      layout_of(q, lq) && layout_of(k, lk) && layout_of(v, lv);
  bool copy = false;
  auto find = [&](bool with_stats, Problem& p) -> std::shared_ptr<Plan> {
    p = problem(q, k, scale, causal, with_stats, false);
    if (own_layout) {
      Problem own = p;
      own.q = lq;
      own.k = lk;
      own.v = lv;
      auto plan = plan_for(device, own);
      if (plan && plan->plan) {
        p = own;
        copy = false;
        return plan;
      }
    }
    copy = true;
    auto plan = plan_for(device, p);
    return plan && plan->plan ? plan : nullptr;
  };
  Problem p{};
  auto plan = find(stats, p);
  if (!plan && !stats) {
    // No inference plan: the training one, its statistics into scratch.
    plan = find(true, p);
  }
  if (!plan) {
    return false;
  }
  array qc = copy ? row_contiguous(q) : q;
  array kc = copy ? row_contiguous(k) : k;
  array vc = copy ? row_contiguous(v) : v;
  cu::alloc(out[0]);
  void* lse = nullptr;
  if (stats) {
    cu::alloc(out[1]);
    lse = cu::ptr(out[1]);
  } else if (p.stats) {
    lse = scratch(size_t(p.B) * p.Hq * p.Lq * sizeof(float))->ptr();
  }
  Scalars sc{scale};
  sc.skv = p.Lk;
  sc.sq = p.Lq;
  std::vector<std::pair<int64_t, void*>> ptrs{{kQ, cu::ptr(qc)},
                                              {kK, cu::ptr(kc)},
                                              {kV, cu::ptr(vc)},
                                              {kO, cu::ptr(out[0])}};
  if (p.stats) {
    ptrs.emplace_back(kStats, lse);
  }
  if (!execute(*plan, p, sc, std::move(ptrs), device)) {
    return false;
  }
  ++g_forward;
  return true;
}

bool backward(const std::vector<array>& in, std::vector<array>& out,
              float scale, bool causal) {
  if (!takes(in, causal) || in[4].dtype() != float32) {
    return false;
  }
  const array& q = in[0];
  const array& k = in[1];
  const int device = current_device();
  Problem p = problem(q, k, scale, causal, true, true);
  auto plan = plan_for(device, p);  // row-contiguous operands
  if (!plan || !plan->plan) {
    return false;
  }
  // Operands row-contiguous (the forward's o and lse and the cotangent
  // usually are already; others are copied).
  std::vector<array> ops;
  for (int i : {0, 1, 2, 3, 5}) {
    ops.push_back(row_contiguous(in[i]));
  }
  array lse = row_contiguous(in[4]);
  for (auto& o : out) {
    cu::alloc(o);
  }
  const size_t rows_n = size_t(p.B) * p.Hq * p.Lq;
  auto dsum = scratch(rows_n * sizeof(float));
  auto acc = scratch(rows_n * p.D * sizeof(float));
  if (lib().version < 90600) {
    // Before 9.6 the float dQ accumulator is not cleared by cuDNN.
    cu::check(cudaMemsetAsync(acc->ptr(), 0, rows_n * p.D * sizeof(float),
                              cu::current_stream()),
              "scaled_dot_product_attention");
  }
  Scalars sc{scale};
  sc.skv = p.Lk;
  sc.sq = p.Lq;
  std::vector<std::pair<int64_t, void*>> ptrs{
      {kQ, cu::ptr(ops[0])},  {kK, cu::ptr(ops[1])},
      {kV, cu::ptr(ops[2])},  {kO, cu::ptr(ops[3])},
      {kDO, cu::ptr(ops[4])}, {kStats, cu::ptr(lse)},
      {kDQ, cu::ptr(out[0])}, {kDK, cu::ptr(out[1])},
      {kDV, cu::ptr(out[2])}, {kDsum, dsum->ptr()},
      {kDQAcc, acc->ptr()}};
  if (!execute(*plan, p, sc, std::move(ptrs), device)) {
    return false;
  }
  ++g_backward;
  return true;
}

}  // namespace fluxion::cu::cudnn_sdpa

fluxion::gpu::CudnnSdpaInfo fluxion::gpu::cudnn_sdpa_info() {
  using namespace fluxion::cu::cudnn_sdpa;
  CudnnSdpaInfo s;
  auto& l = lib();
  s.loaded = l.handle != nullptr;
  s.version = l.version;
  s.library = l.path;
  s.error = l.error;
  s.forward_calls = g_forward.load();
  s.backward_calls = g_backward.load();
  s.failed_plans = g_failed.load();
  return s;
}

#endif  // FLUXION_HAVE_CUDNN

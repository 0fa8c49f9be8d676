// Convolutions through cuDNN 9's backend (graph) API: one operation per
// graph (forward, backward data or backward filter), chosen and described
// by backend/common/conv_plan.cpp, over channels-last tensors given by
// their strides (MLX's layouts, read in place; the weight gradient's
// transposed views too, and ConvolutionWeightGrad's input and cotangent).
// The library comes from cudnn_loader.cpp.
//
// Plans: heuristics mode A, then the fallback mode; the first engine
// config that finalizes, needs at most kMaxWorkspace bytes and computes as
// asked: no engine that converts the inputs down or reduces in reduced
// precision, and for float32 no tensor-core (TF32) engine unless
// FLUXION_ENABLE_TF32=1. Cached per device, dtype, operation, dims,
// strides and parameters, a failure too (the shape then runs the general
// path without asking cuDNN again). The workspace comes from Fluxion's
// allocator and is kept alive until the stream has run the convolution.
// FLUXION_CUDNN_CONV_DEBUG=1 prints each plan's failure and each
// operation chosen.
#include "fluxion/backend/cuda/conv_cudnn.h"

#include <cstdlib>
#include <cstring>

#include "fluxion/backend/cuda/cudnn_loader.h"

namespace fluxion::cu::cudnn_conv {

bool enabled() {
  const char* e = std::getenv("FLUXION_CUDNN_CONV");
  return !(e && std::strcmp(e, "0") == 0);
}

bool offer_all() {
  const char* e = std::getenv("FLUXION_CUDNN_CONV");
  return e && std::strcmp(e, "all") == 0;
}

}  // namespace fluxion::cu::cudnn_conv

#if !FLUXION_HAVE_CUDNN

namespace fluxion::cu::cudnn_conv {
bool run(const array&, const array&, array&, const Convolution&, bool) {
  return false;
}
bool run_weight_grad(const array&, const array&, array&,
                     const ConvolutionWeightGrad&) {
  return false;
}
Status status() {
  Status s;
  s.error = "Fluxion was built without cuDNN's headers (cudnn_graph.h)";
  return s;
}
}  // namespace fluxion::cu::cudnn_conv

#else

#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "fluxion/backend/common/conv_plan.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/ops/conv.h"

namespace fluxion::cu::cudnn_conv {

namespace {

using conv_plan::Mapping;
using conv_plan::Op;
using cudnn::lib;
using cudnn::Plan;

constexpr int64_t kMaxWorkspace = int64_t{1} << 30;

std::atomic<int64_t> g_forward{0}, g_data{0}, g_filter{0}, g_failed{0};

bool debug() {
  static const bool on = [] {
    const char* e = std::getenv("FLUXION_CUDNN_CONV_DEBUG");
    return e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

// Unique ids of the three memory operands.
enum : int64_t { kX = 1, kW, kY };

cudnnDataType_t data_type(Dtype t) {
  return t == float16 ? CUDNN_DATA_HALF
         : t == bfloat16 ? CUDNN_DATA_BFLOAT16
                         : CUDNN_DATA_FLOAT;
}

struct Problem {
  Mapping m;
  cudnnDataType_t dt;
  bool tf32;
};

class ConvBuilder : public cudnn::GraphBuilder {
 public:
  cudnnBackendDescriptor_t tensor(cudnnDataType_t dt,
                                  const conv_plan::Tensor& t, int64_t uid) {
    auto d = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16;
    bool is_virtual = false;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.nd, t.dim);
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.nd, t.stride);
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    finalize(d, "tensor");
    return d;
  }

  void convolution(const Problem& p) {
    const Mapping& m = p.m;
    auto x = tensor(p.dt, m.x, kX);
    auto w = tensor(p.dt, m.w, kW);
    auto y = tensor(p.dt, m.y, kY);
    auto conv = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const int64_t spatial = m.x.nd - 2;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode =
        m.convolution_mode ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
        &comp);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
        &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
        &spatial);
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial,
        m.dilation);
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
        spatial, m.stride);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial,
        m.pre);
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, spatial,
        m.post);
    finalize(conv, "convolution");
    // The three operations take the same six attributes under their own
    // names: alpha, beta, the convolution, and x, w, y in cuDNN's roles.
    struct Names {
      cudnnBackendDescriptorType_t type;
      cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
    };
    static const Names kForward{
        CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
    static const Names kData{
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
    static const Names kFilter{
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
    const Names& n = m.op == Op::forward         ? kForward
                     : m.op == Op::backward_data ? kData
                                                 : kFilter;
    float alpha = 1.0f, beta = 0.0f;
    cudnnBackendDescriptor_t op = create(n.type);
    set(op, n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(op, n.beta, CUDNN_TYPE_FLOAT, 1, &beta);
    set_desc(op, n.conv, conv);
    set_desc(op, n.x, x);
    set_desc(op, n.w, w);
    set_desc(op, n.y, y);
    add_op(op, "convolution op");
  }
};

// Engines that compute as the CPU does (within rounding): inputs not
// converted down, sums not reduced in reduced precision, and for float32
// no TF32 tensor cores unless asked for.
bool acceptable(const Problem& p, cudnnBackendDescriptor_t cfg,
                std::string& why) {
  std::vector<cudnnBackendNumericalNote_t> notes;
  if (!cudnn::numerical_notes(cfg, notes)) {
    // Unknown: only float32 needs them (TF32 must be ruled out).
    why = "an engine without numerical notes";
    return p.dt != CUDNN_DATA_FLOAT || p.tf32;
  }
  for (auto n : notes) {
    if (n == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        n == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) {
      why = "an engine of reduced precision";
      return false;
    }
    if (n == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && p.dt == CUDNN_DATA_FLOAT &&
        !p.tf32) {
      why = "a TF32 engine (FLUXION_ENABLE_TF32 is not 1)";
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------------ cache

using Key = cudnn::PlanCache::Key;

Key key_of(int device, const Problem& p) {
  const Mapping& m = p.m;
  Key k{device, p.dt, p.tf32, static_cast<int64_t>(m.op), m.x.nd,
        m.convolution_mode};
  for (const conv_plan::Tensor* t : {&m.x, &m.w, &m.y}) {
    k.insert(k.end(), t->dim, t->dim + t->nd);
    k.insert(k.end(), t->stride, t->stride + t->nd);
  }
  for (const int64_t* a : {m.pre, m.post, m.stride, m.dilation}) {
    k.insert(k.end(), a, a + 3);
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
    ConvBuilder g;
    g.convolution(p);
    if (g.ok()) {
      cudnn::PlanOptions o;
      o.modes = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
      o.accept = [&p](cudnnBackendDescriptor_t cfg, std::string& why) {
        return acceptable(p, cfg, why);
      };
      o.max_workspace = kMaxWorkspace;
      cudnn::make_plan(handle, g, *plan, o);
    } else {
      plan->error = g.error;
    }
  }
  if (!plan->plan) {
    ++g_failed;
  }
  if (debug()) {
    std::fprintf(stderr, "[fluxion] cuDNN convolution %s: %s\n",
                 p.m.str().c_str(),
                 plan->plan ? "plan made"
                            : ("no plan (" + plan->error + ")").c_str());
  }
  return plan;
}

// The plan of `p` on `device`, built on first sight.
std::shared_ptr<Plan> plan_for(int device, const Problem& p) {
  static auto* cache = new cudnn::PlanCache();  // leaked: plans live to exit
  return cache->get(key_of(device, p), [&] { return build_plan(device, p); });
}

// ---------------------------------------------------------------- running

bool aligned(const array& a) {
  return reinterpret_cast<uintptr_t>(cu::ptr(a)) % 16 == 0;
}

// A fresh row-contiguous GPU array of `shape` in dtype t, kept alive until
// the stream ran.
array fresh(const Shape& shape, Dtype t) {
  array a(shape, t, nullptr, {});
  cu::alloc(a);
  a.set_status(array::Status::available);
  cu::keep_alive(a);
  return a;
}

// `a` as the descriptors expect it: itself when its layout is the one
// described (`pack` false), in dtype t and aligned; else a row-contiguous
// copy.
array operand(const array& a, bool pack, Dtype t) {
  if (!pack && a.dtype() == t && aligned(a)) {
    return a;
  }
  array c = fresh(a.shape(), t);
  cu::copy_into(a, c);
  return c;
}

bool run_mapping(const Mapping& m, const array& x, const array& w,
                 array& out, int device) {
  const Dtype t = out.dtype();
  Problem p{m, data_type(t), cu::tf32_enabled()};
  auto plan = plan_for(device, p);
  if (!plan->plan) {
    return false;
  }
  std::vector<std::pair<int64_t, void*>> ptrs;
  array dw = out;  // backward filter's scratch
  switch (m.op) {
    case Op::forward: {
      array xc = operand(x, m.pack_input, t);
      array wc = operand(w, m.pack_weight, t);
      ptrs = {{kX, cu::ptr(xc)}, {kW, cu::ptr(wc)}, {kY, cu::ptr(out)}};
      break;
    }
    case Op::backward_data: {
      array dy = operand(x, m.pack_input, t);
      array wc = operand(w, m.pack_weight, t);
      array wr = fresh({static_cast<int32_t>(m.scratch_elems)}, t);
      const auto& c = m.weight_copy;
      cu::copy_region(wc, c.src, 0, wr, c.dst, 0, c.shape);
      ptrs = {{kX, cu::ptr(out)}, {kW, cu::ptr(wr)}, {kY, cu::ptr(dy)}};
      break;
    }
    case Op::backward_filter: {
      // Operands not packed are read as they are (their strides are the
      // descriptors': transposed views too), so they must already be in
      // the dtype and aligned.
      if ((!m.pack_input && (x.dtype() != t || !aligned(x))) ||
          (!m.pack_weight && (w.dtype() != t || !aligned(w)))) {
        return false;
      }
      array xc = operand(x, m.pack_input, t);
      array wc = operand(w, m.pack_weight, t);
      if (m.scratch_elems > 0) {
        dw = fresh({static_cast<int32_t>(m.scratch_elems)}, t);
      }
      const array& X = m.swap_operands ? wc : xc;
      const array& DY = m.swap_operands ? xc : wc;
      ptrs = {{kX, cu::ptr(X)}, {kW, cu::ptr(dw)}, {kY, cu::ptr(DY)}};
      break;
    }
  }
  std::string error;
  if (!cudnn::execute(*plan, ptrs, device, error)) {
    if (debug()) {
      std::fprintf(stderr,
                   "[fluxion] cuDNN convolution %s: execution failed: %s\n",
                   m.str().c_str(), error.c_str());
    }
    return false;
  }
  switch (m.op) {
    case Op::forward:
      ++g_forward;
      break;
    case Op::backward_data:
      ++g_data;
      break;
    case Op::backward_filter: {
      if (m.scratch_elems > 0) {
        const auto& c = m.result_copy;
        cu::copy_region(dw, c.src, c.src_offset, out, c.dst, 0, c.shape);
      }
      ++g_filter;
      break;
    }
  }
  return true;
}

}  // namespace

bool run(const array& x, const array& w, array& out, const Convolution& c,
         bool forward) {
  const Dtype t = out.dtype();
  if (!enabled() || (t != float32 && t != float16 && t != bfloat16) ||
      !lib().handle) {
    return false;
  }
  auto mappings = conv_plan::cudnn_mappings(
      x.shape(), x.strides(), w.shape(), w.strides(), out.shape(), c.stride(),
      c.padding_lo(), c.padding_hi(), c.kernel_dilation(),
      c.input_dilation(), c.groups(), c.flip());
  if (mappings.empty()) {
    return false;
  }
  const int device = cudnn::current_device("conv");
  for (const auto& m : mappings) {
    if ((forward || m.op != Op::forward) &&
        run_mapping(m, x, w, out, device)) {
      return true;
    }
  }
  return false;
}

bool run_weight_grad(const array& x, const array& ct, array& out,
                     const ConvolutionWeightGrad& c) {
  const Dtype t = out.dtype();
  if (!enabled() || (t != float32 && t != float16 && t != bfloat16) ||
      !lib().handle) {
    return false;
  }
  auto mappings = conv_plan::weight_grad_mappings(
      x.shape(), x.strides(), ct.shape(), ct.strides(), out.shape(),
      c.stride(), c.padding_lo(), c.kernel_dilation(), c.input_dilation(),
      c.groups(), c.flip());
  if (mappings.empty()) {
    return false;
  }
  const int device = cudnn::current_device("conv");
  for (const auto& m : mappings) {
    if (run_mapping(m, x, ct, out, device)) {
      return true;
    }
  }
  return false;
}

Status status() {
  Status s;
  auto& l = lib();
  s.loaded = l.handle != nullptr;
  s.version = l.version;
  s.error = l.error;
  s.forward_calls = g_forward.load();
  s.backward_data_calls = g_data.load();
  s.backward_filter_calls = g_filter.load();
  s.failed_plans = g_failed.load();
  return s;
}

}  // namespace fluxion::cu::cudnn_conv

#endif  // FLUXION_HAVE_CUDNN

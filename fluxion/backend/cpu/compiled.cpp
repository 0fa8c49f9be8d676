// The Compiled primitive on the CPU: the generated kernel over the output's
// elements (contiguous or strided entry point), split over the thread
// pool; without a kernel, the fused nodes evaluated one by one.
#include "fluxion/compiled.h"

#include <unordered_set>

#include "fluxion/backend/cpu/codegen.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Input strides (in elements) broadcast to `shape`, right-aligned.
Strides broadcast_strides(const array& in, const Shape& shape) {
  Strides s(shape.size(), 0);
  int off = static_cast<int>(shape.size()) - in.ndim();
  for (int d = 0; d < in.ndim(); ++d) {
    s[off + d] = in.shape(d) == 1 ? 0 : in.strides(d);
  }
  return s;
}

}  // namespace

void Compiled::eval_fallback(const std::vector<array>& inputs, array& out) {
  auto result = replay(inputs)[0];
  // Post-order over the replayed nodes, evaluated in place.
  std::vector<std::pair<array, size_t>> stack{{result, 0}};
  std::unordered_set<uintptr_t> done;
  for (auto& in : inputs) {
    done.insert(in.id());
  }
  while (!stack.empty()) {
    auto& [a, next] = stack.back();
    if (next < a.inputs().size()) {
      const array& in = a.inputs()[next++];
      if (!done.count(in.id()) && in.has_primitive() && !in.is_available()) {
        stack.emplace_back(in, 0);
      }
      continue;
    }
    array node = a;
    stack.pop_back();
    if (!done.insert(node.id()).second) {
      continue;
    }
    auto outs = node.outputs();
    node.primitive().eval_cpu(node.inputs(), outs);
    for (auto& o : outs) {
      done.insert(o.id());
    }
  }
  out.copy_shared_buffer(result);
}

void Compiled::eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  array& out = outputs[0];
  const cpu::Kernel* kernel = cpu::load_kernel(source_);
  if (!kernel) {
    eval_fallback(inputs, out);
    return;
  }
  const Shape& shape = out.shape();
  // Contiguous when every input is a traced scalar still of size 1, or a
  // row-contiguous array of the output's shape (or reshaped to it).
  bool contiguous = true;
  for (size_t k = 0; k < inputs.size(); ++k) {
    auto& traced = tape_.values[tape_.inputs[k]].shape;
    size_t traced_size = 1;
    for (auto d : traced) traced_size *= d;
    const array& in = inputs[k];
    bool dense = in.flags().row_contiguous;
    bool ok = traced_size == 1 ? in.size() == 1
              : reshaped(k)    ? dense && in.size() == out.size()
                               : dense && in.shape() == shape;
    if (!ok && traced_size != 1 && reshaped(k) && !dense) {
      // A reshape of a strided array is a copy: leave it to the kernels.
      eval_fallback(inputs, out);
      return;
    }
    contiguous = contiguous && ok;
  }
  // Donate an input buffer of the output's size and dtype when possible.
  bool donated = false;
  for (auto& in : inputs) {
    if (contiguous && in.dtype() == out.dtype() && in.shape() == shape &&
        in.is_donatable()) {
      out.copy_shared_buffer(in);
      donated = true;
      break;
    }
  }
  if (!donated) {
    out.set_data(out.nbytes());
  }
  std::vector<void*> ptrs;
  for (auto& in : inputs) {
    ptrs.push_back(in.raw_data());
  }
  void* dst = out.raw_data();
  int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) {
    return;
  }
  if (contiguous) {
    cpu::parallel_for(n, cpu::kElementwiseGrain, [&](int64_t b, int64_t e) {
      kernel->contiguous(ptrs.data(), dst, b, e);
    });
    return;
  }
  // Strided: collapse dimensions that are contiguous for every input (in
  // 64 bits: merged dimensions may pass 2^31 elements).
  std::vector<int64_t> dims(shape.begin(), shape.end());
  if (dims.empty()) {
    dims.push_back(1);
  }
  std::vector<Strides> st;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Strides s;
    if (reshaped(k) && inputs[k].size() != 1) {
      s = row_major_strides(shape);  // dense, read in the output's order
    } else {
      s = broadcast_strides(inputs[k], shape);
    }
    if (s.empty()) s = {0};
    st.push_back(std::move(s));
  }
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    bool merge = true;
    for (auto& s : st) {
      merge = merge && s[d] == s[d + 1] * dims[d + 1];
    }
    if (merge) {
      dims[d] *= dims[d + 1];
      dims.erase(dims.begin() + d + 1);
      for (auto& s : st) {
        s[d] = s[d + 1];  // the merged axis steps like the inner one
        s.erase(s.begin() + d + 1);
      }
    }
  }
  int nd = static_cast<int>(dims.size());
  const std::vector<int64_t>& shape64 = dims;
  std::vector<int64_t> flat;
  for (auto& s : st) {
    flat.insert(flat.end(), s.begin(), s.end());
  }
  int64_t inner = shape64.back();
  int64_t rows = n / inner;
  int64_t grain = std::max<int64_t>(1, cpu::kElementwiseGrain / inner);
  cpu::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    kernel->strided(ptrs.data(), dst, shape64.data(), flat.data(), nd, b, e);
  });
}

}  // namespace fluxion

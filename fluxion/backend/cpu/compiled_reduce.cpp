// A fused reduction on the CPU (codegen.h: run_reduction). Row reductions
// split the rows over the thread pool, each row done by one thread (so
// the row's fold order is the eager one whatever the thread count). A
// total over all axes splits the flat elements into the eager kernel's
// chunks: min(threads, n / 2^16), partials combined as a tree.
#include <algorithm>
#include <atomic>

#include "fluxion/backend/cpu/codegen.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/reduce.h"

namespace fluxion::cpu {

namespace {

// As reduce.cpp: below this many elements a total stays on one thread.
constexpr int64_t kReduceGrain = 1 << 16;
// fx_finish combines at most this many partials.
constexpr int64_t kMaxChunks = 64;

int64_t size_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Input strides (in elements) broadcast against `shape`, right-aligned.
std::vector<int64_t> strides_against(const array& in, const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 0);
  int off = static_cast<int>(shape.size()) - in.ndim();
  for (int d = 0; d < in.ndim(); ++d) {
    s[off + d] = in.shape(d) == 1 ? 0 : in.strides(d);
  }
  return s;
}

// Fresh buffers for the outputs (at least one byte: a kernel may be
// handed their pointers when nothing is written); their pointers.
std::vector<void*> allocate(std::vector<array>& outs) {
  std::vector<void*> dst;
  for (auto& out : outs) {
    out.set_data(std::max<size_t>(out.nbytes(), 1));
    dst.push_back(out.raw_data());
  }
  return dst;
}

// A column tape: a run of columns per thread (multiples of 16), each
// walked over all rows (so a column's fold order is the eager one on one
// thread), or, for one reduction with too few columns to share, chunks of
// rows. The kernel reads row-contiguous inputs only: any other layout runs
// the nodes one by one (false).
bool run_columns(const detail::Ir& tape, const Kernel& kernel, size_t m,
                 const Shape& traced_row, const Shape& row,
                 const std::vector<array>& inputs, std::vector<array>& outs) {
  int64_t N = 1, C = 1;
  for (size_t d = 0; d < row.size(); ++d) {
    (d < m ? N : C) *= row[d];
  }
  // Each input as the kernel reads it (codegen_reduce.cpp's kinds, from
  // the traced shapes): all of S, one value per column, or one element.
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape& traced = tape.values[tape.inputs[k]].shape;
    int64_t want = traced == traced_row ? N * C
                   : size_of(traced) == 1 ? 1
                                          : C;
    const array& in = inputs[k];
    if (static_cast<int64_t>(in.size()) != want ||
        (want > 1 && !in.flags().row_contiguous)) {
      return false;
    }
  }
  std::vector<void*> dst = allocate(outs);
  if (C == 0) {
    return true;  // (no rows: the kernel writes each column's initial value)
  }
  std::vector<void*> ptrs;
  for (auto& in : inputs) ptrs.push_back(in.raw_data());
  // Threads split the columns, each taking runs of at least 256 of every
  // row: with narrower runs two threads' neighbouring parts of a row (their
  // stores above all) fight over cache lines, and NHWC batch norm with
  // C = 128 took 9.0 ms on 2 threads against 5.5 ms on one. Few columns
  // therefore mean one thread for a chain of reductions (splitting its
  // rows would need a combine between the passes: not done yet).
  const int64_t work_threads = std::min<int64_t>(
      num_threads(), std::max<int64_t>(1, N * C / kReduceGrain));
  const int64_t threads =
      std::min<int64_t>(work_threads, std::max<int64_t>(1, C / 256));
  if (threads < work_threads && kernel.cols_part && kernel.cols_finish &&
      N >= 8 * work_threads) {
    // Too few columns for the threads, and one reduction: the rows split
    // instead, as the eager kernel splits them (chunks of whole rows,
    // partials combined as a tree).
    const int64_t chunks = std::min<int64_t>(work_threads, 64);
    const int64_t step = (N + chunks - 1) / chunks;
    std::vector<double> slices(static_cast<size_t>(chunks * C));
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t r0 = std::min(N, t * step);
        const int64_t r1 = std::min(N, r0 + step);
        kernel.cols_part(ptrs.data(), slices.data() + t * C, C, r0, r1, 0,
                         C);
      }
    });
    kernel.cols_finish(ptrs.data(), slices.data(), chunks, C, dst.data(), 0,
                       C);
    return true;
  }
  const int64_t W = (C + threads * 16 - 1) / (threads * 16) * 16;
  const int64_t blocks = (C + W - 1) / W;
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    kernel.cols(ptrs.data(), dst.data(), N, C, b * W, std::min(C, e * W));
  });
  return true;
}

}  // namespace

bool run_reduction(const detail::Ir& tape, const Kernel& kernel,
                   const Shape& row, const std::vector<array>& inputs,
                   std::vector<array>& outs) {
  const Reduce* reduce = nullptr;
  Shape traced_row;
  for (auto& n : tape.nodes) {
    if (auto* r = dynamic_cast<const Reduce*>(n.prim.get())) {
      reduce = r;
      traced_row = tape.values[n.inputs[0]].shape;
    }
  }
  const bool all_axes = reduce->axes().size() == row.size();
  if (kernel.cols) {
    return run_columns(tape, kernel, reduce->axes().size(), traced_row, row,
                       inputs, outs);
  }
  int64_t n = 1;
  for (auto d : row) n *= d;
  if (kernel.total && all_axes) {
    // Flat elements: every input row-contiguous of the row shape, or one
    // element read as a scalar.
    bool flat = true;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const array& in = inputs[k];
      flat = flat && (size_of(tape.values[tape.inputs[k]].shape) == 1
                          ? in.size() == 1
                          : in.flags().row_contiguous && in.shape() == row);
    }
    if (flat) {
      std::vector<void*> ptrs;
      for (auto& in : inputs) ptrs.push_back(in.raw_data());
      int64_t chunks = std::min<int64_t>(num_threads(), n / kReduceGrain);
      chunks = std::clamp<int64_t>(chunks, 1, kMaxChunks);
      int64_t step = (n + chunks - 1) / chunks;
      std::vector<double> slots(chunks);
      parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t lo = std::min(n, t * step), hi = std::min(n, lo + step);
          kernel.total(ptrs.data(), &slots[t], lo, hi);
        }
      });
      // (A total has one output: fuse_reductions.)
      kernel.finish(ptrs.data(), slots.data(), chunks, allocate(outs)[0]);
      return true;
    }
  }
  if (!kernel.rows || (all_axes && row.size() > 1)) {
    return false;  // a total over strided inputs
  }
  std::vector<void*> dst = allocate(outs);
  const int64_t R = row.back();
  int64_t rows_all = 1;
  for (size_t d = 0; d + 1 < row.size(); ++d) rows_all *= row[d];
  if (rows_all == 0) {
    return true;
  }
  std::vector<int64_t> shape(row.begin(), row.end());
  std::vector<int64_t> flat;
  std::vector<void*> ptrs;
  for (auto& in : inputs) {
    auto s = strides_against(in, row);
    flat.insert(flat.end(), s.begin(), s.end());
    ptrs.push_back(in.raw_data());
  }
  int nd = static_cast<int>(shape.size());
  int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R, 1));
  std::atomic<bool> bad_index{false};
  parallel_for(rows_all, grain, [&](int64_t b, int64_t e) {
    if (kernel.rows(ptrs.data(), dst.data(), shape.data(), flat.data(), nd,
                    b, e)) {
      bad_index = true;
    }
  });
  return !bad_index;
}

}  // namespace fluxion::cpu

// The FFT primitive's kernel: successive one-dimensional transforms along
// the axes. Each pass views its arrays as (outer, n, inner) around the axis;
// a block of up to kBlock lines adjacent in `inner` is gathered into a
// contiguous buffer (so that reads touch whole cache lines), transformed
// with the cached plan and scattered back. Contiguous lines (inner == 1)
// are transformed in place of the gather when source and destination
// differ. Blocks are spread over the thread pool. The first pass reads the
// input and writes the output; later passes work in place on the output.
#include "fluxion/ops/fft.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "fluxion/allocator.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/fft_plan.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

using cpu::fft::cfloat;

constexpr int64_t kBlock = 8;
// Contiguous lines up to this length are transposed into blocks and
// transformed together; longer ones one at a time, in place.
constexpr int64_t kBatchContiguous = 256;

// Uninitialized scratch from the caching allocator (a std::vector would
// zero it, which costs as much as a pass of a long transform).
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : bytes_(std::max<size_t>(n * sizeof(T), 1)),
        p_(static_cast<T*>(allocator::malloc(bytes_))) {}
  ~Scratch() { allocator::free(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() const { return p_; }
  T& operator[](int64_t i) const { return p_[i]; }

 private:
  size_t bytes_;
  T* p_;
};

struct Geometry {
  int64_t outer = 1;
  int64_t inner = 1;
};

Geometry geometry(const Shape& shape, int ax) {
  Geometry g;
  for (int d = 0; d < ax; ++d) {
    g.outer *= shape[d];
  }
  for (int d = ax + 1; d < static_cast<int>(shape.size()); ++d) {
    g.inner *= shape[d];
  }
  return g;
}

// Runs `line(in, out, work, parallel)` on every line along `ax`: `src` has n_in
// elements along it, `dst` n_out, other dimensions as in `shape`. `src` and
// `dst` may be the same buffer (then n_in == n_out). Outputs are scaled by
// `scale`.
template <typename In, typename Out, typename F>
void axis_pass(const In* src, Out* dst, const Shape& shape, int ax,
               int64_t n_in, int64_t n_out, int64_t work_size, float scale,
               const F& line) {
  auto g = geometry(shape, ax);
  if (g.outer * g.inner == 0) {
    return;
  }
  // Fewer lines than threads: the threads split each transform instead.
  bool par = g.outer * g.inner < cpu::num_threads();
  bool direct = g.inner == 1 &&
                static_cast<const void*>(src) != static_cast<const void*>(dst);
  int64_t b = std::min(kBlock, g.inner);
  int64_t per_outer = (g.inner + b - 1) / b;
  int64_t blocks = g.outer * per_outer;
  int64_t grain = std::max<int64_t>(1, (1 << 15) / (b * (n_in + n_out)));
  cpu::parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
    Scratch<cfloat> work(work_size);
    Scratch<In> gin(direct ? 0 : b * n_in);
    Scratch<Out> gout(direct ? 0 : b * n_out);
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t o = blk / per_outer;
      int64_t i0 = (blk % per_outer) * b;
      int64_t cnt = std::min(b, g.inner - i0);
      const In* s = src + o * n_in * g.inner + i0;
      Out* d = dst + o * n_out * g.inner + i0;
      if (direct) {
        line(s, d, work.data(), par);
        if (scale != 1.0f) {
          for (int64_t t = 0; t < n_out; ++t) {
            d[t] *= scale;
          }
        }
        continue;
      }
      for (int64_t t = 0; t < n_in; ++t) {
        const In* row = s + t * g.inner;
        for (int64_t j = 0; j < cnt; ++j) {
          gin[j * n_in + t] = row[j];
        }
      }
      for (int64_t j = 0; j < cnt; ++j) {
        line(gin.data() + j * n_in, gout.data() + j * n_out, work.data(), par);
      }
      for (int64_t t = 0; t < n_out; ++t) {
        Out* row = d + t * g.inner;
        for (int64_t j = 0; j < cnt; ++j) {
          row[j] = gout[j * n_out + t] * scale;
        }
      }
    }
  });
}

// Complex transforms along `ax` by blocks of lines transformed together
// (Plan::execute_batch): a block is gathered element-major, transform j's
// element t at [t * b + j], which is a plain copy of b adjacent elements per
// t when the axis is not the innermost one.
void batched_pass(const cfloat* src, cfloat* dst, const Shape& shape, int ax,
                  const cpu::fft::Plan& plan, float scale) {
  auto g = geometry(shape, ax);
  int64_t n = shape[ax];
  if (g.outer * g.inner == 0) {
    return;
  }
  int64_t want = std::clamp<int64_t>(4096 / n, 8, 64);
  // Lines in a block are `ls` apart; blocks never straddle an outer index
  // when inner > 1.
  bool inner_lines = g.inner > 1;
  int64_t b = std::min(want, inner_lines ? g.inner : g.outer);
  int64_t ls = inner_lines ? 1 : n;
  int64_t ts = inner_lines ? g.inner : 1;
  int64_t per_outer = inner_lines ? (g.inner + b - 1) / b : 1;
  int64_t blocks = inner_lines ? g.outer * per_outer : (g.outer + b - 1) / b;
  int64_t grain = std::max<int64_t>(1, (1 << 15) / (b * n));
  cpu::parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
    Scratch<cfloat> in(n * b), out(n * b), work(n * b);
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t base, cnt;
      if (inner_lines) {
        int64_t o = blk / per_outer;
        int64_t i0 = (blk % per_outer) * b;
        cnt = std::min(b, g.inner - i0);
        base = o * n * g.inner + i0;
      } else {
        cnt = std::min(b, g.outer - blk * b);
        base = blk * b * n;
      }
      for (int64_t t = 0; t < n; ++t) {
        const cfloat* row = src + base + t * ts;
        for (int64_t j = 0; j < cnt; ++j) {
          in[t * cnt + j] = row[j * ls];
        }
      }
      plan.execute_batch(in.data(), out.data(), work.data(), cnt);
      for (int64_t t = 0; t < n; ++t) {
        cfloat* row = dst + base + t * ts;
        for (int64_t j = 0; j < cnt; ++j) {
          row[j * ls] = out[t * cnt + j] * scale;
        }
      }
    }
  });
}

// Complex transforms along `axes` of a row-contiguous complex array of
// shape `shape`, from `src` into `dst` (the first pass) and then in place.
void complex_passes(const cfloat* src, cfloat* dst, const Shape& shape,
                    std::vector<int> axes, bool inverse) {
  // The innermost axis first: its lines are contiguous.
  std::sort(axes.rbegin(), axes.rend());
  for (int ax : axes) {
    int64_t n = shape[ax];
    auto plan = cpu::fft::get_plan(n, inverse);
    float scale = inverse ? 1.0f / static_cast<float>(n) : 1.0f;
    auto g = geometry(shape, ax);
    // Short contiguous lines, or strided ones: transformed in blocks.
    if (plan->batchable() && (g.inner > 1 || n <= kBatchContiguous)) {
      batched_pass(src, dst, shape, ax, *plan, scale);
      src = dst;
      continue;
    }
    axis_pass(src, dst, shape, ax, n, n, plan->work_size(), scale,
              [&](const cfloat* in, cfloat* out, cfloat* work, bool par) {
                plan->execute(in, out, work, par);
              });
    src = dst;
  }
}

}  // namespace

void FFT::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  auto in = cpu::ensure_row_contiguous(inputs[0]);
  auto& out = outputs[0];
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  if (out.size() == 0) {
    return;
  }
  if (!real_) {
    complex_passes(in.data<cfloat>(), out.data<cfloat>(), out.shape(), axes_,
                   inverse_);
    return;
  }
  int last = axes_.back();
  std::vector<int> rest(axes_.begin(), axes_.end() - 1);
  int64_t n = n_;
  int64_t m = n / 2 + 1;
  if (!inverse_) {
    auto plan = cpu::fft::get_real_plan(n, false);
    axis_pass(in.data<float>(), out.data<cfloat>(), out.shape(), last, n, m,
              plan->work_size(), 1.0f,
              [&](const float* x, cfloat* y, cfloat* work, bool par) {
                plan->forward(x, y, work, par);
              });
    if (!rest.empty()) {
      complex_passes(out.data<cfloat>(), out.data<cfloat>(), out.shape(), rest,
                     false);
    }
    return;
  }
  // Inverse: the complex axes first (into a scratch copy), then the real
  // one.
  const cfloat* spec = in.data<cfloat>();
  Scratch<cfloat> tmp(rest.empty() ? 0 : in.size());
  if (!rest.empty()) {
    complex_passes(spec, tmp.data(), in.shape(), rest, true);
    spec = tmp.data();
  }
  auto plan = cpu::fft::get_real_plan(n, true);
  axis_pass(spec, out.data<float>(), out.shape(), last, m, n, plan->work_size(),
            1.0f / static_cast<float>(n),
            [&](const cfloat* x, float* y, cfloat* work, bool par) {
              plan->backward(x, y, work, par);
            });
}

}  // namespace fluxion

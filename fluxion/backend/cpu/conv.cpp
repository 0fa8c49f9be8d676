// CPU kernel of Convolution: im2col + BLAS gemm.
//
// Every convolution is seen as a 3-D one (missing leading spatial axes have
// size 1). The input and weight are made row-major in the compute type
// (float32 for float16/bfloat16). The output rows (n, o0, o1, o2) are cut
// into blocks; for each block and group, im2col writes the rows' receptive
// fields [rows, K0*K1*K2*C_in/g] (taps in the weight's order, each tap a
// run of channels copied at once, zeros where the tap falls on padding or
// between dilated input elements), and one gemm multiplies it by the
// group's weights [C_out/g, K0*K1*K2*C_in/g]^T straight into the output.
// Large blocks: im2col over the thread pool, then a gemm OpenBLAS spreads
// over its own threads. Thin products: blocks small enough that OpenBLAS
// stays single-threaded, whole (block, group) units over the pool. A 1x1
// convolution without stride, padding or dilation reads the input in place as
// the im2col matrix.
#include "fluxion/ops/conv.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "fluxion/backend/common/conv_plan.h"
#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Multiply-adds per gemm below which OpenBLAS runs on one thread.
constexpr int64_t kSmallGemm = 64 * 64 * 64;
// Target im2col block size in elements.
constexpr int64_t kBlockElems = 1 << 19;

void gemm_nt(int m, int n, int k, const float* a, int lda, const float* b,
             int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
}
void gemm_nt(int m, int n, int k, const double* a, int lda, const double* b,
             int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, lda, b,
              ldb, 0.0, c, ldc);
}

array scratch(const Shape& shape, Dtype dtype) {
  array a(shape, dtype, nullptr, {});
  a.set_data(a.nbytes());
  a.set_status(array::Status::available);
  return a;
}

// Scratch for im2col blocks, from the caching allocator (no page faults
// on every call, as a fresh multi-MiB malloc would have).
template <typename T>
array col_buffer(int64_t n) {
  return scratch({static_cast<int32_t>(n)}, sizeof(T) == 4 ? float32 : float64);
}

// `a` row-major in dtype `t` (itself when it already is).
array compute_copy(const array& a, Dtype t) {
  if (a.dtype() == t && a.flags().row_contiguous) {
    return a;
  }
  array c = scratch(a.shape(), t);
  cpu::copy_region(a, a.strides(), 0, c, c.strides(), 0, a.shape());
  return c;
}

struct Geometry {
  int64_t n, cin, cout, groups, cin_g, cout_g;
  int L[3], K[3], O[3];
  int s[3], lo[3], kd[3], id[3];
  bool flip;
  // tap[d][o * K[d] + k]: the input index read by output o at tap k along
  // axis d, or -1 (padding or a hole of the input dilation).
  std::vector<int> tap[3];
  int64_t taps() const { return int64_t{K[0]} * K[1] * K[2]; }
  int64_t cols() const { return taps() * cin_g; }
  int64_t positions() const { return int64_t{O[0]} * O[1] * O[2]; }
};

Geometry geometry(const array& x, const array& w, const array& y,
                  const Convolution& c, bool with_last_table) {
  Geometry g;
  int d = x.ndim() - 2;
  int pad = 3 - d;
  g.n = x.shape(0);
  g.cin = x.shape(-1);
  g.cout = w.shape(0);
  g.groups = c.groups();
  g.cin_g = g.cin / g.groups;
  g.cout_g = g.cout / g.groups;
  for (int a = 0; a < 3; ++a) {
    int i = a - pad;  // the primitive's axis, or < 0 for an added one
    g.L[a] = i < 0 ? 1 : x.shape(i + 1);
    g.K[a] = i < 0 ? 1 : w.shape(i + 1);
    g.O[a] = i < 0 ? 1 : y.shape(i + 1);
    int s = g.s[a] = i < 0 ? 1 : c.stride()[i];
    int lo = g.lo[a] = i < 0 ? 0 : c.padding_lo()[i];
    int kd = g.kd[a] = i < 0 ? 1 : c.kernel_dilation()[i];
    int id = g.id[a] = i < 0 ? 1 : c.input_dilation()[i];
    bool flip = g.flip = c.flip();
    flip = flip && i >= 0;
    if (a == 2 && !with_last_table && id == 1) {
      continue;  // the depthwise kernel computes axis 2 ranges itself
    }
    auto& t = g.tap[a];
    t.resize(static_cast<size_t>(g.O[a]) * g.K[a]);
    for (int o = 0; o < g.O[a]; ++o) {
      for (int k = 0; k < g.K[a]; ++k) {
        int kk = flip ? g.K[a] - 1 - k : k;
        int64_t j = int64_t{o} * s - lo + int64_t{kk} * kd;
        int idx = -1;
        if (id == 1) {
          idx = j >= 0 && j < g.L[a] ? static_cast<int>(j) : -1;
        } else if (j >= 0 && j % id == 0 && j / id < g.L[a]) {
          idx = static_cast<int>(j / id);
        }
        t[static_cast<size_t>(o) * g.K[a] + k] = idx;
      }
    }
  }
  return g;
}

// Receptive fields of output rows [r0, r1) for group `grp` into `col`
// (row-major, cols() per row).
template <typename T>
void im2col(const Geometry& g, const T* x, int grp, int64_t r0, int64_t r1,
            T* col) {
  const int64_t cg = g.cin_g;
  const int64_t cols = g.cols();
  const int64_t P = g.positions();
  for (int64_t r = r0; r < r1; ++r) {
    int64_t n = r / P, p = r % P;
    int o2 = static_cast<int>(p % g.O[2]);
    int64_t q = p / g.O[2];
    int o1 = static_cast<int>(q % g.O[1]);
    int o0 = static_cast<int>(q / g.O[1]);
    T* dst = col + (r - r0) * cols;
    const int* t0 = g.tap[0].data() + static_cast<size_t>(o0) * g.K[0];
    const int* t1 = g.tap[1].data() + static_cast<size_t>(o1) * g.K[1];
    const int* t2 = g.tap[2].data() + static_cast<size_t>(o2) * g.K[2];
    const T* xn =
        x + n * g.L[0] * g.L[1] * int64_t{g.L[2]} * g.cin + int64_t{grp} * cg;
    for (int k0 = 0; k0 < g.K[0]; ++k0) {
      int i0 = t0[k0];
      for (int k1 = 0; k1 < g.K[1]; ++k1) {
        int i1 = t1[k1];
        bool valid = i0 >= 0 && i1 >= 0;
        const T* row =
            valid ? xn + (int64_t{i0} * g.L[1] + i1) * g.L[2] * g.cin : xn;
        for (int k2 = 0; k2 < g.K[2]; ++k2, dst += cg) {
          int i2 = t2[k2];
          if (!valid || i2 < 0) {
            std::fill(dst, dst + cg, T(0));
          } else if (cg == 1) {
            *dst = row[int64_t{i2} * g.cin];
          } else {
            std::memcpy(dst, row + int64_t{i2} * g.cin, cg * sizeof(T));
          }
        }
      }
    }
  }
}

// One input and one output channel per group (depthwise convolutions,
// single-channel signals): a gemm per group would multiply by a
// [taps x 1] matrix, so each output row is accumulated directly, tap by
// tap, vectorized over the channels (contiguous in input and output).
template <typename T>
void depthwise(const Geometry& g, const T* x, const T* w, T* y) {
  const int64_t taps = g.taps();
  const int64_t C = g.cin;
  const int64_t lines = g.n * g.O[0] * g.O[1];
  const int O2 = g.O[2], K2 = g.K[2], L2 = g.L[2];
  const int64_t s2 = g.s[2];
  std::vector<T> wt(static_cast<size_t>(taps * C));  // [tap][channel]
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t t = 0; t < taps; ++t) {
      wt[t * C + c] = w[c * taps + t];
    }
  }
  int64_t grain =
      std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(taps * C * O2, 1));
  cpu::parallel_for(lines, grain, [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      int64_t n = l / (int64_t{g.O[0]} * g.O[1]);
      int o1 = static_cast<int>(l % g.O[1]);
      int o0 = static_cast<int>(l / g.O[1] % g.O[0]);
      T* out = y + l * O2 * C;
      std::fill(out, out + O2 * C, T(0));
      const int* t0 = g.tap[0].data() + static_cast<size_t>(o0) * g.K[0];
      const int* t1 = g.tap[1].data() + static_cast<size_t>(o1) * g.K[1];
      const T* xn = x + n * g.L[0] * g.L[1] * int64_t{L2} * C;
      for (int k0 = 0; k0 < g.K[0]; ++k0) {
        for (int k1 = 0; k1 < g.K[1]; ++k1) {
          if (t0[k0] < 0 || t1[k1] < 0) {
            continue;
          }
          const T* row = xn + (int64_t{t0[k0]} * g.L[1] + t1[k1]) * L2 * C;
          for (int k2 = 0; k2 < K2; ++k2) {
            const T* wk =
                wt.data() + ((int64_t{k0} * g.K[1] + k1) * K2 + k2) * C;
            if (g.id[2] != 1) {
              const int* t2 = g.tap[2].data() + k2;
              for (int o2 = 0; o2 < O2; ++o2) {
                int i2 = t2[static_cast<size_t>(o2) * K2];
                if (i2 >= 0) {
                  const T* in = row + int64_t{i2} * C;
                  T* o = out + int64_t{o2} * C;
                  for (int64_t c = 0; c < C; ++c) {
                    o[c] += in[c] * wk[c];
                  }
                }
              }
              continue;
            }
            // Input index o2 * s2 + base: valid for o2 in [first, last).
            int kk = g.flip ? K2 - 1 - k2 : k2;
            int64_t base = int64_t{kk} * g.kd[2] - g.lo[2];
            int64_t first = base >= 0 ? 0 : (-base + s2 - 1) / s2;
            int64_t last =
                L2 - 1 - base < 0
                    ? 0
                    : std::min<int64_t>(O2, (L2 - 1 - base) / s2 + 1);
            if (first >= last) {
              continue;
            }
            if (C == 1) {
              T wv = wk[0];
              const T* in = row + base;
              if (s2 == 1) {
                for (int64_t o2 = first; o2 < last; ++o2) {
                  out[o2] += in[o2] * wv;
                }
              } else {
                for (int64_t o2 = first; o2 < last; ++o2) {
                  out[o2] += in[o2 * s2] * wv;
                }
              }
              continue;
            }
            for (int64_t o2 = first; o2 < last; ++o2) {
              const T* in = row + (o2 * s2 + base) * C;
              T* o = out + o2 * C;
              for (int64_t c = 0; c < C; ++c) {
                o[c] += in[c] * wk[c];
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
void conv_blocks(const Geometry& g, const T* x, const T* w, T* y,
                 bool pointwise) {
  const int64_t rows = g.n * g.positions();
  const int64_t cols = g.cols();
  if (rows == 0 || g.cout == 0) {
    return;
  }
  if (g.cin_g == 1 && g.cout_g == 1) {
    depthwise(g, x, w, y);
    return;
  }
  if (pointwise && rows <= INT_MAX) {
    // The input is its own im2col matrix [rows, C_in].
    gemm_nt(static_cast<int>(rows), static_cast<int>(g.cout),
            static_cast<int>(g.cin), x, static_cast<int>(g.cin), w,
            static_cast<int>(g.cin), y, static_cast<int>(g.cout));
    return;
  }
  // Thin products (few output channels per group, or a small receptive
  // field): blocks small enough for a single-threaded gemm, (block, group)
  // units spread over the pool. Otherwise large blocks, one after another.
  const int64_t per_row = std::max<int64_t>(g.cout_g * cols, 1);
  const bool thin = kSmallGemm / per_row >= 64;
  int64_t block = thin ? std::min(rows, kSmallGemm / per_row)
                       : std::clamp<int64_t>(kBlockElems / cols,
                                             std::min<int64_t>(rows, 64), rows);
  int64_t nblocks = (rows + block - 1) / block;
  auto run_unit = [&](int64_t b, int grp, T* col, bool parallel_im2col) {
    int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
    if (parallel_im2col) {
      int64_t grain = std::max<int64_t>(1, (1 << 14) / cols);
      cpu::parallel_for(r1 - r0, grain, [&](int64_t lo, int64_t hi) {
        im2col(g, x, grp, r0 + lo, r0 + hi, col + lo * cols);
      });
    } else {
      im2col(g, x, grp, r0, r1, col);
    }
    gemm_nt(static_cast<int>(r1 - r0), static_cast<int>(g.cout_g),
            static_cast<int>(cols), col, static_cast<int>(cols),
            w + grp * g.cout_g * cols, static_cast<int>(cols),
            y + r0 * g.cout + grp * g.cout_g, static_cast<int>(g.cout));
  };
  if (thin) {
    int64_t units = nblocks * g.groups;
    int64_t grain = std::max<int64_t>(1, (1 << 16) / (block * per_row));
    cpu::parallel_for(units, grain, [&](int64_t lo, int64_t hi) {
      array col = col_buffer<T>(block * cols);
      for (int64_t u = lo; u < hi; ++u) {
        run_unit(u / g.groups, static_cast<int>(u % g.groups), col.data<T>(),
                 false);
      }
    });
  } else {
    array col = col_buffer<T>(block * cols);
    for (int64_t b = 0; b < nblocks; ++b) {
      for (int grp = 0; grp < g.groups; ++grp) {
        run_unit(b, grp, col.data<T>(), true);
      }
    }
  }
}

}  // namespace

void Convolution::eval_cpu(const std::vector<array>& inputs,
                           std::vector<array>& outputs) {
  auto& out = outputs[0];
  const Dtype t = out.dtype() == float64 ? float64 : float32;
  array x = compute_copy(inputs[0], t);
  array w = compute_copy(inputs[1], t);
  const bool direct = out.dtype() == t;
  array y = direct ? out : scratch(out.shape(), t);
  if (direct) {
    y.set_data(y.nbytes());
  }
  const int64_t groups = groups_;
  const bool depthwise_path = x.shape(-1) == groups && w.shape(0) == groups;
  auto g = geometry(x, w, y, *this, !depthwise_path);
  bool pointwise = g.taps() == 1 && g.groups == 1 && !depthwise_path;
  for (int a = 0; a < 3 && pointwise; ++a) {
    pointwise = g.L[a] == g.O[a];
    for (int o = 0; o < g.O[a] && pointwise; ++o) {
      pointwise = g.tap[a][o] == o;
    }
  }
  dispatch<TypeList<float, double>>(t, "conv", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* py = y.data<T>();
    if (g.cols() == 0) {
      std::fill(py, py + y.size(), T(0));  // no input channels: empty sums
      return;
    }
    conv_blocks<T>(g, x.data<T>(), w.data<T>(), py, pointwise);
  });
  if (!direct) {
    out.set_data(out.nbytes());
    cpu::copy_region(y, y.strides(), 0, out, out.strides(), 0, out.shape());
  }
}

// The Convolution the node stands for (conv_plan::weight_grad_composite),
// computed as the rule's composite was: the same copies, the same kernel,
// the same numbers.
void ConvolutionWeightGrad::eval_cpu(const std::vector<array>& inputs,
                                     std::vector<array>& outputs) {
  auto& out = outputs[0];
  const array& x = inputs[0];
  const array& ct = inputs[1];
  out.set_data(out.nbytes());
  if (out.size() == 0) {
    return;
  }
  if (x.size() == 0 || ct.size() == 0) {
    std::memset(out.data<char>(), 0, out.nbytes());  // empty sums
    return;
  }
  const auto c = conv_plan::weight_grad_composite(
      x.shape(), x.strides(), ct.shape(), ct.strides(), kernel_size_, stride_,
      padding_lo_, kernel_dilation_, input_dilation_, groups_, flip_);
  array xin = scratch(c.xin, x.dtype());
  cpu::copy_region(x, c.input.src, c.input.src_offset, xin, c.input.dst, 0,
                   c.input.shape);
  array kern = scratch(c.kern, ct.dtype());
  cpu::copy_region(ct, c.cotangent.src, c.cotangent.src_offset, kern,
                   c.cotangent.dst, 0, c.cotangent.shape);
  Convolution conv(stream(), c.stride, c.padding_lo, c.padding_hi,
                   c.kernel_dilation, c.input_dilation, c.groups, false);
  std::vector<array> r{array(c.r, out.dtype(), nullptr, {})};
  conv.eval_cpu({xin, kern}, r);
  cpu::copy_region(r[0], c.result.src, c.result.src_offset, out, c.result.dst,
                   0, c.result.shape);
}

}  // namespace fluxion

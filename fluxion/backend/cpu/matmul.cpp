// CPU kernels of Matmul and AddMM: one OpenBLAS gemm per batch matrix.
// Operands are read in place whenever their matrices are row- or
// column-major (a transposed view is passed with the trans flag); broadcast
// batch dims (stride 0) are never materialized. float16/bfloat16 compute in
// float32 (sgemm) and round once at the end.
#include <cblas.h>

#include <algorithm>
#include <climits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/linalg.h"

namespace fluxion {

namespace {

// Below this many multiply-adds per matrix OpenBLAS runs single-threaded, so
// a batch of such products is split over our pool instead.
constexpr int64_t kSmallGemm = 64 * 64 * 64;

// One operand as BLAS reads it.
struct Operand {
  array storage;    // the input itself, or a compact copy of it
  Strides strides;  // of the logical (batch..., rows, cols) shape in storage
  bool trans;
  int ld;
};

// Whether a rows x cols matrix with strides (rs, cs) is a BLAS matrix:
// row-major (no trans) or column-major (trans), with a valid leading
// dimension. The stride of a size-1 dim does not matter.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                 bool& trans, int& ld) {
  if ((cols == 1 || cs == 1) &&
      (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    int64_t l = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    if (l <= INT_MAX) {
      trans = false;
      ld = static_cast<int>(l);
      return true;
    }
  }
  if ((rows == 1 || rs == 1) &&
      (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    int64_t l = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    if (l <= INT_MAX) {
      trans = true;
      ld = static_cast<int>(l);
      return true;
    }
  }
  return false;
}

// A kernel-local array with fresh row-major storage.
array scratch(const Shape& shape, Dtype dtype) {
  array a(shape, dtype, nullptr, {});
  a.set_data(a.nbytes());
  a.set_status(array::Status::available);
  return a;
}

// `x` as a BLAS operand of type `t`: in place when possible, else a copy
// with row-major matrices in which broadcast batch dims stay broadcast.
Operand operand(const array& x, Dtype t) {
  int nd = x.ndim();
  bool trans;
  int ld;
  if (x.dtype() == t &&
      blas_layout(x.shape(nd - 2), x.shape(nd - 1), x.strides()[nd - 2],
                  x.strides()[nd - 1], trans, ld)) {
    return {x, x.strides(), trans, ld};
  }
  Shape sub = x.shape();
  for (int d = 0; d < nd - 2; ++d) {
    if (x.strides()[d] == 0) {
      sub[d] = 1;
    }
  }
  array copy = scratch(sub, t);
  cpu::copy_region(x, x.strides(), 0, copy, copy.strides(), 0, sub);
  Strides strides = copy.strides();
  for (int d = 0; d < nd - 2; ++d) {
    if (sub[d] != x.shape(d)) {
      strides[d] = 0;
    }
  }
  return {copy, std::move(strides), false, std::max(x.shape(nd - 1), 1)};
}

void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, n);
}
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const double* a,
          int lda, const double* b, int ldb, float beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, n);
}
void gemm(bool ta, bool tb, int m, int n, int k, float alpha,
          const complex64_t* a, int lda, const complex64_t* b, int ldb,
          float beta, complex64_t* c) {
  complex64_t al(alpha, 0.0f), be(beta, 0.0f);
  cblas_cgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, &al, a, lda, b, ldb, &be,
              c, n);
}

// A K = 1 product is an outer product: written in one pass, where BLAS
// would first clear `c` and pack both operands (per-example gradients of a
// dense layer are exactly this, and bandwidth-bound).
template <typename T>
void outer(const Operand& a, const Operand& b, const T* pa, const T* pb, int m,
           int n, float alpha, T* c) {
  // a is m x 1: element i at i * lda (row-major) or i (column-major).
  int64_t sa = a.trans ? 1 : a.ld;
  int64_t sb = b.trans ? b.ld : 1;
  for (int i = 0; i < m; ++i) {
    T ai = pa[i * sa] * T(alpha);
    T* row = c + int64_t{i} * n;
    if (sb == 1) {
      for (int j = 0; j < n; ++j) {
        row[j] = ai * pb[j];
      }
    } else {
      for (int j = 0; j < n; ++j) {
        row[j] = ai * pb[j * sb];
      }
    }
  }
}

// c[i] = alpha * a[i] @ b[i] + beta * c[i] over the batch of `c`, which is
// row-major with shape `shape` (batch..., m, n).
template <typename T>
void batched_gemm(const Operand& a, const Operand& b, T* c, const Shape& shape,
                  int k, float alpha, float beta) {
  int nb = static_cast<int>(shape.size()) - 2;
  int m = shape[nb], n = shape[nb + 1];
  int64_t nbatch = 1;
  for (int d = 0; d < nb; ++d) {
    nbatch *= shape[d];
  }
  const T* pa = a.storage.data<T>();
  const T* pb = b.storage.data<T>();
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t oa = 0, ob = 0, r = i;
      for (int d = nb - 1; d >= 0; --d) {
        int64_t j = r % shape[d];
        r /= shape[d];
        oa += j * a.strides[d];
        ob += j * b.strides[d];
      }
      if (k == 1 && beta == 0.0f) {
        outer(a, b, pa + oa, pb + ob, m, n, alpha, c + i * m * n);
      } else {
        gemm(a.trans, b.trans, m, n, k, alpha, pa + oa, a.ld, pb + ob, b.ld,
             beta, c + i * m * n);
      }
    }
  };
  // A batch of row-major a's against one shared b (batch strides 0) is a
  // single gemm with the batch folded into the rows: one packing of b
  // instead of one per matrix (vmap of x @ W produces exactly this).
  if (nbatch > 1 && !a.trans && !(k == 1 && beta == 0.0f)) {
    bool fold = nbatch * m <= INT_MAX;
    int64_t expect = int64_t{m} * a.ld;
    for (int d = nb - 1; d >= 0 && fold; --d) {
      fold = b.strides[d] == 0 && (shape[d] == 1 || a.strides[d] == expect);
      expect *= shape[d];
    }
    if (fold) {
      gemm(false, b.trans, static_cast<int>(nbatch * m), n, k, alpha, pa,
           a.ld, pb, b.ld, beta, c);
      return;
    }
  }
  int64_t work = std::max<int64_t>(int64_t{m} * n * k, 1);
  if (nbatch > 1 && work < kSmallGemm) {
    cpu::parallel_for(nbatch, std::max<int64_t>(1, kSmallGemm / work), run);
  } else {
    run(0, nbatch);
  }
}

// out = alpha * a @ b (+ beta * c when `c` is given). `c` has the output's
// shape and dtype (any layout).
void product(const array& a, const array& b, const array* c, array& out,
             float alpha, float beta) {
  if (beta == 0.0f) {
    c = nullptr;  // BLAS semantics: c is not read (its nans do not leak)
  }
  const bool half = out.dtype() == float16 || out.dtype() == bfloat16;
  const Dtype t = half ? float32 : out.dtype();
  int k = a.shape(-1);

  // The accumulator: the output itself, or a float32 buffer for halves.
  array acc = half ? scratch(out.shape(), t) : out;
  bool copy_c = c != nullptr;
  if (!half) {
    if (c != nullptr && c->is_donatable()) {
      acc.move_shared_buffer(*c);
      copy_c = false;
    } else {
      acc.set_data(acc.nbytes());
    }
  }
  if (copy_c) {
    cpu::copy_region(*c, c->strides(), 0, acc, acc.strides(), 0, acc.shape());
  }

  if (acc.size() > 0) {
    dispatch<TypeList<float, double, complex64_t>>(t, "matmul", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* pc = acc.data<T>();
      if (k == 0) {
        // An empty sum: beta * c, or zeros.
        if (c == nullptr) {
          std::fill(pc, pc + acc.size(), T(0));
        } else if (beta != 1.0f) {
          for (size_t i = 0; i < acc.size(); ++i) {
            pc[i] *= beta;
          }
        }
        return;
      }
      batched_gemm<T>(operand(a, t), operand(b, t), pc, acc.shape(), k, alpha,
                      c != nullptr ? beta : 0.0f);
    });
  }

  if (half) {
    out.set_data(out.nbytes());
    cpu::copy_region(acc, acc.strides(), 0, out, out.strides(), 0, out.shape());
  }
}

}  // namespace

void Matmul::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  product(in[0], in[1], nullptr, out[0], 1.0f, 0.0f);
}

void AddMM::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  product(in[0], in[1], &in[2], out[0], alpha_, beta_);
}

}  // namespace fluxion

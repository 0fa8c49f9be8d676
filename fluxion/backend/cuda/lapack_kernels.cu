// The small kernels of the GPU's linear algebra (lapack_kernels.h).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "fluxion/backend/common/lapack_plan.h"
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/lapack_kernels.h"
#include "fluxion/backend/cuda/solver.h"

namespace fluxion::cu {

namespace lapack {

namespace {

constexpr int kTile = 32;  // transposes: 32 x 32 tiles, 32 x 8 threads
constexpr int kTileRows = 8;
// The most blocks along the grid's z (the batch; kernels loop past it).
constexpr int64_t kMaxGridZ = 65535;

template <typename T>
__device__ __forceinline__ bool finite(T v) {
  if constexpr (math::is_same_v<T, complex64_d>) {
    return isfinite(v.real()) && isfinite(v.imag());
  } else {
    return isfinite(v);
  }
}

template <typename T>
__device__ __forceinline__ T nan_value() {
  if constexpr (math::is_same_v<T, complex64_d>) {
    const float q = __int_as_float(0x7fc00000);
    return complex64_d(q, q);
  } else if constexpr (math::is_same_v<T, float>) {
    return __int_as_float(0x7fc00000);
  } else {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
}

// S -> D (float <-> double, or complex to itself, conjugated if asked).
template <typename D, typename S>
__device__ __forceinline__ D cast_elem(S v, bool conj) {
  if constexpr (math::is_same_v<S, complex64_d>) {
    return conj ? complex64_d(v.real(), -v.imag()) : v;
  } else {
    return static_cast<D>(v);
  }
}

template <typename S, typename D>
__global__ void copy_kernel(const S* src, D* dst, int64_t total, int64_t size,
                            bool conj, int* bad) {
  FLUXION_GRID_LOOP(i, total) {
    const S v = src[i];
    if (bad != nullptr && !finite(v)) {
      bad[i / size] = 1;
    }
    dst[i] = cast_elem<D>(v, conj);
  }
}

// dst[b] (cols, rows) = src[b] (rows, cols) transposed, through a shared
// tile so that reads and writes are both coalesced.
template <typename S, typename D>
__global__ void transpose_kernel(const S* src, D* dst, int64_t batch,
                                 int64_t rows, int64_t cols, bool conj,
                                 int* bad) {
  FLUXION_SHARED_ARRAY(D, tile, kTile * (kTile + 1));
  const int64_t c0 = int64_t(blockIdx.x) * kTile;
  const int64_t r0 = int64_t(blockIdx.y) * kTile;
  const int64_t size = rows * cols;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const S* s = src + b * size;
    D* d = dst + b * size;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) {
        const S v = s[r * cols + c];
        if (bad != nullptr && !finite(v)) {
          bad[b] = 1;
        }
        tile[i * (kTile + 1) + threadIdx.x] = cast_elem<D>(v, conj);
      }
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) {
        d[c * rows + r] = tile[threadIdx.x * (kTile + 1) + i];
      }
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void flag_kernel(const T* src, int64_t total, int64_t size,
                            int* bad) {
  FLUXION_GRID_LOOP(i, total) {
    if (!finite(src[i])) {
      bad[i / size] = 1;
    }
  }
}

template <typename T>
__global__ void identity_kernel(T* dst, int64_t total, int64_t rows,
                                int64_t cols, const int* bad) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t size = rows * cols;
    if (bad == nullptr || bad[i / size] != 0) {
      const int64_t e = i % size;
      dst[i] = T(e / cols == e % cols ? 1 : 0);
    }
  }
}

template <typename T>
__global__ void nan_kernel(T* dst, int64_t total, int64_t size,
                           const int* bad) {
  FLUXION_GRID_LOOP(i, total) {
    if (bad[i / size] != 0) {
      dst[i] = nan_value<T>();
    }
  }
}

template <typename T>
__global__ void zero_upper_kernel(T* dst, int64_t total, int64_t n) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t e = i % (n * n);
    if (e % n > e / n) {
      dst[i] = T(0);
    }
  }
}

template <typename T>
__global__ void extract_r_kernel(const T* w, T* r, int64_t total, int64_t m,
                                 int64_t n, int64_t k) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t b = i / (k * n), e = i % (k * n);
    const int64_t row = e / n, col = e % n;
    r[i] = col >= row ? w[b * m * n + row + col * m] : T(0);
  }
}

// Column c of each Q (lapack_plan.h, form_q_column).
template <typename T>
__global__ void form_q_kernel(const T* w, const T* tau, T* q, int64_t total,
                              int64_t m, int64_t n, int64_t k) {
  FLUXION_GRID_LOOP(idx, total) {
    const int64_t b = idx / k, c = idx % k;
    lapack_plan::form_q_column(w + b * m * n, tau + b * k, m, c, q + b * m * k,
                               k);
  }
}

template <typename I>
__global__ void lu_pivots_kernel(const I* ipiv, int64_t total, int64_t m,
                                 int64_t k, uint32_t* piv, uint32_t* perm,
                                 const int* bad) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t b = i / m, r = i % m;
    const bool identity = bad != nullptr && bad[b] != 0;
    const I* p = ipiv + b * k;
    perm[i] = static_cast<uint32_t>(
        identity ? r : lapack_plan::lu_row_position(p, k, r));
    if (r < k) {
      piv[b * k + r] = static_cast<uint32_t>(identity ? r : p[r] - 1);
    }
  }
}

__global__ void iota_mod_kernel(uint32_t* perm, int64_t total, int64_t m) {
  FLUXION_GRID_LOOP(i, total) { perm[i] = static_cast<uint32_t>(i % m); }
}

template <typename T>
__global__ void eig_roles_kernel(const T* w, int64_t batch, int64_t n,
                                 int* roles) {
  FLUXION_GRID_LOOP(b, batch) {
    lapack_plan::eig_pair_roles(w + b * 2 * n + n, n, roles + b * n);
  }
}

template <typename T>
__global__ void eig_values_kernel(const T* w, int64_t total, int64_t n,
                                  complex64_d* out) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t b = i / n, j = i % n;
    out[i] = complex64_d(static_cast<float>(w[b * 2 * n + j]),
                         static_cast<float>(w[b * 2 * n + n + j]));
  }
}

template <typename T>
__global__ void eig_vectors_kernel(const T* vr, const int* roles,
                                   int64_t total, int64_t n,
                                   complex64_d* out) {
  FLUXION_GRID_LOOP(i, total) {
    const int64_t b = i / (n * n), e = i % (n * n);
    const int64_t r = e / n, j = e % n;
    T re, im;
    lapack_plan::eig_vector_element(vr + b * n * n, n, r, j,
                                    roles[b * n + j], re, im);
    out[i] = complex64_d(static_cast<float>(re), static_cast<float>(im));
  }
}

template <typename T>
__global__ void diagonal_zero_kernel(const T* a, int64_t batch, int64_t n,
                                     int* info) {
  FLUXION_GRID_LOOP(b, batch) {
    int first = 0;
    for (int64_t i = 0; i < n && first == 0; ++i) {
      if (a[b * n * n + i * n + i] == T(0)) {
        first = static_cast<int>(i + 1);
      }
    }
    info[b] = first;
  }
}

// The status-slot protocol of report_fault (kernels.cuh): claim, fill,
// publish.
__device__ __forceinline__ void report_status(IndexFault* f, int info) {
  if (atomicCAS(&f->flag, 0, 1) == 0) {
    f->value = info;
    __threadfence_system();
    atomicExch(&f->flag, 2);
  }
}

__global__ void check_info_kernel(const int* info, const int* bad,
                                  int64_t batch, IndexFault* slot) {
  FLUXION_GRID_LOOP(b, batch) {
    const int v = info[b];
    if (v != 0 && (bad == nullptr || bad[b] == 0)) {
      report_status(slot, v);
    }
  }
}

__global__ void pointer_kernel(char* base, int64_t stride, int64_t batch,
                               void** out) {
  FLUXION_GRID_LOOP(i, batch) { out[i] = base + i * stride; }
}

// Calls f(TypeTag<device type>{}) for float32, float64 and complex64.
template <typename F>
void dispatch_t(Dtype t, F&& f) {
  dispatch_gpu<TypeList<float, double, complex64_t>>(t, "linalg",
                                                     std::forward<F>(f));
}
template <typename F>
void dispatch_real(Dtype t, F&& f) {
  dispatch_gpu<TypeList<float, double>>(t, "linalg", std::forward<F>(f));
}

cudaStream_t stream() { return current_stream(); }

}  // namespace

void copy_matrices(const void* src, Dtype st, void* dst, Dtype dt,
                   int64_t batch, int64_t rows, int64_t cols, bool transpose,
                   bool conj, int* bad) {
  const int64_t size = rows * cols;
  if (batch * size == 0) {
    return;
  }
  if ((st == complex64) != (dt == complex64)) {
    throw std::invalid_argument(std::string("[linalg] Cannot convert ") +
                                dtype_name(st) + " matrices to " +
                                dtype_name(dt) + ".");
  }
  dispatch_t(st, [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch_t(dt, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      if constexpr (math::is_same_v<S, complex64_d> ==
                    math::is_same_v<D, complex64_d>) {
        const S* s = static_cast<const S*>(src);
        D* d = static_cast<D*>(dst);
        if (!transpose || rows == 1 || cols == 1) {
          copy_kernel<<<blocks_for(batch * size, 4), kThreads, 0, stream()>>>(
              s, d, batch * size, size, conj, bad);
        } else {
          dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                    static_cast<unsigned>((rows + kTile - 1) / kTile),
                    static_cast<unsigned>(std::min(batch, kMaxGridZ)));
          transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream()>>>(
              s, d, batch, rows, cols, conj, bad);
        }
        check_launch("linalg");
      }
    });
  });
}

void flag_nonfinite(const void* src, Dtype t, int64_t batch, int64_t size,
                    int* bad) {
  if (batch * size == 0) {
    return;
  }
  dispatch_t(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    flag_kernel<<<blocks_for(batch * size, 4), kThreads, 0, stream()>>>(
        static_cast<const T*>(src), batch * size, size, bad);
    check_launch("linalg");
  });
}

void identity_where(void* dst, Dtype t, int64_t batch, int64_t rows,
                    int64_t cols, const int* bad) {
  if (batch * rows * cols == 0) {
    return;
  }
  dispatch_t(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    identity_kernel<<<blocks_for(batch * rows * cols, 4), kThreads, 0,
                      stream()>>>(static_cast<T*>(dst), batch * rows * cols,
                                  rows, cols, bad);
    check_launch("linalg");
  });
}

void identity(void* dst, Dtype t, int64_t batch, int64_t rows, int64_t cols) {
  identity_where(dst, t, batch, rows, cols, nullptr);
}

void nan_where(void* dst, Dtype t, int64_t batch, int64_t size,
               const int* bad) {
  if (batch * size == 0) {
    return;
  }
  dispatch_t(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    nan_kernel<<<blocks_for(batch * size, 4), kThreads, 0, stream()>>>(
        static_cast<T*>(dst), batch * size, size, bad);
    check_launch("linalg");
  });
}

void zero_upper(void* dst, Dtype t, int64_t batch, int64_t n) {
  if (batch * n * n == 0) {
    return;
  }
  dispatch_t(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    zero_upper_kernel<<<blocks_for(batch * n * n, 4), kThreads, 0,
                        stream()>>>(static_cast<T*>(dst), batch * n * n, n);
    check_launch("linalg");
  });
}

void extract_r(const void* w, void* r, Dtype t, int64_t batch, int64_t m,
               int64_t n, int64_t k) {
  if (batch * k * n == 0) {
    return;
  }
  dispatch_t(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    extract_r_kernel<<<blocks_for(batch * k * n, 4), kThreads, 0,
                       stream()>>>(static_cast<const T*>(w),
                                   static_cast<T*>(r), batch * k * n, m, n,
                                   k);
    check_launch("linalg");
  });
}

void form_q(const void* w, const void* tau, void* q, Dtype t, int64_t batch,
            int64_t m, int64_t n, int64_t k) {
  if (batch * k == 0) {
    return;
  }
  dispatch_real(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    form_q_kernel<<<blocks_for(batch * k), kThreads, 0, stream()>>>(
        static_cast<const T*>(w), static_cast<const T*>(tau),
        static_cast<T*>(q), batch * k, m, n, k);
    check_launch("linalg");
  });
}

void lu_pivots(const int* ipiv32, const int64_t* ipiv64, int64_t batch,
               int64_t m, int64_t k, uint32_t* piv, uint32_t* perm,
               const int* bad) {
  if (batch * m == 0) {
    return;
  }
  if (ipiv64 != nullptr) {
    lu_pivots_kernel<<<blocks_for(batch * m), kThreads, 0, stream()>>>(
        ipiv64, batch * m, m, k, piv, perm, bad);
  } else {
    lu_pivots_kernel<<<blocks_for(batch * m), kThreads, 0, stream()>>>(
        ipiv32, batch * m, m, k, piv, perm, bad);
  }
  check_launch("linalg");
}

void iota_mod(uint32_t* perm, int64_t size, int64_t m) {
  if (size == 0) {
    return;
  }
  iota_mod_kernel<<<blocks_for(size), kThreads, 0, stream()>>>(
      perm, size, std::max<int64_t>(m, 1));
  check_launch("linalg");
}

void eig_real_outputs(const void* w, const void* vr, Dtype t, int64_t batch,
                      int64_t n, void* w_out, void* v_out) {
  if (batch * n == 0) {
    return;
  }
  dispatch_real(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* wp = static_cast<const T*>(w);
    eig_values_kernel<<<blocks_for(batch * n), kThreads, 0, stream()>>>(
        wp, batch * n, n, static_cast<complex64_d*>(w_out));
    check_launch("linalg");
    if (v_out == nullptr) {
      return;
    }
    int* roles = solver::device_array<int>(batch * n);
    eig_roles_kernel<<<blocks_for(batch), kThreads, 0, stream()>>>(
        wp, batch, n, roles);
    check_launch("linalg");
    eig_vectors_kernel<<<blocks_for(batch * n * n, 4), kThreads, 0,
                         stream()>>>(static_cast<const T*>(vr), roles,
                                     batch * n * n, n,
                                     static_cast<complex64_d*>(v_out));
    check_launch("linalg");
  });
}

void diagonal_zero_info(const void* a, Dtype t, int64_t batch, int64_t n,
                        int* info) {
  if (batch == 0) {
    return;
  }
  dispatch_real(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    diagonal_zero_kernel<<<blocks_for(batch), kThreads, 0, stream()>>>(
        static_cast<const T*>(a), batch, n, info);
    check_launch("linalg");
  });
}

void check_info(const int* info, const int* bad, int64_t batch,
                const char* op, const char* failure) {
  if (batch == 0) {
    return;
  }
  IndexFault* slot = status_fault(op, failure);
  check_info_kernel<<<blocks_for(batch), kThreads, 0, stream()>>>(
      info, bad, batch, slot);
  check_launch(op);
}

}  // namespace lapack

namespace solver {

void** pointer_array(void* base, int64_t stride_bytes, int64_t batch) {
  void** out = device_array<void*>(batch);
  if (batch > 0) {
    lapack::pointer_kernel<<<blocks_for(batch), kThreads, 0,
                             current_stream()>>>(static_cast<char*>(base),
                                                 stride_bytes, batch, out);
    check_launch("linalg");
  }
  return out;
}

}  // namespace solver

}  // namespace fluxion::cu

// The fused-layer GPU kernels (backend/cuda/norm.cu, rope.cu, hadamard.cu)
// run on the host through shim.h (tools/cuda_emu/run.sh), against the CPU
// kernels' algorithms written out here (backend/cpu/fast_norm.cpp,
// backend/cpu/hadamard.cpp): the norms within a few ulps (the sums run in
// another order), RoPE within a few ulps, Hadamard bit for bit; rows with
// NaN and inf included; each kernel path (warp groups, warps, the two block
// kernels, long rows; Packs and element by element; Hadamard in one block
// and in passes). The host-side launch choices are repeated from the
// kernels' eval_gpu. Prints failures and "N cases, F failed".
#include <algorithm>
#include <cstdio>
#include <random>

#include "had_k.h"
#include "had_matrix.h"
#include "norm_k.h"
#include "rope_k.h"
namespace fluxion::cu {
void check_launch(const char*) {}
cudaStream_t current_stream() { return nullptr; }
}  // namespace fluxion::cu
using namespace fluxion;
template <typename T>
double tod(T v) {
  return static_cast<double>(cu::convert<float>(v));
}
template <>
double tod<double>(double v) {
  return v;
}
template <typename T>
T fromd(double v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return cu::convert<T>(static_cast<float>(v));
}
template <typename T>
double res() {
  if constexpr (std::is_same_v<T, __half>)
    return 9.77e-4;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 7.82e-3;
  else if constexpr (std::is_same_v<T, double>)
    return 2.2e-16;
  else
    return 1.19e-7;
}
int failures = 0;
template <typename T>
void check(const char* what, const std::vector<T>& got,
           const std::vector<double>& want, double ulps, size_t off = 0) {
  double tol = ulps * res<T>();
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = tod(got[off + i]), w = want[i];
    bool ok = (std::isnan(g) && std::isnan(w)) || (std::isinf(w) && g == w) ||
              std::abs(g - w) <= tol + tol * std::abs(w);
    if (!ok && bad++ < 3)
      printf("  FAIL %s [%zu]: got %.9g want %.9g\n", what, i, g, w);
  }
  if (bad) {
    ++failures;
    printf("FAILED %s (%d bad of %zu)\n", what, bad, want.size());
  }
}

// ---- norms: the CPU's algorithm (fast_norm.cpp) in double-checked M
template <typename T>
void norm_case(int rows, int d, bool hw, bool hb, bool layer, bool misalign,
               unsigned seed) {
  using M = cu::compute_t<T>;
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0.3, 1.0);
  size_t off = misalign ? 1 : 0;
  std::vector<T> x(rows * (size_t)d + off), y(rows * (size_t)d + off),
      w(d + off), b(d + off);
  for (auto& v : x) v = fromd<T>(nd(gen));
  for (auto& v : w) v = fromd<T>(nd(gen));
  for (auto& v : b) v = fromd<T>(nd(gen));
  if (rows > 2 && d > 3) {
    x[off + d + 2] = fromd<T>(NAN);
    x[off + 2 * d + 1] = fromd<T>(INFINITY);
  }
  std::vector<double> want(rows * (size_t)d);
  const M e = static_cast<M>(1e-5f);
  for (int r = 0; r < rows; ++r) {
    std::vector<M> row(d);
    for (int i = 0; i < d; ++i)
      row[i] = static_cast<M>(tod(x[off + r * (size_t)d + i]));
    M s = 0;
    for (int i = 0; i < d; ++i) s += row[i];
    M mu = layer ? s / d : M(0);
    M sq = 0;
    for (int i = 0; i < d; ++i) {
      M c = row[i] - mu;
      sq += c * c;
    }
    M rstd = M(1) / std::sqrt(sq / d + e);
    for (int i = 0; i < d; ++i) {
      M t = (row[i] - mu) * rstd;
      if (hw) t *= static_cast<M>(tod(w[off + i]));
      if (hb) t += static_cast<M>(tod(b[off + i]));
      want[r * (size_t)d + i] = tod(fromd<T>(t));
    }
  }
  fast::NormArgs<T, M> a{};
  a.x = x.data() + off;
  a.y = y.data() + off;
  a.w = hw ? w.data() + off : nullptr;
  a.b = hb ? b.data() + off : nullptr;
  a.rows = rows;
  a.d = d;
  a.eps = e;
  a.layer = layer;
  constexpr int V = cu::pack_width<T>();
  a.w_packed = hw && cu::pack_aligned<T, V>(a.w);
  a.b_packed = hb && cu::pack_aligned<T, V>(a.b);
  const bool packed =
      d % V == 0 && cu::pack_aligned<T, V>(a.x) && cu::pack_aligned<T, V>(a.y);
  if (d > fast::kBlockElems * 1024) {
    emu_launch(fast::grid_of(a.rows), fast::kLongThreads, 0, nullptr,
               [&] { fast::norm_long<T, M>(a); });
  } else if (packed) {
    fast::launch_norm<T, M, V>(a, nullptr);
  } else {
    a.w_packed = a.b_packed = false;
    fast::launch_norm<T, M, 1>(a, nullptr);
  }
  char what[200];
  snprintf(what, sizeof what, "%s norm T%zu rows %d d %d w%d b%d mis%d",
           layer ? "layer" : "rms", sizeof(T), rows, d, hw, hb, misalign);
  double ulps = sizeof(T) == 2 ? 2 : 64;
  // Rows with NaN/inf compare by NaN positions.
  check(what, y, want, ulps, off);
}

// ---- rope: the CPU's algorithm
template <typename T>
void rope_case(int B, int L, int D, int dims, bool trad, bool fwd, bool vec_off,
               bool freqs, float scale, unsigned seed) {
  using M = cu::compute_t<T>;
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0, 1);
  const int H = 3, half = dims / 2;
  const int64_t rows = (int64_t)B * H * L;
  std::vector<T> x(rows * D), y(rows * D);
  for (auto& v : x) v = fromd<T>(nd(gen));
  std::vector<int32_t> offs =
      vec_off ? std::vector<int32_t>{3, 17, 0, 5} : std::vector<int32_t>{7};
  offs.resize(vec_off ? B : 1);
  std::vector<M> fr(half), inv(half);
  for (auto& f : fr) f = static_cast<M>(2.0 + 0.3 * nd(gen));
  if (freqs)
    for (int i = 0; i < half; ++i) inv[i] = M(1) / fr[i];
  else {
    const double coef = -std::log(10000.0) / half;
    for (int i = 0; i < half; ++i) inv[i] = static_cast<M>(std::exp(i * coef));
  }
  std::vector<double> want(rows * D);
  const M sign = fwd ? 1 : -1;
  const int64_t per_group = rows / (vec_off ? B : 1);
  for (int64_t r = 0; r < rows; ++r) {
    const M o = static_cast<M>(offs[vec_off ? r / (rows / B) : 0]);
    (void)per_group;
    const int64_t l = r % L;
    M pos = (static_cast<M>(l) + o) * static_cast<M>(scale);
    for (int i = 0; i < D; ++i) want[r * D + i] = tod(x[r * D + i]);
    for (int i = 0; i < half; ++i) {
      M t = pos * inv[i];
      M c = std::cos(t), s = sign * std::sin(t);
      int i1 = trad ? 2 * i : i, i2 = trad ? 2 * i + 1 : i + half;
      M x1 = static_cast<M>(tod(x[r * D + i1])),
        x2 = static_cast<M>(tod(x[r * D + i2]));
      want[r * D + i1] = tod(fromd<T>(x1 * c - x2 * s));
      want[r * D + i2] = tod(fromd<T>(x1 * s + x2 * c));
    }
  }
  fast::RopeArgs<M> a{};
  a.d = D;
  a.l = L;
  a.dims = dims;
  a.half = half;
  a.work = half + (D - dims);
  a.rows = rows;
  a.offset_vector = offs.size() != 1;
  a.group_rows = rows / B;
  a.offset = offs.data();
  a.traditional = trad;
  a.scale = scale;
  a.sign = sign;
  a.freqs = freqs ? fr.data() : nullptr;
  a.coef = -std::log(10000.0) / half;
  // Both index widths, with and without the shared frequency table.
  for (int variant = 0; variant < 3; ++variant) {
    std::fill(y.begin(), y.end(), fromd<T>(0.0));
    const bool table = variant != 1;
    const size_t smem = table ? half * sizeof(M) : 0;
    emu_launch(
        cu::blocks_for(a.rows * a.work, 4), cu::kThreads, smem, nullptr, [&] {
          if (variant == 2) {
            fast::rope_kernel<T, M, int64_t>(x.data(), y.data(), a, table);
          } else {
            fast::rope_kernel<T, M, uint32_t>(x.data(), y.data(), a, table);
          }
        });
    char what[200];
    snprintf(what, sizeof what,
             "rope T%zu B%d L%d D%d dims%d trad%d fwd%d vec%d freqs%d v%d",
             sizeof(T), B, L, D, dims, trad, fwd, vec_off, freqs, variant);
    check(what, y, want, sizeof(T) == 2 ? 2 : 16);
  }
}

// ---- hadamard: the CPU's algorithm (backend/cpu/hadamard.cpp)
template <typename T, int MF>
void had_case(int rows, int log_p, bool transpose, double scale_d,
              unsigned seed) {
  using M = cu::compute_t<T>;
  const int64_t p = int64_t{1} << log_p, n = MF * p;
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<T> x(rows * n), y(rows * n);
  for (auto& v : x) v = fromd<T>(nd(gen));
  std::vector<int8_t> hm = detail::hadamard_matrix(MF);
  if (transpose)
    for (int i = 0; i < MF; ++i)
      for (int l = i + 1; l < MF; ++l)
        std::swap(hm[i * MF + l], hm[l * MF + i]);
  std::vector<double> want(rows * n);
  for (int r = 0; r < rows; ++r) {
    std::vector<M> v(n), mixed(n);
    for (int64_t j = 0; j < n; ++j) v[j] = static_cast<M>(tod(x[r * n + j]));
    for (int i = 0; i < MF; ++i) {
      M* xb = v.data() + i * p;
      for (int64_t h = 1; h < p; h *= 2)
        for (int64_t k = 0; k < p; k += 2 * h)
          for (int64_t j = 0; j < h; ++j) {
            M u = xb[k + j], w = xb[k + j + h];
            xb[k + j] = u + w;
            xb[k + j + h] = u - w;
          }
    }
    const M* out = v.data();
    if (MF > 1) {
      for (int i = 0; i < MF; ++i) {
        M* dst = mixed.data() + i * p;
        std::fill(dst, dst + p, M(0));
        for (int l = 0; l < MF; ++l) {
          const M* src = v.data() + l * p;
          if (hm[i * MF + l] > 0)
            for (int64_t j = 0; j < p; ++j) dst[j] += src[j];
          else
            for (int64_t j = 0; j < p; ++j) dst[j] -= src[j];
        }
      }
      out = mixed.data();
    }
    for (int64_t j = 0; j < n; ++j)
      want[r * n + j] = tod(fromd<T>(out[j] * static_cast<M>(scale_d)));
  }
  Signs sg{};
  std::vector<int8_t> hm0 = detail::hadamard_matrix(MF);
  for (int i = 0; i < MF; ++i)
    for (int l = 0; l < MF; ++l)
      sg.s[i * MF + l] = transpose ? hm0[l * MF + i] : hm0[i * MF + l];
  std::vector<float> scratch;
  M* s = nullptr;
  if constexpr (std::is_same_v<T, M>)
    s = y.data();
  else {
    scratch.resize(rows * n);
    s = scratch.data();
  }
  hadamard_launch<T, M, MF>(x.data(), y.data(), s, rows, log_p,
                            static_cast<M>(scale_d), sg, nullptr);
  char what[200];
  snprintf(what, sizeof what, "hadamard T%zu m%d p%lld rows%d tr%d", sizeof(T),
           MF, (long long)p, rows, transpose);
  check(what, y, want, 0);  // bit for bit
}

int main(int argc, char** argv) {
  int cases = 0;
  // "norm": the norms only; "rest": RoPE and Hadamard only.
  const bool only_norm = argc > 1 && argv[1][0] == 'n';
  const bool skip_norm = argc > 1 && argv[1][0] == 'r';
  for (int d :
       {1,   3,    7,    16,   24,   32,   64,   100,  128,   256,   520,
        999, 1024, 1025, 2048, 4096, 6000, 8192, 8200, 10000, 16384, 20000}) {
    for (int rows : {1, 5, 19, 300}) {
      if (rows == 300 && d > 128) continue;
      if ((int64_t)d * rows > 200000) continue;
      for (int mis : {0, 1}) {
        if (skip_norm) continue;
        norm_case<float>(rows, d, true, true, true, mis, d + rows);
        norm_case<__nv_bfloat16>(rows, d, true, false, true, mis, d + rows + 1);
        norm_case<__half>(rows, d, false, true, true, mis, d + rows + 4);
        norm_case<double>(rows, d, false, false, true, mis, d + rows + 2);
        norm_case<float>(rows, d, true, false, false, mis, d + rows + 3);
        norm_case<__nv_bfloat16>(rows, d, false, false, false, mis,
                                 d + rows + 5);
        cases += 6;
      }
    }
    fprintf(stderr, "norm d=%d done\n", d);
  }
  if (only_norm) {
    printf("%d cases, %d failed\n", cases, failures);
    return failures != 0;
  }
  for (bool trad : {false, true})
    for (bool fwd : {true, false})
      for (bool vec : {false, true})
        for (bool fq : {false, true}) {
          rope_case<float>(2, 5, 16, 16, trad, fwd, vec, fq, 1.0f, 1);
          rope_case<float>(2, 7, 64, 32, trad, fwd, vec, fq, 0.5f, 2);
          rope_case<__nv_bfloat16>(2, 9, 32, 16, trad, fwd, vec, fq, 1.0f, 3);
          rope_case<__half>(1, 4, 8, 8, trad, fwd, vec, fq, 2.0f, 3);
          rope_case<double>(2, 3, 12, 6, trad, fwd, vec, fq, 1.0f, 4);
          cases += 5;
        }
  fprintf(stderr, "rope done\n");
  for (bool tr : {false, true}) {
    for (int lp : {0, 1, 3, 6, 10, 13}) {
      had_case<float, 1>(3, lp, tr, 0.125, lp);
      had_case<double, 1>(2, lp, tr, 0.3, lp);
      cases += 2;
    }
    for (int lp : {0, 2, 5, 9, 10}) {
      had_case<float, 12>(2, lp, tr, 0.5, lp);
      had_case<__nv_bfloat16, 20>(2, lp, tr, 1.0, lp);
      had_case<__half, 28>(2, lp, tr, 0.25, lp);
      had_case<double, 28>(2, lp, tr, 1.0, lp);
      cases += 4;
    }
    had_case<float, 1>(1, 17, tr, 1.0, 99);
    had_case<__nv_bfloat16, 1>(2, 14, tr, 1.0, 98);
    had_case<float, 20>(1, 12, tr, 1.0, 97);
    cases += 3;
    fprintf(stderr, "hadamard tr=%d done\n", tr);
  }
  printf("%d cases, %d failed\n", cases, failures);
  return failures != 0;
}

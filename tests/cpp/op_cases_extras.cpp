// Op-table cases of the ops added by the MLX audit: searchsorted,
// hadamard_transform, as_strided, view, contiguous, and the composed
// gather_mm / segmented_mm / block_masked_mm. References: host loops.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fluxion/ops/extras.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Row-major (m, k) @ (k, n) of host vectors.
std::vector<double> mm(const std::vector<double>& a, const std::vector<double>& b,
                       int m, int k, int n) {
  std::vector<double> c(m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < k; ++l)
      for (int j = 0; j < n; ++j) c[i * n + j] += a[i * k + l] * b[l * n + j];
  return c;
}

OpCase entry(const std::string& name, Fn f, std::vector<In> in, Ref ref,
             Deriv deriv, std::vector<Dtype> dtypes = {float64, float32}) {
  OpCase k{name, std::move(f), std::move(in),
           deriv};
  k.dtypes = std::move(dtypes);
  k.ref = std::move(ref);
  k.fwd_tol = 1e-12;
  return k;
}

}  // namespace

namespace {

std::vector<OpCase> extras_cases() {
  std::vector<OpCase> c;
  // The sorted array is a constant (1-D, as MLX and NumPy take it): vmap
  // over it raises, so the cases batch only the values.
  auto search = [](int n, unsigned seed, bool right) {
    auto sorted = sort(normal_values({n}, seed));
    Fn f = unary([sorted, right](const array& v) {
      return searchsorted(sorted, v, right ? "right" : "left");
    });
    Ref ref = [sorted, right](const Arrays& x) {
      auto a = values(sorted), v = values(x[0]);
      std::vector<double> out;
      for (double e : v) {
        out.push_back(right ? std::upper_bound(a.begin(), a.end(), e) - a.begin()
                            : std::lower_bound(a.begin(), a.end(), e) - a.begin());
      }
      return Arrays{host_array(out, x[0].shape())};
    };
    return std::make_pair(f, ref);
  };
  {
    auto [f, ref] = search(6, 303, false);
    c.push_back(entry("searchsorted_1d_left", f, {normal({2, 3})}, ref,
                      Deriv::none));
  }
  {
    auto [f, ref] = search(5, 301, true);
    c.push_back(entry("searchsorted_1d_right", f, {normal({3, 4})}, ref,
                      Deriv::none));
  }
  // The Sylvester Hadamard matrix times each row, times scale.
  auto hadamard_ref = [](double scale) {
    return [scale](const Arrays& x) {
      int n = x[0].shape(-1);
      double sc = scale > 0 ? scale : 1 / std::sqrt(double(n));
      return Arrays{ref_lines(-1, [n, sc](std::vector<double> v) {
        std::vector<double> out(n, 0.0);
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j)
            out[i] += (__builtin_popcount(i & j) % 2 ? -1 : 1) * v[j] * sc;
        return out;
      })(x)[0]};
    };
  };
  c.push_back(entry("hadamard_transform",
                    unary([](const array& x) { return hadamard_transform(x); }),
                    {normal({3, 8})}, hadamard_ref(0), Deriv::second));
  c.push_back(entry(
      "hadamard_transform_scaled",
      unary([](const array& x) { return hadamard_transform(x, 0.5f); }),
      {normal({2, 3, 4})}, hadamard_ref(0.5), Deriv::second));
  c.push_back(entry("as_strided_overlapping_windows",
                    unary([](const array& x) {
                      return as_strided(x, Shape{4, 3}, Strides{2, 1}, 1);
                    }),
                    {normal({12})},
                    [](const Arrays& x) {
                      auto v = values(x[0]);
                      std::vector<double> out;
                      for (int i = 0; i < 4; ++i)
                        for (int j = 0; j < 3; ++j) out.push_back(v[1 + 2 * i + j]);
                      return Arrays{host_array(out, {4, 3})};
                    },
                    Deriv::second, {float64, float32, float16, int32}));
  {
    // Bytes reinterpreted: checked in float64 only (the ratio of sizes
    // sets the shape).
    auto k = entry("view_float64_as_int32",
                   unary([](const array& x) { return view(x, int32); }),
                   {normal({3, 4})},
                   [](const Arrays& x) {
                     auto v = values(x[0]);
                     std::vector<double> out;
                     for (double d : v) {
                       int32_t w[2];
                       std::memcpy(w, &d, 8);
                       out.push_back(w[0]);
                       out.push_back(w[1]);
                     }
                     return Arrays{host_array(out, {3, 8})};
                   },
                   Deriv::none, {float64});
    k.fwd_tol = 0;
    c.push_back(std::move(k));
  }
  c.push_back(entry("contiguous_of_transpose",
                    unary([](const array& x) {
                      return contiguous(transpose(x));
                    }),
                    {normal({3, 4})},
                    [](const Arrays& x) {
                      auto v = values(x[0]);
                      std::vector<double> out;
                      for (int j = 0; j < 4; ++j)
                        for (int i = 0; i < 3; ++i) out.push_back(v[i * 4 + j]);
                      return Arrays{host_array(out, {4, 3})};
                    },
                    Deriv::second, {float64, float32, float16, int32}));
  c.push_back(entry("gather_mm",
                    [](const Arrays& x) {
                      return Arrays{gather_mm(x[0], x[1], x[2], x[3])};
                    },
                    {normal({3, 2, 4}), normal({2, 4, 5}), array({0, 2, 2}),
                     array({1, 0, 1})},
                    [](const Arrays& x) {
                      auto a = values(x[0]), b = values(x[1]);
                      auto li = values(x[2]), ri = values(x[3]);
                      std::vector<double> out;
                      for (int t = 0; t < 3; ++t) {
                        std::vector<double> am(a.begin() + li[t] * 8,
                                               a.begin() + li[t] * 8 + 8);
                        std::vector<double> bm(b.begin() + ri[t] * 20,
                                               b.begin() + ri[t] * 20 + 20);
                        auto p = mm(am, bm, 2, 4, 5);
                        out.insert(out.end(), p.begin(), p.end());
                      }
                      return Arrays{host_array(out, {3, 2, 5})};
                    },
                    Deriv::second));
  c.push_back(entry(
      "segmented_mm",
      [](const Arrays& x) {
        return Arrays{segmented_mm(x[0], x[1], x[2])};
      },
      {normal({2, 6}), normal({6, 3}), array({0, 2, 1, 6, 3, 3}, {3, 2})},
      [](const Arrays& x) {
        auto a = values(x[0]), b = values(x[1]), sg = values(x[2]);
        std::vector<double> out;
        for (int s = 0; s < 3; ++s) {
          std::vector<double> p(6, 0.0);
          for (int i = 0; i < 2; ++i)
            for (int l = int(sg[2 * s]); l < int(sg[2 * s + 1]); ++l)
              for (int j = 0; j < 3; ++j) p[i * 3 + j] += a[i * 6 + l] * b[l * 3 + j];
          out.insert(out.end(), p.begin(), p.end());
        }
        return Arrays{host_array(out, {3, 2, 3})};
      },
      Deriv::second));
  c.push_back(entry(
      "block_masked_mm",
      [](const Arrays& x) {
        return Arrays{block_masked_mm(x[0], x[1], 32, x[2], x[3], std::nullopt)};
      },
      {normal({40, 36}), normal({36, 33}),
       array({true, false, true, true}, {2, 2}), normal({2, 2})},
      [](const Arrays& x) {
        auto a = values(x[0]), b = values(x[1]), mo = values(x[2]),
             ml = values(x[3]);
        for (int i = 0; i < 40; ++i)
          for (int l = 0; l < 36; ++l) a[i * 36 + l] *= ml[(i / 32) * 2 + l / 32];
        auto p = mm(a, b, 40, 36, 33);
        for (int i = 0; i < 40; ++i)
          for (int j = 0; j < 33; ++j) p[i * 33 + j] *= mo[(i / 32) * 2 + j / 32];
        return Arrays{host_array(p, {40, 33})};
      },
      Deriv::second));
  for (auto& k : c) {
    if (k.name.find("mm") != std::string::npos) {
      k.fwd_tol = 1e-10;
      k.fwd_ulps = 64;  // float32 dot products of up to 36 terms
    }
  }
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(extras_cases);

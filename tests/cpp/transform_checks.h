// Checkers for transformation rules, used by every op's rule tests:
//  - check_grads: reverse mode (vjp) and forward mode (jvp) against central
//    finite differences in float64 along random directions, so that
//    <u, J v> agrees three ways;
//  - check_vmap: vmap(f) against a loop of f over slices, stacked.
#pragma once

#include <random>

#include "test_utils.h"

namespace fluxion::test {

inline array random_like(const array& a, std::mt19937& gen) {
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(a.size());
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), a.shape()), a.dtype());
}

inline double dot_all(const array& a, const array& b) {
  auto x = to_vector<double>(a);
  auto y = to_vector<double>(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    s += x[i] * y[i];
  }
  return s;
}

// Forward mode with respect to `argnums` only: the other inputs (integer
// indices, masks) are constants, since asking for derivatives with respect
// to indices raises (as MLX).
inline std::pair<std::vector<array>, std::vector<array>> jvp_on(
    const Fn& f, const std::vector<array>& inputs,
    const std::vector<array>& tangents, const std::vector<int>& argnums) {
  std::vector<array> sub, sub_t;
  for (int a : argnums) {
    sub.push_back(inputs[a]);
    sub_t.push_back(tangents[a]);
  }
  auto g = [&](const std::vector<array>& x) {
    auto all = inputs;
    for (size_t j = 0; j < argnums.size(); ++j) {
      all[argnums[j]] = x[j];
    }
    return f(all);
  };
  return jvp(g, sub, sub_t);
}

// `inputs` should be float64 so finite differences are accurate. Checks all
// outputs of f that are inexact, with respect to the inputs in `argnums`
// (default: every floating input).
inline void check_grads(const Fn& f, const std::vector<array>& inputs,
                        double tol = 1e-6, double eps = 1e-6,
                        std::vector<int> argnums = {}, unsigned seed = 0) {
  std::mt19937 gen(seed);
  if (argnums.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (is_floating_point(inputs[i].dtype())) {
        argnums.push_back(static_cast<int>(i));
      }
    }
  }
  auto outs = f(inputs);
  std::vector<array> us;
  for (auto& o : outs) {
    us.push_back(random_like(o, gen));
  }
  std::vector<array> vs;
  for (auto& in : inputs) {
    vs.push_back(is_floating_point(in.dtype()) ? random_like(in, gen)
                                               : zeros_like(in));
  }
  // Only perturb the inputs in argnums.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (std::find(argnums.begin(), argnums.end(), static_cast<int>(i)) ==
        argnums.end()) {
      vs[i] = zeros_like(inputs[i]);
    }
  }
  auto shifted = [&](double h) {
    std::vector<array> x;
    for (size_t i = 0; i < inputs.size(); ++i) {
      x.push_back(is_floating_point(inputs[i].dtype())
                      ? add(inputs[i], multiply(vs[i], array(h, float64)))
                      : inputs[i]);
    }
    auto o = f(x);
    double s = 0;
    for (size_t k = 0; k < o.size(); ++k) {
      if (is_inexact(o[k].dtype())) {
        s += dot_all(o[k], us[k]);
      }
    }
    return s;
  };
  double fd = (shifted(eps) - shifted(-eps)) / (2 * eps);

  // Reverse mode: sum_i <vjp_i, v_i>.
  std::vector<array> cts;
  for (size_t k = 0; k < outs.size(); ++k) {
    cts.push_back(is_inexact(outs[k].dtype()) ? us[k] : zeros_like(outs[k]));
  }
  auto [o1, grads] = vjp(f, inputs, cts, argnums);
  double rev = 0;
  for (size_t j = 0; j < argnums.size(); ++j) {
    rev += dot_all(grads[j], vs[argnums[j]]);
  }
  // Forward mode: sum_k <u_k, jvp_k>.
  auto [o2, tans] = jvp_on(f, inputs, vs, argnums);
  double fwd = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (is_inexact(outs[k].dtype())) {
      fwd += dot_all(tans[k], us[k]);
    }
  }
  double scale = std::max({1.0, std::abs(fd), std::abs(rev)});
  EXPECT_NEAR(rev, fd, tol * scale) << "vjp disagrees with finite differences";
  EXPECT_NEAR(fwd, fd, tol * scale) << "jvp disagrees with finite differences";
  EXPECT_NEAR(fwd, rev, tol * scale) << "jvp and vjp disagree";
}

// vmap(f, in_axes) against a loop over slices; every output mapped to
// `out_axis`.
inline void check_vmap(const Fn& f, const std::vector<array>& inputs,
                       const std::vector<int>& in_axes, int out_axis = 0,
                       double tol = 1e-5) {
  int n = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] >= 0) {
      n = inputs[i].shape(in_axes[i]);
    }
  }
  ASSERT_GT(n, 0);
  auto probe = f([&] {
    std::vector<array> x;
    for (size_t i = 0; i < inputs.size(); ++i) {
      x.push_back(in_axes[i] >= 0 ? take(inputs[i], 0, in_axes[i])
                                  : inputs[i]);
    }
    return x;
  }());
  std::vector<int> out_axes(probe.size(), out_axis);
  auto got = vmap(f, in_axes, out_axes)(inputs);
  ASSERT_EQ(got.size(), probe.size());
  std::vector<std::vector<array>> per_output(probe.size());
  for (int b = 0; b < n; ++b) {
    std::vector<array> x;
    for (size_t i = 0; i < inputs.size(); ++i) {
      x.push_back(in_axes[i] >= 0 ? take(inputs[i], b, in_axes[i])
                                  : inputs[i]);
    }
    auto o = f(x);
    for (size_t k = 0; k < o.size(); ++k) {
      per_output[k].push_back(o[k]);
    }
  }
  for (size_t k = 0; k < got.size(); ++k) {
    auto expected = stack(per_output[k], out_axis);
    ASSERT_EQ(got[k].shape(), expected.shape()) << "output " << k;
    expect_close(got[k], to_vector<double>(expected), tol, tol,
                 "vmap output " + std::to_string(k));
  }
}

}  // namespace fluxion::test

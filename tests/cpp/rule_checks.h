// Drivers shared by the elementwise and reduction rule tests, built on
// transform_checks.h:
//  - grads: check_grads plus the shapes and dtypes of cotangents/tangents;
//  - second_order: the vjp itself (a function of primals and cotangents)
//    through check_grads, i.e. vjp of vjp and jvp of vjp against finite
//    differences of the first derivative, and likewise the jvp;
//  - zero_grads: vjp and jvp are zeros of the primal's / output's dtype;
//  - vmaps: check_vmap with each input mapped alone at each of its axes,
//    with all inputs mapped at assorted axes, and vmap of vmap.
#pragma once

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "transform_checks.h"

namespace fluxion::test::rules {

using Arrays = std::vector<array>;
using Maker = std::function<array(const Shape&)>;

inline unsigned next_seed() {
  static unsigned seed = 1000;
  return seed++;
}

// Uniform values in [lo, hi) of dtype `dt` (float64 by default, so that
// finite differences are accurate).
inline array uniform(const Shape& shape, double lo = -1, double hi = 1,
                     Dtype dt = float64) {
  std::mt19937 gen(next_seed());
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape, float64), dt);
}

inline array random_ints(const Shape& shape, int lo, int hi, Dtype dt = int32) {
  std::mt19937 gen(next_seed());
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape, int32), dt);
}

inline array random_bools(const Shape& shape) {
  return astype(random_ints(shape, 0, 1), bool_);
}

inline Maker floats(double lo = -1, double hi = 1) {
  return [lo, hi](const Shape& s) { return uniform(s, lo, hi); };
}
inline Maker ints(int lo = -5, int hi = 5) {
  return [lo, hi](const Shape& s) { return random_ints(s, lo, hi); };
}
inline Maker bools() {
  return [](const Shape& s) { return random_bools(s); };
}

inline Fn fn1(std::function<array(const array&)> g) {
  return [g](const Arrays& in) { return Arrays{g(in[0])}; };
}
inline Fn fn2(std::function<array(const array&, const array&)> g) {
  return [g](const Arrays& in) { return Arrays{g(in[0], in[1])}; };
}
inline Fn fn3(
    std::function<array(const array&, const array&, const array&)> g) {
  return [g](const Arrays& in) { return Arrays{g(in[0], in[1], in[2])}; };
}

inline std::vector<int> floating_args(const Arrays& in) {
  std::vector<int> args;
  for (size_t i = 0; i < in.size(); ++i) {
    if (is_floating_point(in[i].dtype())) {
      args.push_back(static_cast<int>(i));
    }
  }
  return args;
}

// check_grads, after checking that cotangents have the primals' shapes and
// dtypes and tangents the outputs'.
inline void grads(const Fn& f, const Arrays& in, double tol = 1e-6,
                  double eps = 1e-6) {
  auto args = floating_args(in);
  auto outs = f(in);
  Arrays cts, ts;
  for (auto& o : outs) {
    cts.push_back(ones_like(o));
  }
  for (auto& x : in) {
    ts.push_back(ones_like(x));
  }
  auto g = vjp(f, in, cts, args).second;
  ASSERT_EQ(g.size(), args.size());
  for (size_t j = 0; j < args.size(); ++j) {
    EXPECT_EQ(g[j].shape(), in[args[j]].shape()) << "cotangent " << j;
    EXPECT_EQ(g[j].dtype(), in[args[j]].dtype()) << "cotangent " << j;
  }
  auto t = jvp_on(f, in, ts, args).second;
  ASSERT_EQ(t.size(), outs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    EXPECT_EQ(t[k].shape(), outs[k].shape()) << "tangent " << k;
    EXPECT_EQ(t[k].dtype(), outs[k].dtype()) << "tangent " << k;
  }
  check_grads(f, in, tol, eps, args, next_seed());
}

// The vjp of `f` as a function of (primals..., cotangents...), through
// check_grads: second derivatives by vjp-of-vjp and jvp-of-vjp.
inline void second_order(const Fn& f, const Arrays& in, double tol = 1e-5,
                         double eps = 1e-5) {
  auto outs = f(in);
  Arrays all = in;
  for (auto& o : outs) {
    all.push_back(uniform(o.shape(), -1, 1, o.dtype()));
  }
  size_t n = in.size();
  Fn g = [f, n](const Arrays& x) {
    Arrays primals(x.begin(), x.begin() + n);
    Arrays cts(x.begin() + n, x.end());
    return vjp(f, primals, cts, floating_args(primals)).second;
  };
  check_grads(g, all, tol, eps, {}, next_seed());

  // The jvp of `f` as a function of (primals..., tangents...): jvp of jvp
  // and vjp of jvp.
  Arrays with_tangents = in;
  for (auto& x : in) {
    with_tangents.push_back(is_floating_point(x.dtype())
                                ? uniform(x.shape(), -1, 1, x.dtype())
                                : zeros_like(x));
  }
  Fn h = [f, n](const Arrays& x) {
    Arrays primals(x.begin(), x.begin() + n);
    Arrays tangents(x.begin() + n, x.end());
    // With respect to the floating inputs only (integer indices raise).
    auto jvps = jvp_on(f, primals, tangents, floating_args(primals)).second;
    for (auto& v : jvps) {
      v = copy(v);  // as above
    }
    return jvps;
  };
  check_grads(h, with_tangents, tol, eps, {}, next_seed());
}

// Zero derivatives: the vjp is zeros shaped and typed like each primal,
// the jvp zeros like each output.
inline void zero_grads(const Fn& f, const Arrays& in, const std::string& what) {
  auto outs = f(in);
  Arrays cts, ts;
  for (auto& o : outs) {
    cts.push_back(ones_like(o));
  }
  for (auto& x : in) {
    ts.push_back(ones_like(x));
  }
  std::vector<int> args(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    args[i] = static_cast<int>(i);
  }
  auto g = vjp(f, in, cts, args).second;
  ASSERT_EQ(g.size(), in.size()) << what;
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(g[i].dtype(), in[i].dtype()) << what << " cotangent " << i;
    EXPECT_EQ(g[i].shape(), in[i].shape()) << what << " cotangent " << i;
    expect_close(g[i], std::vector<double>(in[i].size(), 0.0), 0, 0,
                 what + " cotangent");
  }
  auto t = jvp_on(f, in, ts, args).second;
  ASSERT_EQ(t.size(), outs.size()) << what;
  for (size_t k = 0; k < outs.size(); ++k) {
    // A bool or integer output (a comparison) has tangents of the
    // tangents' dtype (as MLX).
    if (is_inexact(outs[k].dtype())) {
      EXPECT_EQ(t[k].dtype(), outs[k].dtype()) << what << " tangent " << k;
    }
    EXPECT_EQ(t[k].shape(), outs[k].shape()) << what << " tangent " << k;
    expect_close(t[k], std::vector<double>(outs[k].size(), 0.0), 0, 0,
                 what + " tangent");
  }
}

inline Shape inserted(Shape s, int axis, int size) {
  s.insert(s.begin() + axis, size);
  return s;
}

// `shapes` are the unbatched input shapes, `makers` make inputs of any
// shape in the op's domain.
inline void vmaps(const Fn& f, const std::vector<Shape>& shapes,
                  const std::vector<Maker>& makers, double tol = 1e-5) {
  const int b = 3;
  const size_t n = shapes.size();
  auto unbatched = [&](size_t j) { return makers[j](shapes[j]); };
  int out_ndim = 1 << 20;
  {
    Arrays in;
    for (size_t j = 0; j < n; ++j) {
      in.push_back(unbatched(j));
    }
    for (auto& o : f(in)) {
      out_ndim = std::min(out_ndim, o.ndim());
    }
  }
  // One input mapped at each of its axes, the others unmapped.
  for (size_t i = 0; i < n; ++i) {
    for (int ax = 0; ax <= static_cast<int>(shapes[i].size()); ++ax) {
      Arrays in;
      std::vector<int> axes;
      for (size_t j = 0; j < n; ++j) {
        in.push_back(j == i ? makers[j](inserted(shapes[j], ax, b))
                            : unbatched(j));
        axes.push_back(j == i ? ax : -1);
      }
      SCOPED_TRACE("input " + std::to_string(i) + " mapped at axis " +
                   std::to_string(ax));
      check_vmap(f, in, axes, 0, tol);
    }
  }
  // Every input mapped, at different axes; the output's batch axis last.
  {
    Arrays in;
    std::vector<int> axes;
    for (size_t j = 0; j < n; ++j) {
      int ax = static_cast<int>((j + 1) % (shapes[j].size() + 1));
      in.push_back(makers[j](inserted(shapes[j], ax, b)));
      axes.push_back(ax);
    }
    SCOPED_TRACE("all inputs mapped");
    check_vmap(f, in, axes, out_ndim, tol);
  }
  // vmap of vmap: the inner map over a leading axis of size 2, the outer
  // over the last axis.
  {
    Arrays in;
    std::vector<int> inner, outer;
    for (size_t j = 0; j < n; ++j) {
      auto s = inserted(inserted(shapes[j], 0, 2),
                        static_cast<int>(shapes[j].size()) + 1, b);
      in.push_back(makers[j](s));
      inner.push_back(0);
      outer.push_back(static_cast<int>(shapes[j].size()) + 1);
    }
    SCOPED_TRACE("vmap of vmap");
    check_vmap(vmap(f, inner), in, outer, 0, tol);
  }
}

}  // namespace fluxion::test::rules

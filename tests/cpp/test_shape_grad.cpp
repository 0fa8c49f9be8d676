// Transformation rules of the shape and indexing primitives: vjp and jvp
// against central finite differences (check_grads), vmap against a loop
// over slices (check_vmap) for every mapped axis of every input, nested
// vmap, rules of rules (vjp of vjp, jvp of vjp, vmap of vjp, Jacobians),
// and hand-computed cotangents where finite differences along random
// directions would not single out a mistake (duplicate indices, broadcast
// sums, integer inputs).
//
// Elementwise and reduction rules are another family's: the functions here
// use only shape and indexing ops, and cotangents come from the checkers
// (random), so no sum is needed to make a scalar.
#include <functional>
#include <random>
#include <string>

#include "fluxion/ops/common.h"
#include "rule_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using rules::Arrays;
using rules::fn1;
using rules::fn2;
using rules::fn3;
using rules::grads;
using rules::Maker;

unsigned next_seed() {
  static unsigned seed = 1;
  return seed++;
}

array rnd(const Shape& shape) {
  std::mt19937 gen(next_seed());
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return array(v.begin(), shape, float64);
}

// Indices in [-n, n): negative ones, and duplicates when there are many.
array rand_idx(const Shape& shape, int n, Dtype dtype = int32) {
  std::mt19937 gen(next_seed());
  std::uniform_int_distribution<int> d(-n, n - 1);
  std::vector<int> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape, int32), dtype);
}

Maker floats() {
  return [](const Shape& s) { return rnd(s); };
}
// Non-contiguous views: the transpose of random data.
Maker transposed_floats() {
  return [](const Shape& s) {
    Shape r(s.rbegin(), s.rend());
    return transpose(rnd(r));
  };
}
Maker indices(int n, bool transposed = false) {
  return [n, transposed](const Shape& s) {
    if (!transposed) {
      return rand_idx(s, n);
    }
    Shape r(s.rbegin(), s.rend());
    return transpose(rand_idx(r, n, int64));
  };
}

Shape inserted(Shape s, int axis, int size) {
  s.insert(s.begin() + axis, size);
  return s;
}


// check_vmap with each input mapped alone at each of its axes (the others
// unmapped), then every input mapped (output at axis 1 when it has one),
// then vmap of vmap. `shapes` are the unbatched shapes.
void vmaps(const Fn& f, const std::vector<Shape>& shapes,
           const std::vector<Maker>& makers) {
  const int b = 3;
  auto unbatched = [&](size_t j) { return makers[j](shapes[j]); };
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (int ax = 0; ax <= static_cast<int>(shapes[i].size()); ++ax) {
      Arrays in;
      std::vector<int> axes;
      for (size_t j = 0; j < shapes.size(); ++j) {
        in.push_back(j == i ? makers[j](inserted(shapes[j], ax, b))
                            : unbatched(j));
        axes.push_back(j == i ? ax : -1);
      }
      SCOPED_TRACE("input " + std::to_string(i) + " mapped at axis " +
                   std::to_string(ax));
      check_vmap(f, in, axes);
    }
  }
  {
    Arrays in;
    std::vector<int> axes;
    for (size_t j = 0; j < shapes.size(); ++j) {
      int ax = static_cast<int>(shapes[j].size());  // the last axis
      in.push_back(makers[j](inserted(shapes[j], ax, b)));
      axes.push_back(ax);
    }
    SCOPED_TRACE("all inputs mapped");
    int out_axis = f([&] {
                     Arrays x;
                     for (size_t j = 0; j < shapes.size(); ++j) {
                       x.push_back(unbatched(j));
                     }
                     return x;
                   }())[0]
                               .ndim() > 0
                       ? 1
                       : 0;
    check_vmap(f, in, axes, out_axis);
  }
  // Nested: the inner vmap maps axis 0 of every input but the last (which
  // stays unmapped inside when there are several), the outer the last axis.
  Arrays in;
  std::vector<int> inner, outer;
  for (size_t j = 0; j < shapes.size(); ++j) {
    bool mapped_inside = shapes.size() == 1 || j + 1 < shapes.size();
    Shape s = shapes[j];
    if (mapped_inside) {
      s.insert(s.begin(), 2);
    }
    outer.push_back(static_cast<int>(s.size()));
    s.push_back(b);
    in.push_back(makers[j](s));
    inner.push_back(mapped_inside ? 0 : -1);
  }
  SCOPED_TRACE("nested vmap");
  check_vmap(vmap(f, inner), in, outer);
}

void grads_and_vmaps(const Fn& f, const std::vector<Shape>& shapes,
                     const std::vector<Maker>& makers) {
  Arrays in;
  for (size_t j = 0; j < shapes.size(); ++j) {
    in.push_back(makers[j](shapes[j]));
  }
  {
    SCOPED_TRACE("grads");
    grads(f, in);
  }
  vmaps(f, shapes, makers);
}

// The reverse-mode function (x_1..x_n, u) -> (vjp_1(u)..vjp_n(u)) of a
// function of n arrays with one output. Checking its own derivatives checks
// that the vjp rules' outputs are differentiable (it is linear in u).
Fn vjp_fn(const Fn& f, size_t n) {
  return [f, n](const Arrays& in) {
    Arrays primals(in.begin(), in.begin() + n);
    Arrays cts(in.begin() + n, in.end());
    return vjp(f, primals, cts).second;
  };
}
// (x_1..x_n, t_1..t_n) -> the jvp of f's outputs.
Fn jvp_fn(const Fn& f, size_t n) {
  return [f, n](const Arrays& in) {
    Arrays primals(in.begin(), in.begin() + n);
    Arrays ts(in.begin() + n, in.end());
    return jvp(f, primals, ts).second;
  };
}

// Rules of rules for a function with one output: derivatives of its vjp
// (twice over for one input) and jvp, and vmap over the cotangents of the
// vjp. The elementwise and reduction families' rules are not used: each
// input is used once (an input used twice sums its cotangents with `add`;
// so does u in the vjp of the vjp of a function of several inputs), and no
// broadcast or pad value is differentiated (their cotangents are sums).
void second_order(const Fn& f, const std::vector<Shape>& shapes) {
  Arrays xs, ts, ws;
  for (auto& s : shapes) {
    xs.push_back(rnd(s));
    ts.push_back(rnd(s));
    ws.push_back(rnd(s));
  }
  size_t n = xs.size();
  auto out_shape = f(xs)[0].shape();
  auto u = rnd(out_shape);
  auto with = [](Arrays a, const Arrays& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  {
    SCOPED_TRACE("vjp of vjp");
    grads(vjp_fn(f, n), with(xs, {u}));
  }
  {
    SCOPED_TRACE("vjp of jvp");
    grads(jvp_fn(f, n), with(xs, ts));
  }
  if (n == 1) {
    SCOPED_TRACE("vjp of vjp of vjp");
    grads(vjp_fn(vjp_fn(f, n), n + 1), with(with(xs, {u}), ws));
  }
  {
    SCOPED_TRACE("vmap of vjp");
    std::vector<int> axes(n, -1);
    axes.push_back(0);
    check_vmap(vjp_fn(f, n), with(xs, {rnd(inserted(out_shape, 0, 3))}), axes);
  }
}

// An affine function's Jacobian, column k being f(e_k) - f(0): the
// reference for jacrev and jacfwd.
array explicit_jacobian(const UnaryFn& f, const array& x) {
  int n = static_cast<int>(x.size());
  auto out = f(x);
  auto at_zero = to_vector<double>(f(zeros(x.shape(), float64)));
  std::vector<double> jac(out.size() * n);
  for (int k = 0; k < n; ++k) {
    std::vector<double> e(n, 0.0);
    e[k] = 1;
    auto col = to_vector<double>(f(array(e.begin(), x.shape(), float64)));
    for (size_t r = 0; r < col.size(); ++r) {
      jac[r * n + k] = col[r] - at_zero[r];
    }
  }
  Shape shape = out.shape();
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return array(jac.begin(), shape, float64);
}

void jacobians(const UnaryFn& f, const Shape& in_shape) {
  auto x = rnd(in_shape);
  auto want = to_vector<double>(explicit_jacobian(f, x));
  auto jr = jacrev(f)(x);
  auto jf = jacfwd(f)(x);
  auto shape = f(x).shape();
  shape.insert(shape.end(), in_shape.begin(), in_shape.end());
  ASSERT_EQ(jr.shape(), shape);
  ASSERT_EQ(jf.shape(), shape);
  expect_close(jr, want, 1e-12, 1e-12, "jacrev");
  expect_close(jf, want, 1e-12, 1e-12, "jacfwd");
}

}  // namespace

// --- shape primitives ---

TEST(ShapeGradReshape, Rules) {
  auto f = fn1([](const array& x) { return reshape(x, {4, 6}); });
  grads_and_vmaps(f, {{2, 3, 4}}, {transposed_floats()});
  // A view that cannot be reshaped without a copy.
  grads(f, {transpose(rnd({4, 3, 2}))});
  grads(fn1([](const array& x) { return reshape(x, {}); }), {rnd({1, 1})});
  vmaps(fn1([](const array& x) { return reshape(x, {-1}); }), {{3, 2}},
        {floats()});
}

TEST(ShapeGradTranspose, Rules) {
  grads_and_vmaps(fn1([](const array& x) {
                    return transpose(x, {2, 0, 1});
                  }),
                  {{2, 3, 4}}, {transposed_floats()});
  grads_and_vmaps(fn1([](const array& x) { return swapaxes(x, 0, 2); }),
                  {{2, 3, 4}}, {floats()});
  grads(fn1([](const array& x) { return moveaxis(x, 0, -1); }),
        {transpose(rnd({4, 3, 2}))});
}

TEST(ShapeGradBroadcast, Rules) {
  grads_and_vmaps(fn1([](const array& x) {
                    return broadcast_to(x, {2, 3, 4});
                  }),
                  {{3, 1}}, {transposed_floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return broadcast_to(x, {2, 2});
                  }),
                  {{}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return broadcast_to(x, {3, 4});
                  }),
                  {{4}}, {floats()});
  grads(fn1([](const array& x) {
          return broadcast_to(x, {5, 2, 3});
        }),
        {transpose(rnd({1, 2}))});
}

TEST(ShapeGradBroadcast, CotangentIsTheSumOverCopies) {
  auto x = rnd({3, 1});
  auto ct = array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3, 1}, float64);
  auto g = vjp(fn1([](const array& a) {
                 return broadcast_to(a, {2, 3, 1});
               }),
               {x}, {ct})
               .second[0];
  expect_close(g, {5, 7, 9});
  // An integer input keeps its dtype (the sum widens int16 to int32).
  auto i16 = astype(array({1, 2}), int16);
  auto ones16 = astype(ones({3, 2}), int16);
  auto gi = vjp(fn1([](const array& a) {
                  return broadcast_to(a, {3, 2});
                }),
                {i16}, {ones16})
                .second[0];
  EXPECT_EQ(gi.dtype(), int16);
  expect_close(gi, {3, 3});
}

TEST(ShapeGradExpandSqueeze, Rules) {
  grads_and_vmaps(fn1([](const array& x) {
                    return expand_dims(x, {0, 3});
                  }),
                  {{2, 3}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return squeeze(x, {0, 2});
                  }),
                  {{1, 3, 1, 2}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) { return squeeze(x); }), {{1, 1}},
                  {floats()});
  grads(fn1([](const array& x) { return atleast_3d(x); }),
        {transpose(rnd({3, 2}))});
}

TEST(ShapeGradSlice, Rules) {
  struct Case {
    Shape start, stop, strides;
  };
  std::vector<Case> cases = {
      {{1, 0}, {4, 6}, {1, 1}},      // a window: the vjp is a pad
      {{0, 1}, {5, 6}, {2, 2}},      // steps, stops past the end
      {{4, 5}, {-6, -7}, {-1, -2}},  // reversed to the first element
      {{4, 5}, {-6, -7}, {-2, -2}},  // reversed, exact stop below -1
      {{3, 1}, {0, 5}, {-1, 3}},    {{2, 0}, {2, 6}, {1, 1}},  // empty
  };
  for (auto& c : cases) {
    SCOPED_TRACE("slice " + shape_str(c.start) + shape_str(c.stop) +
                 shape_str(c.strides));
    auto f = fn1(
        [c](const array& x) { return slice(x, c.start, c.stop, c.strides); });
    grads_and_vmaps(f, {{5, 6}}, {transposed_floats()});
    grads(f, {transpose(rnd({6, 5}))});
  }
  // Slices of a 3-d array, then composites built on slicing.
  grads_and_vmaps(fn1([](const array& x) {
                    return slice(x, {0, 2, 1}, {2, 0, 4}, {1, -1, 2});
                  }),
                  {{2, 3, 4}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) { return take(x, 1, 1); }), {{2, 3}},
                  {floats()});
  grads_and_vmaps(fn1([](const array& x) { return take(x, -1, 0); }), {{4}},
                  {floats()});
}

TEST(ShapeGradSlice, CotangentLandsInTheSlicedPositions) {
  auto f = fn1([](const array& x) { return slice(x, {5}, {0}, {-2}); });
  auto g = vjp(f, {rnd({6})}, {array({1.0, 2.0, 3.0}, float64)}).second[0];
  expect_close(g, {0, 3, 0, 2, 0, 1});
  auto t =
      jvp(f, {rnd({6})}, {array({0.0, 1.0, 2.0, 3.0, 4.0, 5.0})}).second[0];
  expect_close(t, {5, 3, 1});
}

TEST(ShapeGradSliceUpdate, Rules) {
  auto f = fn2([](const array& src, const array& upd) {
    return slice_update(src, upd, {1, 0}, {5, 6}, {2, 2});
  });
  grads_and_vmaps(f, {{5, 6}, {2, 3}},
                  {transposed_floats(), transposed_floats()});
  // The update broadcasts to the region; the region runs backwards.
  auto g = fn2([](const array& src, const array& upd) {
    return slice_update(src, upd, {4, 5}, {-6, -7}, {-2, -2});
  });
  grads_and_vmaps(g, {{5, 6}, {3}}, {floats(), floats()});
  grads(g, {transpose(rnd({6, 5})), rnd({1, 3})});
  // A scalar update and a window.
  grads_and_vmaps(fn2([](const array& src, const array& upd) {
                    return slice_update(src, upd, {1}, {3});
                  }),
                  {{4}, {}}, {floats(), floats()});
}

TEST(ShapeGradSliceUpdate, Cotangents) {
  auto f = fn2([](const array& src, const array& upd) {
    return slice_update(src, upd, {1}, {4}, {2});
  });
  auto ct = array({1.0, 2.0, 3.0, 4.0, 5.0}, float64);
  auto g = vjp(f, {rnd({5}), rnd({1})}, {ct}).second;
  expect_close(g[0], {1, 0, 3, 0, 5});
  expect_close(g[1], {2 + 4});  // broadcast to both positions
  // Tangent of the update only.
  auto t = jvp(f, {rnd({5}), rnd({1})}, {zeros({5}, float64), array({7.0})})
               .second[0];
  expect_close(t, {0, 7, 0, 7, 0});
}

TEST(ShapeGradConcatenate, Rules) {
  auto f = fn3([](const array& a, const array& b, const array& c) {
    return concatenate({a, b, c}, 1);
  });
  grads_and_vmaps(f, {{2, 3}, {2, 1}, {2, 4}},
                  {transposed_floats(), floats(), transposed_floats()});
  grads(f, {transpose(rnd({3, 2})), rnd({2, 1}), transpose(rnd({4, 2}))});
  grads_and_vmaps(fn2([](const array& a, const array& b) {
                    return concatenate({a, b});  // flattened
                  }),
                  {{2, 2}, {3}}, {floats(), floats()});
  grads_and_vmaps(fn2([](const array& a, const array& b) {
                    return stack({a, b, a}, 1);
                  }),
                  {{2, 3}, {2, 3}}, {floats(), floats()});
}

TEST(ShapeGradConcatenate, CotangentsAreWindows) {
  auto f = fn2([](const array& a, const array& b) {
    return concatenate({a, b}, 0);
  });
  auto ct = array({1.0, 2.0, 3.0, 4.0, 5.0}, float64);
  auto g = vjp(f, {rnd({2}), rnd({3})}, {ct}, {1}).second;
  ASSERT_EQ(g.size(), 1u);
  expect_close(g[0], {3, 4, 5});
  auto t =
      jvp(f, {rnd({2}), rnd({3})}, {array({1.0, 2.0}), zeros({3}, float64)})
          .second[0];
  expect_close(t, {1, 2, 0, 0, 0});
}

TEST(ShapeGradSplit, MultipleOutputs) {
  Fn f = [](const Arrays& in) { return split(in[0], {1, 3}, 1); };
  grads_and_vmaps(f, {{2, 5}}, {floats()});
  Fn g = [](const Arrays& in) { return split(in[0], 2, 0); };
  grads(g, {transpose(rnd({3, 4}))});
  Fn h = [](const Arrays& in) { return broadcast_arrays({in[0], in[1]}); };
  grads_and_vmaps(h, {{3, 1}, {4}}, {floats(), floats()});
}

TEST(ShapeGradPad, Rules) {
  // The pad value is an input too.
  auto f = fn2([](const array& x, const array& v) {
    return pad(x, {{1, 2}, {0, 3}}, v);
  });
  grads(f, {rnd({3, 4}), rnd({})});
  grads(f, {transpose(rnd({4, 3})), rnd({})});
  // vmap over x; a batched value raises (as MLX).
  grads_and_vmaps(fn1([](const array& x) {
                    return pad(x, {{1, 2}, {0, 3}}, array(-0.5, float64));
                  }),
                  {{3, 4}}, {transposed_floats()});
  grads_and_vmaps(
      fn1([](const array& x) { return pad(x, {-1}, {2}, {1}, array(1.5)); }),
      {{2, 3, 2}}, {floats()});
}

TEST(ShapeGradPad, Cotangents) {
  auto f = fn2([](const array& x, const array& v) {
    return pad(x, std::make_pair(1, 2), v);
  });
  auto ct = array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, float64);
  auto g = vjp(f, {rnd({3}), rnd({})}, {ct}).second;
  expect_close(g[0], {2, 3, 4});
  EXPECT_EQ(g[1].shape(), Shape{});
  expect_close(g[1], {1 + 5 + 6});
  auto t =
      jvp(f, {rnd({3}), rnd({})}, {zeros({3}, float64), array(2.0)}).second[0];
  expect_close(t, {2, 0, 0, 0, 2, 2});
}

TEST(ShapeGradPad, MappedPadValueRaises) {
  // One value for the whole batch, as MLX: a batched value is an error, an
  // unbatched one pads every element.
  auto f = fn2(
      [](const array& x, const array& v) { return pad(x, {0}, {1}, {2}, v); });
  auto x = array({1.0, 2.0, 3.0, 4.0}, {2, 2}, float64);
  auto v = array({-1.0, -2.0}, float64);
  expect_error<std::invalid_argument>([&] { vmap(f, {-1, 0})({x, v}); },
                                      "[pad] Cannot vmap over a batched");
  auto out = vmap(f, {0, -1})({x, array(-1.0, float64)})[0];
  ASSERT_EQ(out.shape(), Shape({2, 5}));
  expect_close(out, {-1, 1, 2, -1, -1, -1, 3, 4, -1, -1});
}

TEST(ShapeGradComposite, Rules) {
  grads_and_vmaps(fn1([](const array& x) { return repeat(x, 3, 1); }), {{2, 3}},
                  {floats()});
  grads_and_vmaps(fn1([](const array& x) { return repeat(x, 2); }), {{2, 2}},
                  {floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return tile(x, {2, 1, 3});
                  }),
                  {{2, 3}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return pad(x, {{2, 1}, {0, 2}}, array(0), "edge");
                  }),
                  {{3, 2}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) { return flatten(x, 1, 2); }),
                  {{2, 3, 2}}, {floats()});
  grads_and_vmaps(fn1([](const array& x) {
                    return unflatten(x, 0, {2, -1});
                  }),
                  {{6}}, {floats()});
  // A chain of views and copies mixing every shape primitive.
  grads_and_vmaps(fn2([](const array& x, const array& y) {
                    auto t = slice(transpose(x), {0, 1}, {3, 3});
                    auto p = pad(expand_dims(y, {0, 1}), {{0, 0}, {1, 0}},
                                 array(0.5, float64));
                    return concatenate({reshape(t, {1, 6}), p}, 1);
                  }),
                  {{4, 3}, {}}, {floats(), floats()});
}

TEST(ShapeGradEdgePad, Cotangent) {
  // Each border element copies the edge: its cotangent adds to the edge's.
  auto f = fn1([](const array& x) {
    return pad(x, std::make_pair(2, 1), array(0), "edge");
  });
  auto ct = array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, float64);
  expect_close(vjp(f, {rnd({3})}, {ct}).second[0], {1 + 2 + 3, 4, 5 + 6});
}

// --- indexing primitives ---

TEST(IndexingGradTake, Rules) {
  for (int axis = 0; axis < 2; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    int n = axis == 0 ? 4 : 5;
    auto f = fn2(
        [axis](const array& x, const array& i) { return take(x, i, axis); });
    grads_and_vmaps(f, {{4, 5}, {2, 3}},
                    {transposed_floats(), indices(n, true)});
  }
  grads_and_vmaps(
      fn2([](const array& x, const array& i) { return take(x, i); }),
      {{3, 4}, {5}}, {floats(), indices(12)});
  // Strided data, strided and 0-d indices.
  grads(fn2([](const array& x, const array& i) { return take(x, i, 1); }),
        {transpose(rnd({5, 4})), transpose(rand_idx({3, 2}, 5, int64))});
  grads(fn2([](const array& x, const array& i) { return take(x, i, 0); }),
        {rnd({4, 2}), array(-2)});
}

TEST(IndexingGradTake, RepeatedIndicesAccumulate) {
  auto f = fn2([](const array& x, const array& i) { return take(x, i, 0); });
  auto g = vjp(f, {rnd({4}), array({1, 3, -3, 1})},
               {array({1.0, 2.0, 3.0, 4.0})}, {0})
               .second;
  expect_close(g[0], {0, 1 + 3 + 4, 0, 2});
  // The indices have no derivative: asking for one is an error naming
  // stop_gradient (as MLX), in either mode.
  expect_error<std::invalid_argument>(
      [&] {
        vjp(f, {rnd({4}), array({1, 3})}, {array({1.0, 2.0})}, {0, 1});
      },
      "stop_gradient");
  expect_error<std::invalid_argument>(
      [&] {
        jvp(f, {rnd({4}), array({1, 2})}, {zeros({4}, float64), array({5, 5})});
      },
      "stop_gradient");
}

TEST(IndexingGradTakeAlongAxis, Rules) {
  for (int axis = 0; axis < 2; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Shape is = axis == 0 ? Shape{6, 5} : Shape{4, 7};
    int n = axis == 0 ? 4 : 5;
    grads_and_vmaps(fn2([axis](const array& x, const array& i) {
                      return take_along_axis(x, i, axis);
                    }),
                    {{4, 5}, is}, {transposed_floats(), indices(n, true)});
  }
  // Broadcasting: the array along the other axis, or the indices.
  auto f = fn2(
      [](const array& x, const array& i) { return take_along_axis(x, i, 1); });
  grads_and_vmaps(f, {{1, 5}, {3, 4}}, {floats(), indices(5)});
  grads_and_vmaps(f, {{3, 5}, {1, 2}}, {floats(), indices(5)});
  grads(f, {transpose(rnd({5, 3})), transpose(rand_idx({4, 3}, 5))});
}

TEST(IndexingGradPutAlongAxis, Rules) {
  for (int axis = 0; axis < 2; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Shape is = axis == 0 ? Shape{6, 5} : Shape{4, 7};  // duplicates
    int n = axis == 0 ? 4 : 5;
    grads_and_vmaps(
        fn3([axis](const array& a, const array& i, const array& v) {
          return put_along_axis(a, i, v, axis);
        }),
        {{4, 5}, is, is},
        {transposed_floats(), indices(n, true), transposed_floats()});
  }
  // Values broadcast to the indices, indices to the array.
  auto f = fn3([](const array& a, const array& i, const array& v) {
    return put_along_axis(a, i, v, 1);
  });
  grads_and_vmaps(f, {{3, 5}, {1, 4}, {}}, {floats(), indices(5), floats()});
  grads_and_vmaps(f, {{3, 5}, {3, 2}, {3, 1}},
                  {floats(), indices(5), floats()});
  grads(f, {transpose(rnd({5, 3})), transpose(rand_idx({4, 3}, 5)),
            transpose(rnd({4, 3}))});
}

TEST(IndexingGradPutAlongAxis, OnlyTheLastWriterGetsTheCotangent) {
  auto f = fn3([](const array& a, const array& i, const array& v) {
    return put_along_axis(a, i, v, 0);
  });
  auto ct = array({10.0, 20.0, 30.0, 40.0, 50.0});
  auto idx = array({1, 3, -4, 0});  // -4 is 1 again: it wins over the first
  auto g = vjp(f, {rnd({5}), idx, rnd({4})}, {ct}, {0, 2}).second;
  expect_close(g[0], {0, 0, 30, 0, 50});
  expect_close(g[1], {0, 40, 20, 10});
  // Along axis 1 of a 2-d array, duplicates differing per row.
  auto a = rnd({2, 3});
  auto i2 = array({2, 2, 0, 1, 1, 1}, {2, 3});
  auto ct2 = array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  auto g2 = vjp(fn3([](const array& a, const array& i, const array& v) {
                  return put_along_axis(a, i, v, 1);
                }),
                {a, i2, rnd({2, 3})}, {ct2}, {0, 2})
                .second;
  expect_close(g2[0], {0, 2, 0, 4, 0, 6});
  expect_close(g2[1], {0, 3, 1, 0, 0, 5});
}

TEST(IndexingGradScatterAdd, Rules) {
  for (int axis = 0; axis < 2; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Shape is = axis == 0 ? Shape{6, 5} : Shape{4, 7};
    int n = axis == 0 ? 4 : 5;
    grads_and_vmaps(fn3([axis](const array& a, const array& i, const array& v) {
                      return scatter_add_axis(a, i, v, axis);
                    }),
                    {{4, 5}, is, is}, {floats(), indices(n), floats()});
  }
  auto f = fn3([](const array& a, const array& i, const array& v) {
    return scatter_add_axis(a, i, v, 0);
  });
  auto ct = array({10.0, 20.0, 30.0});
  auto g = vjp(f, {rnd({3}), array({1, 1, -1}), rnd({3})}, {ct}, {0, 2}).second;
  expect_close(g[0], {10, 20, 30});
  expect_close(g[1], {20, 20, 30});
}

// --- rules of rules ---

TEST(ShapeGradSecondOrder, Slice) {
  second_order(fn1([](const array& x) {
                 return slice(x, {1, 0}, {3, 4});
               }),
               {{4, 5}});
  second_order(fn1([](const array& x) {
                 return slice(x, {3, 0}, {0, 5}, {-2, 2});
               }),
               {{4, 5}});
  second_order(fn2([](const array& x, const array& y) {
                 return slice_update(x, y, {3}, {0}, {-2});
               }),
               {{5}, {2}});
  second_order(fn1([](const array& x) { return take(x, 2, 1); }), {{2, 4}});
}

TEST(ShapeGradSecondOrder, ConcatenatePadReshape) {
  second_order(fn3([](const array& a, const array& b, const array& c) {
                 return concatenate({a, transpose(b), c}, 0);
               }),
               {{3, 3}, {3, 3}, {1, 3}});
  second_order(fn1([](const array& x) {
                 return pad(x, {{1, 0}, {2, 1}}, array(2.0));
               }),
               {{2, 3}});
  second_order(fn2([](const array& a, const array& b) {
                 return stack({a, b}, 1);
               }),
               {{2, 3}, {2, 3}});
  second_order(fn1([](const array& x) {
                 return squeeze(expand_dims(reshape(x, {6}), {0, 2}), 0);
               }),
               {{2, 3}});
}

TEST(IndexingGradSecondOrder, GatherScatter) {
  auto idx = array({2, 0, 2, -1, 1}, {5, 1});
  second_order(fn1([idx](const array& x) {
                 return take_along_axis(x, broadcast_to(idx, {5, 3}), 0);
               }),
               {{3, 3}});
  second_order(fn1([idx](const array& x) { return take(x, idx, 1); }),
               {{2, 3}});
  // put_along_axis with duplicates: its values' cotangent is a gather.
  auto pidx = broadcast_to(array({1, 1, 0, 1}, {1, 4}), {3, 4});
  second_order(fn2([pidx](const array& a, const array& v) {
                 return put_along_axis(a, pidx, v, 1);
               }),
               {{3, 2}, {3, 4}});
  second_order(fn2([pidx](const array& a, const array& v) {
                 return scatter_add_axis(a, pidx, v, 1);
               }),
               {{3, 2}, {3, 4}});
}

TEST(IndexingGradSecondOrder, Jacobians) {
  jacobians(
      [](const array& x) {
        return take_along_axis(x, array({2, 0, 0, 1}, {2, 2}), 1);
      },
      {2, 3});
  jacobians(
      [](const array& x) {
        return put_along_axis(x, array({1, 1}), array({5.0, 6.0}), 0);
      },
      {4});
  jacobians(
      [](const array& x) {
        return put_along_axis(zeros({3}, float64), array({1, -2, 0, 2}), x, 0);
      },
      {4});
  jacobians(
      [](const array& x) {
        return scatter_add_axis(zeros({3}, float64), array({1, -2, 0, 2}), x,
                                0);
      },
      {4});
  jacobians(
      [](const array& x) {
        return pad(slice(x, {2, 0}, {0, 3}, {-1, 2}), {{1, 1}, {0, 1}},
                   array(3.0));
      },
      {3, 3});
  jacobians(
      [](const array& x) {
        return concatenate({transpose(x), ones({2, 1}, float64)}, 1);
      },
      {2, 2});
}

// Nonlinear functions of shape and indexing ops: true grad of grad. For
// f(x) = sum(L(x)^2) with L linear, grad f = 2 L^T L x and the Hessian is
// 2 J^T J, J being L's Jacobian (computed column by column).
void hessian_of_squares(const UnaryFn& linear, const Shape& in_shape) {
  auto x = rnd(in_shape);
  auto jac = explicit_jacobian(linear, x);
  int n = static_cast<int>(x.size());
  int m = static_cast<int>(jac.size()) / n;
  auto jv = to_vector<double>(jac);
  std::vector<double> want(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int r = 0; r < m; ++r) {
        want[i * n + j] += 2 * jv[r * n + i] * jv[r * n + j];
      }
    }
  }
  auto f = [linear](const array& a) { return sum(square(linear(a))); };
  array h = hessian(f)(x);
  Shape hs = in_shape;
  hs.insert(hs.end(), in_shape.begin(), in_shape.end());
  ASSERT_EQ(h.shape(), hs);
  expect_close(h, want, 1e-10, 1e-10, "hessian");
  // The gradient function's own derivatives against finite differences.
  Fn g = [f](const Arrays& in) { return Arrays{grad(f)(in[0])}; };
  grads(g, {x});
}

TEST(ShapeGradSecondOrder, GradOfGradOfNonlinear) {
  hessian_of_squares(
      [](const array& x) {
        return slice(x, {3, 0}, {0, 5}, {-2, 2});
      },
      {4, 5});
  hessian_of_squares(
      [](const array& x) {
        return concatenate({x, transpose(x), slice(x, {1, 0}, {3, 3})}, 0);
      },
      {3, 3});
  hessian_of_squares(
      [](const array& x) {
        return pad(broadcast_to(x, {2, 3}), {{1, 0}, {0, 2}}, array(1.0));
      },
      {3});
}

TEST(IndexingGradSecondOrder, GradOfGradOfNonlinear) {
  hessian_of_squares(
      [](const array& x) {
        return take_along_axis(x, array({2, 0, 2, -1, 1, 1}, {3, 2}), 1);
      },
      {3, 3});
  hessian_of_squares(
      [](const array& x) {
        return put_along_axis(x, array({1, 1, 0}, {1, 3}),
                              slice(x, {0, 0}, {1, 3}), 1);
      },
      {2, 3});
  hessian_of_squares(
      [](const array& x) {
        return scatter_add_axis(x, array({1, 1, 0}, {3, 1}), take(x, 0, 0), 0);
      },
      {3, 2});
}

// Per-example gradients: vmap of grad through a gather.
TEST(IndexingGradSecondOrder, VmapOfGrad) {
  auto idx = array({2, 0, 2, 1});
  auto f = [idx](const array& x) { return sum(square(take(x, idx, 0))); };
  auto xs = rnd({5, 3});
  array g = vmap(grad(f))(xs);
  auto xv = to_vector<double>(xs);
  std::vector<double> want(15, 0.0);
  for (int b = 0; b < 5; ++b) {
    for (int k : {2, 0, 2, 1}) {
      want[b * 3 + k] += 2 * xv[b * 3 + k];
    }
  }
  expect_close(g, want, 1e-12, 1e-12);
}

// --- primitive metadata ---

TEST(ShapeGradPrimitives, OutputShapesMatch) {
  auto x = rnd({2, 3, 4});
  auto i = rand_idx({2, 5, 4}, 3);
  Arrays outs = {
      reshape(x, {6, 4}),
      transpose(x, {1, 2, 0}),
      broadcast_to(rnd({3, 1}), {2, 3, 5}),
      expand_dims(x, {0, 4}),
      squeeze(rnd({1, 3, 1}), {0, 2}),
      slice(x, {1, 2, 0}, {2, -4, 4}, {1, -1, 3}),
      slice_update(x, rnd({2}), {0, 0, 1}, {2, 3, 4}, {1, 2, 2}),
      concatenate({x, x, rnd({2, 1, 4})}, 1),
      pad(x, std::vector<int>{0, 2}, Shape{1, 0}, Shape{2, 3}),
      take_along_axis(x, i, 1),
      put_along_axis(x, i, rnd({2, 5, 4}), 1),
      scatter_add_axis(x, i, rnd({2, 5, 4}), 1),
  };
  for (auto& o : outs) {
    ASSERT_TRUE(o.has_primitive());
    auto shapes = o.primitive().output_shapes(o.inputs());
    ASSERT_EQ(shapes.size(), 1u) << o.primitive().name();
    EXPECT_EQ(shapes[0], o.shape()) << o.primitive().name();
  }
}

TEST(IndexingGradPrimitives, ScatterReduceTypesDiffer) {
  auto a = rnd({3});
  auto i = array({0, 2});
  auto v = rnd({2});
  auto p = put_along_axis(a, i, v, 0);
  auto q = scatter_add_axis(a, i, v, 0);
  auto p2 = put_along_axis(rnd({3}), i, v, 0);
  EXPECT_FALSE(p.primitive().is_equivalent(q.primitive()));
  EXPECT_TRUE(p.primitive().is_equivalent(p2.primitive()));
  EXPECT_TRUE(
      q.primitive().is_equivalent(scatter_add_axis(a, i, v, 0).primitive()));
  EXPECT_FALSE(q.primitive().is_equivalent(
      scatter_add_axis(rnd({3, 2}), array({0}, {1, 1}), rnd({1, 1}), 1)
          .primitive()));
}

// The transformation machinery itself: argument handling, error messages,
// stop_gradient, custom functions, checkpoint, Jacobians. Per-primitive
// rules are tested with each op family.
#include "device_scope.h"
#include "fluxion/ops/tracer_copy.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {
array vec(std::initializer_list<double> v) {
  return array(std::vector<double>(v).begin(), {static_cast<int>(v.size())});
}
}  // namespace

TEST(Transforms, VjpBasics) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{sum(x[0] * x[1])};
  };
  auto a = vec({1, 2, 3});
  auto b = vec({4, 5, 6});
  auto [outs, grads] = vjp(f, {a, b}, {array(1.0)});
  EXPECT_DOUBLE_EQ(outs[0].item<double>(), 32.0);
  expect_close(grads[0], {4, 5, 6});
  expect_close(grads[1], {1, 2, 3});
  // Only argnum 1.
  auto [o2, g2] = vjp(f, {a, b}, {array(1.0)}, {1});
  ASSERT_EQ(g2.size(), 1u);
  expect_close(g2[0], {1, 2, 3});
  // Cotangents are cast to the output dtype.
  auto [o3, g3] = vjp(f, {a, b}, {array(2.0f)});
  EXPECT_EQ(g3[0].dtype(), float64);
  expect_close(g3[0], {8, 10, 12});
}

TEST(Transforms, VjpErrors) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{x[0] * 2.0, x[0] + 1.0};
  };
  auto a = vec({1, 2});
  expect_error<std::invalid_argument>(
      [&] { vjp(f, {a}, {vec({1, 1})}); },
      "[vjp] Number of outputs to compute gradients for (2) does not match "
      "number of cotangents (1).");
  expect_error<std::invalid_argument>(
      [&] { vjp(f, {a}, {vec({1, 1, 1}), vec({1, 1})}); },
      "[vjp] Output shape (2) does not match cotangent shape (3).");
  auto scalar_f = [](const array& x) { return x * 2.0; };
  expect_error<std::invalid_argument>(
      [&] { grad(scalar_f)(vec({1, 2})); }, "[vjp] Output shape (2)");
  expect_error<std::invalid_argument>(
      [&] { grad(scalar_f)(vec({1})); },
      "If you are using grad your function must return a scalar.");
}

TEST(Transforms, StopGradientOutputsTakeNoCotangent) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{stop_gradient(x[0] * 3.0), sum(x[0] * x[0])};
  };
  auto [outs, grads] = vjp(f, {vec({1, 2})}, {array(1.0)});
  expect_close(grads[0], {2, 4});
  // Gradients do not flow through stop_gradient inside the graph.
  auto g = grad([](const array& x) { return sum(stop_gradient(x) * x); });
  expect_close(g(vec({1, 2})), {1, 2});
}

TEST(Transforms, UnusedInputsGetZeros) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{sum(x[0])};
  };
  auto [outs, grads] = vjp(f, {vec({1, 2}), array({7, 8}, int32)},
                           {array(1.0)}, {0, 1});
  expect_close(grads[0], {1, 1});
  EXPECT_EQ(grads[1].dtype(), int32);
  expect_close(grads[1], {0, 0});
}

TEST(Transforms, Jvp) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{x[0] * x[1], sum(x[0])};
  };
  auto [outs, tans] =
      jvp(f, {vec({1, 2}), vec({3, 4})}, {vec({1, 0}), vec({0, 1})});
  expect_close(tans[0], {3, 2});
  EXPECT_DOUBLE_EQ(tans[1].item<double>(), 1.0);
  expect_error<std::invalid_argument>(
      [&] { jvp(f, {vec({1, 2}), vec({3, 4})}, {vec({1, 0})}); },
      "[jvp] Number of inputs does not match number of tangents.");
  expect_error<std::invalid_argument>(
      [&] { jvp(f, {vec({1, 2}), vec({3, 4})}, {vec({1, 0}), vec({1})}); },
      "[jvp] Input shape does not match shape of tangent.");
}

TEST(Transforms, ValueAndGradArgnums) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{sum(x[0] * x[1] * x[2]), x[0] * 10.0};
  };
  auto a = vec({1, 2}), b = vec({3, 4}), c = vec({5, 6});
  auto [vals, grads] = value_and_grad(f, std::vector<int>{0, -1})({a, b, c});
  EXPECT_DOUBLE_EQ(vals[0].item<double>(), 1 * 3 * 5 + 2 * 4 * 6);
  expect_close(vals[1], {10, 20});  // auxiliary output
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], {15, 24});
  expect_close(grads[1], {3, 8});
  expect_error<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{}); },
      "[grad] Must specify at least one argument.");
  expect_error<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{0, 0})({a, b, c}); },
      "[grad] Repeat argument number not allowed in grad.");
  expect_error<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{0, 2, -1})({a, b, c}); },
      "[grad] Repeat argument number not allowed in grad.");
  expect_error<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{3})({a, b, c}); },
      "[grad] Invalid argument number for function with 3 inputs.");
}

TEST(Transforms, EvalInsideTransformIsAnError) {
  auto f = [](const array& x) {
    auto y = x * 2.0;
    y.eval();
    return sum(y);
  };
  expect_error<std::invalid_argument>(
      [&] { vmap(f)(vec({1, 2})); },
      "[eval] Attempting to eval an array during function transformations");
  auto g = [](const array& x) {
    auto y = exp(x);
    async_eval(y);
    return sum(y);
  };
  expect_error<std::invalid_argument>(
      [&] { grad(g)(vec({1, 2})); },
      "[async_eval] Not allowed inside a graph transformation.");
}

TEST(Transforms, VmapBasicsAndErrors) {
  auto f = [](const array& a, const array& b) { return a * b + 1.0; };
  array a(std::vector<double>{1, 2, 3, 4, 5, 6}.begin(), {2, 3});
  auto b = vec({10, 20, 30});
  auto out = vmap(f, 0, -1, 0)(a, b);
  expect_close(out, {11, 41, 91, 41, 101, 181});
  // Output moved to axis 1.
  auto out1 = vmap(f, 0, -1, 1)(a, b);
  EXPECT_EQ(out1.shape(), Shape({3, 2}));
  // Outputs independent of the mapped input are broadcast.
  auto g = vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{x[1] * 2.0, x[0]};
      },
      {0, -1});
  auto outs = g({a, b});
  EXPECT_EQ(outs[0].shape(), Shape({2, 3}));
  expect_close(outs[0], {20, 40, 60, 20, 40, 60});
  expect_error<std::invalid_argument>(
      [&] { vmap(f, 0, 0)(a, vec({1, 2, 3})); },
      "[vmap] Inconsistent axis sizes: 3 and 2.");
  expect_error<std::invalid_argument>(
      [&] { vmap(f, 0, 0)(array(1.0), b); },
      "[vmap] Cannot vmap an input with zero dimensions.");
  expect_error<std::invalid_argument>(
      [&] { vmap(f, 2, 0)(a, a); },
      "[vmap] Axis 2 invalid for input with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] { vmap(f, 0, 0, 3)(a, a); },
      "[vmap] Axis 3 invalid for output with 2 dimensions.");
  auto vf = vmap(
      [](const std::vector<array>& x) { return std::vector<array>{x[0]}; },
      {0, 0});
  expect_error<std::invalid_argument>(
      [&] { vf({a}); },
      "[vmap] The number of in axes (2) must match the number of inputs (1).");
  expect_error<std::invalid_argument>(
      [&] {
        vmap([](const std::vector<array>& x) { return x; }, {-1}, {0});
      },
      "[vmap] Input (or output) axes must be specified if output (or input) "
      "axes are.");
}

TEST(Transforms, NestedVmapAndPerExampleGrads) {
  array w(std::vector<double>{0.5, -1.0, 2.0}.begin(), {3});
  array xs(std::vector<double>{1, 2, 3, 4, 5, 6}.begin(), {2, 3});
  auto loss = [](const std::vector<array>& in) {
    return std::vector<array>{sum(square(in[0] * in[1]))};
  };
  // Per-example gradient w.r.t. w: 2 * w * x^2.
  auto per_example = vmap(
      [&](const std::vector<array>& in) {
        return vjp(loss, in, {array(1.0)}, {0}).second;
      },
      {-1, 0});
  auto g = per_example({w, xs});
  expect_close(g[0], {2 * 0.5 * 1, -2 * 4, 2 * 2 * 9, 2 * 0.5 * 16, -2 * 25,
                      2 * 2 * 36});
  // vmap of vmap equals an elementwise op over both axes.
  auto vv = vmap(vmap([](const array& x) { return x * x; }));
  expect_close(vv(xs), {1, 4, 9, 16, 25, 36});
}

TEST(Transforms, CustomFunction) {
  // f(x) = sin(x) with a deliberately different vjp (cos(x) * 2 * ct).
  auto f = custom_function(
      [](const std::vector<array>& x) {
        return std::vector<array>{sin(x[0])};
      },
      [](const std::vector<array>& primals, const std::vector<array>& cts,
         const std::vector<array>& outs) {
        return std::vector<array>{cos(primals[0]) * 2.0 * cts[0]};
      });
  auto x = vec({0.1, 0.2});
  auto out = f({x})[0];
  expect_close(out, {std::sin(0.1), std::sin(0.2)});
  auto [o, g] = vjp(f, {x}, {vec({1, 1})});
  expect_close(g[0], {2 * std::cos(0.1), 2 * std::cos(0.2)});
  // jvp and vmap fall back to the function itself.
  auto [o2, t] = jvp(f, {x}, {vec({1, 1})});
  expect_close(t[0], {std::cos(0.1), std::cos(0.2)});
  auto vf = vmap(f)({reshape(vec({0.1, 0.2, 0.3, 0.4}), {2, 2})});
  expect_close(vf[0], {std::sin(0.1), std::sin(0.2), std::sin(0.3),
                       std::sin(0.4)});
  // A custom jvp is used when given.
  auto h = custom_function(
      [](const std::vector<array>& x) {
        return std::vector<array>{x[0] * x[0]};
      },
      std::nullopt,
      [](const std::vector<array>& primals, const std::vector<array>& tans,
         const std::vector<int>&) {
        return std::vector<array>{tans[0] * 100.0};
      });
  expect_close(jvp(h, {x}, {vec({1, 1})}).second[0], {100, 100});
}

TEST(Transforms, CheckpointMatchesAndSavesMemory) {
  // A block with several intermediates that its backward pass needs.
  auto layer = [](const std::vector<array>& in) {
    auto h = tanh(in[0] * 1.01 + 0.1);
    h = sin(h) * h;
    h = exp(h * 0.5) - h;
    return std::vector<array>{tanh(h)};
  };
  auto deep = [&](const Fn& block) {
    return [block](const std::vector<array>& in) {
      std::vector<array> x = in;
      for (int i = 0; i < 20; ++i) {
        x = block(x);
      }
      return std::vector<array>{sum(x[0])};
    };
  };
  auto ckpt = checkpoint(layer);
  std::vector<double> v(1 << 18);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(0.001 * i);
  }
  array x(v.begin(), {static_cast<int>(v.size())});
  x.eval();

  auto run = [&](const Fn& f) {
    clear_cache();
    reset_peak_memory();
    size_t base = get_active_memory();
    auto g = vjp(f, {x}, {array(1.0)}).second[0];
    g.eval();
    return std::make_pair(g, get_peak_memory() - base);
  };
  auto [g_plain, peak_plain] = run(deep(layer));
  auto [g_ckpt, peak_ckpt] = run(deep(ckpt));
  expect_close(g_ckpt, to_vector<double>(g_plain), 1e-12, 1e-12);
  EXPECT_LT(peak_ckpt, peak_plain);
}

TEST(Transforms, JacobiansAndHessian) {
  // f(x) = [x0^2 x1, 5 x0 + sin x1]
  auto f = [](const array& x) {
    auto x0 = take(x, 0, 0);
    auto x1 = take(x, 1, 0);
    return stack({x0 * x0 * x1, 5.0 * x0 + sin(x1)});
  };
  auto x = vec({1.5, 0.5});
  std::vector<double> expected = {2 * 1.5 * 0.5, 1.5 * 1.5, 5.0,
                                  std::cos(0.5)};
  expect_close(jacrev(f)(x), expected, 1e-10);
  expect_close(jacfwd(f)(x), expected, 1e-10);
  // Hessian of sum(x^3) is diag(6x).
  auto h = hessian([](const array& x) { return sum(x * x * x); })(x);
  expect_close(h, {9, 0, 0, 3}, 1e-10);
  auto [g, hv] = hvp(
      [](const std::vector<array>& in) {
        return std::vector<array>{sum(in[0] * in[0] * in[0])};
      },
      {x}, {vec({1, 1})});
  expect_close(hv[0], {9, 3}, 1e-10);
}

TEST(Transforms, RepeatedOutputsAccumulateCotangents) {
  auto f = [](const std::vector<array>& in) {
    auto y = in[0] * 2.0;
    return std::vector<array>{y, y};
  };
  auto g = vjp(f, {vec({1, 2})}, {vec({1, 0}), vec({0, 1})}).second[0];
  expect_close(g, {2, 2});
}

TEST(Transforms, CustomVmapIsUsed) {
  // A vmap rule that maps the batch through `fun` but adds 100, so we can
  // tell it ran.
  auto f = custom_function(
      [](const std::vector<array>& x) {
        return std::vector<array>{x[0] * 2.0};
      },
      std::nullopt, std::nullopt,
      [](const std::vector<array>& in, const std::vector<int>& axes) {
        return std::make_pair(std::vector<array>{in[0] * 2.0 + 100.0},
                              std::vector<int>{axes[0]});
      });
  auto out = vmap(f)({reshape(vec({1, 2, 3, 4}), {2, 2})});
  expect_close(out[0], {102, 104, 106, 108});
}

TEST(Transforms, GradOfVmap) {
  // d/dw sum_i sum((w * x_i)^2) computed with vmap inside grad.
  array xs(std::vector<double>{1, 2, 3, 4, 5, 6}.begin(), {2, 3});
  auto loss = [&](const array& w) {
    auto per_row = vmap([&](const array& x) { return sum(square(w * x)); });
    return sum(per_row(xs));
  };
  auto g = grad(loss)(vec({1, -1, 0.5}));
  // 2 w sum_i x_i^2 = 2 w (1+16, 4+25, 9+36)
  expect_close(g, {2 * 17.0, -2 * 29.0, 1 * 45.0});
}

TEST(Transforms, JacobiansWithArgnums) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{in[0] * in[1] + sin(in[1])};
  };
  auto a = vec({1, 2}), b = vec({0.5, -0.5});
  auto jr = jacrev(f, {0, 1})({a, b});
  auto jf = jacfwd(f, {0, 1})({a, b});
  expect_close(jr[0], {0.5, 0, 0, -0.5}, 1e-12);
  expect_close(jf[0], {0.5, 0, 0, -0.5}, 1e-12);
  expect_close(jr[1], {1 + std::cos(0.5), 0, 0, 2 + std::cos(-0.5)}, 1e-12);
  expect_close(jf[1], {1 + std::cos(0.5), 0, 0, 2 + std::cos(-0.5)}, 1e-12);
  auto h = hessian(
      [](const std::vector<array>& in) {
        return std::vector<array>{sum(in[0] * in[0] * in[1])};
      },
      {1})({a, b});
  expect_close(h[0], {0, 0, 0, 0}, 1e-12);  // linear in the second argument
}

TEST(Transforms, VmapAxisCountErrors) {
  array a(std::vector<double>{1, 2, 3, 4}.begin(), {2, 2});
  auto two_out = vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{x[0], x[0] * 2.0};
      },
      {0}, {0});
  expect_error<std::invalid_argument>(
      [&] { two_out({a}); },
      "[vmap] The number of out axes (1) must match the number of outputs "
      "(2).");
  auto none = vmap(
      [](const std::vector<array>& x) { return std::vector<array>{x[0]}; },
      {-1}, {-1});
  expect_error<std::invalid_argument>(
      [&] { none({a}); }, "[vmap] At least one of in_axes must be non-None.");
}

// An output independent of the mapped inputs with out_axes -1 (Python's
// None) comes back unmapped, as in MLX; with an axis it is broadcast.
TEST(TransformsVmap, UnmappedOutputWithNoneAxis) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{sum(x[0], false), multiply(x[1], array(2.0f))};
  };
  auto a = reshape(arange(6.0f), {3, 2});
  auto c = array({7.0f, 8.0f});
  auto outs = vmap(f, {0, -1}, {0, -1})({a, c});
  EXPECT_EQ(outs[1].shape(), Shape({2}));
  expect_close(outs[1], {14, 16});
  expect_close(outs[0], {1, 5, 9});
  outs = vmap(f, {0, -1}, {0, 1})({a, c});
  EXPECT_EQ(outs[1].shape(), Shape({2, 3}));
  expect_close(outs[1], {14, 14, 14, 16, 16, 16});
}

namespace {
// A tracer of `a` shares a's buffer (on the CPU); an op on it with `a` still alive
// cannot take the shared buffer over (a keeps its values); gradients
// through tracers are unchanged.
void check_tracer_copy(Device d) {
  OnDevice on(d);
  array a = astype(arange(0, 1 << 16, 1), float32);
  eval(a);
  const std::vector<float> before = to_vector<float>(a);
  array t = detail::tracer_copy(a, d);
  EXPECT_STREQ(t.primitive().name(), "Copy");
  eval(t);
  if (d == Device::cpu) {  // the GPU's tracers still copy (tracer_copy.h)
    EXPECT_EQ(t.data<float>(), a.data<float>()) << "the tracer copied";
  }
  array y = exp(t);  // donation would write into a's buffer
  t = array(0.0f);
  eval(y);
  EXPECT_EQ(to_vector<float>(a), before);
  auto [outs, grads] = vjp(
      [](const std::vector<array>& x) { return std::vector<array>{sin(x[0])}; },
      {a}, {ones_like(a)});
  EXPECT_TRUE(allclose(grads[0], cos(a), 1e-5, 1e-6).item<bool>());
  EXPECT_EQ(to_vector<float>(a), before);
}
}  // namespace

TEST(Transforms, TracerCopySharesItsBuffer) {
  check_tracer_copy(Device::cpu);
}

TEST(Transforms, TracerCopySharesItsBufferGpu) {
  SKIP_WITHOUT_GPU();
  check_tracer_copy(Device::gpu);
}

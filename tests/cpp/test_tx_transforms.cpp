// C++ behaviours of issue 11 section 2: masked_scatter under vmap, shapeless
// compile through reshape rules and NumberOfElements, uncaptured closures,
// integer jvps.
#include "fluxion/compile.h"
#include "test_utils.h"
#include "fluxion/eager.h"

namespace fluxion::test {
namespace {

TEST(TxTransforms, MaskedScatterValuesAndVmap) {
  auto a = iota({2, 3});
  auto mask = array({true, false, true, false, true, false}, {2, 3});
  auto out = masked_scatter(a, mask, array({10.0f, 20.0f, 30.0f}));
  expect_close(out, {10, 1, 20, 3, 30, 5});
  // Broadcast mask.
  expect_close(masked_scatter(a, array({false, true, false}, {3}),
                              array({7.0f, 8.0f})),
               {0, 7, 2, 3, 8, 5});
  // Under vmap: each batch element fills its own trues from its own values.
  auto xs = iota({3, 4});
  auto ms = array({true, true, false, false, false, true, false, true,
                   false, false, false, false},
                  {3, 4});
  auto vs = iota({3, 2}, float32, 100);
  auto f = vmap(
      [](const std::vector<array>& in) {
        return std::vector<array>{masked_scatter(in[0], in[1], in[2])};
      },
      {0, 0, 0}, {0});
  auto got = f({xs, ms, vs})[0];
  std::vector<double> expected;
  for (int b = 0; b < 3; ++b) {
    auto row = masked_scatter(slice(xs, {b, 0}, {b + 1, 4}),
                              slice(ms, {b, 0}, {b + 1, 4}),
                              slice(vs, {b, 0}, {b + 1, 2}));
    auto v = to_vector<double>(row);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  expect_close(got, expected);
  expect_close(got, {100, 101, 2, 3, 4, 102, 6, 103, 8, 9, 10, 11});
  // Gradients flow to the kept elements of a and the used values.
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) {
        return std::vector<array>{masked_scatter(in[0], mask, in[1])};
      },
      {a, array({1.0f, 2.0f, 3.0f, 4.0f})}, {ones({2, 3})});
  expect_close(grads[0], {0, 1, 0, 1, 0, 1});
  expect_close(grads[1], {1, 1, 1, 0});
  expect_error<std::invalid_argument>(
      [&] { masked_scatter(a, ones({2, 3}), array(1.0f)); },
      "[masked_scatter] The mask must be boolean");
}

TEST(TxTransforms, ReshapeRulesFollowNewShapes) {
  auto flat = flatten(iota({2, 3, 4}), 0, 1);
  auto& r = static_cast<Reshape&>(flat.primitive());
  EXPECT_EQ(r.shape_for({5, 1, 4}), Shape({5, 4}));
  auto un = unflatten(iota({6, 2}), 0, {-1, 3});
  EXPECT_EQ(static_cast<Reshape&>(un.primitive()).shape_for({9, 2}),
            Shape({3, 3, 2}));
  auto req = reshape(iota({2, 3, 4}), {6, -1});
  auto& rr = static_cast<Reshape&>(req.primitive());
  EXPECT_EQ(rr.shape_for({3, 2, 2}), Shape({6, 2}));
  expect_error<std::invalid_argument>([&] { rr.shape_for({5, 5, 3}); },
                                      "[reshape] Cannot infer the shape (6,-1)");
  auto g = compile(
      [](const std::vector<array>& in) {
        return std::vector<array>{flatten(in[0] * 2.0f, 1, 2) + 1.0f,
                                  mean(in[0], {0, 2})};
      },
      /*shapeless=*/true);
  for (int n : {2, 5}) {
    auto x = iota({n, 3, 2});
    auto outs = g({x});
    EXPECT_EQ(outs[0].shape(), Shape({n, 6}));
    auto v = iota_vec(n * 6);
    for (auto& e : v) e = 2 * e + 1;
    expect_close(outs[0], v);
    expect_close(outs[1], to_vector<double>(mean(x, {0, 2})));
  }
}

TEST(TxTransforms, CompileKeepsLazyClosuresAndRejectsReadInputs) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  // A lazy closure that depends on no input is part of the trace (MLX).
  auto y = array({1.0f, 2.0f}) + 1.0f;
  auto f = compile([&y](const std::vector<array>& in) {
    return std::vector<array>{in[0] + y};
  });
  expect_close(f({ones({2})})[0], {3, 4});
  expect_close(f({ones({2})})[0], {3, 4});
  // A closure computed from the array given as the argument raises.
  auto x = array({1.0f, 2.0f}) * 2.0f;
  auto z = x + 1.0f;
  auto g = compile([&z](const std::vector<array>& in) {
    return std::vector<array>{in[0] + z};
  });
  expect_error<std::invalid_argument>([&] { g({x}); }, "uncaptured inputs");
  // With another argument it is an ordinary lazy closure.
  expect_close(g({ones({2})})[0], {4, 6});
}

TEST(TxTransforms, IntegerJvps) {
  auto x = array({3, 1, 2}, {3}, int32);
  auto t = array({1, 2, 3}, {3}, int32);
  auto jv = [&](UnaryFn fn) { return jvp(fn, x, t).second; };
  expect_close(jv([](const array& a) { return sum(a); }), {6});
  expect_close(jv([](const array& a) { return prod(a); }), {1 * 2 + 2 * 6 + 3 * 3});
  expect_close(jv([](const array& a) { return max(a); }), {1});
  expect_close(jv([](const array& a) { return min(a); }), {2});
  auto c = jv([](const array& a) { return greater(a, array(1)); });
  EXPECT_EQ(c.dtype(), int32);
  expect_close(c, {0, 0, 0});
}

}  // namespace
}  // namespace fluxion::test

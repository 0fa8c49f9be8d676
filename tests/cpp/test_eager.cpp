// The small-op fast path (fluxion/eager.h): small elementwise ops on
// computed host arrays run when built and return computed nodes (data
// ready, graph kept until eval, as MLX's lazy node); the same values as
// the lazy path, which transformations, other streams, large or uncomputed
// inputs still take.
#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "fluxion/eager.h"

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Data ready when built (a computed node, or an input returned as is).
bool computed(const array& a) {
  return a.status() == array::Status::available;
}

// The values of `f` on computed inputs (the fast path) and on the same
// inputs with the fast path off, which must agree exactly.
void expect_same_as_lazy(const std::function<array()>& f,
                         const std::string& what) {
  array now = f();
  EXPECT_TRUE(computed(now)) << what;
  array later = [&] {
    detail::EagerOff off;
    return f();
  }();
  later.eval();
  ASSERT_EQ(now.dtype(), later.dtype()) << what;
  ASSERT_EQ(now.shape(), later.shape()) << what;
  EXPECT_EQ(to_vector<double>(now), to_vector<double>(later)) << what;
}

}  // namespace

TEST(Eager, SameValuesAsLazyAcrossDtypesAndBroadcasting) {
  std::vector<Dtype> dtypes{bool_, uint8, int32, int64, float16, bfloat16,
                            float32, float64};
  for (Dtype ta : dtypes) {
    for (Dtype tb : {ta, float32, int32}) {
      array a = astype(array({1, 2, 3, 0, 2, 1}, {2, 3}), ta);
      array b = astype(array({2, 1, 3}, {3}), tb);
      a.eval();
      b.eval();
      std::string what = std::string(dtype_name(ta)) + " " + dtype_name(tb);
      expect_same_as_lazy([&] { return a + b; }, "add " + what);
      expect_same_as_lazy([&] { return a * b; }, "multiply " + what);
      expect_same_as_lazy([&] { return maximum(a, b); }, "maximum " + what);
      expect_same_as_lazy([&] { return less(a, b); }, "less " + what);
      expect_same_as_lazy([&] { return a * 2.5f; }, "scalar " + what);
      expect_same_as_lazy([&] { return exp(a); }, "exp " + what);
      expect_same_as_lazy([&] { return astype(a, float16); }, "cast " + what);
      expect_same_as_lazy([&] { return where(less(a, b), a, b); },
                          "where " + what);
    }
  }
}

TEST(Eager, OtherOpsAndInputsStayLazy) {
  array x({1.0f, 2.0f, 3.0f});
  x.eval();
  EXPECT_FALSE(computed(sum(x)));                  // not elementwise
  EXPECT_FALSE(computed(reshape(x, {3, 1})));      // a view op
  EXPECT_FALSE(computed(exp(reshape(x, {3, 1}))));  // input not computed
  array big = zeros({5000});
  big.eval();
  EXPECT_FALSE(computed(big + 1.0f));  // above the size limit
  Stream s = new_stream(Device::cpu);
  array other = add(x, x, s);  // not the shared default stream
  EXPECT_FALSE(computed(other));
  expect_close(other, {2, 4, 6});
  detail::EagerOff off;
  EXPECT_FALSE(computed(x + x));
}

TEST(Eager, TransformationsStillSeeEveryOp) {
  array x({1.0f, 2.0f, 3.0f});
  array c({2.0f, 2.0f, 2.0f});
  x.eval();
  c.eval();
  auto f = [&](const array& v) { return sum(exp(v * c + 1.0f)); };
  auto g = grad(f)(x);
  expect_close(g, {2 * std::exp(3.0), 2 * std::exp(5.0), 2 * std::exp(7.0)});
  auto vm = vmap([&](const array& v) { return v * 2.0f + c; })(
      array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3}));
  expect_close(vm, {4, 6, 8, 10, 12, 14});
  auto cf = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0]) + in[0] * 2.0f};
  });
  expect_close(cf({x})[0],
               {std::exp(1.0) + 2, std::exp(2.0) + 4, std::exp(3.0) + 6});
  expect_close(cf({x + 1.0f})[0],
               {std::exp(2.0) + 4, std::exp(3.0) + 6, std::exp(4.0) + 8});
}

TEST(Eager, ThreadsBuildSmallOpsConcurrently) {
  array x({1.0f, 2.0f, 3.0f, 4.0f});
  x.eval();
  std::vector<std::thread> ts;
  std::vector<float> results(4);
  for (int k = 0; k < 4; ++k) {
    ts.emplace_back([&, k] {
      array y = x;
      for (int i = 0; i < 500; ++i) {
        y = y * 1.0f + static_cast<float>(k);
      }
      results[k] = sum(y).item<float>();  // x + 500 k, summed
    });
  }
  for (auto& t : ts) {
    t.join();
  }
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(results[k], 10.0f + 2000.0f * k);
  }
}

TEST(Eager, ComputedNodesKeepTheirGraphUntilEval) {
  array x({1.0f, 2.0f, 3.0f});
  x.eval();
  array y = x + 1.0f;
  array z = y * y;
  // Computed, yet the graph MLX shows: z = Multiply(y, y), y = Add(x, .).
  ASSERT_TRUE(y.is_computed_node() && z.is_computed_node());
  EXPECT_STREQ(z.primitive().name(), "Multiply");
  ASSERT_EQ(z.inputs().size(), 2u);
  EXPECT_TRUE(z.inputs()[0].is_same(y));
  EXPECT_STREQ(y.primitive().name(), "Add");
  EXPECT_TRUE(y.inputs()[0].is_same(x));
  // eval runs nothing more and detaches z and everything computed upstream.
  z.eval();
  EXPECT_FALSE(z.has_primitive());
  EXPECT_FALSE(y.has_primitive());
  EXPECT_TRUE(z.inputs().empty());
  expect_close(z, {4, 9, 16});
  // A lazy consumer's eval detaches the computed nodes it reaches too.
  array w = x * 3.0f;
  array big = broadcast_to(w, {5000, 3}) + zeros({5000, 3});
  ASSERT_TRUE(w.is_computed_node());
  ASSERT_FALSE(computed(big));
  big.eval();
  EXPECT_FALSE(w.has_primitive());
}

TEST(Eager, LongComputedChainsNeitherRecurseNorLeak) {
  // 100,000 computed adds kept as a graph (no eval in between, as in
  // MLX): both the eval that detaches them and dropping an unevaluated
  // chain run iteratively.
  array x({1.0f, 2.0f});
  x.eval();
  for (int round = 0; round < 2; ++round) {
    array y = x;
    for (int i = 0; i < 100000; ++i) {
      y = y + 1.0f;
    }
    ASSERT_TRUE(y.is_computed_node());
    if (round == 0) {
      y.eval();
      EXPECT_FALSE(y.has_primitive());
      expect_close(y, {100001, 100002});
    }
  }  // round 1: the whole chain is dropped undetached
}

TEST(Eager, ValuesOnlyTheGraphHoldsAreDroppedAndRecomputedIfAsked) {
  array x({1.0f, 2.0f});
  x.eval();
  array y = x;
  for (int i = 0; i < 3; ++i) {
    y = y + 1.0f;
  }
  // y = Add(y2, .), y2 = Add(y1, .), y1 = Add(x, .). Building y dropped
  // y1's value (held by y2's node alone once the name had moved on), not
  // y2's (the name still held it while y was built).
  const array& y2 = y.inputs()[0];
  const array& y1 = y2.inputs()[0];
  ASSERT_TRUE(y.is_computed_node() && y2.is_computed_node());
  EXPECT_EQ(y1.status(), array::Status::unscheduled);
  EXPECT_STREQ(y1.primitive().name(), "Add");  // its node is kept
  EXPECT_EQ(y1.data<float>(), nullptr);
  // Reached through the graph and evaluated, it is computed again.
  array again = y1;
  again.eval();
  expect_close(again, {2, 3});
  y.eval();
  expect_close(y, {4, 5});
}

// One scalar added in a loop shares its Broadcast node among the adds
// (ops/binary.cpp) while another thread evaluates snapshots of the chain,
// detaching that node: the builder reads whether it is still a node under
// the scheduling lock (in the TSan suites), and every value stays right.
TEST(Eager, SharedScalarViewWhileAnotherThreadEvaluates) {
  array x({1.0f, 2.0f, 3.0f, 4.0f});
  array one(1.0f);
  x.eval();
  one.eval();
  std::mutex mu;
  std::vector<std::pair<int, array>> snapshots;
  std::atomic<bool> done{false};
  std::thread evaluator([&] {
    size_t seen = 0;
    while (!done.load() || seen < snapshots.size()) {
      std::optional<std::pair<int, array>> snap;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (seen < snapshots.size()) {
          snap = snapshots[seen++];
        }
      }
      if (snap) {
        snap->second.eval();
        EXPECT_EQ(to_vector<float>(snap->second)[0], 1.0f + snap->first);
      } else {
        std::this_thread::yield();
      }
    }
  });
  array y = x;
  for (int i = 1; i <= 400; ++i) {
    y = y + one;
    if (i % 10 == 0) {
      std::lock_guard<std::mutex> lk(mu);
      snapshots.emplace_back(i, y);
    }
  }
  done = true;
  evaluator.join();
  y.eval();
  expect_close(y, {401, 402, 403, 404});
}

TEST(Eager, ThreadsEvalOneSharedComputedNode) {
  array x({1.0f, 2.0f, 3.0f, 4.0f});
  x.eval();
  for (int trial = 0; trial < 50; ++trial) {
    array y = x;
    for (int i = 0; i < 20; ++i) {
      y = y * 1.0f + 1.0f;
    }
    std::vector<std::thread> ts;
    std::vector<float> sums(3);
    for (int k = 0; k < 3; ++k) {
      ts.emplace_back([&, k] {
        array mine = y;
        mine.eval();  // three threads detach the one shared chain
        sums[k] = sum(mine).item<float>();
      });
    }
    for (auto& t : ts) {
      t.join();
    }
    for (float v : sums) {
      EXPECT_EQ(v, 90.0f);
    }
    EXPECT_FALSE(y.has_primitive());
  }
}

namespace {
// Nodes (arrays with a primitive) reachable from `out`, each once.
int count_nodes(const array& out) {
  std::vector<array> stack{out};
  std::set<uintptr_t> seen;
  int n = 0;
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!a.has_primitive() || !seen.insert(a.id()).second) {
      continue;
    }
    ++n;
    for (auto& in : a.inputs()) {
      stack.push_back(in);
    }
  }
  return n;
}
}  // namespace

TEST(Eager, CompileDisabledShowsEveryOpAndEnabledOneFusedNode) {
  // MLX's node counts: with compile disabled the function runs op by op
  // and its result shows each op (small inputs run at once, their nodes
  // kept); compiled, the elementwise chain is one fused node.
  array x({1.0f, 2.0f, 3.0f});
  array y({0.5f, 0.5f, 0.5f});
  x.eval();
  y.eval();
  auto f = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0] + in[1]) * in[0]};
  });
  disable_compile();
  array eager = f({x, y})[0];
  enable_compile();
  EXPECT_EQ(count_nodes(eager), 3);  // Add, Exp, Multiply
  EXPECT_STREQ(eager.primitive().name(), "Multiply");
  array fused = f({x, y})[0];
  EXPECT_EQ(count_nodes(fused), 1);
  EXPECT_EQ(std::string(fused.primitive().name()).rfind("Compiled", 0), 0u)
      << fused.primitive().name();
  EXPECT_EQ(to_vector<float>(eager), to_vector<float>(fused));
}

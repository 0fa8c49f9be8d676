// export_function's import table (fluxion/export_registry.cpp): which
// names a file may hold, generated from fluxion/primitive_list.h, and the
// checks every primitive's from_state makes on parameters read from a file.
// RulesCoverage.ExportRoundTrip round-trips the primitives themselves.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "fluxion/export.h"
#include "fluxion/fluxion.h"
#include "fluxion/primitive_registry.h"

using namespace fluxion;

namespace {

using Args = std::vector<PrimitiveArg>;

std::string invalid(const std::string& name) {
  return "[import_function] Invalid parameters for the primitive " + name +
         " (a corrupt or foreign file?).";
}

// The message import_primitive raises for (name, args), or "" when it
// rebuilds a primitive.
std::string import_error(const std::string& name, const Args& args) {
  try {
    import_primitive(name, args, to_stream({}));
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

}  // namespace

// Every primitive of the list is importable under its name except those
// whose parameters cannot be saved (a file reader, host callables, a tape,
// a process group) and the logarithms written as "Log"; MLX's names add
// NaNEqual.
TEST(ExportRegistry, NamesFollowThePrimitiveList) {
  std::set<std::string> expected;
  for (auto& p : primitive_registry()) {
    expected.insert(p.name);
  }
  for (auto n : {"Log2", "Log10", "Load", "CustomTransforms", "Compiled",
                 "AllReduce", "AllGather", "ReduceScatter", "Send", "Recv"}) {
    ASSERT_TRUE(expected.erase(n)) << n;
  }
  expected.insert("NaNEqual");
  auto names = exported_primitive_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  for (auto n : {"Log2", "Log10", "Load", "Compiled", "AllReduce", "Sum"}) {
    EXPECT_EQ(import_error(n, {}),
              "[import_function] Unknown primitive '" + std::string(n) + "'.");
  }
}

TEST(ExportRegistry, SpecialNames) {
  Stream s = to_stream({});
  EXPECT_STREQ(import_primitive("Log", {int64_t{0}}, s)->name(), "Log2");
  EXPECT_STREQ(import_primitive("Log", {int64_t{1}}, s)->name(), "Log10");
  EXPECT_STREQ(import_primitive("Log", {int64_t{2}}, s)->name(), "Log");
  EXPECT_STREQ(import_primitive("Log", {}, s)->name(), "Log");
  EXPECT_STREQ(import_primitive("Equal", {}, s)->name(), "Equal");
  Equal nan_equal(s, true);
  auto [name, args] = export_primitive(nan_equal);
  EXPECT_EQ(name, "NaNEqual");
  auto back = import_primitive(name, args, s);
  EXPECT_STREQ(back->name(), "NaNEqual");
  EXPECT_TRUE(back->is_equivalent(nan_equal));
  auto sum = import_primitive(
      "Reduce", {int64_t{2}, std::vector<int64_t>{0}, float32}, s);
  EXPECT_STREQ(sum->name(), "Sum");
  EXPECT_EQ(export_primitive(*sum).first, "Reduce");
  auto log2 = export_primitive(*import_primitive("Log", {int64_t{0}}, s));
  EXPECT_EQ(log2.first, "Log");
  EXPECT_EQ(log2.second, Args{int64_t{0}});
}

// Files written before a parameter was added still load.
TEST(ExportRegistry, OlderParameterLists) {
  Stream s = to_stream({});
  auto reshape = import_primitive("Reshape", {std::vector<int64_t>{2, 3}}, s);
  EXPECT_EQ(export_primitive(*reshape).second.size(), 5u);
  auto sdpa = import_primitive("ScaledDotProductAttention",
                               {0.5, true, int64_t{0}, false}, s);
  EXPECT_EQ(export_primitive(*sdpa).second,
            (Args{0.5, true, int64_t{0}, false, false}));
}

// An enum out of its range, a parameter of the wrong type or a missing one
// raise instead of building a primitive with a meaningless parameter.
TEST(ExportRegistry, InvalidParametersRaise) {
  std::vector<int64_t> axes{0};
  struct Case {
    const char* name;
    Args args;
  };
  std::vector<Case> cases = {
      {"Reduce", {int64_t{6}, axes, float32}},
      {"Reduce", {int64_t{-1}, axes, float32}},
      {"ArgReduce", {int64_t{2}, int64_t{0}}},
      {"Scan", {int64_t{5}, int64_t{0}, false, true}},
      {"Scatter", {int64_t{5}, axes}},
      {"ScatterAxis", {int64_t{0}, int64_t{2}, std::string("put")}},
      {"QuantizedMatmul", {int64_t{32}, int64_t{4}, true, int64_t{4}}},
      {"ScaledDotProductAttention", {0.5, true, int64_t{3}, false}},
      {"Reshape", {axes, int64_t{3}, axes, int64_t{0}, int64_t{0}}},
      {"Transpose", {true}},
      {"Concatenate", {}},
      {"Convolution", {axes, axes, axes, axes, axes, int64_t{1}}},
      {"LayerNorm", {int64_t{1}, true, true}},
      {"GatherAxis", {int64_t{0}, int64_t{1}}},
  };
  for (auto& c : cases) {
    EXPECT_EQ(import_error(c.name, c.args), invalid(c.name)) << c.name;
  }
  // The largest value of each enum is accepted.
  EXPECT_EQ(import_error("Scan", {int64_t{4}, int64_t{0}, false, true}), "");
  EXPECT_EQ(import_error("Reduce", {int64_t{5}, axes, float32}), "");
  EXPECT_EQ(
      import_error("ScatterAxis", {int64_t{0}, int64_t{1}, std::string("put")}),
      "");
}

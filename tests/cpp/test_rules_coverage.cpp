// Coverage of the op table (op_cases.h; its drivers are in
// test_op_table.cpp): every primitive declared in the library's headers
// must appear in some case, a new primitive without a case fails
// `EveryPrimitiveIsCovered`; every node's output_shapes matches the built
// shapes; every primitive round-trips through export.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "fluxion/compile.h"
#include "fluxion/export.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Primitive class names declared in the library's headers.
std::set<std::string> declared_primitives() {
  std::set<std::string> names;
  std::regex cls(R"(class (\w+) : public (Primitive|UnaryPrimitive|BinaryPrimitive)\b)");
  std::regex macro(R"(FLUXION_(UNARY|BINARY)_PRIMITIVE\((\w+)[,)])");
  for (auto& entry : std::filesystem::recursive_directory_iterator(
           std::string(FLUXION_SOURCE_DIR) + "/fluxion")) {
    if (entry.path().extension() != ".h") {
      continue;
    }
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    for (std::sregex_iterator it(text.begin(), text.end(), cls), end;
         it != end; ++it) {
      names.insert((*it)[1]);
    }
    for (std::sregex_iterator it(text.begin(), text.end(), macro), end;
         it != end; ++it) {
      if ((*it)[2] != "NAME") {
        names.insert((*it)[2]);
      }
    }
  }
  names.erase("NAME");  // the class-declaring macros themselves
  names.erase("UnaryPrimitive");
  names.erase("BinaryPrimitive");
  return names;
}

// Primitive names reached by a graph.
void collect(const array& a, std::set<std::string>& seen,
             std::set<uintptr_t>& visited) {
  if (!visited.insert(a.id()).second || !a.has_primitive()) {
    return;
  }
  std::string n = a.primitive().name();
  seen.insert(n);
  for (auto& in : a.inputs()) {
    collect(in, seen, visited);
  }
}

}  // namespace

TEST(RulesCoverage, EveryPrimitiveIsCovered) {
  std::set<std::string> reached;
  for (auto& c : op_table()) {
    std::set<uintptr_t> visited;
    for (auto& o : c.f(case_inputs(c))) {
      collect(o, reached, visited);
    }
  }
  // Names as printed may carry parameters (Reduce prints Sum, Max...).
  for (auto n : {"Sum", "Prod", "Max", "Min", "All", "Any"}) {
    if (reached.count(n)) {
      reached.insert("Reduce");
    }
  }
  for (auto n : {"ArgMax", "ArgMin"}) {
    if (reached.count(n)) {
      reached.insert("ArgReduce");
    }
  }
  if (reached.count("NaNEqual")) {
    reached.insert("Equal");
  }
  // The header parser must see macro-declared and plain classes alike.
  auto declared = declared_primitives();
  for (auto n : {"Exp", "Add", "Matmul", "Reshape"}) {
    EXPECT_TRUE(declared.count(n)) << n << " not found in the headers";
  }
  std::vector<std::string> missing;
  for (auto& name : declared) {
    if (!reached.count(name)) {
      missing.push_back(name);
    }
  }
  EXPECT_TRUE(missing.empty()) << "primitives without an op-spec case: "
                               << ::testing::PrintToString(missing);
}

// Every node's `output_shapes` (used by shapeless compile) must agree with
// the shapes the op built.
TEST(RulesCoverage, OutputShapesMatch) {
  for (auto& c : op_table()) {
    SCOPED_TRACE(c.name);
    std::vector<array> stack;
    std::set<uintptr_t> visited;
    for (auto& o : c.f(case_inputs(c))) {
      stack.push_back(o);
    }
    while (!stack.empty()) {
      array a = stack.back();
      stack.pop_back();
      if (!visited.insert(a.id()).second || !a.has_primitive()) {
        continue;
      }
      auto shapes = a.primitive().output_shapes(a.inputs());
      auto outs = a.outputs();
      ASSERT_EQ(shapes.size(), outs.size()) << a.primitive().name();
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(shapes[i], outs[i].shape()) << a.primitive().name();
      }
      for (auto& in : a.inputs()) {
        stack.push_back(in);
      }
    }
  }
}

// export_function: every primitive of the table has an exported form (name
// and parameters) that rebuilds an equivalent primitive computing the same
// values. Load (reads a file) and CustomTransforms (host callables) have
// none; Compiled is exported as the primitives it fuses.
TEST(RulesCoverage, ExportRoundTrip) {
  std::set<std::string> checked;
  for (auto& c : op_table()) {
    SCOPED_TRACE(c.name);
    // Record every node first: evaluating detaches the graph.
    struct Node {
      std::shared_ptr<Primitive> prim;
      std::vector<array> inputs, outputs;
    };
    std::vector<Node> nodes;
    std::vector<array> stack;
    std::set<uintptr_t> visited;
    for (auto& o : c.f(case_inputs(c))) {
      stack.push_back(o);
    }
    while (!stack.empty()) {
      array a = stack.back();
      stack.pop_back();
      if (!visited.insert(a.id()).second || !a.has_primitive()) {
        continue;
      }
      for (auto& in : a.inputs()) {
        stack.push_back(in);
      }
      nodes.push_back({a.primitive_ptr(), a.inputs(), a.outputs()});
    }
    for (auto& node : nodes) {
      const Primitive& prim = *node.prim;
      std::string n = prim.name();
      if (n == "Load" || n == "CustomTransforms" || n == "Compiled") {
        EXPECT_THROW(export_primitive(prim), std::invalid_argument) << n;
        continue;
      }
      auto [name, args] = export_primitive(prim);
      auto p = import_primitive(name, args, prim.stream());
      EXPECT_STREQ(p->name(), prim.name());
      EXPECT_TRUE(p->is_equivalent(prim)) << name;
      EXPECT_TRUE(prim.is_equivalent(*p)) << name;
      EXPECT_EQ(export_primitive(*p).second.size(), args.size()) << name;
      std::vector<Shape> shapes;
      std::vector<Dtype> dtypes;
      for (auto& o : node.outputs) {
        shapes.push_back(o.shape());
        dtypes.push_back(o.dtype());
      }
      auto rebuilt = array::make_arrays(shapes, dtypes, p, node.inputs);
      for (size_t i = 0; i < rebuilt.size(); ++i) {
        EXPECT_TRUE(
            array_equal(rebuilt[i], node.outputs[i], true).item<bool>())
            << name << " output " << i;
      }
      checked.insert(name);
    }
  }
  // The table reaches most primitives; a few spot checks that it did.
  for (auto n : {"Reduce", "ArgReduce", "Log", "Convolution", "Gather",
                 "Scan", "FFT", "Arange"}) {
    EXPECT_TRUE(checked.count(n)) << n;
  }
}

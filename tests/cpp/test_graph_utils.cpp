// Printing arrays (values, like MLX/NumPy) and graphs (text and Graphviz).
#include <map>
#include <numeric>
#include <regex>
#include <sstream>

#include "test_inputs.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {

std::string str(const array& a) {
  std::ostringstream os;
  os << a;
  return os.str();
}

std::string graph_text(const std::vector<array>& outputs) {
  std::ostringstream os;
  print_graph(os, outputs);
  return os.str();
}

std::string dot_text(const std::vector<array>& outputs) {
  std::ostringstream os;
  export_to_dot(os, outputs);
  return os.str();
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos;
       p = text.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

// A primitive with two outputs (x + 1 and x - 1), to check siblings.
class PlusMinus : public Primitive {
 public:
  PlusMinus() : Primitive(to_stream({})) {}
  void eval_cpu(const std::vector<array>& in,
                std::vector<array>& out) override {
    // The tests only pass row-contiguous float32 inputs.
    const float* x = in[0].data<float>();
    for (int k = 0; k < 2; ++k) {
      out[k].set_data(out[k].nbytes());
      for (size_t i = 0; i < in[0].size(); ++i) {
        out[k].data<float>()[i] = x[i] + (k == 0 ? 1.0f : -1.0f);
      }
    }
  }
  // A test primitive outside the registry: no GPU kernel.
  void eval_gpu(const std::vector<array>&, std::vector<array>&) override {
    throw std::runtime_error("no gpu kernel");
  }
  const char* name() const override { return "PlusMinus"; }
};

std::vector<array> plus_minus(const array& x) {
  return array::make_arrays({x.shape(), x.shape()}, {float32, float32},
                            std::make_shared<PlusMinus>(), {x});
}

}  // namespace

TEST(PrintArray, Basics) {
  EXPECT_EQ(str(array({1, 2, 3})), "array([1, 2, 3], dtype=int32)");
  EXPECT_EQ(str(array({1.5f, 2.0f, 3.0f, 4.0f}, {2, 2})),
            "array([[1.5, 2],\n       [3, 4]], dtype=float32)");
  EXPECT_EQ(str(array({true, false})), "array([True, False], dtype=bool)");
  EXPECT_EQ(str(array({complex64_t(1, 2), complex64_t(3, -4),
                       complex64_t(-0.5f, 0)})),
            "array([1+2j, 3-4j, -0.5+0j], dtype=complex64)");
  EXPECT_EQ(str(array(3)), "array(3, dtype=int32)");
  EXPECT_EQ(str(array(true)), "array(True, dtype=bool)");
  EXPECT_EQ(str(array(0.5, float16)), "array(0.5, dtype=float16)");
  EXPECT_EQ(str(array({-1, 2}, int8)), "array([-1, 2], dtype=int8)");
  EXPECT_EQ(str(array({200, 7}, uint8)), "array([200, 7], dtype=uint8)");
  EXPECT_EQ(str(array({1.25, -3.0}, bfloat16)),
            "array([1.25, -3], dtype=bfloat16)");
  EXPECT_EQ(str(array({int64_t{1} << 40})),
            "array([1099511627776], dtype=int64)");
  EXPECT_EQ(str(array({1e-7f, NAN, INFINITY, -INFINITY, 123456789.0f})),
            "array([1e-07, nan, inf, -inf, 1.23457e+08], dtype=float32)");
  EXPECT_EQ(str(array({0.1, 2.5})), "array([0.1, 2.5], dtype=float64)");
  std::vector<float> none;
  EXPECT_EQ(str(array(none.begin(), {0}, float32)), "array([], dtype=float32)");
  EXPECT_EQ(str(array(none.begin(), {2, 0}, float32)),
            "array([[],\n       []], dtype=float32)");
}

TEST(PrintArray, HigherDimensionsAndLayouts) {
  std::vector<int> v(8);
  std::iota(v.begin(), v.end(), 0);
  EXPECT_EQ(str(array(v.begin(), {2, 2, 2})),
            "array([[[0, 1],\n"
            "        [2, 3]],\n"
            "       [[4, 5],\n"
            "        [6, 7]]], dtype=int32)");
  // Logical order whatever the layout; printing evaluates first.
  auto m = array({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(str(transpose(m)),
            "array([[1, 4],\n       [2, 5],\n       [3, 6]], dtype=int32)");
  EXPECT_EQ(str(broadcast_to(array({7, 8}), {2, 2})),
            "array([[7, 8],\n       [7, 8]], dtype=int32)");
  EXPECT_EQ(str(make_array(std::vector<double>{1, 2, 3, 4}, {2, 2}, int16,
                           Layout::Reversed)),
            "array([[1, 2],\n       [3, 4]], dtype=int16)");
  EXPECT_EQ(str(m * 2), "array([[2, 4, 6],\n       [8, 10, 12]], dtype=int32)");
  EXPECT_EQ(str(array({1, 2}, {1, 1, 1, 2})),
            "array([[[[1, 2]]]], dtype=int32)");
}

TEST(PrintArray, SummarizesAxesLongerThanSix) {
  std::vector<int> v(2000);
  std::iota(v.begin(), v.end(), 0);
  EXPECT_EQ(str(array(v.begin(), {2000})),
            "array([0, 1, 2, ..., 1997, 1998, 1999], dtype=int32)");
  // MLX: an axis of 7 or more is cut, whatever the total size; 6 is not.
  EXPECT_EQ(str(array(v.begin(), {7})),
            "array([0, 1, 2, ..., 4, 5, 6], dtype=int32)");
  EXPECT_EQ(str(array(v.begin(), {6})),
            "array([0, 1, 2, 3, 4, 5], dtype=int32)");
  // 2-D: rows and columns both cut to three at each end.
  std::string expected = "array([";
  auto row = [](int r) {
    int b = r * 30;
    std::ostringstream os;
    os << "[" << b << ", " << b + 1 << ", " << b + 2 << ", ..., " << b + 27
       << ", " << b + 28 << ", " << b + 29 << "]";
    return os.str();
  };
  const std::string sep = ",\n       ";
  expected += row(0) + sep + row(1) + sep + row(2) + sep + "..." + sep +
              row(37) + sep + row(38) + sep + row(39) + "], dtype=int32)";
  EXPECT_EQ(str(array(v.begin(), {40, 30})), expected);
  // Short axes of a large array are not cut (long ones are).
  EXPECT_EQ(str(array(v.begin(), {1000, 2})).substr(0, 45),
            "array([[0, 1],\n       [2, 3],\n       [4, 5],\n");
  // 3-D: blocks cut with a "..." block (no blank lines, as MLX).
  std::vector<int> w(1100);
  std::iota(w.begin(), w.end(), 0);
  auto s = str(array(w.begin(), {10, 10, 11}));
  const std::string head =
      "array([[[0, 1, 2, ..., 8, 9, 10],\n"
      "        [11, 12, 13, ..., 19, 20, 21],\n"
      "        [22, ";
  EXPECT_EQ(s.substr(0, head.size()), head);
  EXPECT_NE(s.find("        ...,\n        [77, 78, 79, ..., 85, 86, 87]"),
            std::string::npos);
  EXPECT_NE(s.find("329]],\n       ...,\n       [[770, 771, 772, ..."),
            std::string::npos);
  const std::string tail =
      ",\n        [1089, 1090, 1091, ..., 1097, 1098, 1099]]], dtype=int32)";
  EXPECT_EQ(s.substr(s.size() - tail.size()), tail);
  // One per printed row (6 blocks of 6), one per block, one between blocks.
  EXPECT_EQ(count(s, "..."), 36 + 6 + 1);
}

TEST(PrintArray, Shape) {
  std::ostringstream os;
  os << Shape{2, 3} << " " << Shape{} << " " << Shape{0};
  EXPECT_EQ(os.str(), "(2,3) () (0)");
}

TEST(PrintGraph, SmallGraphExactText) {
  auto x = array({1.0f, 2.0f, 3.0f});
  auto y = array({4.0f, 5.0f, 6.0f});
  auto z = exp(x + y) * x;
  auto t = astype(sum(z, 0, true), float64);
  EXPECT_EQ(graph_text({t}),
            "in0 [3]: float32\n"
            "in1 [3]: float32\n"
            "a0 [3]: float32 = Add(in0, in1)\n"
            "a1 [3]: float32 = Exp(a0)\n"
            "a2 [3]: float32 = Multiply(a1, in0)\n"
            "a3 [1]: float32 = Sum(a2)\n"
            "a4 [1]: float64 = AsType(a3)\n");
  // Several outputs share the nodes they have in common.
  EXPECT_EQ(graph_text({z, x + y}),
            "in0 [3]: float32\n"
            "in1 [3]: float32\n"
            "a0 [3]: float32 = Add(in0, in1)\n"
            "a1 [3]: float32 = Exp(a0)\n"
            "a2 [3]: float32 = Multiply(a1, in0)\n"
            "a3 [3]: float32 = Add(in0, in1)\n");
  // Evaluated arrays have no graph left: they are leaves.
  z.eval();
  EXPECT_EQ(graph_text({sqrt(z)}),
            "in0 [3]: float32\na0 [3]: float32 = Sqrt(in0)\n");
  EXPECT_EQ(graph_text({x}), "in0 [3]: float32\n");
}

TEST(PrintGraph, SiblingsAndSharing) {
  auto x = array({1.0f, 2.0f});
  auto pm = plus_minus(x);
  auto out = pm[0] * pm[1] + pm[0];
  EXPECT_EQ(graph_text({out}),
            "in0 [2]: float32\n"
            "a0 [2]: float32, a1 [2]: float32 = PlusMinus(in0)\n"
            "a2 [2]: float32 = Multiply(a0, a1)\n"
            "a3 [2]: float32 = Add(a2, a0)\n");
  // Asking for both siblings prints their primitive once.
  EXPECT_EQ(graph_text({pm[1], pm[0]}),
            "in0 [2]: float32\n"
            "a0 [2]: float32, a1 [2]: float32 = PlusMinus(in0)\n");
  expect_close(out, {2 * 0 + 2, 3 * 1 + 3});
}

TEST(PrintGraph, EveryNodeOnceInTopologicalOrder) {
  // A diamond-rich graph: every node used several times.
  auto a = array({1.0f, 2.0f});
  auto b = a * 2.0f;
  auto c = b + a;
  auto d = c * b;
  auto e = exp(d) + sin(c) * d - b;
  auto text = graph_text({e, d});
  std::istringstream lines(text);
  std::string line;
  std::map<std::string, int> defined;
  int n = 0;
  std::regex def("^((?:in|a)\\d+) \\[[0-9,]*\\]: \\w+(?: = \\w+\\((.*)\\))?$");
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, def)) << line;
    EXPECT_EQ(defined.count(m[1]), 0u) << "defined twice: " << m[1];
    // Inputs are defined on earlier lines.
    std::string args = m[2];
    std::regex name("(?:in|a)\\d+");
    for (std::sregex_iterator it(args.begin(), args.end(), name), end;
         it != end; ++it) {
      EXPECT_EQ(defined.count(it->str()), 1u)
          << it->str() << " used before its definition in: " << line;
    }
    defined[m[1]] = n++;
  }
  EXPECT_EQ(count(text, " = Exp("), 1);
  EXPECT_EQ(count(text, " = Sin("), 1);
  EXPECT_EQ(count(text, " = Subtract("), 1);
  EXPECT_EQ(count(text, " = Add("), 2);
}

TEST(PrintGraph, LongChainsDoNotOverflowTheStack) {
  auto x = array({1.0f});
  auto y = x;
  for (int i = 0; i < 100000; ++i) {
    y = negative(y);
  }
  auto text = graph_text({y});
  EXPECT_EQ(count(text, "\n"), 100001);
  EXPECT_EQ(text.substr(0, 40), "in0 [1]: float32\na0 [1]: float32 = Negat");
  EXPECT_NE(text.find("a99999 [1]: float32 = Negative(a99998)\n"),
            std::string::npos);
  auto dot = dot_text({y});
  EXPECT_EQ(count(dot, "-> p"), 100000);
}

TEST(ExportDot, SmallGraphExactText) {
  auto x = array({1.0f, 2.0f, 3.0f});
  auto y = array({1, 2, 3});
  auto z = exp(x) + astype(y, float32);
  EXPECT_EQ(dot_text({z}),
            "digraph {\n"
            "  in0;\n"
            "  p0 [label=\"Exp\", shape=box];\n"
            "  in0 -> p0;\n"
            "  a0;\n"
            "  p0 -> a0;\n"
            "  in1;\n"
            "  p1 [label=\"AsType\", shape=box];\n"
            "  in1 -> p1;\n"
            "  a1;\n"
            "  p1 -> a1;\n"
            "  p2 [label=\"Add\", shape=box];\n"
            "  a0 -> p2;\n"
            "  a1 -> p2;\n"
            "  a2;\n"
            "  p2 -> a2;\n"
            "}\n");
}

TEST(ExportDot, SiblingsShareOnePrimitiveNode) {
  auto x = array({1.0f, 2.0f}, {1, 2});
  auto pm = plus_minus(x);
  auto out = pm[0] - pm[1];
  auto dot = dot_text({out, pm[1]});
  EXPECT_EQ(dot.substr(0, 10), "digraph {\n");
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_EQ(count(dot, "[label=\"PlusMinus\", shape=box]"), 1);
  EXPECT_EQ(count(dot, "p0 -> a0;"), 1);
  EXPECT_EQ(count(dot, "p0 -> a1;"), 1);
  EXPECT_EQ(count(dot, "in0 -> p0;"), 1);
  EXPECT_EQ(count(dot, "a0 -> p1;"), 1);
  EXPECT_EQ(count(dot, "a1 -> p1;"), 1);
  // Every array node is declared exactly once, by name only (MLX labels
  // the primitives, not the arrays).
  EXPECT_EQ(count(dot, "  in0;\n"), 1);
  EXPECT_EQ(count(dot, "  a0;\n"), 1);
  EXPECT_EQ(count(dot, "  a1;\n"), 1);
  EXPECT_EQ(count(dot, "  a2;\n"), 1);
  EXPECT_EQ(count(dot, "float32"), 0);
  // Every statement line is a node or an edge.
  std::istringstream lines(dot);
  std::string line;
  std::getline(lines, line);
  std::regex stmt(
      "^  (?:\\w+|\\w+ \\[label=\"[^\"]*\", shape=box\\]|\\w+ -> \\w+);$");
  while (std::getline(lines, line) && line != "}") {
    EXPECT_TRUE(std::regex_match(line, stmt)) << line;
  }
}

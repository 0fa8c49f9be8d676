#include "fluxion/graph_utils.h"

#include <atomic>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fluxion/dtype_dispatch.h"
#include "fluxion/primitive.h"
#include "fluxion/transforms.h"

namespace fluxion {

namespace {

// MLX's summary: an axis of more than 2 * kEdgeItems entries shows only
// kEdgeItems entries at each end.
constexpr int kEdgeItems = 3;

std::atomic<int> g_precision{-1};
// Width of "array(", which nested rows are aligned under.
constexpr int kIndent = 6;

template <typename T>
void print_element(std::ostream& os, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "True" : "False");
  } else if constexpr (std::is_same_v<T, int8_t> ||
                       std::is_same_v<T, uint8_t>) {
    os << static_cast<int>(v);  // not as a character
  } else if constexpr (is_half_v<T>) {
    os << static_cast<float>(v);
  } else if constexpr (is_complex_v<T>) {
    float im = v.imag();
    os << v.real() << (std::signbit(im) ? "-" : "+") << std::abs(im) << "j";
  } else {
    os << v;
  }
}

// Floating-point output in the current precision (scoped to one print).
class FloatFormat {
 public:
  explicit FloatFormat(std::ostream& os)
      : os_(os), flags_(os.flags()), precision_(os.precision()) {
    int p = g_precision.load();
    if (p >= 0) {
      os.setf(std::ios::fixed, std::ios::floatfield);
      os.precision(p);
    } else {
      os.unsetf(std::ios::floatfield);
      os.precision(6);
    }
  }
  ~FloatFormat() {
    os_.flags(flags_);
    os_.precision(precision_);
  }

 private:
  std::ostream& os_;
  std::ios::fmtflags flags_;
  std::streamsize precision_;
};

template <typename T>
void print_subarray(std::ostream& os, const array& a, const T* data,
                    int64_t offset, int dim) {
  const int n = a.shape(dim);
  const int64_t st = a.strides()[dim];
  const bool last = dim == a.ndim() - 1;
  // Between rows: a newline (MLX: no blank lines between the blocks of 3-D
  // and higher arrays), then alignment under the bracket.
  std::string sep = last ? ", " : ",\n" + std::string(kIndent + dim + 1, ' ');
  os << "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) {
      os << sep;
    }
    if (n > 2 * kEdgeItems && i == kEdgeItems) {
      os << "..." << sep;
      i = n - kEdgeItems;
    }
    if (last) {
      print_element(os, data[offset + i * st]);
    } else {
      print_subarray(os, a, data, offset + i * st, dim + 1);
    }
  }
  os << "]";
}

// Post-order (inputs first) over the graph, each node once; siblings count
// as one node, visited through the first of them reached. Iterative, so
// long chains cannot overflow the stack.
std::vector<array> topological_order(const std::vector<array>& outputs) {
  std::vector<array> order;
  std::unordered_set<uintptr_t> seen;
  std::vector<std::pair<array, size_t>> stack;
  auto visit = [&](const array& a) {
    if (seen.insert(a.id()).second) {
      for (auto& s : a.siblings()) {
        seen.insert(s.id());
      }
      stack.emplace_back(a, 0);
    }
  };
  for (auto& o : outputs) {
    visit(o);
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      if (next < a.inputs().size()) {
        visit(a.inputs()[next++]);
        continue;
      }
      order.push_back(std::move(a));
      stack.pop_back();
    }
  }
  return order;
}

// Names arrays in order of appearance: "in<k>" for leaves (no primitive),
// "a<k>" for computed nodes.
class Namer {
 public:
  Namer() = default;
  explicit Namer(const std::unordered_map<uintptr_t, std::string>& given)
      : names_(given) {}
  const std::string& name(const array& a) {
    auto it = names_.find(a.id());
    if (it != names_.end()) {
      return it->second;
    }
    std::string n = a.has_primitive() ? "a" + std::to_string(nodes_++)
                                      : "in" + std::to_string(leaves_++);
    return names_.emplace(a.id(), std::move(n)).first->second;
  }

 private:
  std::unordered_map<uintptr_t, std::string> names_;
  int nodes_ = 0;
  int leaves_ = 0;
};

std::string describe(const array& a) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < a.ndim(); ++i) {
    os << (i ? "," : "") << a.shape(i);
  }
  os << "]: " << a.dtype();
  return os.str();
}

std::string primitive_text(const array& a) {
  std::ostringstream os;
  a.primitive().print(os);
  return os.str();
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

}  // namespace

PrintOptions get_printoptions() { return {g_precision.load()}; }

void set_printoptions(const PrintOptions& options) {
  if (options.precision < -1) {
    throw std::invalid_argument(
        "[set_printoptions] precision must be -1 (default) or non-negative; "
        "got " +
        std::to_string(options.precision) + ".");
  }
  g_precision.store(options.precision);
}

std::ostream& operator<<(std::ostream& os, array a) {
  a.eval();
  FloatFormat format(os);
  os << "array(";
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = a.data<T>();
    if (a.ndim() == 0) {
      print_element(os, data[0]);
    } else {
      print_subarray(os, a, data, 0, 0);
    }
  });
  return os << ", dtype=" << a.dtype() << ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) {
    os << (i ? "," : "") << s[i];
  }
  return os << ")";
}

void print_graph(std::ostream& os, const std::vector<array>& outputs) {
  Namer namer;
  for (auto& a : topological_order(outputs)) {
    if (!a.has_primitive()) {
      os << namer.name(a) << " " << describe(a) << "\n";
      continue;
    }
    // Name the inputs first: they come earlier in the order anyway.
    std::string args;
    for (auto& in : a.inputs()) {
      args += (args.empty() ? "" : ", ") + namer.name(in);
    }
    bool first = true;
    for (auto& o : a.outputs()) {
      os << (first ? "" : ", ") << namer.name(o) << " " << describe(o);
      first = false;
    }
    os << " = " << primitive_text(a) << "(" << args << ")\n";
  }
}

void export_to_dot(std::ostream& os, const std::vector<array>& outputs,
                   const std::unordered_map<uintptr_t, std::string>& names) {
  Namer namer(names);
  int prims = 0;
  os << "digraph {\n";
  for (auto& a : topological_order(outputs)) {
    // Arrays are named, not labelled (MLX's export_to_dot labels only the
    // primitives; print_graph shows shapes and dtypes).
    auto node = [&](const array& x) {
      os << "  " << namer.name(x) << ";\n";
    };
    if (!a.has_primitive()) {
      node(a);
      continue;
    }
    std::string p = "p" + std::to_string(prims++);
    os << "  " << p << " [label=\"" << dot_escape(primitive_text(a))
       << "\", shape=box];\n";
    for (auto& in : a.inputs()) {
      os << "  " << namer.name(in) << " -> " << p << ";\n";
    }
    for (auto& o : a.outputs()) {
      node(o);
      os << "  " << p << " -> " << namer.name(o) << ";\n";
    }
  }
  os << "}\n";
}

}  // namespace fluxion

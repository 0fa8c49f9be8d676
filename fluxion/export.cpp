#include "fluxion/export.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "fluxion/compile.h"
#include "fluxion/compiled.h"
#include "fluxion/fluxion.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/custom_kernel.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/transforms.h"

namespace fluxion {

namespace {

constexpr char kMagic[4] = {'F', 'X', 'F', 'N'};
constexpr uint32_t kVersion = 1;

[[noreturn]] void export_error(const std::string& what) {
  throw std::invalid_argument("[export_function] " + what);
}

// --- primitive factories ---

using Args = std::vector<PrimitiveArg>;
using Factory = std::function<std::shared_ptr<Primitive>(Stream, const Args&)>;

[[noreturn]] void bad_args(const std::string& name) {
  throw std::invalid_argument("[import_function] Invalid parameters for the "
                              "primitive " +
                              name + " (a corrupt or foreign file?).");
}

template <typename T>
const T& get(const Args& a, size_t i, const std::string& name) {
  if (i >= a.size() || !std::holds_alternative<T>(a[i])) {
    bad_args(name);
  }
  return std::get<T>(a[i]);
}

int64_t i64(const Args& a, size_t i, const std::string& n) {
  return get<int64_t>(a, i, n);
}
int i32(const Args& a, size_t i, const std::string& n) {
  return static_cast<int>(get<int64_t>(a, i, n));
}
bool b(const Args& a, size_t i, const std::string& n) {
  return get<bool>(a, i, n);
}
double f64(const Args& a, size_t i, const std::string& n) {
  return get<double>(a, i, n);
}
Dtype dt(const Args& a, size_t i, const std::string& n) {
  return get<Dtype>(a, i, n);
}
std::vector<int> ints(const Args& a, size_t i, const std::string& n) {
  auto& v = get<std::vector<int64_t>>(a, i, n);
  return std::vector<int>(v.begin(), v.end());
}
Shape shp(const Args& a, size_t i, const std::string& n) {
  auto& v = get<std::vector<int64_t>>(a, i, n);
  return Shape(v.begin(), v.end());
}

// Interned op names for the primitives that keep a `const char*` tag.
const char* interned(const std::string& s) {
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lk(mu);
  return names.insert(s).first->c_str();
}

template <typename T>
void plain(std::unordered_map<std::string, Factory>& f, const char* name) {
  f[name] = [](Stream s, const Args&) { return std::make_shared<T>(s); };
}

const std::unordered_map<std::string, Factory>& factories() {
  static const auto table = [] {
    std::unordered_map<std::string, Factory> f;
#define FX_PLAIN(T) plain<T>(f, #T);
    FX_PLAIN(Abs)
    FX_PLAIN(Negative)
    FX_PLAIN(Sign)
    FX_PLAIN(Exp)
    FX_PLAIN(Expm1)
    FX_PLAIN(Log1p)
    FX_PLAIN(Sqrt)
    FX_PLAIN(Rsqrt)
    FX_PLAIN(Square)
    FX_PLAIN(Reciprocal)
    FX_PLAIN(Sin)
    FX_PLAIN(Cos)
    FX_PLAIN(Tan)
    FX_PLAIN(ArcSin)
    FX_PLAIN(ArcCos)
    FX_PLAIN(ArcTan)
    FX_PLAIN(Sinh)
    FX_PLAIN(Cosh)
    FX_PLAIN(Tanh)
    FX_PLAIN(ArcSinh)
    FX_PLAIN(ArcCosh)
    FX_PLAIN(ArcTanh)
    FX_PLAIN(Sigmoid)
    FX_PLAIN(Erf)
    FX_PLAIN(ErfInv)
    FX_PLAIN(Floor)
    FX_PLAIN(Ceil)
    FX_PLAIN(Round)
    FX_PLAIN(LogicalNot)
    FX_PLAIN(IsNan)
    FX_PLAIN(IsInf)
    FX_PLAIN(IsFinite)
    FX_PLAIN(Conjugate)
    FX_PLAIN(Real)
    FX_PLAIN(Imag)
    FX_PLAIN(StopGradient)
    FX_PLAIN(Copy)
    FX_PLAIN(Add)
    FX_PLAIN(Subtract)
    FX_PLAIN(Multiply)
    FX_PLAIN(Divide)
    FX_PLAIN(FloorDivide)
    FX_PLAIN(Remainder)
    FX_PLAIN(Power)
    FX_PLAIN(Maximum)
    FX_PLAIN(Minimum)
    FX_PLAIN(ArcTan2)
    FX_PLAIN(LogAddExp)
    FX_PLAIN(NotEqual)
    FX_PLAIN(Less)
    FX_PLAIN(LessEqual)
    FX_PLAIN(Greater)
    FX_PLAIN(GreaterEqual)
    FX_PLAIN(LogicalAnd)
    FX_PLAIN(LogicalOr)
    FX_PLAIN(BitwiseAnd)
    FX_PLAIN(BitwiseOr)
    FX_PLAIN(BitwiseXor)
    FX_PLAIN(LeftShift)
    FX_PLAIN(RightShift)
    FX_PLAIN(Matmul)
    FX_PLAIN(Select)
#undef FX_PLAIN
    plain<linalg::Inverse>(f, "Inverse");
    plain<linalg::Solve>(f, "Solve");
    plain<linalg::Cholesky>(f, "Cholesky");
    plain<linalg::QRF>(f, "QRF");
    plain<linalg::LUF>(f, "LUF");
    // MLX's "Log" carries its base: 0 two, 1 ten, 2 e.
    f["Log"] = [](Stream s, const Args& a) -> std::shared_ptr<Primitive> {
      int base = a.empty() ? 2 : i32(a, 0, "Log");
      if (base == 0) {
        return std::make_shared<Log2>(s);
      }
      if (base == 1) {
        return std::make_shared<Log10>(s);
      }
      return std::make_shared<Log>(s);
    };
    // The name carries equal_nan (MLX's Equal and NaNEqual).
    f["Equal"] = [](Stream s, const Args&) {
      return std::make_shared<Equal>(s, false);
    };
    f["NaNEqual"] = [](Stream s, const Args&) {
      return std::make_shared<Equal>(s, true);
    };
    f["Convolution"] = [](Stream s, const Args& a) {
      const std::string n = "Convolution";
      return std::make_shared<Convolution>(s, ints(a, 0, n), ints(a, 1, n),
                                           ints(a, 2, n), ints(a, 3, n),
                                           ints(a, 4, n), i32(a, 5, n),
                                           b(a, 6, n));
    };
    f["Arange"] = [](Stream s, const Args& a) {
      const std::string n = "Arange";
      return std::make_shared<Arange>(s, f64(a, 0, n), f64(a, 1, n),
                                      f64(a, 2, n), dt(a, 3, n));
    };
    f["Depends"] = [](Stream s, const Args& a) {
      return std::make_shared<Depends>(s, i32(a, 0, "Depends"));
    };
    f["SearchSorted"] = [](Stream s, const Args& a) {
      return std::make_shared<SearchSorted>(s, b(a, 0, "SearchSorted"));
    };
    f["Hadamard"] = [](Stream s, const Args& a) {
      return std::make_shared<Hadamard>(s, f64(a, 0, "Hadamard"),
                                        b(a, 1, "Hadamard"));
    };
    f["AsStrided"] = [](Stream s, const Args& a) {
      const std::string n = "AsStrided";
      auto& st = get<std::vector<int64_t>>(a, 1, n);
      return std::make_shared<AsStrided>(s, shp(a, 0, n),
                                         Strides(st.begin(), st.end()),
                                         static_cast<size_t>(i64(a, 2, n)));
    };
    f["View"] = [](Stream s, const Args& a) {
      return std::make_shared<View>(s, dt(a, 0, "View"));
    };
    f["Contiguous"] = [](Stream s, const Args& a) {
      return std::make_shared<Contiguous>(s, b(a, 0, "Contiguous"));
    };
    f["LayerNorm"] = [](Stream s, const Args& a) {
      const std::string n = "LayerNorm";
      return std::make_shared<fast::LayerNorm>(s, static_cast<float>(f64(a, 0, n)),
                                         b(a, 1, n), b(a, 2, n));
    };
    f["RMSNorm"] = [](Stream s, const Args& a) {
      const std::string n = "RMSNorm";
      return std::make_shared<fast::RMSNorm>(s, static_cast<float>(f64(a, 0, n)),
                                       b(a, 1, n));
    };
    f["NormVJP"] = [](Stream s, const Args& a) {
      const std::string n = "NormVJP";
      return std::make_shared<fast::NormVJP>(
          s, static_cast<float>(f64(a, 0, n)), b(a, 1, n), b(a, 2, n),
          b(a, 3, n));
    };
    f["RoPE"] = [](Stream s, const Args& a) {
      const std::string n = "RoPE";
      return std::make_shared<fast::RoPE>(s, i32(a, 0, n), b(a, 1, n),
                                    static_cast<float>(f64(a, 2, n)),
                                    static_cast<float>(f64(a, 3, n)),
                                    b(a, 4, n), b(a, 5, n));
    };
    f["ScaledDotProductAttention"] = [](Stream s, const Args& a) {
      const std::string n = "ScaledDotProductAttention";
      int mask = i32(a, 2, n);
      if (mask < 0 || mask > 2) {
        bad_args(n);
      }
      // Files written before the logsumexp output have four arguments.
      return std::make_shared<fast::ScaledDotProductAttention>(
          s, static_cast<float>(f64(a, 0, n)), b(a, 1, n),
          static_cast<fast::ScaledDotProductAttention::MaskKind>(mask),
          b(a, 3, n), a.size() > 4 && b(a, 4, n));
    };
    f["ScaledDotProductAttentionVJP"] = [](Stream s, const Args& a) {
      const std::string n = "ScaledDotProductAttentionVJP";
      return std::make_shared<fast::ScaledDotProductAttentionVJP>(
          s, static_cast<float>(f64(a, 0, n)), b(a, 1, n));
    };
    f["CustomKernel"] = [](Stream s, const Args& a) {
      return fast::custom_kernel_from_state(s, a);
    };
    f["FFT"] = [](Stream s, const Args& a) {
      const std::string n = "FFT";
      return std::make_shared<FFT>(s, ints(a, 0, n), b(a, 1, n), b(a, 2, n),
                                   i32(a, 3, n));
    };
    f["Gather"] = [](Stream s, const Args& a) {
      const std::string n = "Gather";
      return std::make_shared<Gather>(s, ints(a, 0, n), shp(a, 1, n));
    };
    f["Scatter"] = [](Stream s, const Args& a) {
      const std::string n = "Scatter";
      int r = i32(a, 0, n);
      if (r < 0 || r > 4) {
        bad_args(n);
      }
      return std::make_shared<Scatter>(
          s, static_cast<Scatter::ReduceType>(r), ints(a, 1, n));
    };
    f["GatherAxis"] = [](Stream s, const Args& a) {
      const std::string n = "GatherAxis";
      return std::make_shared<GatherAxis>(
          s, i32(a, 0, n), interned(get<std::string>(a, 1, n)));
    };
    f["ScatterAxis"] = [](Stream s, const Args& a) {
      const std::string n = "ScatterAxis";
      int r = i32(a, 1, n);
      if (r < 0 || r > 1) {
        bad_args(n);
      }
      return std::make_shared<ScatterAxis>(
          s, i32(a, 0, n), static_cast<ScatterAxis::ReduceType>(r),
          interned(get<std::string>(a, 2, n)));
    };
    f["AddMM"] = [](Stream s, const Args& a) {
      const std::string n = "AddMM";
      return std::make_shared<AddMM>(s, static_cast<float>(f64(a, 0, n)),
                                     static_cast<float>(f64(a, 1, n)));
    };
    f["SolveTriangular"] = [](Stream s, const Args& a) {
      return std::make_shared<linalg::SolveTriangular>(s, b(a, 0, "SolveTriangular"));
    };
    f["SVD"] = [](Stream s, const Args& a) {
      return std::make_shared<linalg::SVD>(s, b(a, 0, "SVD"));
    };
    f["Eigh"] = [](Stream s, const Args& a) {
      return std::make_shared<linalg::Eigh>(s, b(a, 0, "Eigh"), b(a, 1, "Eigh"));
    };
    f["Eig"] = [](Stream s, const Args& a) {
      return std::make_shared<linalg::Eig>(s, b(a, 0, "Eig"));
    };
    f["AsType"] = [](Stream s, const Args& a) {
      return std::make_shared<AsType>(s, dt(a, 0, "AsType"));
    };
    f["QuantizedMatmul"] = [](Stream s, const Args& a) {
      const std::string n = "QuantizedMatmul";
      int m = i32(a, 3, n);
      if (m < 0 || m > 3) {
        bad_args(n);
      }
      return std::make_shared<QuantizedMatmul>(
          s, i32(a, 0, n), i32(a, 1, n), b(a, 2, n),
          static_cast<QuantizationMode>(m));
    };
    f["RandomBits"] = [](Stream s, const Args& a) {
      const std::string n = "RandomBits";
      return std::make_shared<random::RandomBits>(s, shp(a, 0, n),
                                                  i32(a, 1, n));
    };
    f["Reduce"] = [](Stream s, const Args& a) {
      const std::string n = "Reduce";
      int t = i32(a, 0, n);
      if (t < 0 || t > 5) {
        bad_args(n);
      }
      return std::make_shared<Reduce>(s, static_cast<Reduce::ReduceType>(t),
                                      ints(a, 1, n), dt(a, 2, n));
    };
    f["NumberOfElements"] = [](Stream s, const Args& a) {
      const std::string n = "NumberOfElements";
      return std::make_shared<NumberOfElements>(s, ints(a, 0, n), dt(a, 1, n));
    };
    f["ArgReduce"] = [](Stream s, const Args& a) {
      const std::string n = "ArgReduce";
      int t = i32(a, 0, n);
      if (t < 0 || t > 1) {
        bad_args(n);
      }
      return std::make_shared<ArgReduce>(
          s, static_cast<ArgReduce::ReduceType>(t), i32(a, 1, n));
    };
    f["Reshape"] = [](Stream s, const Args& a) {
      const std::string n = "Reshape";
      if (a.size() == 1) {
        return std::make_shared<Reshape>(s, shp(a, 0, n));
      }
      int kind = i32(a, 1, n);
      if (kind < ReshapeRule::Requested || kind > ReshapeRule::Unflatten) {
        bad_args(n);
      }
      ReshapeRule rule{static_cast<ReshapeRule::Kind>(kind), shp(a, 2, n),
                       i32(a, 3, n), i32(a, 4, n)};
      return std::make_shared<Reshape>(s, shp(a, 0, n), std::move(rule));
    };
    f["Transpose"] = [](Stream s, const Args& a) {
      return std::make_shared<Transpose>(s, ints(a, 0, "Transpose"));
    };
    f["Broadcast"] = [](Stream s, const Args& a) {
      return std::make_shared<Broadcast>(s, shp(a, 0, "Broadcast"));
    };
    f["ExpandDims"] = [](Stream s, const Args& a) {
      return std::make_shared<ExpandDims>(s, ints(a, 0, "ExpandDims"));
    };
    f["Squeeze"] = [](Stream s, const Args& a) {
      return std::make_shared<Squeeze>(s, ints(a, 0, "Squeeze"));
    };
    f["Slice"] = [](Stream s, const Args& a) {
      const std::string n = "Slice";
      return std::make_shared<Slice>(s, shp(a, 0, n), shp(a, 1, n),
                                     shp(a, 2, n));
    };
    f["SliceUpdate"] = [](Stream s, const Args& a) {
      const std::string n = "SliceUpdate";
      return std::make_shared<SliceUpdate>(s, shp(a, 0, n), shp(a, 1, n),
                                           shp(a, 2, n));
    };
    f["Concatenate"] = [](Stream s, const Args& a) {
      return std::make_shared<Concatenate>(s, i32(a, 0, "Concatenate"));
    };
    f["Pad"] = [](Stream s, const Args& a) {
      const std::string n = "Pad";
      return std::make_shared<Pad>(s, ints(a, 0, n), shp(a, 1, n),
                                   shp(a, 2, n));
    };
    f["Sort"] = [](Stream s, const Args& a) {
      return std::make_shared<Sort>(s, i32(a, 0, "Sort"));
    };
    f["ArgSort"] = [](Stream s, const Args& a) {
      return std::make_shared<ArgSort>(s, i32(a, 0, "ArgSort"));
    };
    f["Partition"] = [](Stream s, const Args& a) {
      return std::make_shared<Partition>(s, i32(a, 0, "Partition"),
                                         i32(a, 1, "Partition"));
    };
    f["ArgPartition"] = [](Stream s, const Args& a) {
      return std::make_shared<ArgPartition>(s, i32(a, 0, "ArgPartition"),
                                            i32(a, 1, "ArgPartition"));
    };
    f["Softmax"] = [](Stream s, const Args&) {
      return std::make_shared<Softmax>(s);
    };
    f["Scan"] = [](Stream s, const Args& a) {
      const std::string n = "Scan";
      int t = i32(a, 0, n);
      if (t < 0 || t > 4) {
        bad_args(n);
      }
      return std::make_shared<Scan>(s, static_cast<Scan::ReduceType>(t),
                                    i32(a, 1, n), b(a, 2, n), b(a, 3, n));
    };
    return f;
  }();
  return table;
}

// --- flattening a traced tape ---

struct Flattener {
  detail::Ir out;
  // Concrete (lazy) arrays of values that depend on no input.
  std::vector<std::optional<array>> concrete;
  std::vector<bool> depends;

  int add_value(const Shape& shape, Dtype dtype, std::optional<array> c,
                bool dep) {
    out.values.push_back({shape, dtype, c});
    concrete.push_back(c);
    depends.push_back(dep);
    return static_cast<int>(out.values.size()) - 1;
  }

  bool exportable(const Primitive& p) {
    try {
      export_primitive(p);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  }

  // Appends the nodes of `ir` with its inputs bound to `bound` (values of
  // `out`); returns the values of its outputs.
  std::vector<int> inline_ir(const detail::Ir& ir,
                             const std::vector<int>& bound) {
    std::vector<int> map(ir.values.size(), -1);
    for (size_t i = 0; i < ir.inputs.size(); ++i) {
      map[ir.inputs[i]] = bound[i];
    }
    for (size_t v = 0; v < ir.values.size(); ++v) {
      if (map[v] < 0 && ir.values[v].constant) {
        map[v] = add_value(ir.values[v].shape, ir.values[v].dtype,
                           ir.values[v].constant, false);
      }
    }
    for (auto& node : ir.nodes) {
      std::vector<int> ins;
      for (int v : node.inputs) {
        ins.push_back(map.at(v));
      }
      auto outs = add_node(node, ir, ins);
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        map[node.outputs[k]] = outs[k];
      }
    }
    std::vector<int> result;
    for (int v : ir.outputs) {
      result.push_back(map.at(v));
    }
    return result;
  }

  std::vector<int> add_node(const detail::IrNode& node, const detail::Ir& ir,
                            const std::vector<int>& ins) {
    if (auto* c = dynamic_cast<const Compiled*>(node.prim.get())) {
      return inline_ir(c->tape(), ins);
    }
    bool dep = false, all_concrete = true;
    for (int v : ins) {
      dep = dep || depends[v];
      all_concrete = all_concrete && concrete[v].has_value();
    }
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (int v : node.outputs) {
      shapes.push_back(ir.values[v].shape);
      dtypes.push_back(ir.values[v].dtype);
    }
    std::vector<array> lazy;
    if (!dep && all_concrete) {
      std::vector<array> in_arrays;
      for (int v : ins) {
        in_arrays.push_back(*concrete[v]);
      }
      lazy = array::make_arrays(shapes, dtypes, node.prim, in_arrays);
    }
    if (!exportable(*node.prim)) {
      if (dep || lazy.empty()) {
        export_error("Cannot export the primitive " +
                     std::string(node.prim->name()) +
                     ": it has no exported form (custom_function and "
                     "custom_vjp rules are host code).");
      }
      // Depends on no input: evaluate it now and keep its values.
      eval(lazy);
      std::vector<int> outs;
      for (size_t k = 0; k < lazy.size(); ++k) {
        outs.push_back(add_value(shapes[k], dtypes[k], lazy[k], false));
      }
      return outs;
    }
    detail::IrNode n{node.prim, ins, {}};
    for (size_t k = 0; k < shapes.size(); ++k) {
      int v = add_value(shapes[k], dtypes[k], std::nullopt, dep);
      if (!lazy.empty()) {
        concrete[v] = lazy[k];
      }
      n.outputs.push_back(v);
    }
    out.nodes.push_back(n);
    return n.outputs;
  }
};

// --- binary files ---

class BinWriter {
 public:
  template <typename T>
  void pod(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    buf_.append(s);
  }
  void bytes(const char* p, size_t n) { buf_.append(p, n); }
  void shape(const Shape& s) {
    pod<uint32_t>(s.size());
    for (auto d : s) {
      pod<int32_t>(d);
    }
  }
  void dtype(Dtype t) { pod<uint8_t>(static_cast<uint8_t>(t.val)); }
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

class BinReader {
 public:
  BinReader(std::string data, std::string path)
      : data_(std::move(data)), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("[import_function] " + what + " in '" +
                                path_ + "'.");
  }
  template <typename T>
  T pod() {
    if (pos_ + sizeof(T) > data_.size()) {
      fail("Truncated file");
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    uint64_t n = pod<uint64_t>();
    if (n > data_.size() - pos_) {
      fail("Truncated file");
    }
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  const char* bytes(uint64_t n) {
    if (n > data_.size() - pos_) {
      fail("Truncated file");
    }
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  Shape shape() {
    uint32_t nd = pod<uint32_t>();
    if (nd > 64) {
      fail("Corrupt shape");
    }
    Shape s(nd);
    for (auto& d : s) {
      d = pod<int32_t>();
      if (d < 0) {
        fail("Corrupt shape");
      }
    }
    return s;
  }
  Dtype dtype() {
    static const Dtype all[] = {bool_,   uint8,   uint16,  uint32,  uint64,
                                int8,    int16,   int32,   int64,   float16,
                                float32, float64, bfloat16, complex64};
    uint8_t v = pod<uint8_t>();
    for (auto t : all) {
      if (static_cast<uint8_t>(t.val) == v) {
        return t;
      }
    }
    fail("Corrupt dtype " + std::to_string(v));
  }
  uint32_t count(uint32_t limit) {
    uint32_t n = pod<uint32_t>();
    if (n > limit) {
      fail("Corrupt count");
    }
    return n;
  }

 private:
  std::string data_;
  std::string path_;
  size_t pos_ = 0;
};

enum ArgTag : uint8_t { kBool, kInt, kDouble, kString, kDtype, kInts };

void write_arg(BinWriter& w, const PrimitiveArg& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          w.pod<uint8_t>(kBool);
          w.pod<uint8_t>(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.pod<uint8_t>(kInt);
          w.pod<int64_t>(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.pod<uint8_t>(kDouble);
          w.pod<double>(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          w.pod<uint8_t>(kString);
          w.str(v);
        } else if constexpr (std::is_same_v<T, Dtype>) {
          w.pod<uint8_t>(kDtype);
          w.dtype(v);
        } else {
          w.pod<uint8_t>(kInts);
          w.pod<uint64_t>(v.size());
          for (auto x : v) {
            w.pod<int64_t>(x);
          }
        }
      },
      a);
}

PrimitiveArg read_arg(BinReader& r) {
  switch (r.pod<uint8_t>()) {
    case kBool: {
      uint8_t v = r.pod<uint8_t>();
      if (v > 1) {
        r.fail("Corrupt bool parameter " + std::to_string(v));
      }
      return v != 0;
    }
    case kInt:
      return r.pod<int64_t>();
    case kDouble:
      return r.pod<double>();
    case kString:
      return r.str();
    case kDtype:
      return r.dtype();
    case kInts: {
      uint64_t n = r.pod<uint64_t>();
      if (n > (1u << 20)) {
        r.fail("Corrupt parameter list");
      }
      std::vector<int64_t> v(n);
      for (auto& x : v) {
        x = r.pod<int64_t>();
      }
      return v;
    }
    default:
      r.fail("Corrupt parameter tag");
  }
}

bool signature_matches(int n_args, const std::vector<std::string>& names,
                       const std::vector<Dtype>& dtypes,
                       const std::vector<Shape>& shapes, bool shapeless,
                       const std::vector<array>& args, const Kwargs& kwargs) {
  if (static_cast<int>(args.size()) != n_args ||
      kwargs.size() != names.size()) {
    return false;
  }
  std::vector<array> all = args;
  for (auto& name : names) {
    auto it = kwargs.find(name);
    if (it == kwargs.end()) {
      return false;
    }
    all.push_back(it->second);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].dtype() != dtypes[i]) {
      return false;
    }
    if (shapeless ? all[i].ndim() != static_cast<int>(shapes[i].size())
                  : all[i].shape() != shapes[i]) {
      return false;
    }
  }
  return true;
}

std::string describe_call(const std::vector<array>& args,
                          const Kwargs& kwargs) {
  std::ostringstream os;
  os << "(";
  bool first = true;
  auto one = [&](const array& a) {
    os << (first ? "" : ", ") << dtype_name(a.dtype()) << shape_str(a.shape());
    first = false;
  };
  for (auto& a : args) {
    one(a);
  }
  for (auto& [k, a] : kwargs) {
    os << (first ? "" : ", ") << k << "=";
    first = true;
    one(a);
    first = false;
  }
  os << ")";
  return os.str();
}

}  // namespace

std::pair<std::string, std::vector<PrimitiveArg>> export_primitive(
    const Primitive& p) {
  if (dynamic_cast<const Log2*>(&p)) {
    return {"Log", {int64_t{0}}};
  }
  if (dynamic_cast<const Log10*>(&p)) {
    return {"Log", {int64_t{1}}};
  }
  if (dynamic_cast<const Log*>(&p)) {
    return {"Log", {int64_t{2}}};
  }
  // Names that depend on parameters map back to one factory.
  std::string name = p.name();
  if (dynamic_cast<const Reduce*>(&p)) {
    name = "Reduce";
  } else if (dynamic_cast<const ArgReduce*>(&p)) {
    name = "ArgReduce";
  }
  if (!factories().count(name)) {
    throw std::invalid_argument("[export_function] The primitive " + name +
                                " cannot be exported.");
  }
  return {name, p.state()};
}

std::shared_ptr<Primitive> import_primitive(const std::string& name,
                                            const std::vector<PrimitiveArg>& a,
                                            Stream s) {
  auto it = factories().find(name);
  if (it == factories().end()) {
    throw std::invalid_argument("[import_function] Unknown primitive '" +
                                name + "'.");
  }
  return it->second(s, a);
}

namespace {
thread_local int t_export_tracing = 0;
struct ExportTracingScope {
  ExportTracingScope() { ++t_export_tracing; }
  ~ExportTracingScope() { --t_export_tracing; }
  ExportTracingScope(const ExportTracingScope&) = delete;
  ExportTracingScope& operator=(const ExportTracingScope&) = delete;
};
}  // namespace

bool detail::in_export_tracing() { return t_export_tracing > 0; }

ExportedTrace export_trace(const KwFn& fun, const std::vector<array>& args,
                           const Kwargs& kwargs, bool shapeless) {
  ExportTracingScope tracing;
  ExportedTrace t;
  t.n_args = static_cast<int>(args.size());
  std::vector<array> inputs = args;
  for (auto& [k, v] : kwargs) {
    t.kwarg_names.push_back(k);
    inputs.push_back(v);
  }
  for (auto& in : inputs) {
    t.dtypes.push_back(in.dtype());
    t.shapes.push_back(in.shape());
  }
  int n_args = t.n_args;
  auto names = t.kwarg_names;
  Fn flat = [&](const std::vector<array>& xs) {
    std::vector<array> a(xs.begin(), xs.begin() + n_args);
    Kwargs kw;
    for (size_t i = 0; i < names.size(); ++i) {
      kw.emplace(names[i], xs[n_args + i]);
    }
    return fun(a, kw);
  };
  detail::Ir ir = detail::trace_to_ir(flat, inputs, shapeless);
  Flattener f;
  std::vector<int> bound;
  for (int v : ir.inputs) {
    int nv = f.add_value(ir.values[v].shape, ir.values[v].dtype, std::nullopt,
                         true);
    f.out.inputs.push_back(nv);
    bound.push_back(nv);
  }
  f.out.outputs = f.inline_ir(ir, bound);
  t.ir = std::move(f.out);
  return t;
}

FunctionExporter::FunctionExporter(std::string path, KwFn fun, bool shapeless,
                                   std::string metadata)
    : path_(std::move(path)),
      fun_(std::move(fun)),
      shapeless_(shapeless),
      metadata_(std::move(metadata)) {}

void FunctionExporter::operator()(const std::vector<array>& args,
                                  const Kwargs& kwargs) {
  add_trace(fun_, args, kwargs);
}

void FunctionExporter::add_trace(const KwFn& fun,
                                 const std::vector<array>& args,
                                 const Kwargs& kwargs) {
  if (closed_) {
    throw std::runtime_error(
        "[export_function] The exporter of '" + path_ +
        "' is closed; make a new one to export more traces.");
  }
  traces_.push_back(export_trace(fun, args, kwargs, shapeless_));
  write();
}

void FunctionExporter::close() {
  closed_ = true;
  fun_ = nullptr;  // release what the function holds
}

void FunctionExporter::write() {
  BinWriter w;
  w.bytes(kMagic, 4);
  w.pod<uint32_t>(kVersion);
  w.str(metadata_);
  w.pod<uint8_t>(shapeless_);
  // Constants, once per file.
  std::unordered_map<uintptr_t, uint32_t> const_index;
  std::vector<array> consts;
  for (auto& t : traces_) {
    for (auto& v : t.ir.values) {
      if (v.constant && !const_index.count(v.constant->id())) {
        const_index[v.constant->id()] = static_cast<uint32_t>(consts.size());
        consts.push_back(*v.constant);
      }
    }
  }
  w.pod<uint32_t>(consts.size());
  for (auto& c : consts) {
    array x = contiguous(c, false);
    x.eval();
    w.dtype(x.dtype());
    w.shape(x.shape());
    w.pod<uint64_t>(x.nbytes());
    w.bytes(static_cast<const char*>(x.raw_data()), x.nbytes());
  }
  w.pod<uint32_t>(traces_.size());
  for (auto& t : traces_) {
    w.pod<uint32_t>(t.n_args);
    w.pod<uint32_t>(t.kwarg_names.size());
    for (auto& k : t.kwarg_names) {
      w.str(k);
    }
    for (size_t i = 0; i < t.dtypes.size(); ++i) {
      w.dtype(t.dtypes[i]);
      w.shape(t.shapes[i]);
    }
    const auto& ir = t.ir;
    w.pod<uint32_t>(ir.values.size());
    for (auto& v : ir.values) {
      w.dtype(v.dtype);
      w.shape(v.shape);
      w.pod<int64_t>(v.constant ? int64_t{const_index.at(v.constant->id())}
                                : int64_t{-1});
    }
    w.pod<uint32_t>(ir.inputs.size());
    for (int v : ir.inputs) {
      w.pod<int32_t>(v);
    }
    w.pod<uint32_t>(ir.nodes.size());
    for (auto& n : ir.nodes) {
      auto [name, args] = export_primitive(*n.prim);
      w.str(name);
      w.pod<uint32_t>(args.size());
      for (auto& a : args) {
        write_arg(w, a);
      }
      w.pod<uint32_t>(n.inputs.size());
      for (int v : n.inputs) {
        w.pod<int32_t>(v);
      }
      w.pod<uint32_t>(n.outputs.size());
      for (int v : n.outputs) {
        w.pod<int32_t>(v);
      }
    }
    w.pod<uint32_t>(ir.outputs.size());
    for (int v : ir.outputs) {
      w.pod<int32_t>(v);
    }
  }
  // Write to a temporary name and rename, so a reader never sees half a
  // file.
  std::string tmp = path_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      export_error("Cannot open '" + path_ + "' for writing.");
    }
    f.write(w.data().data(), w.data().size());
    if (!f) {
      export_error("Failed to write '" + path_ + "'.");
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    export_error("Failed to write '" + path_ + "'.");
  }
}

void export_function(const std::string& path, const KwFn& fun,
                     const std::vector<array>& args, const Kwargs& kwargs,
                     bool shapeless, const std::string& metadata) {
  FunctionExporter e(path, fun, shapeless, metadata);
  e(args, kwargs);
  e.close();
}

ImportedFunction::ImportedFunction(const std::string& path) : path_(path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw std::invalid_argument("[import_function] Cannot open '" + path +
                                "'.");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  BinReader r(ss.str(), path);
  const char* magic = r.bytes(4);
  if (std::memcmp(magic, kMagic, 4) != 0) {
    r.fail("Not an exported function (bad magic)");
  }
  uint32_t version = r.pod<uint32_t>();
  if (version != kVersion) {
    r.fail("Unsupported version " + std::to_string(version));
  }
  metadata_ = r.str();
  uint8_t shapeless = r.pod<uint8_t>();
  if (shapeless > 1) {
    r.fail("Corrupt shapeless flag " + std::to_string(shapeless));
  }
  shapeless_ = shapeless != 0;
  Stream s = to_stream({});
  std::vector<array> consts;
  uint32_t n_consts = r.count(1u << 24);
  for (uint32_t i = 0; i < n_consts; ++i) {
    Dtype t = r.dtype();
    Shape shape = r.shape();
    uint64_t nbytes = r.pod<uint64_t>();
    if (nbytes != static_cast<uint64_t>(shape_size(shape)) * t.size) {
      r.fail("Corrupt constant");
    }
    const char* p = r.bytes(nbytes);
    // A bool constant's bytes are read as bool by the kernels: anything but
    // 0 and 1 is undefined behaviour there (UBSan: a bool load of 255).
    if (t == bool_) {
      for (uint64_t k = 0; k < nbytes; ++k) {
        if (static_cast<unsigned char>(p[k]) > 1) {
          r.fail("Corrupt bool constant (byte " +
                 std::to_string(static_cast<unsigned char>(p[k])) + ")");
        }
      }
    }
    void* buf = std::malloc(std::max<uint64_t>(nbytes, 1));
    if (!buf) {
      throw std::bad_alloc();
    }
    std::memcpy(buf, p, nbytes);
    consts.emplace_back(buf, shape, t, [](void* q) { std::free(q); });
  }
  uint32_t n_traces = r.count(1u << 20);
  for (uint32_t ti = 0; ti < n_traces; ++ti) {
    Trace t;
    t.n_args = static_cast<int>(r.count(1u << 20));
    uint32_t n_kw = r.count(1u << 20);
    for (uint32_t i = 0; i < n_kw; ++i) {
      t.kwarg_names.push_back(r.str());
    }
    for (int i = 0; i < t.n_args + static_cast<int>(n_kw); ++i) {
      t.dtypes.push_back(r.dtype());
      t.shapes.push_back(r.shape());
    }
    uint32_t n_values = r.count(1u << 28);
    auto check_value = [&](int32_t v) {
      if (v < 0 || static_cast<uint32_t>(v) >= n_values) {
        r.fail("Corrupt value id");
      }
      return v;
    };
    for (uint32_t i = 0; i < n_values; ++i) {
      Dtype dtype = r.dtype();
      Shape shape = r.shape();
      int64_t c = r.pod<int64_t>();
      std::optional<array> constant;
      if (c >= 0) {
        if (static_cast<uint64_t>(c) >= consts.size()) {
          r.fail("Corrupt constant index");
        }
        constant = consts[c];
      }
      t.ir.values.push_back({shape, dtype, constant});
    }
    uint32_t n_in = r.count(n_values);
    for (uint32_t i = 0; i < n_in; ++i) {
      t.ir.inputs.push_back(check_value(r.pod<int32_t>()));
    }
    if (n_in != t.dtypes.size()) {
      r.fail("Corrupt signature");
    }
    for (uint32_t i = 0; i < n_in; ++i) {
      if (t.ir.values[t.ir.inputs[i]].dtype != t.dtypes[i]) {
        r.fail("Corrupt signature: input " + std::to_string(i) +
               "'s value has dtype " +
               std::to_string(
                   static_cast<int>(t.ir.values[t.ir.inputs[i]].dtype.val)) +
               ", its signature " +
               std::to_string(static_cast<int>(t.dtypes[i].val)));
      }
    }
    uint32_t n_nodes = r.count(1u << 28);
    for (uint32_t i = 0; i < n_nodes; ++i) {
      std::string name = r.str();
      uint32_t n_args = r.count(1u << 16);
      std::vector<PrimitiveArg> args;
      for (uint32_t k = 0; k < n_args; ++k) {
        args.push_back(read_arg(r));
      }
      detail::IrNode node{import_primitive(name, args, s), {}, {}};
      uint32_t ni = r.count(n_values);
      for (uint32_t k = 0; k < ni; ++k) {
        node.inputs.push_back(check_value(r.pod<int32_t>()));
      }
      uint32_t no = r.count(n_values);
      for (uint32_t k = 0; k < no; ++k) {
        node.outputs.push_back(check_value(r.pod<int32_t>()));
      }
      t.ir.nodes.push_back(std::move(node));
    }
    uint32_t n_out = r.count(n_values);
    for (uint32_t i = 0; i < n_out; ++i) {
      t.ir.outputs.push_back(check_value(r.pod<int32_t>()));
    }
    traces_.push_back(std::move(t));
  }
}

std::vector<array> ImportedFunction::operator()(const std::vector<array>& args,
                                                const Kwargs& kwargs) const {
  for (auto& t : traces_) {
    if (!signature_matches(t.n_args, t.kwarg_names, t.dtypes, t.shapes,
                           shapeless_, args, kwargs)) {
      continue;
    }
    std::vector<array> inputs = args;
    for (auto& name : t.kwarg_names) {
      inputs.push_back(kwargs.at(name));
    }
    return detail::run_ir(t.ir, inputs, shapeless_, /*check=*/true);
  }
  throw std::invalid_argument(
      "[import_function] No function exported to '" + path_ +
      "' accepts the inputs " + describe_call(args, kwargs) + " (" +
      std::to_string(traces_.size()) + " traced signature" +
      (traces_.size() == 1 ? "" : "s") + ").");
}

ImportedFunction import_function(const std::string& path) {
  return ImportedFunction(path);
}

}  // namespace fluxion

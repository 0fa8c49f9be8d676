// The import table of export_function's files: primitive name -> the
// function that rebuilds the primitive from its saved parameters
// (Primitive::state()), with the two directions around it
// (export_primitive, import_primitive). A primitive without an entry
// cannot be exported.
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fluxion/export.h"
#include "fluxion/fluxion.h"
#include "fluxion/ops/custom_kernel.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"

namespace fluxion {

namespace {

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

}  // namespace fluxion

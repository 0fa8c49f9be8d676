// Source generation for fused elementwise kernels (codegen.h). The source
// includes no headers: a few typedefs and only the helper functions its
// ops use, so a kernel compiles in a fraction of a second.
#include "fluxion/backend/cpu/codegen.h"

#include <set>
#include <sstream>
#include <unordered_map>

#include "fluxion/ops/misc.h"
#include "fluxion/primitive.h"

namespace fluxion::cpu {

namespace {

// "v3", "p0"...: built by appending, since GCC 12's -Wrestrict misfires on
// `"v" + std::to_string(i)` (GCC bug 105329).
std::string tagged(const char* prefix, int64_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

bool is_float(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}

// How values of a dtype are stored in memory.
const char* storage_type(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_:
      return "bool";
    case Dtype::Val::uint8:
      return "unsigned char";
    case Dtype::Val::uint16:
      return "unsigned short";
    case Dtype::Val::uint32:
      return "unsigned int";
    case Dtype::Val::uint64:
      return "unsigned long long";
    case Dtype::Val::int8:
      return "signed char";
    case Dtype::Val::int16:
      return "short";
    case Dtype::Val::int32:
      return "int";
    case Dtype::Val::int64:
      return "long long";
    case Dtype::Val::float16:
      return "_Float16";
    case Dtype::Val::bfloat16:
      return "fx_bf16";
    case Dtype::Val::float32:
      return "float";
    case Dtype::Val::float64:
      return "double";
    default:
      return nullptr;
  }
}

// The type the kernel computes a value of that dtype in: half types in
// float, rounded back after every op as eager evaluation does.
std::string compute_type(Dtype t) {
  if (t == float16 || t == bfloat16) {
    return "float";
  }
  return storage_type(t);
}

struct Emitter {
  std::set<std::string> helpers;  // names of preamble functions used

  std::string fsuffix(Dtype t) { return t == float64 ? "" : "f"; }
  std::string call(const std::string& f, Dtype t, const std::string& x) {
    return "__builtin_" + f + fsuffix(t) + "(" + x + ")";
  }
  std::string exp(Dtype t, const std::string& x) {
    if (t == float64) {
      return "__builtin_exp(" + x + ")";
    }
    helpers.insert("exp_reduce");
    helpers.insert("exp");
    return "fx_exp(" + x + ")";
  }

  // The expression for `p` on argument names `a`, or "" when none.
  std::string expr(const Primitive& p, const std::vector<std::string>& a,
                   Dtype in, Dtype out) {
    std::string n = p.name();
    std::string T = compute_type(out);
    bool f = is_float(in);
    bool i = !f && in != bool_;
    if (a.size() == 1) {
      const std::string& x = a[0];
      if (n == "Copy" || n == "StopGradient") return x;
      if (n == "Negative" && in != bool_) return "(-" + x + ")";
      if (n == "Abs") {
        if (f) return call("fabs", in, x);
        if (i) return "(" + x + " < 0 ? -" + x + " : " + x + ")";
        return x;
      }
      if (n == "Square" && in != bool_) return "(" + x + " * " + x + ")";
      if (n == "LogicalNot") return "(!(" + x + " != 0))";
      if (!f) return "";
      if (n == "Sign")
        return "(" + x + " > 0 ? " + T + "(1) : (" + x + " < 0 ? " + T +
               "(-1) : " + x + "))";
      if (n == "Exp") return exp(in, x);
      if (n == "Tanh") {
        if (in == float64) return "__builtin_tanh(" + x + ")";
        helpers.insert("exp_reduce");
        helpers.insert("tanh");
        return "fx_tanh(" + x + ")";
      }
      if (n == "Sigmoid") {
        std::string e = "__builtin_exp(-" + call("fabs", in, x) + ")";
        if (in != float64) {
          helpers.insert("exp_reduce");
          helpers.insert("exp_neg");
          e = "fx_exp_neg(-" + call("fabs", in, x) + ")";
        }
        return "fx_sigmoid_" + fsuffix(in) + "(" + x + ", " + e + ")";
      }
      if (n == "Sqrt") return call("sqrt", in, x);
      if (n == "Rsqrt") return "(" + T + "(1) / " + call("sqrt", in, x) + ")";
      if (n == "Reciprocal") return "(" + T + "(1) / " + x + ")";
      if (n == "Floor") return call("floor", in, x);
      if (n == "Ceil") return call("ceil", in, x);
      if (n == "Round") return call("rint", in, x);
      if (n == "IsNan") return "(" + x + " != " + x + ")";
      if (n == "IsInf")
        return "(" + call("fabs", in, x) + " == " + call("inf", in, "") + ")";
      if (n == "IsFinite") return "(" + x + " - " + x + " == 0)";
      static const std::unordered_map<std::string, std::string> libm = {
          {"Expm1", "expm1"},   {"Log", "log"},       {"Log1p", "log1p"},
          {"Log2", "log2"},     {"Log10", "log10"},   {"Sin", "sin"},
          {"Cos", "cos"},       {"Tan", "tan"},       {"ArcSin", "asin"},
          {"ArcCos", "acos"},   {"ArcTan", "atan"},   {"Sinh", "sinh"},
          {"Cosh", "cosh"},     {"ArcSinh", "asinh"}, {"ArcCosh", "acosh"},
          {"ArcTanh", "atanh"}, {"Erf", "erf"}};
      auto it = libm.find(n);
      return it == libm.end() ? "" : call(it->second, in, x);
    }
    if (a.size() == 2) {
      const std::string &x = a[0], &y = a[1];
      static const std::unordered_map<std::string, std::string> cmp = {
          {"Equal", "=="},     {"NotEqual", "!="}, {"Less", "<"},
          {"LessEqual", "<="}, {"Greater", ">"},   {"GreaterEqual", ">="}};
      if (auto it = cmp.find(n); it != cmp.end())
        return "(" + x + " " + it->second + " " + y + ")";
      if (n == "LogicalAnd") return "((" + x + " != 0) && (" + y + " != 0))";
      if (n == "LogicalOr") return "((" + x + " != 0) || (" + y + " != 0))";
      if (in == bool_) return "";
      if (n == "Add") return "(" + x + " + " + y + ")";
      if (n == "Subtract") return "(" + x + " - " + y + ")";
      if (n == "Multiply") return "(" + x + " * " + y + ")";
      if (n == "Maximum" || n == "Minimum") {
        std::string op = n == "Maximum" ? " > " : " < ";
        std::string pick = "(" + x + op + y + " ? " + x + " : " + y + ")";
        return f ? "(" + x + " != " + x + " ? " + x + " : " + pick + ")" : pick;
      }
      if (!f) return "";
      if (n == "Divide") return "(" + x + " / " + y + ")";
      if (n == "Power")
        return "__builtin_pow" + fsuffix(in) + "(" + x + ", " + y + ")";
      if (n == "ArcTan2")
        return "__builtin_atan2" + fsuffix(in) + "(" + x + ", " + y + ")";
      return "";
    }
    if (a.size() == 3 && n == "Select") {
      return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
    }
    return "";
  }
};

// A cast from compute type of `in` to that of `out` (C++ conversions,
// as the eager kernels' static_cast), with bool as "nonzero".
std::string cast(const std::string& x, Dtype in, Dtype out) {
  if (out == bool_) {
    return "(" + x + " != 0)";
  }
  std::string s = "(";  // appended: see tagged() on GCC 12's -Wrestrict
  s += compute_type(out);
  s += ")(";
  s += x;
  s += ")";
  return s;
}

// Rounds a float holding a half-type value as storing it would.
std::string round_half(const std::string& x, Dtype t) {
  if (t == float16) {
    return "(float)(_Float16)(" + x + ")";
  }
  if (t == bfloat16) {
    return "fx_ld_bf16(fx_st_bf16(" + x + "))";
  }
  return x;
}

std::string load(const std::string& x, Dtype t) {
  if (t == bfloat16) return "fx_ld_bf16(" + x + ")";
  if (t == float16) return "(float)(" + x + ")";
  return x;
}
std::string store(const std::string& x, Dtype t) {
  if (t == bfloat16) return "fx_st_bf16(" + x + ")";
  if (t == float16) return "(_Float16)(" + x + ")";
  return x;
}

// Preamble functions by name, in dependency order. The exponentials share
// one argument reduction: exp(c) = 2^n e^r with |r| <= ln2/2 and a degree-6
// polynomial for e^r - 1 (Cephes' coefficients); all branch-free so that
// loops vectorize.
const char* kPreamble[][2] = {
    {"exp_reduce", R"(
static inline float fx_expm1_r(float c, float* n) {
  *n = __builtin_rintf(c * 1.44269504088896341f);
  float r = __builtin_fmaf(*n, -0.693359375f, c);
  r = __builtin_fmaf(*n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  return __builtin_fmaf(p, r * r, r);
}
static inline float fx_pow2(int k) {
  int b = (k + 127) << 23;
  float s;
  __builtin_memcpy(&s, &b, 4);
  return s;
}
)"},
    {"exp", R"(
// n reaches 128 at the top of the range: scaled in two halves.
static inline float fx_exp(float x) {
  float c = x > 88.72283935f ? 88.72283935f : x;
  c = c < -87.33654785f ? -87.33654785f : c;
  float n;
  float p = fx_expm1_r(c, &n) + 1.0f;
  int k = (int)n, h = k >> 1;
  float y = p * fx_pow2(h) * fx_pow2(k - h);
  y = x > 88.72283935f ? __builtin_inff() : y;
  y = x < -103.97208f ? 0.0f : y;
  return x != x ? x : y;
}
)"},
    {"exp_neg", R"(
// exp of c <= 0 (nan passes through), for sigmoid: inputs below -87 give
// exp(-87), below float32 sigmoid's resolution; one scale, no selects.
static inline float fx_exp_neg(float c) {
  c = c < -87.0f ? -87.0f : c;
  float n;
  float u = fx_expm1_r(c, &n);
  float s = fx_pow2((int)n);
  return __builtin_fmaf(s, u, s);
}
)"},
    {"tanh", R"(
// tanh(a) = -m / (2 + m) with m = exp(-2a) - 1 computed without
// cancellation (2^n (e^r - 1) + (2^n - 1)), so it is accurate near 0 too.
static inline float fx_tanh(float x) {
  float c = -2.0f * __builtin_fabsf(x);
  c = c < -87.0f ? -87.0f : c;
  float n;
  float u = fx_expm1_r(c, &n);
  float s = fx_pow2((int)n);
  float m = __builtin_fmaf(s, u, s - 1.0f);
  return __builtin_copysignf(-m / (2.0f + m), x);
}
)"},
};

const char* kBase =
    R"(// Generated by Fluxion's compile: one fused elementwise kernel.
typedef unsigned short fx_bf16;
static inline float fx_ld_bf16(fx_bf16 h) {
  unsigned u = (unsigned)h << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
static inline fx_bf16 fx_st_bf16(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (fx_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (fx_bf16)(u >> 16);
}
static inline float fx_sigmoid_f(float x, float e) {
  return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
static inline double fx_sigmoid_(double x, double e) {
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
)";

}  // namespace

bool can_generate(const Primitive& p, const std::vector<Dtype>& in, Dtype out) {
  if (!storage_type(out) || in.empty()) {
    return false;
  }
  for (auto t : in) {
    if (!storage_type(t)) {
      return false;
    }
  }
  if (auto* c = dynamic_cast<const AsType*>(&p)) {
    // Float to unsigned conversions of negative values differ by platform.
    bool unsigned_out =
        out == uint8 || out == uint16 || out == uint32 || out == uint64;
    return !(is_float(in[0]) && unsigned_out) && c->dtype() == out;
  }
  Emitter e;
  std::vector<std::string> args(in.size(), "x");
  Dtype operand = in.size() == 3 ? in[1] : in[0];
  if (in.size() == 3 && in[0] != bool_) {
    return false;
  }
  return !e.expr(p, args, operand, out).empty();
}

std::string kernel_source(const detail::Ir& tape) {
  Emitter em;
  std::ostringstream body;
  auto name = [](int v) { return tagged("v", v); };
  for (auto& n : tape.nodes) {
    Dtype out = tape.values[n.outputs[0]].dtype;
    std::vector<std::string> args;
    for (int v : n.inputs) {
      args.push_back(name(v));
    }
    std::string e;
    if (detail::is_view_primitive(*n.prim)) {
      e = args[0];  // inputs are read broadcast or reshaped already
    } else if (dynamic_cast<const AsType*>(n.prim.get())) {
      e = cast(args[0], tape.values[n.inputs[0]].dtype, out);
    } else {
      Dtype operand = tape.values[n.inputs[n.inputs.size() == 3 ? 1 : 0]].dtype;
      e = em.expr(*n.prim, args, operand, out);
    }
    if (e.empty()) {
      return "";
    }
    body << "  " << compute_type(out) << " " << name(n.outputs[0]) << " = "
         << round_half(e, out) << ";\n";
  }
  int result = tape.outputs[0];
  Dtype out_t = tape.values[result].dtype;

  std::ostringstream src;
  src << kBase;
  for (auto& [key, text] : kPreamble) {
    if (em.helpers.count(key)) {
      src << text;
    }
  }
  // The fused computation on loaded values.
  src << "static inline " << compute_type(out_t) << " fx_elem(";
  for (size_t k = 0; k < tape.inputs.size(); ++k) {
    int v = tape.inputs[k];
    src << (k ? ", " : "") << compute_type(tape.values[v].dtype) << " "
        << name(v);
  }
  src << ") {\n" << body.str() << "  return " << name(result) << ";\n}\n";

  auto ptrs = [&]() {
    std::ostringstream s;
    for (size_t k = 0; k < tape.inputs.size(); ++k) {
      s << "  const " << storage_type(tape.values[tape.inputs[k]].dtype)
        << "* p" << k << " = (const "
        << storage_type(tape.values[tape.inputs[k]].dtype) << "*)in[" << k
        << "];\n";
    }
    s << "  " << storage_type(out_t) << "* po = (" << storage_type(out_t)
      << "*)out;\n";
    return s.str();
  };
  auto call = [&](auto index) {
    std::ostringstream s;
    s << "fx_elem(";
    for (size_t k = 0; k < tape.inputs.size(); ++k) {
      s << (k ? ", " : "") << index(k);
    }
    s << ")";
    return s.str();
  };
  // Contiguous entry point; traced size-1 inputs are hoisted scalars.
  src << "extern \"C\" void fx_contiguous(void* const* in, void* out, "
         "long long begin, long long end) {\n"
      << ptrs();
  for (size_t k = 0; k < tape.inputs.size(); ++k) {
    auto& v = tape.values[tape.inputs[k]];
    size_t size = 1;
    for (auto d : v.shape) size *= d;
    if (size == 1) {
      src << "  const " << compute_type(v.dtype) << " s" << k << " = "
          << load(tagged("p", k) + "[0]", v.dtype) << ";\n";
    }
  }
  src << "  for (long long i = begin; i < end; ++i) {\n    po[i] = "
      << store(call([&](size_t k) {
                 auto& v = tape.values[tape.inputs[k]];
                 size_t size = 1;
                 for (auto d : v.shape) size *= d;
                 return size == 1
                            ? tagged("s", k)
                            : load(tagged("p", k) + "[i]", v.dtype);
               }),
               out_t)
      << ";\n  }\n}\n";
  // Strided entry point: rows of the last axis, any input strides.
  size_t nin = tape.inputs.size();
  src << "extern \"C\" void fx_strided(void* const* in, void* out, const "
         "long long* shape, const long long* strides, int ndim, long long "
         "row_begin, long long row_end) {\n"
      << ptrs() << "  long long inner = shape[ndim - 1];\n"
      << "  for (long long r = row_begin; r < row_end; ++r) {\n"
      << "    long long off[" << nin << "] = {0};\n"
      << "    long long rem = r;\n"
      << "    for (int d = ndim - 2; d >= 0; --d) {\n"
      << "      long long c = rem % shape[d];\n      rem /= shape[d];\n"
      << "      for (int k = 0; k < " << nin
      << "; ++k) off[k] += c * strides[k * ndim + d];\n    }\n";
  for (size_t k = 0; k < nin; ++k) {
    src << "    const long long t" << k << " = strides[" << k
        << " * ndim + ndim - 1];\n";
  }
  src << "    for (long long j = 0; j < inner; ++j) {\n      po[r * inner + j] "
         "= "
      << store(call([&](size_t k) {
                 auto ks = std::to_string(k);
                 return load("p" + ks + "[off[" + ks + "] + j * t" + ks + "]",
                             tape.values[tape.inputs[k]].dtype);
               }),
               out_t)
      << ";\n    }\n  }\n}\n";
  return src.str();
}

}  // namespace fluxion::cpu

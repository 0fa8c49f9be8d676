// The expression walk shared by the generators of fused kernels
// (codegen_parts.h).
#include "fluxion/backend/common/codegen_parts.h"

#include <sstream>

#include "fluxion/primitive.h"

namespace fluxion::codegen {

// Built by appending, since GCC 12's -Wrestrict misfires on
// `"v" + std::to_string(i)` (GCC bug 105329).
std::string tagged(const char* prefix, int64_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

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
      return "fx_f16";
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

// Half types are computed in float, rounded back after every op as eager
// evaluation does (on the CPU and on the GPU alike).
std::string compute_type(Dtype t) {
  if (t == float16 || t == bfloat16) {
    return "float";
  }
  return storage_type(t);
}

namespace {

// A value converted to the compute type of `out` (C++ conversions, as the
// eager kernels' static_cast; to bool: nonzero).
std::string convert(const std::string& x, Dtype out) {
  std::string s = "(";  // appended: see tagged() on GCC 12's -Wrestrict
  s += compute_type(out);
  s += ")(";
  s += x;
  s += ")";
  return s;
}

}  // namespace

std::string round_half(const std::string& x, Dtype t) {
  if (t == float16) {
    return "fx_ld_f16(fx_st_f16(" + x + "))";
  }
  if (t == bfloat16) {
    return "fx_ld_bf16(fx_st_bf16(" + x + "))";
  }
  return x;
}

std::string load(const std::string& x, Dtype t) {
  if (t == bfloat16) return "fx_ld_bf16(" + x + ")";
  if (t == float16) return "fx_ld_f16(" + x + ")";
  return x;
}

std::string store(const std::string& x, Dtype t) {
  if (t == bfloat16) return "fx_st_bf16(" + x + ")";
  if (t == float16) return "fx_st_f16(" + x + ")";
  return x;
}

std::string node_expr(const detail::IrNode& n, const detail::Ir& tape) {
  auto name = [](int v) { return tagged("v", v); };
  Dtype out = tape.values[n.outputs[0]].dtype;
  std::vector<Dtype> in;
  std::string args;
  for (int v : n.inputs) {
    in.push_back(tape.values[v].dtype);
    args += (args.empty() ? "" : ", ") + name(v);
  }
  if (detail::is_view_primitive(*n.prim)) {
    return name(n.inputs[0]);  // inputs are read broadcast or reshaped already
  }
  const char* f = n.prim->elementwise_functor(in);
  if (!f) {
    return "";
  }
  // The eager kernels' functor (backend/common/*_ops.h), on and to
  // compute types.
  std::string call = "fluxion::detail::";
  call += f;
  call += "{}(";
  call += args;
  call += ")";
  return round_half(convert(call, out), out);
}

namespace {

// fx_elem's parameters (the inputs' loaded values, v<input>) and body
// (every node's value computed in turn); false when a dtype is not
// computed or a node has no functor.
bool elem_parts(const detail::Ir& tape, std::string& params,
                std::string& body) {
  for (auto& v : tape.values) {
    if (!storage_type(v.dtype)) {
      return false;  // complex: never fused (fuse_ir)
    }
  }
  auto name = [](int v) { return tagged("v", v); };
  std::ostringstream b;
  for (auto& n : tape.nodes) {
    std::string e = node_expr(n, tape);
    if (e.empty()) {
      return false;
    }
    b << "  " << compute_type(tape.values[n.outputs[0]].dtype) << " "
      << name(n.outputs[0]) << " = " << e << ";\n";
  }
  std::ostringstream p;
  for (size_t k = 0; k < tape.inputs.size(); ++k) {
    int v = tape.inputs[k];
    p << (k ? ", " : "") << compute_type(tape.values[v].dtype) << " "
      << name(v);
  }
  params = p.str();
  body = b.str();
  return true;
}

}  // namespace

std::string elem_function(const detail::Ir& tape, const char* qualifiers) {
  std::string params, body;
  if (tape.outputs.size() != 1 || !elem_parts(tape, params, body)) {
    return "";
  }
  int result = tape.outputs[0];
  std::ostringstream src;
  src << qualifiers << " " << compute_type(tape.values[result].dtype)
      << " fx_elem(" << params << ") {\n"
      << body << "  return " << tagged("v", result) << ";\n}\n";
  return src.str();
}

std::string elem_store_function(const detail::Ir& tape,
                                const char* qualifiers) {
  std::string params, body;
  if (!elem_parts(tape, params, body)) {
    return "";
  }
  std::ostringstream src;
  src << qualifiers << " void fx_elem(" << params;
  for (size_t o = 0; o < tape.outputs.size(); ++o) {
    src << (o + tape.inputs.size() ? ", " : "")
        << storage_type(tape.values[tape.outputs[o]].dtype) << "* "
        << tagged("o", o);
  }
  src << ") {\n" << body;
  for (size_t o = 0; o < tape.outputs.size(); ++o) {
    int v = tape.outputs[o];
    src << "  *" << tagged("o", o) << " = "
        << store(tagged("v", v), tape.values[v].dtype) << ";\n";
  }
  src << "}\n";
  return src.str();
}

int64_t traced_size(const detail::Ir& tape, int value) {
  int64_t n = 1;
  for (auto d : tape.values[value].shape) {
    n *= d;
  }
  return n;
}

bool scalar_input(const detail::Ir& tape, size_t k) {
  return traced_size(tape, tape.inputs[k]) == 1 &&
         traced_size(tape, tape.outputs[0]) > 1;
}

}  // namespace fluxion::codegen

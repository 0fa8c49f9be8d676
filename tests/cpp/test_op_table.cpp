// The op table's drivers (op_cases.h): every case, on every device, through
//  - Forward: f at each of the case's dtypes against its reference (and,
//    off the CPU, against the CPU's result);
//  - Gradients: by its derivative order, rules::grads (vjp and jvp against
//    finite differences) and rules::second_order (the vjp and the jvp
//    differentiated again), or rules::zero_grads;
//  - Vmap: rules::vmaps (each input mapped alone at each of its axes, all
//    inputs at once, vmap of vmap) with inputs drawn from the domains;
//  - Compile: the case between fusable float32 elementwise ops, so that a
//    Compiled node with at least two fused ops must appear; its outputs
//    against eager evaluation, and, for elementwise cases, against the
//    eager scalar functors (vector kernels off) to `fused_ulps`; on the
//    GPU each Compiled node must run as its NVRTC-generated kernel.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "fluxion/backend/cpu/simd.h"
#include "fluxion/backend/gpu.h"
#include "fluxion/compile.h"
#include "fluxion/compiled.h"
#include "device_scope.h"
#include "op_cases.h"

namespace fluxion::test {

std::vector<OpCase> core_cases();

const std::vector<OpCase>& op_table() {
  static const auto* all = [] {
    auto* c = new std::vector<OpCase>(core_cases());
    for (auto& family : op_case_registry()) {
      auto more = family();
      c->insert(c->end(), more.begin(), more.end());
    }
    return c;
  }();
  return *all;
}

namespace {

unsigned name_seed(const std::string& name) {
  unsigned h = 2166136261u;
  for (unsigned char ch : name) {
    h = (h ^ ch) * 16777619u;
  }
  return h;
}

bool is_fixed(const In& in) { return in.domain == "fixed"; }

}  // namespace

Arrays case_inputs(const OpCase& c) {
  Arrays out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    out.push_back(c.inputs[i].draw(c.inputs[i].shape,
                                   name_seed(c.name) + 7919u * unsigned(i)));
  }
  return out;
}

namespace {

// Inputs at dtype t: drawn floats always, drawn integers when t is an
// integer type; fixed values (indices, keys, masks) never.
Arrays cast_inputs(const OpCase& c, const Arrays& x, Dtype t) {
  Arrays out;
  for (size_t i = 0; i < x.size(); ++i) {
    bool cast = !is_fixed(c.inputs[i]) &&
                (is_floating_point(x[i].dtype()) ||
                 (is_integral(x[i].dtype()) && is_integral(t)));
    out.push_back(cast ? astype(x[i], t) : x[i]);
  }
  return out;
}

// A dtype's resolution (relative rounding step).
double resolution(Dtype t) {
  if (t == float16) return 9.77e-4;
  if (t == bfloat16) return 7.82e-3;
  if (t == float32 || t == complex64) return 1.19e-7;
  if (t == float64) return 2.2e-16;
  return 0;  // integers, bool: exact
}

// The devices the table runs on: the CPU, and a GPU where there is one.
std::vector<Device> table_devices() {
  std::vector<Device> d{Device::cpu};
  if (is_available(Device::gpu)) {
    d.push_back(Device::gpu);
  }
  return d;
}

// A GPU kernel not ported yet raises "... on the gpu yet" (a primitive of
// the registry's GPU column 0, or a dtype the kernel does not take yet,
// such as complex64 in the elementwise kernels): on the GPU that skips the
// rest of the case, naming what is missing; anything else is a failure.
template <typename F>
void on_device_or_skip(Device d, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    if (d != Device::cpu &&
        std::string(e.what()).find("on the gpu yet") != std::string::npos) {
      GTEST_SKIP() << e.what();
    }
    throw;
  }
}

using Param = std::tuple<int, int>;  // case, device index

class OpTable : public ::testing::TestWithParam<Param> {
 protected:
  const OpCase& entry() const { return op_table()[std::get<0>(GetParam())]; }
  Device device() const { return table_devices()[std::get<1>(GetParam())]; }
};

}  // namespace

TEST_P(OpTable, Forward) {
  on_device_or_skip(device(), [&] {
    auto& c = entry();
    OnDevice on(device());
    auto x = case_inputs(c);
    if (!c.ref) {
      EXPECT_FALSE(c.ref_note.empty())
          << c.name << ": a case needs a reference or a note saying where its "
          << "values are checked";
    }
    for (Dtype t : c.dtypes) {
      SCOPED_TRACE(dtype_name(t));
      auto in = cast_inputs(c, x, t);
      auto got = c.f(in);
      if (device() != Device::cpu) {
        // The same case on the CPU: a GPU kernel must agree with it.
        OnDevice cpu(Device::cpu);
        auto want = c.f(in);
        for (size_t k = 0; k < got.size(); ++k) {
          // The CPU and the GPU each round within the case's ulps of the
          // exact value (dot products sum in different orders), at the
          // coarser of the dtype under test and the output's: a float32
          // sin promoted to float64 by a float64 operand carries float32's
          // rounding (load_safetensors: sin(x) times a float64 array).
          double res = std::max(resolution(t), resolution(got[k].dtype()));
          double tol = std::max(c.fwd_tol, std::max(4.0, c.fwd_ulps) * res);
          EXPECT_TRUE(allclose(got[k], want[k], tol, tol, true).item<bool>())
              << "output " << k << " differs from the CPU's";
        }
      }
      if (!c.ref) {
        continue;
      }
      auto want = c.ref(in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].shape(), want[k].shape()) << "output " << k;
        // The coarser of the dtype under test and the output's.
        double res = std::max(resolution(t), resolution(got[k].dtype()));
        double tol = t == float64 ? c.fwd_tol
                                  : std::max(c.fwd_tol, c.fwd_ulps * res);
        expect_close(got[k], values(want[k]), tol, tol,
                     c.name + " output " + std::to_string(k));
      }
    }
  });
}

namespace {

bool elementwise(const OpCase& c) { return c.fused_ulps >= 0; }

// Elementwise cases are also checked with inputs of other shapes: 0-d,
// and operands that broadcast against each other.
std::vector<std::vector<Shape>> shape_variants(const OpCase& c) {
  if (!elementwise(c)) {
    return {};
  }
  if (c.inputs.size() == 1) {
    return {{Shape{}}};
  }
  if (c.inputs.size() == 2) {
    return {{Shape{2, 3}, Shape{3}}, {Shape{}, Shape{2, 1}}};
  }
  return {};
}

Arrays draw_at(const OpCase& c, const std::vector<Shape>& shapes) {
  Arrays x;
  for (size_t i = 0; i < shapes.size(); ++i) {
    x.push_back(c.inputs[i].draw(shapes[i], name_seed(c.name) + 31u * i + 1));
  }
  return x;
}

// `got` (integer) equal to `want64` (float64) cast to got's dtype where
// want64 is finite: a cast of inf or nan to an integer is undefined (the
// CPU gives INT_MIN, the GPU 0), so those elements (remainder's rule at a
// zero divisor) are not compared.
void expect_integer_equal(const array& got, const array& want64,
                          const std::string& what) {
  auto g = to_vector<double>(got);
  auto w = to_vector<double>(want64);
  auto cast = to_vector<double>(astype(want64, got.dtype()));
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isfinite(w[i])) {
      EXPECT_EQ(g[i], cast[i]) << what << " at " << i;
    }
  }
}

// vjp and jvp at integer inputs `xi` (ones as cotangents and tangents) in
// the inputs' dtypes, equal to those at the same values in float64 cast to
// the integer dtype.
void integer_grads(const Fn& f, const Arrays& xi, const std::string& what) {
  Arrays x64;
  std::vector<int> args;
  for (size_t i = 0; i < xi.size(); ++i) {
    x64.push_back(astype(xi[i], float64));
    args.push_back(static_cast<int>(i));
  }
  auto ones_of = [](const Arrays& v) {
    Arrays o;
    for (auto& a : v) {
      o.push_back(ones_like(a));
    }
    return o;
  };
  auto outs = f(xi);
  auto g = vjp(f, xi, ones_of(outs), args).second;
  auto g64 = vjp(f, x64, ones_of(f(x64)), args).second;
  ASSERT_EQ(g.size(), xi.size()) << what;
  for (size_t i = 0; i < xi.size(); ++i) {
    EXPECT_EQ(g[i].dtype(), xi[i].dtype()) << what << " cotangent " << i;
    expect_integer_equal(g[i], g64[i], what + " integer cotangent");
  }
  auto t = jvp(f, xi, ones_of(xi)).second;
  auto t64 = jvp(f, x64, ones_of(x64)).second;
  ASSERT_EQ(t.size(), outs.size()) << what;
  for (size_t k = 0; k < outs.size(); ++k) {
    expect_integer_equal(t[k], t64[k], what + " integer tangent");
  }
}

}  // namespace

TEST_P(OpTable, Gradients) {
  on_device_or_skip(device(), [&] {
    auto& c = entry();
    OnDevice on(device());
    auto x = case_inputs(c);
    bool any_fixed = false;
    for (auto& in : c.inputs) {
      any_fixed = any_fixed || is_fixed(in);
    }
    // Integer inputs of elementwise ops take MLX's gradient: the rule in
    // their dtype, which is the float64 rule at the same (whole) values
    // cast back (issue 33: grad of x * 10 at an int32 x is 10, not 0).
    for (Dtype t : c.dtypes) {
      if (is_integral(t) && !any_fixed && elementwise(c) &&
          c.deriv != Deriv::none) {
        SCOPED_TRACE(dtype_name(t));
        if (c.deriv == Deriv::zero) {
          // Piecewise constant (and integer-only ops, which have no float
          // form to compare with): zeros.
          rules::zero_grads(c.f, cast_inputs(c, x, t), c.name);
        } else {
          integer_grads(c.f, cast_inputs(c, x, t), c.name);
        }
      }
    }
    switch (c.deriv) {
      case Deriv::none:
        return;
      case Deriv::zero:
        rules::zero_grads(c.f, x, c.name);
        if (elementwise(c)) {
          rules::zero_grads(c.f, cast_inputs(c, x, float32), c.name);
        }
        return;
      case Deriv::second:
        rules::second_order(c.f, x, std::max(c.tol, 1e-5),
                            std::max(c.eps, 1e-5));
        [[fallthrough]];
      case Deriv::first:
        rules::grads(c.f, x, c.tol, c.eps);
        break;
    }
    for (auto& shapes : shape_variants(c)) {
      SCOPED_TRACE(::testing::PrintToString(shapes));  // input shapes
      rules::grads(c.f, draw_at(c, shapes), c.tol, c.eps);
      if (c.deriv == Deriv::second) {
        rules::second_order(c.f, draw_at(c, shapes));
      }
    }
    if (elementwise(c) && c.inputs.size() == 2) {
      // The same array as both operands: cotangents accumulate.
      Fn f = c.f;
      rules::grads([f](const Arrays& a) { return f({a[0], a[0]}); }, {x[0]},
                   c.tol, c.eps);
    }
    if (elementwise(c) &&
        std::find(c.dtypes.begin(), c.dtypes.end(), float32) != c.dtypes.end()) {
      // float32 derivatives keep the dtype and agree with float64's.
      auto x32 = cast_inputs(c, x, float32);
      auto outs = c.f(x32);
      Arrays cts;
      for (auto& o : outs) {
        cts.push_back(ones_like(o));
      }
      auto args = rules::floating_args(x32);
      auto g32 = vjp(c.f, x32, cts, args).second;
      Arrays x64 = cast_inputs(c, x32, float64);
      Arrays cts64;
      for (auto& ct : cts) {
        cts64.push_back(astype(ct, float64));
      }
      auto g64 = vjp(c.f, x64, cts64, args).second;
      for (size_t j = 0; j < g32.size(); ++j) {
        EXPECT_EQ(g32[j].dtype(), float32) << "cotangent " << j;
        expect_close(g32[j], values(g64[j]), 1e-4, 1e-5, "float32 cotangent");
      }
    }
  });
}

TEST_P(OpTable, Vmap) {
  on_device_or_skip(device(), [&] {
    auto& c = entry();
    OnDevice on(device());
    auto x = case_inputs(c);
    if (x.empty()) {
      GTEST_SKIP() << "no inputs";
    }
    std::vector<Shape> shapes;
    std::vector<rules::Maker> makers;
    unsigned seed = name_seed(c.name) ^ 0x5bd1e995u;
    for (auto& in : c.inputs) {
      shapes.push_back(in.shape);
      makers.push_back([&in, seed](const Shape& s) mutable {
        return in.draw(s, seed++);
      });
    }
    // vmap must agree with the loop to rounding: a batched kernel may take
    // another code path than a single slice (an FFT over many lines at once,
    // another split over threads), so single-precision results may differ
    // in the last bits.
    double tol = c.vmap_tol;
    for (auto& o : c.f(x)) {
      if (is_inexact(o.dtype()) && o.dtype() != float64) {
        tol = std::max(tol, 2e-6);
      }
    }
    rules::vmaps(c.f, shapes, makers, tol);
    if (elementwise(c) && c.inputs.size() == 2) {
      // Operands that broadcast inside the function.
      rules::vmaps(c.f, {Shape{2, 4}, Shape{4}}, makers, tol);
    }
  });
}

namespace {

// Every Compiled node reachable from `outs`, with its count of fused
// (non-view) ops.
std::vector<int> compiled_nodes(const Arrays& outs) {
  std::vector<int> sizes;
  std::set<uintptr_t> seen;
  std::vector<array> stack(outs.begin(), outs.end());
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) {
      continue;
    }
    if (auto* p = dynamic_cast<const Compiled*>(&a.primitive())) {
      int ops = 0;
      for (auto& n : p->tape().nodes) {
        ops += !detail::is_view_primitive(*n.prim);
      }
      sizes.push_back(ops);
    }
    for (auto& in : a.inputs()) {
      stack.push_back(in);
    }
  }
  return sizes;
}

// `x` through two fusable elementwise ops that change nothing
// (where(true, x * 1, x)); complex values pass as they are.
array through_two_ops(const array& x) {
  if (is_complex(x.dtype())) {
    return x;
  }
  auto one = astype(array(1), x.dtype());
  return where(array(true), multiply(x, one), x);
}

// Distance in ulps of the compute type (float32 for half types).
double ulp_distance(double a, double b, Dtype t) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0 : 1e30;
  }
  if (a == b) {
    return 0;
  }
  if (!is_inexact(t)) {
    return 1e30;
  }
  if (t == float64) {
    double u = std::abs(std::nextafter(a, b) - a);
    return std::abs(a - b) / std::max(u, 4.9e-324);
  }
  float fa = static_cast<float>(a);
  double u = std::abs(std::nextafter(fa, static_cast<float>(b)) - fa);
  double d = std::abs(a - b) / std::max(u, 1.4e-45);
  if (t == float16 || t == bfloat16) {
    d /= t == float16 ? 8192 : 65536;  // half-type ulps
  }
  return d;
}

}  // namespace

TEST_P(OpTable, Compile) {
  on_device_or_skip(device(), [&] {
    auto& c = entry();
    OnDevice on(device());
    // float32 for every case with float inputs: the generated float32 math
    // then runs.
    Dtype t = c.dtypes[0];
    for (Dtype d : c.dtypes) {
      if (is_floating_point(d)) {
        t = float32;
      }
    }
    auto x = cast_inputs(c, case_inputs(c), t);
    Fn f = c.f;
    Fn wrapped = [f](const Arrays& in) {
      Arrays pre;
      for (auto& a : in) {
        pre.push_back(through_two_ops(a));
      }
      Arrays out = f(pre);
      for (auto& o : out) {
        o = through_two_ops(o);
      }
      return out;
    };
    auto compiled = compile(wrapped)(x);
    auto fused = compiled_nodes(compiled);
    ASSERT_FALSE(fused.empty()) << "no Compiled node";
    EXPECT_GE(*std::max_element(fused.begin(), fused.end()), 2)
        << "a Compiled node fuses fewer than two ops";
    if (device() == Device::gpu) {
      // Each Compiled node runs as its generated kernel (NVRTC), or, for
      // an input layout the kernel does not take, node by node; never
      // node by node for want of a kernel.
      auto before = gpu::fused_kernel_stats();
      eval(compiled);
      auto after = gpu::fused_kernel_stats();
      EXPECT_EQ(after.fallbacks, before.fallbacks)
          << "a fused group had no generated kernel (see stderr)";
      bool empty = false;
      for (auto& o : compiled) {
        empty = empty || o.size() == 0;  // an empty group launches nothing
      }
      EXPECT_TRUE(empty || after.launches - before.launches +
                                   (after.unfused - before.unfused) >=
                               fused.size())
          << "a fused group did not run as a generated kernel";
    }
    auto eager = wrapped(x);
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      EXPECT_EQ(compiled[k].shape(), eager[k].shape());
      EXPECT_EQ(compiled[k].dtype(), eager[k].dtype());
      // To the precision of the least precise of the inputs' (float32) and
      // the output's dtype: a float64 output computed from float32 values
      // (sin(x32) * w64) carries float32 rounding, in which the eager vector
      // kernels and the fused functors may differ by an ulp or two.
      double tol = std::max({1e-12, 8 * resolution(eager[k].dtype()),
                             is_inexact(t) ? 8 * resolution(t) : 0.0});
      EXPECT_TRUE(allclose(compiled[k], eager[k], tol, tol, true).item<bool>())
          << "compiled output " << k << " differs from eager";
    }
    if (c.fused_ulps < 0) {
      return;
    }
    // Elementwise: the fused kernel against the eager scalar functors (the
    // vector kernels off: they stand in for the functors within ulps).
    cpu::simd::set_enabled(false);
    auto scalar = f(x);
    for (auto& o : scalar) {
      o.eval();
    }
    cpu::simd::set_enabled(true);
    for (size_t k = 0; k < scalar.size(); ++k) {
      auto got = to_vector<double>(compiled[k]);
      auto want = to_vector<double>(scalar[k]);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, ulp_distance(got[i], want[i], scalar[k].dtype()));
      }
      EXPECT_LE(worst, c.fused_ulps)
          << "fused output " << k << " vs the eager functor";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, OpTable,
    ::testing::Combine(
        ::testing::Range(0, static_cast<int>(op_table().size())),
        ::testing::Range(0, static_cast<int>(table_devices().size()))),
    [](const ::testing::TestParamInfo<Param>& info) {
      Device d = table_devices()[std::get<1>(info.param)];
      return op_table()[std::get<0>(info.param)].name +
             (d == Device::cpu ? "_cpu" : "_gpu");
    });

// Every case checks its values somewhere.
TEST(OpTableSpec, EveryCaseHasAReferenceOrANote) {
  int with_ref = 0;
  for (auto& c : op_table()) {
    EXPECT_TRUE(c.ref || !c.ref_note.empty()) << c.name;
    EXPECT_FALSE(c.dtypes.empty()) << c.name;
    with_ref += c.ref != nullptr;
  }
  // Most do it here.
  EXPECT_GE(with_ref, static_cast<int>(op_table().size()) * 3 / 4);
}

}  // namespace fluxion::test

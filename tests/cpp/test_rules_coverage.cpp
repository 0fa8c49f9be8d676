// The op-spec table (design.md §7): every primitive of the registry
// (fluxion/primitive_list.h) must appear in some case below, and every case is run
// through finite-difference gradient checks (vjp and jvp, with second order
// for smooth ops) and vmap-versus-loop checks on each input. A new primitive
// without a case fails `EveryPrimitiveIsCovered`.
#include <iostream>
#include <set>

#include "fluxion/compile.h"
#include "fluxion/export.h"
#include "fluxion/primitive_registry.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<OpCase> core_cases() {
  std::vector<OpCase> c;
  Shape s{3, 4};
  auto add_unary = [&](const std::string& name, UnaryFn g, array x,
                       bool second = true, bool grads = true) {
    c.push_back({name, unary(g), {x}, grads, second});
  };
  add_unary("abs", [](auto& x) { return abs(x); }, rnd(s, 1), false);
  add_unary("negative", [](auto& x) { return negative(x); }, rnd(s, 2));
  add_unary("sign", [](auto& x) { return sign(x); }, rnd(s, 3), false);
  add_unary("exp", [](auto& x) { return exp(x); }, rnd(s, 4));
  add_unary("expm1", [](auto& x) { return expm1(x); }, rnd(s, 5));
  add_unary("log", [](auto& x) { return log(x); }, positive(s, 6));
  add_unary("log1p", [](auto& x) { return log1p(x); }, positive(s, 7));
  add_unary("log2", [](auto& x) { return log2(x); }, positive(s, 8));
  add_unary("log10", [](auto& x) { return log10(x); }, positive(s, 9));
  add_unary("sqrt", [](auto& x) { return sqrt(x); }, positive(s, 10));
  add_unary("rsqrt", [](auto& x) { return rsqrt(x); }, positive(s, 11));
  add_unary("square", [](auto& x) { return square(x); }, rnd(s, 12));
  add_unary("reciprocal", [](auto& x) { return reciprocal(x); },
            positive(s, 13));
  add_unary("sin", [](auto& x) { return sin(x); }, rnd(s, 14));
  add_unary("cos", [](auto& x) { return cos(x); }, rnd(s, 15));
  add_unary("tan", [](auto& x) { return tan(x); }, unit(s, 16));
  add_unary("arcsin", [](auto& x) { return arcsin(x); }, unit(s, 17));
  add_unary("arccos", [](auto& x) { return arccos(x); }, unit(s, 18));
  add_unary("arctan", [](auto& x) { return arctan(x); }, rnd(s, 19));
  add_unary("sinh", [](auto& x) { return sinh(x); }, rnd(s, 20));
  add_unary("cosh", [](auto& x) { return cosh(x); }, rnd(s, 21));
  add_unary("tanh", [](auto& x) { return tanh(x); }, rnd(s, 22));
  add_unary("arcsinh", [](auto& x) { return arcsinh(x); }, rnd(s, 23));
  add_unary("arccosh", [](auto& x) { return arccosh(x); },
            positive(s, 24) + 1.0);
  add_unary("arctanh", [](auto& x) { return arctanh(x); }, unit(s, 25));
  add_unary("sigmoid", [](auto& x) { return sigmoid(x); }, rnd(s, 26));
  add_unary("erf", [](auto& x) { return erf(x); }, rnd(s, 27));
  add_unary("erfinv", [](auto& x) { return erfinv(x); }, unit(s, 28));
  add_unary("floor", [](auto& x) { return floor(x); }, rnd(s, 29), false);
  add_unary("ceil", [](auto& x) { return ceil(x); }, rnd(s, 30), false);
  add_unary("round", [](auto& x) { return round(x); }, rnd(s, 31), false);
  add_unary("logical_not", [](auto& x) { return logical_not(x); },
            rnd(s, 32), false);
  add_unary("isnan", [](auto& x) { return isnan(x); }, rnd(s, 33), false);
  add_unary("isinf", [](auto& x) { return isinf(x); }, rnd(s, 34), false);
  add_unary("isfinite", [](auto& x) { return isfinite(x); }, rnd(s, 35),
            false);
  add_unary("conjugate", [](auto& x) { return conjugate(x); }, rnd(s, 36));
  add_unary("real", [](auto& x) { return real(x); }, rnd(s, 37));
  add_unary("imag", [](auto& x) { return imag(x); }, rnd(s, 38));
  // Blocks gradients by design: finite differences see the identity.
  add_unary("stop_gradient", [](auto& x) { return stop_gradient(x); },
            rnd(s, 39), false, false);
  add_unary("copy", [](auto& x) { return copy(x); }, rnd(s, 40));
  // float32 outputs: a larger step keeps rounding out of the differences.
  c.push_back({"astype", unary([](auto& x) { return astype(x, float32); }),
               {rnd(s, 41)}, true, false, 1e-4, 1e-2});

  auto add_binary = [&](const std::string& name,
                        std::function<array(const array&, const array&)> g,
                        array a, array b, bool second = true,
                        bool grads = true) {
    c.push_back({name, binary(g), {a, b}, grads, second});
  };
  add_binary("add", [](auto& a, auto& b) { return add(a, b); }, rnd(s, 50),
             rnd(s, 51));
  add_binary("subtract", [](auto& a, auto& b) { return subtract(a, b); },
             rnd(s, 52), rnd(s, 53));
  add_binary("multiply", [](auto& a, auto& b) { return multiply(a, b); },
             rnd(s, 54), rnd(s, 55));
  add_binary("divide", [](auto& a, auto& b) { return divide(a, b); },
             rnd(s, 56), positive(s, 57));
  add_binary("floor_divide",
             [](auto& a, auto& b) { return floor_divide(a, b); }, rnd(s, 58),
             positive(s, 59), false);
  add_binary("remainder", [](auto& a, auto& b) { return remainder(a, b); },
             rnd(s, 60), positive(s, 61), false);
  add_binary("power", [](auto& a, auto& b) { return power(a, b); },
             positive(s, 62), rnd(s, 63));
  add_binary("maximum", [](auto& a, auto& b) { return maximum(a, b); },
             rnd(s, 64), rnd(s, 65), false);
  add_binary("minimum", [](auto& a, auto& b) { return minimum(a, b); },
             rnd(s, 66), rnd(s, 67), false);
  add_binary("arctan2", [](auto& a, auto& b) { return arctan2(a, b); },
             rnd(s, 68), positive(s, 69));
  add_binary("logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); },
             rnd(s, 70), rnd(s, 71));
  for (auto& [name, g] :
       std::vector<std::pair<std::string,
                             std::function<array(const array&,
                                                 const array&)>>>{
           {"equal", [](auto& a, auto& b) { return equal(a, b); }},
           {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); }},
           {"less", [](auto& a, auto& b) { return less(a, b); }},
           {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); }},
           {"greater", [](auto& a, auto& b) { return greater(a, b); }},
           {"greater_equal",
            [](auto& a, auto& b) { return greater_equal(a, b); }},
           {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); }},
           {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); }},
       }) {
    add_binary(name, g, rnd(s, 72), rnd(s, 73), false);
  }
  for (auto& [name, g] :
       std::vector<std::pair<std::string,
                             std::function<array(const array&,
                                                 const array&)>>>{
           {"bitwise_and", [](auto& a, auto& b) { return bitwise_and(a, b); }},
           {"bitwise_or", [](auto& a, auto& b) { return bitwise_or(a, b); }},
           {"bitwise_xor", [](auto& a, auto& b) { return bitwise_xor(a, b); }},
           {"left_shift", [](auto& a, auto& b) { return left_shift(a, b); }},
           {"right_shift", [](auto& a, auto& b) { return right_shift(a, b); }},
       }) {
    add_binary(name, g, ints(s, 74), abs(ints(s, 75)), false, false);
  }
  c.push_back({"where",
               [](const std::vector<array>& x) {
                 return std::vector<array>{where(x[0] > 0.0, x[1], x[2])};
               },
               {rnd(s, 80), rnd(s, 81), rnd(s, 82)}});

  // Reductions.
  for (auto& [name, g] :
       std::vector<std::pair<std::string, UnaryFn>>{
           {"sum", [](auto& x) { return sum(x, 1); }},
           {"prod", [](auto& x) { return prod(x, 0); }},
           {"max", [](auto& x) { return max(x, 1); }},
           {"min", [](auto& x) { return min(x, std::vector<int>{0, 1}); }},
           {"all", [](auto& x) { return all(x > 0.0, 1); }},
           {"any", [](auto& x) { return any(x > 0.0, 0); }},
           {"argmax", [](auto& x) { return argmax(x, 1); }},
           {"argmin", [](auto& x) { return argmin(x, 0); }},
           {"logsumexp", [](auto& x) { return logsumexp(x, 1); }},
           {"softmax", [](auto& x) { return softmax(x, 1); }},
           {"var", [](auto& x) { return var(x, 0); }},
       }) {
    add_unary(name, g, rnd(s, 90 + name.size()));
  }

  // Sorting and scans.
  for (auto& [name, g] :
       std::vector<std::pair<std::string, UnaryFn>>{
           {"sort", [](auto& x) { return sort(x, 0); }},
           {"argsort", [](auto& x) { return argsort(x, 1); }},
           {"partition", [](auto& x) { return partition(x, 1, 1); }},
           {"argpartition", [](auto& x) { return argpartition(x, -2, 0); }},
           {"topk", [](auto& x) { return topk(x, 2, 1); }},
           {"cumsum", [](auto& x) { return cumsum(x, 1); }},
           {"cumsum_reverse_exclusive",
            [](auto& x) { return cumsum(x, 0, true, false); }},
           {"cumprod", [](auto& x) { return cumprod(x, 1); }},
           {"cumprod_reverse_exclusive",
            [](auto& x) { return cumprod(x, 0, true, false); }},
           {"cummax", [](auto& x) { return cummax(x, 1); }},
           {"cummin_reverse", [](auto& x) { return cummin(x, 1, true); }},
           {"logcumsumexp", [](auto& x) { return logcumsumexp(x, 1); }},
           {"logcumsumexp_reverse",
            [](auto& x) { return logcumsumexp(x, 0, true); }},
       }) {
    add_unary(name, g, rnd(s, 130 + name.size()));
  }

  // Shapes.
  Shape s3{2, 3, 4};
  add_unary("reshape", [](auto& x) { return reshape(x, {4, 3}); }, rnd(s, 100));
  add_unary("transpose", [](auto& x) { return transpose(x, {2, 0, 1}); },
            rnd(s3, 101));
  add_unary("broadcast_to", [](auto& x) { return broadcast_to(x, {2, 3, 4}); },
            rnd({3, 1}, 102));
  add_unary("expand_dims", [](auto& x) { return expand_dims(x, 1); },
            rnd(s, 103));
  add_unary("squeeze", [](auto& x) { return squeeze(x, 1); }, rnd({3, 1, 4},
                                                                   104));
  add_unary("slice",
            [](auto& x) { return slice(x, {2, 0, 3}, {0, 3, 0}, {-1, 2, -2}); },
            rnd(s3, 105));
  add_binary("slice_update",
             [](auto& a, auto& b) {
               return slice_update(a, b, {0, 1}, {3, 4}, {2, 2});
             },
             rnd(s, 106), rnd({2, 2}, 107));
  add_binary("concatenate",
             [](auto& a, auto& b) { return concatenate({a, b}, 1); },
             rnd(s, 108), rnd({3, 2}, 109));
  // The pad value is a constant here: vmap over a batched value raises (as
  // MLX); its gradient is checked in test_shape_grad.cpp.
  add_unary("pad",
            [](auto& a) {
              return pad(a, std::vector<int>{0, 1}, {1, 0}, {2, 1},
                         array(0.25, float64));
            },
            rnd(s, 110));
  c.push_back({"take_along_axis",
               [](const std::vector<array>& x) {
                 return std::vector<array>{take_along_axis(x[0], x[1], 1)};
               },
               {rnd(s, 112), array({0, 3, 1, 1, 2, 0, 3, 3, 1, 2, 2, 0},
                                   {3, 4})}});
  c.push_back({"put_along_axis",
               [](const std::vector<array>& x) {
                 return std::vector<array>{
                     put_along_axis(x[0], x[1], x[2], 1)};
               },
               {rnd(s, 113), array({0, 3, 1, 2, 2, 0}, {3, 2}),
                rnd({3, 2}, 114)}});

  // Linear algebra, creation, random, custom.
  add_binary("matmul", [](auto& a, auto& b) { return matmul(a, b); },
             rnd({2, 3, 4}, 120), rnd({4, 5}, 121));
  c.push_back({"addmm",
               [](const std::vector<array>& x) {
                 return std::vector<array>{addmm(x[0], x[1], x[2], 0.5f,
                                                 2.0f)};
               },
               {rnd({3, 5}, 122), rnd({3, 4}, 123), rnd({4, 5}, 124)}});
  add_unary("arange", [](auto& x) { return x + arange(0, 4, float64); },
            rnd({4}, 125));
  c.push_back({"random_bits",
               [](const std::vector<array>& x) {
                 return std::vector<array>{random::bits({4}, 4, x[0])};
               },
               {random::key(7)},
               false});
  add_unary("depends",
            [](auto& x) { return depends({x * 2.0}, {exp(x)})[0]; },
            rnd(s, 126));
  add_unary("custom_function",
            [](auto& x) {
              auto f = custom_vjp(
                  [](const std::vector<array>& in) {
                    return std::vector<array>{sin(in[0])};
                  },
                  [](const std::vector<array>& p, const std::vector<array>& ct,
                     const std::vector<array>&) {
                    return std::vector<array>{cos(p[0]) * ct[0]};
                  });
              return f({x})[0];
            },
            rnd(s, 127), false);
  // LAPACK (fluxion::linalg): inputs well-conditioned or symmetric positive
  // definite; ops that read one triangle are given full matrices, so the
  // other triangle's gradient (zero) is checked too. Eigen- and singular
  // vectors are sign-normalized (their sign is arbitrary, so a loop and a
  // batch could differ), and only the first min(M, N) columns of U / rows
  // of Vt are compared for non-square inputs (the rest span an arbitrary
  // null-space basis).
  {
    auto wc = [](const Shape& sh, unsigned seed) {
      return rnd(sh, seed) + eye(sh.back(), float64) * double(sh.back());
    };
    auto spd = [](const Shape& sh, unsigned seed) {
      auto m = rnd(sh, seed);
      return matmul(m, swapaxes(m, -1, -2)) + eye(sh.back(), float64);
    };
    add_unary("linalg_inv", [](auto& x) { return linalg::inv(x); },
              wc({3, 3}, 130));
    add_binary("linalg_solve",
               [](auto& a, auto& b) { return linalg::solve(a, b); },
               wc({3, 3}, 131), rnd({3, 2}, 132));
    c.push_back({"linalg_solve_triangular",
                 [](const std::vector<array>& x) {
                   return std::vector<array>{
                       linalg::solve_triangular(x[0], x[1]),
                       linalg::solve_triangular(x[0], x[1], true)};
                 },
                 {wc({3, 3}, 133), rnd({3, 2}, 134)}, true, true});
    c.push_back({"linalg_cholesky",
                 [](const std::vector<array>& x) {
                   return std::vector<array>{linalg::cholesky(x[0]),
                                             linalg::cholesky(x[0], true)};
                 },
                 {spd({3, 3}, 135)}, true, true});
    c.push_back({"linalg_qr",
                 [](const std::vector<array>& x) {
                   auto [q, r] = linalg::qr(x[0]);
                   auto [q2, r2] = linalg::qr(x[1]);
                   return std::vector<array>{q, r, q2, r2};
                 },
                 {rnd({4, 3}, 136), rnd({2, 4}, 137)}, true, true});
    c.push_back({"linalg_eigh",
                 [](const std::vector<array>& x) {
                   auto [w, v] = linalg::eigh(x[0]);
                   auto [wu, vu] = linalg::eigh(x[0], "U");
                   auto first_row = [](const array& m) {
                     return sign(slice(m, {0, 0}, {1, m.shape(-1)}));
                   };
                   return std::vector<array>{w, v * first_row(v), wu,
                                             vu * first_row(vu),
                                             linalg::eigvalsh(x[0])};
                 },
                 {rnd({3, 3}, 138)}, true, true, 1e-5});
    c.push_back({"linalg_svd",
                 [](const std::vector<array>& x) {
                   std::vector<array> out;
                   for (auto& a : x) {
                     int m = a.shape(0), n = a.shape(1), k = std::min(m, n);
                     auto f = linalg::svd(a);
                     auto u = slice(f[0], {0, 0}, {m, k});
                     auto vt = slice(f[2], {0, 0}, {k, n});
                     auto sg = sign(slice(u, {0, 0}, {1, k}));
                     out.push_back(u * sg);
                     out.push_back(f[1]);
                     out.push_back(vt * swapaxes(sg, 0, 1));
                     out.push_back(linalg::svd(a, false)[0]);
                   }
                   return out;
                 },
                 {rnd({3, 3}, 139), rnd({4, 3}, 140), rnd({2, 3}, 141)}, true,
                 true, 1e-5});
    c.push_back({"linalg_lu",
                 [](const std::vector<array>& x) {
                   std::vector<array> out;
                   for (auto& a : x) {
                     auto f = linalg::lu(a);
                     auto [packed, piv] = linalg::lu_factor(a);
                     out.insert(out.end(), {f[0], f[1], f[2], packed, piv});
                   }
                   return out;
                 },
                 {wc({3, 3}, 142), rnd({4, 2}, 145), rnd({2, 4}, 146)}, true,
                 true});
    // Complex64 outputs: real and imaginary parts, a float32-sized step.
    // The eigenvectors' phase (sign, for real ones) is arbitrary and may
    // jump: they are compared with their first component made real
    // positive.
    c.push_back({"linalg_eig",
                 [](const std::vector<array>& x) {
                   auto [w, v] = linalg::eig(x[0]);
                   auto v0 = slice(v, {0, 0}, {1, 3});
                   auto vn = v / (v0 / astype(abs(v0), complex64));
                   return std::vector<array>{real(w), imag(w), real(vn),
                                             imag(vn)};
                 },
                 {rnd({3, 3}, 143)}, true, false, 1e-3, 1e-3});
    c.push_back({"linalg_eigvals",
                 [](const std::vector<array>& x) {
                   auto w = linalg::eigvals(x[0]);
                   return std::vector<array>{real(w), imag(w)};
                 },
                 {rnd({3, 3}, 144)}, true, false, 1e-3, 1e-3});
  }
  return c;
}

// The core table plus every family's registered table (op_cases.h).
// Built once per process: test names and every test read it (building it
// per call made each test process's start quadratic in the table's size).
const std::vector<OpCase>& cases() {
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

// Primitive names of the registry (fluxion/primitive_list.h). Every class
// is in it: the GPU kernels of backend/no_gpu are generated from the list,
// so a class missing from it fails to link.
std::set<std::string> registered_primitives() {
  std::set<std::string> names;
  for (auto& p : primitive_registry()) {
    names.insert(p.name);
  }
  // MLX's Metal kernel node cannot run on this build (no Metal): it has no
  // values, derivatives or vmap to check; test_metal_kernel.py covers it.
  names.erase("CustomKernel");
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
  for (auto& c : cases()) {
    std::set<uintptr_t> visited;
    for (auto& o : c.f(c.inputs)) {
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
  auto registered = registered_primitives();
  std::vector<std::string> missing, unregistered;
  for (auto& name : registered) {
    if (!reached.count(name)) {
      missing.push_back(name);
    }
  }
  // Compiled appears only when a case is compiled.
  for (auto& name : reached) {
    if (!registered.count(name) && name != "Sum" && name != "Prod" &&
        name != "Max" && name != "Min" && name != "All" && name != "Any" &&
        name != "ArgMax" && name != "ArgMin" && name != "NaNEqual") {
      unregistered.push_back(name);
    }
  }
  EXPECT_TRUE(missing.empty()) << "primitives without an op-spec case: "
                               << ::testing::PrintToString(missing);
  EXPECT_TRUE(unregistered.empty())
      << "primitives missing from fluxion/primitive_list.h: "
      << ::testing::PrintToString(unregistered);
}

// Which primitives lack a kernel on each backend (the registry's columns;
// every one on a build without GPU backend). Printed for the record; the
// CPU has them all.
TEST(RulesCoverage, KernelsPerBackend) {
  auto cpu_missing = kernels_missing(Device::cpu);
  auto gpu_missing = kernels_missing(Device::gpu);
  std::cout << "[kernels] " << primitive_registry().size()
            << " primitives; without a cpu kernel: " << cpu_missing.size()
            << "; without a gpu kernel: " << gpu_missing.size() << "\n";
  for (auto& n : gpu_missing) {
    std::cout << "[kernels] no gpu kernel: " << n << "\n";
  }
  EXPECT_TRUE(cpu_missing.empty()) << ::testing::PrintToString(cpu_missing);
  if (!is_available(Device::gpu)) {
    EXPECT_EQ(gpu_missing.size(), primitive_registry().size());
  }
}

// Without a GPU backend every primitive's eval_gpu raises the clear error
// naming it (the definitions generated from the registry), for every node
// the op table builds.
TEST(RulesCoverage, NoGpuKernelsRaise) {
  if (is_available(Device::gpu)) {
    GTEST_SKIP() << "a GPU backend is built";
  }
  std::set<std::string> checked;
  for (auto& c : cases()) {
    std::vector<array> stack;
    std::set<uintptr_t> visited;
    for (auto& o : c.f(c.inputs)) {
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
      std::string n = a.primitive().name();
      if (!checked.insert(n).second) {
        continue;
      }
      auto outs = a.outputs();
      try {
        a.primitive().eval_gpu(a.inputs(), outs);
        ADD_FAILURE() << n << ": eval_gpu returned";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "[eval] Cannot run " + n +
                      " on the gpu: Fluxion was built without a GPU backend.");
      }
    }
  }
  EXPECT_GE(checked.size(), primitive_registry().size() - 1);
}

// Every node's `output_shapes` (used by shapeless compile) must agree with
// the shapes the op built.
TEST(RulesCoverage, OutputShapesMatch) {
  for (auto& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<array> stack;
    std::set<uintptr_t> visited;
    for (auto& o : c.f(c.inputs)) {
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

class RulesTable : public ::testing::TestWithParam<int> {};

TEST_P(RulesTable, GradientsAndVmap) {
  auto& c = cases()[GetParam()];
  SCOPED_TRACE(c.name);
  if (c.grads) {
    check_grads(c.f, c.inputs, c.tol, c.eps);
  }
  if (c.grads && c.second_order) {
    // Second order: the vjp (with fixed cotangents) is itself checked.
    std::mt19937 gen(99);
    std::vector<array> cts;
    for (auto& o : c.f(c.inputs)) {
      cts.push_back(random_like(o, gen));
    }
    Fn f = c.f;
    // With respect to the floating inputs only (derivatives with respect
    // to integer indices raise).
    auto g = [f, cts](const std::vector<array>& x) {
      std::vector<int> args;
      for (size_t i = 0; i < x.size(); ++i) {
        if (is_floating_point(x[i].dtype())) {
          args.push_back(static_cast<int>(i));
        }
      }
      return vjp(f, x, cts, args).second;
    };
    check_grads(g, c.inputs, 1e-5);
  }
  // compile: the same outputs as eager evaluation (fused kernels may round
  // differently only in float32 transcendentals).
  {
    auto eager = c.f(c.inputs);
    auto compiled = compile(c.f)(c.inputs);
    ASSERT_EQ(eager.size(), compiled.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_EQ(eager[i].shape(), compiled[i].shape());
      EXPECT_EQ(eager[i].dtype(), compiled[i].dtype());
      EXPECT_TRUE(allclose(compiled[i], eager[i], 1e-5, 1e-7, true).item<bool>())
          << "compiled output " << i << " differs from eager";
    }
  }
  // vmap: batch each input in turn (3 variants stacked on axis 0, and on the
  // last axis), the others unmapped; then all inputs batched together.
  std::vector<std::vector<int>> axis_sets;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::vector<int> ax(c.inputs.size(), -1);
    ax[i] = 0;
    axis_sets.push_back(ax);
    ax[i] = c.inputs[i].ndim();  // new last axis
    axis_sets.push_back(ax);
  }
  axis_sets.push_back(std::vector<int>(c.inputs.size(), 0));
  // vmap must agree with the loop to rounding: a batched kernel may take
  // another code path than a single slice (an FFT over many lines at once,
  // another split over threads), so single-precision results may differ
  // in the last bits.
  double tol = 1e-9;
  for (auto& o : c.f(c.inputs)) {
    if (is_inexact(o.dtype()) && o.dtype() != float64) {
      tol = 2e-6;
    }
  }
  for (auto& ax : axis_sets) {
    std::vector<array> batched;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (ax[i] < 0) {
        batched.push_back(c.inputs[i]);
        continue;
      }
      const auto& x = c.inputs[i];
      std::vector<array> variants;
      for (int v = 0; v < 3; ++v) {
        // Keys and integer inputs are reused; floats perturbed in-domain.
        variants.push_back(is_floating_point(x.dtype())
                               ? x * (1.0 + 0.05 * v)
                               : x);
      }
      batched.push_back(stack(variants, ax[i]));
    }
    check_vmap(c.f, batched, ax, 0, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, RulesTable, ::testing::Range(0, static_cast<int>(cases().size())),
    [](const ::testing::TestParamInfo<int>& info) {
      return cases()[info.param].name;
    });

// export_function: every primitive of the table has an exported form (name
// and parameters) that rebuilds an equivalent primitive computing the same
// values. Load (reads a file) and CustomTransforms (host callables) have
// none; Compiled is exported as the primitives it fuses.
TEST(RulesCoverage, ExportRoundTrip) {
  std::set<std::string> checked;
  for (auto& c : cases()) {
    SCOPED_TRACE(c.name);
    // Record every node first: evaluating detaches the graph.
    struct Node {
      std::shared_ptr<Primitive> prim;
      std::vector<array> inputs, outputs;
    };
    std::vector<Node> nodes;
    std::vector<array> stack;
    std::set<uintptr_t> visited;
    for (auto& o : c.f(c.inputs)) {
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

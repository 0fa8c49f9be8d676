// The op table (design.md §7): one list of cases, each naming
//  - its function and inputs, every input with its domain: a maker of
//    values in it at any shape (vmap draws batched inputs from it);
//  - the dtypes its forward check runs in, and its forward reference
//    (expected outputs computed from the float64 inputs without the
//    kernels under test: host loops, std:: math, or an independent
//    composition), with a tolerance;
//  - its derivative order (none, zero, first, second) and the
//    finite-difference tolerance.
// test_op_table.cpp drives every case through forward, gradient, vmap and
// compile checks on a device (the CPU today; a GPU build will run each case
// there against the CPU). The core cases are in op_table_core.cpp; an op
// family adds its own in its own file with
//   FLUXION_REGISTER_OP_CASES(conv_cases);
// where `std::vector<OpCase> conv_cases()` builds them. Every registered
// case counts towards RulesCoverage.EveryPrimitiveIsCovered.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fluxion/ops/common.h"
#include "rule_checks.h"

// The table is written with braced lists of inputs ({normal(s), ...}), in
// which GCC 12 misreads the copy out of the initializer list as a use of
// uninitialized memory (the same false positive as export_state's, see
// primitive.h). Off for the files of the table only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace fluxion::test {

using Arrays = std::vector<array>;

// Values of a domain at any shape; `seed` varies between draws.
using Draw = std::function<array(const Shape&, unsigned seed)>;

// One input: its shape in the case and its domain.
struct In {
  Shape shape;
  Draw draw;
  std::string domain;  // for messages: "normal", "(0.5, inf)", "fixed"...
  // Fixed values (indices, keys, masks): batched by repeating them.
  In(array fixed);  // NOLINT: implicit, so `{x, array({0, 2})}` reads well
  In(Shape s, Draw d, std::string what)
      : shape(std::move(s)), draw(std::move(d)), domain(std::move(what)) {}
};

// float64 normal values (what finite differences want).
inline array normal_values(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return array(v.begin(), shape, float64);
}

inline In normal(const Shape& s) { return {s, normal_values, "normal"}; }
// |normal| + 0.5: log, sqrt, divisors.
inline In positive(const Shape& s) {
  return {s,
          [](const Shape& sh, unsigned seed) {
            return abs(normal_values(sh, seed)) + 0.5;
          },
          "(0.5, inf)"};
}
// tanh(normal) * 0.8, in (-0.8, 0.8): arcsin, arctanh, erfinv.
inline In unit(const Shape& s) {
  return {s,
          [](const Shape& sh, unsigned seed) {
            return tanh(normal_values(sh, seed)) * 0.8;
          },
          "(-0.8, 0.8)"};
}
// "[lo, hi)": appended piece by piece, since GCC 12's -Wrestrict misfires
// on `"lit" + std::to_string(x)` (GCC bug 105329).
inline std::string range_text(const char* open, double lo, double hi,
                              const char* close) {
  std::string s(open);
  s += std::to_string(lo);
  s += ", ";
  s += std::to_string(hi);
  s += close;
  return s;
}

// Uniform in [lo, hi).
inline In uniform_in(const Shape& s, double lo, double hi) {
  return {s,
          [lo, hi](const Shape& sh, unsigned seed) {
            std::mt19937 gen(seed);
            std::uniform_real_distribution<double> d(lo, hi);
            std::vector<double> v(shape_size(sh));
            for (auto& x : v) {
              x = d(gen);
            }
            return array(v.begin(), sh, float64);
          },
          range_text("[", lo, hi, ")")};
}
// Integers in [lo, hi] of dtype t.
inline In ints_in(const Shape& s, int lo, int hi, Dtype t = int32) {
  return {s,
          [lo, hi, t](const Shape& sh, unsigned seed) {
            std::mt19937 gen(seed);
            std::uniform_int_distribution<int> d(lo, hi);
            std::vector<int> v(shape_size(sh));
            for (auto& x : v) {
              x = d(gen);
            }
            return astype(array(v.begin(), sh, int32), t);
          },
          range_text("ints [", lo, hi, "]")};
}
// Any other domain: `draw` applied to normal values.
inline In from_normal(const Shape& s, std::function<array(const array&)> f,
                      std::string what) {
  return {s,
          [f](const Shape& sh, unsigned seed) {
            return f(normal_values(sh, seed));
          },
          std::move(what)};
}

// `a` (of shape `base`) repeated over the dimensions `s` has beyond it: the
// dimensions of `base` matched in order as a subsequence of `s`.
inline array repeat_into(const array& a, const Shape& s) {
  const Shape& base = a.shape();
  Shape expanded;
  size_t i = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    bool take = i < base.size() && base[i] == s[j] &&
                s.size() - j >= base.size() - i;
    // Keep enough of `s` for the rest of `base`.
    if (take) {
      expanded.push_back(s[j]);
      ++i;
    } else {
      expanded.push_back(1);
    }
  }
  return copy(broadcast_to(reshape(a, expanded), s));
}

inline In::In(array fixed)
    : shape(fixed.shape()),
      draw([fixed](const Shape& s, unsigned) {
        return s == fixed.shape() ? fixed : repeat_into(fixed, s);
      }),
      domain("fixed") {}

// A domain of structured values (well-conditioned or positive definite
// matrices): at its own shape a draw from `base`; at a batched shape (vmap)
// that draw repeated over the new dimensions, each copy scaled by its own
// factor 1 + 0.05 k, which keeps the structure whichever axis is mapped.
inline In structured(In base) {
  Shape own = base.shape;
  Draw d = base.draw;
  return {own,
          [own, d](const Shape& s, unsigned seed) {
            array x = d(own, seed);
            if (s == own) {
              return x;
            }
            array r = repeat_into(x, s);
            // Which dimensions of s are new: repeat_into's matching.
            Shape ramp_shape;
            size_t i = 0;
            int64_t extra = 1;
            for (size_t j = 0; j < s.size(); ++j) {
              bool take = i < own.size() && own[i] == s[j] &&
                          s.size() - j >= own.size() - i;
              if (take) {
                ramp_shape.push_back(1);
                ++i;
              } else {
                ramp_shape.push_back(s[j]);
                extra *= s[j];
              }
            }
            array k = reshape(arange(0.0, double(extra), float64), ramp_shape);
            return r * (1.0 + 0.05 * k);
          },
          base.domain + " (batched: scaled copies)"};
}

// How a case differentiates.
enum class Deriv {
  none,    // no derivative to check (integer-only ops, random bits, raising)
  zero,    // piecewise constant: vjp and jvp are zeros (rules::zero_grads)
  first,   // vjp and jvp against finite differences (rules::grads)
  second,  // and the vjp and jvp differentiated again (rules::second_order)
};

// Expected outputs from the float64 inputs (in case order).
using Ref = std::function<Arrays(const Arrays&)>;

struct OpCase {
  OpCase(std::string n, Fn fn, std::vector<In> in, Deriv d = Deriv::second,
         double t = 1e-6, double e = 1e-6)
      : name(std::move(n)),
        f(std::move(fn)),
        inputs(std::move(in)),
        deriv(d),
        tol(t),
        eps(e) {}
  std::string name;
  Fn f;
  std::vector<In> inputs;
  Deriv deriv;
  double tol;  // finite differences: agreement
  double eps;  // and step
  // Forward: f at each dtype (float inputs cast to it) against `ref` at
  // the cast values, within fwd_tol (relative, at float64; scaled by each
  // dtype's resolution) plus the same absolute tolerance.
  std::vector<Dtype> dtypes = {float64};
  Ref ref = {};
  double fwd_tol = 1e-12;
  // At lower precisions: this many rounding steps of the dtype under test.
  double fwd_ulps = 4;
  // Without a reference: where the values are checked instead.
  std::string ref_note = {};
  // The vmap check's tolerance (batched kernels may round differently).
  double vmap_tol = 1e-9;
  // Compile (fused float32): ulps allowed between the fused kernel and the
  // eager scalar functor, for elementwise cases (-1: not elementwise, the
  // compiled graph is compared with eager to float32 rounding).
  int fused_ulps = -1;
};

// The float dtypes elementwise ops run in.
inline const std::vector<Dtype> kFloats = {float64, float32, float16,
                                           bfloat16};

// --- reference helpers: host loops over float64 values ---

inline std::vector<double> values(const array& a) {
  return to_vector<double>(a);
}
inline array host_array(const std::vector<double>& v, const Shape& s) {
  return array(v.begin(), s, float64);
}

inline Ref ref1(std::function<double(double)> g) {
  return [g](const Arrays& x) {
    auto v = values(x[0]);
    for (auto& e : v) {
      e = g(e);
    }
    return Arrays{host_array(v, x[0].shape())};
  };
}
inline Ref ref2(std::function<double(double, double)> g) {
  return [g](const Arrays& x) {
    // Inputs broadcast first (by Fluxion: shapes only, not values).
    auto s = broadcast_shapes(x[0].shape(), x[1].shape(), "ref2");
    auto a = values(broadcast_to(x[0], s));
    auto b = values(broadcast_to(x[1], s));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = g(a[i], b[i]);
    }
    return Arrays{host_array(a, s)};
  };
}

// A row-major host array, for references over axes.
struct Host {
  Shape shape;
  std::vector<double> v;
  explicit Host(const array& a) : shape(a.shape()), v(values(a)) {}
  Host(Shape s, std::vector<double> d) : shape(std::move(s)), v(std::move(d)) {}
  array to_array() const { return host_array(v, shape); }
  // Strides of the row-major layout.
  std::vector<int64_t> strides() const {
    std::vector<int64_t> st(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
      st[d] = st[d + 1] * shape[d + 1];
    }
    return st;
  }
};

// Calls g(line) -> new line for every 1-D line along `axis`; the result's
// axis has the length of g's lines.
inline Host along_axis(
    const Host& h, int axis,
    const std::function<std::vector<double>(std::vector<double>)>& g) {
  int nd = static_cast<int>(h.shape.size());
  axis = axis < 0 ? axis + nd : axis;
  auto st = h.strides();
  int64_t n = h.shape[axis];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= h.shape[d];
  for (int d = axis + 1; d < nd; ++d) inner *= h.shape[d];
  Shape out_shape = h.shape;
  std::vector<double> out;
  int64_t m = -1;
  std::vector<std::vector<double>> lines;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line(n);
      for (int64_t k = 0; k < n; ++k) {
        line[k] = h.v[o * n * inner + k * inner + i];
      }
      lines.push_back(g(line));
      m = static_cast<int64_t>(lines.back().size());
    }
  }
  out_shape[axis] = static_cast<int>(m);
  out.resize(outer * m * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto& line = lines[o * inner + i];
      for (int64_t k = 0; k < m; ++k) {
        out[o * m * inner + k * inner + i] = line[k];
      }
    }
  }
  (void)st;
  return {out_shape, out};
}

// A reduction of axis `axis` of input 0 by g(line) -> value (the axis
// dropped).
inline Ref ref_reduce(int axis,
                      std::function<double(const std::vector<double>&)> g) {
  return [axis, g](const Arrays& x) {
    Host h = along_axis(Host(x[0]), axis, [&](std::vector<double> line) {
      return std::vector<double>{g(line)};
    });
    int nd = static_cast<int>(h.shape.size());
    int ax = axis < 0 ? axis + nd : axis;
    h.shape.erase(h.shape.begin() + ax);
    return Arrays{h.to_array()};
  };
}
// A function of input 0 line by line along `axis`.
inline Ref ref_lines(int axis,
                     std::function<std::vector<double>(std::vector<double>)> g) {
  return [axis, g](const Arrays& x) {
    return Arrays{along_axis(Host(x[0]), axis, g).to_array()};
  };
}

inline Fn unary(UnaryFn g) {
  return [g](const Arrays& x) { return Arrays{g(x[0])}; };
}
inline Fn binary(std::function<array(const array&, const array&)> g) {
  return [g](const Arrays& x) { return Arrays{g(x[0], x[1])}; };
}

using OpCaseFamily = std::vector<OpCase> (*)();

inline std::vector<OpCaseFamily>& op_case_registry() {
  static std::vector<OpCaseFamily> families;
  return families;
}

inline bool register_op_cases(OpCaseFamily f) {
  op_case_registry().push_back(f);
  return true;
}

// The whole table: op_table_core.cpp's cases plus every family's, built
// once per process (test names and every test read it).
const std::vector<OpCase>& op_table();
// A case's inputs at their shapes (float64 floats), the same every call.
Arrays case_inputs(const OpCase& c);

}  // namespace fluxion::test

#define FLUXION_REGISTER_OP_CASES(fn)                              \
  [[maybe_unused]] static const bool fluxion_op_cases_##fn =       \
      ::fluxion::test::register_op_cases(&fn)

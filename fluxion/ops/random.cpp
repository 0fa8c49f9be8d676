#include "fluxion/ops/random.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/sort.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion::random {

namespace {

using Key = std::pair<uint32_t, uint32_t>;

Key key_of(uint64_t seed) {
  return {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
}

array key_array(Key k) { return array({k.first, k.second}); }

// The global key. It lives on the host: splitting it is two threefry calls
// under a lock, so calls without a key add no graph nodes and threads never
// share an unevaluated key. The values equal those of split(key).
class KeySequence {
 public:
  static KeySequence& global() {
    static auto* seq = new KeySequence(static_cast<uint64_t>(
        std::chrono::system_clock::now().time_since_epoch().count()));
    return *seq;
  }
  void seed(uint64_t s) {
    std::lock_guard<std::mutex> lk(mu_);
    key_ = key_of(s);
  }
  // Split the key (MLX): keep row 0 of split(key, 2), hand out row 1. Its
  // four words are the halves of threefry2x32 at (0, 2) and (1, 3).
  array next() {
    std::lock_guard<std::mutex> lk(mu_);
    Key a = threefry2x32(key_, {0, 2});
    Key b = threefry2x32(key_, {1, 3});
    key_ = {a.first, b.first};
    return key_array({a.second, b.second});
  }

 private:
  explicit KeySequence(uint64_t s) : key_(key_of(s)) {}
  std::mutex mu_;
  Key key_;
};

std::string op_tag(const char* op) { return std::string("[") + op + "] "; }

void check_key(const array& key, const char* op) {
  if (key.dtype() != uint32 || key.shape() != Shape{2}) {
    throw std::invalid_argument(
        op_tag(op) +
        "Expected a key of shape (2) and dtype uint32; got shape " +
        shape_str(key.shape()) + " and dtype " + dtype_name(key.dtype()) + ".");
  }
}

void check_shape(const Shape& shape, const char* op) {
  if (std::any_of(shape.begin(), shape.end(), [](int d) { return d < 0; })) {
    throw std::invalid_argument(op_tag(op) +
                                "Negative dimensions are not allowed; got "
                                "shape " +
                                shape_str(shape) + ".");
  }
}

void check_floating(Dtype dtype, const char* op) {
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument(
        op_tag(op) + "Only real floating point dtypes are supported; got " +
        dtype_name(dtype) + ".");
  }
}

// Call only once every argument is validated: taking the global key changes
// the global state.
array resolve_key(const std::optional<array>& key, const char* op) {
  if (!key) {
    return KeySequence::global().next();
  }
  check_key(*key, op);
  return *key;
}

Dtype bits_dtype(int width) {
  return width == 1 ? uint8 : width == 2 ? uint16 : uint32;
}

array make_bits(const Shape& shape, int width, const array& key, Stream st) {
  return array(shape, bits_dtype(width),
               std::make_shared<RandomBits>(st, shape, width), {key});
}

// The dtype's precision p (significand bits), smallest normal and smallest
// subnormal.
struct FloatInfo {
  int p;
  double min_normal, denorm_min;
};
FloatInfo float_info(Dtype t) {
  switch (t.val) {
    case Dtype::Val::float16:
      return {11, std::ldexp(1.0, -14), std::ldexp(1.0, -24)};
    case Dtype::Val::bfloat16:
      return {8, std::ldexp(1.0, -126), std::ldexp(1.0, -133)};
    case Dtype::Val::float32:
      return {24, std::ldexp(1.0, -126), std::ldexp(1.0, -149)};
    default:
      return {53, std::numeric_limits<double>::min(),
              std::numeric_limits<double>::denorm_min()};
  }
}

// Uniform values in [0, 1). float32 and the half types follow MLX, so the
// values are MLX's for the same key: a 32-bit word over 2^32 - 1 in float32,
// capped at the dtype's largest value below 1, then rounded to the dtype.
// float64 (which MLX's uniform refuses) uses 53 random bits on the grid
// k * 2^-53, exactly.
array unit(const Shape& shape, Dtype t, const array& key, Stream st) {
  if (t != float64) {
    float below_one = t == float32    ? std::nextafter(1.0f, 0.0f)
                      : t == float16  ? 1.0f - std::ldexp(1.0f, -11)
                                      : 1.0f - std::ldexp(1.0f, -8);
    auto u = divide(astype(make_bits(shape, 4, key, st), float32, st),
                    array(4294967295.0f, float32), st);
    return astype(minimum(u, array(below_one, float32), st), t, st);
  }
  auto top_bits = [&](const array& k, int keep) {
    auto b = make_bits(shape, 4, k, st);
    int drop = 32 - keep;
    return drop == 0 ? b : right_shift(b, array(drop, b.dtype()), st);
  };
  // 32 + 21 bits from two independent words.
  auto [k1, k2] = split(key, st);
  auto grid = add(multiply(astype(top_bits(k1, 32), float64, st),
                           array(std::ldexp(1.0, 21)), st),
                  astype(top_bits(k2, 21), float64, st), st);
  return multiply(grid, array(std::ldexp(1.0, -53), t), st);
}

// The largest value of dtype `t` below each element of `x` (x finite).
// x * (1 - 2^-p) rounds to it for positive normal x and x / (1 - 2^-p) for
// negative normal x; at and below the smallest normal the spacing is the
// smallest subnormal, so subtracting it is exact.
array below(const array& x, Dtype t, Stream st) {
  auto info = float_info(t);
  auto c = array(1.0 - std::ldexp(1.0, -info.p), t);
  auto normal = where(greater(x, array(0, t), st), multiply(x, c, st),
                      divide(x, c, st), st);
  auto tiny = subtract(x, array(info.denorm_min, t), st);
  return where(less_equal(abs(x, st), array(info.min_normal, t), st), tiny,
               normal, st);
}

array uniform_impl(const array& low, const array& high, const Shape& shape,
                   Dtype dtype, const std::optional<array>& key, const char* op,
                   Stream st) {
  check_floating(dtype, op);
  check_shape(shape, op);
  bool ok = true;
  try {
    ok =
        broadcast_shapes(shape, broadcast_shapes(low.shape(), high.shape(), op),
                         op) == shape;
  } catch (const std::invalid_argument&) {
    ok = false;
  }
  if (!ok) {
    throw std::invalid_argument(
        op_tag(op) + "Cannot generate values of shape " + shape_str(shape) +
        " from low and high with shapes " + shape_str(low.shape()) + " and " +
        shape_str(high.shape()) + ".");
  }
  auto k = resolve_key(key, op);
  auto lo = astype(low, dtype, st);
  auto hi = astype(high, dtype, st);
  auto out = add(
      lo, multiply(subtract(hi, lo, st), unit(shape, dtype, k, st), st), st);
  // lo + (hi - lo) * u can round up to hi (e.g. lo = 2^24 - 1, hi = 2^24 in
  // float32): move such values just below hi. Reversed bounds (hi < lo) are
  // left alone.
  auto bad = logical_and(greater_equal(out, hi, st), less(lo, hi, st), st);
  return where(bad, below(hi, dtype, st), out, st);
}

}  // namespace

array key(uint64_t seed) { return key_array(key_of(seed)); }

void seed(uint64_t seed) { KeySequence::global().seed(seed); }

array split(const array& key, int num, StreamOrDevice s) {
  check_key(key, "random.split");
  if (num < 0) {
    throw std::invalid_argument(
        "[random.split] The number of keys must be non-negative; got " +
        std::to_string(num) + ".");
  }
  return make_bits({num, 2}, 4, key, to_stream(s));
}

std::pair<array, array> split(const array& key, StreamOrDevice s) {
  check_key(key, "random.split");
  auto st = to_stream(s);
  // Rows 0 and 1 of split(key, 2) (MLX).
  auto both = make_bits({2, 2}, 4, key, st);
  return {reshape(slice(both, {0, 0}, {1, 2}, st), {2}, st),
          reshape(slice(both, {1, 0}, {2, 2}, st), {2}, st)};
}

array bits(const Shape& shape, int width, const std::optional<array>& key,
           StreamOrDevice s) {
  if (width != 1 && width != 2 && width != 4) {
    throw std::invalid_argument(
        "[random.bits] The width must be 1, 2 or 4 bytes; got " +
        std::to_string(width) + ".");
  }
  check_shape(shape, "random.bits");
  auto k = resolve_key(key, "random.bits");
  return make_bits(shape, width, k, to_stream(s));
}

array uniform(const array& low, const array& high, const Shape& shape,
              Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  return uniform_impl(low, high, shape, dtype, key, "random.uniform",
                      to_stream(s));
}

array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key,
              StreamOrDevice s) {
  check_floating(dtype, "random.uniform");
  check_shape(shape, "random.uniform");
  auto k = resolve_key(key, "random.uniform");
  return unit(shape, dtype, k, to_stream(s));
}

namespace {

// Standard normal values in dtype t (float32 or float64).
array standard_normal(const Shape& shape, Dtype t,
                      const std::optional<array>& key, Stream st) {
  if (t == complex64) {
    // The standard complex normal (as MLX): independent real and imaginary
    // parts of variance 1/2 each, so that E|z|^2 = 1. erfinv(u) for u
    // uniform in (-1, 1) is N(0, 1/2).
    Shape two = shape;
    two.push_back(2);
    float lo = std::nextafter(-1.0f, 0.0f);
    auto u = uniform_impl(array(lo, float32), array(1.0f, float32), two,
                          float32, key, "random.normal", st);
    auto n = astype(erfinv(u, st), complex64, st);
    Shape b(two.size(), 0), e = two;
    e.back() = 1;
    auto re = squeeze(slice(n, b, e, st), -1, st);
    b.back() = 1;
    e.back() = 2;
    auto im = squeeze(slice(n, b, e, st), -1, st);
    return add(re, multiply(im, array(complex64_t(0.0f, 1.0f)), st), st);
  }
  // u is strictly inside (-1, 1), where erfinv is finite.
  double lo =
      t == float64 ? std::nextafter(-1.0, 0.0) : std::nextafter(-1.0f, 0.0f);
  auto u = uniform_impl(array(lo, t), array(1.0, t), shape, t, key,
                        "random.normal", st);
  return multiply(array(std::sqrt(2.0), t), erfinv(u, st), st);
}

// Half types sample in float32 for finer tails, then round.
Dtype normal_compute_type(Dtype dtype) {
  return dtype == float64 || dtype == complex64 ? dtype : float32;
}

// normal()'s samples, composed as MLX's so the values are MLX's for the
// same key: erfinv of a float32 uniform in (-1, 1) (finer tails for the
// half types), rounded to the dtype, times sqrt(2) * scale in the dtype,
// plus loc. float64 (which MLX samples in float32) draws its uniform in
// float64. complex64: the standard complex normal, times scale, plus loc.
// Array parameters stay in the graph, so gradients reach them.
array normal_samples(const Shape& shape, Dtype dtype,
                     const std::optional<array>& loc,
                     const std::optional<array>& scale,
                     const std::optional<array>& key, Stream st) {
  if (dtype == complex64) {
    auto z = standard_normal(shape, complex64, key, st);
    if (scale) {
      z = multiply(z, astype(*scale, dtype, st), st);
    }
    if (loc) {
      z = add(z, astype(*loc, dtype, st), st);
    }
    return z;
  }
  Dtype t = dtype == float64 ? float64 : float32;
  double lo =
      t == float64 ? std::nextafter(-1.0, 0.0) : std::nextafter(-1.0f, 0.0f);
  auto u = uniform_impl(array(lo, t), array(1.0, t), shape, t, key,
                        "random.normal", st);
  auto applied = array(std::sqrt(2.0), dtype);
  if (scale) {
    applied = multiply(applied, astype(*scale, dtype, st), st);
  }
  auto z = multiply(applied, astype(erfinv(u, st), dtype, st), st);
  if (loc) {
    z = add(astype(*loc, dtype, st), z, st);
  }
  return z;
}

// normal() takes real floating point dtypes and complex64.
void check_normal_dtype(Dtype dtype) {
  if (dtype != complex64) {
    check_floating(dtype, "random.normal");
  }
}

}  // namespace

array normal(const Shape& shape, Dtype dtype, float loc, float scale,
             const std::optional<array>& key, StreamOrDevice s) {
  check_normal_dtype(dtype);
  std::optional<array> l, sc;
  if (loc != 0.0f) {
    l = array(loc, dtype);
  }
  if (scale != 1.0f) {
    sc = array(scale, dtype);
  }
  return normal_samples(shape, dtype, l, sc, key, to_stream(s));
}

array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s) {
  check_normal_dtype(dtype);
  check_shape(shape, "random.normal");
  for (const auto* p : {&loc, &scale}) {
    if (!*p) {
      continue;
    }
    const char* which = p == &loc ? "loc" : "scale";
    if (!is_floating_point((*p)->dtype()) &&
        !(dtype == complex64 && is_complex((*p)->dtype()))) {
      throw std::invalid_argument(
          std::string("[random.normal] ") + which +
          " must have a real floating point dtype; got " +
          dtype_name((*p)->dtype()) + ".");
    }
    bool ok = true;
    try {
      ok = broadcast_shapes(shape, (*p)->shape(), "random.normal") == shape;
    } catch (const std::invalid_argument&) {
      ok = false;
    }
    if (!ok) {
      throw std::invalid_argument(std::string("[random.normal] ") + which +
                                  " with shape " + shape_str((*p)->shape()) +
                                  " cannot be broadcast to shape " +
                                  shape_str(shape) + ".");
    }
  }
  // Validation is done: the samples may now take the global key.
  return normal_samples(shape, dtype, loc, scale, key, to_stream(s));
}

array randint(const array& low, const array& high, const Shape& shape,
              Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  if (dtype == bool_) {
    // Booleans draw integers from [low, high) and keep whether they are
    // nonzero (MLX): randint(0, 2, dtype=bool) covers both values.
    return astype(randint(low, high, shape, int64, key, s), bool_, s);
  }
  if (!is_integral(dtype)) {
    throw std::invalid_argument(
        "[random.randint] Only integer and bool dtypes are supported; got " +
        std::string(dtype_name(dtype)) + ".");
  }
  auto st = to_stream(s);
  // float64 carries 53 random bits: exact and unbiased (to 2^-53) for any
  // range below 2^53. The uniform is below high, so its floor is too.
  auto u = uniform_impl(low, high, shape, float64, key, "random.randint", st);
  auto r = astype(floor(u, st), dtype, st);
  // An empty range [low, high) with high <= low gives low (MLX).
  auto lo = astype(low, dtype, st);
  return where(less_equal(high, low, st), broadcast_to(lo, r.shape(), st), r,
               st);
}

array bernoulli(const array& p, const Shape& shape,
                const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(p.dtype())) {
    throw std::invalid_argument(
        "[random.bernoulli] p must have a real floating point dtype; got " +
        std::string(dtype_name(p.dtype())) + ".");
  }
  check_shape(shape, "random.bernoulli");
  bool ok = true;
  try {
    ok = broadcast_shapes(shape, p.shape(), "random.bernoulli") == shape;
  } catch (const std::invalid_argument&) {
    ok = false;
  }
  if (!ok) {
    throw std::invalid_argument(
        "[random.bernoulli] p with shape " + shape_str(p.shape()) +
        " cannot be broadcast to shape " + shape_str(shape) + ".");
  }
  auto k = resolve_key(key, "random.bernoulli");
  auto st = to_stream(s);
  // MLX: a 32-bit word below p scaled to just above 2^32 - 1 (so p >= 1 is
  // always true and p <= 0 never), compared in p's precision (at least
  // float32).
  Dtype t = p.dtype() == float64 ? float64 : float32;
  const float upper = std::nextafter(4294967295.0f,
                                     std::numeric_limits<float>::max());
  auto scaled = multiply(astype(p, t, st), array(upper, t), st);
  return less(astype(make_bits(shape, 4, k, st), t, st), scaled, st);
}

array bernoulli(const array& p, const std::optional<array>& key,
                StreamOrDevice s) {
  return bernoulli(p, p.shape(), key, s);
}

array bernoulli(const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(array(0.5f), Shape{}, key, s);
}

namespace {

// `shape` broadcast with `other` must be `shape` itself.
bool broadcasts_to(const Shape& other, const Shape& shape, const char* op) {
  try {
    return broadcast_shapes(shape, other, op) == shape;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

array truncated_normal(const array& lower, const array& upper,
                       const std::optional<Shape>& shape, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  const char* op = "random.truncated_normal";
  check_floating(dtype, op);
  Shape bounds;
  try {
    bounds = broadcast_shapes(lower.shape(), upper.shape(), op);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(
        op_tag(op) + "lower with shape " + shape_str(lower.shape()) +
        " and upper with shape " + shape_str(upper.shape()) +
        " cannot be broadcast together.");
  }
  Shape out_shape = shape.value_or(bounds);
  check_shape(out_shape, op);
  if (!broadcasts_to(bounds, out_shape, op)) {
    throw std::invalid_argument(
        op_tag(op) + "Cannot generate values of shape " + shape_str(out_shape) +
        " from bounds of shape " + shape_str(bounds) + ".");
  }
  auto k = resolve_key(key, op);
  auto st = to_stream(s);
  Dtype t = normal_compute_type(dtype);
  auto sqrt2 = array(std::sqrt(2.0), t);
  auto lo = astype(lower, t, st);
  auto hi = astype(upper, t, st);
  // u uniform between the CDF values (as erf) of the bounds.
  auto a = erf(divide(lo, sqrt2, st), st);
  auto b = erf(divide(hi, sqrt2, st), st);
  auto u = uniform_impl(a, b, out_shape, t, k, op, st);
  auto z = multiply(erfinv(u, st), sqrt2, st);
  // Rounding in erf/erfinv may step just outside the bounds; reversed
  // bounds (upper <= lower) give lower (MLX).
  z = minimum(maximum(z, lo, st), hi, st);
  z = where(less_equal(hi, lo, st), broadcast_to(lo, z.shape(), st), z, st);
  return astype(z, dtype, st);
}

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key,
             StreamOrDevice s) {
  const char* op = "random.gumbel";
  check_floating(dtype, op);
  check_shape(shape, op);
  auto st = to_stream(s);
  Dtype t = normal_compute_type(dtype);
  // u in [tiny, 1): both logarithms stay finite.
  auto u = uniform_impl(array(float_info(t).min_normal, t), array(1.0, t),
                        shape, t, key, op, st);
  return astype(negative(log(negative(log(u, st), st), st), st), dtype, st);
}

array laplace(const Shape& shape, Dtype dtype, float loc, float scale,
              const std::optional<array>& key, StreamOrDevice s) {
  const char* op = "random.laplace";
  check_floating(dtype, op);
  check_shape(shape, op);
  auto st = to_stream(s);
  Dtype t = normal_compute_type(dtype);
  double lo =
      t == float64 ? std::nextafter(-1.0, 0.0) : std::nextafter(-1.0f, 0.0f);
  // Inverse CDF on u in (-1, 1): -sign(u) log(1 - |u|) is finite.
  auto u = uniform_impl(array(lo, t), array(1.0, t), shape, t, key, op, st);
  auto z = multiply(negative(sign(u, st), st),
                    log1p(negative(abs(u, st), st), st), st);
  // Rounded to `dtype`, then scaled in it (as normal).
  z = astype(z, dtype, st);
  return add(multiply(z, array(scale, dtype), st), array(loc, dtype), st);
}

array categorical(const array& logits, int axis,
                  const std::optional<Shape>& shape,
                  std::optional<int> num_samples,
                  const std::optional<array>& key, StreamOrDevice s) {
  const char* op = "random.categorical";
  if (shape && num_samples) {
    throw std::invalid_argument(
        op_tag(op) + "At most one of shape or num_samples can be given.");
  }
  if (logits.ndim() == 0) {
    throw std::invalid_argument(op_tag(op) +
                                "logits must have at least one dimension.");
  }
  if (is_complex(logits.dtype())) {
    throw std::invalid_argument(op_tag(op) + "logits must be real; got dtype " +
                                dtype_name(logits.dtype()) + ".");
  }
  int ax = normalize_axis(axis, logits.ndim(), op);
  if (logits.shape()[ax] == 0) {
    throw std::invalid_argument(
        op_tag(op) + "No categories along axis " + std::to_string(axis) +
        " of logits with shape " + shape_str(logits.shape()) + ".");
  }
  Shape reduced = logits.shape();
  reduced.erase(reduced.begin() + ax);
  auto st = to_stream(s);
  array l = logits;
  Shape out_shape = reduced;
  if (num_samples) {
    if (*num_samples < 0) {
      throw std::invalid_argument(op_tag(op) +
                                  "num_samples must be non-negative; got " +
                                  std::to_string(*num_samples) + ".");
    }
    out_shape.push_back(*num_samples);
    l = expand_dims(logits, -1, st);
  } else if (shape) {
    check_shape(*shape, op);
    if (!broadcasts_to(reduced, *shape, op)) {
      throw std::invalid_argument(
          op_tag(op) + "shape " + shape_str(*shape) +
          " does not broadcast with the logits' shape without the axis, " +
          shape_str(reduced) + ".");
    }
    out_shape = *shape;
  }
  // The category axis of the noise, placed so that the logits align with
  // the noise from the right.
  int offset = static_cast<int>(out_shape.size()) - (l.ndim() - 1) + ax;
  Shape noise_shape = out_shape;
  noise_shape.insert(noise_shape.begin() + offset, logits.shape()[ax]);
  Dtype t = logits.dtype() == float64 ? float64 : float32;
  auto g = gumbel(noise_shape, t, key, st);
  return argmax(add(g, astype(l, t, st), st), offset, false, st);
}

array permutation(const array& x, int axis, const std::optional<array>& key,
                  StreamOrDevice s) {
  const char* op = "random.permutation";
  if (x.ndim() == 0) {
    throw std::invalid_argument(op_tag(op) +
                                "x must have at least one dimension.");
  }
  int ax = normalize_axis(axis, x.ndim(), op);
  auto k = resolve_key(key, op);
  auto st = to_stream(s);
  // Sorting 32 random bits: ties (equal words) are rare and resolved by
  // position, so the permutation is uniform up to them.
  auto order = argsort(make_bits({x.shape()[ax]}, 4, k, st), 0, st);
  return take(x, order, ax, st);
}

array permutation(int n, const std::optional<array>& key, StreamOrDevice s) {
  if (n < 0) {
    throw std::invalid_argument(
        "[random.permutation] n must be non-negative; got " +
        std::to_string(n) + ".");
  }
  return permutation(arange(n, s), 0, key, s);
}

array multivariate_normal(const array& mean, const array& cov,
                          const Shape& shape, Dtype dtype,
                          const std::optional<array>& key, StreamOrDevice s) {
  const char* op = "random.multivariate_normal";
  if (dtype != float32 && dtype != float64) {
    throw std::invalid_argument(op_tag(op) +
                                "dtype must be float32 or float64; got " +
                                dtype_name(dtype) + ".");
  }
  check_shape(shape, op);
  if (mean.ndim() < 1) {
    throw std::invalid_argument(
        op_tag(op) + "mean must have at least one dimension; got shape " +
        shape_str(mean.shape()) + ".");
  }
  int n = mean.shape().back();
  if (cov.ndim() < 2 || cov.shape()[cov.ndim() - 1] != n ||
      cov.shape()[cov.ndim() - 2] != n) {
    throw std::invalid_argument(
        op_tag(op) + "cov must have shape (..., " + std::to_string(n) + ", " +
        std::to_string(n) + ") for mean of shape " + shape_str(mean.shape()) +
        "; got " + shape_str(cov.shape()) + ".");
  }
  Shape batch;
  try {
    batch =
        broadcast_shapes(Shape(mean.shape().begin(), mean.shape().end() - 1),
                         Shape(cov.shape().begin(), cov.shape().end() - 2), op);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(op_tag(op) + "The batch shapes of mean " +
                                shape_str(mean.shape()) + " and cov " +
                                shape_str(cov.shape()) +
                                " cannot be broadcast together.");
  }
  if (!broadcasts_to(batch, shape, op)) {
    throw std::invalid_argument(op_tag(op) + "shape " + shape_str(shape) +
                                " does not broadcast with the batch shape " +
                                shape_str(batch) + " of mean and cov.");
  }
  auto k = resolve_key(key, op);
  auto st = to_stream(s);
  Shape out_shape = shape;
  out_shape.push_back(n);
  // cov = V diag(w) V^T, so L = V diag(sqrt(w)) has L L^T = cov: unlike a
  // Cholesky factor this also covers singular (semi-definite) covariances.
  auto [w, v] = linalg::eigh(astype(cov, dtype, st), "L", st);
  auto root = sqrt(maximum(w, zeros_like(w, st), st), st);
  auto l = multiply(v, expand_dims(root, -2, st), st);
  auto z = standard_normal(out_shape, dtype, k, st);
  // (L z)_i = sum_j L_ij z_j, broadcasting the batch dimensions.
  auto lz = sum(multiply(l, expand_dims(z, -2, st), st), -1, false, st);
  return add(astype(mean, dtype, st), lz, st);
}

bool RandomBits::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const RandomBits&>(o);
  return r.shape_ == shape_ && r.width_ == width_;
}

std::vector<PrimitiveArg> RandomBits::state() const {
  return export_state(export_ints(shape_), int64_t{width_});
}

std::shared_ptr<Primitive> RandomBits::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "RandomBits");
  return std::make_shared<RandomBits>(s, a.shp(0), a.i32(1));
}

std::vector<Shape> RandomBits::output_shapes(const std::vector<array>& in) {
  Shape out(in[0].shape().begin(), in[0].shape().end() - 1);
  out.insert(out.end(), shape_.begin(), shape_.end());
  return {out};
}

// Random bits are integers: no derivative exists, with respect to the key
// or anything else, so both rules give zeros (the vjp like the key, the jvp
// like the output), as MLX does for integer outputs.
std::vector<array> RandomBits::vjp(const std::vector<array>& primals,
                                   const std::vector<array>&,
                                   const std::vector<int>& argnums,
                                   const std::vector<array>&) {
  std::vector<array> vjps;
  for (int a : argnums) {
    vjps.push_back(zeros_like(primals[a], stream()));
  }
  return vjps;
}

std::vector<array> RandomBits::jvp(const std::vector<array>& primals,
                                   const std::vector<array>&,
                                   const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], bits_dtype(width_), stream())};
}

// The node already draws one independent stream per key of a (..., 2) key
// batch, the batch shape leading the output: a batch of keys is mapped by
// moving the map axis to the front of the key batch.
std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto keys =
      axes[0] <= 0 ? inputs[0] : moveaxis(inputs[0], axes[0], 0, stream());
  auto shape = output_shapes({keys})[0];
  return std::make_pair(
      std::vector<array>{
          array(std::move(shape), bits_dtype(width_),
                std::make_shared<RandomBits>(stream(), shape_, width_),
                {keys})},
      std::vector<int>{0});
}

}  // namespace fluxion::random

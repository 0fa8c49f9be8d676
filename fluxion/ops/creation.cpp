#include "fluxion/ops/creation.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"
#include "fluxion/transforms.h"

namespace fluxion {

namespace {

// Number of elements of arange(start, stop, step); the arguments are valid.
int arange_size(double start, double stop, double step) {
  if (std::isinf(step)) {
    // One element when the range is not empty: start + 0 * inf is start.
    return (step > 0 ? start < stop : start > stop) ? 1 : 0;
  }
  double n = std::ceil((stop - start) / step);
  return n > 0 ? static_cast<int>(n) : 0;
}

void check_matrix_dims(int n, int m, const char* op) {
  if (n < 0 || m < 0) {
    std::ostringstream msg;
    msg << "[" << op << "] The number of rows and columns must be "
        << "non-negative; got n=" << n << " and m=" << m << ".";
    throw std::invalid_argument(msg.str());
  }
}

}  // namespace

array full(Shape shape, const array& vals, Dtype dtype, StreamOrDevice s) {
  if (std::any_of(shape.begin(), shape.end(), [](int d) { return d < 0; })) {
    throw std::invalid_argument(
        "[full] Negative dimensions are not allowed; "
        "got shape " +
        shape_str(shape) + ".");
  }
  bool ok = vals.ndim() <= static_cast<int>(shape.size());
  for (int i = 1; ok && i <= vals.ndim(); ++i) {
    int d = vals.shape(-i);
    ok = d == 1 || d == shape[shape.size() - i];
  }
  if (!ok) {
    throw std::invalid_argument("[full] Cannot broadcast values of shape " +
                                shape_str(vals.shape()) + " to shape " +
                                shape_str(shape) + ".");
  }
  auto st = to_stream(s);
  auto v = astype(vals, dtype, st);
  if (v.shape() == shape) {
    return v;
  }
  // As MLX's Full: the result owns a buffer of its own (a writeable NumPy
  // view, memory that counts as active), not a broadcast view of `vals`.
  // Under a transformation the broadcast stays a view: compile folds and
  // fuses broadcast constants, and shapeless traces re-broadcast them.
  if (in_tracing()) {
    return broadcast_to(v, shape, st);
  }
  return contiguous(broadcast_to(v, shape, st), false, st);
}

array full(Shape shape, const array& vals, StreamOrDevice s) {
  return full(std::move(shape), vals, vals.dtype(), s);
}

array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(0, dtype), s);
}

array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(1, dtype), s);
}

array zeros_like(const array& a, StreamOrDevice s) {
  return zeros(a.shape(), a.dtype(), s);
}

array ones_like(const array& a, StreamOrDevice s) {
  return ones(a.shape(), a.dtype(), s);
}

array full_like(const array& a, const array& vals, StreamOrDevice s) {
  auto v = full(a.shape(), vals, a.dtype(), s);
  if (!in_tracing() || !a.is_tracer()) {
    return v;
  }
  // Traced (e.g. by a shapeless compile): the result must follow a's shape
  // when the trace is replayed on other shapes, so it is a select that
  // reads `a` (and ignores its values) rather than a broadcast to a shape
  // fixed now. Eager calls keep the plain broadcast, which reads nothing.
  auto st = to_stream(s);
  return where(full(a.shape(), array(true), bool_, st), v, a, st);
}

// --- arange ---

array arange(double start, double stop, double step, Dtype dtype,
             StreamOrDevice s) {
  if (dtype == bool_) {
    throw std::invalid_argument("[arange] bool is not supported.");
  }
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step) ||
      std::isinf(start) || std::isinf(stop)) {
    std::ostringstream msg;
    msg << "[arange] Cannot compute the length of the range with start="
        << start << ", stop=" << stop << " and step=" << step << ".";
    throw std::invalid_argument(msg.str());
  }
  if (step == 0) {
    throw std::invalid_argument("[arange] The step must be nonzero.");
  }
  if (!std::isinf(step) && std::ceil((stop - start) / step) > INT_MAX) {
    std::ostringstream msg;
    msg << "[arange] The range with start=" << start << ", stop=" << stop
        << " and step=" << step << " has more than " << INT_MAX << " elements.";
    throw std::invalid_argument(msg.str());
  }
  int n = arange_size(start, stop, step);
  return array({n}, dtype,
               std::make_shared<Arange>(to_stream(s), start, stop, step, dtype),
               {});
}

array arange(double start, double stop, double step, StreamOrDevice s) {
  return arange(start, stop, step, float32, s);
}
array arange(double start, double stop, Dtype dtype, StreamOrDevice s) {
  return arange(start, stop, 1.0, dtype, s);
}
array arange(double start, double stop, StreamOrDevice s) {
  return arange(start, stop, 1.0, float32, s);
}
array arange(double stop, Dtype dtype, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, dtype, s);
}
array arange(double stop, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, float32, s);
}
array arange(int start, int stop, int step, StreamOrDevice s) {
  return arange(static_cast<double>(start), static_cast<double>(stop),
                static_cast<double>(step), int32, s);
}
array arange(int start, int stop, StreamOrDevice s) {
  return arange(start, stop, 1, s);
}
array arange(int stop, StreamOrDevice s) { return arange(0, stop, 1, s); }

bool Arange::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const Arange&>(o);
  return r.start_ == start_ && r.stop_ == stop_ && r.step_ == step_ &&
         r.dtype_ == dtype_;
}

std::vector<PrimitiveArg> Arange::state() const {
  return export_state(start_, stop_, step_, dtype_);
}

std::shared_ptr<Primitive> Arange::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Arange");
  return std::make_shared<Arange>(s, a.f64(0), a.f64(1), a.f64(2), a.dt(3));
}

std::vector<Shape> Arange::output_shapes(const std::vector<array>&) {
  return {{arange_size(start_, stop_, step_)}};
}

// Arange has no inputs, so the transformations never reach these rules
// (a node is transformed only when one of its inputs is); they are still
// complete. Its values do not depend on anything differentiable: derivatives
// are zero, and vmap leaves the range unmapped (-1).
std::vector<array> Arange::vjp(const std::vector<array>& primals,
                               const std::vector<array>&,
                               const std::vector<int>& argnums,
                               const std::vector<array>&) {
  std::vector<array> vjps;
  for (int a : argnums) {
    vjps.push_back(zeros_like(primals[a], stream()));
  }
  return vjps;
}

std::vector<array> Arange::jvp(const std::vector<array>& primals,
                               const std::vector<array>&,
                               const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Arange::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  auto n = output_shapes({})[0];
  return {
      {array(std::move(n), dtype_,
             std::make_shared<Arange>(stream(), start_, stop_, step_, dtype_),
             {})},
      {-1}};
}

// --- linspace ---

array linspace(double start, double stop, int num, Dtype dtype,
               StreamOrDevice s) {
  return linspace(start, stop, num, true, dtype, s);
}

array linspace(double start, double stop, int num, bool endpoint, Dtype dtype,
               StreamOrDevice s) {
  if (num < 0) {
    throw std::invalid_argument(
        "[linspace] The number of samples must be non-negative; got " +
        std::to_string(num) + ".");
  }
  auto st = to_stream(s);
  if (num == 1) {
    return astype(array({start}), dtype, st);
  }
  // Interpolate in float64 so that both ends are exact and float32 outputs
  // are correctly rounded.
  double steps = endpoint ? num - 1 : num;
  auto t = divide(arange(0.0, num, 1.0, float64, st), array(steps), st);
  auto vals = add(multiply(subtract(array(1.0), t, st), array(start), st),
                  multiply(t, array(stop), st), st);
  return astype(vals, dtype, st);
}

// --- matrices ---

array tri(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  check_matrix_dims(n, m, "tri");
  // Ones where column <= row + k; clamping k keeps the result and avoids
  // overflow in -k and m - k.
  k = std::clamp(k, -n, m);
  auto st = to_stream(s);
  auto rows = expand_dims(arange(0, n, st), 1, st);
  auto cols = expand_dims(arange(-k, m - k, st), 0, st);
  return astype(greater_equal(rows, cols, st), dtype, st);
}

array tri(int n, Dtype dtype, StreamOrDevice s) {
  return tri(n, n, 0, dtype, s);
}

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  check_matrix_dims(n, m, "eye");
  k = std::clamp(k, -n, m);  // beyond these, no diagonal element exists
  auto st = to_stream(s);
  auto rows = expand_dims(arange(k, n + k, st), 1, st);
  auto cols = expand_dims(arange(0, m, st), 0, st);
  return astype(equal(rows, cols, st), dtype, st);
}

array eye(int n, Dtype dtype, StreamOrDevice s) {
  return eye(n, n, 0, dtype, s);
}

array identity(int n, Dtype dtype, StreamOrDevice s) {
  if (n < 0) {
    throw std::invalid_argument(
        "[identity] The size must be non-negative; got " + std::to_string(n) +
        ".");
  }
  return eye(n, n, 0, dtype, s);
}

namespace {

void check_at_least_2d(const array& x, const char* op) {
  if (x.ndim() < 2) {
    throw std::invalid_argument(std::string("[") + op +
                                "] The input must have at least 2 "
                                "dimensions; got shape " +
                                shape_str(x.shape()) + ".");
  }
}

}  // namespace

array tril(const array& x, int k, StreamOrDevice s) {
  check_at_least_2d(x, "tril");
  auto st = to_stream(s);
  auto mask = tri(x.shape(-2), x.shape(-1), k, bool_, st);
  return where(mask, x, array(0, x.dtype()), st);
}

array triu(const array& x, int k, StreamOrDevice s) {
  check_at_least_2d(x, "triu");
  auto st = to_stream(s);
  // Below diagonal k is at or below diagonal k - 1; avoid overflow in k - 1.
  auto mask =
      tri(x.shape(-2), x.shape(-1), k == INT_MIN ? k : k - 1, bool_, st);
  return where(mask, array(0, x.dtype()), x, st);
}

}  // namespace fluxion

// linalg::det and linalg::slogdet, composed from lu_factor.
#include <stdexcept>
#include <string>

#include "fluxion/ops/array_ops.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion::linalg {

namespace {

void check_square(const array& a, const char* op) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        std::string("[linalg::") + op +
        "] Arrays must have at least two dimensions; got shape " +
        shape_str(a.shape()) + ".");
  }
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(
        std::string("[linalg::") + op +
        "] Arrays must be batches of square matrices; got shape " +
        shape_str(a.shape()) + ".");
  }
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] complex64 inputs are not supported.");
  }
}

Shape batch_shape(const array& a) {
  return Shape(a.shape().begin(), a.shape().end() - 2);
}

struct Factored {
  array diag;      // U's diagonal, (..., n)
  array parity;    // (-1)^(row swaps), (...), in the matrix dtype
};

Factored factor(const array& a, const char* op, StreamOrDevice s) {
  array x = is_inexact(a.dtype()) ? a : astype(a, float32, s);
  auto [lu, pivots] = lu_factor(x, s);
  int n = x.shape(-1);
  array d = diagonal(lu, 0, -2, -1, s);
  // Row i was swapped with pivots[i]; each real swap flips the sign.
  array steps = arange(0, n, uint32, s);
  array swaps = sum(astype(not_equal(pivots, steps, s), int32, s), -1,
                    false, s);
  array odd = equal(remainder(swaps, array(2, int32), s), array(1, int32), s);
  array parity = where(odd, array(-1, x.dtype()), array(1, x.dtype()), s);
  return {d, parity};
}

}  // namespace

array det(const array& a, StreamOrDevice s) {
  check_square(a, "det");
  Dtype t = at_least_float(a.dtype());
  if (a.shape(-1) == 0) {
    return ones(batch_shape(a), t, s);  // the empty product
  }
  auto f = factor(a, "det", s);
  return multiply(f.parity, prod(f.diag, -1, false, s), s);
}

std::pair<array, array> slogdet(const array& a, StreamOrDevice s) {
  check_square(a, "slogdet");
  Dtype t = at_least_float(a.dtype());
  if (a.shape(-1) == 0) {
    return {ones(batch_shape(a), t, s), zeros(batch_shape(a), t, s)};
  }
  auto f = factor(a, "slogdet", s);
  array sign = multiply(f.parity, prod(fluxion::sign(f.diag, s), -1, false, s), s);
  array logabs = sum(log(abs(f.diag, s), s), -1, false, s);
  return {sign, logabs};
}

}  // namespace fluxion::linalg

#include "fluxion/ops/hadamard.h"

#include <cmath>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

// The transform with this primitive's exact (double) scale, or its
// transpose; x is already of a floating type.
array same_hadamard(const array& x, double scale, bool transpose, Stream s) {
  return array(x.shape(), x.dtype(),
               std::make_shared<Hadamard>(s, scale, transpose), {x});
}

}  // namespace

array hadamard_transform(const array& a, std::optional<float> scale,
                         StreamOrDevice sd) {
  if (a.ndim() == 0) {
    // A scalar is a length-1 transform: itself times the scale (MLX).
    return reshape(hadamard_transform(reshape(a, {1}, sd), scale, sd), {}, sd);
  }
  int64_t n = a.shape(-1);
  if (detail::hadamard_factor(n) == 0) {
    throw std::invalid_argument(
        std::string("[hadamard_transform] The last axis has size ") +
        std::to_string(n) +
        "; it must be m * 2^k with m in (1, 12, 20, 28) and k <= 26.");
  }
  if (a.dtype() == complex64) {
    throw std::invalid_argument(
        "[hadamard_transform] complex64 is not supported.");
  }
  Dtype t = is_floating_point(a.dtype()) ? a.dtype() : float32;
  double sc = scale ? static_cast<double>(*scale)
                    : 1.0 / std::sqrt(static_cast<double>(n));
  auto s = to_stream(sd);
  return array(a.shape(), t, std::make_shared<Hadamard>(s, sc),
               {astype(a, t, s)});
}

bool Hadamard::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const Hadamard&>(o).scale_ == scale_ &&
         static_cast<const Hadamard&>(o).transpose_ == transpose_;
}

std::vector<PrimitiveArg> Hadamard::state() const {
  return export_state(scale_, transpose_);
}

std::shared_ptr<Primitive> Hadamard::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Hadamard");
  return std::make_shared<Hadamard>(s, a.f64(0), a.b(1));
}

namespace detail {

int hadamard_factor(int64_t n) {
  for (int m : {1, 12, 20, 28}) {
    if (n <= 0 || n % m != 0) {
      continue;
    }
    int64_t p = n / m;
    if ((p & (p - 1)) == 0 && p <= (int64_t{1} << 26)) {
      return m;
    }
  }
  return 0;
}

namespace {

// Paley's second construction for q = 5 (q = 1 mod 4): the symmetric
// conference matrix C of order q + 1 (C[0][j] = C[j][0] = 1 for j > 0,
// C[1 + i][1 + j] = chi(j - i), chi the quadratic character mod q) with
// each 0 replaced by [[1, -1], [-1, -1]] and each +-1 by +-[[1, 1], [1, -1]].
std::vector<int8_t> paley2_q5() {
  const int q = 5, c = q + 1, m = 2 * c;
  auto chi = [](int x) {
    x = ((x % 5) + 5) % 5;
    return x == 0 ? 0 : (x == 1 || x == 4) ? 1 : -1;  // squares mod 5: 1, 4
  };
  std::vector<int> conf(c * c, 0);
  for (int j = 1; j < c; ++j) {
    conf[j] = conf[j * c] = 1;
  }
  for (int i = 0; i < q; ++i) {
    for (int j = 0; j < q; ++j) {
      conf[(1 + i) * c + 1 + j] = chi(j - i);
    }
  }
  std::vector<int8_t> h(m * m);
  for (int i = 0; i < c; ++i) {
    for (int j = 0; j < c; ++j) {
      int e = conf[i * c + j];
      // Blocks [[a, b], [b, d]]: zero -> (1, -1, -1), +-1 -> +-(1, 1, -1).
      int a = e == 0 ? 1 : e, b = e == 0 ? -1 : e, d = e == 0 ? -1 : -e;
      h[(2 * i) * m + 2 * j] = static_cast<int8_t>(a);
      h[(2 * i) * m + 2 * j + 1] = static_cast<int8_t>(b);
      h[(2 * i + 1) * m + 2 * j] = static_cast<int8_t>(b);
      h[(2 * i + 1) * m + 2 * j + 1] = static_cast<int8_t>(d);
    }
  }
  return h;
}

// Williamson's array [[A, B, C, D], [-B, A, -D, C], [-C, D, A, -B],
// [-D, -C, B, A]] of the symmetric circulants of order p whose first rows
// are +1 at the offsets {0, +-s} of `plus` (the offsets of each block) and
// -1 elsewhere; an empty set means +1 at 0 only.
std::vector<int8_t> williamson(int p, const std::vector<int> (&blocks)[4]) {
  const int m = 4 * p;
  auto first_row = [p](const std::vector<int>& offs) {
    std::vector<int> r(p, -1);
    r[0] = 1;
    for (int o : offs) {
      r[o % p] = 1;
      r[(p - o % p) % p] = 1;
    }
    return r;
  };
  std::vector<int> rows[4];
  for (int b = 0; b < 4; ++b) {
    rows[b] = first_row(blocks[b]);
  }
  // Block (bi, bj) of the array: which circulant and its sign.
  static const int which[4][4] = {
      {0, 1, 2, 3}, {1, 0, 3, 2}, {2, 3, 0, 1}, {3, 2, 1, 0}};
  static const int sign[4][4] = {
      {1, 1, 1, 1}, {-1, 1, -1, 1}, {-1, 1, 1, -1}, {-1, -1, 1, 1}};
  std::vector<int8_t> h(m * m);
  for (int bi = 0; bi < 4; ++bi) {
    for (int bj = 0; bj < 4; ++bj) {
      const auto& r = rows[which[bi][bj]];
      for (int i = 0; i < p; ++i) {
        for (int j = 0; j < p; ++j) {
          h[(bi * p + i) * m + bj * p + j] =
              static_cast<int8_t>(sign[bi][bj] * r[((j - i) % p + p) % p]);
        }
      }
    }
  }
  return h;
}

}  // namespace

std::vector<int8_t> hadamard_matrix(int m) {
  switch (m) {
    case 1:
      return {1};
    case 12:
      return paley2_q5();
    case 20: {
      // Order 5: A = A' = +1 at {0}, B = {0, +-1}, C = {0, +-2}.
      static const std::vector<int> blocks[4] = {{}, {}, {1}, {2}};
      return williamson(5, blocks);
    }
    case 28: {
      // Order 7: A = {0}, B = {0, +-1}, C = {0, +-2}, D = {0, +-3}.
      static const std::vector<int> blocks[4] = {{}, {1}, {2}, {3}};
      return williamson(7, blocks);
    }
    default:
      throw std::invalid_argument(
          std::string("[hadamard_transform] No Hadamard matrix of order ") +
          std::to_string(m) + " (expected 1, 12, 20 or 28).");
  }
}

}  // namespace detail



// --- Hadamard: a linear map; its transpose for the vjp (H_20 and H_28 are
// not symmetric, so the vjp is not the transform itself) ---

std::vector<array> Hadamard::jvp(const Arrays&, const Arrays& tangents,
                                 const std::vector<int>&) {
  return {same_hadamard(tangents[0], scale_, transpose_, stream())};
}

std::vector<array> Hadamard::vjp(const Arrays&, const Arrays& cts,
                                 const std::vector<int>&, const Arrays&) {
  return {same_hadamard(cts[0], scale_, !transpose_, stream())};
}

Batched Hadamard::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  array x = rules::to_front(inputs[0], axes[0], 1, s);
  return {{same_hadamard(x, scale_, transpose_, s)}, {0}};
}

}  // namespace fluxion

// Transformation rules (jvp, vjp, vmap) of the LAPACK-backed inverse,
// solves and factorizations (Inverse, Solve, SolveTriangular, Cholesky, QRF,
// LUF), written with public ops so that they differentiate again (grad of
// grad, vmap of grad). Those of the eigen and singular value decompositions
// are in linalg_lapack_eig_rules.cpp. They live apart from linalg_lapack.cpp
// only to keep files short; the ops and the primitives' other members
// (output_shapes, is_equivalent) are there.
#include <algorithm>
#include <utility>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/linalg_lapack_impl.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion::linalg {

using detail::eye_like;
using detail::front;
using detail::luf;
using detail::mm;
using detail::mT;
using detail::out_axes;
using detail::sym_from_triangle;
using detail::triangle_grad;

// --- inv ---

// d(A^-1) = -A^-1 dA A^-1.
std::vector<array> Inverse::vjp(const std::vector<array>&,
                                const std::vector<array>& cotangents,
                                const std::vector<int>&,
                                const std::vector<array>& outputs) {
  auto s = stream();
  auto it = mT(outputs[0], s);
  return {negative(mm(mm(it, cotangents[0], s), it, s), s)};
}

std::vector<array> Inverse::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>&) {
  auto s = stream();
  auto ai = inv(primals[0], s);
  return {negative(mm(mm(ai, tangents[0], s), ai, s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Inverse::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  return {{inv(front(inputs[0], axes[0], s), s)}, out_axes(axes[0], 1)};
}

// --- solve ---

// x = A^-1 b: db gives A^-1 db; dA gives -A^-1 dA x.
std::vector<array> Solve::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>& outputs) {
  auto s = stream();
  auto gb = solve(mT(primals[0], s), cotangents[0], s);
  std::vector<array> vjps;
  for (int a : argnums) {
    vjps.push_back(a == 1 ? gb : negative(mm(gb, mT(outputs[0], s), s), s));
  }
  return vjps;
}

std::vector<array> Solve::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  auto s = stream();
  auto x = solve(primals[0], primals[1], s);
  auto rhs = rules::tangent_or_zeros(primals, tangents, argnums, 1, s);
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) {
      rhs = subtract(rhs, mm(tangents[i], x, s), s);
    }
  }
  return {solve(primals[0], rhs, s)};
}

std::pair<std::vector<array>, std::vector<int>> Solve::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = rules::batch_size(inputs, axes);
  auto a = rules::to_front(inputs[0], axes[0], n, s);
  auto b = rules::to_front(inputs[1], axes[1], n, s);
  return {{solve(a, b, s)}, {0}};
}

// --- solve_triangular ---

// As Solve, with the gradient of A confined to the triangle read.
std::vector<array> SolveTriangular::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>& outputs) {
  auto s = stream();
  auto gb = solve_triangular(mT(primals[0], s), cotangents[0], !upper_, s);
  std::vector<array> vjps;
  for (int a : argnums) {
    if (a == 1) {
      vjps.push_back(gb);
    } else {
      auto g = negative(mm(gb, mT(outputs[0], s), s), s);
      vjps.push_back(upper_ ? triu(g, 0, s) : tril(g, 0, s));
    }
  }
  return vjps;
}

std::vector<array> SolveTriangular::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  auto s = stream();
  auto x = solve_triangular(primals[0], primals[1], upper_, s);
  auto rhs = rules::tangent_or_zeros(primals, tangents, argnums, 1, s);
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) {
      auto ta = upper_ ? triu(tangents[i], 0, s) : tril(tangents[i], 0, s);
      rhs = subtract(rhs, mm(ta, x, s), s);
    }
  }
  return {solve_triangular(primals[0], rhs, upper_, s)};
}

std::pair<std::vector<array>, std::vector<int>> SolveTriangular::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = rules::batch_size(inputs, axes);
  auto a = rules::to_front(inputs[0], axes[0], n, s);
  auto b = rules::to_front(inputs[1], axes[1], n, s);
  return {{solve_triangular(a, b, upper_, s)}, {0}};
}

// --- cholesky ---

namespace {

// Lower triangle with the diagonal halved.
array phi(const array& x, Stream s) {
  return add(tril(x, -1, s), multiply(x, eye_like(x, s) * 0.5, s), s);
}

// L^-1 X L^-T for lower triangular L.
array sandwich_inv(const array& l, const array& x, Stream s) {
  auto y = solve_triangular(l, x, false, s);
  return mT(solve_triangular(l, mT(y, s), false, s), s);
}

}  // namespace

// With A = L L^T: dL = L Phi(L^-1 dA L^-T), dA symmetric (built from the
// lower triangle, the only one read). The vjp is the adjoint:
// S = L^-T Phi(L^T Lbar) L^-1, folded onto the lower triangle.
std::vector<array> Cholesky::vjp(const std::vector<array>&,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>&,
                                 const std::vector<array>& outputs) {
  auto s = stream();
  auto l = outputs[0];
  auto p = phi(mm(mT(l, s), cotangents[0], s), s);
  auto lt = mT(l, s);
  auto y = solve_triangular(lt, p, true, s);
  auto g = mT(solve_triangular(lt, mT(y, s), true, s), s);
  return {triangle_grad(g, false, s)};
}

std::vector<array> Cholesky::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>&) {
  auto s = stream();
  auto l = cholesky(primals[0], false, s);
  auto da = sym_from_triangle(tangents[0], false, s);
  return {mm(l, phi(sandwich_inv(l, da, s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Cholesky::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  return {{cholesky(front(inputs[0], axes[0], s), false, s)},
          out_axes(axes[0], 1)};
}

// --- qr ---

namespace {

// X R^-1 for upper triangular R.
array right_rinv(const array& x, const array& r, Stream s) {
  return mT(solve_triangular(mT(r, s), mT(x, s), false, s), s);
}

// The vjp of (Q, R) = qr(A) for M >= N (Walter and Lehmann):
// M = R Rbar^T - Qbar^T Q, Abar = (Qbar + Q copyltu(M)) R^-T.
array qr_vjp_tall(const array& q, const array& r, const array& qb,
                  const array& rb, Stream s) {
  auto m = subtract(mm(r, mT(rb, s), s), mm(mT(qb, s), q, s), s);
  auto copyltu = add(tril(m, 0, s), mT(tril(m, -1, s), s), s);
  auto y = add(qb, mm(q, copyltu, s), s);
  return mT(solve_triangular(r, mT(y, s), true, s), s);
}

// The jvp for M >= N: C = Q^T dA R^-1, Omega = Q^T dQ (antisymmetric) is
// the strictly lower part of C minus its transpose, dR = (C - Omega) R and
// dQ = dA R^-1 - Q (C - Omega).
std::pair<array, array> qr_jvp_tall(const array& q, const array& r,
                                    const array& da, Stream s) {
  auto z = right_rinv(da, r, s);
  auto c = mm(mT(q, s), z, s);
  auto low = tril(c, -1, s);
  auto upper_part = subtract(c, subtract(low, mT(low, s), s), s);
  return {subtract(z, mm(q, upper_part, s), s), mm(upper_part, r, s)};
}

}  // namespace

// Wide matrices (M < N) split A = [X Y] with X square: Q R_X = X and
// R_Y = Q^T Y, so the square rules apply to X with Q's cotangent picking
// up Y's part.
std::vector<array> QRF::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  auto s = stream();
  const auto& a = primals[0];
  int m = a.shape(-2), n = a.shape(-1);
  const auto &q = outputs[0], &r = outputs[1];
  if (m >= n) {
    return {qr_vjp_tall(q, r, cotangents[0], cotangents[1], s)};
  }
  int nd = a.ndim();
  auto cols = [&](const array& x, int lo, int hi) {
    Shape start(nd, 0), stop = x.shape();
    start[nd - 1] = lo;
    stop[nd - 1] = hi;
    return slice(x, start, stop, s);
  };
  auto y = cols(a, m, n);
  auto rx = cols(r, 0, m), rbx = cols(cotangents[1], 0, m);
  auto rby = cols(cotangents[1], m, n);
  auto qb = add(cotangents[0], mm(y, mT(rby, s), s), s);
  auto gx = qr_vjp_tall(q, rx, qb, rbx, s);
  return {concatenate({gx, mm(q, rby, s)}, -1, s)};
}

std::vector<array> QRF::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  auto s = stream();
  const auto& a = primals[0];
  int m = a.shape(-2), n = a.shape(-1);
  auto [q, r] = qr(a, s);
  if (m >= n) {
    auto [dq, dr] = qr_jvp_tall(q, r, tangents[0], s);
    return {dq, dr};
  }
  int nd = a.ndim();
  auto cols = [&](const array& x, int lo, int hi) {
    Shape start(nd, 0), stop = x.shape();
    start[nd - 1] = lo;
    stop[nd - 1] = hi;
    return slice(x, start, stop, s);
  };
  auto [dq, drx] = qr_jvp_tall(q, cols(r, 0, m), cols(tangents[0], 0, m), s);
  auto dry = add(mm(mT(dq, s), cols(a, m, n), s),
                 mm(mT(q, s), cols(tangents[0], m, n), s), s);
  return {dq, concatenate({drx, dry}, -1, s)};
}

std::pair<std::vector<array>, std::vector<int>> QRF::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto [q, r] = qr(front(inputs[0], axes[0], s), s);
  return {{q, r}, out_axes(axes[0], 2)};
}

// --- lu ---

namespace {

// Rows (from_end = 2) or columns (1) [lo, hi) of the last two dims.
array part(const array& x, int from_end, int lo, int hi, Stream s) {
  int nd = x.ndim();
  Shape start(nd, 0), stop = x.shape();
  start[nd - from_end] = lo;
  stop[nd - from_end] = hi;
  return slice(x, start, stop, s);
}

// The square LU without pivoting, A = L U: X = L^-1 dA U^-1 gives
// dL = L tril(X, -1) and dU = triu(X) U.
std::pair<array, array> lu_tangent(const array& l, const array& u,
                                   const array& da, Stream s) {
  auto x = right_rinv(solve_triangular(l, da, false, s), u, s);
  return {mm(l, tril(x, -1, s), s), mm(triu(x, 0, s), u, s)};
}

// Its adjoint, for Lbar strictly lower and Ubar upper:
// Abar = L^-T (tril(L^T Lbar, -1) + triu(Ubar U^T)) U^-T.
array lu_cotangent(const array& l, const array& u, const array& lb,
                   const array& ub, Stream s) {
  auto xb =
      add(tril(mm(mT(l, s), lb, s), -1, s), triu(mm(ub, mT(u, s), s), 0, s), s);
  auto y = solve_triangular(mT(l, s), xb, true, s);
  return mT(solve_triangular(u, mT(y, s), true, s), s);
}

// X U^-T for upper triangular U.
array right_rinv_t(const array& x, const array& u, Stream s) {
  return mT(solve_triangular(u, mT(x, s), true, s), s);
}

// The factors of a packed LU of an (M, N) matrix, K = min(M, N): the
// square part (L1 (K, K) unit lower, U1 (K, K) upper) and the rest, L2
// (M - K, K) below L1 for tall inputs or U2 (K, N - K) right of U1 for wide
// ones.
struct LUParts {
  array l1, u1, rest;
};

LUParts lu_parts(const array& packed, Stream s) {
  int m = packed.shape(-2), n = packed.shape(-1), k = std::min(m, n);
  auto sq = part(part(packed, 2, 0, k, s), 1, 0, k, s);
  auto l1 = add(tril(sq, -1, s), eye_like(sq, s), s);
  auto u1 = triu(sq, 0, s);
  auto rest = m > n ? part(packed, 2, k, m, s) : part(packed, 1, k, n, s);
  return {l1, u1, rest};
}

// The permutation as a matrix: a = Pm @ L @ U, Pm[i, j] = (p[i] == j).
array perm_matrix(const array& p, Dtype t, Stream s) {
  int m = p.shape(-1);
  return astype(equal(expand_dims(p, -1, s), arange(0, m, uint32, s), s), t, s);
}

}  // namespace

// A = Pm L U. Square: with X = L^-1 Pm^T dA U^-1, dL = L tril(X, -1),
// dU = triu(X) U, and the packed output moves by tril(dL, -1) + dU. Tall
// (M > N): the top N rows of Pm^T A factor as L1 U and the others give
// L2 = A2 U^-1, so dL2 = (dA2 - L2 dU) U^-1. Wide (M < N): the left M
// columns factor as L U1 and U2 = L^-1 A2, so dU2 = L^-1 (dA2 - dL U2).
// The vjps are the adjoints. The integer outputs take no derivative.
std::vector<array> LUF::vjp(const std::vector<array>&,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  auto s = stream();
  const auto& packed = outputs[0];
  const auto& ct = cotangents[0];
  int m = packed.shape(-2), n = packed.shape(-1), k = std::min(m, n);
  auto [l1, u1, rest] = lu_parts(packed, s);
  auto ct_sq = part(part(ct, 2, 0, k, s), 1, 0, k, s);
  auto lb = tril(ct_sq, -1, s);
  auto ub = triu(ct_sq, 0, s);
  array g = packed;
  if (m > n) {
    auto a2 = right_rinv_t(part(ct, 2, k, m, s), u1, s);
    ub = triu(subtract(ub, mm(mT(rest, s), a2, s), s), 0, s);
    g = concatenate({lu_cotangent(l1, u1, lb, ub, s), a2}, -2, s);
  } else if (m < n) {
    auto a2 = solve_triangular(mT(l1, s), part(ct, 1, k, n, s), true, s);
    lb = tril(subtract(lb, mm(a2, mT(rest, s), s), s), -1, s);
    g = concatenate({lu_cotangent(l1, u1, lb, ub, s), a2}, -1, s);
  } else {
    g = lu_cotangent(l1, u1, lb, ub, s);
  }
  return {mm(perm_matrix(outputs[2], g.dtype(), s), g, s)};
}

std::vector<array> LUF::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  auto s = stream();
  auto outs = luf(primals[0], s);
  const auto& packed = outs[0];
  int m = packed.shape(-2), n = packed.shape(-1), k = std::min(m, n);
  auto [l1, u1, rest] = lu_parts(packed, s);
  auto pda = mm(mT(perm_matrix(outs[2], packed.dtype(), s), s), tangents[0], s);
  auto da_sq = part(part(pda, 2, 0, k, s), 1, 0, k, s);
  auto [dl, du] = lu_tangent(l1, u1, da_sq, s);
  array t = add(tril(dl, -1, s), du, s);
  if (m > n) {
    auto dl2 =
        right_rinv(subtract(part(pda, 2, k, m, s), mm(rest, du, s), s), u1, s);
    t = concatenate({t, dl2}, -2, s);
  } else if (m < n) {
    auto du2 = solve_triangular(
        l1, subtract(part(pda, 1, k, n, s), mm(dl, rest, s), s), false, s);
    t = concatenate({t, du2}, -1, s);
  }
  return {t, zeros_like(outs[1], s), zeros_like(outs[2], s)};
}

std::pair<std::vector<array>, std::vector<int>> LUF::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  return {luf(front(inputs[0], axes[0], s), s), out_axes(axes[0], 3)};
}

}  // namespace fluxion::linalg

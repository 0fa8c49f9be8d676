// Transformation rules (jvp, vjp, vmap) of the LAPACK-backed eigen and
// singular value decompositions (Eigh, SVD, Eig), written with public ops
// so that they differentiate again. Those of the inverse, solves and
// factorizations are in linalg_lapack_rules.cpp; the ops and the
// primitives' other members are in linalg_lapack.cpp.
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

using detail::eig_impl;
using detail::eigh_impl;
using detail::eye_like;
using detail::first_cols;
using detail::first_rows;
using detail::front;
using detail::mm;
using detail::mT;
using detail::out_axes;
using detail::sym_from_triangle;
using detail::tag;
using detail::triangle_grad;

namespace {

// The rules below are written for real matrices (they transpose without
// conjugating), so complex inputs raise a clear error instead of returning
// wrong derivatives; complex derivatives are a known gap (stop notes).
void no_complex_derivative(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(
        tag(op) + "Derivatives for complex64 inputs are not supported.");
  }
}

// The diagonal of the last two dims as a vector.
array diag_of(const array& x, Stream s) {
  return sum(multiply(x, eye_like(x, s), s), -1, false, s);
}

// A vector as the diagonal of a matrix (last dim).
array diag_matrix(const array& v, Stream s) {
  int n = v.shape(-1);
  return multiply(expand_dims(v, -1, s), eye(n, n, 0, v.dtype(), s), s);
}

// F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it.
array eig_gaps(const array& w, Stream s) {
  auto d = subtract(expand_dims(w, -2, s), expand_dims(w, -1, s), s);
  auto i = eye(w.shape(-1), w.shape(-1), 0, w.dtype(), s);
  return divide(subtract(array(1.0, w.dtype()), i, s), add(d, i, s), s);
}

// F_ij = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it.
array sv_gaps(const array& sv, Stream s) { return eig_gaps(square(sv, s), s); }

}  // namespace

// --- eigh ---

// A = V diag(w) V^T: dw = diag(V^T dA V), dV = V (F o (V^T dA V)) with
// F_ij = 1 / (w_j - w_i). Repeated eigenvalues make F infinite: the
// eigenvectors' derivatives (and so these rules) are then undefined and
// produce inf/nan, as in MLX, JAX and PyTorch; the eigenvalues' derivative
// alone (eigvalsh) stays finite.
std::vector<array> Eigh::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>&,
                             const std::vector<array>& outputs) {
  no_complex_derivative(primals[0], "eigh");
  auto s = stream();
  array v =
      vectors_ ? outputs[1] : eigh(primals[0], upper_ ? "U" : "L", s).second;
  auto inner = diag_matrix(cotangents[0], s);
  if (vectors_) {
    auto f = eig_gaps(outputs[0], s);
    inner = add(inner, multiply(f, mm(mT(v, s), cotangents[1], s), s), s);
  }
  auto g = mm(mm(v, inner, s), mT(v, s), s);
  return {triangle_grad(g, upper_, s)};
}

std::vector<array> Eigh::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>&) {
  no_complex_derivative(primals[0], "eigh");
  auto s = stream();
  auto [w, v] = eigh(primals[0], upper_ ? "U" : "L", s);
  auto da = sym_from_triangle(tangents[0], upper_, s);
  auto p = mm(mm(mT(v, s), da, s), v, s);
  std::vector<array> out{diag_of(p, s)};
  if (vectors_) {
    out.push_back(mm(v, multiply(eig_gaps(w, s), p, s), s));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Eigh::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto outs =
      eigh_impl(front(inputs[0], axes[0], s), upper_, vectors_, "eigh", s);
  return {outs, out_axes(axes[0], outs.size())};
}

// --- svd ---

// With the thin factors U (M, K), V (N, K) of A = U S V^T and
// dP = U^T dA V: dS = diag(dP), U^T dU = F o (dP S + S dP^T),
// V^T dV = F o (S dP + dP^T S), plus the components outside the span,
// (I - U U^T) dA V S^-1 and (I - V V^T) dA^T U S^-1. The vjp is the
// adjoint. Repeated (or, for non-square inputs, zero) singular values make
// the singular vectors non-unique: F (or S^-1) is then infinite and so are
// the derivatives of U and Vt, as in MLX, JAX and PyTorch; those of S stay
// finite. The columns of the full U (and rows of Vt) beyond K span an
// arbitrary basis of the null space: their cotangents are ignored and
// their tangents are zero.
std::vector<array> SVD::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  no_complex_derivative(primals[0], "svd");
  auto s = stream();
  const auto& a = primals[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  if (!compute_uv_) {
    auto full = svd(a, true, s);
    auto u = first_cols(full[0], k, s);
    auto vt = first_rows(full[2], k, s);
    return {mm(mm(u, diag_matrix(cotangents[0], s), s), vt, s)};
  }
  auto u = first_cols(outputs[0], k, s);
  auto sv = outputs[1];
  auto vt = first_rows(outputs[2], k, s);
  auto v = mT(vt, s);
  auto ub = first_cols(cotangents[0], k, s);
  auto vb = mT(first_rows(cotangents[2], k, s), s);
  auto f = sv_gaps(sv, s);
  auto j = multiply(f, mm(mT(u, s), ub, s), s);
  auto kk = multiply(f, mm(mT(v, s), vb, s), s);
  auto sm = diag_matrix(sv, s);
  auto inner =
      add(add(mm(add(j, mT(j, s), s), sm, s), diag_matrix(cotangents[1], s), s),
          mm(sm, add(kk, mT(kk, s), s), s), s);
  auto g = mm(mm(u, inner, s), vt, s);
  auto sinv = expand_dims(reciprocal(sv, s), -2, s);  // scales columns
  if (m > k) {
    auto pu = subtract(ub, mm(u, mm(mT(u, s), ub, s), s), s);
    g = add(g, mm(multiply(pu, sinv, s), vt, s), s);
  }
  if (n > k) {
    auto pv = subtract(vb, mm(v, mm(vt, vb, s), s), s);
    g = add(g, mm(multiply(u, sinv, s), mT(pv, s), s), s);
  }
  return {g};
}

std::vector<array> SVD::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  no_complex_derivative(primals[0], "svd");
  auto s = stream();
  const auto& a = primals[0];
  const auto& da = tangents[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto full = svd(a, true, s);
  auto u = first_cols(full[0], k, s);
  auto sv = full[1];
  auto vt = first_rows(full[2], k, s);
  auto v = mT(vt, s);
  auto dp = mm(mm(mT(u, s), da, s), v, s);
  auto ds = diag_of(dp, s);
  if (!compute_uv_) {
    return {ds};
  }
  auto f = sv_gaps(sv, s);
  auto row = expand_dims(sv, -2, s);  // multiplies column j by s_j
  auto col = expand_dims(sv, -1, s);  // multiplies row i by s_i
  auto dpt = mT(dp, s);
  auto du =
      mm(u, multiply(f, add(multiply(dp, row, s), multiply(col, dpt, s), s), s),
         s);
  auto dv =
      mm(v, multiply(f, add(multiply(col, dp, s), multiply(dpt, row, s), s), s),
         s);
  auto sinv = expand_dims(reciprocal(sv, s), -2, s);
  if (m > k) {
    auto x = mm(da, multiply(v, sinv, s), s);
    du = add(du, subtract(x, mm(u, mm(mT(u, s), x, s), s), s), s);
  }
  if (n > k) {
    auto x = mm(mT(da, s), multiply(u, sinv, s), s);
    dv = add(dv, subtract(x, mm(v, mm(vt, x, s), s), s), s);
  }
  // The null-space columns of the full factors do not move.
  auto pad_cols = [&](const array& x, int total) {
    if (total == k) {
      return x;
    }
    Shape zs = x.shape();
    zs.back() = total - k;
    return concatenate({x, zeros(zs, x.dtype(), s)}, -1, s);
  };
  return {pad_cols(du, m), ds, mT(pad_cols(dv, n), s)};
}

std::pair<std::vector<array>, std::vector<int>> SVD::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto outs = svd(front(inputs[0], axes[0], s), compute_uv_, s);
  return {outs, out_axes(axes[0], outs.size())};
}

// --- eig ---

namespace {

// The inverse of a complex64 matrix M = X + iY through the real block
// matrix [[X, -Y], [Y, X]], whose inverse is [[P, -Q], [Q, P]] with
// M^-1 = P + iQ (Inverse computes in real types only).
array complex_inv(const array& m, Stream s) {
  auto x = real(m, s), y = imag(m, s);
  auto block = concatenate(
      {concatenate({x, negative(y, s)}, -1, s), concatenate({y, x}, -1, s)}, -2,
      s);
  auto bi = inv(block, s);
  int n = m.shape(-1), nd = m.ndim();
  Shape start(nd, 0), stop = bi.shape();
  stop[nd - 1] = n;
  stop[nd - 2] = n;
  auto p = slice(bi, start, stop, s);
  start[nd - 2] = n;
  stop[nd - 2] = 2 * n;
  auto q = slice(bi, start, stop, s);
  return add(astype(p, complex64, s),
             multiply(astype(q, complex64, s), array(complex64_t(0, 1)), s), s);
}

array as_complex(const array& x, Stream s) { return astype(x, complex64, s); }

array i_times(const array& x, Stream s) {
  return multiply(as_complex(x, s), array(complex64_t(0, 1)), s);
}

// geev's gauge: each eigenvector has unit norm and its largest component
// (row k_j of column j) real. E[r, j] = (r == k_j), and vk[j] = V[k_j, j].
struct Gauge {
  array e, vk;
};

Gauge gauge(const array& v, Stream s) {
  int n = v.shape(-1);
  auto k = argmax(abs(v, s), -2, true, s);                  // (..., 1, N)
  auto rows = expand_dims(arange(0, n, uint32, s), -1, s);  // (N, 1)
  auto e = as_complex(equal(rows, k, s), s);
  return {e, real(sum(multiply(v, e, s), -2, false, s), s)};
}

}  // namespace

// A = V diag(w) V^-1 with X = V^-1 dA V: dw = diag(X) and, with
// F_ij = 1 / (w_j - w_i), dV = V (F o X) - V diag(c), where c keeps geev's
// gauge: Re(c_j) = Re(v_j^H dv_j) keeps the unit norm and
// Im(c_j) = Im(dv_kj) / v_kj the largest component real. The vjp is the
// adjoint under the real part of the bilinear pairing (JAX's convention
// for a real input): Abar = Re(V^-T (diag(wbar) + F o (V^T G)) V^T), G the
// eigenvector cotangent with the gauge's part projected out. Repeated
// eigenvalues make F infinite: the eigenvectors' derivatives are then
// undefined (inf/nan), as in JAX and PyTorch.
std::vector<array> Eig::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>& outputs) {
  no_complex_derivative(primals[0], "eig");
  auto s = stream();
  auto [w, v] =
      vectors_ ? std::make_pair(outputs[0], outputs[1]) : eig(primals[0], s);
  auto inner = diag_matrix(as_complex(cotangents[0], s), s);
  if (vectors_) {
    auto ct = as_complex(cotangents[1], s);
    auto [e, vk] = gauge(v, s);
    auto sj = sum(multiply(ct, v, s), -2, true, s);  // (..., 1, N)
    auto g = subtract(
        ct, multiply(conjugate(v, s), as_complex(real(sj, s), s), s), s);
    g = subtract(
        g,
        multiply(e, i_times(divide(imag(sj, s), expand_dims(vk, -2, s), s), s),
                 s),
        s);
    inner = add(inner, multiply(eig_gaps(w, s), mm(mT(v, s), g, s), s), s);
  }
  auto vit = mT(complex_inv(v, s), s);
  auto full = mm(mm(vit, inner, s), mT(v, s), s);
  return {astype(real(full, s), primals[0].dtype(), s)};
}

std::vector<array> Eig::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  no_complex_derivative(primals[0], "eig");
  auto s = stream();
  auto [w, v] = eig(primals[0], s);
  auto x = mm(mm(complex_inv(v, s), as_complex(tangents[0], s), s), v, s);
  std::vector<array> out{diag_of(x, s)};
  if (vectors_) {
    auto dv0 = mm(v, multiply(eig_gaps(w, s), x, s), s);
    auto [e, vk] = gauge(v, s);
    auto re_c = real(sum(multiply(conjugate(v, s), dv0, s), -2, false, s), s);
    auto im_c = divide(imag(sum(multiply(dv0, e, s), -2, false, s), s), vk, s);
    auto c = add(as_complex(re_c, s), i_times(im_c, s), s);
    out.push_back(subtract(dv0, multiply(v, expand_dims(c, -2, s), s), s));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Eig::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto outs = eig_impl(front(inputs[0], axes[0], s), vectors_, "eig", s);
  return {outs, out_axes(axes[0], outs.size())};
}

}  // namespace fluxion::linalg

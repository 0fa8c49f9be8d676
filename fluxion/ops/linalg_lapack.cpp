#include "fluxion/ops/linalg_lapack.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion::linalg {

namespace {

std::string tag(const char* op) { return std::string("[linalg::") + op + "] "; }

// The dtype the kernels compute in; half types go through float32.
Dtype compute_dtype(const array& a, const char* op) {
  switch (a.dtype()) {
    case float64:
      return float64;
    case float32:
    case float16:
    case bfloat16:
      return float32;
    default:
      throw std::invalid_argument(
          tag(op) +
          "Arrays must have a real floating point type (float16, bfloat16, "
          "float32 or float64); got " +
          dtype_name(a.dtype()) + ".");
  }
}

void check_matrix(const array& a, const char* op, bool square) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        tag(op) + "Arrays must have at least two dimensions; got shape " +
        shape_str(a.shape()) + ".");
  }
  if (square && a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(
        tag(op) + "Arrays must be batches of square matrices; got shape " +
        shape_str(a.shape()) + ".");
  }
}

// `a` validated and cast to its compute dtype.
array prepared(const array& a, const char* op, bool square, Stream s) {
  check_matrix(a, op, square);
  return astype(a, compute_dtype(a, op), s);
}

array restored(const array& x, Dtype t, Stream s) {
  return x.dtype() == t ? x : astype(x, t, s);
}

// eig, eigh and svd also take complex64 matrices (as MLX): they are
// decomposed in complex64, with real eigen/singular values.
array prepared_or_complex(const array& a, const char* op, bool square,
                          Stream s) {
  if (is_complex(a.dtype())) {
    check_matrix(a, op, square);
    return a;
  }
  return prepared(a, op, square, s);
}

// Derivatives of the complex decompositions are not implemented (their
// rules transpose without conjugating).
void no_complex_derivative(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(
        tag(op) + "Derivatives for complex64 inputs are not supported.");
  }
}

array mT(const array& x, Stream s) { return swapaxes(x, -1, -2, s); }

array mm(const array& a, const array& b, Stream s) { return matmul(a, b, s); }

array eye_like(const array& x, Stream s) {
  return eye(x.shape(-1), x.shape(-1), 0, x.dtype(), s);
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

// The derivative of an op that reads only the lower (or upper) triangle of
// a symmetric matrix: a perturbation dA acts as the symmetric matrix built
// from that triangle, ...
array sym_from_triangle(const array& t, bool upper, Stream s) {
  return upper ? add(triu(t, 0, s), mT(triu(t, 1, s), s), s)
               : add(tril(t, 0, s), mT(tril(t, -1, s), s), s);
}

// ... and a gradient S with respect to a symmetric perturbation flows to
// the triangle read: off-diagonal entries collect S_ij + S_ji.
array triangle_grad(const array& g, bool upper, Stream s) {
  auto both = add(g, mT(g, s), s);
  auto off = upper ? triu(both, 1, s) : tril(both, -1, s);
  return add(off, multiply(g, eye_like(g, s), s), s);
}

// A single-input vmap rule: the mapped axis first (unmapped inputs stay as
// they are, and so does the output).
array front(const array& x, int ax, Stream s) {
  return ax <= 0 ? x : moveaxis(x, ax, 0, s);
}
std::vector<int> out_axes(int ax, size_t n) {
  return std::vector<int>(n, ax < 0 ? -1 : 0);
}

Shape batch_of(const array& a) {
  return Shape(a.shape().begin(), a.shape().end() - 2);
}

}  // namespace

// --- inv ---

array inv(const array& a, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(a, "inv", true, st);
  auto out = array(x.shape(), x.dtype(), std::make_shared<Inverse>(st), {x});
  return restored(out, a.dtype(), st);
}

std::vector<Shape> Inverse::output_shapes(const std::vector<array>& in) {
  return {in[0].shape()};
}

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

namespace {

// a (..., N, N) and b (..., N) or (..., N, K), validated, cast, with their
// batch dims broadcast; `vector` tells that b was a vector.
std::pair<array, array> solve_operands(const array& a, const array& b,
                                       const char* op, bool& vector, Stream s) {
  check_matrix(a, op, true);
  if (b.ndim() < 1) {
    throw std::invalid_argument(
        tag(op) +
        "The right-hand side must have at least one dimension; got "
        "shape " +
        shape_str(b.shape()) + ".");
  }
  // A vector, or a batch of vectors with exactly a's batch shape (NumPy's
  // ambiguity resolved towards matrices otherwise).
  vector = b.ndim() == 1 ||
           (b.ndim() == a.ndim() - 1 &&
            Shape(b.shape().begin(), b.shape().end() - 1) == batch_of(a));
  int n = a.shape(-1);
  int bn = vector ? b.shape(-1) : b.shape(-2);
  if (bn != n) {
    throw std::invalid_argument(
        tag(op) + "Incompatible shapes " + shape_str(a.shape()) + " and " +
        shape_str(b.shape()) +
        ": b must be (..., N) or (..., N, K) for a of shape (..., N, N).");
  }
  auto t = compute_dtype(a, op);
  if (compute_dtype(b, op) == float64) {
    t = float64;
  }
  auto aa = astype(a, t, s);
  auto bb = astype(vector ? expand_dims(b, -1, s) : b, t, s);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_of(aa), batch_of(bb), op);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(tag(op) + "Batch dimensions of shapes " +
                                shape_str(a.shape()) + " and " +
                                shape_str(b.shape()) + " cannot be broadcast.");
  }
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {n, n});
  sb.insert(sb.end(), {n, bb.shape(-1)});
  return {broadcast_to(aa, sa, s), broadcast_to(bb, sb, s)};
}

Dtype result_dtype(const array& a, const array& b) {
  return promote_types(a.dtype(), b.dtype());
}

}  // namespace

array solve(const array& a, const array& b, StreamOrDevice s) {
  auto st = to_stream(s);
  bool vector;
  auto [aa, bb] = solve_operands(a, b, "solve", vector, st);
  auto out =
      array(bb.shape(), bb.dtype(), std::make_shared<Solve>(st), {aa, bb});
  if (vector) {
    out = squeeze(out, -1, st);
  }
  return restored(out, result_dtype(a, b), st);
}

std::vector<Shape> Solve::output_shapes(const std::vector<array>& in) {
  return {in[1].shape()};
}

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

array solve_triangular(const array& a, const array& b, bool upper,
                       StreamOrDevice s) {
  auto st = to_stream(s);
  bool vector;
  auto [aa, bb] = solve_operands(a, b, "solve_triangular", vector, st);
  auto out = array(bb.shape(), bb.dtype(),
                   std::make_shared<SolveTriangular>(st, upper), {aa, bb});
  if (vector) {
    out = squeeze(out, -1, st);
  }
  return restored(out, result_dtype(a, b), st);
}

bool SolveTriangular::is_equivalent(const Primitive& o) const {
  return typeid(o) == typeid(*this) &&
         static_cast<const SolveTriangular&>(o).upper_ == upper_;
}

std::vector<Shape> SolveTriangular::output_shapes(
    const std::vector<array>& in) {
  return {in[1].shape()};
}

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

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(a, "tri_inv", true, st);
  return restored(solve_triangular(x, eye_like(x, st), upper, st), a.dtype(),
                  st);
}

// --- cholesky ---

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(a, "cholesky", true, st);
  // U = L^T of the transposed input: the primitive only knows "lower".
  if (upper) {
    x = mT(x, st);
  }
  auto out = array(x.shape(), x.dtype(), std::make_shared<Cholesky>(st), {x});
  if (upper) {
    out = mT(out, st);
  }
  return restored(out, a.dtype(), st);
}

std::vector<Shape> Cholesky::output_shapes(const std::vector<array>& in) {
  return {in[0].shape()};
}

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

// inv(A) = L^-T L^-1 from the factor alone.
array cholesky_inv(const array& l, bool upper, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(l, "cholesky_inv", true, st);
  auto lower = upper ? mT(x, st) : x;
  auto li = solve_triangular(lower, eye_like(lower, st), false, st);
  return restored(mm(mT(li, st), li, st), l.dtype(), st);
}

// --- qr ---

std::pair<array, array> qr(const array& a, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(a, "qr", false, st);
  int m = x.shape(-2), n = x.shape(-1), k = std::min(m, n);
  Shape qs = batch_of(x), rs = batch_of(x);
  qs.insert(qs.end(), {m, k});
  rs.insert(rs.end(), {k, n});
  auto outs = array::make_arrays({qs, rs}, {x.dtype(), x.dtype()},
                                 std::make_shared<QRF>(st), {x});
  return {restored(outs[0], a.dtype(), st), restored(outs[1], a.dtype(), st)};
}

std::vector<Shape> QRF::output_shapes(const std::vector<array>& in) {
  Shape qs = batch_of(in[0]), rs = batch_of(in[0]);
  int m = in[0].shape(-2), n = in[0].shape(-1), k = std::min(m, n);
  qs.insert(qs.end(), {m, k});
  rs.insert(rs.end(), {k, n});
  return {qs, rs};
}

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

// --- eigh ---

namespace {

bool parse_uplo(const std::string& uplo, const char* op) {
  if (uplo != "L" && uplo != "U") {
    throw std::invalid_argument(
        tag(op) + "UPLO must be \"L\" or \"U\"; got \"" + uplo + "\".");
  }
  return uplo == "U";
}

std::vector<array> eigh_impl(const array& a, bool upper, bool vectors,
                             const char* op, Stream s) {
  auto x = prepared_or_complex(a, op, true, s);
  int n = x.shape(-1);
  Shape ws = batch_of(x);
  ws.push_back(n);
  bool cplx = is_complex(x.dtype());
  std::vector<Shape> shapes{ws};
  // Hermitian: real eigenvalues.
  std::vector<Dtype> dtypes{cplx ? float32 : x.dtype()};
  if (vectors) {
    shapes.push_back(x.shape());
    dtypes.push_back(x.dtype());
  }
  auto outs = array::make_arrays(
      shapes, dtypes, std::make_shared<Eigh>(s, upper, vectors), {x});
  if (!cplx) {
    for (auto& o : outs) {
      o = restored(o, a.dtype(), s);
    }
  }
  return outs;
}

// F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it.
array eig_gaps(const array& w, Stream s) {
  auto d = subtract(expand_dims(w, -2, s), expand_dims(w, -1, s), s);
  auto i = eye(w.shape(-1), w.shape(-1), 0, w.dtype(), s);
  return divide(subtract(array(1.0, w.dtype()), i, s), add(d, i, s), s);
}

}  // namespace

std::pair<array, array> eigh(const array& a, const std::string& UPLO,
                             StreamOrDevice s) {
  auto outs =
      eigh_impl(a, parse_uplo(UPLO, "eigh"), true, "eigh", to_stream(s));
  return {outs[0], outs[1]};
}

array eigvalsh(const array& a, const std::string& UPLO, StreamOrDevice s) {
  return eigh_impl(a, parse_uplo(UPLO, "eigvalsh"), false, "eigvalsh",
                   to_stream(s))[0];
}

bool Eigh::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& e = static_cast<const Eigh&>(o);
  return e.upper_ == upper_ && e.vectors_ == vectors_;
}

std::vector<Shape> Eigh::output_shapes(const std::vector<array>& in) {
  Shape ws = batch_of(in[0]);
  ws.push_back(in[0].shape(-1));
  if (vectors_) {
    return {ws, in[0].shape()};
  }
  return {ws};
}

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

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared_or_complex(a, "svd", false, st);
  auto p = std::make_shared<SVD>(st, compute_uv);
  bool cplx = is_complex(x.dtype());
  std::vector<Dtype> dtypes(compute_uv ? 3 : 1, x.dtype());
  if (cplx) {
    dtypes[compute_uv ? 1 : 0] = float32;  // real singular values
  }
  auto outs = array::make_arrays(p->output_shapes({x}), dtypes, p, {x});
  if (!cplx) {
    for (auto& o : outs) {
      o = restored(o, a.dtype(), st);
    }
  }
  return outs;
}

bool SVD::is_equivalent(const Primitive& o) const {
  return typeid(o) == typeid(*this) &&
         static_cast<const SVD&>(o).compute_uv_ == compute_uv_;
}

std::vector<Shape> SVD::output_shapes(const std::vector<array>& in) {
  int m = in[0].shape(-2), n = in[0].shape(-1), k = std::min(m, n);
  Shape b = batch_of(in[0]);
  Shape us = b, ss = b, vs = b;
  us.insert(us.end(), {m, m});
  ss.push_back(k);
  vs.insert(vs.end(), {n, n});
  if (compute_uv_) {
    return {us, ss, vs};
  }
  return {ss};
}

namespace {

// The first k columns (or rows) of the full factors: the singular vectors.
array first_cols(const array& x, int k, Stream s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  stop.back() = k;
  return slice(x, start, stop, s);
}
array first_rows(const array& x, int k, Stream s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  stop[x.ndim() - 2] = k;
  return slice(x, start, stop, s);
}

// F_ij = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it.
array sv_gaps(const array& sv, Stream s) { return eig_gaps(square(sv, s), s); }

}  // namespace

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

std::vector<array> eig_impl(const array& a, bool vectors, const char* op,
                            Stream s) {
  auto x = prepared_or_complex(a, op, true, s);
  auto p = std::make_shared<Eig>(s, vectors);
  return array::make_arrays(p->output_shapes({x}),
                            std::vector<Dtype>(vectors ? 2 : 1, complex64), p,
                            {x});
}

}  // namespace

std::pair<array, array> eig(const array& a, StreamOrDevice s) {
  auto outs = eig_impl(a, true, "eig", to_stream(s));
  return {outs[0], outs[1]};
}

array eigvals(const array& a, StreamOrDevice s) {
  return eig_impl(a, false, "eigvals", to_stream(s))[0];
}

bool Eig::is_equivalent(const Primitive& o) const {
  return typeid(o) == typeid(*this) &&
         static_cast<const Eig&>(o).vectors_ == vectors_;
}

std::vector<Shape> Eig::output_shapes(const std::vector<array>& in) {
  Shape ws = batch_of(in[0]);
  ws.push_back(in[0].shape(-1));
  if (vectors_) {
    return {ws, in[0].shape()};
  }
  return {ws};
}

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

// --- lu ---

namespace {

std::vector<array> luf(const array& x, Stream s) {
  auto p = std::make_shared<LUF>(s);
  return array::make_arrays(p->output_shapes({x}), {x.dtype(), uint32, uint32},
                            p, {x});
}

}  // namespace

std::pair<array, array> lu_factor(const array& a, StreamOrDevice s) {
  auto st = to_stream(s);
  auto outs = luf(prepared(a, "lu_factor", false, st), st);
  return {restored(outs[0], a.dtype(), st), outs[1]};
}

std::vector<array> lu(const array& a, StreamOrDevice s) {
  auto st = to_stream(s);
  auto outs = luf(prepared(a, "lu", false, st), st);
  const auto& packed = outs[0];
  int m = packed.shape(-2), n = packed.shape(-1), k = std::min(m, n);
  int nd = packed.ndim();
  Shape start(nd, 0), stop = packed.shape();
  stop[nd - 1] = k;
  auto l = add(tril(slice(packed, start, stop, st), -1, st),
               eye(m, k, 0, packed.dtype(), st), st);
  stop = packed.shape();
  stop[nd - 2] = k;
  auto u = triu(slice(packed, start, stop, st), 0, st);
  return {outs[2], restored(l, a.dtype(), st), restored(u, a.dtype(), st)};
}

std::vector<Shape> LUF::output_shapes(const std::vector<array>& in) {
  Shape b = batch_of(in[0]);
  int m = in[0].shape(-2), n = in[0].shape(-1);
  Shape piv = b, perm = b;
  piv.push_back(std::min(m, n));
  perm.push_back(m);
  return {in[0].shape(), piv, perm};
}

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

// --- composites ---

array pinv(const array& a, StreamOrDevice s) {
  auto st = to_stream(s);
  auto x = prepared(a, "pinv", false, st);
  int m = x.shape(-2), n = x.shape(-1), k = std::min(m, n);
  if (x.size() == 0) {
    // An empty matrix (or batch): the pseudo-inverse is the empty (or
    // zero, for a 0 x n / m x 0 matrix) transpose, as NumPy's.
    Shape out = x.shape();
    std::swap(out[out.size() - 1], out[out.size() - 2]);
    return restored(zeros(out, x.dtype(), st), a.dtype(), st);
  }
  auto f = svd(x, true, st);
  auto u = first_cols(f[0], k, st);
  auto vt = first_rows(f[2], k, st);
  auto sv = f[1];
  // Singular values below max(M, N) * eps * s_max count as zero (NumPy's
  // rcond default).
  double eps = x.dtype() == float64 ? std::numeric_limits<double>::epsilon()
                                    : std::numeric_limits<float>::epsilon();
  auto cutoff = multiply(max(sv, -1, true, st),
                         array(eps * std::max(m, n), x.dtype()), st);
  auto keep = greater(sv, cutoff, st);
  auto sinv =
      where(keep, reciprocal(where(keep, sv, array(1.0, x.dtype()), st), st),
            array(0.0, x.dtype()), st);
  auto out =
      mm(multiply(mT(vt, st), expand_dims(sinv, -2, st), st), mT(u, st), st);
  return restored(out, a.dtype(), st);
}

array cross(const array& a, const array& b, int axis, StreamOrDevice s) {
  auto st = to_stream(s);
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw std::invalid_argument(
        "[linalg::cross] Inputs must have at least one dimension; got shapes " +
        shape_str(a.shape()) + " and " + shape_str(b.shape()) + ".");
  }
  int ax_a = normalize_axis(axis, a.ndim(), "linalg::cross");
  int ax_b = normalize_axis(axis, b.ndim(), "linalg::cross");
  if (a.shape(ax_a) != 3 || b.shape(ax_b) != 3) {
    std::ostringstream msg;
    msg << "[linalg::cross] The axis " << axis
        << " must have size 3 in both inputs; got shapes "
        << shape_str(a.shape()) << " and " << shape_str(b.shape()) << ".";
    throw std::invalid_argument(msg.str());
  }
  auto aa = moveaxis(a, ax_a, -1, st);
  auto bb = moveaxis(b, ax_b, -1, st);
  auto comp = [&](const array& x, int i) {
    Shape start(x.ndim(), 0), stop = x.shape();
    start.back() = i;
    stop.back() = i + 1;
    return slice(x, start, stop, st);
  };
  auto a0 = comp(aa, 0), a1 = comp(aa, 1), a2 = comp(aa, 2);
  auto b0 = comp(bb, 0), b1 = comp(bb, 1), b2 = comp(bb, 2);
  auto c =
      concatenate({subtract(multiply(a1, b2, st), multiply(a2, b1, st), st),
                   subtract(multiply(a2, b0, st), multiply(a0, b2, st), st),
                   subtract(multiply(a0, b1, st), multiply(a1, b0, st), st)},
                  -1, st);
  int out_axis = axis < 0 ? axis : normalize_axis(axis, c.ndim(), "cross");
  return moveaxis(c, -1, out_axis, st);
}

// --- norm ---

namespace {

array vector_norm(const array& a, double ord, const std::vector<int>& axes,
                  bool keepdims, Stream s) {
  auto x = abs(a, s);
  if (ord == 2.0) {
    return sqrt(sum(square(x, s), axes, keepdims, s), s);
  }
  if (ord == 1.0) {
    return sum(x, axes, keepdims, s);
  }
  if (std::isinf(ord)) {
    return ord > 0 ? max(x, axes, keepdims, s) : min(x, axes, keepdims, s);
  }
  if (ord == 0.0) {
    return sum(astype(not_equal(a, array(0, a.dtype()), s), x.dtype(), s), axes,
               keepdims, s);
  }
  auto p = array(ord, x.dtype());
  return power(sum(power(x, p, s), axes, keepdims, s), reciprocal(p, s), s);
}

// The norm over two axes (r, c) of `a`, keeping both as unit dims.
array matrix_norm_keep(const array& a, const std::string& sord, double ord,
                       int r, int c, Stream s) {
  if (sord == "fro") {
    return sqrt(sum(square(abs(a, s), s), std::vector<int>{r, c}, true, s), s);
  }
  if (sord == "nuc" || ord == 2.0 || ord == -2.0) {
    auto m = moveaxis(moveaxis(a, r, -1, s), c < r ? c : c - 1, -1, s);
    auto sv = svd(m, false, s)[0];
    array v = sord == "nuc" ? sum(sv, -1, false, s)
              : ord > 0     ? max(sv, -1, false, s)
                            : min(sv, -1, false, s);
    int lo = std::min(r, c), hi = std::max(r, c);
    return expand_dims(expand_dims(v, lo, s), hi, s);
  }
  auto x = abs(a, s);
  if (ord == 1.0 || ord == -1.0) {  // column sums
    auto cs = sum(x, r, true, s);
    return ord > 0 ? max(cs, c, true, s) : min(cs, c, true, s);
  }
  // +-inf: row sums
  auto rs = sum(x, c, true, s);
  return ord > 0 ? max(rs, r, true, s) : min(rs, r, true, s);
}

array norm_impl(const array& a_in, std::optional<double> ord,
                std::optional<std::string> sord,
                const std::optional<std::vector<int>>& axis, bool keepdims,
                StreamOrDevice s_) {
  auto s = to_stream(s_);
  // Integer and boolean inputs are promoted to float32 (MLX).
  array a = is_inexact(a_in.dtype()) ? a_in : astype(a_in, float32, s);
  std::vector<int> axes;
  if (axis) {
    for (int ax : *axis) {
      int n = normalize_axis(ax, a.ndim(), "linalg::norm");
      if (std::find(axes.begin(), axes.end(), n) != axes.end()) {
        throw std::invalid_argument("[linalg::norm] Repeated axis in " +
                                    vec_str(*axis) + ".");
      }
      axes.push_back(n);
    }
  } else if (!ord && !sord) {
    // The 2-norm of all the elements.
    for (int i = 0; i < a.ndim(); ++i) {
      axes.push_back(i);
    }
    return vector_norm(a, 2.0, axes, keepdims, s);
  } else if (a.ndim() == 1 || a.ndim() == 2) {
    for (int i = 0; i < a.ndim(); ++i) {
      axes.push_back(i);
    }
  } else {
    throw std::invalid_argument(
        "[linalg::norm] With an ord and no axis the input must be 1-D or 2-D; "
        "got shape " +
        shape_str(a.shape()) + ".");
  }
  if (axes.size() == 1) {
    if (sord) {
      throw std::invalid_argument("[linalg::norm] Norm \"" + *sord +
                                  "\" is a matrix norm; it needs two axes.");
    }
    return vector_norm(a, ord.value_or(2.0), axes, keepdims, s);
  }
  if (axes.size() != 2) {
    throw std::invalid_argument(
        "[linalg::norm] axis must name one or two axes; got " + vec_str(*axis) +
        ".");
  }
  if (sord && *sord != "fro" && *sord != "nuc") {
    throw std::invalid_argument("[linalg::norm] Unknown matrix norm \"" +
                                *sord + "\"; use \"fro\" or \"nuc\".");
  }
  std::string so = sord.value_or(ord ? "" : "fro");
  double o = ord.value_or(0.0);
  if (so.empty() &&
      !(std::abs(o) == 1.0 || std::abs(o) == 2.0 || std::isinf(o))) {
    std::ostringstream msg;
    msg << "[linalg::norm] Matrix norms take ord 1, -1, 2, -2, inf, -inf, "
           "\"fro\" or \"nuc\"; got "
        << o << ".";
    throw std::invalid_argument(msg.str());
  }
  if ((so == "nuc" || std::abs(o) == 2.0) && !is_floating_point(a.dtype())) {
    throw std::invalid_argument(
        "[linalg::norm] Spectral and nuclear norms of complex arrays are not "
        "supported.");
  }
  auto out = matrix_norm_keep(a, so, o, axes[0], axes[1], s);
  return keepdims ? out : squeeze(out, axes, s);
}

}  // namespace

array norm(const array& a, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  return norm_impl(a, std::nullopt, std::nullopt, axis, keepdims, s);
}

array norm(const array& a, double ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  return norm_impl(a, ord, std::nullopt, axis, keepdims, s);
}

array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  return norm_impl(a, std::nullopt, ord, axis, keepdims, s);
}

}  // namespace fluxion::linalg

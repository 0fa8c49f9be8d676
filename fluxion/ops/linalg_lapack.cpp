// The LAPACK-backed linalg ops (MLX's mx.linalg): argument checks, the
// primitives' construction with their output_shapes and is_equivalent, and
// the composites pinv and cross. norm is in linalg_norm.cpp; the
// primitives' jvp, vjp and vmap rules are in linalg_lapack_rules.cpp and
// linalg_lapack_eig_rules.cpp (all apart only to keep files short).
#include "fluxion/ops/linalg_lapack.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/linalg_lapack_impl.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion::linalg {

using detail::batch_of;
using detail::eig_impl;
using detail::eigh_impl;
using detail::eye_like;
using detail::first_cols;
using detail::first_rows;
using detail::luf;
using detail::mm;
using detail::mT;
using detail::tag;

namespace {

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

std::vector<PrimitiveArg> SolveTriangular::state() const {
  return export_state(upper_);
}

std::shared_ptr<Primitive> SolveTriangular::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "SolveTriangular");
  return std::make_shared<SolveTriangular>(s, a.b(0));
}

std::vector<Shape> SolveTriangular::output_shapes(
    const std::vector<array>& in) {
  return {in[1].shape()};
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

// --- eigh ---

namespace {

bool parse_uplo(const std::string& uplo, const char* op) {
  if (uplo != "L" && uplo != "U") {
    throw std::invalid_argument(
        tag(op) + "UPLO must be \"L\" or \"U\"; got \"" + uplo + "\".");
  }
  return uplo == "U";
}

}  // namespace

namespace detail {

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

}  // namespace detail

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

std::vector<PrimitiveArg> Eigh::state() const {
  return export_state(upper_, vectors_);
}

std::shared_ptr<Primitive> Eigh::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Eigh");
  return std::make_shared<Eigh>(s, a.b(0), a.b(1));
}

std::vector<Shape> Eigh::output_shapes(const std::vector<array>& in) {
  Shape ws = batch_of(in[0]);
  ws.push_back(in[0].shape(-1));
  if (vectors_) {
    return {ws, in[0].shape()};
  }
  return {ws};
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

std::vector<PrimitiveArg> SVD::state() const {
  return export_state(compute_uv_);
}

std::shared_ptr<Primitive> SVD::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "SVD");
  return std::make_shared<SVD>(s, a.b(0));
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

namespace detail {

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

}  // namespace detail

// --- eig ---

namespace detail {

std::vector<array> eig_impl(const array& a, bool vectors, const char* op,
                            Stream s) {
  auto x = prepared_or_complex(a, op, true, s);
  auto p = std::make_shared<Eig>(s, vectors);
  return array::make_arrays(p->output_shapes({x}),
                            std::vector<Dtype>(vectors ? 2 : 1, complex64), p,
                            {x});
}

}  // namespace detail

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

std::vector<PrimitiveArg> Eig::state() const { return export_state(vectors_); }

std::shared_ptr<Primitive> Eig::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Eig");
  return std::make_shared<Eig>(s, a.b(0));
}

std::vector<Shape> Eig::output_shapes(const std::vector<array>& in) {
  Shape ws = batch_of(in[0]);
  ws.push_back(in[0].shape(-1));
  if (vectors_) {
    return {ws, in[0].shape()};
  }
  return {ws};
}

// --- lu ---

namespace detail {

std::vector<array> luf(const array& x, Stream s) {
  auto p = std::make_shared<LUF>(s);
  return array::make_arrays(p->output_shapes({x}), {x.dtype(), uint32, uint32},
                            p, {x});
}

}  // namespace detail

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

}  // namespace fluxion::linalg

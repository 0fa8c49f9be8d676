// Dense linear algebra through LAPACK (MLX's mx.linalg): factorizations,
// solves, inverses, eigen and singular value decompositions, norms. Every
// op is batched over leading dims and accepts float32 and float64 (float16
// and bfloat16 are computed in float32 and rounded back).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion::linalg {

// Vector norms (one axis): ord 2 (default), 1, inf, -inf, 0 (count of
// non-zeros), any p. Matrix norms (two axes): "fro" (default), "nuc", 1, -1,
// 2, -2, inf, -inf. With neither ord nor axis: the 2-norm of all elements;
// with an ord but no axis the input must be 1-D (vector norm) or 2-D
// (matrix norm). 2, -2 and "nuc" go through the SVD (real inputs only).
array norm(const array& a, const std::optional<std::vector<int>>& axis = {},
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, double ord,
           const std::optional<std::vector<int>>& axis = {},
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis = {},
           bool keepdims = false, StreamOrDevice s = {});

array inv(const array& a, StreamOrDevice s = {});
// Moore-Penrose pseudo-inverse through the SVD.
array pinv(const array& a, StreamOrDevice s = {});
// x with a @ x = b; b is (..., N, K) (batch dims broadcast) or a vector:
// (N), or (..., N) with exactly a's batch dims.
array solve(const array& a, const array& b, StreamOrDevice s = {});
// x with a @ x = b for a triangular `a` (only that triangle is read).
array solve_triangular(const array& a, const array& b, bool upper = false,
                       StreamOrDevice s = {});
// The inverse of a triangular matrix (only that triangle is read).
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});
// L with L @ L^T = a (or U with U^T @ U = a when `upper`); only that
// triangle of `a` is read.
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});
// inv(a) from its Cholesky factor `l` (lower, or upper when `upper`).
array cholesky_inv(const array& l, bool upper = false, StreamOrDevice s = {});
// Reduced QR: (M, N) -> Q (M, K), R (K, N), K = min(M, N).
std::pair<array, array> qr(const array& a, StreamOrDevice s = {});
// (U, S, Vt) with U (M, M), S (K), Vt (N, N), as MLX; only S when
// !compute_uv.
std::vector<array> svd(const array& a, bool compute_uv = true,
                       StreamOrDevice s = {});
// Eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix
// given by its lower ("L") or upper ("U") triangle.
std::pair<array, array> eigh(const array& a, const std::string& UPLO = "L",
                             StreamOrDevice s = {});
array eigvalsh(const array& a, const std::string& UPLO = "L",
               StreamOrDevice s = {});
// Eigenvalues and right eigenvectors (columns, unit norm) of a general real
// matrix, as complex64 (each eigenvector has its largest component real,
// as LAPACK's geev leaves it; the derivatives keep that normalization).
std::pair<array, array> eig(const array& a, StreamOrDevice s = {});
array eigvals(const array& a, StreamOrDevice s = {});
// (p, L, U) with take_along_axis(L, p[..., None], -2) @ U == a, as MLX:
// p (uint32, M) the row permutation, L (M, K) unit lower triangular, U
// (K, N) upper triangular. Singular matrices factor without error.
std::vector<array> lu(const array& a, StreamOrDevice s = {});
// (LU, pivots): L (strictly below the diagonal) and U packed as getrf
// leaves them; row i was swapped with row pivots[i] (0-based, uint32) at
// step i.
std::pair<array, array> lu_factor(const array& a, StreamOrDevice s = {});
// Determinant of each square matrix of the last two axes, from the LU
// factorization (so it differentiates through lu_factor's rules). Integer
// inputs are promoted to float32; a singular matrix gives 0; 0x0 gives 1.
array det(const array& a, StreamOrDevice s = {});
// (sign, log|det|) of each matrix: sign is -1, 0 or 1 and log|det| is -inf
// for a singular matrix, as NumPy; no overflow where det itself would.
std::pair<array, array> slogdet(const array& a, StreamOrDevice s = {});
// Cross product of 3-vectors along `axis`.
array cross(const array& a, const array& b, int axis = -1,
            StreamOrDevice s = {});

// --- primitives: inputs are float32 or float64 (..., M, N) arrays ---

class Inverse : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Inverse"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

// Inputs (a (..., N, N), b (..., N, K)) with equal batch shapes.
class Solve : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Solve"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

class SolveTriangular : public Primitive {
 public:
  SolveTriangular(Stream s, bool upper) : Primitive(s), upper_(upper) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "SolveTriangular"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
  bool upper() const { return upper_; }

 private:
  bool upper_;
};

// Lower Cholesky factor from the lower triangle (the op transposes for the
// upper variant).
class Cholesky : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Cholesky"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

// Outputs Q, R (reduced).
class QRF : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "QRF"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

// Outputs U, S, Vt (full U and Vt) or S alone.
class SVD : public Primitive {
 public:
  SVD(Stream s, bool compute_uv) : Primitive(s), compute_uv_(compute_uv) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "SVD"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES

 private:
  bool compute_uv_;
};

// Outputs eigenvalues and, when `vectors`, eigenvectors; reads the lower
// triangle (or the upper one when `upper`).
class Eigh : public Primitive {
 public:
  Eigh(Stream s, bool upper, bool vectors)
      : Primitive(s), upper_(upper), vectors_(vectors) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Eigh"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES

 private:
  bool upper_, vectors_;
};

// Outputs eigenvalues and, when `vectors`, eigenvectors (complex64).
class Eig : public Primitive {
 public:
  Eig(Stream s, bool vectors) : Primitive(s), vectors_(vectors) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Eig"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES

 private:
  bool vectors_;
};

// Outputs the packed LU (M, N), the pivots (K) and the permutation p (M)
// of `lu`.
class LUF : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "LUF"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

}  // namespace fluxion::linalg

// Internals shared by the LAPACK-backed linalg ops (linalg_lapack.cpp) and
// their transformation rules (linalg_lapack_rules.cpp,
// linalg_lapack_eig_rules.cpp).
#pragma once

#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/shape.h"

namespace fluxion::linalg::detail {

// The start of the ops' error messages: "[linalg::op] ".
inline std::string tag(const char* op) {
  return std::string("[linalg::") + op + "] ";
}

// The transpose of the last two dims, the matrix product, the identity of
// a square matrix's size and dtype, and the dims before the last two.
inline array mT(const array& x, Stream s) { return swapaxes(x, -1, -2, s); }

inline array mm(const array& a, const array& b, Stream s) {
  return matmul(a, b, s);
}

inline array eye_like(const array& x, Stream s) {
  return eye(x.shape(-1), x.shape(-1), 0, x.dtype(), s);
}

inline Shape batch_of(const array& a) {
  return Shape(a.shape().begin(), a.shape().end() - 2);
}

// The derivative of an op that reads only the lower (or upper) triangle of
// a symmetric matrix: a perturbation dA acts as the symmetric matrix built
// from that triangle, ...
inline array sym_from_triangle(const array& t, bool upper, Stream s) {
  return upper ? add(triu(t, 0, s), mT(triu(t, 1, s), s), s)
               : add(tril(t, 0, s), mT(tril(t, -1, s), s), s);
}

// ... and a gradient S with respect to a symmetric perturbation flows to
// the triangle read: off-diagonal entries collect S_ij + S_ji.
inline array triangle_grad(const array& g, bool upper, Stream s) {
  auto both = add(g, mT(g, s), s);
  auto off = upper ? triu(both, 1, s) : tril(both, -1, s);
  return add(off, multiply(g, eye_like(g, s), s), s);
}

// A single-input vmap rule: the mapped axis first (unmapped inputs stay as
// they are, and so does the output).
inline array front(const array& x, int ax, Stream s) {
  return ax <= 0 ? x : moveaxis(x, ax, 0, s);
}
inline std::vector<int> out_axes(int ax, size_t n) {
  return std::vector<int>(n, ax < 0 ? -1 : 0);
}

// The first k columns (or rows) of the full factors: the singular vectors.
array first_cols(const array& x, int k, Stream s);
array first_rows(const array& x, int k, Stream s);

// The Eigh node of eigh / eigvalsh (and Eigh's vmap): `a` checked and cast
// (complex64 stays), the real outputs restored to a's dtype.
std::vector<array> eigh_impl(const array& a, bool upper, bool vectors,
                             const char* op, Stream s);

// The Eig node of eig / eigvals (and Eig's vmap): complex64 outputs.
std::vector<array> eig_impl(const array& a, bool vectors, const char* op,
                            Stream s);

// The LUF node of an already prepared matrix: (packed LU, pivots,
// permutation).
std::vector<array> luf(const array& x, Stream s);

}  // namespace fluxion::linalg::detail

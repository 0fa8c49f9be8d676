// The mx.linalg submodule: norms, inverses, solves, factorizations and
// eigen/singular value decompositions (LAPACK on the CPU).
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace fl = fluxion::linalg;

namespace {

// ord=None | number | "fro" | "nuc"; axis=None | int | Sequence[int].
fx::array norm(const fx::array& a,
               const std::optional<std::variant<double, std::string>>& ord,
               const fxpy::Axes& axis, bool keepdims, fx::StreamOrDevice s) {
  std::optional<std::vector<int>> ax;
  if (axis) {
    ax = fxpy::axes_vector(*axis);
  }
  if (!ord) {
    return fl::norm(a, ax, keepdims, s);
  }
  if (auto* p = std::get_if<double>(&*ord)) {
    return fl::norm(a, *p, ax, keepdims, s);
  }
  return fl::norm(a, std::get<std::string>(*ord), ax, keepdims, s);
}

py::tuple as_tuple(const std::vector<fx::array>& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    t[i] = py::cast(v[i]);
  }
  return t;
}

}  // namespace

void init_linalg(py::module_& parent) {
  auto m = parent.def_submodule(
      "linalg", "Linear algebra: norms, solves, factorizations (as MLX).");
  const auto s = "stream"_a = py::none();
  m.def(
      "det",
      [](const fx::array& a, fx::StreamOrDevice st) { return fl::det(a, st); },
      "a"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Determinant of each square matrix.

Computed through the LU factorization; integer input becomes ``float32``.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The determinants, shape ``a.shape[:-2]``.
)doc");
  m.def(
      "slogdet",
      [](const fx::array& a, fx::StreamOrDevice st) {
        auto [sign, logabs] = fl::slogdet(a, st);
        return py::make_tuple(sign, logabs);
      },
      "a"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Sign and log of the absolute determinant of each square matrix.

Does not overflow where the determinant itself would.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array): ``(sign, log|det|)``; sign 0 and ``-inf`` for a
    singular matrix.
)doc");
  m.def("norm", &norm, "a"_a, py::pos_only(), "ord"_a = py::none(),
        "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s,
      R"doc(Vector or matrix norm.

Args:
    a (array): Input array.
    ord (int, float, str or None, optional): The norm, NumPy's values:
        for vectors any real ``p`` (and ``inf``, ``-inf``); for matrices
        ``"fro"``, ``"nuc"``, 1, -1, 2, -2, ``inf``, ``-inf``. The
        2-norm (Frobenius for matrices) when omitted.
    axis (int or tuple(int), optional): One axis (vector norm) or two
        (matrix norm); the whole flattened array when omitted.
    keepdims (bool, optional): Keep the reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The norms.

Example:
    >>> mx.linalg.norm(mx.array([3.0, 4.0])).item()
    5.0
)doc");
#define FLUXION_LINALG_UNARY(NAME, SUMMARY, RESULT)                  \
  m.def(                                                             \
      #NAME,                                                         \
      [](const fx::array& a, fx::StreamOrDevice st) {                \
        return fl::NAME(a, st);                                      \
      },                                                             \
      "a"_a, py::kw_only(), s,                                       \
      SUMMARY FXDOC_ARGS                                             \
      "    a (array): Matrix or stack of matrices (the last two\n"   \
      "        axes).\n" FXDOC_STREAM FXDOC_RET_ARRAY RESULT "\n");
  FLUXION_LINALG_UNARY(inv, "Inverse of each square matrix.",
                       "``inv(a) @ a`` is the identity.")
  FLUXION_LINALG_UNARY(pinv,
                       "Moore-Penrose pseudo-inverse of each matrix (through "
                       "the SVD).",
                       "The ``(..., N, M)`` pseudo-inverses of ``(..., M, N)`` "
                       "input.")
  FLUXION_LINALG_UNARY(eigvals,
                       "Eigenvalues of each square (general) matrix.",
                       "The eigenvalues, ``complex64``.")
#undef FLUXION_LINALG_UNARY
  m.def(
      "solve",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fl::solve(a, b, st);
      },
      "a"_a, "b"_a, py::kw_only(), s,
      R"doc(Solve the linear system ``a @ x = b``.

Args:
    a (array): Square matrix (or stack).
    b (array): Right-hand side: a vector or a matrix of columns.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``x``.
)doc");
  m.def(
      "solve_triangular",
      [](const fx::array& a, const fx::array& b, bool upper,
         fx::StreamOrDevice st) {
        return fl::solve_triangular(a, b, upper, st);
      },
      "a"_a, "b"_a, py::kw_only(), "upper"_a = false, s,
      R"doc(Solve ``a @ x = b`` for a triangular ``a``.

Args:
    a (array): Triangular square matrix (or stack).
    b (array): Right-hand side.
    upper (bool, optional): ``a`` is upper triangular (else lower).
        Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``x``.
)doc");
  m.def(
      "tri_inv",
      [](const fx::array& a, bool upper, fx::StreamOrDevice st) {
        return fl::tri_inv(a, upper, st);
      },
      "a"_a, "upper"_a = false, py::kw_only(), s,
      R"doc(Inverse of a triangular matrix.

Args:
    a (array): Triangular square matrix (or stack).
    upper (bool, optional): ``a`` is upper triangular (else lower).
        Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The inverse, triangular like ``a``.
)doc");
  m.def(
      "cholesky",
      [](const fx::array& a, bool upper, fx::StreamOrDevice st) {
        return fl::cholesky(a, upper, st);
      },
      "a"_a, "upper"_a = false, py::kw_only(), s,
      R"doc(Cholesky factor of a symmetric positive-definite matrix.

Args:
    a (array): Symmetric positive-definite matrix (or stack).
    upper (bool, optional): Return the upper factor ``U`` with
        ``U.T @ U == a`` instead of the lower ``L`` with
        ``L @ L.T == a``. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The triangular factor.
)doc");
  m.def(
      "cholesky_inv",
      [](const fx::array& l, bool upper, fx::StreamOrDevice st) {
        return fl::cholesky_inv(l, upper, st);
      },
      "L"_a, "upper"_a = false, py::kw_only(), s,
      R"doc(Inverse of a matrix from its Cholesky factor.

Args:
    L (array): The Cholesky factor (see :func:`cholesky`).
    upper (bool, optional): ``L`` is the upper factor. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The inverse of the matrix that ``L`` factors.
)doc");
  m.def(
      "qr",
      [](const fx::array& a, fx::StreamOrDevice st) { return fl::qr(a, st); },
      "a"_a, py::kw_only(), s,
      R"doc(Reduced QR factorization.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array): ``(Q, R)`` with orthonormal columns in ``Q``,
    upper-triangular ``R`` and ``Q @ R == a``.
)doc");
  m.def(
      "svd",
      [](const fx::array& a, bool compute_uv,
         fx::StreamOrDevice st) -> py::object {
        auto out = fl::svd(a, compute_uv, st);
        if (!compute_uv) {
          return py::cast(out[0]);
        }
        return as_tuple(out);
      },
      "a"_a, "compute_uv"_a = true, py::kw_only(), s,
      R"doc(Singular value decomposition.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
    compute_uv (bool, optional): Also return the singular vectors.
        Default ``True``.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array, array) or array: ``(U, S, Vt)`` with
    ``U @ diag(S) @ Vt == a``, or ``S`` alone (descending) when
    ``compute_uv`` is ``False``.
)doc");
  m.def(
      "eigh",
      [](const fx::array& a, const std::string& uplo, fx::StreamOrDevice st) {
        return fl::eigh(a, uplo, st);
      },
      "a"_a, "UPLO"_a = "L", py::kw_only(), s,
      R"doc(Eigenvalues and eigenvectors of a symmetric (Hermitian) matrix.

Args:
    a (array): Symmetric matrix (or stack).
    UPLO (str, optional): Which triangle to read, ``"L"`` or ``"U"``.
        Default ``"L"``.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array): Eigenvalues in ascending order and the
    eigenvectors as columns.
)doc");
  m.def(
      "eigvalsh",
      [](const fx::array& a, const std::string& uplo, fx::StreamOrDevice st) {
        return fl::eigvalsh(a, uplo, st);
      },
      "a"_a, "UPLO"_a = "L", py::kw_only(), s,
      R"doc(Eigenvalues of a symmetric (Hermitian) matrix.

Args:
    a (array): Symmetric matrix (or stack).
    UPLO (str, optional): Which triangle to read, ``"L"`` or ``"U"``.
        Default ``"L"``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The eigenvalues in ascending order.
)doc");
  m.def(
      "eig",
      [](const fx::array& a, fx::StreamOrDevice st) { return fl::eig(a, st); },
      "a"_a, py::kw_only(), s,
      R"doc(Eigenvalues and eigenvectors of a general square matrix.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array): Eigenvalues and eigenvectors (as columns), both
    ``complex64``.
)doc");
  m.def(
      "lu",
      [](const fx::array& a, fx::StreamOrDevice st) {
        return as_tuple(fl::lu(a, st));
      },
      "a"_a, py::kw_only(), s,
      R"doc(LU factorization with partial pivoting.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array, array): ``(p, L, U)``, the row permutation as
    indices, unit lower-triangular ``L`` and upper-triangular ``U``, with
    ``take_along_axis(L, p[..., None], -2) @ U == a``.
)doc");
  m.def(
      "lu_factor",
      [](const fx::array& a, fx::StreamOrDevice st) {
        return fl::lu_factor(a, st);
      },
      "a"_a, py::kw_only(), s,
      R"doc(Compact LU factorization, as LAPACK's ``getrf``.

Args:
    a (array): Matrix or stack of matrices (the last two axes).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, array): ``(LU, pivots)``: ``L`` (unit diagonal omitted)
    and ``U`` in one matrix, and the row swaps.
)doc");
  m.def(
      "cross",
      [](const fx::array& a, const fx::array& b, int axis,
         fx::StreamOrDevice st) { return fl::cross(a, b, axis, st); },
      "a"_a, "b"_a, "axis"_a = -1, py::kw_only(), s,
      R"doc(Cross product of 3-element vectors.

Args:
    a (array): First operand.
    b (array): Second operand.
    axis (int, optional): The axis holding the vectors (size 3).
        Default -1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a x b``.
)doc");
}

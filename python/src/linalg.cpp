// The mx.linalg submodule: norms, inverses, solves, factorizations and
// eigen/singular value decompositions (LAPACK on the CPU).
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
      "Determinant of each square matrix of the last two axes (through the "
      "LU factorization; integer inputs become float32).");
  m.def(
      "slogdet",
      [](const fx::array& a, fx::StreamOrDevice st) {
        auto [sign, logabs] = fl::slogdet(a, st);
        return py::make_tuple(sign, logabs);
      },
      "a"_a, py::pos_only(), py::kw_only(), s,
      "(sign, log|det|) of each square matrix: sign 0 and -inf for a "
      "singular one; no overflow where det itself would.");
  m.def("norm", &norm, "a"_a, py::pos_only(), "ord"_a = py::none(),
        "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s,
        "Vector or matrix norm (NumPy's ord values).");
#define FLUXION_LINALG_UNARY(NAME)                    \
  m.def(                                              \
      #NAME,                                          \
      [](const fx::array& a, fx::StreamOrDevice st) { \
        return fl::NAME(a, st);                       \
      },                                              \
      "a"_a, py::kw_only(), s);
  FLUXION_LINALG_UNARY(inv)
  FLUXION_LINALG_UNARY(pinv)
  FLUXION_LINALG_UNARY(eigvals)
#undef FLUXION_LINALG_UNARY
  m.def(
      "solve",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fl::solve(a, b, st);
      },
      "a"_a, "b"_a, py::kw_only(), s, "x with a @ x = b.");
  m.def(
      "solve_triangular",
      [](const fx::array& a, const fx::array& b, bool upper,
         fx::StreamOrDevice st) {
        return fl::solve_triangular(a, b, upper, st);
      },
      "a"_a, "b"_a, py::kw_only(), "upper"_a = false, s);
  m.def(
      "tri_inv",
      [](const fx::array& a, bool upper, fx::StreamOrDevice st) {
        return fl::tri_inv(a, upper, st);
      },
      "a"_a, "upper"_a = false, py::kw_only(), s);
  m.def(
      "cholesky",
      [](const fx::array& a, bool upper, fx::StreamOrDevice st) {
        return fl::cholesky(a, upper, st);
      },
      "a"_a, "upper"_a = false, py::kw_only(), s);
  m.def(
      "cholesky_inv",
      [](const fx::array& l, bool upper, fx::StreamOrDevice st) {
        return fl::cholesky_inv(l, upper, st);
      },
      "L"_a, "upper"_a = false, py::kw_only(), s);
  m.def(
      "qr",
      [](const fx::array& a, fx::StreamOrDevice st) { return fl::qr(a, st); },
      "a"_a, py::kw_only(), s, "Reduced QR: (Q, R).");
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
      "(U, S, Vt), or S alone when compute_uv is False.");
  m.def(
      "eigh",
      [](const fx::array& a, const std::string& uplo, fx::StreamOrDevice st) {
        return fl::eigh(a, uplo, st);
      },
      "a"_a, "UPLO"_a = "L", py::kw_only(), s,
      "Eigenvalues (ascending) and eigenvectors of a symmetric matrix.");
  m.def(
      "eigvalsh",
      [](const fx::array& a, const std::string& uplo, fx::StreamOrDevice st) {
        return fl::eigvalsh(a, uplo, st);
      },
      "a"_a, "UPLO"_a = "L", py::kw_only(), s);
  m.def(
      "eig",
      [](const fx::array& a, fx::StreamOrDevice st) { return fl::eig(a, st); },
      "a"_a, py::kw_only(), s, "Eigenvalues and eigenvectors (complex64).");
  m.def(
      "lu",
      [](const fx::array& a, fx::StreamOrDevice st) {
        return as_tuple(fl::lu(a, st));
      },
      "a"_a, py::kw_only(), s,
      "(p, L, U): take_along_axis(L, p[..., None], -2) @ U == a.");
  m.def(
      "lu_factor",
      [](const fx::array& a, fx::StreamOrDevice st) {
        return fl::lu_factor(a, st);
      },
      "a"_a, py::kw_only(), s, "(LU, pivots) as LAPACK's getrf.");
  m.def(
      "cross",
      [](const fx::array& a, const fx::array& b, int axis,
         fx::StreamOrDevice st) { return fl::cross(a, b, axis, st); },
      "a"_a, "b"_a, "axis"_a = -1, py::kw_only(), s);
}

// A program built against an installed Fluxion, as a user's would be
// (README.md, "Install"): each line below reaches one of the library's
// dependencies, so a link line or an imported target that lacks one fails
// here. CI builds it with find_package(Fluxion) and with pkg-config
// (tools/test_install.sh) and runs it; it prints what it checked and exits
// non-zero when a result is wrong.
#include <cstdio>
#include <filesystem>

#include "fluxion/fluxion.h"

using namespace fluxion;

static int failures = 0;

static void check(const char* what, const array& ok) {
  bool good = ok.item<bool>();
  std::printf("%-36s %s\n", what, good ? "ok" : "WRONG");
  failures += !good;
}

int main() {
  random::seed(3);
  array a = random::normal({64, 64}) + 8.0f * eye(64);
  array x = random::normal({64, 4});

  // OpenBLAS (gemm) and LAPACKE (getrf/getri).
  check("matmul then solve (OpenBLAS, LAPACK)",
        allclose(linalg::solve(a, matmul(a, x)), x, 1e-4, 1e-4));
  check("inv(a) @ a == I", allclose(matmul(linalg::inv(a), a), eye(64), 1e-4, 1e-4));

  // The vectorized transcendentals (SLEEF or libmvec) against log.
  array v = random::uniform({1 << 16}) + 0.5f;
  check("log(exp(v)) == v (vector math)", allclose(log(exp(v)), v, 1e-5, 1e-5));

  // Reverse mode through the graph: d/dw sum((x w)^2) = 2 x^T x w.
  array w = random::normal({4, 1});
  auto loss = [&](const array& w) { return sum(square(matmul(x, w))); };
  array g = grad(loss)(w);
  check("grad of a quadratic", allclose(g, 2.0f * matmul(matmul(transpose(x), x), w),
                                        1e-3, 1e-3));

  // zlib: a deflated .npz written and read back.
  auto file = (std::filesystem::temp_directory_path() / "fluxion_consumer.npz").string();
  savez_compressed(file, {{"x", x}});
  check("savez_compressed/load_npz (zlib)", array_equal(load_npz(file).at("x"), x));
  std::filesystem::remove(file);

  std::printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

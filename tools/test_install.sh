#!/bin/sh
# tools/test_install.sh [BUILD]: the installed packages, used as a user
# would (README.md, "Install"), from the build folder that `make test` has
# just built, so that nothing is compiled again but the C++ example:
#  - cmake --install into BUILD/install-check/prefix; examples/cpp_consumer
#    built against it with find_package(Fluxion), and as one file with
#    pkg-config's link line; both run.
#  - pip install into a venv (--system-site-packages, for NumPy and
#    pytest), then a smoke subset of tests/python run from outside the
#    source tree against the installed fluxion.
set -eu
BUILD=${1:-build}
SRC=$(pwd)
CHECK=$(cd "$BUILD" && pwd)/install-check
PY=$(cat "$BUILD/python-executable")
LAUNCHER=$(command -v ccache || true)
SMOKE="test_array test_utils test_nn_module test_optimizers test_compile \
  test_io test_exception_boundary"
rm -rf "$CHECK"
mkdir -p "$CHECK"
start=$(date +%s)

cmake --install "$BUILD" --prefix "$CHECK/prefix" > "$CHECK/install.log"
cmake -S examples/cpp_consumer -B "$CHECK/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$CHECK/prefix" ${LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$LAUNCHER} \
  > "$CHECK/consumer.log"
cmake --build "$CHECK/consumer" >> "$CHECK/consumer.log"
echo "install: find_package(Fluxion) consumer:"
"$CHECK/consumer/fluxion_consumer"
export PKG_CONFIG_PATH="$(dirname "$(find "$CHECK/prefix" -name fluxion.pc)")"
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
$LAUNCHER c++ -std=c++20 -O1 examples/cpp_consumer/main.cpp -o "$CHECK/consumer_pc" \
  $(pkg-config --cflags --libs fluxion) -Wl,-rpath,"$(pkg-config --variable=libdir fluxion)"
echo "install: pkg-config consumer: $("$CHECK/consumer_pc" | tail -n 1)"
cpp_done=$(date +%s)

# --without-pip: the base interpreter's pip, seen through the system
# site-packages, installs into the venv (ensurepip would take longer).
"$PY" -m venv --system-site-packages --without-pip "$CHECK/venv"
FLUXION_BUILD_DIR="$BUILD" "$CHECK/venv/bin/python" -m pip install -q \
  --no-build-isolation --no-deps --no-cache-dir --disable-pip-version-check .
# Outside the source tree, so that nothing there can be imported instead.
OUTSIDE=$(mktemp -d)
trap 'rm -rf "$OUTSIDE"' EXIT
cd "$OUTSIDE"
unset PYTHONPATH
"$CHECK/venv/bin/python" - <<'PY'
import pathlib, sys, fluxion, fluxion.core, fluxion.nn, fluxion.optimizers
pkg = pathlib.Path(fluxion.__file__).parent
assert pkg.is_relative_to(sys.prefix), f"imported {pkg}, not the venv's"
for f in ("core.pyi", "py.typed"):
    assert (pkg / f).exists(), f"{f} not installed"
assert fluxion.__version__ == fluxion.core.__version__, "versions differ"
print(f"install: fluxion {fluxion.__version__} imported from {pkg}")
PY
"$CHECK/venv/bin/python" -m pytest -q -p no:cacheprovider \
  $(for t in $SMOKE; do printf '%s ' "$SRC/tests/python/$t.py"; done)
end=$(date +%s)
echo "install: C++ checks $((cpp_done - start)) s, Python install + smoke $((end - cpp_done)) s"

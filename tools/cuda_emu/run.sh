#!/bin/sh
# Runs the fused-layer GPU kernels (norm.cu, rope.cu, hadamard.cu) on the
# host through shim.h and checks them against the CPU kernels' algorithms
# (fused_layers_check.cpp): for a machine without a GPU. Takes a few
# minutes (one std::thread per emulated GPU thread). `run.sh norm` runs the
# norms only, `run.sh rest` RoPE and Hadamard only.
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k=$root/fluxion/backend/cuda
python3 "$here/extract.py" "$k/norm.cu" 'void norm_gpu(' "$tmp/norm_k.h"
python3 "$here/extract.py" "$k/rope.cu" '}  // namespace\n\nvoid RoPE' "$tmp/rope_k.h"
python3 "$here/extract.py" "$k/hadamard.cu" \
  'template <typename T, typename M, int MF>\nvoid hadamard_typed(' "$tmp/had_k.h"
# H_m as the CPU builds it (fluxion/ops/hadamard.cpp's detail namespace).
python3 - "$root/fluxion/ops/hadamard.cpp" "$tmp/had_matrix.h" <<'PY'
import sys
s = open(sys.argv[1]).read()
body = s[s.index("namespace detail {"):s.index("}  // namespace detail")]
open(sys.argv[2], "w").write(
    "#include <cstdint>\n#include <stdexcept>\n#include <string>\n"
    "#include <utility>\n#include <vector>\nnamespace fluxion {\n" + body +
    "}  // namespace detail\n}  // namespace fluxion\n")
PY
${CXX:-g++} -std=c++20 -O1 -w -I"$tmp" -I"$here" -I"$root" -I"$cuda/include" \
  -I"$cuda/include/cccl" -o "$tmp/check" "$here/fused_layers_check.cpp" -lpthread
"$tmp/check" "$@"

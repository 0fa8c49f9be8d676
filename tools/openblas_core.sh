#!/bin/sh
# Prints "fallback" when the system OpenBLAS does not know this CPU and falls
# back to its oldest x86-64 kernels (Debian 12's OpenBLAS 0.3.21 picks
# "Prescott" on recent Xeons) although the CPU has AVX2. Those kernels give
# wrong LAPACK results after some gemms on such CPUs (seen: ssyevd failing
# to converge after a batched dgemm), so `make test` then selects the
# Haswell kernels through OPENBLAS_CORETYPE.
core=$(python3 -c "import ctypes; L = ctypes.CDLL('libopenblas.so.0'); L.openblas_get_corename.restype = ctypes.c_char_p; print(L.openblas_get_corename().decode())" 2>/dev/null) || exit 0
case "$core" in
  Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai|Coppermine|Northwood)
    grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo fallback ;;
esac
exit 0

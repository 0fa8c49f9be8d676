#!/bin/sh
# make test-gpu: build with CUDA (Ninja, all cores) and run the GPU tests,
# then print one summary. The GPU tests: the op table's gpu cases (every
# case against the CPU: forward, gradients, vmap, compile), the other C++
# GPU tests, tests/python/test_cuda.py and test_nccl.py (mx.distributed over
# NCCL: a communicator of one on one GPU). FULL=1 adds the whole suite on
# the CPU (FLUXION_DEFAULT_DEVICE=cpu: the GPU is the default device when
# there is one, and most other tests are written for the CPU).
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
PY=${PY:-python3}
set -u
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLUXION_CUDA=ON \
  ${CMAKE_ARGS:-} > "$BUILD.configure.log" 2>&1 || {
  cat "$BUILD.configure.log"; echo "test-gpu: configure FAILED"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" > "$BUILD.build.log" 2>&1 || {
  grep -E "error|FAILED" "$BUILD.build.log" | head -40
  echo "test-gpu: build FAILED"; exit 1; }
# cuDNN's pip wheel (nvidia-cudnn-cu13), for the C++ tests: outside the
# loader's path, the Python package finds it on sys.path by itself.
if [ -z "${FLUXION_CUDNN_PIP_DIRS:-}" ]; then
  FLUXION_CUDNN_PIP_DIRS=$($PY -c "import os, sys
d = [os.path.join(p, 'nvidia', 'cudnn', 'lib') for p in sys.path if p]
print(os.pathsep.join(x for x in d if os.path.isfile(x + '/libcudnn.so.9')))" \
    2>/dev/null || true)
  export FLUXION_CUDNN_PIP_DIRS
fi
status=0
summary=""
# The C++ GPU tests in $JOBS gtest shards, one process each (a CUDA
# context costs seconds per process, too much for one per test).
FILTER=${FILTER:?the gtest filter of the GPU tests: run it as make test-gpu}
i=0
while [ $i -lt "$JOBS" ]; do
  GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i "$BUILD/fluxion_tests" \
    --gtest_filter="$FILTER" > "$BUILD/gtest-gpu-$i.log" 2>&1 &
  i=$((i + 1))
done
wait
cat "$BUILD"/gtest-gpu-*.log > "$BUILD/gtest-gpu.log"
passed=$(grep -c '^\[       OK \]' "$BUILD/gtest-gpu.log")
# The per-test lines only: gtest lists skipped and failed tests again at the end.
skipped=$(grep -c '^\[  SKIPPED \].* ms)$' "$BUILD/gtest-gpu.log")
failed=$(grep -c '^\[  FAILED  \].* ms)$' "$BUILD/gtest-gpu.log")
crashed=$(for f in "$BUILD"/gtest-gpu-[0-9]*.log; do
  grep -Eq 'from [0-9]+ test suites? ran' "$f" || echo "$f"; done | wc -l)
[ "$failed" = 0 ] && [ "$crashed" = 0 ] || status=1
# A shard without gtest's closing line died mid-test: show where.
for f in "$BUILD"/gtest-gpu-[0-9]*.log; do
  grep -Eq 'from [0-9]+ test suites? ran' "$f" || {
    echo "test-gpu: $f ended early (exit status lost); its last lines:"
    tail -8 "$f"; }
done
summary="$summary\nC++ GPU tests: $passed passed, $skipped skipped (kernel not ported: the reason is in the log), $failed failed, $crashed shards crashed"
# The Python GPU files in PY_SHARDS processes at once (every n-th test,
# tests/python/conftest.py): one process spent ~90 s, mostly waiting on
# the GPU and on Python, with 16 cores idle.
PY_SHARDS=${PY_SHARDS:-4}
j=0
while [ $j -lt "$PY_SHARDS" ]; do
  FLUXION_TEST_SHARD=$j/$PY_SHARDS PYTHONPATH="$BUILD/python" $PY -m pytest \
    -q -rs -p no:cacheprovider tests/python/test_cuda*.py \
    tests/python/test_nccl.py tests/python/test_backend_seam.py \
    > "$BUILD/pytest-gpu-$j.log" 2>&1 &
  j=$((j + 1))
done
wait
cat "$BUILD"/pytest-gpu-[0-9]*.log > "$BUILD/pytest-gpu.log"
# Each shard's last line counts its tests ("N passed, M skipped ... in T s"):
# summed; a shard without it died.
py_counts() {  # py_counts WORD: the sum of "<n> WORD" over the shards' last lines
  for f in "$BUILD"/pytest-gpu-[0-9]*.log; do tail -1 "$f"; done |
    grep -oE "[0-9]+ $1" | awk '{s += $1} END {print s + 0}'
}
py_done=$(for f in "$BUILD"/pytest-gpu-[0-9]*.log; do
  tail -1 "$f" | grep -qE " in [0-9.]+s" && echo x; done | wc -l)
py_failed=$(( $(py_counts failed) + $(py_counts error) ))
[ "$py_failed" = 0 ] && [ "$py_done" = "$PY_SHARDS" ] || status=1
summary="$summary\nPython GPU tests: $(py_counts passed) passed, $(py_counts skipped) skipped, $py_failed failed or errors, $((PY_SHARDS - py_done)) of $PY_SHARDS shards unfinished"
if [ "${FULL:-0}" = 1 ]; then
  ( cd "$BUILD" && FLUXION_DEFAULT_DEVICE=cpu ctest -j "$JOBS" \
      > ctest-all.log 2>&1 ) || status=1
  summary="$summary\nC++ suite (cpu default): $(grep -E 'tests passed|tests failed' "$BUILD/ctest-all.log")"
  FLUXION_DEFAULT_DEVICE=cpu PYTHONPATH="$BUILD/python" $PY -m pytest -q \
    tests/python > "$BUILD/pytest-all.log" 2>&1 || status=1
  summary="$summary\nPython suite (cpu default): $(tail -1 "$BUILD/pytest-all.log")"
fi
[ $status = 0 ] || grep -E "FAILED|Failed|Error" "$BUILD/gtest-gpu.log" \
  "$BUILD/pytest-gpu.log" | head -40
printf "test-gpu summary:$summary\n"
exit $status

#!/bin/sh
# make test-gpu-sanitize: the C++ GPU tests (test_gpu.sh's filter) under
# compute-sanitizer (Makefile's GPU_TESTS), memcheck then racecheck, after
# `make test-gpu` built $BUILD. Each tool runs in $JOBS gtest shards at once (the sanitizer
# slows a kernel launch by orders of magnitude, so shards keep the run in
# one device call); a shard's report is in $BUILD/sanitize-TOOL-N.log.
# Prints, per tool, the tests run, the errors reported and the shards
# that did not finish. TOOLS="memcheck" runs one of them; SHARD_TIMEOUT=S
# stops a shard after S seconds (it then counts as unfinished), so the
# summary still prints within one device call.
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
TOOLS=${TOOLS:-memcheck racecheck}
LIMIT=""
[ -n "${SHARD_TIMEOUT:-}" ] && LIMIT="timeout -s INT $SHARD_TIMEOUT"
set -u
[ -x "$BUILD/fluxion_tests" ] || {
  echo "test-gpu-sanitize: $BUILD/fluxion_tests is missing: run make test-gpu first"
  exit 1; }
command -v compute-sanitizer > /dev/null || PATH="$PATH:/usr/local/cuda/bin"
FILTER=${FILTER:?the gtest filter of the GPU tests: run it as make test-gpu-sanitize}
status=0
summary=""
for tool in $TOOLS; do
  i=0
  while [ $i -lt "$JOBS" ]; do
    GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i $LIMIT compute-sanitizer \
      --tool "$tool" --error-exitcode 9 --print-limit 20 \
      "$BUILD/fluxion_tests" --gtest_filter="$FILTER" --gtest_brief=1 \
      > "$BUILD/sanitize-$tool-$i.log" 2>&1 &
    i=$((i + 1))
  done
  wait
  ran=0; errors=0; unfinished=0
  for f in "$BUILD"/sanitize-"$tool"-[0-9]*.log; do
    n=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran.*/\1/p' "$f")
    ran=$((ran + ${n:-0}))
    e=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$f")
    [ -z "$e" ] && e=$(sed -n 's/^========= RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p' "$f")
    errors=$((errors + ${e:-0}))
    [ -n "$n" ] || { unfinished=$((unfinished + 1)); echo "$f did not finish:"; tail -5 "$f"; }
  done
  [ "$errors" = 0 ] && [ "$unfinished" = 0 ] || status=1
  summary="$summary\n$tool: $ran tests run in $JOBS shards, $errors errors, $unfinished shards unfinished"
done
[ $status = 0 ] || grep -h -B2 -A12 "^========= \(Invalid\|Race\|Error\|Program hit\)" \
  "$BUILD"/sanitize-*.log | head -80
printf "test-gpu-sanitize summary:$summary\n"
exit $status

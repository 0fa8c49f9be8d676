#!/bin/sh
# One call on the lent GPU machine (the `run` tool runs it in a copy of the
# checkout; what lands under $OUT comes back): `make test-gpu`, then the
# parts named as arguments, each logged to $OUT/<part>.log and summed up in
# $OUT/summary.txt. A call has 10 minutes and a cold build takes about 5, so
# the first call is `sh tools/device_call.sh` (build and test-gpu) and the
# next, chained within the machine's 30 s idle time so the build is kept,
# `sh tools/device_call.sh nobuild sanitize bench`. Budget: on an H100
# (session 18) build and test-gpu took 330 s of wall time, bench 69 s, and
# the call cost 650 s of the session's device time (the machine's start
# and the transfers count); a start that fails costs 1.5 to 3 minutes.
# Parts:
#   sanitize  make test-gpu-sanitize (compute-sanitizer memcheck, then
#             racecheck: longer than a call's 10 minutes for the whole
#             GPU suite (session 20): narrow it with GPU_TESTS='<gtest filter>')
#   sanitize-31, sanitize-30, sanitize-29
#             the same on one issue's suites only, each of which fits a
#             call: conv/FFT/linear algebra (31); compile's generated
#             kernels, rows and graphs (30); sort, scan, norms, RoPE,
#             attention, quantized (29)
#   bench     benchmarks/gpu/bench_gpu.py, all rows, then its conv, decode
#             and linalg rows, into one log
#   profile   Nsight Compute over the kernels of the rows that miss their
#             targets (benchmarks/gpu/profile_kernels.py: qmv decode,
#             attention decode, cumsum, rope), into profile.log
#   nobuild   skip test-gpu (the build of an earlier call is reused by the
#             other parts as it is)
set -u
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
summary="$OUT/summary.txt"
note() { echo "$*" | tee -a "$summary"; }
timed() {  # timed NAME COMMAND...: runs COMMAND into $OUT/NAME.log
  name=$1; shift
  start=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  note "$name: rc=$rc in $(( $(date +%s) - start )) s"
  tail -n 25 "$OUT/$name.log"
  return $rc
}
# At most 9 files come back: summary.txt, test-gpu.log, gtest-failed.txt,
# gtest-gpu.log.gz, pytest-gpu.log, sanitize.log, bench.log, profile.log. The exit status
# is 1 when test-gpu or sanitize failed.
status=0
note "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version \
  --format=csv,noheader 2>&1 | head -n 1)"
case " $* " in
  *" nobuild "*) ;;
  *)
    timed test-gpu make test-gpu JOBS="$(nproc)" || status=1
    grep -hE "FAILED|\[  FAILED" build-gpu/gtest-gpu.log > "$OUT/gtest-failed.txt" 2>/dev/null
    # The full logs, for failures that the summary lines do not explain.
    gzip -c build-gpu/gtest-gpu.log > "$OUT/gtest-gpu.log.gz" 2>/dev/null
    cp build-gpu/pytest-gpu.log "$OUT/" 2>/dev/null
    ;;
esac
for part in "$@"; do
  case $part in
    sanitize) timed sanitize make test-gpu-sanitize JOBS="$(nproc)" || status=1 ;;
    sanitize-31|sanitize-30|sanitize-29)
      case $part in
        *31) suites='CudaConv*:CudaFft*:CudaLinalg*:*conv*_gpu:*fft*_gpu:*linalg*_gpu' ;;
        *30) suites='CompiledCuda*:CudaKernel*:*Compile/*_gpu' ;;
        *29) suites='CudaSort*:CudaFastGpu*:CudaNormVjpGpu*:*sdpa*_gpu:*quantiz*_gpu:*sort*_gpu:*cum*_gpu:*norm*_gpu:*rope*_gpu' ;;
      esac
      timed "$part" make test-gpu-sanitize JOBS="$(nproc)" GPU_TESTS="$suites" \
        || status=1 ;;
    bench)
      timed bench sh -c 'for rows in "" conv decode linalg; do
          echo "== bench_gpu.py $rows"
          PYTHONPATH=build-gpu/python python3 benchmarks/gpu/bench_gpu.py $rows
        done'
      ;;
    profile)
      # The last run of each workload (cudaProfilerStart/Stop), every
      # kernel: the misses' kernels in detail, depthwise by duration. The
      # decoding kernels also with every stall reason and the instructions
      # that stall most (SourceCounters): the summary's one stall line left
      # their cause open (session 23).
      timed profile sh -c 'for w in qmv4 decode cumsum rope depthwise; do
          echo "== $w"
          sections="--section SpeedOfLight --section MemoryWorkloadAnalysis
            --section Occupancy --section LaunchStats --section WarpStateStats"
          case $w in
            qmv4|decode) sections="$sections --section SourceCounters
              --print-details all" ;;
            depthwise) sections="--section SpeedOfLight" ;;
          esac
          PYTHONPATH=build-gpu/python ncu --clock-control none \
            --profile-from-start off $sections \
            python3 benchmarks/gpu/profile_kernels.py $w
        done'
      ;;
    nobuild) ;;
    *) note "unknown part: $part" ;;
  esac
done
exit $status

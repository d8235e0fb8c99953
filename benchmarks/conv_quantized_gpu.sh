#!/usr/bin/env bash
# The GPU session of quantized direct sparse convolution (issue 12): builds sdnn_cuda_tests and
# bench_conv_quantized only, runs the [conv_quantized] device tests (SDNN_REQUIRE_GPU=1: a
# missing GPU fails), the same under compute-sanitizer memcheck, then the benchmark (VGG-16
# layers, float vs int8 vs codebook4 vs cuDNN in one run).
#
#   benchmarks/conv_quantized_gpu.sh BUILD_DIR OUT_DIR     (from anywhere; target < 4 minutes
#                                                          on an H100 with 16 cores, build included)
# Env: JOBS (default 16), ARCH (CUDA architectures, default 90), SKIP_BUILD=1 to reuse a build,
#      BENCH_ARGS (extra arguments of the benchmark, e.g. --batch=16 or --layers=vgg_).
# OUT_DIR gets three files:
#   conv_quantized_gpu.log   every step's output and a summary at the end
#   conv_quantized.jsonl     one JSON line per (layer, format) (bench_util.cuh: GPU, CUDA, date)
#   status                   one line per step: name, exit status, seconds
# Exit status: 0 when every step passed, else 1 (the later steps still run).
set -uo pipefail
B=${1:?usage: conv_quantized_gpu.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: conv_quantized_gpu.sh BUILD_DIR OUT_DIR}
SRC=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${JOBS:-16}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/conv_quantized_gpu.log
: >"$LOG"
: >"$OUT/status"
fail=0
say() { echo "== $* ($(date -u +%T))" | tee -a "$LOG"; }
step() {  # step NAME CMD...: runs CMD with its output in the log, records its status
  local name=$1
  shift
  say "$name"
  local t0
  t0=$(date +%s)
  "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$OUT/status" "$LOG"
  [ $rc -eq 0 ] || fail=1
  return $rc
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -2; } >>"$LOG" 2>&1

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  step configure cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" \
    -DSDNN_BUILD_TESTS=ON -DSDNN_BUILD_DEVICE_TESTS=ON -DSDNN_BUILD_BENCHMARKS=ON || { echo "configure failed: $LOG"; exit 1; }
  step build cmake --build "$B" -j"$JOBS" --target sdnn_cuda_tests bench_conv_quantized || { echo "build failed: $LOG"; exit 1; }
fi
CT=$B/tests/sdnn_cuda_tests
BENCH=$B/benchmarks/bench_conv_quantized

step tests env SDNN_REQUIRE_GPU=1 "$CT" "[conv_quantized]" --durations yes
step memcheck env SDNN_REQUIRE_GPU=1 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 "$CT" "[conv_quantized]"

rm -f "$OUT/conv_quantized.jsonl"
# BENCH_ARGS is split into words on purpose.
# shellcheck disable=SC2086
step bench env SDNN_BENCH_JSON="$OUT/conv_quantized.jsonl" "$BENCH" ${BENCH_ARGS:-} --benchmark_counters_tabular=true

say summary
tee -a "$LOG" <"$OUT/status"
lines=$(grep -E "ERROR SUMMARY|All tests passed|test cases:" "$LOG")
echo "$lines" | tee -a "$LOG"
exit $fail

#!/usr/bin/env bash
# The GPU session of the quantized sparse weights: builds sdnn_cuda_tests and the
# benchmarks of WHAT, runs their device tests (SDNN_REQUIRE_GPU=1: a missing GPU fails), the
# same under compute-sanitizer memcheck, then the benchmarks:
#   spmm: [quantized] and bench_quantized_spmm (float vs int8 vs codebook4 vs cuSPARSE, with its plot);
#   conv: [conv_quantized] and bench_conv_quantized (VGG-16 layers, float vs int8 vs codebook4
#         vs cuDNN in one run).
#
#   benchmarks/quantized_gpu.sh BUILD_DIR OUT_DIR          (from anywhere; the build is most of
#                                                          the time on an H100 with 16 cores)
# env: WHAT ("spmm conv", the default, or one of them), JOBS (default 16), ARCH (default 90),
#      SKIP_BUILD=1 (reuse BUILD_DIR), BENCH_ARGS (extra arguments of both benchmarks, e.g.
#      --benchmark_filter=...).
# OUT_DIR gets:
#   quantized_gpu.log                 every step's output and a summary at the end
#   status                            one line per step: name, exit status, seconds
#   spmm: quantized_spmm.jsonl (one JSON line per (sparsity, kernel)), quantized_spmm.gbench.json
#         (Google Benchmark's own JSON), quantized_spmm.png (benchmarks/plot_quantized.py)
#   conv: conv_quantized.jsonl (one JSON line per (layer, format))
# Exit status: 0 when every step passed, else 1 (the later steps still run).
set -uo pipefail
B=${1:?usage: quantized_gpu.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: quantized_gpu.sh BUILD_DIR OUT_DIR}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
SRC=$SDNN_ROOT
use_out "$OUT" quantized_gpu.log || exit 1
LOG=$SUMMARY  # every step's output and every `say` line
: >"$OUT/status"
fail=0
step() {  # step NAME CMD...: runs CMD with its output in the log, records its status
  local name=$1
  shift
  say "== $name ($(date -u +%T))"
  local t0
  t0=$(date +%s)
  "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$OUT/status" "$LOG"
  [ $rc -eq 0 ] || fail=1
  return $rc
}

gpu_banner quantized_gpu

WHAT=${WHAT:-spmm conv}
targets="sdnn_cuda_tests"
for w in $WHAT; do
  case $w in
    spmm) targets="$targets bench_quantized_spmm" ;;
    conv) targets="$targets bench_conv_quantized" ;;
    *) echo "quantized_gpu.sh: WHAT must name spmm and/or conv, got '$w'"; exit 2 ;;
  esac
done
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  CMAKE_ARGS=(-DSDNN_BUILD_TESTS=ON -DSDNN_BUILD_DEVICE_TESTS=ON -DSDNN_BUILD_BENCHMARKS=ON)
  step configure cmake_configure || { echo "configure failed: $LOG"; exit 1; }
  # shellcheck disable=SC2086
  step build cmake_build $targets || { echo "build failed: $LOG"; exit 1; }
fi
CT=$B/tests/sdnn_cuda_tests

for w in $WHAT; do
  if [ "$w" = spmm ]; then tag="[quantized]"; else tag="[conv_quantized]"; fi
  step "tests $w" env SDNN_REQUIRE_GPU=1 "$CT" "$tag" --durations yes
  step "memcheck $w" env SDNN_REQUIRE_GPU=1 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
    "$CT" "$tag"
  # BENCH_ARGS is split into words on purpose.
  if [ "$w" = spmm ]; then
    rm -f "$OUT/quantized_spmm.jsonl"
    # shellcheck disable=SC2086
    step "bench spmm" env SDNN_BENCH_JSON="$OUT/quantized_spmm.jsonl" "$B/benchmarks/bench_quantized_spmm" ${BENCH_ARGS:-} \
      --benchmark_out="$OUT/quantized_spmm.gbench.json" --benchmark_out_format=json --benchmark_counters_tabular=true
    step plot python3 "$SRC/benchmarks/plot_quantized.py" "$OUT/quantized_spmm.jsonl" "$OUT/quantized_spmm.png"
  else
    rm -f "$OUT/conv_quantized.jsonl"
    # shellcheck disable=SC2086
    step "bench conv" env SDNN_BENCH_JSON="$OUT/conv_quantized.jsonl" "$B/benchmarks/bench_conv_quantized" ${BENCH_ARGS:-} \
      --benchmark_counters_tabular=true
  fi
done

say "== summary ($(date -u +%T))"
tee -a "$LOG" <"$OUT/status"
lines=$(grep -E "ERROR SUMMARY|All tests passed|test cases:" "$LOG")
echo "$lines" | tee -a "$LOG"
exit $fail

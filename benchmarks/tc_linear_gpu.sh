#!/usr/bin/env bash
# The GPU session of the tensor-core linear layer, for binaries built beforehand (no build on the
# GPU machine): the device tests (SDNN_REQUIRE_GPU=1), the same under compute-sanitizer memcheck
# (without the [big] case), a SASS summary (HMMA / LDSM / LDGSTS / local memory per kernel), and
# bench_linear_tc.
#
#   benchmarks/tc_linear_gpu.sh BIN_DIR OUT_DIR      BIN_DIR: test_linear_tc, bench_linear_tc
# env: BENCH_ARGS (e.g. --quick, or a subset: --n=8,32 --unstructured=0.9 --blocked= --no-dense),
# SKIP_TESTS=1, SKIP_MEMCHECK=1, SKIP_RACECHECK=1, MEMCHECK_TIMEOUT, RACECHECK_TIMEOUT, TESTS_TIMEOUT,
# BENCH_TIMEOUT (seconds, default 600 / 300 / 900 / 900).
# Order: tests, SASS summary, benchmark, racecheck, memcheck (the slowest last).
# OUT_DIR gets tests.log, memcheck.log, racecheck.log, sass.txt, bench.log, linear_tc.jsonl, status.
set -uo pipefail
BIN=$(cd "${1:?usage: tc_linear_gpu.sh BIN_DIR OUT_DIR}" && pwd)
OUT=${2:?usage: tc_linear_gpu.sh BIN_DIR OUT_DIR}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
: >"$OUT/status"
step() {  # step NAME LOG CMD...
  local name=$1 log=$2
  shift 2
  local t0=$(date +%s)
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$OUT/status"
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader; nvcc --version | tail -1; } >"$OUT/env.txt" 2>&1
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  step tests tests.log timeout "${TESTS_TIMEOUT:-900}" env SDNN_REQUIRE_GPU=1 "$BIN/test_linear_tc" "[tc]" --durations yes
  tail -3 "$OUT/tests.log"
fi
# Per kernel: mma, ldmatrix, cp.async and local-memory instruction counts.
cuobjdump -sass "$BIN/bench_linear_tc" 2>/dev/null | awk '
  /Function :/ { if (name) printf "%-6d %-6d %-6d %-4d %s\n", h, l, g, loc, name; name=$3; h=l=g=loc=0 }
  /HMMA/ { h++ } /LDSM/ { l++ } /LDGSTS/ { g++ } /LDL|STL/ { loc++ }
  END { if (name) printf "%-6d %-6d %-6d %-4d %s\n", h, l, g, loc, name }' | sed '1i HMMA   LDSM   LDGSTS LOCAL kernel' >"$OUT/sass.txt"
rm -f "$OUT/linear_tc.jsonl"
# shellcheck disable=SC2086
step bench bench.log timeout "${BENCH_TIMEOUT:-900}" env SDNN_BENCH_JSON="$OUT/linear_tc.jsonl" "$BIN/bench_linear_tc" ${BENCH_ARGS:-} \
  --benchmark_counters_tabular=true
if [ "${SKIP_RACECHECK:-0}" != 1 ]; then  # shared-memory hazards: the streaming kernel at 4 batch sizes
  step racecheck racecheck.log timeout "${RACECHECK_TIMEOUT:-300}" env SDNN_REQUIRE_GPU=1 compute-sanitizer --tool racecheck \
    --error-exitcode 99 "$BIN/test_linear_tc" "tc_linear: one plan runs batches of several sizes in turn (split counters stay consistent)"
  tail -2 "$OUT/racecheck.log"
fi
if [ "${SKIP_MEMCHECK:-0}" != 1 ]; then
  step memcheck memcheck.log timeout "${MEMCHECK_TIMEOUT:-600}" env SDNN_REQUIRE_GPU=1 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/test_linear_tc" "[tc]~[big]"
  tail -3 "$OUT/memcheck.log"
fi
python3 "$(dirname "$0")/tc_linear_table.py" "$OUT/linear_tc.jsonl" >"$OUT/table.txt" 2>&1
cat "$OUT/sass.txt" "$OUT/table.txt" "$OUT/status"

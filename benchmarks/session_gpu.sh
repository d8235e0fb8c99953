#!/usr/bin/env bash
# One device call for a session's GPU work: gpu_check.sh (configure, build, every test with
# SDNN_REQUIRE_GPU=1, compute-sanitizer memcheck + racecheck), then, time permitting, the
# Graph Challenge ablation on the configurations in ABLATION_CONFIGS. Logs under $OUT.
#   benchmarks/session_gpu.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
export OUT=${OUT:-$B/session}
mkdir -p "$OUT"
SANITIZE_FILTER=${SANITIZE_FILTER:-'~[challenge]~[indices_huge]'} RACECHECK_FILTER=${RACECHECK_FILTER:-'[panels_race]'} \
  benchmarks/gpu_check.sh "$B"
rc=$?
CT=$B/tests/sdnn_cuda_tests
for tool in memcheck racecheck; do
  SDNN_REQUIRE_GPU=1 timeout 240 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "$CT" \
    "${EXTRA_SANITIZE:-[engine_race],[plan]}" > "$OUT/extra_$tool.log" 2>&1
  r=$?; [ $r -ne 0 ] && rc=1
  echo "compute-sanitizer $tool on ${EXTRA_SANITIZE:-[engine_race],[plan]}: rc=$r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/extra_$tool.log" | tail -1) $(grep -E '^(All tests passed|test cases:)' "$OUT/extra_$tool.log" | tail -1)" | tee -a "$OUT/summary.txt"
done
if [ -n "${ABLATION_CONFIGS:-}" ]; then
  CONFIGS=$ABLATION_CONFIGS benchmarks/challenge_ablation.sh "$B" "$OUT/ablation" > "$OUT/ablation.log" 2>&1
  tail -40 "$OUT/ablation.log"
fi
exit $rc

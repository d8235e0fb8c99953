#!/usr/bin/env bash
# One device call for a session's GPU work: gpu_check.sh (configure, build, every test with
# SDNN_REQUIRE_GPU=1, compute-sanitizer memcheck + racecheck), then, time permitting, the
# Graph Challenge ablation on the configurations in ABLATION_CONFIGS, and with COMPARE_BASE (the
# sources of an earlier commit, e.g. unpacked from `git archive`) the same-call speed comparison
# of benchmarks/compare_baseline.sh (CONFIGS, default 1024:120). NO_SANITIZE=1 skips every
# compute-sanitizer run. Logs under $OUT.
#   benchmarks/session_gpu.sh [build-dir]
set -uo pipefail
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
cd "$SDNN_ROOT" || exit 1
B=${1:-build-gpu}  # relative to the repository root
use_out "${OUT:-$B/session}" || exit 1
export OUT  # gpu_check.sh writes its summary.txt there, the lines below append to it
SANITIZE_FILTER=${SANITIZE_FILTER:-'~[challenge]~[indices_huge]'} RACECHECK_FILTER=${RACECHECK_FILTER:-'[panels_race]'} \
  benchmarks/gpu_check.sh "$B"
rc=$?
CT=$B/tests/sdnn_cuda_tests
tools="memcheck racecheck"
[ "${NO_SANITIZE:-0}" = 1 ] && tools=""
export NO_SANITIZE
for tool in $tools; do
  SDNN_REQUIRE_GPU=1 timeout 240 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "$CT" \
    "${EXTRA_SANITIZE:-[engine_race],[plan]}" > "$OUT/extra_$tool.log" 2>&1
  r=$?; [ $r -ne 0 ] && rc=1
  say "compute-sanitizer $tool on ${EXTRA_SANITIZE:-[engine_race],[plan]}: rc=$r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/extra_$tool.log" | tail -1) $(grep -E '^(All tests passed|test cases:)' "$OUT/extra_$tool.log" | tail -1)"
done
if [ -n "${ABLATION_CONFIGS:-}" ]; then
  CONFIGS=$ABLATION_CONFIGS benchmarks/challenge_ablation.sh "$B" "$OUT/ablation" > "$OUT/ablation.log" 2>&1
  tail -40 "$OUT/ablation.log"
fi
if [ -n "${COMPARE_BASE:-}" ]; then
  CONFIGS=${CONFIGS:-1024:120} benchmarks/compare_baseline.sh "$COMPARE_BASE" "$B" "$OUT/compare" "${COMPARE_ROUNDS:-3}" \
    > "$OUT/compare.log" 2>&1 || rc=1
  tail -30 "$OUT/compare.log"
  [ -f "$OUT/compare/compare.md" ] && cat "$OUT/compare/compare.md"
fi
exit $rc

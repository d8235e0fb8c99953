#!/usr/bin/env bash
# One-call GPU check: configure + build (sm_90 unless ARCH is set) + every test with
# SDNN_REQUIRE_GPU=1 (a missing GPU fails) + compute-sanitizer memcheck/racecheck on the
# device tests + a summary. API errors are not reported by the sanitizer: sdnn checks
# every CUDA status itself, and some tests provoke failing calls on purpose. Logs go to $OUT (or <build>/gpu-check).
#
#   benchmarks/gpu_check.sh [build-dir]
#   env: ARCH (default 90), JOBS (default 16), SANITIZE_FILTER (Catch2 filter for the
#        sanitizer runs, default "~[slow]"), RACECHECK_FILTER (default "[racecheck]"),
#        SKIP_BUILD=1 to reuse a build, CTEST_LABEL (e.g. gpu: only the device tests),
#        NO_SANITIZE=1 to skip the compute-sanitizer runs.
set -uo pipefail
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
cd "$SDNN_ROOT" || exit 1
B=${1:-build-gpu}  # relative to the repository root
use_out "${OUT:-$B/gpu-check}" || exit 1

gpu_banner gpu_check

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  CMAKE_ARGS=(-DSDNN_BUILD_TESTS=ON)
  # shellcheck disable=SC2119  # no targets: build everything
  configure_and_build || exit 1
fi

status=0
t0=$(date +%s)
SDNN_REQUIRE_GPU=1 ctest --test-dir "$B" --output-on-failure ${CTEST_LABEL:+-L "$CTEST_LABEL"} >"$OUT/ctest.log" 2>&1 || status=1
say "ctest (SDNN_REQUIRE_GPU=1, ${CTEST_LABEL:-all} labels) in $(( $(date +%s) - t0 )) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E '^\s+[0-9]+ - .*(Failed|Not Run|Timeout|Exception)' "$OUT/ctest.log" | tee -a "$SUMMARY"

CT=$B/tests/sdnn_cuda_tests
if [ -x "$CT" ]; then
  SDNN_REQUIRE_GPU=1 "$CT" --list-tests >"$OUT/cuda_tests_list.txt" 2>&1
  say "device test cases: $(grep -E '^[0-9]+ (matching )?test cases' "$OUT/cuda_tests_list.txt" | tail -1)"
  tools="memcheck racecheck"
  [ "${NO_SANITIZE:-0}" = 1 ] && tools=""
  for tool in $tools; do
    if [ $tool = memcheck ]; then f=${SANITIZE_FILTER:-"~[slow]"}; else f=${RACECHECK_FILTER:-"[racecheck]"}; fi
    t0=$(date +%s)
    SDNN_REQUIRE_GPU=1 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "$CT" "$f" >"$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    say "compute-sanitizer $tool on \"$f\": rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E '^(All tests passed|test cases:)' "$OUT/sanitizer_$tool.log" | tail -1)"
  done
fi
say "== gpu_check status: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status

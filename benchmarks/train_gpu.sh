#!/usr/bin/env bash
# GPU check of the device training primitives (train/op/backward.cuh, train/kernel/backward.cuh):
# configure + build the device test program only, run its "[train]" cases with
# SDNN_REQUIRE_GPU=1 (a missing GPU fails), then compute-sanitizer memcheck and racecheck on
# the same cases. Logs in OUT: summary.txt, build.log (configure + build), tests.log,
# memcheck.log, racecheck.log. Exit status 0 only when everything passed.
#
#   benchmarks/train_gpu.sh BUILD OUT
#   env: ARCH (default 90), JOBS (default 16), SKIP_BUILD=1 to reuse BUILD.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD OUT" >&2
  exit 2
fi
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
# BUILD and OUT are relative to the caller's directory; the script runs from the repository root
B=$(abs_path "$1")
use_out "$2" || exit 1
cd "$SDNN_ROOT" || exit 1

gpu_banner train_gpu

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  CMAKE_ARGS=(-DSDNN_BUILD_TESTS=ON -DSDNN_BUILD_DEVICE_TESTS=ON)
  CONFIGURE_LOG=$OUT/build.log BUILD_LOG=$OUT/build.log
  configure_and_build sdnn_cuda_tests || exit 1
fi

CT=$B/tests/sdnn_cuda_tests
if [ ! -x "$CT" ]; then
  say "no $CT"; exit 1
fi
status=0
t0=$(date +%s)
SDNN_REQUIRE_GPU=1 "$CT" "[train]" --durations yes >"$OUT/tests.log" 2>&1
rc=$?
[ $rc -ne 0 ] && status=1
say "tests \"[train]\" (SDNN_REQUIRE_GPU=1): rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -E '^(All tests passed|test cases:)' "$OUT/tests.log" | tail -1)"
grep -E 'FAILED|warning:' "$OUT/tests.log" | head -20 | tee -a "$SUMMARY"

for tool in memcheck racecheck; do
  t0=$(date +%s)
  # API errors are not reported: sdnn checks every CUDA status itself (and a test provokes a throw)
  SDNN_REQUIRE_GPU=1 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "$CT" "[train]" \
    >"$OUT/$tool.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  say "compute-sanitizer $tool \"[train]\": rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -E 'ERROR SUMMARY' "$OUT/$tool.log" | tail -1) $(grep -E '^(All tests passed|test cases:)' "$OUT/$tool.log" | tail -1)"
done
say "== train_gpu status: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status

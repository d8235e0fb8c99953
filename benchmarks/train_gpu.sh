#!/usr/bin/env bash
# GPU check of the device training primitives (issue 12: train/op/backward.cuh, train/kernel/backward.cuh):
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
# BUILD and OUT are relative to the caller's directory; the script runs from the repository root
case $1 in /*) B=$1 ;; *) B=$PWD/$1 ;; esac
mkdir -p "$2" || exit 1
OUT=$(cd "$2" && pwd) || exit 1
cd "$(dirname "$0")/.." || exit 1
summary=$OUT/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

say "== train_gpu $(date -u +%FT%TZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
say "nvcc: $(nvcc --version | tail -1)"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  if ! cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" -DSDNN_BUILD_TESTS=ON \
      -DSDNN_BUILD_DEVICE_TESTS=ON >"$OUT/build.log" 2>&1; then
    say "configure FAILED (see build.log)"; tail -30 "$OUT/build.log"; exit 1
  fi
  if ! cmake --build "$B" -j"${JOBS:-16}" --target sdnn_cuda_tests >>"$OUT/build.log" 2>&1; then
    say "build FAILED (see build.log)"; grep -E 'error|Error' "$OUT/build.log" | head -40 | tee -a "$summary"; exit 1
  fi
  say "build: ok in $(( $(date +%s) - t0 )) s"
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
grep -E 'FAILED|warning:' "$OUT/tests.log" | head -20 | tee -a "$summary"

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

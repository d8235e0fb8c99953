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
if [ -n "${ABLATION_CONFIGS:-}" ]; then
  CONFIGS=$ABLATION_CONFIGS benchmarks/challenge_ablation.sh "$B" "$OUT/ablation" > "$OUT/ablation.log" 2>&1
  tail -40 "$OUT/ablation.log"
fi
exit $rc

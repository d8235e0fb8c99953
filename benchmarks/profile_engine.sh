#!/usr/bin/env bash
# Profile the depth-first Graph Challenge engine with Nsight Compute (one device call):
# configure a Release build with -lineinfo, build graph_challenge only, time the variants,
# then ncu (full set, source-level) on one launch of the engine kernel per variant.
#   benchmarks/profile_engine.sh [build-dir]
# env: OUT (results), VARIANTS, CONFIGS (N:L list), REPS, TIMEOUT (s per timing run), NO_NCU=1 (timings only),
#      NCU_METRICS (a comma list: only those metrics, instead of the full set), TESTS (a Catch2
#      filter: also build and run the device tests), SANITIZE (memcheck racecheck), SANITIZE_TESTS,
#      ARCH (default 90), JOBS (default 16)
set -uo pipefail
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
cd "$SDNN_ROOT" || exit 1
B=${1:-build-prof}  # relative to the repository root
use_out "${OUT:-$B/profile}" - || exit 1
tests_on=OFF; [ -n "${TESTS:-}" ] && tests_on=ON
CMAKE_ARGS=(-DCMAKE_CUDA_FLAGS=-lineinfo -DSDNN_BUILD_TESTS="$tests_on" -DSDNN_BUILD_DEVICE_TESTS="$tests_on"
  -DSDNN_BUILD_BENCHMARKS=OFF)
targets=(graph_challenge)
[ -n "${TESTS:-}" ] && targets+=(sdnn_cuda_tests)
configure_and_build "${targets[@]}" || exit 1
if [ -n "${TESTS:-}" ]; then
  # The device tests named by TESTS (a Catch2 filter), then the same under compute-sanitizer
  # memcheck and racecheck when SANITIZE is set.
  SDNN_REQUIRE_GPU=1 timeout 300 "$B/tests/sdnn_cuda_tests" "$TESTS" > "$OUT/tests.log" 2>&1
  echo "tests $TESTS: rc=$? $(tail -3 "$OUT/tests.log" | tr '\n' ' ')"
  for tool in ${SANITIZE:-}; do
    SDNN_REQUIRE_GPU=1 timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 99 "$B/tests/sdnn_cuda_tests" \
      "${SANITIZE_TESTS:-[engine_race]}" > "$OUT/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool ${SANITIZE_TESTS:-[engine_race]}: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  done
fi
exe=$B/examples/graph_challenge/graph_challenge
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
for cfg in ${CONFIGS:-1024:120}; do
  n=${cfg%%:*}; l=${cfg##*:}
  for v in ${VARIANTS:-depth_first depth_first_plain}; do
    echo "== $n x $l $v"
    timeout "${TIMEOUT:-120}" "$exe" bench --neurons "$n" --layers "$l" --policy "$v" --reps "${REPS:-5}" > "$OUT/time_${n}_${l}_$v.txt" 2>&1
    grep -E "inference seconds|categories:|engine:|plan|error" "$OUT/time_${n}_${l}_$v.txt" | sed 's/^/   /'
    if [ -z "${NO_NCU:-}" ]; then
      if [ -n "${NCU_METRICS:-}" ]; then  # a few named metrics only (fast), printed as a table
        timeout 300 ncu --metrics "$NCU_METRICS" -k regex:challenge_engine --launch-skip 1 -c 1 "$exe" bench --neurons "$n" \
          --layers "$l" --policy "$v" --reps 1 > "$OUT/ncu_${n}_${l}_$v.metrics.txt" 2>&1 || echo "   ncu rc=$?"
        grep -E "^\s+[a-z_]+__" "$OUT/ncu_${n}_${l}_$v.metrics.txt" | sed 's/^/   /'
        continue
      fi
      timeout 300 ncu --set full --import-source yes -k regex:challenge_engine --launch-skip 1 -c 1 \
        -o "$OUT/ncu_${n}_${l}_$v" -f "$exe" bench --neurons "$n" --layers "$l" --policy "$v" --reps 1 \
        > "$OUT/ncu_${n}_${l}_$v.log" 2>&1 || { echo "   ncu rc=$?"; tail -5 "$OUT/ncu_${n}_${l}_$v.log"; }
      ncu -i "$OUT/ncu_${n}_${l}_$v.ncu-rep" --page details > "$OUT/ncu_${n}_${l}_$v.details.txt" 2>&1
      ncu -i "$OUT/ncu_${n}_${l}_$v.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu_${n}_${l}_$v.source.csv" 2>&1 ||
        ncu -i "$OUT/ncu_${n}_${l}_$v.ncu-rep" --page source --csv > "$OUT/ncu_${n}_${l}_$v.source.csv" 2>&1
      grep -E "Duration|Achieved Occupancy|Registers Per|Theoretical Occ|Warp Cycles Per Issued|Issue Slots Busy|L2 Hit|L1/TEX Hit|Block Limit|Dynamic Shared|Memory Throughput|Compute \(SM\)" \
        "$OUT/ncu_${n}_${l}_$v.details.txt" | sed 's/^/   /'
    fi
  done
done

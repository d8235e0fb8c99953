#!/usr/bin/env bash
# Builds test_linear_tc and bench_linear_tc with nvcc alone (no CMake configure of the whole
# project), in parallel: for the device machine (Catch2 3 installed) or for a machine without a
# GPU whose binaries travel to it (CATCH2=2: Catch2's single header, nothing to link).
#
#   benchmarks/tc_linear_build.sh OUT_DIR        env: ARCH (default 90), CATCH2 (3 or 2, default 3)
# Then: benchmarks/tc_linear_gpu.sh OUT_DIR RESULTS_DIR (with OUT_DIR's libraries on LD_LIBRARY_PATH).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: tc_linear_build.sh OUT_DIR}
mkdir -p "$OUT"
ARCH=${ARCH:-90}
CATCH=${CATCH2:-3}
FLAGS=(-std=c++17 -arch=sm_$ARCH -O3 -I"$SRC/include" -DSDNN_HAS_CUDA=1 --expt-relaxed-constexpr --extended-lambda)
TEST_FLAGS=(-I"$SRC/tests/common" -DSDNN_CATCH2_MAJOR=$CATCH -DSDNN_TEST_DATA_DIR="\"$SRC/tests/data\"")
if [ "$CATCH" = 3 ]; then
  nvcc "${FLAGS[@]}" "${TEST_FLAGS[@]}" "$SRC/tests/cuda/test_linear_tc.cu" -o "$OUT/test_linear_tc" -lCatch2Main -lCatch2 &
else
  nvcc "${FLAGS[@]}" "${TEST_FLAGS[@]}" "$SRC/tests/cuda/test_linear_tc.cu" "$SRC/tests/common/catch_main.cpp" \
    -o "$OUT/test_linear_tc" &
fi
nvcc "${FLAGS[@]}" -I"$SRC/benchmarks/common" "$SRC/benchmarks/bench_linear_tc.cu" -o "$OUT/bench_linear_tc" \
  -lcublas -lbenchmark -lpthread &
fail=0
for job in $(jobs -p); do wait "$job" || fail=1; done
exit $fail

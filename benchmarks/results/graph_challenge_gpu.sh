#!/usr/bin/env bash
# Builds graph_challenge and the sparse_linear device tests on a GPU machine and runs them.
#   benchmarks/results/graph_challenge_gpu.sh test            device tests [sparse_linear] + the built-in default
#   benchmarks/results/graph_challenge_gpu.sh bench "N:L:policy ..."   graph_challenge bench for each config
# Logs and JSON lines go to $OUT (or ./gc_out). The test executable is built from
# tests/cuda/test_sparse_linear.cu alone (a small CMake project below), so that other
# in-progress test files do not cost build time.
# env: OUT, ARCH (default 90), JOBS (default 16), GC_TIMEOUT (s per bench run, default 120).
set -u -o pipefail
# shellcheck source=SCRIPTDIR/../common/gpu_env.sh
source "$(dirname "$0")/../common/gpu_env.sh"
S=$SDNN_ROOT
use_out "${OUT:-$S/gc_out}" - || exit 1
cd "$S" || exit 1
B=$S/build-gpu-gc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.used,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
CMAKE_ARGS=(-DSDNN_HEADER_CHECK=OFF -DSDNN_BUILD_BENCHMARKS=OFF -DSDNN_BUILD_TESTS=OFF)
cmake_configure > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
( cmake_build graph_challenge > "$OUT/build_example.log" 2>&1 ) &
pid_ex=$!
pid_t=""
if [ "${1:-}" = "test" ]; then
  mkdir -p /tmp/gc_tests
  cat > /tmp/gc_tests/CMakeLists.txt <<EOF
cmake_minimum_required(VERSION 3.24)
project(gc_tests LANGUAGES CXX CUDA)
find_package(Catch2 3 REQUIRED)
find_package(CUDAToolkit REQUIRED)
find_package(ZLIB REQUIRED)
add_executable(test_sparse_linear $S/tests/cuda/test_sparse_linear.cu)
target_include_directories(test_sparse_linear PRIVATE $S/include $S/tests/common)
target_compile_definitions(test_sparse_linear PRIVATE SDNN_CATCH2_MAJOR=3 SDNN_TEST_DATA_DIR="$S/tests/data" SDNN_HAS_ZLIB=1 SDNN_HAS_CUDA=1)
target_compile_options(test_sparse_linear PRIVATE --expt-relaxed-constexpr --extended-lambda -diag-suppress 554)
target_link_libraries(test_sparse_linear PRIVATE Catch2::Catch2WithMain CUDA::cudart CUDA::cusparse ZLIB::ZLIB)
set_target_properties(test_sparse_linear PROPERTIES CUDA_ARCHITECTURES ${ARCH:-90} CUDA_STANDARD 17 CXX_STANDARD 17)
EOF
  ( cmake -S /tmp/gc_tests -B /tmp/gc_tests/build -DCMAKE_BUILD_TYPE=Release > "$OUT/build_tests.log" 2>&1 &&
    cmake --build /tmp/gc_tests/build -j"$JOBS" >> "$OUT/build_tests.log" 2>&1 ) &
  pid_t=$!
fi
wait $pid_ex || { echo "example build failed"; grep -m20 -i error "$OUT/build_example.log"; }
GC=$B/examples/graph_challenge/graph_challenge
if [ "${1:-}" = "test" ]; then
  wait $pid_t || { echo "test build failed"; grep -m30 -i -A3 error "$OUT/build_tests.log"; }
  SDNN_REQUIRE_GPU=1 timeout 200 /tmp/gc_tests/build/test_sparse_linear "[sparse_linear]" --durations yes \
    > "$OUT/tests.log" 2>&1
  echo "tests rc=$?"; tail -25 "$OUT/tests.log"
  timeout 100 "$GC" > "$OUT/default.log" 2>&1; echo "default rc=$?"; cat "$OUT/default.log"
  shift
fi
if [ "${1:-}" = "bench" ]; then
  for cfg in ${2:-}; do
    IFS=: read -r n l pol extra <<< "$cfg"; extra=${extra//,/ }
    echo "== bench N=$n L=$l policy=$pol $extra"
    # shellcheck disable=SC2086  # $extra: the config's extra arguments, split into words on purpose
    SDNN_BENCH_JSON=$OUT/graph_challenge.jsonl timeout "${GC_TIMEOUT:-120}" "$GC" bench --neurons "$n" --layers "$l" \
      --policy "$pol" $extra 2>&1 | grep -E "inference seconds|rate|categories|warm-up|error" | tr '\n' ' '
    echo " rc=$?"
  done
  cat "$OUT/graph_challenge.jsonl" 2>/dev/null
fi

#!/bin/bash
# The device-machine command behind the conv results (run from the repository root):
#   benchmarks/results/conv_gpu_run.sh test   -> [conv] tests, compute-sanitizer, quick sweep, sparse_vgg16
#   benchmarks/results/conv_gpu_run.sh bench  -> full sweep (JSON lines) + sparse_vgg16
#   benchmarks/results/conv_gpu_run.sh all    -> tests, full sweep, sparse_vgg16, compute-sanitizer
# Logs and JSON go to $OUT (default ./out-conv).
OUT=${OUT:-out-conv}; mkdir -p $OUT
B=build-gpu-conv
MODE=${1:-test}
export NVIDIA_TF32_OVERRIDE=0   # belt and braces: cuDNN float also runs with CUDNN_FMA_MATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
cmake -S . -B $B -DCMAKE_CUDA_ARCHITECTURES=90 -DSDNN_HEADER_CHECK=OFF -DSDNN_BUILD_EXAMPLES=ON \
  -DSDNN_BUILD_BENCHMARKS=ON > $B.cmake.log 2>&1
T="bench_conv sparse_vgg16"
[ "$MODE" != bench ] && T="$T sdnn_cuda_tests"
for t in $T; do cmake --build $B -j16 --target $t >> $OUT/build.log 2>&1 || echo "BUILD FAILED: $t"; done
grep -E "error" $OUT/build.log | head -20
TESTS=$B/tests/sdnn_cuda_tests
if [ "$MODE" != bench ] && [ ! -x $TESTS ]; then  # someone else's test broke the shared target: build ours alone
  nvcc -std=c++17 -O2 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -Iinclude -Itests/common \
    -DSDNN_CATCH2_MAJOR=3 -DSDNN_HAS_CUDA=1 -DSDNN_HAS_CUDNN=1 -DSDNN_TEST_DATA_DIR=\"tests/data\" \
    tests/cuda/test_conv.cu -o $B/conv_tests_bin -lCatch2Main -lCatch2 -lcudnn -lcusparse -lcublas && TESTS=$B/conv_tests_bin
fi
if [ "$MODE" = test ] || [ "$MODE" = all ]; then
  SDNN_REQUIRE_GPU=1 timeout 60 $TESTS "[conv]" > $OUT/conv_tests.log 2>&1; echo "tests rc=$?"; tail -4 $OUT/conv_tests.log
  grep -B3 -A12 "FAILED" $OUT/conv_tests.log | head -40
fi
if [ "$MODE" = test ]; then
  SDNN_BENCH_JSON=$OUT/conv_quick.jsonl timeout 150 $B/benchmarks/bench_conv --quick --precisions=float,half \
    --sparsities=0.9 > $OUT/bench_quick.log 2>&1; echo "bench rc=$?"
  grep -E "^conv/" $OUT/bench_quick.log
else
  SDNN_BENCH_JSON=$OUT/conv_full.jsonl timeout ${BENCH_TIMEOUT:-200} $B/benchmarks/bench_conv "${@:2}" > $OUT/bench_full.log 2>&1
  echo "bench rc=$? lines $(wc -l < $OUT/conv_full.jsonl)"; grep -E "^conv/.*s900" $OUT/bench_full.log | awk '{print $1, $2, $NF, $(NF-1)}'
fi
timeout 40 $B/examples/sparse_vgg16/sparse_vgg16 32 0.9 5 > $OUT/vgg.log 2>&1; echo "vgg rc=$?"; cat $OUT/vgg.log
if [ "$MODE" = test ] || [ "$MODE" = all ]; then
  SDNN_REQUIRE_GPU=1 timeout 45 compute-sanitizer --tool memcheck $TESTS "[conv][layer]" > $OUT/memcheck.log 2>&1
  echo "memcheck rc=$?"; tail -2 $OUT/memcheck.log
  SDNN_REQUIRE_GPU=1 timeout 30 compute-sanitizer --tool racecheck $TESTS "[conv][layer]" > $OUT/racecheck.log 2>&1
  echo "racecheck rc=$?"; tail -2 $OUT/racecheck.log
fi

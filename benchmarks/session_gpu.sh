#!/usr/bin/env bash
# One device call for a session's GPU work: gpu_check.sh (configure, build, every test with
# SDNN_REQUIRE_GPU=1, compute-sanitizer memcheck + racecheck), then, time permitting, the
# Graph Challenge ablation on the configurations in ABLATION_CONFIGS, and with COMPARE_BASE (the
# sources of an earlier commit, e.g. unpacked from `git archive`) the same-call speed comparison
# of benchmarks/compare_baseline.sh (CONFIGS, default 1024:120). NO_SANITIZE=1 skips every
# compute-sanitizer run. Logs under $OUT.
#   benchmarks/session_gpu.sh [build-dir]
# With BUNDLE=archive (benchmarks/make_bundle.sh: binaries built on a machine without a GPU) the
# archive is unpacked into build-dir instead of configuring and building: the device test program
# runs once (TESTS, default every case), under memcheck (SANITIZE_FILTER) and racecheck
# (RACECHECK_FILTER), then each benchmark of BENCHES ("name args;name args", JSON lines to
# $OUT/<name>.jsonl) and, when the bundle has base/, the comparison with it (CONFIGS, POLICIES).
# With LT=1 only the cuSPARSELt stage runs: cuSPARSELt is found on the GPU machine only (inside the
# Python package nvidia-cusparselt-cu13), so the programs that use it are compiled there with nvcc
# (two at once): the 2:4 tests, whose [cusparselt] case needs it, linked to a Catch2 v2 main built
# elsewhere (LT_CATCH_MAIN: its object; LT_CATCH_INCLUDE: the folder holding catch2/catch.hpp),
# run as LT_TESTS (default [sparse24]), and bench_linear16, run with LT_BENCH_ARGS (JSON lines to
# $OUT/bench_linear16_lt.jsonl); LT_ARCH=90a builds both for sm_90a with the wgmma.sp tiles.
# With PY=1 only the Python stage runs: the package is built there with CMake (the module links the
# GPU machine's Python; PYTHON, default python3), its tests run with SDNN_REQUIRE_GPU=1 (PY_TESTS:
# pytest -k filter), examples/python/prune_convert.py at PY_EXAMPLE_BATCHES (default 1 1024), then
# benchmarks/bench_python.py unless PY_BENCH=0 (JSON lines to
# $OUT/bench_python.jsonl; PY_BENCH_ARGS).
# With TRAIN=1 only the training stage runs, on programs built elsewhere and found in TRAIN_BIN
# (default .cmp): train_mixed_tests (the "[mixed]" device tests, run with SDNN_REQUIRE_GPU=1 and,
# unless NO_SANITIZE=1, under memcheck), train_structured with TRAIN_ARGS (JSON and Markdown to
# $OUT/train_structured.*), and, unless TRAIN_HOST=0, one epoch of the host path
# (train_prune_quantize_host, the 784-1024-1024-10 MLP at batch 128) for the per-epoch comparison.
# With CNN=1 only the CNN training stage runs, on programs in TRAIN_BIN (default .cmp):
# train_cnn_tests (the "[cnn]" device tests, CNN_TESTS, with SDNN_REQUIRE_GPU=1 and, unless
# NO_SANITIZE=1, under memcheck (CNN_SANITIZE_FILTER) and racecheck (CNN_RACECHECK_FILTER)), train_cnn with CNN_ARGS (JSON
# and Markdown to $OUT/train_cnn.*) and its NaN stop.
set -uo pipefail
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
cd "$SDNN_ROOT" || exit 1
B=${1:-build-gpu}  # relative to the repository root
use_out "${OUT:-$B/session}" || exit 1
export OUT  # gpu_check.sh writes its summary.txt there, the lines below append to it
if [ "${LT:-0}" = 1 ]; then
  gpu_banner "session_gpu (cuSPARSELt stage)"
  lt=$(python3 -c "import nvidia.cusparselt as m; print(list(m.__path__)[0])" 2>/dev/null)
  ltlib=$(ls "$lt"/lib/libcusparseLt.so* 2>/dev/null | head -1)
  [ -f "$lt/include/cusparseLt.h" ] && [ -n "$ltlib" ] || { say "cuSPARSELt not found (nvidia.cusparselt: '$lt')"; exit 1; }
  mkdir -p "$B/lt"
  # LT_ARCH=90a: the wgmma.sp tiles too (SDNN_SPARSE24_WGMMA=1), as a CMake build for 90a has them.
  if [ "${LT_ARCH:-90}" = 90a ]; then arch=(-gencode=arch=compute_90a,code=sm_90a -DSDNN_SPARSE24_WGMMA=1)
  else arch=(-arch=sm_90); fi
  flags=(-std=c++17 -O3 -DNDEBUG "${arch[@]}" --expt-relaxed-constexpr --extended-lambda -DSDNN_HAS_CUDA=1
         -DSDNN_HAS_CUSPARSELT=1 -Iinclude -Ibenchmarks/common -Itests/common "-I$lt/include")
  libs=(-Xlinker "$ltlib" -lcublas -lcusparse -Xlinker -rpath -Xlinker "$lt/lib")  # nvcc takes no .so.0 file
  t0=$(date +%s)
  nvcc "${flags[@]}" -DSDNN_CATCH2_MAJOR=2 "-I${LT_CATCH_INCLUDE:?}" "-DSDNN_TEST_DATA_DIR=\"$SDNN_ROOT/tests/data\"" \
    tests/cuda/test_linear_sparse24.cu "${LT_CATCH_MAIN:?}" -o "$B/lt/sparse24_tests" "${libs[@]}" \
    >"$OUT/lt_build_tests.log" 2>&1 &
  nvcc "${flags[@]}" benchmarks/bench_linear16.cu -o "$B/lt/bench_linear16" "${libs[@]}" -lpthread \
    >"$OUT/lt_build_bench.log" 2>&1 &
  wait
  say "cuSPARSELt builds in $(( $(date +%s) - t0 )) s ($ltlib)"
  rc=0
  if [ -x "$B/lt/sparse24_tests" ]; then
    SDNN_REQUIRE_GPU=1 timeout "${TESTS_TIMEOUT:-200}" "$B/lt/sparse24_tests" "${LT_TESTS:-[sparse24]}" >"$OUT/lt_tests.log" 2>&1 || rc=1
    say "2:4 tests (${LT_TESTS:-[sparse24]}): $(grep -E '^(All tests passed|test cases:)' "$OUT/lt_tests.log" | tail -1)"
    grep -E "FAILED" -A8 "$OUT/lt_tests.log" | head -40
  else
    rc=1; say "2:4 tests did not build:"; tail -20 "$OUT/lt_build_tests.log"
  fi
  if [ -x "$B/lt/bench_linear16" ]; then
    read -r -a args <<<"${LT_BENCH_ARGS:-}"
    SDNN_BENCH_JSON="$OUT/bench_linear16_lt.jsonl" timeout "${BENCH_TIMEOUT:-300}" "$B/lt/bench_linear16" "${args[@]}" \
      >"$OUT/bench_linear16_lt.log" 2>&1 || rc=1
    say "bench_linear16 ${LT_BENCH_ARGS:-}: $(wc -l <"$OUT/bench_linear16_lt.jsonl" 2>/dev/null || echo 0) JSON lines"
  else
    rc=1; say "bench_linear16 did not build:"; tail -20 "$OUT/lt_build_bench.log"
  fi
  say "== session_gpu (cuSPARSELt stage) status: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi
if [ "${TRAIN:-0}" = 1 ]; then
  gpu_banner "session_gpu (training stage)"
  tb=${TRAIN_BIN:-.cmp}
  rc=0
  SDNN_REQUIRE_GPU=1 timeout "${TESTS_TIMEOUT:-300}" "$tb/train_mixed_tests" "${TRAIN_TESTS:-[mixed]}" --durations yes \
    >"$OUT/train_tests.log" 2>&1 || rc=1
  say "train tests (${TRAIN_TESTS:-[mixed]}): $(grep -E '^(All tests passed|test cases:)' "$OUT/train_tests.log" | tail -1)"
  grep -E "FAILED" -A12 "$OUT/train_tests.log" | head -60
  if [ "${NO_SANITIZE:-0}" != 1 ]; then
    SDNN_REQUIRE_GPU=1 timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool memcheck --error-exitcode 99 \
      "$tb/train_mixed_tests" "${TRAIN_SANITIZE_FILTER:-[mixed]}" >"$OUT/train_memcheck.log" 2>&1 || rc=1
    say "memcheck (${TRAIN_SANITIZE_FILTER:-[mixed]}): $(grep -E 'ERROR SUMMARY' "$OUT/train_memcheck.log" | tail -1)"
  fi
  read -r -a args <<<"${TRAIN_ARGS:-}"
  mkdir -p "$B/models"
  t0=$(date +%s)
  timeout "${BENCH_TIMEOUT:-400}" "$tb/train_structured" --data "$SDNN_ROOT/tests/data" --model-dir "$B/models" \
    --json "$OUT/train_structured.json" \
    --markdown "$OUT/train_structured.md" --commit "${SDNN_COMMIT:-unknown}" "${args[@]}" >"$OUT/train_structured.log" 2>&1
  trc=$?
  [ $trc = 0 ] || rc=1
  say "train_structured: rc=$trc in $(( $(date +%s) - t0 )) s; $(grep -E 'device training' "$OUT/train_structured.log")"
  ls -la "$B/models" >>"$OUT/train_structured.log" 2>&1
  # the stop path: a NaN weight before step 70 must stop training naming step 70, exit 3, and
  # leave the last good epoch's model readable
  mkdir -p "$B/nan" && rm -f "$B/nan"/*.sdnn
  timeout 120 "$tb/train_structured" --data "$SDNN_ROOT/tests/data" --hidden 64 --epochs 2 --prune-epochs 1 --finetune-epochs 0 --structures blocks \
    --sparsities 0.9 --bench-batches 0 --inject-nan-step 70 --model-dir "$B/nan" >"$OUT/train_nan.log" 2>&1
  nrc=$?
  if [ $nrc = 3 ] && grep -q "step 70 " "$OUT/train_nan.log" && [ -s "$B/nan/train_structured_checkpoint.sdnn" ]; then
    say "NaN stop: exit 3, step 70 named, checkpoint written"
  else
    rc=1; say "NaN stop: FAILED (exit $nrc)"; tail -5 "$OUT/train_nan.log"
  fi
  if [ "${TRAIN_HOST:-1}" = 1 ]; then
    timeout 600 "$tb/train_prune_quantize_host" --data "$SDNN_ROOT/tests/data" --hidden 1024 --batch 128 --epochs 1 --finetune-epochs 0 --schedule 0.5 \
      >"$OUT/train_host.log" 2>&1 || rc=1
    say "host path: $(grep -E '^dense epoch' "$OUT/train_host.log")"
  fi
  say "== session_gpu (training stage) status: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi
if [ "${CNN:-0}" = 1 ]; then
  gpu_banner "session_gpu (CNN training stage)"
  tb=${TRAIN_BIN:-.cmp}
  rc=0
  SDNN_REQUIRE_GPU=1 timeout "${TESTS_TIMEOUT:-300}" "$tb/train_cnn_tests" "${CNN_TESTS:-[cnn]}" --durations yes \
    >"$OUT/cnn_tests.log" 2>&1 || rc=1
  say "cnn tests (${CNN_TESTS:-[cnn]}): $(grep -E '^(All tests passed|test cases:)' "$OUT/cnn_tests.log" | tail -1)"
  grep -E "FAILED" -A12 "$OUT/cnn_tests.log" | head -60
  if [ "${NO_SANITIZE:-0}" != 1 ]; then
    for tool in memcheck racecheck; do
      f=${CNN_SANITIZE_FILTER:-[cnn]}
      [ $tool = racecheck ] && f=${CNN_RACECHECK_FILTER:-[cnn]~*seeded run*}  # the training loops are slow there
      SDNN_REQUIRE_GPU=1 timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool $tool --error-exitcode 99 \
        "$tb/train_cnn_tests" "$f" >"$OUT/cnn_$tool.log" 2>&1 || rc=1
      say "$tool ($f): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/cnn_$tool.log" | tail -1)"
    done
  fi
  read -r -a args <<<"${CNN_ARGS:-}"
  mkdir -p "$B/cnn_models"
  t0=$(date +%s)
  timeout "${BENCH_TIMEOUT:-400}" "$tb/train_cnn" --data "$SDNN_ROOT/tests/data" --model-dir "$B/cnn_models" \
    --json "$OUT/train_cnn.json" --markdown "$OUT/train_cnn.md" --commit "${SDNN_COMMIT:-unknown}" "${args[@]}" \
    >"$OUT/train_cnn.log" 2>&1
  trc=$?
  [ $trc = 0 ] || rc=1
  say "train_cnn: rc=$trc in $(( $(date +%s) - t0 )) s; $(grep -E 'device training' "$OUT/train_cnn.log")"
  tail -30 "$OUT/train_cnn.log"
  mkdir -p "$B/cnn_nan" && rm -f "$B/cnn_nan"/*.sdnn
  timeout 120 "$tb/train_cnn" --data "$SDNN_ROOT/tests/data" --channels 32,32 --epochs 2 --prune-epochs 1 \
    --finetune-epochs 0 --structures filters --sparsities 0.75 --bench-batches 0 --inject-nan-step 70 \
    --model-dir "$B/cnn_nan" >"$OUT/cnn_nan.log" 2>&1
  nrc=$?
  if [ $nrc = 3 ] && grep -q "step 70 " "$OUT/cnn_nan.log" && [ -s "$B/cnn_nan/train_cnn_checkpoint.sdnn" ]; then
    say "CNN NaN stop: exit 3, step 70 named, checkpoint written"
  else
    rc=1; say "CNN NaN stop: FAILED (exit $nrc)"; tail -5 "$OUT/cnn_nan.log"
  fi
  say "== session_gpu (CNN training stage) status: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi
if [ "${PY:-0}" = 1 ]; then
  gpu_banner "session_gpu (Python stage)"
  pybin=${PYTHON:-$(command -v python3)}
  say "python: $pybin $("$pybin" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>&1)"
  t0=$(date +%s)
  cmake -S . -B "$B/py" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DPython_EXECUTABLE=$pybin" \
    -DSDNN_BUILD_PYTHON=ON -DSDNN_PYTHON_CUDA=ON -DSDNN_BUILD_TESTS=OFF -DSDNN_BUILD_EXAMPLES=OFF \
    -DSDNN_HEADER_CHECK=OFF -DSDNN_BUILD_BENCHMARKS=OFF -DSDNN_BUILD_DEVICE_TESTS=OFF >"$OUT/py_configure.log" 2>&1 &&
    cmake --build "$B/py" --target _sdnn -j16 >"$OUT/py_build.log" 2>&1
  brc=$?
  say "Python module build: rc=$brc in $(( $(date +%s) - t0 )) s; $(grep -E 'sdnn 0|python=' "$OUT/py_configure.log" | tail -1)"
  [ $brc = 0 ] || { tail -30 "$OUT/py_build.log" "$OUT/py_configure.log"; exit 1; }
  rc=0
  PYTHONPATH="$SDNN_ROOT/$B/py/python" SDNN_REQUIRE_GPU=1 timeout "${TESTS_TIMEOUT:-300}" "$pybin" -m pytest -q \
    -p no:cacheprovider ${PY_TESTS:+-k "$PY_TESTS"} python/tests >"$OUT/py_tests.log" 2>&1 || rc=1
  say "pytest: $(tail -1 "$OUT/py_tests.log")"
  [ $rc = 0 ] || grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/py_tests.log" | head -30
  if [ "${PY_SANITIZE:-0}" = 1 ]; then
    PYTHONPATH="$SDNN_ROOT/$B/py/python" SDNN_REQUIRE_GPU=1 timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer \
      --tool memcheck --report-api-errors no --error-exitcode 99 "$pybin" -m pytest -q -p no:cacheprovider \
      -k "${PY_SANITIZE_FILTER:-linear}" python/tests/test_gpu.py >"$OUT/py_memcheck.log" 2>&1 || rc=1
    say "compute-sanitizer memcheck on pytest -k ${PY_SANITIZE_FILTER:-linear}: $(grep -E 'ERROR SUMMARY' "$OUT/py_memcheck.log" | tail -1); $(grep -E 'passed|failed' "$OUT/py_memcheck.log" | tail -1)"
  fi
  for b in ${PY_EXAMPLE_BATCHES:-1 1024}; do
    PYTHONPATH="$SDNN_ROOT/$B/py/python" timeout 120 "$pybin" examples/python/prune_convert.py --batch "$b" \
      >>"$OUT/py_examples.log" 2>&1 || rc=1
    say "examples/python/prune_convert.py --batch $b: $(tail -1 "$OUT/py_examples.log")"
  done
  if [ "${PY_BENCH:-1}" = 1 ]; then
    read -r -a args <<<"${PY_BENCH_ARGS:-}"
    PYTHONPATH="$SDNN_ROOT/$B/py/python" timeout "${BENCH_TIMEOUT:-300}" "$pybin" benchmarks/bench_python.py \
      --json "$OUT/bench_python.jsonl" --commit "${SDNN_COMMIT:-}" "${args[@]}" >"$OUT/bench_python.log" 2>&1 || rc=1
    say "bench_python: $(wc -l <"$OUT/bench_python.jsonl" 2>/dev/null || echo 0) JSON lines"
    [ $rc = 0 ] || tail -15 "$OUT/bench_python.log"
  fi
  say "== session_gpu (Python stage) status: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi
if [ -n "${BUNDLE:-}" ]; then
  mkdir -p "$B" && tar -xJf "$BUNDLE" -C "$B" || exit 1
  gpu_banner "session_gpu (bundle: $(head -1 "$B/manifest.txt"))"
  # The tests read their data where the bundle was built: point that path at this checkout.
  # (the base's graph_challenge too: its built-in default reads the shipped MNIST digits there).
  for data in $(awk '/^test_data_dir/ {print $2}' "$B/manifest.txt"); do
    if [ ! -e "$data" ]; then mkdir -p "$(dirname "$data")" && ln -s "$SDNN_ROOT/tests/data" "$data"; fi
  done
  cudnn=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)
  LD_LIBRARY_PATH="$(abs_path "$B")/lib${cudnn:+:$cudnn/lib}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
  CT=$B/tests/sdnn_cuda_tests
  missing=$(ldd "$CT" | grep "not found")
  [ -n "$missing" ] && say "missing libraries: $missing"
  rc=0
  t0=$(date +%s)
  SDNN_REQUIRE_GPU=1 timeout "${TESTS_TIMEOUT:-300}" "$CT" ${TESTS:+"$TESTS"} --durations yes >"$OUT/tests.log" 2>&1 || rc=1
  say "device tests (${TESTS:-all}) in $(( $(date +%s) - t0 )) s: $(grep -E '^(All tests passed|test cases:)' "$OUT/tests.log" | tail -1)"
  grep -E "FAILED|failed" -A6 "$OUT/tests.log" | head -60
  tools="memcheck racecheck"
  [ "${NO_SANITIZE:-0}" = 1 ] && tools=""
  for tool in $tools; do
    if [ "$tool" = memcheck ]; then f=${SANITIZE_FILTER:-"~[challenge]~[indices_huge]~[big]"}; else f=${RACECHECK_FILTER:-"[panels_race]"}; fi
    t0=$(date +%s)
    SDNN_REQUIRE_GPU=1 timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --report-api-errors no \
      --error-exitcode 99 "$CT" "$f" >"$OUT/sanitizer_$tool.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    say "compute-sanitizer $tool on \"$f\": rc=$r in $(( $(date +%s) - t0 )) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E '^(All tests passed|test cases:)' "$OUT/sanitizer_$tool.log" | tail -1)"
  done
  IFS=';' read -r -a benches <<<"${BENCHES:-}"
  for spec in "${benches[@]}"; do
    read -r -a words <<<"$spec"
    [ ${#words[@]} -eq 0 ] && continue
    name=${words[0]}
    SDNN_BENCH_JSON="$OUT/$name.jsonl" timeout "${BENCH_TIMEOUT:-200}" "$B/benchmarks/$name" "${words[@]:1}" \
      >"$OUT/$name.log" 2>&1 || rc=1
    say "$name ${words[*]:1}: $(wc -l <"$OUT/$name.jsonl" 2>/dev/null || echo 0) JSON lines"
  done
  if [ -d "$B/base" ]; then
    mkdir -p "$OUT/compare-base" && ln -sfn "$(abs_path "$B")/base" "$OUT/compare-base/build-cmp"
    CONFIGS=${CONFIGS:-1024:120} KERNEL_FAMILIES=spmm benchmarks/compare_baseline.sh "$OUT/compare-base" "$B" \
      "$OUT/compare" "${COMPARE_ROUNDS:-3}" >"$OUT/compare.log" 2>&1 || rc=1
    [ -f "$OUT/compare/compare.md" ] && cat "$OUT/compare/compare.md"
  fi
  say "== session_gpu (bundle) status: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi
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

#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang and runs each for a given time, one
# after the other (one fuzzer process at a time), printing the executions per target.
#
#   tests/fuzz/run_fuzz.sh <seconds> [target ...]     build, then fuzz each target
#   tests/fuzz/run_fuzz.sh --build-only [target ...]  build only
#
# Targets: challenge_layer challenge_images categories matrix_market matrix_market_int
# idx_images idx_labels formats (default: all).
#
# Environment:
#   SDNN_FUZZ_BUILD_DIR  build directory (default: build-fuzz-targets in the repository root)
#   SDNN_FUZZ_CXX        clang++ to use (default: the first of clang++, clang++-18 ... clang++-14)
#   SDNN_FUZZ_JOBS       parallel compile jobs (default: 2)
#   SDNN_FUZZ_ARGS       extra libFuzzer arguments (e.g. "-seed=1")
#
# Each run: -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10, the target's dictionary,
# a working corpus in $SDNN_FUZZ_BUILD_DIR/corpus/<target> (new inputs go there) plus the
# seeds (tests/fuzz/corpus/<target>) and the kept crashers (tests/fuzz/regressions/<target>).
# A crash, leak, sanitizer report, timeout or allocation above the limits stops the target:
# the input is written to $SDNN_FUZZ_BUILD_DIR/artifacts/<target>/ and the script exits 1
# after the remaining targets ran. Keep every such input under tests/fuzz/regressions/<target>/
# (the host test test_fuzz_regressions replays them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
all_targets=(challenge_layer challenge_images categories matrix_market matrix_market_int idx_images idx_labels formats)

usage() {
  sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}
[[ $# -ge 1 ]] || usage
build_only=0
seconds=0
if [[ $1 == --build-only ]]; then
  build_only=1
elif [[ $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
else
  usage
fi
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "run_fuzz.sh: unknown target '$t'" >&2; exit 2; }
done

build=${SDNN_FUZZ_BUILD_DIR:-$root/build-fuzz-targets}
cxx=${SDNN_FUZZ_CXX:-}
if [[ -z $cxx ]]; then
  for c in clang++ clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$(command -v "$c"); break; fi
  done
fi
[[ -n $cxx ]] || { echo "run_fuzz.sh: no clang++ found (libFuzzer needs clang); set SDNN_FUZZ_CXX" >&2; exit 2; }

# Configure and build (incremental: only what changed is rebuilt).
if [[ ! -f $build/CMakeCache.txt ]] || ! grep -q "CMAKE_CXX_COMPILER:.*=$cxx\$" "$build/CMakeCache.txt"; then
  mkdir -p "$build"
  cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
fi
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$build" -j"${SDNN_FUZZ_JOBS:-2}" --target "${build_targets[@]}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log" >&2; exit 1; }
[[ $build_only -eq 0 ]] || { echo "built ${build_targets[*]} in $build"; exit 0; }

failed=()
printf '%-18s %12s %10s %8s  %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  dirs=("$build/corpus/$t" "$here/corpus/$t")
  [[ -d $here/regressions/$t ]] && dirs+=("$here/regressions/$t")
  log="$build/$t.log"
  # shellcheck disable=SC2086
  if "$build/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -dict="$here/$t.dict" -artifact_prefix="$build/artifacts/$t/" \
      ${SDNN_FUZZ_ARGS:-} "${dirs[@]}" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log; input in $build/artifacts/$t/)"
    failed+=("$t")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$build/corpus/$t" -type f | wc -l)
  printf '%-18s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  for t in "${failed[@]}"; do
    echo "---- $t: the end of $build/$t.log" >&2
    tail -40 "$build/$t.log" >&2
  done
  exit 1
fi

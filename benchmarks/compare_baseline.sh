#!/usr/bin/env bash
# Same-run speed comparison of this tree against a baseline tree (an earlier commit's
# sources, e.g. `git archive <commit> include examples benchmarks cmake CMakeLists.txt tests/data
# | tar -x -C .baseline`): builds both, then alternates the two binaries on the same GPU in one
# call: graph_challenge bench on several configurations (the README's main job) and the kernel
# benchmarks (bench_spmm --quick, bench_row_skip, bench_gemm), median of repeats.
#
#   benchmarks/compare_baseline.sh BASE_SRC NEW_BUILD OUT [ROUNDS]
# BASE_SRC: the baseline sources (built into BASE_SRC/build-cmp); NEW_BUILD: this tree's build
# directory (built with benchmarks). Writes OUT/compare_{graph,kernels}.jsonl and, through
# benchmarks/compare_baseline.py, OUT/compare.md and OUT/compare.png.
# env: CONFIGS (N:L list, default "1024:120 4096:120 1024:480"), POLICIES (graph_challenge
#      --policy values, "default" for its default; default "default"), JOBS (default 16),
#      ARCH (default 90), KERNELS=0 skips the kernel benchmarks, KERNEL_FAMILIES (default
#      "spmm row_skip gemm"). A BASE_SRC whose build-cmp/ already holds the programs is not rebuilt.
set -uo pipefail
BASE=${1:?usage: compare_baseline.sh BASE_SRC NEW_BUILD OUT [ROUNDS]}
NEW=${2:?usage}
OUT=${3:?usage}
ROUNDS=${4:-3}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
here=$SDNN_ROOT/benchmarks
use_out "$OUT" - || exit 1
BB=$BASE/build-cmp
if [ ! -x "$BB/examples/graph_challenge/graph_challenge" ]; then
  SRC=$BASE B=$BB CMAKE_ARGS=(-DSDNN_BUILD_TESTS=OFF -DSDNN_HEADER_CHECK=OFF)
  CONFIGURE_LOG=$OUT/base_configure.log BUILD_LOG=$OUT/base_build.log
  configure_and_build graph_challenge bench_spmm bench_row_skip bench_gemm || exit 1
fi
G=$OUT/compare_graph.jsonl
K=$OUT/compare_kernels.jsonl
: > "$G"
: > "$K"
for r in $(seq 1 "$ROUNDS"); do
  for cfg in ${CONFIGS:-1024:120 4096:120 1024:480}; do
    n=${cfg%%:*}
    l=${cfg##*:}
    for pol in ${POLICIES:-default}; do
      pargs=()
      [ "$pol" != default ] && pargs=(--policy "$pol")
      for side in base new; do
        if [ $side = base ]; then exe=$BB/examples/graph_challenge/graph_challenge; else exe=$NEW/examples/graph_challenge/graph_challenge; fi
        line=$("$exe" bench --neurons "$n" --layers "$l" --reps 3 "${pargs[@]}" 2>/dev/null | grep '^{"family"')
        echo "${line%\}},\"side\":\"$side\",\"round\":$r}" >> "$G"
      done
    done
  done
done
if [ "${KERNELS:-1}" = 1 ]; then
  for side in base new; do
    if [ $side = base ]; then B=$BB; else B=$NEW; fi
    for fam in ${KERNEL_FAMILIES:-spmm row_skip gemm}; do
      args=""
      [ $fam = spmm ] && args="--quick"
      [ $fam = gemm ] && args="--quick"
      tmp=$OUT/k_${side}_$fam.jsonl
      rm -f "$tmp"
      SDNN_BENCH_JSON=$tmp "$B/benchmarks/bench_$fam" $args > "$OUT/k_${side}_$fam.log" 2>&1
      sed "s/}\$/,\"side\":\"$side\"}/" "$tmp" >> "$K"
    done
  done
fi
python3 "$here/compare_baseline.py" "$G" "$K" "$OUT/compare"

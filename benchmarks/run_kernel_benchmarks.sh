#!/usr/bin/env bash
# Runs the kernel-family benchmarks (bench_gemm, bench_spmm, bench_row_skip) and writes,
# per family, JSON lines (kernels_<family>_<gpu>_<date>.jsonl), Google Benchmark's own
# JSON (kernels_<family>_<gpu>_<date>.gbench.json) and PNG charts (benchmarks/plot.py).
#
#   benchmarks/run_kernel_benchmarks.sh BUILD_DIR OUT_DIR [--quick]
# BUILD_DIR must hold the built benchmarks (-DSDNN_BUILD_BENCHMARKS=ON; targets
# bench_gemm bench_spmm bench_row_skip). The full sweep takes about 5 minutes on an H100.
set -euo pipefail
B=${1:?usage: run_kernel_benchmarks.sh BUILD_DIR OUT_DIR [--quick]}
OUT=${2:?usage: run_kernel_benchmarks.sh BUILD_DIR OUT_DIR [--quick]}
QUICK=${3:-}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
use_out "$OUT" - || exit 1
gpu=$(gpu_name_slug)
gpu=${gpu:-gpu}
date=$(date -u +%F)
for fam in gemm spmm row_skip; do
  exe="$B/benchmarks/bench_$fam"
  [ -x "$exe" ] || { echo "missing $exe" >&2; exit 1; }
  stem="$OUT/kernels_${fam}_${gpu}_${date}"
  rm -f "$stem.jsonl"
  echo "== bench_$fam $(date -u +%T)"
  # shellcheck disable=SC2086  # $QUICK is empty or --quick: no argument at all when empty
  SDNN_BENCH_JSON="$stem.jsonl" "$exe" $QUICK --benchmark_out="$stem.gbench.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true
done
python3 "$SDNN_ROOT/benchmarks/plot.py" "$OUT" "$OUT"/kernels_*_"${gpu}"_"${date}".jsonl || echo "plotting failed" >&2

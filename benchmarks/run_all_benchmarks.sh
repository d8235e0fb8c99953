#!/usr/bin/env bash
# Every benchmark of the project from one built tree, in one device call: the kernel
# families (run_kernel_benchmarks.sh: gemm, spmm, row_skip + plots), the convolution sweep
# (bench_conv + plot_conv.py), the sparse VGG-16 example (both pruning rules) and the
# README's main command (the Graph Challenge example on its built-in default).
#
#   benchmarks/run_all_benchmarks.sh BUILD_DIR OUT_DIR
# env: CONV_TIMEOUT (s, default 330), CONV_ARGS (extra bench_conv arguments).
set -uo pipefail
B=${1:?usage: run_all_benchmarks.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: run_all_benchmarks.sh BUILD_DIR OUT_DIR}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
here=$SDNN_ROOT/benchmarks
use_out "$OUT" machine.txt || exit 1
gpu=$(gpu_name_slug)
date=$(date -u +%F)
GPU_FIELDS=name,driver_version,clocks.max.sm gpu_banner run_all_benchmarks >/dev/null
export NVIDIA_TF32_OVERRIDE=0  # cuBLAS/cuDNN float baselines also set their math modes explicitly

t0=$(date +%s)
"$here/run_kernel_benchmarks.sh" "$B" "$OUT" > "$OUT/kernels.log" 2>&1
echo "kernel benchmarks: rc=$? in $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
# shellcheck disable=SC2086  # CONV_ARGS is split into words on purpose
SDNN_BENCH_JSON="$OUT/conv_${gpu}_${date}.jsonl" timeout "${CONV_TIMEOUT:-330}" "$B/benchmarks/bench_conv" ${CONV_ARGS:-} \
  > "$OUT/conv_${gpu}_${date}_bench.log" 2>&1
echo "bench_conv: rc=$? in $(( $(date +%s) - t0 )) s, $(wc -l < "$OUT/conv_${gpu}_${date}.jsonl") lines"
python3 "$here/plot_conv.py" "$OUT/conv_${gpu}_${date}.jsonl" "$OUT/conv_${gpu}_${date}" > "$OUT/conv_${gpu}_${date}_summary.txt" 2>&1

for rule in global per_channel; do
  timeout 60 "$B/examples/sparse_vgg16/sparse_vgg16" 128 0.9 3 $rule > "$OUT/sparse_vgg16_${rule}.txt" 2>&1
  echo "sparse_vgg16 128 0.9 3 $rule: rc=$?"
done
timeout 120 "$B/examples/graph_challenge/graph_challenge" > "$OUT/graph_challenge_default.txt" 2>&1
echo "graph_challenge (default): rc=$?"

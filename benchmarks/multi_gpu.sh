#!/usr/bin/env bash
# The multi-GPU measurement, one device call on a machine with several GPUs
# (nvidia-h200-x2): builds graph_challenge with MPI, then for each configuration runs
# `graph_challenge bench` on one GPU and under `mpirun -np P` (one rank per GPU, inputs split
# in contiguous blocks balanced by nonzeros), checks the categories agree, and writes
# JSON lines + a table + a PNG (benchmarks/multi_gpu.py).
#   benchmarks/multi_gpu.sh BUILD_DIR OUT_DIR
# 1024 x L with L <= 120 runs the official layers (graph_challenge bench's default there).
# env: CONFIGS (N:L list, default "1024:120 16384:1920 65536:1920"), RANKS (default "2"; "2 4" on 4 GPUs),
#      POLICY (default depth_first), REPS (default 5), TIMEOUT (s per run, default 400),
#      JOBS (build jobs, default 32), ARCH (default 90), SKIP_BUILD=1 (reuse a built graph_challenge).
set -uo pipefail
B=${1:?usage: multi_gpu.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: multi_gpu.sh BUILD_DIR OUT_DIR}
JOBS=${JOBS:-32}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
here=$SDNN_ROOT/benchmarks
use_out "$OUT" multi_gpu.log || exit 1
log=$SUMMARY
GPU_FIELDS=index,name,driver_version,memory.total gpu_banner multi_gpu
nvidia-smi topo -m 2>&1 | head -6 >> "$log"
say "mpirun: $(command -v mpirun) $(mpirun --version 2>&1 | head -1)"
# NCCL: not needed by this run (the only collective is the gather of the category ids, a few KB
# on the host, over MPI); recorded for the note.
# shellcheck disable=SC2012  # the first libnccl file name, for the log only
say "nccl: $(ls /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null | head -1) $(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)"
if [ ! -x "$B/examples/graph_challenge/graph_challenge" ] || [ -z "${SKIP_BUILD:-}" ]; then
  CMAKE_ARGS=(-DSDNN_ENABLE_MPI=ON -DSDNN_BUILD_TESTS=OFF -DSDNN_BUILD_BENCHMARKS=OFF)
  configure_and_build graph_challenge || exit 1
fi
exe=$B/examples/graph_challenge/graph_challenge
J=$OUT/multi_gpu.jsonl
: > "$J"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for cfg in ${CONFIGS:-1024:120 16384:1920 65536:1920}; do
  n=${cfg%%:*}; l=${cfg##*:}
  for p in 1 ${RANKS:-2}; do
    say "== $n x $l, $p rank(s), ${POLICY:-depth_first} $(date -u +%T)"
    args=(bench --neurons "$n" --layers "$l" --policy "${POLICY:-depth_first}" --reps "${REPS:-5}")
    if [ "$p" = 1 ]; then
      SDNN_BENCH_JSON=$J timeout "${TIMEOUT:-400}" "$exe" "${args[@]}" > "$OUT/run_${n}_${l}_np$p.txt" 2>&1
    else
      SDNN_BENCH_JSON=$J timeout "${TIMEOUT:-400}" mpirun -np "$p" --bind-to none "$exe" "${args[@]}" \
        > "$OUT/run_${n}_${l}_np$p.txt" 2>&1
    fi
    say "   rc=$?"
    grep -E "inference seconds|categories:|ranks:|rank [0-9]+:|imbalance|warning|error" "$OUT/run_${n}_${l}_np$p.txt" | sed 's/^/   /' | tee -a "$log"
  done
done
python3 "$here/multi_gpu.py" "$J" "$OUT/multi_gpu" | tee -a "$log"

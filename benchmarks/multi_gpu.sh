#!/usr/bin/env bash
# Issue 11's multi-GPU measurement, one device call on a machine with several GPUs
# (nvidia-h200-x2): builds graph_challenge with MPI, then for each configuration runs
# `graph_challenge bench` on one GPU and under `mpirun -np P` (one rank per GPU, inputs split
# in contiguous blocks balanced by nonzeros), checks the categories agree, and writes
# JSON lines + a table + a PNG (benchmarks/multi_gpu.py).
#   benchmarks/multi_gpu.sh BUILD_DIR OUT_DIR
# env: CONFIGS (N:L list, default "1024:120 16384:1920 65536:1920"), RANKS (default "2"),
#      POLICY (default depth_first), REPS (default 5), TIMEOUT (s per run, default 400).
set -uo pipefail
B=${1:?usage: multi_gpu.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: multi_gpu.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
log=$OUT/multi_gpu.log
: > "$log"
say() { echo "$*" | tee -a "$log"; }
say "== multi_gpu $(date -u +%FT%TZ) at $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$log"
nvidia-smi topo -m 2>&1 | head -6 >> "$log"
say "mpirun: $(command -v mpirun) $(mpirun --version 2>&1 | head -1)"
# NCCL: not needed by this run (the only collective is the gather of the category ids, a few KB
# on the host, over MPI); recorded for the note.
say "nccl: $(ls /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null | head -1) $(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)"
if [ ! -x "$B/examples/graph_challenge/graph_challenge" ] || [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S "$here/.." -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DSDNN_ENABLE_MPI=ON \
    -DSDNN_BUILD_TESTS=OFF -DSDNN_BUILD_BENCHMARKS=OFF > "$OUT/configure.log" 2>&1 || { say "configure FAILED"; tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$B" -j"${JOBS:-32}" --target graph_challenge > "$OUT/build.log" 2>&1 || { say "build FAILED"; grep -E "error" "$OUT/build.log" | head; exit 1; }
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

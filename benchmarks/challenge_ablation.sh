#!/usr/bin/env bash
# The depth-first engine's ablation: graph_challenge bench (60000 distinct inputs) on each
# configuration with the depth-first engine (everything on; retirement off; folding off; both
# off) and the layer-wise pipeline's policies (skip_empty_rows_csc_tiled32 and the default), in
# one call; then a JSON-lines file, a markdown table and a PNG (benchmarks/challenge_ablation.py).
#
#   benchmarks/challenge_ablation.sh BUILD_DIR OUT_DIR
# env: CONFIGS (N:L list; default the configurations the engine serves within one call:
#      "1024:120 1024:480 1024:1920 4096:120 4096:480 16384:120"), VARIANTS, TIMEOUT (s per run),
#      REPS (timed runs after the warm-up, default 3), SKIP_OFFICIAL=1 (no official-network check).
set -uo pipefail
B=${1:?usage: challenge_ablation.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: challenge_ablation.sh BUILD_DIR OUT_DIR}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
here=$SDNN_ROOT/benchmarks
use_out "$OUT" - || exit 1
J=$OUT/challenge_ablation.jsonl
: > "$J"
exe=$B/examples/graph_challenge/graph_challenge
for cfg in ${CONFIGS:-1024:120 1024:480 1024:1920 4096:120 4096:480 16384:120}; do
  n=${cfg%%:*}
  l=${cfg##*:}
  for v in ${VARIANTS:-depth_first depth_first_no_retirement depth_first_no_folding depth_first_plain skip_empty_rows_csc_tiled32}; do
    echo "== $n x $l $v $(date -u +%T)"
    SDNN_BENCH_JSON=$J timeout "${TIMEOUT:-120}" "$exe" bench --neurons "$n" --layers "$l" --policy "$v" --reps "${REPS:-3}" \
      > "$OUT/run_${n}_${l}_$v.txt" 2>&1 || echo "   rc=$? (see run_${n}_${l}_$v.txt)"
    grep -E "inference seconds|categories:|engine:" "$OUT/run_${n}_${l}_$v.txt" | sed 's/^/   /'
  done
done
if [ -z "${SKIP_OFFICIAL:-}" ]; then
# The official 1024 x 120 network with the 1200 official images x 50 (60000 rows): categories
# must equal the official truth for those images, repeated (950 ids).
python3 - "$here/../tests/data" "$OUT" <<'PY'
import gzip, sys, os
d, out = sys.argv[1], sys.argv[2]
rows = [l.split() for l in gzip.open(os.path.join(d, "sparse-images-1024-first1200.tsv.gz"), "rt") if l.strip()]
truth = [int(l) for l in open(os.path.join(d, "neuron1024-l120-categories-first1200.tsv")) if l.strip()]
with open(os.path.join(out, "official_x50.tsv"), "w") as f:
    for k in range(50):
        for r, c, v in rows:
            f.write(f"{int(r) + 1200 * k}\t{c}\t{v}\n")
with open(os.path.join(out, "official_x50_truth.tsv"), "w") as f:
    for k in range(50):
        for t in truth:
            f.write(f"{t + 1200 * k}\n")
PY
"$exe" generate --neurons 1024 --layers 120 --seed official --out "$OUT/net1024" > "$OUT/generate.txt" 2>&1
for v in depth_first skip_empty_rows_csc_tiled32; do
  echo "== official 1024 x 120, 1200 official images x 50: $v"
  timeout 300 "$exe" infer --neurons 1024 --layers 120 --weights "$OUT/net1024" --inputs "$OUT/official_x50.tsv" \
    --truth "$OUT/official_x50_truth.tsv" --policy "$v" > "$OUT/official_x50_$v.txt" 2>&1
  echo "   rc=$?"; grep -E "inference seconds|categories:|truth:|engine:" "$OUT/official_x50_$v.txt" | sed 's/^/   /'
done
rm -rf "$OUT/net1024" "$OUT/official_x50.tsv"
fi
python3 "$here/challenge_ablation.py" "$J" "$OUT/challenge_ablation"

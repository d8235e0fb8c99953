#!/usr/bin/env bash
# Out-of-core weights on one GPU: builds, runs the weight-store device tests (and
# compute-sanitizer memcheck on them), then graph_challenge bench with the weights resident vs
# streamed from pinned host memory under a device-memory budget; writes OUT/weight_store.jsonl
# (one bench JSON line per run, with "label"), OUT/weight_store.md (table: seconds, categories,
# categories hash resident == streamed, bytes streamed, H2D GB/s while copying vs the link's
# measured peak) and the raw logs.
#
#   benchmarks/weight_store_gpu.sh BUILD_DIR OUT_DIR
# env: BIG=1 adds 65536 x 1920 (about 32 GB of CSR: ~30 GB of pinned host memory for the packed
#      layers plus the host CSR; host generation ~100 s) resident vs --device-memory-budget 4GiB;
#      JOBS (build jobs, default 16); ARCH (default 90); REPS (timed runs, default 3; BIG runs use 1);
#      SKIP_BUILD=1, SKIP_TESTS=1, SKIP_SMALL=1 (no 16384 x 480 runs), BIG_TIMEOUT (s per BIG run);
#      TESTS (Catch2 filter of the device tests, default [weight_store]; memcheck runs on
#      SANITIZE_TESTS, default TESTS); ENGINE_RUNS: the depth-first engine resident vs streamed
#      (--weight-store host), a list of N:L:POLICY:BUDGET (e.g. "4096:1920:depth_first_plain:256MiB"),
#      ENGINE_TIMEOUT (s per engine run, default 600).
set -uo pipefail
B=${1:?usage: weight_store_gpu.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: weight_store_gpu.sh BUILD_DIR OUT_DIR}
# shellcheck source=SCRIPTDIR/common/gpu_env.sh
source "$(dirname "$0")/common/gpu_env.sh"
here=$SDNN_ROOT/benchmarks
use_out "$OUT" - || exit 1
if [ -z "${SKIP_BUILD:-}" ]; then
  CMAKE_ARGS=(-DSDNN_BUILD_TESTS=ON)
  configure_and_build graph_challenge sdnn_cuda_tests || exit 1
fi
exe=$B/examples/graph_challenge/graph_challenge
tests=$(find "$B" -name sdnn_cuda_tests -type f -perm -u+x | head -1)
nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current \
  --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
tests_rc=skipped
memcheck_rc=skipped
if [ -z "${SKIP_TESTS:-}" ]; then
  T=${TESTS:-[weight_store]}
  SDNN_REQUIRE_GPU=1 "$tests" "$T" > "$OUT/tests.txt" 2>&1
  tests_rc=$?
  echo "tests $T: rc=$tests_rc"; tail -3 "$OUT/tests.txt"
  if command -v compute-sanitizer > /dev/null; then
    SDNN_REQUIRE_GPU=1 compute-sanitizer --tool memcheck --error-exitcode 99 "$tests" "${SANITIZE_TESTS:-$T}" \
      > "$OUT/memcheck.txt" 2>&1
    memcheck_rc=$?
    echo "memcheck ${SANITIZE_TESTS:-$T}: rc=$memcheck_rc"; tail -3 "$OUT/memcheck.txt"
  else
    memcheck_rc=no-compute-sanitizer
  fi
fi

J=$OUT/weight_store.jsonl
: > "$J"
# run LABEL TIMEOUT ARGS...: one bench, its JSON line labelled into $J, its output in OUT/LABEL.txt
run() {
  local label=$1 to=$2
  shift 2
  echo "== $label: $* ($(date -u +%T))"
  /usr/bin/time -v timeout "$to" "$exe" bench "$@" > "$OUT/$label.txt" 2>&1
  local rc=$?
  echo "   rc=$rc"
  grep -E "inference seconds|categories:|weights:|engine:|error" "$OUT/$label.txt" | sed 's/^/   /'
  grep -E "Maximum resident set size|Elapsed \(wall" "$OUT/$label.txt" | sed 's/^\s*/   /'
  local line
  line=$(grep '^{"family"' "$OUT/$label.txt" | tail -1)
  if [ -n "$line" ]; then echo "${line%\}},\"label\":\"$label\",\"rc\":$rc}" >> "$J"; else echo "{\"label\":\"$label\",\"rc\":$rc}" >> "$J"; fi
}
P=skip_empty_rows_csc_tiled32
R=${REPS:-3}
# --weight-store device is explicit so that the resident run also prints its categories hash
if [ -z "${SKIP_SMALL:-}" ]; then
run n16384_l480_resident 900 --neurons 16384 --layers 480 --policy $P --reps "$R" --weight-store device
run n16384_l480_host_1GiB 900 --neurons 16384 --layers 480 --policy $P --reps "$R" --weight-store host --device-memory-budget 1GiB
run n16384_l480_auto_1GiB 900 --neurons 16384 --layers 480 --policy $P --reps "$R" --weight-store auto --device-memory-budget 1GiB
# bad input: a budget below two layers (exit 2 with a clear message), garbage size (exit 2)
"$exe" bench --neurons 16384 --layers 8 --images 100 --policy $P --weight-store host --device-memory-budget 1MiB \
  > "$OUT/too_small_budget.txt" 2>&1; echo "too small budget: rc=$? $(tail -1 "$OUT/too_small_budget.txt")"
"$exe" bench --neurons 16384 --layers 8 --device-memory-budget 4GiBs > "$OUT/bad_size.txt" 2>&1
echo "bad size: rc=$? $(head -1 "$OUT/bad_size.txt")"
fi
# The depth-first engine: resident, then its terms streamed in windows of layers under the budget.
for spec in ${ENGINE_RUNS:-}; do
  IFS=: read -r n l v b <<< "$spec"
  run "n${n}_l${l}_${v}_resident" "${ENGINE_TIMEOUT:-600}" --neurons "$n" --layers "$l" --policy "$v" --reps "$R" \
    --weight-store device
  run "n${n}_l${l}_${v}_host_$b" "${ENGINE_TIMEOUT:-600}" --neurons "$n" --layers "$l" --policy "$v" --reps "$R" \
    --weight-store host --device-memory-budget "$b"
done
if [ -n "${BIG:-}" ]; then
  run n65536_l1920_resident "${BIG_TIMEOUT:-3000}" --neurons 65536 --layers 1920 --policy $P --reps 1 --weight-store device
  run n65536_l1920_host_4GiB "${BIG_TIMEOUT:-3000}" --neurons 65536 --layers 1920 --policy $P --reps 1 --weight-store host --device-memory-budget 4GiB
fi

python3 - "$J" "$OUT/weight_store.md" "$tests_rc" "$memcheck_rc" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = open(sys.argv[2], "w")
out.write(f"# weight store\n\ndevice tests: rc={sys.argv[3]}; memcheck: rc={sys.argv[4]}\n\n")
out.write("| run | rc | seconds | categories | hash | same as resident | streamed GB/run | uploads | copy busy s | H2D GB/s copying | link peak GB/s | % of peak | GB/s over inference |\n")
out.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
ref = {}
for r in rows:
    key = r["label"].split("_")[0] + "_" + r["label"].split("_")[1]
    if r.get("weights") == "device" and "categories_fnv1a" in r:
        ref[key] = r["categories_fnv1a"]
for r in rows:
    key = r["label"].split("_")[0] + "_" + r["label"].split("_")[1]
    h = r.get("categories_fnv1a", "")
    same = "" if key not in ref or not h else ("yes" if h == ref[key] else "NO")
    b = r.get("streamed_bytes", r.get("stream_bytes"))  # pipeline / engine (warm-up run)
    bw = r.get("h2d_bytes_per_second")
    pk = r.get("h2d_peak_bytes_per_second")
    sec = r.get("seconds")
    out.write("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n".format(
        r["label"], r.get("rc"), sec if sec is not None else "", r.get("categories", ""), h, same,
        f"{b/1e9:.3f}" if b else "", r.get("uploads", r.get("stream_uploads", "")),
        f"{r['copy_seconds']:.4f}" if "copy_seconds" in r else "",
        f"{bw/1e9:.2f}" if bw else "", f"{pk/1e9:.2f}" if pk else "", f"{100*bw/pk:.0f}" if bw and pk else "",
        f"{b/sec/1e9:.2f}" if b and sec else ""))
out.write("\nWhere the time goes: a streamed run is copy-bound when 'copy busy s' is close to 'seconds' "
          "(the uploads, at 'H2D GB/s copying', are the critical path; products overlap them); the gap "
          "seconds - copy busy is compute the uploads could not hide (first upload, products slower than "
          "their layer's upload, per-batch row-list readback).\n")
out.close()
print(open(sys.argv[2]).read())
PY
python3 "$here/plot_weight_store.py" "$J" "$OUT/weight_store.png" || echo "no PNG (matplotlib missing?)"

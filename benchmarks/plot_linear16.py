#!/usr/bin/env python3
"""Heat maps and a table of bench_linear16's JSON lines (family "linear16").

    /usr/bin/python3 benchmarks/plot_linear16.py results.jsonl [-o linear16.png] [--md linear16.md]

Writes
  <out>.png       one panel per W shape: rows = structure + sparsity, columns = N, cell = speedup over
                  cublas_bf16 of the best sdnn path (tc_dense_mma, tc_tile_offsets, tc_bitmap, csr_gather, tc_block32,
                  sparse24, sdnn_csr_float), annotated with the value and a short tag of that path;
  <out>_floors.png  where the lines carry read floors: per point, cuBLAS bf16 time over the read floor of the
                  best sdnn path's bytes (the speedup those bytes allow; the path's speedup now in brackets),
                  and the path's time over its floor;
  <out>_auto.png  the same panels for `automatic` (speedup over cublas_bf16, tag of its chosen path) and its
                  time over the fastest path's (tag of the fastest), and the same two rows for
                  `automatic_tuned` when the file has it;
  --md FILE       a Markdown table of every point: cuBLAS time, fastest path, best sdnn speedup, automatic's
                  (and automatic_tuned's) choice and ratio to the fastest, refused paths, check failures;
                  where the lines carry read floors (floor_us), a second table: each point's cuBLAS and best
                  sdnn path against the time of one plain read of their bytes, and the ceiling that sets
                  on the speedup (cuBLAS time / the best sdnn path's floor).
"Fastest" is over the paths that compute the bf16 layer (cuBLAS bf16, the sdnn tensor-core plans, cuSPARSELt,
cuSPARSE; not the fp16 / tf32 / float ones), as in the program's summary lines. The dense paths (structure
"dense", measured once per (shape, N)) count at every structure of their shape. Lines of a later run replace
those of an earlier one with the same (shape, structure, sparsity, N, path).
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, LogNorm  # noqa: E402

SDNN_PATHS = {"tc_dense_mma", "tc_tile_offsets", "tc_bitmap", "csr_gather", "tc_block32", "sparse24", "sdnn_csr_float"}
BF16_PATHS = {"cublas_bf16", "tc_dense_mma", "tc_tile_offsets", "tc_bitmap", "csr_gather", "tc_block32", "sparse24",
              "cusparselt", "cusparse_csr_bf16", "cusparse_bsr_bf16"}
AUTO_PATHS = ("automatic", "automatic_tuned")
TAGS = {
    "cublas_bf16": "cuBLAS", "cublas_dense": "cuBLAS", "cublas_fp16": "fp16", "cublas_tf32": "tf32",
    "tc_dense_mma": "mma", "tc_tile_offsets": "tile", "tc_bitmap": "bmp", "csr_gather": "gath", "tc_block32": "blk32", "sparse24": "2:4",
    "cusparselt": "Lt", "cusparse_csr_bf16": "spCSR", "cusparse_bsr_bf16": "spBSR", "sdnn_csr_float": "csrF",
}
STRUCT_ORDER = {"dense": 0, "unstructured": 1, "blocks32": 2, "2:4": 3}
STRUCT_LABEL = {"dense": "dense", "unstructured": "unstr", "blocks32": "blk32", "2:4": "2:4"}


def tag(path):
    return TAGS.get(path, path or "?")


def load(path):
    lines = {}
    meta = defaultdict(set)
    with open(path) as f:
        for no, raw in enumerate(f, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                d = json.loads(raw)
            except json.JSONDecodeError as e:
                print(f"{path}:{no}: skipped, not JSON ({e})", file=sys.stderr)
                continue
            if d.get("family") != "linear16" or d.get("path") in (None, "summary"):
                continue
            key = (d["shape"], d["structure"], round(float(d.get("sparsity", 0)), 4), int(d["n"]), d["path"])
            lines[key] = d
            for k in ("gpu", "cuda_runtime", "date", "commit"):
                if k in d:
                    meta[k].add(str(d[k]))
    return lines, meta


def points(lines):
    """{(shape, structure, sparsity, n): {path: line}} with the dense paths of (shape, n) at every point."""
    by_point = defaultdict(dict)
    for (shape, st, sp, n, path), d in lines.items():
        by_point[(shape, st, sp, n)][path] = d
    dense = {(s, n): paths for (s, st, sp, n), paths in by_point.items() if st == "dense"}
    out = {}
    for (shape, st, sp, n), paths in by_point.items():
        merged = dict(dense.get((shape, n), {})) if st != "dense" else {}
        merged.update(paths)
        out[(shape, st, sp, n)] = merged
    return out


def ok(d):
    return d is not None and "error" not in d and d.get("time_us") is not None


def analyse(paths):
    """What one point says: cuBLAS time, fastest bf16 path, best sdnn path, the automatic ones."""
    cub = paths.get("cublas_bf16")
    r = {"cublas_us": cub["time_us"] if ok(cub) else None}
    good = {p: d for p, d in paths.items() if ok(d) and p not in AUTO_PATHS}
    fast = min((p for p in good if p in BF16_PATHS), key=lambda p: good[p]["time_us"], default=None)
    best = min((p for p in good if p in SDNN_PATHS), key=lambda p: good[p]["time_us"], default=None)
    r["fastest"] = fast
    r["fastest_us"] = good[fast]["time_us"] if fast else None
    r["best_sdnn"] = best
    r["best_sdnn_us"] = good[best]["time_us"] if best else None
    for a in AUTO_PATHS:
        d = paths.get(a)
        r[a] = d if ok(d) else None
    r["lines"] = good
    r["refused"] = sorted(p for p, d in paths.items() if "error" in d)
    r["failed"] = sorted(p for p, d in paths.items() if d.get("check") == "FAIL")
    return r


def speedup(r, t):
    return r["cublas_us"] / t if r["cublas_us"] and t else float("nan")


def row_key(st, sp):
    return (STRUCT_ORDER.get(st, 9), sp)


def row_label(st, sp):
    return STRUCT_LABEL.get(st, st) if st in ("dense", "2:4") else f"{STRUCT_LABEL.get(st, st)} {sp * 100:g}%"


def shape_key(s):
    m, k = (int(v) for v in s.split("x"))
    return (-m * k, -m, s)


def title_of(meta, what):
    def one(k):
        v = sorted(meta.get(k, {"?"}))
        return v[0] if len(v) == 1 else " / ".join(v)

    return f"{what}\n{one('gpu')}, CUDA {one('cuda_runtime')}, {one('date')}, commit {one('commit')}"


SPEED_CMAP = LinearSegmentedColormap.from_list("speed", ["#b2182b", "#f4a582", "#f7f7f7", "#92c5de", "#2166ac"])
RATIO_CMAP = LinearSegmentedColormap.from_list("ratio", ["#1a9850", "#fee08b", "#d73027"])


def heat(ax, shape, rows, ns, cell, kind, show_ylabels):
    """cell(row, n) -> (value, text) or None; kind: 'speed' (log, 1 = cuBLAS), 'ratio' (>= 1, 1 best) or 'floor'
    (a ratio to the read floor)."""
    z = np.full((len(rows), len(ns)), np.nan)
    texts = {}
    for i, rw in enumerate(rows):
        for j, n in enumerate(ns):
            c = cell(rw, n)
            if c is None or c[0] is None or not math.isfinite(c[0]) or c[0] <= 0:
                continue
            z[i, j] = c[0]
            texts[(i, j)] = c[1]
    if kind == "speed":
        norm, cmap = LogNorm(vmin=1 / 8, vmax=8), SPEED_CMAP
    else:
        norm, cmap = LogNorm(vmin=1, vmax=4), RATIO_CMAP
    cmap = cmap.copy()
    cmap.set_bad("#dddddd")
    im = ax.imshow(np.ma.masked_invalid(np.clip(z, norm.vmin, norm.vmax)), cmap=cmap, norm=norm, aspect="auto")
    for (i, j), t in texts.items():
        ax.text(j, i, t, ha="center", va="center", fontsize=6.5, color="black")
    ax.set_xticks(range(len(ns)))
    ax.set_xticklabels([str(n) for n in ns], fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([row_label(*r) for r in rows] if show_ylabels else [], fontsize=7)
    ax.set_xlabel("N", fontsize=7)
    ax.set_title(f"W {shape}", fontsize=8)
    return im


def figure(panels_rows, shapes, rows_of, ns_of, meta, title, out):
    """panels_rows: [(row title, cell(shape) -> cell function, kind)]."""
    nr, nc = len(panels_rows), len(shapes)
    height = max(2.0, 0.28 * max(len(rows_of[s]) for s in shapes) + 1.2)
    fig, axes = plt.subplots(nr, nc, figsize=(3.3 * nc + 1.6, height * nr + 0.9), squeeze=False)
    for i, (rtitle, cell_of, kind) in enumerate(panels_rows):
        im = None
        for j, s in enumerate(shapes):
            im = heat(axes[i][j], s, rows_of[s], ns_of[s], cell_of(s), kind, j == 0)
        axes[i][0].annotate(rtitle, xy=(0, 0.5), xycoords="axes fraction", xytext=(-62, 0), textcoords="offset points",
                            rotation=90, ha="center", va="center", fontsize=8, fontweight="bold")
        cb = fig.colorbar(im, ax=list(axes[i]), fraction=0.02, pad=0.01)
        if kind == "speed":
            ticks = [1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8]
            cb.set_ticks(ticks)
            cb.set_ticklabels(["1/8", "1/4", "1/2", "1", "2", "4", "8"])
            cb.set_label("x cuBLAS bf16", fontsize=7)
        else:
            cb.set_ticks([1, 1.5, 2, 3, 4])
            cb.set_ticklabels(["1", "1.5", "2", "3", ">=4"])
            cb.set_label("time / read floor" if kind == "floor" else "time / fastest", fontsize=7)
        cb.ax.tick_params(labelsize=6)
    fig.suptitle(title, fontsize=9, y=1.0, va="bottom")
    fig.savefig(out, dpi=150, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {out}")


def fmt(v, spec=".2f"):
    return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def md_header(cols):
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def in_order(res):
    """The points by shape (largest first), structure and sparsity, then N."""
    return sorted(res, key=lambda k: (shape_key(k[0]), row_key(k[1], k[2]), k[3]))


def write_md(res, meta, out):
    def one(k):
        return " / ".join(sorted(meta.get(k, {"?"})))

    rows = [f"# bench_linear16: {one('gpu')}, CUDA {one('cuda_runtime')}, {one('date')}, commit {one('commit')}", "",
            "Speedups are cuBLAS bf16 time / path time (same process, L2 flushed); `auto / fastest` is the automatic "
            "layer's time over the fastest bf16 path's (1.00: it matched the best).", ""]
    rows += md_header(["W", "structure", "N", "cuBLAS bf16 us", "fastest", "fastest us", "fastest x", "best sdnn",
                       "best sdnn x", "automatic", "auto x", "auto / fastest", "tuned", "tuned / fastest", "refused",
                       "check"])
    for (shape, st, sp, n) in in_order(res):
        r = res[(shape, st, sp, n)]
        a, t = r["automatic"], r["automatic_tuned"]
        rows.append("| " + " | ".join([
            shape, row_label(st, sp), str(n), fmt(r["cublas_us"], ".1f"),
            r["fastest"] or "", fmt(r["fastest_us"], ".1f"), fmt(speedup(r, r["fastest_us"])),
            r["best_sdnn"] or "", fmt(speedup(r, r["best_sdnn_us"])),
            a.get("chosen", "") if a else "", fmt(speedup(r, a["time_us"])) if a else "",
            fmt(a["time_us"] / r["fastest_us"]) if a and r["fastest_us"] else "",
            t.get("chosen", "") if t else "",
            fmt(t["time_us"] / r["fastest_us"]) if t and r["fastest_us"] else "",
            ", ".join(r["refused"]), ("FAIL: " + ", ".join(r["failed"])) if r["failed"] else "ok",
        ]) + " |")
    rows += floors_md(res)
    with open(out, "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"wrote {out}")


def has_floors(res):
    return any("floor_us" in d for r in res.values() for d in r["lines"].values())


def best_floor_line(r):
    """The best sdnn path's line of a point where it carries a read floor, else None."""
    d = r["lines"].get(r["best_sdnn"]) if r and r["best_sdnn"] else None
    return d if d and d.get("floor_us") else None


def floors_md(res):
    """The read-floor table (empty without floor_us in the lines)."""
    if not has_floors(res):
        return []
    flushes = sorted({d.get("flush", "dirty") for r in res.values() for d in r["lines"].values()})
    rows = ["", "## Read floors", "",
            f"L2 flush: {' / '.join(flushes)}. `floor` is the median time of one plain read of the path's bytes (W as "
            "it stores it, X and Y), timed like the paths; `x floor` is the path's time over it. `ceiling` is cuBLAS "
            "bf16's time over the best sdnn path's floor: the speedup a kernel moving those bytes could reach if it "
            "ran at that read's pace.", ""]
    rows += md_header(["W", "structure", "N", "cuBLAS us", "cuBLAS floor us", "cuBLAS x floor", "best sdnn", "us",
                       "floor us", "x floor", "ceiling", "speedup", "automatic", "auto x its floor"])
    for (shape, st, sp, n) in in_order(res):
        r = res[(shape, st, sp, n)]
        lines = r["lines"]
        cub, best, a = lines.get("cublas_bf16"), best_floor_line(r), r["automatic"]
        if not best:
            continue
        rows.append("| " + " | ".join([
            shape, row_label(st, sp), str(n), fmt(r["cublas_us"], ".1f"),
            fmt(cub.get("floor_us") if cub else None, ".1f"), fmt(cub.get("floor_ratio") if cub else None),
            r["best_sdnn"], fmt(best["time_us"], ".1f"), fmt(best["floor_us"], ".1f"), fmt(best.get("floor_ratio")),
            fmt(speedup(r, best["floor_us"])), fmt(speedup(r, best["time_us"])),
            a.get("chosen", "") if a else "", fmt(a.get("floor_ratio")) if a else "",
        ]) + " |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("-o", "--out", default=None, help="PNG path (default: the input with .png)")
    ap.add_argument("--md", default=None, help="also write a Markdown table of every point here")
    args = ap.parse_args()
    lines, meta = load(args.jsonl)
    if not lines:
        sys.exit(f"{args.jsonl}: no linear16 lines")
    res = {k: analyse(v) for k, v in points(lines).items()}
    shapes = sorted({k[0] for k in res}, key=shape_key)
    rows_of = {s: sorted({(k[1], k[2]) for k in res if k[0] == s}, key=lambda r: row_key(*r)) for s in shapes}
    ns_of = {s: sorted({k[3] for k in res if k[0] == s}) for s in shapes}
    out = args.out or os.path.splitext(args.jsonl)[0] + ".png"
    base = os.path.splitext(out)[0]

    def cell_best(s):
        def f(rw, n):
            r = res.get((s, rw[0], rw[1], n))
            if not r or not r["best_sdnn"]:
                return None
            v = speedup(r, r["best_sdnn_us"])
            return v, f"{v:.2f}\n{tag(r['best_sdnn'])}"
        return f

    def cell_auto(name):
        def of(s):
            def f(rw, n):
                r = res.get((s, rw[0], rw[1], n))
                if not r or not r[name]:
                    return None
                v = speedup(r, r[name]["time_us"])
                return v, f"{v:.2f}\n{tag(r[name].get('chosen'))}"
            return f
        return of

    def cell_ratio(name):
        def of(s):
            def f(rw, n):
                r = res.get((s, rw[0], rw[1], n))
                if not r or not r[name] or not r["fastest_us"]:
                    return None
                v = r[name]["time_us"] / r["fastest_us"]
                return v, f"{v:.2f}\n{tag(r['fastest'])}"
            return f
        return of

    def best_line(s, rw, n):
        r = res.get((s, rw[0], rw[1], n))
        return r, best_floor_line(r)

    def cell_ceiling(s):
        def f(rw, n):
            r, d = best_line(s, rw, n)
            if not d:
                return None
            v = speedup(r, d["floor_us"])
            return v, f"{v:.2f}\n({speedup(r, d['time_us']):.2f})"
        return f

    def cell_floor(s):
        def f(rw, n):
            r, d = best_line(s, rw, n)
            if not d:
                return None
            v = d["time_us"] / d["floor_us"]
            return v, f"{v:.2f}\n{tag(r['best_sdnn'])}"
        return f

    figure([("best sdnn path", cell_best, "speed")], shapes, rows_of, ns_of, meta,
           title_of(meta, "bench_linear16: best sdnn path, speedup over cuBLAS bf16 (tag: the path)"), out)
    auto_rows = []
    for name in AUTO_PATHS:
        if any(r[name] for r in res.values()):
            auto_rows.append((name, cell_auto(name), "speed"))
            auto_rows.append((f"{name} / fastest", cell_ratio(name), "ratio"))
    if auto_rows:
        figure(auto_rows, shapes, rows_of, ns_of, meta,
               title_of(meta, "bench_linear16: automatic, speedup over cuBLAS bf16 (tag: its choice) and time over "
                              "the fastest path (tag: the fastest)"), base + "_auto.png")
    else:
        print("no automatic lines: no _auto.png")
    if has_floors(res):
        figure([("ceiling (now)", cell_ceiling, "speed"), ("best sdnn / its floor", cell_floor, "floor")], shapes,
               rows_of, ns_of, meta,
               title_of(meta, "bench_linear16, best sdnn path against one plain read of its bytes: top, cuBLAS bf16 "
                              "time over that read (a bytes-only ceiling; its speedup now in brackets); bottom, its "
                              "time over that read"),
               base + "_floors.png")
    if args.md:
        write_md(res, meta, args.md)


if __name__ == "__main__":
    main()

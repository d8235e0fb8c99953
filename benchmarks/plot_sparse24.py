#!/usr/bin/env python3
"""Plots bench_linear_sparse24's JSON lines (family "linear_sparse24") as one PNG and a Markdown table.

    benchmarks/plot_sparse24.py FILE.jsonl -o OUT.png [--md OUT.md] [--base OLD.jsonl]

One panel per weight shape: the speedup of sdnn's 2:4 plan (sparse24_auto) over dense bf16 cuBLAS
of the same run against N (log scale), with 1.0 (dense) and the targets (1.5x up to N = 128, 1.3x
from 512) drawn as lines. With --base, the same curve of an earlier run (e.g. before a kernel change)
is drawn dashed. The Markdown table lists both times and the speedup per (shape, N).
"""
import argparse
import collections

from bench_jsonl import family_rows

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path, flush="clean", build=None):
    """{(m, k): {n: {impl: time_us}}}, the first line's metadata and sdnn_24's tile per (m, k, n);
    build: keep only lines whose "build" field starts with it (files holding several builds)."""
    times = collections.defaultdict(lambda: collections.defaultdict(dict))
    tiles = {}
    meta = None
    for r in family_rows(path, "linear_sparse24"):
        if "m" not in r or r.get("flush", flush) != flush:
            continue
        if "time_us" not in r or (build and not r.get("build", "").startswith(build)):
            continue
        meta = meta or r
        times[(r["m"], r["k"])][r["n"]][r["impl"]] = r["time_us"]
        if r["impl"] == "sdnn_24":
            tiles[(r["m"], r["k"], r["n"])] = r.get("detail", "").split(" tiles")[0]
    return times, meta, tiles


def speedups(times):
    out = {}
    for shape, by_n in times.items():
        pts = [(n, t["dense_cublas"] / t["sdnn_24"]) for n, t in sorted(by_n.items()) if "sdnn_24" in t and "dense_cublas" in t]
        out[shape] = pts
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--md")
    ap.add_argument("--base", help="an earlier run of the same benchmark, drawn dashed")
    ap.add_argument("--base-build", help="only the base file's lines whose build starts with this")
    ap.add_argument("--base-label", default="base run")
    a = ap.parse_args()
    times, meta, tiles = load(a.jsonl)
    sp = speedups(times)
    base = speedups(load(a.base, build=a.base_build)[0]) if a.base else {}
    shapes = sorted(sp, key=lambda s: (-s[0] * s[1], s))
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.8), sharey=True, squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        ns, ys = zip(*sp[shape])
        ax.plot(ns, ys, "o-", color="tab:blue", label="sdnn 2:4 (this run)")
        if shape in base and base[shape]:
            bn, by = zip(*base[shape])
            ax.plot(bn, by, "s--", color="tab:gray", alpha=0.7, label=f"sdnn 2:4 ({a.base_label})")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.hlines(1.5, 1, 128, colors="tab:green", linestyles=":", label="target 1.5x (N <= 128)")
        ax.hlines(1.3, 512, 2048, colors="tab:olive", linestyles=":", label="target 1.3x (N >= 512)")
        ax.set_xscale("log", base=2)
        ax.set_title(f"W {shape[0]} x {shape[1]}")
        ax.set_xlabel("N (columns of X)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over dense bf16 cuBLAS")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"2:4 linear layer, bf16, L2 flushed: {meta['gpu']}, CUDA {meta['cuda_runtime']}, {meta['date']}"
                 f"{', commit ' + meta['commit'] if 'commit' in meta else ''}", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    if a.md:
        with open(a.md, "w") as f:
            f.write(f"# 2:4 linear layer ({meta['gpu']}, CUDA {meta['cuda_runtime']}, {meta['date']}"
                    f"{', commit ' + meta['commit'] if 'commit' in meta else ''})\n\n")
            f.write("Kernel time (us, median, L2 flushed) of sdnn's 2:4 plan and of dense bf16 cuBLAS in the same run.\n\n")
            f.write("| W | N | cuBLAS | sdnn 2:4 | speedup | tile |\n|---|---|---|---|---|---|\n")
            for shape in shapes:
                for n, t in sorted(times[shape].items()):
                    if "sdnn_24" in t:
                        f.write(f"| {shape[0]} x {shape[1]} | {n} | {t['dense_cublas']:.1f} | {t['sdnn_24']:.1f} | "
                                f"{t['dense_cublas'] / t['sdnn_24']:.2f}x | {tiles.get((shape[0], shape[1], n), '')} |\n")


if __name__ == "__main__":
    main()

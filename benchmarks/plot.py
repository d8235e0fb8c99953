#!/usr/bin/env python3
"""Turns the kernel benchmarks' JSON lines into PNG charts, one per family.

    benchmarks/plot.py OUT_DIR FILE.jsonl [FILE.jsonl ...]

spmm:      speedup over the fastest cuSPARSE algorithm vs sparsity, one panel per size,
           one line per sdnn kernel (float, uniform random sparsity).
gemm:      GFLOP/s vs size for sdnn's tiled GEMM and cuBLAS (float and half).
row_skip:  speedup over the same kernel without skipping vs empty-row fraction.
Each PNG is named kernels_<family>_<gpu>_<date>.png.
"""
import collections
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return rows


def tag(rows):
    r = rows[0]
    gpu = re.sub(r"[^A-Za-z0-9]+", "_", r.get("gpu", "gpu")).strip("_")
    return f"{gpu}_{r.get('date', 'date')}"


def base_kernel(name):
    return name.split("=")[0]


def plot_spmm(rows, out):
    rows = [r for r in rows if r.get("family") == "spmm" and not r.get("vendor") and "speedup_vs_vendor" in r
            and r.get("value_type") == "float" and not r.get("blocks") and r["config"].startswith("csr/")]
    if not rows:
        return None
    sizes = sorted({int(r["m"]) for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 4), squeeze=False, sharey=True)
    for ax, m in zip(axes[0], sizes):
        series = collections.defaultdict(list)
        for r in rows:
            if int(r["m"]) == m:
                series[base_kernel(r["kernel"])].append((100 * r["sparsity"], r["speedup_vs_vendor"]))
        for k, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_title(f"CSR SpMM {m}x{m} * {m}x1024 (float)")
        ax.set_xlabel("sparsity (%)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over fastest cuSPARSE alg")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, f"kernels_spmm_{tag(rows)}.png")
    fig.savefig(path, dpi=110)
    return path


def plot_gemm(rows, out):
    rows = [r for r in rows if r.get("family") == "gemm"]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    series = collections.defaultdict(list)
    for r in rows:
        series[f"{r['kernel']} ({r['value_type']})"].append((int(r["n"]), r["gflops"]))
    for k, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("dense GEMM: sdnn tiled vs cuBLAS")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, f"kernels_gemm_{tag(rows)}.png")
    fig.savefig(path, dpi=110)
    return path


def plot_row_skip(rows, out):
    rows = [r for r in rows if r.get("family") == "row_skip" and "speedup_vs_no_skip" in r]
    if not rows:
        return None
    groups = sorted({r["config"].rsplit("/empty", 1)[0] for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 4), squeeze=False)
    for ax, g in zip(axes[0], groups):
        series = collections.defaultdict(list)
        for r in rows:
            if r["config"].rsplit("/empty", 1)[0] == g:
                series[base_kernel(r["kernel"])].append((100 * r["empty_rows"], r["speedup_vs_no_skip"]))
        for k, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_title(g, fontsize=9)
        ax.set_xlabel("empty rows (%)")
        ax.set_ylabel("speedup over no skipping")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, f"kernels_row_skip_{tag(rows)}.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rows = load(sys.argv[2:])
    for fn in (plot_spmm, plot_gemm, plot_row_skip):
        p = fn(rows, out)
        if p:
            print("wrote", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())

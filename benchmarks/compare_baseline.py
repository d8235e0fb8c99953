#!/usr/bin/env python3
"""Summarises benchmarks/compare_baseline.sh: per configuration, the median time of the
baseline and of the new tree and their ratio (new / base; < 1 is faster), as a markdown
table and a PNG (one bar pair per configuration, log scale).

usage: compare_baseline.py GRAPH_JSONL KERNELS_JSONL OUT_STEM
"""
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except FileNotFoundError:
        pass
    return rows


def main():
    graph, kernels, stem = sys.argv[1], sys.argv[2], sys.argv[3]
    times = defaultdict(lambda: {"base": [], "new": []})
    meta = {}
    for r in load(graph):
        key = f"graph_challenge {r['neurons']}x{r['layers']} ({r['policy']})"
        times[key][r["side"]].append(r["seconds"] * 1e3)
        meta.setdefault("gpu", r.get("gpu"))
        meta.setdefault("cuda", r.get("cuda"))
        meta.setdefault("date", r.get("date"))
        cats = times[key].setdefault("categories", set())
        cats.add(r["categories"])
    for r in load(kernels):
        key = f"{r['family']} {r['config']} {r['kernel']}"
        times[key][r["side"]].append(r["time_ms"])
        meta.setdefault("gpu", r.get("gpu"))
    lines = [
        f"# Same-run comparison with the baseline tree ({meta.get('gpu')}, CUDA {meta.get('cuda')}, {meta.get('date')})",
        "",
        "Median milliseconds; ratio = new / base (below 1: the new tree is faster).",
        "",
        "| configuration | base ms | new ms | ratio |",
        "|---|---|---|---|",
    ]
    labels, ratios = [], []
    for key in sorted(times):
        t = times[key]
        if not t["base"] or not t["new"]:
            lines.append(f"| {key} | {'-' if not t['base'] else round(statistics.median(t['base']), 4)} | "
                         f"{'-' if not t['new'] else round(statistics.median(t['new']), 4)} | n/a |")
            continue
        b, n = statistics.median(t["base"]), statistics.median(t["new"])
        extra = ""
        if "categories" in t and len(t["categories"]) != 1:
            extra = " (categories differ!)"
        lines.append(f"| {key}{extra} | {b:.4f} | {n:.4f} | {n / b:.3f} |")
        labels.append(key)
        ratios.append(n / b)
    if ratios:
        lines += ["", f"Geometric mean of the ratios: {statistics.geometric_mean(ratios):.3f} over {len(ratios)} rows; "
                  f"worst {max(ratios):.3f}, best {min(ratios):.3f}."]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, max(3, 0.28 * len(labels) + 1)))
        ax.barh(range(len(labels)), ratios, color=["tab:green" if r <= 1.03 else "tab:red" for r in ratios])
        ax.axvline(1.0, color="k", lw=1)
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xlabel("new / base median time (below 1: faster)")
        ax.set_title(f"sdnn vs baseline, same run, {meta.get('gpu')}")
        fig.tight_layout()
        fig.savefig(stem + ".png", dpi=120)
    except Exception as e:  # noqa: BLE001 - plotting is optional
        print(f"plot skipped: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()

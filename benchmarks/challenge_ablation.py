#!/usr/bin/env python3
"""Table and plot of benchmarks/challenge_ablation.sh: inference seconds per configuration
(N x L) and variant, log scale, one line per variant.

usage: challenge_ablation.py JSONL OUT_STEM
"""
import json
import sys
from collections import defaultdict


def main():
    path, stem = sys.argv[1], sys.argv[2]
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    t = defaultdict(dict)
    meta = rows[0] if rows else {}
    for r in rows:
        t[(r["neurons"], r["layers"])][r["policy"]] = r
    configs = sorted(t)
    variants = []
    for r in rows:
        if r["policy"] not in variants:
            variants.append(r["policy"])
    lines = [f"# Graph Challenge ablation ({meta.get('gpu')}, CUDA {meta.get('cuda')}, {meta.get('date')})", "",
             "60000 distinct inputs; inference seconds (inputs on the device -> categories on the host), median "
             "of 3 after a warm-up; categories in parentheses.", "",
             "| N x L | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for c in configs:
        cells = []
        for v in variants:
            r = t[c].get(v)
            cells.append("-" if r is None else f"{r['seconds'] * 1e3:.3f} ms ({r['categories']})")
        lines.append(f"| {c[0]} x {c[1]} | " + " | ".join(cells) + " |")
    lines += ["", "Engine counters (depth_first): rows x layers computed, layers skipped, retired rows, fold factors:", ""]
    for c in configs:
        r = t[c].get("depth_first")
        if r and "row_layers" in r:
            lines.append(f"- {c[0]} x {c[1]}: {r['row_layers']} row-layers of {60000 * c[1]}, "
                         f"{r['layers_skipped']} layers skipped, {r['retired']} retired, fold "
                         f"{r['fold_min']:.0f}..{r['fold_max']:.0f}, retirement proven from layer "
                         f"{r['retirement_proven_from']}")
    open(stem + ".md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 5))
        x = list(range(len(configs)))
        for v in variants:
            ys = [t[c][v]["seconds"] if v in t[c] else float("nan") for c in configs]
            ax.plot(x, ys, marker="o", label=v)
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([f"{c[0]}x{c[1]}" for c in configs])
        ax.set_ylabel("inference seconds (log)")
        ax.set_title(f"Graph Challenge, 60000 inputs, {meta.get('gpu')}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(stem + ".png", dpi=120)
    except Exception as e:  # noqa: BLE001
        print(f"plot skipped: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Plots bench_conv JSON lines: speedup of sdnn direct sparse convolution over dense cuDNN
against sparsity, one line per layer, one panel per precision; prints (and marks) the
crossover sparsity where sdnn starts to win (linear interpolation of speedup = 1).

  plot_conv.py results.jsonl [out_prefix]   -> out_prefix_<precision>.png, a table on stdout
"""
import json
import sys
from collections import defaultdict


def crossover(points):
    """Smallest sparsity at which speedup reaches 1 (interpolated); the lowest measured sparsity
    when sdnn already wins there (printed as <=); None if it never wins in the range."""
    pts = sorted(points)
    if not pts:
        return None
    if pts[0][1] >= 1.0:
        return pts[0][0]  # already winning at the lowest sparsity measured
    for (s0, v0), (s1, v1) in zip(pts, pts[1:]):
        if v0 < 1.0 <= v1:
            return s0 + (1.0 - v0) * (s1 - s0) / (v1 - v0)
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 1
    path = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0]
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    rows = [r for r in rows if r.get("family") == "conv"]
    # Lines are the global-threshold pruning rule; the per_channel rows (no padding, 90 % only)
    # are listed in their own table below instead of joining the lines.
    per_channel = [r for r in rows if r.get("rule", "global") == "per_channel"]
    rows = [r for r in rows if r.get("rule", "global") == "global"]
    by = defaultdict(lambda: defaultdict(list))  # precision -> layer -> [(sparsity, speedup)]
    gpu = rows[0]["gpu"] if rows else "?"
    for r in rows:
        by[r["precision"]][r["layer"]].append((r["sparsity"], r["speedup"]))
    print(f"GPU: {gpu}")
    print(f"{'precision':10s} {'layer':28s} " + " ".join(f"{s:>7.3f}" for s in sorted({r['sparsity'] for r in rows}))
          + "  crossover")
    for prec, layers in by.items():
        for layer, pts in layers.items():
            d = dict(pts)
            cells = " ".join(f"{d[s]:7.2f}" if s in d else "      -" for s in sorted({r['sparsity'] for r in rows}))
            c = crossover(pts)
            lo = min(p[0] for p in pts)
            txt = "none" if c is None else (f"<={c:.3f}" if c == lo and dict(pts)[lo] >= 1.0 else f"{c:.3f}")
            print(f"{prec:10s} {layer:28s} {cells}  {txt}")
    if per_channel:
        print("\nper_channel pruning (no padding), speedup over cuDNN of the same precision:")
        glob = {(r["precision"], r["layer"], r["sparsity"]): r["speedup"] for r in rows}
        for r in sorted(per_channel, key=lambda r: (r["precision"], r["layer"])):
            g = glob.get((r["precision"], r["layer"], r["sparsity"]))
            gt = f"{g:.2f}" if g is not None else "-"
            print(f"{r['precision']:10s} {r['layer']:28s} s={r['sparsity']:.3f} per_channel {r['speedup']:.2f}"
                  f"  global {gt}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: table only")
        return 0
    for prec, layers in by.items():
        fig, ax = plt.subplots(figsize=(11, 7))
        ax.set_prop_cycle(color=[plt.cm.tab20(i % 20) for i in range(20)])
        for layer, pts in sorted(layers.items()):
            pts = sorted(pts)
            line, = ax.plot([p[0] * 100 for p in pts], [p[1] for p in pts], marker="o", label=layer)
            c = crossover(pts)
            if c is not None:
                ax.plot([c * 100], [1.0], marker="x", color=line.get_color(), markersize=10)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xlabel("weight sparsity (%)")
        ax.set_ylabel(f"speedup over cuDNN {'float (no TF32)' if prec == 'float' else 'half (tensor cores)'}")
        ax.set_yscale("log")
        ax.set_title(f"sdnn direct sparse conv ({prec}) vs cuDNN, batch {rows[0]['batch']}, {gpu}\n"
                     "x = crossover sparsity (speedup 1)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        out = f"{prefix}_{prec}.png"
        fig.savefig(out, dpi=110)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

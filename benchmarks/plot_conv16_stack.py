#!/usr/bin/env python3
"""The VGG-16 stack of bench_conv16 (--mode=stack) in builds compared in one device call.

    /usr/bin/python3 benchmarks/plot_conv16_stack.py ab.jsonl -o stack.png [--md stack.md]

Input: bench_conv16's JSON lines (layer "vgg16_stack") with a "variant" field naming the build
(and a "round" field where the builds alternated). Each sdnn stack is compared with cuDNN's stack
measured in the same process (same variant and round).
  <out>.png   per (type, batch): bars per variant and structure, sdnn's stack time in us (median
              over rounds), the speedup over cuDNN's stack of the same process written on each;
  --md FILE   a table: per (type, batch, structure, variant, round) both stack times and the speedup.
"""
import argparse
import statistics
from collections import OrderedDict

from bench_jsonl import family_rows

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--md")
    ap.add_argument("--title", default="VGG-16 convolution stack, wall time of one forward")
    a = ap.parse_args()
    rows = [r for r in family_rows(a.jsonl, "conv16") if r["layer"] == "vgg16_stack"]
    if not rows:
        raise SystemExit("no vgg16_stack rows in " + a.jsonl)
    cudnn = {}
    for r in rows:
        if r["path"] == "cudnn":
            cudnn[(r.get("variant", ""), r.get("round", 0), r["type"], int(r["batch"]))] = r["time_us"]
    runs = OrderedDict()  # (type, batch, structure) -> variant -> [(round, sdnn us, cudnn us)]
    for r in rows:
        if r["path"] != "automatic":
            continue
        v, rd, t, b = r.get("variant", ""), r.get("round", 0), r["type"], int(r["batch"])
        c = cudnn.get((v, rd, t, b))
        if c is None:
            continue
        runs.setdefault((t, b, r["structure"]), OrderedDict()).setdefault(v, []).append((rd, r["time_us"], c))
    first = rows[0]
    if a.md:
        lines = [f"# VGG-16 stack: {first['gpu']}, CUDA {first['cuda_runtime']}, {first['date']}", "",
                 "Wall time of one forward issued layer by layer (host work included), median of the bench's "
                 "repeats; cuDNN's stack of the same process and round.", "",
                 "| type | batch | structure | build | round | sdnn us | cuDNN us | speedup |",
                 "|---|---|---|---|---|---|---|---|"]
        for (t, b, s), by in runs.items():
            for v, xs in by.items():
                for rd, us, c in xs:
                    lines.append(f"| {t} | {b} | {s} | {v} | {rd} | {us:.1f} | {c:.1f} | {c / us:.2f}x |")
        with open(a.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    panels = sorted({(t, b) for (t, b, _) in runs})
    variants = list(OrderedDict.fromkeys(v for by in runs.values() for v in by))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.2), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for ax, (t, b) in zip(axes[0], panels):
        structs = [s for (tt, bb, s) in runs if (tt, bb) == (t, b)]
        for j, v in enumerate(variants):
            xs, hs, labels = [], [], []
            for i, s in enumerate(structs):
                got = runs[(t, b, s)].get(v)
                if not got:
                    continue
                us = statistics.median(x[1] for x in got)
                sp = statistics.median(x[2] / x[1] for x in got)
                xs.append(i + (j - (len(variants) - 1) / 2) * width)
                hs.append(us)
                labels.append(f"{sp:.2f}x")
            bars = ax.bar(xs, hs, width, label=v)
            for bar, lab in zip(bars, labels):
                ax.annotate(lab, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                            fontsize=8)
        ax.set_xticks(range(len(structs)))
        ax.set_xticklabels(structs)
        ax.set_title(f"{t}, batch {b}")
        ax.set_ylabel("sdnn stack, us (label: x cuDNN's stack)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
        ax.legend(fontsize=8, loc="lower center")
    fig.suptitle(f"{a.title} ({first['gpu']}, {first['date']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()

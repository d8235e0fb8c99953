#!/usr/bin/env python3
"""Heat maps and a table of bench_conv16's JSON lines (family "conv16").

    /usr/bin/python3 benchmarks/plot_conv16.py results.jsonl [-o conv16.png] [--md conv16.md]

Writes
  <out>.png   one panel per (type, batch): rows = layers (the VGG-16 stack last), columns = structure at
              each sparsity asked for, cell = speedup of `automatic` over cuDNN of the same type, layer
              and batch measured in the same process (the faster of cuDNN with bias + ReLU and its
              convolution alone: the bench's speedup_vs_cudnn), annotated with the value and a tag of
              the path it chose; a second row of panels gives sdnn's kernel's speedup (block, 2:4, or the
              direct kernel of a first layer);
  --md FILE   a Markdown table: per (layer, batch, type), cuDNN's time, and per structure the sdnn
              kernel's, the automatic plan's (with its choice) and the compact (filters removed) cuDNN
              layer's speedups over that cuDNN time.
Lines of a later run replace those of an earlier one with the same key.
"""
import argparse
import math
from collections import OrderedDict

from bench_jsonl import family_rows

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

TAGS = {"cudnn": "cuDNN", "tc_dense": "tcD", "tc_blocks64x32": "b64", "tc_blocks32": "b32", "tc_blocks16": "b16",
        "tc_tiles": "tile", "cublaslt_1x1": "Lt", "tc_blocks64x32_tma": "b64t", "tc_blocks32_tma": "b32t", "tc_sparse24": "2:4", "small_c": "sc"}


def load(path):
    rows = OrderedDict()
    for r in family_rows(path, "conv16"):
        key = (r["layer"], int(r["batch"]), r["type"], r["path"], r["structure"], target(r))
        rows[key] = r
    return list(rows.values())


def target(r):
    """The sparsity asked for (older lines: the sparsity as pruned)."""
    return round(r.get("target_sparsity", r.get("sparsity", 0)), 2) if r["structure"] != "dense" else 0.0


def chosen_tag(note):
    for name, tag in TAGS.items():
        if note.startswith(name + ":") or note.startswith(name + " "):
            return tag
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("-o", "--out", default="conv16.png")
    ap.add_argument("--md")
    a = ap.parse_args()
    rows = load(a.jsonl)
    base = {}  # (layer, batch, type) -> cuDNN's time: the faster of its two rows
    for r in rows:
        if r["path"] in ("cudnn", "cudnn_conv_only") and r.get("time_us"):
            k = (r["layer"], int(r["batch"]), r["type"])
            base[k] = min(base.get(k, float("inf")), r["time_us"])
    groups = sorted({(r["type"], int(r["batch"])) for r in rows})
    layers = list(OrderedDict.fromkeys(r["layer"] for r in rows if r["layer"] != "vgg16_stack"))
    if any(r["layer"] == "vgg16_stack" for r in rows):
        layers.append("vgg16_stack")
    kernels = ("sdnn_tc_blocks", "sdnn_tc_sparse24", "sdnn_small_c")  # sdnn's kernel for the column's structure
    cols = sorted({(r["structure"], target(r)) for r in rows if r["path"] in ("automatic",) + kernels},
                  key=lambda c: (c[0] != "dense", c[0], c[1]))

    def cell(layer, batch, typ, path, col):
        best = None
        for r in rows:
            if (r["layer"], int(r["batch"]), r["type"]) != (layer, batch, typ):
                continue
            if r["path"] != path and not (path == "kernel" and r["path"] in kernels):
                continue
            if (r["structure"], target(r)) != col or not r.get("time_us") or not r.get("speedup_vs_cudnn"):
                continue
            v = r["speedup_vs_cudnn"]  # over cuDNN of the same type, measured in the same process
            if best is None or v > best[0]:
                best = (v, r.get("note", ""), r.get("sparsity", 0))
        return best

    if not groups or not cols:
        print("plot_conv16: nothing to plot")
        return
    fig, axes = plt.subplots(2, len(groups), figsize=(3.2 + 1.1 * len(cols) * len(groups), 1.5 + 0.42 * len(layers) * 2),
                             squeeze=False)
    for gi, (typ, batch) in enumerate(groups):
        for pi, path in enumerate(("automatic", "kernel")):
            ax = axes[pi][gi]
            m = np.full((len(layers), len(cols)), np.nan)
            labels = [["" for _ in cols] for _ in layers]
            for li, layer in enumerate(layers):
                for ci, col in enumerate(cols):
                    c = cell(layer, batch, typ, path, col)
                    if c:
                        m[li, ci] = c[0]
                        tag = chosen_tag(c[1]) if path == "automatic" and layer != "vgg16_stack" else ""
                        labels[li][ci] = f"{c[0]:.2f}" + (f"\n{tag}" if tag else "")
            im = ax.imshow(np.log2(m), cmap="RdYlGn", vmin=-2, vmax=2, aspect="auto")
            for li in range(len(layers)):
                for ci in range(len(cols)):
                    if labels[li][ci]:
                        ax.text(ci, li, labels[li][ci], ha="center", va="center", fontsize=6.5)
            ax.set_xticks(range(len(cols)))
            ax.set_xticklabels([f"{st}\n{sp:.2f}" if st != "dense" else "dense" for st, sp in cols], fontsize=7)
            ax.set_yticks(range(len(layers)))
            ax.set_yticklabels(layers, fontsize=7)
            what = "automatic" if path == "automatic" else "sdnn kernel"
            ax.set_title(f"{typ} b{batch}: {what} / cuDNN", fontsize=8)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="log2 speedup over cuDNN (same type, same run)")
    first = rows[0]
    fig.suptitle(f"bench_conv16 on {first['gpu']}, CUDA {first['cuda_runtime']}, {first['date']}, "
                 f"commit {first['commit']} (green: faster than cuDNN)", fontsize=9)
    fig.savefig(a.out, dpi=130)
    print("wrote", a.out)

    if a.md:
        with open(a.md, "w") as f:
            f.write(f"# bench_conv16: {first['gpu']}, CUDA {first['cuda_runtime']}, {first['date']}, commit "
                    f"{first['commit']}\n\nSpeedup over cuDNN of the same type (same layer, batch and process; the faster of cuDNN with "
                    "bias + ReLU and its convolution alone; L2 flushed, median). asked / pruned: the sparsity asked "
                    "for and the share of channel blocks the pruning dropped (few blocks round it; 2:4 drops half); "
                    "kernel: the sdnn block kernel (2:4: the mma.sp kernel); tma: the TMA block kernel forced (runs "
                    "with --tma=1); auto: the automatic plan (its choice); compact: cuDNN on the layer with whole "
                    "filters and input channels removed to about the same weight count.\n\n")
            f.write("| layer | batch | type | cuDNN us | structure | asked | pruned | kernel | tma | auto | compact |\n")
            f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
            for layer in layers:
                for typ, batch in groups:
                    b = base.get((layer, batch, typ))
                    for col in cols:
                        if col[0] == "dense":
                            continue
                        bl = cell(layer, batch, typ, "kernel", col)
                        tm = cell(layer, batch, typ, "sdnn_tc_blocks_tma", col)
                        au = cell(layer, batch, typ, "automatic", col)
                        if not bl and not au:
                            continue
                        comp = [r for r in rows if r["layer"] == layer and int(r["batch"]) == batch
                                and r["type"] == typ and r["path"] == "cudnn_compact" and target(r) == col[1]]
                        cs = f"{b / comp[0]['time_us']:.2f}" if comp and b and comp[0].get("time_us") else ""
                        pruned = (bl or au)[2]
                        bls = f"{bl[0]:.2f}" if bl else ""
                        aus = ""
                        if au:
                            aus = f"{au[0]:.2f} ({chosen_tag(au[1]) if layer != 'vgg16_stack' else 'per layer'})"
                        bs = f"{b:.1f}" if b else ""
                        tms = f"{tm[0]:.2f}" if tm else ""
                        f.write(f"| {layer} | {batch} | {typ} | {bs} | {col[0]} | {col[1]:.2f} | {pruned:.2f} | {bls} | "
                                f"{tms} | {aus} | {cs} |\n")
        print("wrote", a.md)


if __name__ == "__main__":
    main()

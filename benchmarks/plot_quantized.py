#!/usr/bin/env python3
"""Plots bench_quantized_spmm's JSON lines (family "quantized_spmm") as one PNG.

    benchmarks/plot_quantized.py FILE.jsonl OUT.png

Left: time per product (ms) against W's sparsity, one group of bars per sparsity, one bar per
kernel (float CSR, cuSPARSE, int8, codebook4). Right: weight bytes (MiB) of each format
(indices + values + parameters; cuSPARSE uses the float CSR). The title names the GPU and
date; the relative error of each quantized product against the float one is printed on its bar.
"""
import collections
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["float_csc_gather", "cusparse_spmm", "int8_channel_sym", "int8_layer_asym", "codebook4"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("family") == "quantized_spmm":
                rows.append(r)
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    if not rows:
        sys.exit(f"{sys.argv[1]}: no quantized_spmm lines")
    # The last line per (sparsity, kernel) wins (a file may hold a rerun).
    best = {}
    for r in rows:
        best[(round(100 * r["sparsity"]), r["kernel"])] = r
    sps = sorted({s for s, _ in best})
    kernels = [k for k in ORDER if any((s, k) in best for s in sps)]
    kernels += sorted({k for _, k in best} - set(kernels))

    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / max(1, len(kernels))
    bytes_by = collections.OrderedDict()
    for i, k in enumerate(kernels):
        xs, ts, errs = [], [], []
        for si, s in enumerate(sps):
            r = best.get((s, k))
            if r is None:
                continue
            xs.append(si + (i - (len(kernels) - 1) / 2) * width)
            ts.append(r["time_ms"])
            errs.append(r.get("rel_err"))
            if k != "cusparse_spmm":
                bytes_by.setdefault(k, {})[s] = r["weight_bytes"] / 2**20
        bars = ax_t.bar(xs, ts, width, label=k)
        for b, e in zip(bars, errs):
            if e:  # quantized kernels: error of the product against the float one
                ax_t.annotate(f"{e:.1e}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                              va="bottom", fontsize=6, rotation=90)
    ax_t.set_xticks(range(len(sps)))
    ax_t.set_xticklabels([f"{s} %" for s in sps])
    ax_t.set_xlabel("W sparsity")
    ax_t.set_ylabel("time per product (ms)")
    r0 = rows[0]
    ax_t.set_title(f"Y = X W: X {int(r0['n'])} x {int(r0['k'])}, W {int(r0['k'])} x {int(r0['m'])}")
    ax_t.legend(fontsize=8)
    ax_t.grid(axis="y", alpha=0.3)

    bw = 0.8 / max(1, len(bytes_by))
    for i, (k, per) in enumerate(bytes_by.items()):
        xs = [si + (i - (len(bytes_by) - 1) / 2) * bw for si, s in enumerate(sps) if s in per]
        ax_b.bar(xs, [per[s] for s in sps if s in per], bw, label=k)
    ax_b.set_xticks(range(len(sps)))
    ax_b.set_xticklabels([f"{s} %" for s in sps])
    ax_b.set_xlabel("W sparsity")
    ax_b.set_ylabel("weight bytes (MiB): indices + values + parameters")
    ax_b.set_title("weight footprint per format")
    ax_b.legend(fontsize=8)
    ax_b.grid(axis="y", alpha=0.3)

    fig.suptitle(f"bench_quantized_spmm on {r0.get('gpu', '?')} (CUDA {r0.get('cuda_runtime', '?')}, "
                 f"{r0.get('date', '?')})")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=130)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()

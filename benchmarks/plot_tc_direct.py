#!/usr/bin/env python3
"""Draws bench_linear_tc runs of the 32 x 32 block path with its shape forced (direct, small, large,
stream) and automatic, against cuBLAS bf16, as one PNG (a panel per W shape, 90 % empty blocks) and
a Markdown table of every point.

  plot_tc_direct.py RUN.jsonl OUT.png OUT.md
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHAPES = ["direct", "small", "large", "stream", "automatic"]


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    rows = [json.loads(l) for l in open(argv[1]) if l.startswith("{")]
    # The file holds one run after another in the order automatic, direct, large, small, stream
    # (the stream run only for N <= 32): the k-th line of a point belongs to the k-th run.
    cublas = {(r["shape"], r["n"]): r["time_us"] for r in rows if r["kernel"] == "cublas_bf16"}
    runs = {}
    seen = {}
    for r in rows:
        if r["kernel"] != "tc_block_sparse":
            continue
        key = (r["shape"], r["n"], r["sparsity"])
        k = seen.get(key, 0)
        seen[key] = k + 1
        forced = ["automatic", "direct", "large", "small", "stream"][k] if k < 5 else "?"
        runs[(forced,) + key] = r
    shapes = sorted({k[1] for k in runs}, key=lambda s: [int(v) for v in s.split("x")])
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4.5))
    for ax, sh in zip(axes, shapes):
        ns = sorted({k[2] for k in runs if k[1] == sh})
        for name in SHAPES:
            pts = [(n, runs[(name, sh, n, 0.9)]["time_us"]) for n in ns if (name, sh, n, 0.9) in runs]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name,
                        lw=2.5 if name == "automatic" else 1.2)
        ax.plot(ns, [cublas[(sh, n)] for n in ns], "k--", label="cuBLAS bf16 (dense)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N (batch rows)")
        ax.set_ylabel("us (median, L2 flushed)")
        ax.set_title("W %s, 90 %% of 32x32 blocks empty" % sh)
        ax.legend(fontsize=7)
    r0 = rows[0]
    fig.suptitle("bench_linear_tc, 32x32 block path by forced shape: %s, CUDA %s, %s" %
                 (r0["gpu"], r0["cuda_runtime"], r0["date"]))
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    with open(argv[3], "w") as md:
        md.write("# The direct block kernel against the pipelined shapes: %s, CUDA %s, %s\n\n" %
                 (r0["gpu"], r0["cuda_runtime"], r0["date"]))
        md.write("bench_linear_tc, Y = X W^T in bf16, W with 75/90/95 % of its 32 x 32 blocks empty, L2 flushed, "
                 "median of 20; every sdnn time in us with its speedup over cuBLAS bf16 on the dense W (same "
                 "process). `stream` is forced only for N <= 32. `automatic` is the plan's own choice (direct "
                 "for N <= 128 or while blocks x 128-row tiles <= 2048).\n\n")
        md.write("| W | empty blocks | N | cuBLAS | " + " | ".join(SHAPES) + " |\n")
        md.write("|---|---|---|---|" + "---|" * len(SHAPES) + "\n")
        for sh in shapes:
            for sp in sorted({k[3] for k in runs if k[1] == sh}):
                for n in sorted({k[2] for k in runs if k[1] == sh}):
                    c = cublas.get((sh, n))
                    cells = []
                    for name in SHAPES:
                        r = runs.get((name, sh, n, sp))
                        cells.append("%.1f (%.2fx)" % (r["time_us"], c / r["time_us"]) if r and c else "")
                    md.write("| %s | %g %% | %d | %.1f | %s |\n" % (sh, 100 * sp, n, c or 0, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

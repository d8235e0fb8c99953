#!/usr/bin/env python3
"""The PNG and a Markdown table of benchmarks/bench_python.py's JSON lines (family "python").

    /usr/bin/python3 benchmarks/plot_python.py results.jsonl [-o python.png] [--md python.md]

Three panels: host microseconds per call on the tiny layer (the C++ call, the Python calls, torch's
nn.Linear); per structure and batch, the speedup over dense torch bf16 of sdnn and of torch's sparse
paths on the 4096 x 4096 layer (log scale); and the converted models' speedup over the dense model.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("-o", "--out", default="python.png")
    ap.add_argument("--md", default=None)
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
    over = [r for r in rows if r["section"] == "overhead"]
    layer = [r for r in rows if r["section"] == "layer" and "time_us" in r]
    model = [r for r in rows if r["section"] == "model"]
    head = rows[0]
    title = f"sdnn from Python: {head['gpu']}, torch {head['torch']}, {head['date']}, commit {head['commit']}"

    fig, ax = plt.subplots(1, 3, figsize=(18, 5.5))
    ax[0].barh([r["what"] for r in over], [r["host_us_per_call"] for r in over], color="#4c72b0")
    for i, r in enumerate(over):
        ax[0].text(r["host_us_per_call"], i, f" {r['host_us_per_call']:.1f} (+{r['overhead_vs_cpp_us']:.1f})",
                   va="center", fontsize=8)
    ax[0].set_xlabel("host us per call (64 x 64, 1 row; + over the C++ call)")
    ax[0].invert_yaxis()
    ax[0].set_title("per-call overhead")

    paths = sorted({r["path"] for r in layer}, key=lambda p: (p != "sdnn", p))
    groups = sorted({(r["structure"], r["n"]) for r in layer}, key=lambda g: (g[0], g[1]))
    width = 0.8 / max(1, len(paths))
    for j, p in enumerate(paths):
        xs, ys = [], []
        for i, g in enumerate(groups):
            hit = [r for r in layer if (r["structure"], r["n"]) == g and r["path"] == p]
            if hit:
                xs.append(i + j * width)
                ys.append(hit[0]["speedup_vs_torch_dense"])
        ax[1].bar(xs, ys, width, label=p)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set_yscale("log")
    ax[1].set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
    ax[1].set_xticklabels([f"{s}\nN={n}" for s, n in groups], fontsize=8)
    ax[1].set_ylabel("speedup over dense torch bf16 (GPU time)")
    ax[1].set_title("4096 x 4096 layer, 90 % blocks / 2:4")
    ax[1].legend(fontsize=8, loc="lower left")

    labels = [f"{r['model']} {r['structure']}\nN={r['n']}" for r in model]
    ax[2].bar(range(len(model)), [r["speedup"] for r in model],
              color=["#55a868" if r["speedup"] >= 1 else "#c44e52" for r in model])
    for i, r in enumerate(model):
        ax[2].text(i, r["speedup"], f"{r['speedup']:.2f}", ha="center", va="bottom", fontsize=8)
    ax[2].axhline(1.0, color="k", lw=0.8)
    ax[2].set_xticks(range(len(model)))
    ax[2].set_xticklabels(labels, fontsize=7)
    ax[2].set_ylabel("converted / dense torch model (events around forward)")
    ax[2].set_title("sdnn.torch.convert, end to end")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote", a.out)

    if a.md:
        with open(a.md, "w") as f:
            f.write(f"# {title}\n\n`benchmarks/bench_python.py`; GPU times by CUDA events, L2 flushed, median.\n\n")
            f.write("## Per-call overhead (host, 64 x 64 layer, one row)\n\n| call | us per call | over C++ |\n|---|---|---|\n")
            for r in over:
                f.write(f"| {r['what']} | {r['host_us_per_call']:.1f} | {r['overhead_vs_cpp_us']:.1f} |\n")
            f.write("\n## 4096 x 4096 bf16 layer\n\n| structure | N | path | us | vs dense torch | sdnn's choice |\n"
                    "|---|---|---|---|---|---|\n")
            for r in layer:
                f.write(f"| {r['structure']} | {r['n']} | {r['path']} | {r['time_us']:.1f} | "
                        f"{r['speedup_vs_torch_dense']:.2f} | {r.get('choice', '')} |\n")
            f.write("\n## Converted models\n\n| model | structure | dtype | N | dense us | sdnn us | speedup |\n"
                    "|---|---|---|---|---|---|---|\n")
            for r in model:
                f.write(f"| {r['model']} | {r['structure']} | {r['dtype']} | {r['n']} | {r['dense_us']:.1f} | "
                        f"{r['sdnn_us']:.1f} | {r['speedup']:.2f} |\n")
        print("wrote", a.md)


if __name__ == "__main__":
    main()

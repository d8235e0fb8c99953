#!/usr/bin/env python3
"""PNG of benchmarks/weight_store_gpu.sh's JSON lines: inference seconds resident vs streamed
per configuration (with the copy stream's busy time inside each streamed bar), and the
achieved host-to-device rate against the link's measured peak.

usage: plot_weight_store.py JSONL [JSONL ...] OUT.png
"""
import json
import sys


def streamed(r):
    return r.get("weights") == "host" or "stream_bytes" in r or "streamed_bytes" in r


def short(r):
    """N x L, the policy without its depth_first_ prefix, and where the weights were (from the label)."""
    head = f"{r['neurons']}x{r['layers']}"
    pol = str(r.get("policy", "")).replace("depth_first_", "").replace("skip_empty_rows_csc_tiled32", "tiled32")
    lab = r.get("label", "")
    where = "streamed" if streamed(r) else "resident"
    for tok in ("host_", "auto_"):
        if tok in lab:
            where = lab[lab.index(tok):].replace("_", " ")
    return f"{head}\n{pol}\n{where}"


def main():
    *paths, png = sys.argv[1:]
    rows = [json.loads(l) for p in paths for l in open(p) if l.strip().startswith('{"family"')]
    rows = [r for r in rows if "seconds" in r]
    if not rows:
        print("plot_weight_store.py: no results")
        return 1
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(11, 1.2 * len(rows) + 5), 5), gridspec_kw={"width_ratios": [3, 2]})
    labels = [short(r) for r in rows]
    x = range(len(rows))
    a1.bar(x, [r["seconds"] for r in rows], color=["tab:orange" if streamed(r) else "tab:blue" for r in rows])
    a1.bar(x, [r.get("copy_seconds") or 0 for r in rows], width=0.35, color="tab:red", label="copy stream busy (overlapped)")
    for i, r in enumerate(rows):
        a1.text(i, r["seconds"], f"{r['seconds']:.3g} s\n{r['categories']} cat.", ha="center", va="bottom", fontsize=8)
    a1.set_xticks(list(x), labels, fontsize=7)
    secs = [r["seconds"] for r in rows if r["seconds"] > 0]
    if secs and max(secs) / min(secs) > 50:  # engine runs of milliseconds beside pipeline runs of seconds
        a1.set_yscale("log")
    a1.set_ylabel("inference seconds")
    a1.set_title("resident (blue) vs streamed from pinned host memory (orange)")
    a1.legend(fontsize=8)
    st = [r for r in rows if r.get("h2d_bytes_per_second")]
    a2.bar(range(len(st)), [r["h2d_bytes_per_second"] / 1e9 for r in st], label="H2D while copying")
    a2.plot(range(len(st)), [r["h2d_peak_bytes_per_second"] / 1e9 for r in st], "k_", ms=40, label="link peak (measured)")
    a2.set_xticks(range(len(st)), [short(r) for r in st], fontsize=7)
    a2.set_ylabel("GB/s")
    a2.set_title("achieved host-to-device rate")
    a2.legend(fontsize=8)
    fig.suptitle(f"{rows[0].get('gpu')}, CUDA {rows[0].get('cuda')}, policy {', '.join(sorted({str(r.get('policy')) for r in rows}))}, 60000 inputs")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print("wrote", png)
    return 0


if __name__ == "__main__":
    sys.exit(main())

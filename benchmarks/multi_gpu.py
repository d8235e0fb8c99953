#!/usr/bin/env python3
"""Table and plot of benchmarks/multi_gpu.sh: inference seconds on one GPU and on P ranks (one
GPU each) per configuration, the speedup, the per-rank times' imbalance, and whether the
categories agree.

usage: multi_gpu.py JSONL OUT_STEM
"""
import json
import sys
from collections import defaultdict


def main():
    path, stem = sys.argv[1], sys.argv[2]
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    if not rows:
        print("multi_gpu.py: no results in", path)
        return 1
    meta = rows[0]
    t = defaultdict(dict)
    for r in rows:
        t[(r["neurons"], r["layers"])][r.get("ranks", 1)] = r
    configs = sorted(t)
    ranks = sorted({k for c in t.values() for k in c if k > 1})
    lines = [f"# Graph Challenge on several GPUs ({meta.get('gpu')}, CUDA {meta.get('cuda')}, {meta.get('date')}, "
             f"policy {meta.get('policy')})", "",
             "60000 distinct inputs split in contiguous blocks balanced by nonzeros, one MPI rank per GPU; "
             "inference seconds = the slowest rank's (inputs on the device -> categories on the host), median of "
             "the repeats after a warm-up; speedup against the single-GPU run of the same call; imbalance = "
             "max / mean of the per-rank seconds.", "",
             "| N x L | 1 GPU | " + " | ".join(f"{p} GPUs | speedup | imbalance" for p in ranks) + " | categories (count, hash of the ids) |",
             "|---|---|" + "---|---|---|" * len(ranks) + "---|"]
    for c in configs:
        one = t[c].get(1)
        cells = [f"{one['seconds'] * 1e3:.3f} ms" if one else "-"]
        key = lambda r: (r["categories"], r.get("categories_fnv1a"))  # count and a hash of the ids
        cats = {key(one)} if one else set()
        for p in ranks:
            r = t[c].get(p)
            if not r:
                cells += ["-", "-", "-"]
                continue
            cats.add(key(r))
            rs = r.get("rank_seconds", [])
            imb = max(rs) / (sum(rs) / len(rs)) if rs and sum(rs) > 0 else float("nan")
            cells += [f"{r['seconds'] * 1e3:.3f} ms", f"{one['seconds'] / r['seconds']:.2f}x" if one else "-",
                      f"{imb:.3f}"]
        hashed = all(h for _, h in cats)
        cells.append(("same " + ("ids: " if hashed else "count: ") if len(cats) == 1 else "DIFFER: ") +
                     ", ".join(str(c) + (f" ({h})" if h else "") for c, h in sorted(cats, key=str)))
        lines.append(f"| {c[0]} x {c[1]} | " + " | ".join(cells) + " |")
    open(stem + ".md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("multi_gpu.py: matplotlib missing, no PNG")
        return 0
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    x = list(range(len(configs)))
    labels = [f"{n}x{l}" for n, l in configs]
    for p in [1] + ranks:
        ys = [t[c][p]["seconds"] * 1e3 if p in t[c] else float("nan") for c in configs]
        a1.plot(x, ys, marker="o", label=f"{p} GPU" + ("s" if p > 1 else ""))
    a1.set_yscale("log")
    a1.set_xticks(x, labels)
    a1.set_ylabel("inference ms (log)")
    a1.set_title("time")
    a1.legend()
    w = 0.8 / max(len(ranks), 1)
    for i, p in enumerate(ranks):
        sp = [t[c][1]["seconds"] / t[c][p]["seconds"] if 1 in t[c] and p in t[c] else 0 for c in configs]
        a2.bar([xi + i * w for xi in x], sp, width=w, label=f"{p} GPUs")
        a2.axhline(p, color="gray", ls=":", lw=1)
    a2.set_xticks(x, labels)
    a2.set_ylabel("speedup vs 1 GPU")
    a2.set_title("speedup (dotted: ideal)")
    a2.legend()
    fig.suptitle(f"{meta.get('gpu')}, {meta.get('policy')}, 60000 inputs")
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())

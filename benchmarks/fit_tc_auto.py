#!/usr/bin/env python3
"""Fits the cost model of the automatic 16-bit linear layer (linear/policy/tc_auto.hpp) to a
bench_linear16 run, and checks a model against it.

  fit_tc_auto.py RUN.jsonl             prints the rates per path and anchor N as the C++ table
  fit_tc_auto.py RUN.jsonl --check     replays the model of the table printed (or --rates FILE)
                                       on every grid point: the modelled choice, its measured
                                       time over the fastest path's, and the worst points

The model: t(N) = launch + units * rate(N), rate piecewise linear in N between the anchors
1, 8, 32, 128, 512, 2048. units: cublas_dense and sparse24 M*K/1e6, tc_block32 occupied 32x32
blocks/1e3, tc_tile_offsets occupied 64x64 tiles * (1 + nnz per tile / 960) / 1e3. A rate is the
median over the grid's points at that N of (t - launch) / units.
"""
import json
import statistics
import sys

ANCHORS = [1, 8, 32, 128, 512, 2048]
PATHS = ["cublas_dense", "tc_block32", "tc_tile_offsets", "sparse24"]
BENCH_NAME = {"cublas_bf16": "cublas_dense", "tc_block32": "tc_block32", "tc_tile_offsets": "tc_tile_offsets",
              "sparse24": "sparse24"}
LAUNCH = {"cublas_dense": 4.0, "tc_block32": 3.0, "tc_tile_offsets": 3.0, "sparse24": 3.0}


def units(path, p):
    if path in ("cublas_dense", "sparse24"):
        return p["m"] * p["k"] * 1e-6
    if path == "tc_block32":
        return p["blocks32"] * 1e-3
    per_tile = p["nnz"] / p["tiles64"] if p["tiles64"] else 0.0
    return p["tiles64"] * (1.0 + per_tile / 960.0) * 1e-3


def load(fn):
    rows = []
    for line in open(fn):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("family") != "linear16" or "time_us" not in r or r.get("error"):
            continue
        rows.append(r)
    return rows


def points(rows):
    """(shape, structure, sparsity, n) -> {model path: measured us} and the structure fields."""
    pts = {}
    dense_t = {}
    for r in rows:
        if r["path"] == "cublas_bf16":
            dense_t[(r["shape"], r["n"])] = r["time_us"]
    for r in rows:
        key = (r["shape"], r["structure"], r["sparsity"], r["n"])
        e = pts.setdefault(key, {"times": {}, "all": {}, "info": r})
        e["all"][r["path"]] = r["time_us"]
        if r["path"] in BENCH_NAME:
            e["times"][BENCH_NAME[r["path"]]] = r["time_us"]
        if "nnz" in r and "nnz" not in e["info"]:
            e["info"] = r
    for key, e in pts.items():
        t = dense_t.get((key[0], key[3]))
        if t is not None:
            e["times"]["cublas_dense"] = t
            e["all"]["cublas_bf16"] = t
    return pts


def fit(pts):
    rates = {}
    for path in PATHS:
        rates[path] = []
        for a in ANCHORS:
            vals = [(e["times"][path] - LAUNCH[path]) / units(path, e["info"]) for (s, st, sp, n), e in pts.items()
                    if n == a and path in e["times"] and units(path, e["info"]) > 0]
            rates[path].append(statistics.median(vals) if vals else None)
    return rates


def estimate(rates, path, info, n):
    r = rates[path]
    x = max(n, 1)
    i = 1
    while i < len(ANCHORS) - 1 and x > ANCHORS[i]:
        i += 1
    x0, x1 = ANCHORS[i - 1], ANCHORS[i]
    rate = r[0] if x <= ANCHORS[0] else r[i - 1] + (r[i] - r[i - 1]) * (x - x0) / (x1 - x0)
    return LAUNCH[path] + units(path, info) * rate


def check(pts, rates):
    worst = []
    for key, e in sorted(pts.items()):
        cands = [p for p in e["times"]]
        if not cands:
            continue
        est = {p: estimate(rates, p, e["info"], key[3]) for p in cands}
        choice = min(est, key=est.get)
        fastest = min(e["all"].values())
        fastest_path = min(e["all"], key=e["all"].get)
        ratio = e["times"][choice] / fastest
        worst.append((ratio, key, choice, fastest_path))
    worst.sort(reverse=True)
    bad = [w for w in worst if w[0] > 1.05]
    print(f"{len(worst)} points; modelled choice within 5 % of the fastest measured path at {len(worst) - len(bad)}")
    for ratio, key, choice, fp in worst[:15]:
        print(f"  {ratio:.3f}  {key}  chose {choice}, fastest {fp}")


def main():
    rows = load(sys.argv[1])
    pts = points(rows)
    rates = fit(pts)
    for path in PATHS:
        vals = ", ".join("%.4g" % v if v is not None else "nan" for v in rates[path])
        print(f"        {{{LAUNCH[path]}, {{{vals}}}}},  // {path}")
    if "--check" in sys.argv:
        check(pts, rates)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fits the cost model of the automatic 16-bit linear layer (linear/policy/tc_auto.hpp) to a
bench_linear16 run, and checks a model against it.

  fit_tc_auto.py RUN.jsonl [RUN2.jsonl:path,path ...]
                                       (each RUN may name the paths taken from it; default all)
  fit_tc_auto.py RUN.jsonl             prints the launch and rate per path and anchor N as the
                                       C++ table of linear/policy/tc_auto.hpp
  fit_tc_auto.py RUN.jsonl --check     also replays the fitted model on every grid point: the
                                       modelled choice, its measured time over the fastest
                                       path's, and the worst points
  fit_tc_auto.py RUN.jsonl --header H  checks that the table in header H is this fit (each number
                                       within 0.1 %): exit 1 if not (CTest host.tc_auto_table)
  fit_tc_auto.py RUN.jsonl --header-row NAME PATH H
                                       the same for one path's row kept apart in H as the constant
                                       NAME (a build's own rates, e.g. sparse24 of a 90a build)
  fit_tc_auto.py --self-test           fits synthetic points made from known rates (CTest)

The model: t(N) = launch(N) + units * rate(N) + units2 * rate2(N), all piecewise linear in N
between the anchors 1, 8, 32, 128, 512, 2048. units: cublas_dense and cusparselt M*K/1e6, sparse24
M*(K+1000)/1e6, tc_block32 occupied 32x32 blocks/1e3, tc_tile_offsets occupied 64x64 tiles * (1 +
nnz per tile / 960) / 1e3, cusparse_csr nonzeros/1e6, tc_bitmap 16x16 tiles/1e3 (at N <= 8 rounded
up to whole waves of its 16-row panels, bitmap_wave), csr_gather nonzeros/1e6. units2 (three paths
only): tc_bitmap stored column pairs/1e6, csr_gather K/1e3, tc_block32 occupied blocks over
min(block rows, 3 x SMs).
launch and rates at an anchor: least squares on relative error over the grid's points at that N
(every shape and structure the path ran), all non-negative (the plain fit where it is, else the best
non-negative one; always the latter for the two-count paths).
"""
import re
import sys

from bench_jsonl import family_rows

ANCHORS = [1, 8, 32, 128, 512, 2048]
PATHS = ["cublas_dense", "tc_block32", "tc_tile_offsets", "sparse24", "cusparse_csr", "cusparselt", "tc_bitmap",
         "csr_gather"]
BENCH_NAME = {"cublas_bf16": "cublas_dense", "tc_block32": "tc_block32", "tc_tile_offsets": "tc_tile_offsets",
              "sparse24": "sparse24", "cusparse_csr_bf16": "cusparse_csr", "cusparselt": "cusparselt",
              "tc_bitmap": "tc_bitmap", "csr_gather": "csr_gather"}
# Paths that compute the same bf16 layer (the "fastest" of a point); the float and fp16/tf32
# baselines and the automatic plans themselves are reported beside it, not in it.
SAME_LAYER = {"cublas_bf16", "tc_dense_mma", "tc_tile_offsets", "tc_bitmap", "csr_gather", "tc_block32", "sparse24",
              "cusparselt", "cusparse_csr_bf16", "cusparse_bsr_bf16"}


TWO_COUNTS = ("tc_bitmap", "csr_gather", "tc_block32")  # paths with a second count (units2)
SMS = 132  # linear/policy/tc_auto.hpp: tc_auto_tuning::sms (H100)


def bitmap_wave(m, n, sms=SMS):
    """linear/policy/tc_auto.hpp: tc_bitmap_wave (panels over two blocks an SM, at n <= 8)."""
    if n > 8:
        return 1.0
    panels, slots = (m + 15) // 16, 2 * sms
    return ((panels + slots - 1) // slots * slots) / panels if panels else 1.0


def units(path, p):
    if path in ("cublas_dense", "cusparselt"):
        return p["m"] * p["k"] * 1e-6
    if path == "sparse24":  # a row's tiles' fixed work: 1000 columns
        return p["m"] * (p["k"] + 1000.0) * 1e-6
    if path == "tc_block32":
        return p["blocks32"] * 1e-3
    if path == "cusparse_csr":
        return p["nnz"] * 1e-6
    if path == "csr_gather":
        return p["nnz"] * 1e-6
    if path == "tc_bitmap":  # linear/policy/tc_auto.hpp: tc_path_units
        return (p["m"] + 15) // 16 * ((p["k"] + 63) // 64 * 4) * bitmap_wave(p["m"], p["n"]) * 1e-3
    per_tile = p["nnz"] / p["tiles64"] if p["tiles64"] else 0.0
    return p["tiles64"] * (1.0 + per_tile / 960.0) * 1e-3


def units2(path, p):
    """linear/policy/tc_auto.hpp: tc_path_units2 (0 for the one-count paths)."""
    if path == "tc_bitmap":
        return p["pairs"] * 1e-6
    if path == "csr_gather":
        return p["k"] * 1e-3
    if path == "tc_block32":  # tc_block32_chain
        rows = (p["m"] + 31) // 32
        return p["blocks32"] / min(rows, 3 * SMS) if rows else 0.0
    return 0.0


def solve(a, b):
    """a x = b for a small square system (Gaussian elimination, partial pivoting); None if singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-300:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def nnls_relative(obs):
    """(launch, rate, rate2) >= 0 minimising the sum of ((fit - t) / t)^2 over obs = [(u, u2, t)]:
    the best of the unconstrained fits on each subset of the three terms whose terms are all >= 0
    (the non-negative least-squares optimum is one of them)."""
    best, best_err = (0.0, 0.0, 0.0), None
    for mask in range(1, 8):
        idx = [i for i in range(3) if mask >> i & 1]
        rows = [[(1.0, u, u2)[i] / t for i in idx] for u, u2, t in obs]
        a = [[sum(r[i] * r[j] for r in rows) for j in range(len(idx))] for i in range(len(idx))]
        b = [sum(r[i] for r in rows) for i in range(len(idx))]
        x = solve(a, b)
        if x is None or any(v < 0 for v in x):
            continue
        c = [0.0, 0.0, 0.0]
        for i, v in zip(idx, x):
            c[i] = v
        err = sum(((c[0] + c[1] * u + c[2] * u2) - t) ** 2 / (t * t) for u, u2, t in obs)
        if best_err is None or err < best_err - 1e-15:
            best, best_err = tuple(c), err
    return best


def load(spec):
    """The linear16 rows of a run, "FILE" or "FILE:path,path" (only those bench paths)."""
    fn, _, only = spec.partition(":")
    keep = set(only.split(",")) if only else None
    rows = []
    for r in family_rows(fn, "linear16"):
        if "time_us" not in r or r.get("error"):
            continue
        if keep is not None and r.get("path") not in keep:
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
        if "nnz" in r:
            e["info"] = r
    dense_all = {(k[0], k[3]): e["all"] for k, e in pts.items() if k[1] == "dense"}
    for key, e in pts.items():
        t = dense_t.get((key[0], key[3]))
        if t is not None:
            e["times"]["cublas_dense"] = t
        for p, v in dense_all.get((key[0], key[3]), {}).items():  # the dense paths run once per shape and N
            if p in ("cublas_bf16", "tc_dense_mma"):
                e["all"].setdefault(p, v)
    return pts


def fit(pts):
    """Per path and anchor N: launch + rate * units by least squares on relative error (weights
    1 / t^2) over the grid's points at that N; where that gives a negative launch or rate, the
    best fit with both non-negative (nnls_relative), as for the paths with a second count."""
    rates = {}
    for path in PATHS:
        rates[path] = []
        for a in ANCHORS:
            at = [e for (s, st, sp, n), e in pts.items()
                  if n == a and path in e["times"] and units(path, e["info"]) > 0]
            if not at:
                rates[path].append(None)
                continue
            if path in TWO_COUNTS:
                rates[path].append(nnls_relative([(units(path, e["info"]), units2(path, e["info"]), e["times"][path])
                                                  for e in at]))
                continue
            obs = [(units(path, e["info"]), e["times"][path]) for e in at]
            sw = swx = swy = swxx = swxy = 0.0
            for x, y in obs:
                w = 1.0 / (y * y)
                sw += w; swx += w * x; swy += w * y; swxx += w * x * x; swxy += w * x * y
            den = sw * swxx - swx * swx
            if len(obs) >= 2 and den > 0:
                b = (sw * swxy - swx * swy) / den
                l = (swy - b * swx) / sw
            else:
                l, b = 0.0, None
            if b is None or l < 0 or b < 0:  # the best fit with launch, rate >= 0
                l, b, _ = nnls_relative([(x, 0.0, y) for x, y in obs])
            rates[path].append((l, b, 0.0))
    return rates


def interp(vals, n):
    x = max(n, 1)
    i = 1
    while i < len(ANCHORS) - 1 and x > ANCHORS[i]:
        i += 1
    if x <= ANCHORS[0]:
        return vals[0]
    x0, x1 = ANCHORS[i - 1], ANCHORS[i]
    return vals[i - 1] + (vals[i] - vals[i - 1]) * (x - x0) / (x1 - x0)


def estimate(rates, path, info, n):
    r = rates[path]
    return (interp([v[0] for v in r], n) + units(path, info) * interp([v[1] for v in r], n) +
            units2(path, info) * interp([v[2] for v in r], n))


def runnable(path, n):
    """linear/policy/tc_auto.hpp: tc_runnable."""
    return not ((path == "cusparse_csr" and n > 1) or (path == "csr_gather" and n > 16))


def check(pts, rates):
    worst = []
    for key, e in sorted(pts.items()):
        cands = [p for p in e["times"] if runnable(p, key[3])]
        if not cands:
            continue
        est = {p: estimate(rates, p, e["info"], key[3]) for p in cands}
        choice = min(est, key=est.get)
        same = {p: v for p, v in e["all"].items() if p in SAME_LAYER}
        fastest_path = min(same, key=same.get)
        fastest = same[fastest_path]
        ratio = e["times"][choice] / fastest
        worst.append((ratio, key, choice, fastest_path))
    worst.sort(reverse=True)
    bad = [w for w in worst if w[0] > 1.05]
    print(f"{len(worst)} points; modelled choice within 5 % of the fastest measured path at {len(worst) - len(bad)}")
    for ratio, key, choice, fp in worst[:15]:
        print(f"  {ratio:.3f}  {key}  chose {choice}, fastest {fp}")


ROW = r"\{\s*\{([^{}]*)\},\s*\{([^{}]*)\}(?:,\s*\{([^{}]*)\})?\s*\}"  # {{launch}, {rate}[, {rate2}]}


def row_values(m):
    """(launch, rate, rate2) per anchor from a ROW match (rate2 0 where the row has none)."""
    launch, rate = ([float(v) for v in m.group(g).split(",")] for g in (1, 2))
    rate2 = [float(v) for v in m.group(3).split(",")] if m.group(3) else [0.0] * len(launch)
    return list(zip(launch, rate, rate2))


def header_table(fn):
    """The rows of tc_auto_tuning_sm90 in the header, by path (the trailing comment)."""
    text = open(fn).read()
    text = text[text.index("tc_auto_tuning_sm90{"):]
    rows = {}
    for m in re.finditer(ROW + r",\s*//\s*(\w+)", text):
        rows[m.group(4)] = row_values(m)
        if len(rows) == len(PATHS):
            break
    return rows


def header_row(fn, name):
    """The rates of the constant NAME in the header (a tc_path_rates)."""
    m = re.search(re.escape(name) + ROW, open(fn).read())
    return row_values(m) if m else None


def same_table(fitted, table, paths=PATHS):
    bad = []
    for path in paths:
        got = table.get(path)
        if got is None or len(got) != len(ANCHORS):
            bad.append(f"{path}: not in the header's table")
            continue
        for a, (fl, fr, fr2), (hl, hr, hr2) in zip(ANCHORS, fitted[path], got):
            for what, f, h in (("launch", fl, hl), ("rate", fr, hr), ("rate2", fr2, hr2)):
                if abs(f - h) > 1e-3 * max(abs(f), 1e-9) + 1e-9:
                    bad.append(f"{path} N={a} {what}: fit {f:.4g}, header {h:.4g}")
    return bad


def self_test():
    """Points made from known launch/rate tables on three shapes; the fit must recover them."""
    truth = {p: [(5.0 + i + j, 0.5 * (j + 1) * (i + 1), 0.25 * (j + 1) if p in TWO_COUNTS else 0.0)
                 for j in range(len(ANCHORS))] for i, p in enumerate(PATHS)}
    rows = []
    for m, k in ((4096, 4096), (8192, 8192), (11008, 4096)):
        for sp, tiles, blocks in ((0.9, 1.0, 1.0), (0.99, 0.9, 0.2)):
            info = {"m": m, "k": k, "nnz": int(m * k * (1 - sp)), "tiles64": int(m * k / 4096 * tiles),
                    "blocks32": int(m * k / 1024 * blocks), "pairs": int(m * k / 2 * (1 - sp * sp))}
            for n in ANCHORS:
                for bench, path in BENCH_NAME.items():
                    l, r, r2 = truth[path][ANCHORS.index(n)]
                    at = dict(info, n=n)
                    rows.append(dict(at, family="linear16", shape=f"{m}x{k}", structure="s", sparsity=sp, path=bench,
                                     time_us=l + units(path, at) * r + units2(path, at) * r2))
    fitted = fit(points(rows))
    bad = same_table(fitted, {p: truth[p] for p in PATHS})
    for line in bad:
        print("self-test:", line)
    print("self-test:", "ok" if not bad else "FAILED")
    return 1 if bad else 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    args = sys.argv[1:]
    skip = set()
    for i, a in enumerate(args):
        if a == "--header":
            skip.add(i + 1)
        if a == "--header-row":
            skip.update({i + 1, i + 2, i + 3})
    runs = [a for i, a in enumerate(args) if not a.startswith("--") and i not in skip]
    rows = [r for spec in runs for r in load(spec)]
    pts = points(rows)
    rates = fit(pts)
    for path in PATHS:
        r = rates[path]
        if any(v is None for v in r):
            print(f"        // {path}: not in these runs")
            continue
        launch = ", ".join("%.4g" % v[0] for v in r)
        rate = ", ".join("%.4g" % v[1] for v in r)
        rate2 = ", {%s}" % ", ".join("%.4g" % v[2] for v in r) if path in TWO_COUNTS else ""
        print(f"        {{{{{launch}}}, {{{rate}}}{rate2}}},  // {path}")
    if "--check" in sys.argv:
        check(pts, rates)
    if "--header-row" in sys.argv:
        i = sys.argv.index("--header-row")
        name, path, fn = sys.argv[i + 1], sys.argv[i + 2], sys.argv[i + 3]
        bad = same_table({path: rates[path]}, {path: header_row(fn, name)}, [path])
        for line in bad:
            print("header:", line)
        print(f"header row {name}:", "the fit of this run" if not bad else "DIFFERS from the fit of this run")
        return 1 if bad else 0
    if "--header" in sys.argv:
        bad = same_table(rates, header_table(sys.argv[sys.argv.index("--header") + 1]))
        for line in bad:
            print("header:", line)
        print("header table:", "the fit of this run" if not bad else "DIFFERS from the fit of this run")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

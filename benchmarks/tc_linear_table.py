#!/usr/bin/env python3
"""Prints the JSON lines of bench_linear_tc (family linear_tc) as one table: per shape and N,
each kernel's time, speedup over cublas_bf16 and % of HBM / tensor-core peak.
Usage: tc_linear_table.py linear_tc.jsonl [--markdown]"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r.get("family") == "linear_tc"]
md = "--markdown" in sys.argv
if rows:
    r0 = rows[0]
    print(f"{r0['gpu']}, CUDA {r0['cuda_runtime']}, {r0['date']}")
hdr = ["shape", "N", "kernel", "sparsity", "us", "x cuBLAS", "HBM %", "TC %"]
if md:
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
else:
    print("%-11s %5s %-16s %5s %9s %8s %6s %6s" % tuple(hdr))
for r in rows:
    sp = "" if r["kernel"] in ("cublas_bf16", "tc_dense_mma") else "%d%%" % round(100 * r["sparsity"])
    vals = [r["shape"], "%d" % r["n"], r["kernel"], sp, "%.1f" % r["time_us"],
            "%.2f" % r.get("speedup_vs_cublas", 0), "%.0f" % r["hbm_pct"], "%.0f" % r["tc_pct"]]
    if md:
        print("| " + " | ".join(vals) + " |")
    else:
        print("%-11s %5s %-16s %5s %9s %8s %6s %6s" % tuple(vals))

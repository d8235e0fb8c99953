#!/usr/bin/env python3
"""Turns graph_challenge bench JSON lines into a markdown table (one row per line).
usage: graph_challenge_table.py results.jsonl > table.md"""
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
print("| N | L | inputs | policy | seconds | edges/s | categories | batches | GPU | CUDA | date |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['neurons']} | {r['layers']} | {r['inputs']} | {r['policy']} | {r['seconds']:.4g} | "
          f"{r['edges_per_second']:.3e} | {r['categories']} | {r['batches']} | {r['gpu']} | {r['cuda']} | {r['date']} |")

#!/usr/bin/env python3
"""Derive the row permutations of the official 1024-neuron Sparse DNN Graph Challenge network.

The official network (graphchallenge.org, neuron1024/n1024-l{1..120}.tsv.gz) is a RadiX-Net:
N = 1024, M = N / 16 = 64, K = log2(M) = 6. Layer t = 1..K of block 0 has W(i, j) = 1/16 exactly
when (i mod M - j mod M) mod M is 0 or 2^(t-1) (0-based i, j). The 120 layers are 20 blocks of K;
block b >= 1 applies one permutation to the rows (input neurons) of all its K layers.

Because a base row depends on i only through p = i mod M (16 base rows are identical), the layers
determine, for each row i of block b, only the residue r_b(i) = perm_b(i) mod M, not perm_b itself.
This script recovers r_b for blocks 1..19, checks that each residue occurs exactly N / M = 16 times,
builds the canonical permutation (row i -> base row r_b(i) + M * (number of earlier rows with the
same residue)), regenerates all 120 layers from it and checks generated == official, entry by entry
and including the value text "6.250000e-02" (each layer's set of lines; the official files list the
entries column by column, sdnn's writer row by row, so the files are equal as sets of lines, not
byte for byte). It then writes
include/sdnn/challenge/official_1024_permutations.hpp: one 1024-character string per block, character
k = residue of row k in the alphabet below (6 bits per row).

Usage: scripts/derive_official_permutations.py DATA_DIR [OUT_HEADER]
  DATA_DIR: a folder holding the official n1024-l1.tsv.gz .. n1024-l120.tsv.gz (graphchallenge.org,
            "neuron1024" DNN; not shipped with sdnn, 11 MB; tests/data/README.md says what is shipped).
  OUT_HEADER defaults to include/sdnn/challenge/official_1024_permutations.hpp of this repository
            (relative to this script).
Python 3 standard library only.
"""
import gzip
import os
import sys

N, M, K, LAYERS = 1024, 64, 6, 120
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"  # residue -> char
VALUE = "6.250000e-02"


def read_layer(path):
    """Returns rows[i] = sorted list of 0-based columns; checks the value text."""
    rows = [[] for _ in range(N)]
    with gzip.open(path, "rt") as f:
        for ln, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[2] != VALUE:
                sys.exit(f"{path}:{ln}: unexpected line {line!r}")
            i, j = int(parts[0]) - 1, int(parts[1]) - 1
            if not (0 <= i < N and 0 <= j < N):
                sys.exit(f"{path}:{ln}: index out of range")
            rows[i].append(j)
    return [sorted(r) for r in rows]


def base_row(p, t):
    """Sorted 0-based columns of a row with residue p in layer t (1-based) of block 0."""
    s = 1 << (t - 1)
    qs = sorted({p, (p - s) % M})
    return sorted(q + M * k for k in range(N // M) for q in qs)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or len(sys.argv) > 3:
        sys.exit(__doc__[__doc__.index("Usage:"):].rstrip())
    data = sys.argv[1]
    missing = [l for l in range(1, LAYERS + 1) if not os.path.isfile(os.path.join(data, f"n1024-l{l}.tsv.gz"))]
    if missing:
        sys.exit(f"{data}: {len(missing)} of the {LAYERS} official layer files are missing "
                 f"(first: n1024-l{missing[0]}.tsv.gz)")
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "include", "sdnn", "data",
                                                             "official_1024_permutations.hpp")
    layers = [read_layer(os.path.join(data, f"n1024-l{l}.tsv.gz")) for l in range(1, LAYERS + 1)]

    # Candidate residues per (block, row): those p whose base row equals the official row in
    # every layer of the block. Layer t = 1 alone already pins p down (pairs {p, p - 1}).
    residues = []
    for b in range(LAYERS // K):
        res = []
        for i in range(N):
            cands = [p for p in range(M)
                     if all(layers[b * K + t - 1][i] == base_row(p, t) for t in range(1, K + 1))]
            if len(cands) != 1:
                sys.exit(f"block {b} row {i}: {len(cands)} candidate residues {cands}")
            res.append(cands[0])
        counts = [res.count(p) for p in range(M)]
        if any(c != N // M for c in counts):
            sys.exit(f"block {b}: residues do not occur {N // M} times each: {counts}")
        if b == 0 and res != [i % M for i in range(N)]:
            sys.exit("block 0 is not the identity")
        residues.append(res)

    # Canonical permutations, then regenerate all 120 layers and compare.
    for b, res in enumerate(residues):
        seen = [0] * M
        perm = []
        for r in res:
            perm.append(r + M * seen[r])
            seen[r] += 1
        assert sorted(perm) == list(range(N))
        for t in range(1, K + 1):
            gen = [base_row(perm[i] % M, t) for i in range(N)]
            if gen != layers[b * K + t - 1]:
                sys.exit(f"layer {b * K + t}: generated != official")
    print(f"verified: generated == official for all {LAYERS} layers (values {VALUE})")

    lines = [
        "// sdnn/challenge/official_1024_permutations.hpp - GENERATED by scripts/derive_official_permutations.py",
        "// from the official Graph Challenge network neuron1024/n1024-l{1..120}.tsv.gz; do not edit.",
        "//",
        "// The 1024-neuron network has 20 blocks of K = 6 layers (M = 64). Block b >= 1 permutes the",
        "// rows of block 0. A base row depends on its index i only through i mod 64, so the official",
        "// layers fix, for each row i of block b, only its residue r = perm_b(i) mod 64. String b - 1",
        "// holds those residues for block b: character i encodes r for row i (0-based) in the alphabet",
        "// official_1024_alphabet (6 bits per row). The generator (sdnn/challenge/radixnet.hpp) expands",
        "// them into the canonical permutation perm_b(i) = r + 64 * (rows before i with residue r).",
        "// The script checks every row of all 120 generated layers against the official files.",
        "#pragma once",
        "",
        "namespace sdnn::data::detail {",
        "",
        f"inline constexpr char official_1024_alphabet[] = \"{ALPHABET}\";",
        "inline constexpr int official_1024_blocks = 20;  // 120 layers / K",
        "",
        "// [19][1024 + 1]: residues of blocks 1..19 (block 0 is the identity).",
        "inline constexpr char const* official_1024_residues[19] = {",
    ]
    for b in range(1, LAYERS // K):
        s = "".join(ALPHABET[r] for r in residues[b])
        chunks = [s[k:k + 96] for k in range(0, N, 96)]
        lines.append(f"    // block {b}")
        for k, c in enumerate(chunks):
            lines.append(f"    \"{c}\"" + ("," if k == len(chunks) - 1 else ""))
    lines += ["};", "", "}  // namespace sdnn::data::detail", ""]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {os.path.normpath(out)}")


if __name__ == "__main__":
    main()

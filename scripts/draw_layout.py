#!/usr/bin/env python3
"""Draw the folder graph that scripts/check_layering.py enforces: docs/architecture.png.

Reads MODULE_EDGES from check_layering.py (the one definition), counts the headers of each
folder and writes docs/architecture.dot, then runs Graphviz (`dot`, apt-get install graphviz)
to make the PNG. Edges implied by others (A -> B -> C makes A -> C implied) are left out.
Usage: scripts/draw_layout.py [OUT_DIR]   (default: docs/ next to this script's parent)
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_layering import MODULE_EDGES  # noqa: E402

GROUPS = [("composition and ranks", ["pipeline", "dist"]),
          ("capabilities", ["linear", "conv", "train", "challenge"]),
          ("foundation", ["core", "formats", "io", "layers"])]


def reachable(src, skip):
    seen, todo = set(), [d for d in MODULE_EDGES[src] if (src, d) != skip]
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(MODULE_EDGES[d])
    return seen


def main(argv):
    out = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(HERE, "..", "docs"))
    inc = os.path.join(HERE, "..", "include", "sdnn")
    count = {}
    for m in MODULE_EDGES:
        n = 0
        for _, _, files in os.walk(os.path.join(inc, m)):
            n += sum(f.endswith((".hpp", ".cuh")) for f in files)
        count[m] = n
    lines = ["digraph sdnn {", '  rankdir=TB; newrank=true; node [shape=box, style="rounded,filled", fontname="Helvetica"];',
             '  edge [color="#333333"]; label="include/sdnn: an arrow A -> B means headers in A may include B '
             '(implied edges omitted)"; labelloc=t; fontname="Helvetica";']
    colors = {"foundation": "#dde8f5", "capabilities": "#fbe6c8", "composition and ranks": "#dcefd9"}
    for i, (name, mods) in enumerate(GROUPS):
        lines.append('  subgraph cluster_%d { label="%s"; style=dashed; color="#999999";' % (i, name))
        for m in mods:
            lines.append('    %s [label="%s/\\n%d headers", fillcolor="%s"];' % (m, m, count[m], colors[name]))
        lines.append("  }")
    for src in sorted(MODULE_EDGES):
        for dst in sorted(MODULE_EDGES[src]):
            if dst not in reachable(src, (src, dst)):
                lines.append("  %s -> %s;" % (src, dst))
    lines.append("}")
    dot = os.path.join(out, "architecture.dot")
    with open(dot, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", dot, "-o", os.path.join(out, "architecture.png")], check=True)
    print("wrote %s and architecture.png" % dot)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

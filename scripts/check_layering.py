#!/usr/bin/env python3
"""Check the include layering of include/sdnn/ (CI runs this as the CTest test host.layering).

The layers, lowest first (a header may include its own folder or any folder of a lower layer):

  layer  folder      what it holds
  -----  ----------  -----------------------------------------------------------------------
  0      core/       configuration, the error family, executors, buffers and the epilogue: what
                     every other header needs and that needs nothing of sdnn.
  1      formats/    the sparse and dense containers and weight formats (conv weights, csc tiles),
                     their views, validation, statistics and the host conversions between them.
  1      io/         readers and writers of the file formats (Graph Challenge TSV, MatrixMarket,
                     MNIST IDX); beside formats, may include core, formats and data.
  1      data/       host generators of networks and inputs (RadiX-Net, Challenge inputs); beside
                     formats, may include core, formats and io.
  2      kernels/    __global__ functions and their launchers only, one family per file.
  2      reference/  plain host implementations: the oracle for tests and the host backend.
  3      vendor/     thin cuSPARSE / cuBLAS / cuDNN wrappers behind sdnn's views.
  3      policies/   tag types that name an algorithm, and the plan-time choice between them.
  4      ops/        public entry points and host plans: check arguments, dispatch on (executor,
                     policy) to kernels, vendor or reference (device conversions included).
  5      layers/     network layers (sparse linear, sparse convolution) built on ops.
  6      pipeline/   composition of layers: plan once, run many times on a stream.
  7      dist/       running over several ranks: partition of the inputs, merge of the ranks'
                     categories, agreement signature, timing; mpi.hpp adds the MPI collectives.
  -      sdnn.hpp    the umbrella header (include/sdnn/*.hpp) may include everything.

Folders of one layer do not include each other (kernels/ never includes reference/, vendor/
never includes policies/), except that formats/, io/ and data/ are allowed the edges named above.

Rules checked (each violation is one line `file:line: #include "..." -- rule`):
  * an include of a higher layer, of a sibling not allowed above, or of an unknown folder;
  * an include cycle between headers (reported once per cycle, at the edge that closes it);
  * a file under kernels/ without a __global__ function (host plans and helpers live in ops/);
  * a __global__ function outside kernels/.

Usage: check_layering.py [INCLUDE_DIR]   (default: include/ next to this script's parent)
Exit status 0 when the tree is clean, 1 otherwise. Python 3 standard library only.
"""

import os
import re
import sys

# folder -> (layer, extra folders of the same layer it may include)
LAYERS = {
    "core": (0, set()),
    "formats": (1, set()),
    "io": (1, {"formats", "data"}),
    "data": (1, {"formats", "io"}),
    "kernels": (2, set()),
    "reference": (2, set()),
    "vendor": (3, set()),
    "policies": (3, set()),
    "ops": (4, set()),
    "layers": (5, set()),
    "pipeline": (6, set()),
    "dist": (7, set()),
}
UMBRELLA = ""  # headers directly in include/sdnn/
HEADER_EXT = (".hpp", ".cuh", ".h", ".inl")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](sdnn/[^>"]+)[>"]')
GLOBAL_RE = re.compile(r"\b__global__\b")


def strip_comments(text):
    """Blank out // and /* */ comments and string literals, keeping line breaks (line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * max(0, min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def folder_of(rel):
    """'sdnn/ops/spmm.hpp' -> 'ops'; 'sdnn/sdnn.hpp' -> ''; anything else -> None."""
    parts = rel.split("/")
    if len(parts) < 2 or parts[0] != "sdnn":
        return None
    return UMBRELLA if len(parts) == 2 else parts[1]


def allowed(src, dst):
    """Whether a header in folder src may include one in folder dst (both known)."""
    if src == UMBRELLA or src == dst:
        return True
    if dst == UMBRELLA:
        return False
    (ls, extra), (ld, _) = LAYERS[src], LAYERS[dst]
    return ld < ls or dst in extra


def describe(folder):
    return "sdnn.hpp" if folder == UMBRELLA else "%s/ (layer %d)" % (folder, LAYERS[folder][0])


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    inc = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(here, "..", "include"))
    root = os.path.join(inc, "sdnn")
    if not os.path.isdir(root):
        print("check_layering: no sdnn/ under %s" % inc)
        return 2

    headers = {}  # 'sdnn/x/y.hpp' -> absolute path
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(HEADER_EXT):
                p = os.path.join(dirpath, f)
                headers[os.path.relpath(p, inc).replace(os.sep, "/")] = p

    violations = []
    graph = {}  # header -> [(included header, line)]
    for rel in sorted(headers):
        shown = "include/" + rel
        src = folder_of(rel)
        with open(headers[rel], encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
        code = strip_comments(raw)
        if src != UMBRELLA and src not in LAYERS:
            violations.append("%s:1: header in unknown folder %s/ -- every header lives in a "
                              "folder of the layer table" % (shown, src))
        edges = graph.setdefault(rel, [])
        for lineno, line in enumerate(raw.splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = m.group(1)
            dst = folder_of(target)
            if dst is None or (dst != UMBRELLA and dst not in LAYERS):
                violations.append('%s:%d: #include "%s" -- unknown folder %s/ (not in the layer '
                                  'table)' % (shown, lineno, target, target.split("/")[1]))
                continue
            if target not in headers:
                violations.append('%s:%d: #include "%s" -- no such header' % (shown, lineno, target))
                continue
            edges.append((target, lineno))
            if src in LAYERS and not allowed(src, dst):
                violations.append('%s:%d: #include "%s" -- %s may not include %s (includes only '
                                  'go down)' % (shown, lineno, target, describe(src), describe(dst)))
        has_global = GLOBAL_RE.search(code) is not None
        if src == "kernels" and not has_global:
            violations.append("%s:1: no __global__ function -- kernels/ holds __global__ functions "
                              "and their launchers only; host plans and helpers live in ops/"
                              % shown)
        if src != "kernels" and has_global:
            lineno = code[:GLOBAL_RE.search(code).start()].count("\n") + 1
            violations.append("%s:%d: __global__ function outside kernels/ -- device code belongs "
                              "in kernels/ (with its launcher)" % (shown, lineno))

    # Cycles: depth-first search; a back edge closes a cycle.
    state = {}  # 0 visiting, 1 done
    stack = []
    seen_cycles = set()

    def visit(node):
        state[node] = 0
        stack.append(node)
        for target, lineno in graph.get(node, ()):
            if state.get(target) == 0:
                cycle = stack[stack.index(target):] + [target]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    violations.append('include/%s:%d: #include "%s" -- include cycle: %s'
                                      % (node, lineno, target, " -> ".join(cycle)))
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 1

    sys.setrecursionlimit(max(1000, 4 * len(graph) + 100))
    for node in sorted(graph):
        if node not in state:
            visit(node)

    for v in violations:
        print(v)
    if violations:
        print("check_layering: %d violation(s) in %d headers" % (len(violations), len(headers)))
        return 1
    print("check_layering: %d headers, layering clean" % len(headers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

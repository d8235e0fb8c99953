#!/usr/bin/env python3
"""Check the include graph of include/sdnn/ (CI runs this as the CTest test host.layering).

The tree is capability first, layer second (docs/architecture.md draws it):

  foundation   core/ formats/ io/ layers/       generic: name nothing of one application
  capabilities linear/ conv/ train/ challenge/  each with its layers inside (arch/, kernel/,
                                                reference/, policy/, vendor/, op/) and, at its root, its
                                                vocabulary (shapes, weight formats) and layers
  on top       pipeline/ dist/
  umbrella     sdnn.hpp

Rules (each violation is one line `file:line: #include "..." -- rule`):
  * a header in folder A includes one in folder B only where MODULE_EDGES[A] names B;
  * inside a folder, the layer sub-folders include only downwards (SUBLAYER_RANK; the root of a
    folder is its vocabulary and public entry, which any sub-folder of it may use);
  * no include cycle between headers;
  * __global__ functions live in a kernel/ folder, and every file of a kernel/ folder has one
    (arch/ holds the __device__ wrappers of instructions, e.g. mma, that kernels share);
  * every header is reachable from the umbrella sdnn.hpp, every .hpp outside its __CUDACC__ block.

Usage: check_layering.py [INCLUDE_DIR]   (default: include/ next to this script's parent)
       check_layering.py --self-test     (plants wrong-way includes in a copy; expects failures)
Exit status 0 when the tree is clean, 1 otherwise. Python 3 standard library only.
"""

import os
import re
import shutil
import sys
import tempfile

# folder -> the other folders its headers may include (its own folder is always allowed).
MODULE_EDGES = {
    "core": set(),
    "formats": {"core"},
    "io": {"core", "formats"},
    "layers": {"core", "formats"},  # the layer interface only: below every capability
    "linear": {"core", "formats", "layers"},
    "conv": {"core", "formats", "layers", "linear"},
    "train": {"core", "formats", "linear", "conv"},
    "pipeline": {"core", "formats", "layers", "linear"},
    "challenge": {"core", "formats", "io", "linear", "pipeline"},
    "dist": {"core", "formats"},
}
# Layer sub-folders inside a folder, lowest first: a header may include its own sub-folder, a
# lower one, or the folder's root ("") files; the root may include every sub-folder.
SUBLAYER_RANK = {"arch": 0, "kernel": 1, "reference": 1, "policy": 2, "vendor": 3, "op": 4}
GENERIC = ("core", "formats", "io", "layers", "pipeline", "dist")
UMBRELLA = ""  # headers directly in include/sdnn/
HEADER_EXT = (".hpp", ".cuh", ".h", ".inl")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](sdnn/[^>"]+)[>"]')
GLOBAL_RE = re.compile(r"\b__global__\b")
CHALLENGE_RE = re.compile(r"challenge", re.IGNORECASE)


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


def place(rel):
    """'sdnn/linear/op/spmm.hpp' -> ('linear', 'op'); 'sdnn/core/plan.hpp' -> ('core', '');
    'sdnn/sdnn.hpp' -> ('', ''); anything else -> None."""
    parts = rel.split("/")
    if len(parts) < 2 or parts[0] != "sdnn":
        return None
    if len(parts) == 2:
        return (UMBRELLA, "")
    return (parts[1], parts[2] if len(parts) > 3 else "")


def why_not(src, dst):
    """None when a header at place src may include one at place dst, else the rule it breaks."""
    (sm, ss), (dm, ds) = src, dst
    if sm == UMBRELLA:
        return None
    if dm == UMBRELLA:
        return "only sdnn.hpp is the umbrella; no header includes it"
    if sm != dm:
        if dm in MODULE_EDGES[sm]:
            return None
        return "%s/ may not include %s/ (allowed: %s)" % (
            sm, dm, ", ".join(sorted(MODULE_EDGES[sm])) or "nothing")
    if ss == ds or ds == "" or ss == "":
        return None
    if ss not in SUBLAYER_RANK or ds not in SUBLAYER_RANK:
        return None  # unknown sub-folders are reported separately
    if SUBLAYER_RANK[ds] < SUBLAYER_RANK[ss]:
        return None
    return "%s/%s/ may not include %s/%s/ (inside a folder, layers include only downwards: %s)" % (
        sm, ss, dm, ds, " < ".join(sorted(SUBLAYER_RANK, key=lambda k: (SUBLAYER_RANK[k], k))))


def check(inc):
    root = os.path.join(inc, "sdnn")
    if not os.path.isdir(root):
        return ["check_layering: no sdnn/ under %s" % inc], 0

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
        src = place(rel)
        with open(headers[rel], encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
        code = strip_comments(raw)
        if src[0] != UMBRELLA and src[0] not in MODULE_EDGES:
            violations.append("%s:1: header in unknown folder %s/ -- every folder is declared in "
                              "MODULE_EDGES" % (shown, src[0]))
            continue
        if src[1] and src[1] not in SUBLAYER_RANK:
            violations.append("%s:1: unknown layer sub-folder %s/ -- the sub-folders are %s"
                              % (shown, src[1], ", ".join(sorted(SUBLAYER_RANK))))
        if src[0] in GENERIC and CHALLENGE_RE.search(os.path.basename(rel)):
            violations.append("%s:1: a Graph Challenge file in a generic folder -- it belongs in "
                              "challenge/" % shown)
        edges = graph.setdefault(rel, [])
        for lineno, line in enumerate(raw.splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = m.group(1)
            dst = place(target)
            if dst is None or (dst[0] != UMBRELLA and dst[0] not in MODULE_EDGES):
                violations.append('%s:%d: #include "%s" -- unknown folder' % (shown, lineno, target))
                continue
            if target not in headers:
                violations.append('%s:%d: #include "%s" -- no such header' % (shown, lineno, target))
                continue
            edges.append((target, lineno))
            rule = why_not(src, dst)
            if rule:
                violations.append('%s:%d: #include "%s" -- %s' % (shown, lineno, target, rule))
        has_global = GLOBAL_RE.search(code) is not None
        if src[1] == "kernel" and not has_global:
            violations.append("%s:1: no __global__ function -- a kernel/ folder holds __global__ "
                              "functions and their launchers only; host plans live in op/" % shown)
        if src[1] != "kernel" and has_global:
            lineno = code[:GLOBAL_RE.search(code).start()].count("\n") + 1
            violations.append("%s:%d: __global__ function outside a kernel/ folder -- device "
                              "kernels live in <folder>/kernel/ with their launchers" % (shown, lineno))

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
    violations += unreachable(headers, graph)
    return violations, len(headers)


def unreachable(headers, graph):
    """Headers the umbrella does not reach: every one must be reachable from sdnn/sdnn.hpp, and
    every .hpp from its includes outside `#if defined(__CUDACC__)` (a g++ user sees those)."""
    umbrella = "sdnn/sdnn.hpp"
    if umbrella not in headers:
        return ["include/%s:1: no umbrella header" % umbrella]
    host_roots, all_roots, depth_cuda, depth = [], [], None, 0
    with open(headers[umbrella], encoding="utf-8") as fh:
        for line in fh:
            t = line.strip()
            if t.startswith("#if"):
                depth += 1
                if "__CUDACC__" in t and depth_cuda is None:
                    depth_cuda = depth
            elif t.startswith("#endif"):
                if depth_cuda == depth:
                    depth_cuda = None
                depth -= 1
            m = INCLUDE_RE.match(line)
            if m:
                all_roots.append(m.group(1))
                if depth_cuda is None:
                    host_roots.append(m.group(1))

    def reach(roots):
        seen, todo = set(), list(roots)
        while todo:
            h = todo.pop()
            if h in seen:
                continue
            seen.add(h)
            todo.extend(t for t, _ in graph.get(h, ()))
        return seen

    everything, host = reach(all_roots), reach(host_roots)
    out = []
    for h in sorted(headers):
        if h == umbrella:
            continue
        if h not in everything:
            out.append("include/%s:1: not reachable from sdnn/sdnn.hpp -- include it there" % h)
        elif h.endswith(".hpp") and h not in host and h != "sdnn/dist/mpi.hpp":
            out.append("include/%s:1: reachable from sdnn/sdnn.hpp only under __CUDACC__ -- a .hpp "
                       "must be seen by a plain C++ compiler" % h)
    return out


# Wrong-way includes the checker must refuse, each planted alone in a copy of the tree:
# (file to create, its text, a fragment the report must contain).
PLANTS = [
    ("sdnn/core/planted.hpp", '#include "sdnn/formats/csr.hpp"\n', "core/ may not include formats/"),
    ("sdnn/formats/planted.hpp", '#include "sdnn/linear/op/spmm.hpp"\n', "formats/ may not include linear/"),
    ("sdnn/linear/planted.hpp", '#include "sdnn/challenge/engine.hpp"\n', "linear/ may not include challenge/"),
    ("sdnn/dist/planted.hpp", '#include "sdnn/pipeline/sequential.hpp"\n', "dist/ may not include pipeline/"),
    ("sdnn/linear/kernel/planted.cuh", '#include "sdnn/linear/op/spmm.hpp"\n__global__ void k() {}\n',
     "linear/kernel/ may not include linear/op/"),
    ("sdnn/linear/op/planted.hpp", "template <class T> __global__ void k(T) {}\n",
     "__global__ function outside a kernel/ folder"),
    ("sdnn/io/challenge_planted.hpp", "\n", "a Graph Challenge file in a generic folder"),
    ("sdnn/core/planted_a.hpp", '#include "sdnn/core/planted_b.hpp"\n', "include cycle"),
    ("sdnn/formats/unlisted.hpp", "\n", "not reachable from sdnn/sdnn.hpp"),
]


def self_test(inc):
    failures = 0
    for path, text, expect in PLANTS:
        tmp = tempfile.mkdtemp(prefix="sdnn_layering_")
        try:
            shutil.copytree(os.path.join(inc, "sdnn"), os.path.join(tmp, "sdnn"))
            with open(os.path.join(tmp, path), "w") as fh:
                fh.write(text)
            if path.endswith("planted_a.hpp"):
                with open(os.path.join(tmp, "sdnn/core/planted_b.hpp"), "w") as fh:
                    fh.write('#include "sdnn/core/planted_a.hpp"\n')
                with open(os.path.join(tmp, "sdnn/sdnn.hpp"), "a") as fh:
                    fh.write('#include "sdnn/core/planted_b.hpp"\n')
            if "unlisted" not in path:
                with open(os.path.join(tmp, "sdnn/sdnn.hpp"), "a") as fh:
                    fh.write('#include "%s"\n' % path)
            violations, _ = check(tmp)
            hit = [v for v in violations if expect in v]
            print("%s %s: %s" % ("ok  " if hit else "FAIL", path, hit[0] if hit else
                                 "not refused (%d other violations)" % len(violations)))
            failures += 0 if hit and len(violations) == len(hit) else 1
        finally:
            shutil.rmtree(tmp)
    print("check_layering self-test: %d of %d planted includes refused" % (len(PLANTS) - failures, len(PLANTS)))
    return 1 if failures else 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    args = [a for a in argv[1:] if a != "--self-test"]
    inc = os.path.abspath(args[0] if args else os.path.join(here, "..", "include"))
    if "--self-test" in argv:
        violations, _ = check(inc)
        if violations:
            print("check_layering: the tree itself is not clean; fix it before the self-test")
            return 1
        return self_test(inc)
    violations, n = check(inc)
    for v in violations:
        print(v)
    if violations:
        print("check_layering: %d violation(s) in %d headers" % (len(violations), n))
        return 1
    print("check_layering: %d headers, layering clean" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

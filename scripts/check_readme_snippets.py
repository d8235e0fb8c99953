#!/usr/bin/env python3
"""Check that every C++ code block of README.md is code that the build compiles (CTest
host.readme_snippets).

Each ```cpp (or ```cuda) block of README.md must follow a marker line naming a region of a
source file, blank lines allowed between:

  <!-- snippet: examples/readme/quickstart_host.cpp#quickstart_host -->
  ```cpp
  ...
  ```

and equal that region: the lines strictly between `// [readme:NAME]` and `// [/readme:NAME]` in
the file, with their common indentation removed (trailing spaces ignored). The files are built
by examples/readme/CMakeLists.txt (the .cu ones in CUDA builds) and the host ones run as tests.
Every region of a file under examples/readme/ must be shown in README.md, and every marker must
name an existing file and region and be followed by a code block.

Usage: check_readme_snippets.py [--update] [ROOT]   (ROOT: the repository, default: this script's
                                                    parent's parent)
       check_readme_snippets.py --self-test         (plants each defect in a scratch copy)
--update rewrites README.md's blocks from the regions instead of checking them.
Exit status 0 when README.md and the sources agree, 1 otherwise. Python 3 standard library only.
"""

import difflib
import os
import re
import sys
import tempfile

MARKER_RE = re.compile(r"^<!--\s*snippet:\s*(\S+?)#([\w.-]+)\s*-->\s*$")
FENCE_OPEN_RE = re.compile(r"^```\s*(\S*)\s*$")
CODE_LANGS = ("cpp", "c++", "cuda", "cu")
REGION_RE = re.compile(r"^\s*//\s*\[(/?)readme:([\w.-]+)\]\s*$")
SNIPPET_DIR = os.path.join("examples", "readme")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def dedent(lines):
    lines = [ln.rstrip() for ln in lines]
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return [ln[cut:] for ln in lines]


def regions(path):
    """{name: (first line index, end line index)} of a source file; errors as a list."""
    found, open_at, errors = {}, {}, []
    for i, ln in enumerate(read_lines(path)):
        m = REGION_RE.match(ln)
        if not m:
            continue
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if name in open_at or name in found:
                errors.append(f"{path}:{i + 1}: region '{name}' opened twice")
            open_at[name] = i
        elif name not in open_at:
            errors.append(f"{path}:{i + 1}: region '{name}' closed but never opened")
        else:
            found[name] = (open_at.pop(name) + 1, i)
    for name, i in open_at.items():
        errors.append(f"{path}:{i + 1}: region '{name}' is never closed")
    return found, errors


def region_text(root, rel, name):
    """The dedented lines of region `name` of file `rel`, or an error string."""
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        return None, f"no file {rel}"
    found, errors = regions(path)
    if errors:
        return None, "; ".join(errors)
    if name not in found:
        return None, f"{rel} has no region '{name}' (// [readme:{name}] ... // [/readme:{name}])"
    b, e = found[name]
    return dedent(read_lines(path)[b:e]), None


def readme_blocks(lines):
    """[(marker line index or None, (file, name) or None, open fence index, close fence index)], errors."""
    blocks, errors, pending = [], [], None
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = MARKER_RE.match(ln.strip())
        if m:
            if pending is not None:
                errors.append(f"README.md:{pending[0] + 1}: snippet marker not followed by a code block")
            pending = (i, (m.group(1), m.group(2)))
            i += 1
            continue
        f = FENCE_OPEN_RE.match(ln)
        if f:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                errors.append(f"README.md:{i + 1}: code block never closed")
                return blocks, errors
            lang = f.group(1).lower()
            if lang in CODE_LANGS:
                blocks.append((pending[0] if pending else None, pending[1] if pending else None, i, j))
            elif pending is not None:
                errors.append(f"README.md:{pending[0] + 1}: snippet marker before a ```{lang} block (only "
                              f"{', '.join(CODE_LANGS)} blocks are checked)")
            pending = None
            i = j + 1
            continue
        if ln.strip() and pending is not None:
            errors.append(f"README.md:{pending[0] + 1}: snippet marker not followed by a code block")
            pending = None
        i += 1
    if pending is not None:
        errors.append(f"README.md:{pending[0] + 1}: snippet marker not followed by a code block")
    return blocks, errors


def check(root, update=False, out=sys.stdout):
    readme = os.path.join(root, "README.md")
    lines = read_lines(readme)
    blocks, errors = readme_blocks(lines)
    shown = set()
    replacements = []
    for marker, where, b, e in blocks:
        if where is None:
            errors.append(f"README.md:{b + 1}: a ```cpp block without a <!-- snippet: FILE#NAME --> line before it "
                          f"(put the code in {SNIPPET_DIR}/ between // [readme:NAME] and // [/readme:NAME])")
            continue
        rel, name = where
        shown.add((os.path.normpath(rel), name))
        want, err = region_text(root, rel, name)
        if err:
            errors.append(f"README.md:{marker + 1}: {err}")
            continue
        have = [ln.rstrip() for ln in lines[b + 1:e]]
        if have != want:
            if update:
                replacements.append((b + 1, e, want))
                continue
            diff = "\n".join(difflib.unified_diff(have, want, "README.md", f"{rel}#{name}", lineterm="", n=1))
            errors.append(f"README.md:{b + 2}: the block differs from {rel}#{name} (run "
                          f"scripts/check_readme_snippets.py --update to copy the source into README.md):\n{diff}")
    # Every region under examples/readme/ is shown.
    snippet_dir = os.path.join(root, SNIPPET_DIR)
    if os.path.isdir(snippet_dir):
        for fn in sorted(os.listdir(snippet_dir)):
            if not fn.endswith((".cpp", ".cu", ".hpp", ".cuh")):
                continue
            rel = os.path.join(SNIPPET_DIR, fn)
            found, errs = regions(os.path.join(root, rel))
            errors.extend(errs)
            for name in sorted(found):
                if (os.path.normpath(rel), name) not in shown:
                    errors.append(f"{rel}:{found[name][0]}: region '{name}' is not shown in README.md (a "
                                  f"<!-- snippet: {rel}#{name} --> line and a ```cpp block)")
    if update and replacements:
        for b, e, want in sorted(replacements, reverse=True):
            lines[b:e] = want
        with open(readme, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"README.md: {len(replacements)} block(s) updated", file=out)
    for err in errors:
        print(err, file=out)
    if not errors:
        print(f"README.md: {len(blocks)} C++ blocks, each equal to its source region", file=out)
    return 0 if not errors else 1


def self_test():
    """Each defect, planted in a scratch tree, must fail the check; the clean tree must pass."""
    src = "// file\nint main() {\n  // [readme:a]\n  int x = 1;\n  return x;\n  // [/readme:a]\n}\n"
    good = "# t\n\n<!-- snippet: examples/readme/a.cpp#a -->\n```cpp\nint x = 1;\nreturn x;\n```\n\n```sh\nls\n```\n"
    cases = {
        "clean": (good, src, 0),
        "block differs": (good.replace("int x = 1;", "int x = 2;"), src, 1),
        "block without a marker": (good + "\n```cpp\nint y;\n```\n", src, 1),
        "marker naming no region": (good.replace("#a -->", "#b -->"), src, 1),
        "marker naming no file": (good.replace("a.cpp#a", "z.cpp#a"), src, 1),
        "region not shown": (good, src + "// [readme:c]\nint z;\n// [/readme:c]\n", 1),
        "region never closed": (good, src.replace("  // [/readme:a]\n", ""), 1),
        "marker without a block": ("<!-- snippet: examples/readme/a.cpp#a -->\ntext\n" + good, src, 1),
    }
    failed = 0
    for what, (readme, source, expect) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, SNIPPET_DIR))
            with open(os.path.join(tmp, "README.md"), "w") as f:
                f.write(readme)
            with open(os.path.join(tmp, SNIPPET_DIR, "a.cpp"), "w") as f:
                f.write(source)
            sink = open(os.devnull, "w")
            rc = check(tmp, out=sink)
            if what == "block differs":  # --update repairs it
                rc_update = check(tmp, update=True, out=sink) or check(tmp, out=sink)
                if rc_update != 0:
                    print(f"self-test: --update did not repair '{what}'")
                    failed += 1
            sink.close()
        ok = rc == expect
        print(f"self-test: {what}: {'ok' if ok else 'NOT DETECTED' if expect else 'FALSE ALARM'}")
        failed += not ok
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if "--self-test" in argv:
        return self_test()
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return check(root, update="--update" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

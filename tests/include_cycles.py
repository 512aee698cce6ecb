"""Include circles among the C headers of the tree (run by tests/cli_cycles.sh).

Header A includes header B when A has `#include "B"` with B found as written from the repository
root (the tree's convention: "src/verify/verify_impl.h", "ops/ops_impl.h"), under include/ (the
public "parity/x.h"), or beside A. Include guards hide a circle from the compiler, but it still
means neither header can be read without the other: the layering of docs/architecture.md says
every include points down. Prints each circle as its headers joined by ' -> ' and exits 1 when
there is one; exits 0 silently otherwise.

usage: include_cycles.py SOURCE_DIR
"""
import os
import re
import sys

from import_cycles import components  # the same Tarjan walk (this script's folder is on sys.path)

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def headers(src):
    out = []
    for top in ("include", "src", "ops", "programs", "python", "tests", "mpi", "fuzz", "bench", "examples"):
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            out += [os.path.relpath(os.path.join(root, f), src) for f in files if f.endswith((".h", ".def"))]
    return sorted(out)


def graph(src, hs):
    have = set(hs)
    g = {}
    for h in hs:
        deps = []
        with open(os.path.join(src, h), errors="replace") as f:
            for line in f:
                m = INCLUDE.match(line)
                if not m:
                    continue
                t = m.group(1)
                for c in (t, os.path.join("include", t), os.path.normpath(os.path.join(os.path.dirname(h), t))):
                    if c in have:
                        deps.append(c)
                        break
        g[h] = deps
    return g


def cycles(g):
    """Strongly connected components of more than one header (import_cycles.py's Tarjan), and
    headers that include themselves."""
    return [c for c in components(g) if len(c) > 1 or c[0] in g[c[0]]]


def main():
    src = sys.argv[1]
    found = cycles(graph(src, headers(src)))
    for c in found:
        print(" -> ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

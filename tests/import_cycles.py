"""Import circles among the modules of one Python package (run by tests/cli_cycles.sh).

Module A uses module B when A imports B anywhere, at module level or inside a function
(`from ._b import x`, `from . import _b`, `from .sub import y`, `import parity._b`): a
function-level import only defers the circle, it does not break it. An import under
`if TYPE_CHECKING:` is not counted: it never runs, it only names a type for the checker. Prints every strongly
connected component of more than one module, its modules sorted and space-separated, and exits 1
when there is one; exits 0 silently otherwise.

usage: import_cycles.py PACKAGE_DIR
"""
import ast
import os
import sys


def module_names(pkg_dir):
    """{module name relative to the package ('' for __init__, 'a.b' for a/b.py): path}."""
    names = {}
    for root, _dirs, files in os.walk(pkg_dir):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(root, f), pkg_dir)[:-3].replace(os.sep, ".")
            if rel == "__init__":
                rel = ""
            elif rel.endswith(".__init__"):
                rel = rel[: -len(".__init__")]
            names[rel] = os.path.join(root, f)
    return names


def resolve(mod, is_pkg, level, target):
    """The package-relative name a `from <level dots><target>` in module mod refers to."""
    parts = mod.split(".") if mod else []
    if not is_pkg:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if target:
        parts += target.split(".")
    return ".".join(parts)


def type_checking(test):
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def walk(tree):
    """ast.walk, leaving out the bodies of `if TYPE_CHECKING:` (their else branches are kept)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def edges(pkg_dir, pkg_name, names):
    out = {m: set() for m in names}
    for mod, path in names.items():
        is_pkg = path.endswith("__init__.py")
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for node in walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = resolve(mod, is_pkg, node.level, node.module)
                elif node.module and (node.module == pkg_name or node.module.startswith(pkg_name + ".")):
                    base = node.module[len(pkg_name) + 1:]
                else:
                    continue
                # `from . import _x` names a module; `from ._x import f` names the module _x
                for alias in node.names:
                    sub = (base + "." if base else "") + alias.name
                    targets.append(sub if sub in names else base)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == pkg_name or alias.name.startswith(pkg_name + "."):
                        targets.append(alias.name[len(pkg_name) + 1:])
            for t in targets:
                if t in names and t != mod:
                    out[mod].add(t)
    return out


def components(graph):
    """Strongly connected components (Tarjan), each a sorted list."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main():
    pkg_dir = os.path.abspath(sys.argv[1])
    pkg_name = os.path.basename(pkg_dir)
    names = module_names(pkg_dir)
    graph = edges(pkg_dir, pkg_name, names)
    bad = [c for c in components(graph) if len(c) > 1]
    for c in sorted(bad):
        print("these modules import each other in a circle: "
              + " ".join(pkg_name + ("." + m if m else "") for m in c))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""parity problem on many problems and solutions at once (issue #37; docs/problems.md, "Folders
and the benchmarks' naming"): which problems a path holds, and which solutions go with each, by
the benchmark's own naming --

- SOL-ExecBench / FlashInfer-Bench: a solution JSON names its problem in its "definition" field;
  a FlashInfer-Bench dataset root (definitions/, workloads/, solutions/<author>/<op_type>/<def>/)
  finds its solutions in solutions/ by that field;
- KernelBench: problems are levelL/P_Name.py, and a run folder holds each generated kernel as
  level_L_problem_P_sample_S_kernel.py (its generate and eval scripts' naming)."""
from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Tuple

# (problem path, solution path or None: the reference itself) in the order they are judged
Item = Tuple[str, Optional[str]]


def is_problem(path: str) -> bool:
    """A problem folder (definition.json inside), a definition JSON inside a FlashInfer-Bench
    definitions/ tree, or a KernelBench problem file (class Model and get_inputs, no ModelNew:
    solution files beside the problems are skipped)."""
    if os.path.isdir(path):
        return os.path.isfile(os.path.join(path, "definition.json"))
    if os.path.isfile(path) and path.endswith(".py"):
        try:
            with open(path) as f:
                src = f.read()
        except OSError:
            return False
        return "class Model(" in src and "def get_inputs" in src and "class ModelNew" not in src
    return False


def _walk(root: str, ext: str) -> List[str]:
    out = []
    for d, subs, files in os.walk(root):
        subs.sort()
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(ext)]
    return out


def _definition_name(path: str) -> Optional[str]:
    """The problem name a SOL-ExecBench / FlashInfer-Bench problem path declares (None: not one)."""
    f = os.path.join(path, "definition.json") if os.path.isdir(path) else path
    if not f.endswith(".json"):
        return None
    try:
        with open(f) as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    return d.get("name") if isinstance(d, dict) and isinstance(d.get("name"), str) else None


def solutions_by_definition(root: str) -> Dict[str, List[str]]:
    """Every solution JSON under root (a file with a "definition" and a "spec"), by the name of
    the definition it names, in path order."""
    out: Dict[str, List[str]] = {}
    for f in _walk(root, ".json"):
        try:
            with open(f) as fh:
                d = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and isinstance(d.get("definition"), str) and isinstance(d.get("spec"), dict):
            out.setdefault(d["definition"], []).append(f)
    return out


_KB_LEVEL = re.compile(r"level_?(\d+)$")
_KB_ID = re.compile(r"^(\d+)_")


def kernelbench_samples(problem: str, run_dir: str, sample: Optional[int] = None) -> List[str]:
    """The kernels a KernelBench run folder holds for a problem file levelL/P_Name.py:
    level_L_problem_P_sample_S_kernel.py, by sample S (only S = sample when given). A problem
    file outside a levelL folder matches any level."""
    m = _KB_ID.match(os.path.basename(problem))
    if not m or not os.path.isdir(run_dir):
        return []
    lv = _KB_LEVEL.search(os.path.basename(os.path.dirname(os.path.abspath(problem))))
    pat = re.compile(r"^level_(%s)_problem_%d_sample_(\d+)_kernel\.py$" % (lv.group(1) if lv else r"\d+", int(m.group(1))))
    found = []
    for f in os.listdir(run_dir):
        k = pat.match(f)
        if k and (sample is None or int(k.group(2)) == sample):
            found.append((int(k.group(1)), int(k.group(2)), os.path.join(run_dir, f)))
    return [f for _, _, f in sorted(found)]


def problems_in(path: str) -> List[str]:
    """The problems a folder holds, in order: a FlashInfer-Bench dataset root's definitions
    (definitions/**.json), else its problem folders and KernelBench files, looking into levelL
    subfolders (a KernelBench checkout's KernelBench/ folder)."""
    defs = os.path.join(path, "definitions")
    if os.path.isdir(defs):
        return [f for f in _walk(defs, ".json") if _definition_name(f)]
    items: List[str] = []
    for n in sorted(os.listdir(path)):
        x = os.path.join(path, n)
        if is_problem(x):
            items.append(x)
        elif os.path.isdir(x) and _KB_LEVEL.search(n):
            items += [os.path.join(x, m) for m in sorted(os.listdir(x), key=_kb_order)
                      if is_problem(os.path.join(x, m))]
    return items


def _kb_order(name: str) -> Tuple[int, str]:
    m = _KB_ID.match(name)
    return (int(m.group(1)) if m else 1 << 30, name)


def pair(items: List[str], solution_name: Optional[str], solutions: Optional[str], sample: Optional[int],
         root: Optional[str] = None) -> Tuple[List[Item], List[str]]:
    """Each problem with its solutions: the file named solution_name inside a problem folder;
    else from `solutions` (a folder of solution JSONs matched by their "definition", or a
    KernelBench run folder), or a FlashInfer-Bench root's own solutions/; else the reference.
    Returns (items, the problems left out because the solutions folder has none for them)."""
    if solutions is None and root is not None and os.path.isdir(os.path.join(root, "solutions")) \
            and os.path.isdir(os.path.join(root, "definitions")):
        solutions = os.path.join(root, "solutions")
    by_def = solutions_by_definition(solutions) if solutions else {}
    out: List[Item] = []
    missing: List[str] = []
    for item in items:
        if solution_name and os.path.isdir(item):
            cand = os.path.join(item, solution_name)
            out.append((item, cand if os.path.isfile(cand) else None))
            continue
        if not solutions:
            out.append((item, None))
            continue
        if item.endswith(".py"):
            found = kernelbench_samples(item, solutions, sample)
        else:
            found = by_def.get(_definition_name(item) or "", [])
            if solution_name:
                found = [f for f in found if os.path.basename(f) in (solution_name, solution_name + ".json")]
        if not found:
            missing.append(item)
        out += [(item, f) for f in found]
    return out, missing

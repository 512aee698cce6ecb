"""parity.problems: reading the benchmarks' files (issue #37; docs/problems.md) -- SOL-ExecBench
and FlashInfer-Bench definitions and workloads, KernelBench problem files -- with the inputs'
roles inferred from the definition (and a parity_roles.json sidecar), and load()."""
from __future__ import annotations

import ast
import copy
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._errors import ProblemError
from ._problem_core import Problem
from ._problem_oracle import (CONTRACTS, _FLOAT_NAMES, _INT_NAMES, _PARITY_DTYPE, _UNSUPPORTED_DTYPES,
                              ProblemFileError, _Run, _tdtype, _torch)


# -- role inference ----------------------------------------------------------------------------------
def _infer_role(name: str, spec: Dict[str, Any], axes: Dict[str, Any], problem_text: str,
                reference_src: str, inputs: Dict[str, Dict[str, Any]]) -> Tuple[str, Optional[str], str]:
    low = name.lower()
    if spec["dtype"] not in _FLOAT_NAMES:
        # integer input: token ids bounded by an axis (an axis named like a vocabulary, or the
        # first axis of the tensor the reference indexes with it)
        for d in axes:
            if re.search(r"vocab|num_embeddings|num_tokens_total|^v$", d.lower()) and d not in (spec["shape"] or []):
                return "token_ids", d, "integer, bounded by vocabulary axis %s" % d
        m = re.search(r"(\w+)\s*\[\s*%s\b" % re.escape(name), reference_src) or \
            re.search(r"(?:index_select|embedding)\s*\(\s*(\w+)\s*,\s*(?:0\s*,\s*)?%s\b" % re.escape(name), reference_src) \
            or re.search(r"embedding\s*\(\s*%s\s*,\s*(\w+)" % re.escape(name), reference_src)
        if m and m.group(1) in inputs and inputs[m.group(1)]["shape"]:
            d = inputs[m.group(1)]["shape"][0]
            return "token_ids", d, "integer, indexes %s whose first axis is %s" % (m.group(1), d)
        # class targets of a classification loss: bounded by the logits' class axis (dim 1, or
        # dim 0 of unbatched logits)
        m = re.search(r"(?:cross_entropy|nll_loss|multi_margin_loss)\s*\(\s*(\w+)\s*,\s*%s\b" % re.escape(name),
                      reference_src)
        if m and m.group(1) in inputs and inputs[m.group(1)]["shape"]:
            shp = inputs[m.group(1)]["shape"]
            d = shp[1] if len(shp) >= 2 else shp[0]
            return "token_ids", d, "integer, class targets of %s over its class axis %s" % (m.group(1), d)
        if spec["shape"]:
            return "structure", None, "integer, not ids over an axis (offsets, page indices): the problem's own workloads give it"
        raise ProblemError("integer input %s: parity cannot tell which axis bounds its values (no vocabulary "
                           "axis, and the reference does not index a tensor with it)" % name)
    shape = spec["shape"] or []
    is_norm = "norm" in problem_text.lower()
    if "norm_weight" in low or "gamma" in low or (is_norm and len(shape) == 1 and
                                                  ("weight" in low or low in ("w", "g", "scale"))):
        return "norm_weight", None, "a norm's gamma: 1 + 0.1 N(0,1), never all ones"
    if re.search(r"grad", low):
        return "gradient", None, "name says gradient"
    if len(shape) >= 2 and re.search(r"(^|_)(w|weight|weights|proj|kernel)($|_)|_weight$|^w_", low):
        return "weight", None, "a 2-D weight: 0.02 N(0,1)"
    if re.search(r"logit", low):
        return "logits", None, "name says logits"
    return "activation", None, "N(0,1), outlier channels in outlier-ch"


# -- SOL-ExecBench / FlashInfer-Bench ----------------------------------------------------------------
def _read_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ProblemFileError(path, "file", "cannot read: %s" % e.strerror) from e
    except json.JSONDecodeError as e:
        raise ProblemFileError(path, "JSON", "not valid JSON: %s" % e) from e


def _read_workloads(path: str) -> List[Dict[str, Any]]:
    out = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                w = json.loads(line)
            except json.JSONDecodeError as e:
                raise ProblemFileError(path, "line %d" % i, "not valid JSON: %s" % e) from e
            if isinstance(w, dict) and isinstance(w.get("workload"), dict):  # a FlashInfer trace line
                w = w["workload"]
            if not isinstance(w, dict) or not isinstance(w.get("axes"), dict):
                raise ProblemFileError(path, "line %d: axes" % i, "a workload needs an axes object")
            out.append(w)
    return out


def _exec_source(src: str, label: str, path: str) -> Dict[str, Any]:
    ns: Dict[str, Any] = {"__name__": "parity_problem_" + re.sub(r"\W", "_", label)}
    try:
        code = compile(src, path, "exec")
        exec(code, ns)  # noqa: S102 - the benchmark's reference is PyTorch source by definition
    except SyntaxError as e:
        raise ProblemFileError(path, "reference", "does not compile: %s" % e) from e
    except Exception as e:
        raise ProblemFileError(path, "reference", "raises on import: %s: %s" % (type(e).__name__, e)) from e
    return ns


def _eval_expr(expr: str, env: Dict[str, int], path: str, axis: str) -> int:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ProblemFileError(path, "axes.%s.expression" % axis, "cannot parse %r" % expr) from e
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.Add, ast.Sub, ast.Mult,
          ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)
    for n in ast.walk(tree):
        if not isinstance(n, ok):
            raise ProblemFileError(path, "axes.%s.expression" % axis, "%r: only + - * / // %% ** on axes" % expr)
        if isinstance(n, ast.Name) and n.id not in env:
            raise ProblemFileError(path, "axes.%s.expression" % axis, "%r names unknown axis %s" % (expr, n.id))
    return int(eval(compile(tree, path, "eval"), {"__builtins__": {}}, dict(env)))  # noqa: S307 - checked above


_MAX_ELEMS = 1 << 24  # the production workload's largest tensor (fp64 oracle on CPU)


def _shape_axis(a: Any, axes: Dict[str, Any], def_path: str, field: str) -> str:
    """A shape entry as an axis name: an axis of the definition; an integer literal (1, "1": a
    broadcast dimension) or an arithmetic expression over the axes ("2 * N"), which become const
    and expr axes named by their text (SOL-ExecBench resolves shape entries as expressions)."""
    if isinstance(a, str) and a in axes:
        return a
    if isinstance(a, int) and not isinstance(a, bool) or (isinstance(a, str) and re.fullmatch(r"\s*\d+\s*", a)):
        name = str(int(a))
        axes.setdefault(name, {"type": "const", "value": int(a)})
        return name
    if isinstance(a, str) and a.strip():
        try:
            tree = ast.parse(a, mode="eval")
        except SyntaxError:
            tree = None
        names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)] if tree is not None else []
        if tree is not None and names and all(n in axes for n in names):
            name = re.sub(r"\s+", "", a)
            axes.setdefault(name, {"type": "expr", "expression": a})
            return name
    raise ProblemFileError(def_path, field, "axis %r is not in axes (nor an integer or an expression over them)" % (a,))


def _load_definition(def_path: str, folder: str, fmt: str) -> Problem:
    d = _read_json(def_path)
    if not isinstance(d, dict):
        raise ProblemFileError(def_path, "top level", "expected a JSON object")
    p = Problem()
    p.format, p.path = fmt, def_path
    for field in ("name", "axes", "inputs", "outputs"):
        if field not in d:
            raise ProblemFileError(def_path, field, "missing (a definition needs name, axes, inputs, outputs, reference)")
    p.name = str(d["name"])
    axes = d["axes"]
    if not isinstance(axes, dict):
        raise ProblemFileError(def_path, "axes", "expected an object {axis: {type: const|var|expr}}")
    src = d.get("reference") or ""
    if not src and os.path.isfile(os.path.join(folder, "reference.py")):
        with open(os.path.join(folder, "reference.py")) as f:
            src = f.read()
    if not src:
        raise ProblemFileError(def_path, "reference", "missing (inline, or reference.py beside the definition)")
    for part in ("inputs", "outputs"):
        if not isinstance(d[part], dict) or not d[part]:
            raise ProblemFileError(def_path, part, "expected a non-empty object {name: {shape, dtype}}")
        for k, s in d[part].items():
            if not isinstance(s, dict) or "dtype" not in s or "shape" not in s:
                raise ProblemFileError(def_path, "%s.%s" % (part, k), "needs shape (axis names or null) and dtype")
            dt = s["dtype"]
            if dt in _UNSUPPORTED_DTYPES:
                raise ProblemFileError(def_path, "%s.%s.dtype" % (part, k),
                                       "%s is not supported yet (torch here has no fp8/fp4 dtypes)" % dt)
            if dt not in _FLOAT_NAMES and dt not in _INT_NAMES:
                raise ProblemFileError(def_path, "%s.%s.dtype" % (part, k), "unknown dtype %r" % dt)
            if s["shape"] is not None:
                if not isinstance(s["shape"], list):
                    raise ProblemFileError(def_path, "%s.%s.shape" % (part, k), "expected a list of axis names or null")
                s["shape"] = [_shape_axis(a, axes, def_path, "%s.%s.shape" % (part, k)) for a in s["shape"]]
    p.inputs = {k: {"dtype": s["dtype"], "shape": s["shape"]} for k, s in d["inputs"].items()}
    p.outputs = {k: {"dtype": s["dtype"], "shape": s["shape"]} for k, s in d["outputs"].items()}
    p.order = list(p.inputs)
    ns = _exec_source(src, p.name, def_path)
    if not callable(ns.get("run")):
        raise ProblemFileError(def_path, "reference", "defines no function run")
    p.reference = _Run(ns["run"], grad=True)  # a reference may compute a backward with autograd

    # workloads and sizes
    wl_path = None
    for cand in (os.path.join(folder, "workload.jsonl"), os.path.join(folder, "workloads.jsonl")):
        if os.path.isfile(cand):
            wl_path = cand
    if wl_path is None and fmt == "flashinfer":  # definitions/<op_type>/<name>.json -> workloads/<op_type>/<name>.jsonl
        root = os.path.dirname(os.path.dirname(folder))
        cand = os.path.join(root, "workloads", os.path.basename(folder), p.name + ".jsonl")
        if os.path.isfile(cand):
            wl_path = cand
    wls = _read_workloads(wl_path) if wl_path else []
    p.own_lines = wls  # type: ignore[attr-defined]
    p.own_root = os.path.dirname(wl_path) if wl_path else folder  # type: ignore[attr-defined]
    p.axes_spec = axes  # type: ignore[attr-defined]
    entry = d.get("custom_inputs_entrypoint")
    p.custom_entry = ns.get(entry) if entry else None  # type: ignore[attr-defined]
    if entry and not callable(p.custom_entry):  # type: ignore[attr-defined]
        raise ProblemFileError(def_path, "custom_inputs_entrypoint", "the reference defines no function %s" % entry)
    env: Dict[str, int] = {}
    var_values: Dict[str, List[int]] = {}
    for a, spec in axes.items():
        t = spec.get("type") if isinstance(spec, dict) else None
        if t == "const":
            if not isinstance(spec.get("value"), int):
                raise ProblemFileError(def_path, "axes.%s.value" % a, "a const axis needs an integer value")
            env[a] = spec["value"]
        elif t == "var":
            vals = sorted(set(int(w["axes"][a]) for w in wls if a in w["axes"]))
            var_values[a] = vals
        elif t == "expr":
            pass
        else:
            raise ProblemFileError(def_path, "axes.%s.type" % a, "expected const, var or expr, got %r" % (t,))

    def elems(ax: Dict[str, int]) -> int:
        return max([int(np.prod([ax.get(x, 1) for x in s["shape"] or []])) for s in
                    list(p.inputs.values()) + list(p.outputs.values())] or [1])

    base_w: Dict[str, int] = {}
    prod_w: Dict[str, int] = {}
    if wls:
        full = []
        for w in wls:
            ax = dict(env)
            ax.update({a: int(v) for a, v in w["axes"].items()})
            full.append((elems(ax), ax, w))
        full.sort(key=lambda t: t[0])
        rows_ok = [t for t in full if all(t[1].get(a, 0) >= 8 or len(var_values[a]) == 1 for a in var_values)]
        base_w = (rows_ok or full)[0][1]
        fit = [t for t in full if t[0] <= _MAX_ELEMS]
        prod_w = (fit or full[:1])[-1][1]
        if fit and fit[-1] is not full[-1]:
            p.notes.append("production sizes capped at %d elements per tensor (the largest workload has %d)"
                           % (_MAX_ELEMS, full[-1][0]))
        p.rule_tolerance = _pick_tolerance([t[2] for t in full], base_w)  # type: ignore[attr-defined]
    else:
        p.rule_tolerance = {}  # type: ignore[attr-defined]
    for a in var_values:
        b = base_w.get(a, 32)
        pr = prod_w.get(a, b)
        p.shapes[a] = [b] if pr == b else [b, pr]
    for a, v in env.items():
        p.shapes[a] = [v]
        p.fixed.append(a)
    for a, spec in axes.items():  # expr axes: from the base sizes, fixed (with what they depend on)
        if isinstance(spec, dict) and spec.get("type") == "expr":
            if "expression" not in spec:
                raise ProblemFileError(def_path, "axes.%s.expression" % a, "an expr axis needs an expression")
            base = {x: s[0] for x, s in p.shapes.items()}
            p.shapes[a] = [_eval_expr(spec["expression"], base, def_path, a)]
            for n in re.findall(r"[A-Za-z_]\w*", spec["expression"]):
                if n in p.shapes:
                    p.shapes[n] = p.shapes[n][:1]
                    if n not in p.fixed:
                        p.fixed.append(n)
            p.fixed.append(a)
    # scalars: the first workload's value (the base workload's when it gives one)
    for k, s in p.inputs.items():
        if s["shape"] is None:
            val = None
            for w in ([x for x in wls if x["axes"] == {a: base_w.get(a) for a in x["axes"]}] + wls):
                spec = (w.get("inputs") or {}).get(k)
                if isinstance(spec, dict) and spec.get("type") == "scalar":
                    val = spec.get("value")
                    break
            if val is None:
                raise ProblemFileError(wl_path or def_path, "inputs.%s" % k,
                                       "scalar input %s has no value (a workload line gives it as "
                                       "{\"type\": \"scalar\", \"value\": ...})" % k)
            p.scalars[k] = val
    _tie_axes_to_scalars(p, wls, var_values)
    if any(((w.get("inputs") or {}).get(k) or {}).get("type") == "custom" for w in wls for k in p.inputs):
        p.notes.append("custom inputs (custom_inputs_entrypoint) are drawn for the problem's own workloads only "
                       "(not with --quick); parity's workloads draw from the roles")
    if any(((w.get("inputs") or {}).get(k) or {}).get("type") == "safetensors" for w in wls for k in p.inputs):
        p.notes.append("safetensors inputs are loaded for the problem's own workloads only (not with --quick); "
                       "parity's workloads draw from the roles")
    text = " ".join(str(d.get(x, "")) for x in ("name", "op_type", "description", "type"))
    for k, s in p.inputs.items():
        if s["shape"] is None:
            continue
        role, vocab, why = _infer_role(k, s, axes, text, src, p.inputs)
        p.roles[k], p.role_why[k] = (role, vocab), why
    _apply_sidecar(p, folder)
    _structure(p, wls, wl_path or def_path)
    if not p.structure:
        _shrink_base(p)
    _fits_memory(p, def_path)
    fl = [s["dtype"] for k, s in p.inputs.items() if s["shape"] is not None and s["dtype"] in _FLOAT_NAMES]
    p.dtype = _PARITY_DTYPE[fl[0]] if fl else "f32"
    if fmt == "sol":
        t = dict(max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99, max_error_cap=None,
                 allow_negative_inf=False)
        t.update(p.rule_tolerance)  # type: ignore[attr-defined]
        p.rule = dict(name="sol-execbench", **t)
    else:
        ratio = 0.95 if d.get("op_type") == "moe" else 1.0
        p.rule = dict(name="flashinfer-bench", atol=1e-2, rtol=1e-2, required_matched_ratio=ratio)
    return p


# Elements of the tensors var axes size in parity's base workload, where the axes allow it: the
# bound the problem's own lines are judged under (2^22 per tensor, own_workloads), here over the
# tensors together. At ~150 bytes per element (measured: _COPIES) that is ~0.6 GB while judged, and the
# fp64 reference of a GEMM sized so runs in seconds on this machine (about 1 GFLOP/s in fp64).
_BASE_ELEMS = 1 << 22


def _var_elems(p: Problem, sizes: Dict[str, int], var: List[str]) -> int:
    """Elements of the tensors that carry a var axis (what shrinking var axes can reduce)."""
    return sum(int(np.prod([sizes.get(a, 1) for a in s["shape"]], dtype=np.float64))
               for s in list(p.inputs.values()) + list(p.outputs.values())
               if s["shape"] and any(a in var for a in s["shape"]))


def _shrink_base(p: Problem) -> None:
    """Workload lines sized for a GPU (batch 2048 rows of a 4096-wide GEMM) make parity's own
    workloads minutes of fp64 on a CPU. Var axes are the problem's to vary: while the tensors
    that carry a var axis hold more than 2^22 elements at the base sizes, the largest var axis
    (not fixed, kept at least 8) is halved, and the reference is run once, natively, at the
    smaller sizes; if it raises there, the line's sizes stay. The problem's own lines keep their
    sizes (judged without --quick), and production its own."""
    var = [a for a in p.shapes if a not in p.fixed]
    base = {a: int(v[0]) for a, v in p.shapes.items()}
    new = dict(base)
    while _var_elems(p, new, var) > _BASE_ELEMS:
        cand = [a for a in var if new[a] >= 16]  # halved, still >= 8: the base rule's rows for the floor
        if not cand:
            break
        a = max(cand, key=lambda x: new[x])
        new[a] //= 2
    if new == base or p.reference is None:
        return
    _, need, mem = _memory(p, new)
    if mem and need > mem // 2:  # not even probed: _fits_memory refuses the problem
        return
    if p.fails_at(new):  # the reference needs the line's sizes: they stay
        return
    for a in var:
        if new[a] != base[a]:
            p.shapes[a] = [new[a]] + [x for x in p.shapes[a][1:] if x != new[a]]
    p.notes.append("parity's workloads at smaller var sizes than the smallest workload line (%d -> %d elements in "
                   "the tensors they size; the fp64 oracle runs on the CPU): %s; the lines keep theirs" % (
                       _var_elems(p, base, var), _var_elems(p, new, var),
                       ", ".join("%s %d -> %d" % (a, base[a], new[a]) for a in var if new[a] != base[a])))


def _tie_axes_to_scalars(p: Problem, wls: List[Dict[str, Any]], var_values: Dict[str, List[int]]) -> None:
    """A var axis whose size equals an integer scalar input on every workload line (K and topk:
    the outputs hold topk columns) is the scalar's: fixed at its value, so that parity's odd and
    production sizes do not move it away from the scalar the op is declared with."""
    for a in var_values:
        if a in p.fixed:
            continue
        for k, v in p.scalars.items():
            if isinstance(v, bool) or not isinstance(v, int) or p.shapes.get(a, [None])[0] != v:
                continue
            pairs = [(w["axes"].get(a), ((w.get("inputs") or {}).get(k) or {}).get("value")) for w in wls]
            if pairs and all(x == y for x, y in pairs if x is not None and y is not None):
                p.shapes[a] = [v]
                p.fixed.append(a)
                p.notes.append("axis %s equals the scalar %s (%d) on every workload line: fixed at it" % (a, k, v))
                break


# fp64 copies of the base workload's tensors a judgement holds at once (the case's inputs and
# reference, the oracle's promoted inputs and result, the contract evaluation's, the floor's
# passes, the candidate's inputs and outputs, the next workload's case built ahead, what malloc
# keeps): measured as the slope of `parity problem`'s peak RSS over the base workload's element
# count -- RMSNorm 4096 wide, 128 and 512 rows (1.05M and 4.19M elements), --quick: 383 and 836
# MB, 147 bytes = 18.4 fp64 copies per element -- rounded up. A guard, not part of the error
# model: past half of this machine's memory the run would be killed midway.
_COPIES = 20


def _memory(p: Problem, sizes: Dict[str, int]) -> Tuple[int, int, int]:
    """(elements of every tensor at these sizes, bytes of their fp64 copies a judgement holds,
    this machine's memory in bytes; 0 when unknown)."""
    n = sum(int(np.prod([sizes.get(a, 1) for a in s["shape"] or []], dtype=np.float64))
            for s in list(p.inputs.values()) + list(p.outputs.values()))
    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        mem = 0
    return n, n * 8 * _COPIES, mem


def _fits_memory(p: Problem, where: str) -> None:
    """Refuse (exit 3) a problem whose base workload cannot be judged in this machine's memory:
    const axes sized for a GPU (a 32768 x 32768 weight is 8.6 GB per fp64 copy) cannot be scaled
    the way KernelBench's module constants are, since the reference may assert them."""
    base = {a: int(v[0]) for a, v in p.shapes.items()}
    n, need, mem = _memory(p, base)
    if mem and need > mem // 2:
        raise ProblemError("%s: too large for this machine: parity's base workload's tensors hold %.3g elements "
                           "(sizes %s: the const axes, and the var axes as small as the workload lines and the "
                           "reference allow), about %.1f GB of fp64 copies while judged, over half of its %.1f GB"
                           % (where, n, ", ".join("%s=%d" % kv for kv in base.items()), need / 1e9, mem / 1e9))


def _structure(p: Problem, wls: List[Dict[str, Any]], where: str) -> None:
    """Integer inputs that are not ids over an axis (offsets, page tables: role "structure") are
    judged on the values the problem's own workload lines give them (safetensors or custom):
    keep the lines that give every one; none: the problem is refused (exit 3), with the way out."""
    p.structure = [k for k, (r, _) in p.roles.items() if r == "structure"]
    if not p.structure:
        return
    floats = [k for k in p.structure if p.inputs[k]["dtype"] in _FLOAT_NAMES]
    if floats:
        raise ProblemFileError(os.path.join(os.path.dirname(p.path), "parity_roles.json"), "roles.%s" % floats[0],
                               "structure is a role of integer inputs (offsets, "
                               "page tables); %s is %s" % (floats[0], p.inputs[floats[0]]["dtype"]))

    def gives(w: Dict[str, Any], k: str) -> bool:
        return ((w.get("inputs") or {}).get(k) or {}).get("type") in ("safetensors", "custom")
    keep = [w for w in wls if all(gives(w, k) for k in p.structure)]
    if not keep:
        raise ProblemError("%s: integer input(s) %s are not ids over an axis (no vocabulary axis, and the reference "
                           "does not index a tensor with them), so parity cannot draw them, and no workload line "
                           "gives their values (\"type\": \"safetensors\" or \"custom\"): add such workload lines, or "
                           "name the axis that bounds them in parity_roles.json ({\"roles\": {\"%s\": {\"role\": "
                           "\"token_ids\", \"vocab\": AXIS}}})" % (where, ", ".join(p.structure), p.structure[0]))
    # the notes on custom and safetensors inputs say parity's workloads draw every input; here
    # the structure comes from the lines (structure_workloads' note says how)
    p.notes = [n for n in p.notes if not n.startswith(("custom inputs (", "safetensors inputs are"))]
    if len(keep) < len(wls):
        p.notes.append("%d workload line(s) that do not give %s left out" % (len(wls) - len(keep), ", ".join(p.structure)))
        p.own_lines = keep  # type: ignore[attr-defined]


def _pick_tolerance(ws: List[Dict[str, Any]], base: Dict[str, int]) -> Dict[str, Any]:
    for w in ws:
        if isinstance(w.get("tolerance"), dict):
            return {k: v for k, v in w["tolerance"].items()
                    if k in ("max_atol", "max_rtol", "required_matched_ratio", "max_error_cap", "allow_negative_inf")}
    return {}


def _apply_sidecar(p: Problem, folder: str) -> None:
    """parity_roles.json beside the problem: {"input": "role"} or {"input": {"role": r, "vocab": axis}}."""
    path = os.path.join(folder, "parity_roles.json")
    if not os.path.isfile(path):
        return
    d = _read_json(path)
    roles = d.get("roles", d) if isinstance(d, dict) else None
    if not isinstance(roles, dict):
        raise ProblemFileError(path, "roles", "expected {input: role}")
    for k, v in roles.items():
        if k not in p.roles:
            raise ProblemFileError(path, "roles.%s" % k, "not a tensor input of %s" % p.name)
        r, voc = (v, None) if isinstance(v, str) else (v.get("role"), v.get("vocab"))
        p.roles[k] = (r, voc)
        p.role_why[k] = "set in parity_roles.json"


# -- KernelBench ------------------------------------------------------------------------------------
def _meta_numel(ns: Dict[str, Any]) -> int:
    """The element count of get_inputs()'s tensors plus the Model's parameters and outputs, every
    tensor factory run on the meta device (no memory, no compute): a KernelBench problem of
    billions of elements is sized, not drawn."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    factories = {torch.randn, torch.rand, torch.randint, torch.zeros, torch.ones, torch.empty, torch.full,
                 torch.arange, torch.randperm, torch.normal}

    class Meta(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func in factories:
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    with Meta():
        xs = ns["get_inputs"]()
        n = sum(int(x.numel()) for x in xs if isinstance(x, torch.Tensor))
        try:
            model = ns["Model"](*ns["get_init_inputs"]())
            n += sum(int(q.numel()) for q in model.parameters())
        except Exception:  # a Model the meta device cannot build: its inputs alone
            return n
        try:  # the outputs too (a tall-skinny GEMM's output is M x M of two M x 32 inputs)
            with torch.no_grad():
                out = model(*xs)
            outs = out if isinstance(out, (tuple, list)) else [out]
            n += sum(int(o.numel()) for o in outs if isinstance(o, torch.Tensor))
        except Exception:  # an op without a meta kernel: inputs and parameters
            pass
    return n


_KB_SIZE_MIN = 16  # module constants below this are kernel sizes, strides, paddings, groups: never halved


def _kb_scale(ns: Dict[str, Any], path: str, cap: int) -> List[Dict[str, Any]]:
    """Halve every module-level size get_inputs() or get_init_inputs() use -- an integer
    constant of at least 16, or such an integer inside a tuple or list constant (`input_shape =
    (32768,)`) -- all together, until the inputs, the Model's parameters and its outputs hold at
    most cap elements in all (KernelBench sizes its problems for a GPU; the fp64 oracle runs on
    the CPU). Halving them together keeps the relations a problem relies on: HingeLoss broadcasts
    a (batch, 32768) tensor against a (batch,) one with batch = 32768; a ConvTranspose3d's output
    width 2W is the LayerNorm's out_channels. Kernel sizes, strides and paddings (below 16) stay.
    The constants are shared with get_init_inputs() and the Model, so the shapes stay
    consistent. Returns the sizes after each step, the problem's own first (one entry: nothing
    changed): a model the meta device cannot check may break only when run, and the caller then
    steps back."""
    def sizes_in(v: Any) -> bool:
        if isinstance(v, bool):
            return False
        if isinstance(v, int):
            return True
        return isinstance(v, (tuple, list)) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    names = sorted(set(n for f in ("get_inputs", "get_init_inputs") for n in getattr(ns[f], "__code__").co_names
                       if sizes_in(ns.get(n))))
    orig = {n: ns[n] for n in names}

    def half(x: int) -> int:
        return (x + 1) // 2 if x >= _KB_SIZE_MIN else x

    def halve(v: Any) -> Any:
        return half(v) if isinstance(v, int) else type(v)(half(x) for x in v)
    states = [dict(orig)]
    try:
        total = _meta_numel(ns)
    except Exception:  # a get_inputs the meta device cannot run: drawn as written
        return states
    steps = 0
    while total > cap and steps < 64:
        prev = {n: ns[n] for n in names}
        for n in names:
            ns[n] = halve(ns[n])
        if all(ns[n] == prev[n] for n in names):
            break  # nothing of at least 16 left
        try:
            total = _meta_numel(ns)
        except Exception:  # halving made the problem unbuildable: the step undone
            ns.update(prev)
            break
        steps += 1
        states.append({n: ns[n] for n in names})
    return states


def _kb_changes(states: List[Dict[str, Any]]) -> str:
    """The scaling's changes, from the problem's own sizes to the last state ("" for none)."""
    first, last = states[0], states[-1]
    return ", ".join("%s %s -> %s" % (n, first[n], last[n]) for n in first if last[n] != first[n])


_KB_PRECISION = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _kb_copy(ns: Dict[str, Any], init: List[Any], seed: int, model: Any) -> Any:
    """Another Model with model's parameters and buffers, to be cast to fp64 or the precision. A
    new instance, not copy.deepcopy: deepcopy shares functions, so a closure the model keeps
    (minGPT's `self.mlpf = lambda x: m.c_proj(...)` over its own ModuleDict) would run the
    original's fp32 layers inside the copy. Falls back to deepcopy where a second instance cannot
    take the first's state."""
    torch = _torch()
    try:
        torch.manual_seed(seed)
        twin = ns["Model"](*init)
        twin.load_state_dict(model.state_dict())
        return twin
    except Exception:  # a Model whose state does not load into a second instance
        return copy.deepcopy(model)


def _load_kernelbench(path: str, seed: int = 42, max_elems: int = 1 << 20, precision: str = "fp32") -> Problem:
    torch = _torch()
    if precision not in _KB_PRECISION:
        raise ValueError("precision %r: expected fp32, fp16 or bf16 (KernelBench's)" % (precision,))
    prec = _KB_PRECISION[precision]
    with open(path) as f:
        src = f.read()
    ns = _exec_source(src, os.path.basename(path), path)
    for field in ("Model", "get_inputs", "get_init_inputs"):
        if field not in ns:
            raise ProblemFileError(path, field, "missing (a KernelBench problem defines class Model, "
                                                "get_inputs() and get_init_inputs())")
    p = Problem()
    p.format, p.path = "kernelbench", path
    p.name = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    states = _kb_scale(ns, path, max_elems)
    stepped_back: List[str] = []
    while True:  # built and run at the scaled sizes; a step back for a model they break
        try:
            torch.manual_seed(seed)
            init = list(ns["get_init_inputs"]())
            torch.manual_seed(seed)
            model = ns["Model"](*init)
            torch.manual_seed(seed)
            xs = list(ns["get_inputs"]())
            with torch.no_grad():
                ref = model(*xs)
            break
        except Exception as e:
            if len(states) > 1:  # halving broke it (a pooling pyramid, an asserted image size)
                stepped_back.append("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
                states.pop()
                ns.update(states[-1])
                continue
            raise ProblemFileError(path, "Model", "building the model, its inputs or running it raises %s: %s"
                                   % (type(e).__name__, e)) from e
    scaled = _kb_changes(states)
    if scaled:
        p.notes.append("scaled shapes (inputs, parameters and outputs over %d elements; the fp64 oracle runs on the "
                       "CPU): %s" % (max_elems, scaled))
    if stepped_back:
        p.notes.append("%d halving step(s) undone: the model does not run at those sizes (%s)%s"
                       % (len(stepped_back), stepped_back[-1], "" if scaled else "; run at its own sizes"))
    import inspect
    try:
        params = [q for q in inspect.signature(model.forward).parameters.values()
                  if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
        names = [q.name for q in params][:len(xs)]
    except (TypeError, ValueError):
        names = []
    while len(names) < len(xs):
        names.append("x%d" % len(names))
    dims: Dict[str, int] = {}
    for n, x in zip(names, xs):
        if isinstance(x, torch.Tensor):
            shp = []
            for j, s in enumerate(x.shape):
                a = "%s_%d" % (n, j)
                dims[a] = int(s)
                shp.append(a)
            dt = str(x.dtype).replace("torch.", "")
            p.inputs[n] = {"dtype": prec if dt in _FLOAT_NAMES else ("int64" if dt in _INT_NAMES else dt),
                           "shape": shp}  # KernelBench casts every float input to its precision
            if dt not in _FLOAT_NAMES and dt not in _INT_NAMES:
                raise ProblemFileError(path, "get_inputs", "input %s has dtype %s (not supported)" % (n, dt))
        else:
            p.inputs[n] = {"dtype": "float64", "shape": None}
            p.scalars[n] = x
    p.order = names
    outs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise ProblemFileError(path, "Model.forward", "output %d is not a tensor (not judged yet)" % i)
        odt = str(o.dtype).replace("torch.", "")
        if not o.is_floating_point() and odt not in _INT_NAMES:
            raise ProblemFileError(path, "Model.forward", "output %d has dtype %s (not judged)" % (i, odt))
        shp = []
        for j, s in enumerate(o.shape):
            ax = next((k for k, v in dims.items() if v == int(s)), None)
            if ax is None:
                ax = "out%d_%d" % (i, j)
                dims[ax] = int(s)
            shp.append(ax)
        # an integer output (argmax, indices) keeps its dtype at every precision: judged exactly
        p.outputs["output" if len(outs) == 1 else "output%d" % i] = {
            "dtype": prec if precision != "fp32" and o.is_floating_point() else odt, "shape": shp}
    p.shapes = {a: [v] for a, v in dims.items()}
    p.fixed = list(dims)  # the model's parameters fix every size
    text = p.name + " " + (ns["Model"].__doc__ or "")
    for k, s in p.inputs.items():
        if s["shape"] is None:
            continue
        if s["dtype"] not in _FLOAT_NAMES:  # integer inputs: the smallest axis that bounds the values seen
            hi = int(xs[names.index(k)].max()) + 1
            cand = sorted((v, a) for a, v in dims.items() if v >= hi and a not in s["shape"])
            if not cand:
                raise ProblemFileError(path, "get_inputs", "integer input %s: no axis bounds its values" % k)
            p.roles[k], p.role_why[k] = ("token_ids", cand[0][1]), "integer, values < %d (axis %s)" % (
                cand[0][0], cand[0][1])
            continue
        role, vocab, why = _infer_role(k, s, {}, text, src, p.inputs)
        p.roles[k], p.role_why[k] = (role, vocab), why
    p.dtype = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}[precision]
    m64 = _kb_copy(ns, init, seed, model).to(torch.float64)
    native = model if precision == "fp32" else _kb_copy(ns, init, seed, model).to(_tdtype(prec))
    # KernelBench's own inputs (get_inputs() under its seed, scaled as above): the integer outputs
    # are judged on them too, since parity's role-drawn inputs rarely tie and a benchmark's
    # rounded or integer-valued inputs do (docs/problems.md, "Integer outputs")
    own = {n: x for n, x in zip(names, xs) if isinstance(x, torch.Tensor)}
    p._kb = {"ns": ns, "seed": seed, "init": init, "precision": precision, "inputs": own,
             "models": {"f64": m64, "f32": model, "native": native, "native-unrounded": native},
             "src": src}
    p.reference = _Run(lambda m, *a: m(*a))
    tol = 1e-4 if precision == "fp32" else 1e-2  # KernelBench's tolerance per precision
    p.rule = dict(name="kernelbench", atol=tol, rtol=tol, precision=precision)
    return p


# -- load -------------------------------------------------------------------------------------------
def load(path: str, contract: Optional[str] = None, *, seed: int = 42, max_elems: int = 1 << 20,
         precision: str = "fp32") -> Problem:
    """A benchmark problem as a parity.Op: a SOL-ExecBench/FlashInfer-Bench problem folder (or its
    definition JSON) or a KernelBench problem .py file. contract: "math" or "reference" (default:
    "reference", the problem's own: the roundings its reference performs are allowed). seed: the
    KernelBench model's initialisation seed (KernelBench's own default, 42). max_elems: a
    KernelBench problem whose inputs and parameters hold more elements is scaled down (its
    module-level size constants halved; said in the notes). precision: a KernelBench problem's
    precision (fp32, fp16, bf16: its inputs and both models cast to it, its tolerance 1e-4 for
    fp32, 1e-2 otherwise)."""
    _torch()
    contract = contract or "reference"
    if contract not in CONTRACTS:
        raise ValueError("contract %r: expected math or reference" % (contract,))
    if os.path.isdir(path):
        dp = os.path.join(path, "definition.json")
        if not os.path.isfile(dp):
            raise ProblemFileError(path, "definition.json", "a problem folder holds definition.json (and "
                                                           "optionally workload.jsonl, reference.py)")
        fmt = "sol"
        wl = os.path.join(path, "workload.jsonl")
        if os.path.isfile(wl):
            with open(wl) as f:
                first = f.readline()
            if '"workload"' in first and '"definition"' in first:
                fmt = "flashinfer"
        p = _load_definition(dp, path, fmt)
    elif path.endswith(".json"):
        p = _load_definition(path, os.path.dirname(os.path.abspath(path)), "flashinfer")
    elif path.endswith(".py"):
        if not os.path.isfile(path):
            raise ProblemFileError(path, "file", "no such file")
        p = _load_kernelbench(path, seed, max_elems, precision)
    else:
        raise ProblemFileError(path, "path", "expected a problem folder, a definition .json or a KernelBench .py")
    p.load_args = {"path": path, "seed": seed, "max_elems": max_elems, "precision": precision}
    return p.with_contract(contract)


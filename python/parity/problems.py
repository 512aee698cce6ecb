"""Benchmark problems as they are (issue #37, first slice; docs/problems.md).

    from parity import problems
    p = problems.load("path/to/problem_folder")          # SOL-ExecBench / FlashInfer-Bench
    p = problems.load("path/to/19_ReLU.py")              # KernelBench problem file
    print(p.describe())                                  # the inferred roles
    r = problems.judge(p, solution="solution.json")      # parity's verdict + the benchmark's rule
    print(r.text()); r.to_dict()

A problem becomes a parity.Op (the public declared-op API): its inputs with roles inferred from
the definition, its reference made into an fp64 oracle (the PyTorch reference re-run with every
floating dtype promoted to float64 by a torch function mode), declared multilinear=False so that
parity's empirical floor judges it. The contract decides what the reference's float32 evaluation
(the one the floor is measured on) is: `math` promotes every float to float32 (fp32 internals,
one rounding per output), `reference` runs the reference in its own dtypes (bf16 intermediates
and all), so the floor allows exactly the roundings the reference itself performs.

Formats read (facts from the benchmarks' public docs; no code of theirs):
- SOL-ExecBench / FlashInfer-Bench definition JSON: name, axes {const value | var | expr
  expression}, inputs/outputs {name: {shape: [axis names] | null (a scalar), dtype}}, reference
  (PyTorch source with a global `run`, inline or reference.py beside it); workload.jsonl lines
  {uuid, axes, inputs {name: {type: random|scalar|safetensors|custom, ...}}, tolerance}
  (FlashInfer traces wrap it as {"definition", "workload"}).
- Solutions: JSON with spec.entry_point "file.py::fn", spec.languages (SOL, a list) or
  spec.language (FlashInfer), spec.destination_passing_style (default true: outputs
  pre-allocated and passed after the inputs), sources [{path, content}].
- KernelBench: a problem file with class Model(nn.Module), get_inputs(), get_init_inputs();
  a solution file with class ModelNew built from the same init inputs under the same seed.
"""
from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._custom import Input, Op
from ._errors import ProblemError

__all__ = ["load", "judge", "Problem", "Judgement", "ProblemFileError", "RefusedReference", "main",
           "CONTRACTS", "load_solution"]

CONTRACTS = ("math", "reference")

_FLOAT_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}
_INT_NAMES = {"int64", "int32", "int16", "int8", "uint8", "bool"}
_UNSUPPORTED_DTYPES = {"float8_e4m3fn", "float8_e5m2", "float4_e2m1", "float4_e2m1fn_x2"}
_PARITY_DTYPE = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f32"}
# Languages whose entry point is a Python function (SOL's python languages, FlashInfer's python/triton).
_PY_LANGS = {"python", "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend", "tilelang"}
_CPU_LANGS = {"python", "pytorch"}


class ProblemFileError(ProblemError):
    """A problem or solution file parity cannot read: names the file and the field (exit 3)."""

    def __init__(self, path: str, field: str, message: str) -> None:
        self.path, self.field = path, field
        super().__init__("%s: %s: %s" % (path, field, message))


class RefusedReference(ProblemError):
    """A reference parity refuses to promote to fp64 (a view(dtype) bit trick, ...)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the CLI checks first
        raise ProblemError("parity.problems needs torch (the references are PyTorch): %s" % e) from e
    return torch


# -- the fp64 oracle: every floating dtype promoted ------------------------------------------------
def _promote_mode(target: Any) -> Any:
    """A torch function mode under which every floating dtype named in a call (x.to(bf16),
    dtype=torch.float16, x.float(), x.half(), ...) becomes `target`; view(dtype) is refused."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode

    floating = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
    T = torch.Tensor
    casts = {T.float, T.half, T.double, T.bfloat16}
    views = {T.view, getattr(T, "view_as", None)}

    def swap(v: Any) -> Any:
        if isinstance(v, torch.dtype) and v in floating:
            return target
        if isinstance(v, str) and v in ("torch.BFloat16Tensor", "torch.HalfTensor", "torch.FloatTensor",
                                        "torch.DoubleTensor"):
            return target
        return v

    class Promote(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in views and (any(isinstance(a, torch.dtype) for a in args[1:]) or "dtype" in kwargs):
                raise RefusedReference("the reference reinterprets bits with view(dtype): a bit trick has no "
                                       "fp64 counterpart, so parity cannot make an oracle of it (write the "
                                       "reference with arithmetic, or judge the op declared by hand)")
            if func in casts:
                return args[0].to(target)
            if getattr(func, "__name__", "") == "type" and args and isinstance(args[0], torch.Tensor) and \
                    len(args) > 1:
                args = (args[0],) + tuple(swap(a) for a in args[1:])
                return func(*args, **kwargs)
            args = tuple(swap(a) for a in args)
            kwargs = {k: swap(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return Promote()


def _track_casts() -> Any:
    """A torch function mode that runs everything as written and remembers, for every cast to a
    narrower floating dtype, the value before it; undo(result) replaces an output that is the
    result of such a cast by the value before it. parity's judge allows one rounding to the
    output's dtype itself, so the reference contract's floor must not count it a second time."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    T = torch.Tensor
    casts = {T.to, T.type, T.float, T.half, T.bfloat16, T.double}

    class Track(TorchFunctionMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.before: Dict[int, Tuple[Any, Any]] = {}

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            res = func(*args, **(kwargs or {}))
            if func in casts and args and isinstance(args[0], torch.Tensor) and isinstance(res, torch.Tensor) \
                    and res is not args[0] and res.is_floating_point() and args[0].is_floating_point() \
                    and res.element_size() < args[0].element_size():
                self.before[id(res)] = (res, args[0])
            return res

        def undo(self, res: Any) -> Any:
            def one(t: Any) -> Any:
                while isinstance(t, torch.Tensor) and id(t) in self.before and self.before[id(t)][0] is t:
                    t = self.before[id(t)][1]
                return t
            if isinstance(res, dict):
                return {k: one(v) for k, v in res.items()}
            if isinstance(res, (tuple, list)):
                return type(res)(one(v) for v in res)
            return one(res)

    return Track()


class _NoAutocast:
    """What torch.autocast becomes while the reference runs promoted: autocast lowers precision
    below the torch function level (its casts are not calls the promotion mode sees), so inside
    the oracle it does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_NoAutocast":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Any) -> Any:  # used as a decorator
        return fn


def _disable_autocast() -> List[Tuple[Any, str, Any]]:
    torch = _torch()
    saved: List[Tuple[Any, str, Any]] = []
    for mod, name in ((torch, "autocast"), (getattr(torch, "cpu", None), None), (getattr(torch, "cuda", None), None)):
        if mod is None:
            continue
        if name is not None:
            saved.append((mod, name, getattr(mod, name, None)))
            setattr(mod, name, _NoAutocast)
            continue
        amp = getattr(mod, "amp", None)
        if amp is not None and hasattr(amp, "autocast"):
            saved.append((amp, "autocast", amp.autocast))
            setattr(amp, "autocast", _NoAutocast)
    return saved


def _restore(saved: List[Tuple[Any, str, Any]]) -> None:
    for mod, name, v in reversed(saved):
        setattr(mod, name, v)


class _Run:
    """Runs a PyTorch callable in one of three modes: 'f64' (every float promoted to float64),
    'f32' (every float promoted to float32) or 'native' (as written)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, mode: str, *args: Any, **kwargs: Any) -> Any:
        torch = _torch()
        if mode == "native":
            with torch.no_grad():
                return self.fn(*args, **kwargs)
        if mode == "native-unrounded":  # native, but an output's own final cast to a narrower dtype undone
            mode_ = _track_casts()
            with torch.no_grad(), mode_:
                res = self.fn(*args, **kwargs)
            return mode_.undo(res)
        target = torch.float64 if mode == "f64" else torch.float32
        old = torch.get_default_dtype()
        torch.set_default_dtype(target)
        saved = _disable_autocast()
        try:
            with torch.no_grad(), _promote_mode(target):
                return self.fn(*args, **kwargs)
        finally:
            torch.set_default_dtype(old)
            _restore(saved)


def _tdtype(name: str) -> Any:
    torch = _torch()
    return getattr(torch, "bool" if name == "bool" else name)


# -- the problem -------------------------------------------------------------------------------------
class Problem:
    """A benchmark problem read by load(): name, format ("sol", "flashinfer", "kernelbench"), path,
    contract, op (the parity.Op judged under that contract), roles {input: (role, vocab or None)},
    dtype (parity's input dtype), rule (the benchmark's own correctness rule), notes."""

    def __init__(self) -> None:
        self.name = ""
        self.format = ""
        self.path = ""
        self.contract = "reference"
        self.inputs: Dict[str, Dict[str, Any]] = {}   # name -> {dtype, shape (axes) or None (scalar)}
        self.outputs: Dict[str, Dict[str, Any]] = {}
        self.order: List[str] = []                     # call order of the reference (inputs, scalars)
        self.scalars: Dict[str, Any] = {}              # scalar inputs -> value (parity attrs)
        self.roles: Dict[str, Tuple[str, Optional[str]]] = {}
        self.role_why: Dict[str, str] = {}
        self.shapes: Dict[str, List[int]] = {}
        self.fixed: List[str] = []
        self.dtype = "f32"
        self.rule: Dict[str, Any] = {}
        self.notes: List[str] = []
        self.reference: Optional[_Run] = None
        self.op: Op = None  # type: ignore[assignment]
        self._kb: Dict[str, Any] = {}

    # the reference as parity.Op calls it: numpy arrays in (float64: the oracle; float32: the
    # contract evaluation), numpy arrays out in the same dtype
    def _oracle(self, contract: str) -> Callable[..., Any]:
        def reference(**kw: Any) -> Any:
            fl = [np.asarray(kw[k]).dtype for k in self.inputs if k in kw and self._is_float(k)]
            f64 = bool(fl) and fl[0] == np.float64
            mode = "f64" if f64 else ("f32" if contract == "math" else "native-unrounded")
            args = self._torch_args(kw, mode)
            try:
                outs = self._run_reference(mode, args)
            except ProblemError:
                raise
            except Exception as e:  # name what failed: an op with no fp64 path, a reference bug
                what = {"f64": "with every float promoted to float64 (the oracle)",
                        "f32": "with every float promoted to float32 (the math contract's evaluation)"}.get(
                            mode, "in its own dtypes (the reference contract's evaluation)")
                hint = ""
                m = re.search(r"\"(\w+)\" not implemented for '(\w+)'", str(e))
                if m:
                    hint = ": torch has no %s path for %s on this device" % (m.group(2), m.group(1))
                raise ProblemError("%s: the reference raises when run %s%s (%s: %s)" % (
                    self.path, what, hint, type(e).__name__, e)) from e
            want = np.float64 if f64 else np.float32
            return tuple(_to_numpy(o, want) for o in outs)
        reference.__name__ = "%s_reference_%s" % (self.name, contract)
        return reference

    def _is_float(self, k: str) -> bool:
        return self.inputs[k]["dtype"] in _FLOAT_NAMES

    def _torch_args(self, kw: Dict[str, Any], mode: str) -> Dict[str, Any]:
        """parity's arrays or tensors -> torch tensors in the problem's declared dtypes (values
        rounded to the declared dtype: the kernel gets exactly these), then promoted for the
        oracle modes."""
        torch = _torch()
        out: Dict[str, Any] = {}
        for k, spec in self.inputs.items():
            if spec["shape"] is None:
                out[k] = kw.get(k, self.scalars.get(k))
                continue
            v = kw[k]
            t = v if isinstance(v, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(v))
            t = t.detach().cpu().to(_tdtype(spec["dtype"]))
            if self._is_float(k) and mode in ("f64", "f32"):
                t = t.to(torch.float64 if mode == "f64" else torch.float32)
            out[k] = t
        return out

    def _run_reference(self, mode: str, args: Dict[str, Any]) -> List[Any]:
        assert self.reference is not None
        if self.format == "kernelbench":
            model = self._kb["models"][mode]
            res = self.reference(mode, model, *[args[k] for k in self.order])
        else:
            res = self.reference(mode, *[args[k] for k in self.order])
        return _outputs_list(res, list(self.outputs), self.path)

    def native(self, kw: Dict[str, Any]) -> List[Any]:
        """The reference in its own dtypes on the inputs a kernel gets (torch tensors)."""
        return self._run_reference("native", self._torch_args(kw, "native"))

    def _build_op(self, contract: str) -> Op:
        if contract not in CONTRACTS:
            raise ValueError("contract %r: expected math or reference" % (contract,))
        ins = {k: Input(tuple(self.inputs[k]["shape"]), role=r, **({"vocab": v} if v else {}))
               for k, (r, v) in self.roles.items()}
        outs = {o: tuple(s["shape"] or ()) for o, s in self.outputs.items()}
        red: Dict[str, List[str]] = {}
        for o, shp in outs.items():  # axes the inputs carry and the output does not: summed into it
            ds = sorted(set(d for k in ins for d in ins[k].shape if self._is_float(k)) - set(shp))
            if ds:
                red[o] = ds
        import parity
        name = self.name
        try:
            builtin = set(parity.ops())
        except Exception:  # pragma: no cover
            builtin = set()
        if name in builtin:  # a declared op may not take a built-in op's name
            name = name + "_problem"
        return Op(name, inputs=ins, outputs=outs, reference=self._oracle(contract), shapes=self.shapes,
                  attrs=dict(self.scalars), reductions=red or None, multilinear=False, fixed=self.fixed)

    def with_contract(self, contract: str) -> "Problem":
        p = copy.copy(self)
        p.contract = contract
        p.op = self._build_op(contract)
        return p

    def describe(self) -> str:
        lines = ["problem %s (%s: %s)" % (self.name, self.format, self.path),
                 "  contract: %s" % self.contract]
        for k, spec in self.inputs.items():
            if spec["shape"] is None:
                lines.append("  input %-18s scalar = %r" % (k, self.scalars.get(k)))
                continue
            role, vocab = self.roles[k]
            lines.append("  input %-18s %-9s [%s]  role %s%s  (%s)" % (
                k, spec["dtype"], ", ".join(spec["shape"]), role, " over %s" % vocab if vocab else "",
                self.role_why.get(k, "")))
        for o, spec in self.outputs.items():
            lines.append("  output %-17s %-9s [%s]" % (o, spec["dtype"], ", ".join(spec["shape"] or [])))
        lines.append("  sizes: %s" % ", ".join("%s=%s" % (d, "/".join(str(x) for x in s))
                                               for d, s in self.shapes.items()))
        for n in self.notes:
            lines.append("  note: %s" % n)
        return "\n".join(lines)


def _to_numpy(t: Any, want: Any) -> Any:
    torch = _torch()
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float64 if want == np.float64 else torch.float32)
        return t.numpy().astype(want, copy=False)
    return np.asarray(t, dtype=want)


def _outputs_list(res: Any, names: List[str], path: str) -> List[Any]:
    if isinstance(res, dict):
        missing = [n for n in names if n not in res]
        if missing:
            raise ProblemError("%s: the reference returns no %s" % (path, ", ".join(missing)))
        return [res[n] for n in names]
    if isinstance(res, (tuple, list)):
        if len(res) != len(names):
            raise ProblemError("%s: the reference returns %d outputs, the definition declares %d (%s)" % (
                path, len(res), len(names), ", ".join(names)))
        return list(res)
    if len(names) != 1:
        raise ProblemError("%s: the reference returns one output, the definition declares %d" % (path, len(names)))
    return [res]


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
        raise ProblemError("integer input %s: parity cannot tell which axis bounds its values (no vocabulary "
                           "axis, and the reference does not index a tensor with it); integer inputs other "
                           "than ids are not supported yet" % name)
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
                for a in s["shape"]:
                    if a not in axes:
                        raise ProblemFileError(def_path, "%s.%s.shape" % (part, k), "axis %r is not in axes" % a)
            if part == "outputs" and dt not in _FLOAT_NAMES:
                raise ProblemFileError(def_path, "outputs.%s.dtype" % k,
                                       "%s: integer outputs (indices, top-k) are not judged yet" % dt)
            if part == "outputs" and s["shape"] is None:
                raise ProblemFileError(def_path, "outputs.%s.shape" % k, "scalar outputs are not judged yet")
    p.inputs = {k: {"dtype": s["dtype"], "shape": s["shape"]} for k, s in d["inputs"].items()}
    p.outputs = {k: {"dtype": s["dtype"], "shape": s["shape"]} for k, s in d["outputs"].items()}
    p.order = list(p.inputs)
    ns = _exec_source(src, p.name, def_path)
    if not callable(ns.get("run")):
        raise ProblemFileError(def_path, "reference", "defines no function run")
    p.reference = _Run(ns["run"])

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
    """The element count of get_inputs()'s tensors plus the Model's parameters, every tensor
    factory run on the meta device (no memory, no compute): a KernelBench problem of billions of
    elements is sized, not drawn."""
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
            pass
    return n


def _kb_scale(ns: Dict[str, Any], path: str, cap: int) -> str:
    """Halve the largest module-level integer constant get_inputs() or get_init_inputs() use until
    the inputs and the Model's parameters hold at most cap elements in all (KernelBench sizes its problems for a GPU; the fp64 oracle runs on
    the CPU). The constants are shared with get_init_inputs() and the Model, so the shapes stay
    consistent. Returns what was changed ("" when nothing)."""
    names = sorted(set(n for f in ("get_inputs", "get_init_inputs") for n in getattr(ns[f], "__code__").co_names
                       if isinstance(ns.get(n), int) and not isinstance(ns.get(n), bool)))
    orig = {n: ns[n] for n in names}
    try:
        total = _meta_numel(ns)
    except Exception:  # a get_inputs the meta device cannot run: drawn as written
        return ""
    steps = 0
    while total > cap and steps < 200:
        big = max(names, key=lambda n: ns[n], default=None)
        if big is None or ns[big] <= 1:
            break
        ns[big] = (ns[big] + 1) // 2
        total = _meta_numel(ns)
        steps += 1
    return ", ".join("%s %d -> %d" % (n, orig[n], ns[n]) for n in names if ns[n] != orig[n])


_KB_PRECISION = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


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
    scaled = _kb_scale(ns, path, max_elems)
    if scaled:
        p.notes.append("scaled shapes (inputs and parameters over %d elements; the fp64 oracle runs on the "
                       "CPU): %s" % (max_elems, scaled))
    try:
        torch.manual_seed(seed)
        init = list(ns["get_init_inputs"]())
        torch.manual_seed(seed)
        model = ns["Model"](*init)
        torch.manual_seed(seed)
        xs = list(ns["get_inputs"]())
    except Exception as e:
        raise ProblemFileError(path, "Model", "building the model or its inputs raises %s: %s" % (type(e).__name__, e)) from e
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
    with torch.no_grad():
        ref = model(*xs)
    outs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor) or not o.is_floating_point():
            raise ProblemFileError(path, "Model.forward", "output %d is not a floating tensor (not judged yet)" % i)
        shp = []
        for j, s in enumerate(o.shape):
            ax = next((k for k, v in dims.items() if v == int(s)), None)
            if ax is None:
                ax = "out%d_%d" % (i, j)
                dims[ax] = int(s)
            shp.append(ax)
        p.outputs["output" if len(outs) == 1 else "output%d" % i] = {
            "dtype": prec if precision != "fp32" else str(o.dtype).replace("torch.", ""), "shape": shp}
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
    m64 = copy.deepcopy(model).to(torch.float64)
    native = model if precision == "fp32" else copy.deepcopy(model).to(_tdtype(prec))
    p._kb = {"ns": ns, "seed": seed, "init": init, "precision": precision,
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
    return p.with_contract(contract)


# -- solutions --------------------------------------------------------------------------------------
class Unsupported(Exception):
    """A solution that cannot run here (Triton/CUDA without a GPU, a C++ build)."""


class _Recorder:
    """The candidate as parity calls it (keyword torch tensors in parity's dtype): inputs cast to
    the problem's declared dtypes, the solution called in the benchmark's convention. It also
    keeps, per workload (told apart by parity.check's progress lines), the last call's inputs and
    outputs and whether that call's inputs repeat the call before it: the harness's last call of
    a workload is the judged one, made on the same inputs as its probe run just before (one call
    alone on a production workload); the benchmark's rule then needs no second run."""

    def __init__(self, problem: Problem, call: Callable[[Dict[str, Any]], List[Any]], label: str) -> None:
        self.problem, self._call, self.label = problem, call, label
        self.__name__ = label
        self.__qualname__ = label
        self.__module__ = "problem"
        self.__doc__ = label
        self.group = -1
        self.last: Dict[int, Tuple[Dict[str, Any], List[Any], bool, int]] = {}

    def progress(self, msg: str) -> None:
        m = re.match(r"\s*\[(\d+)/\d+\]", msg)
        if m:
            self.group = int(m.group(1)) - 1

    def __call__(self, **kw: Any) -> Any:
        torch = _torch()
        args = self.problem._torch_args(kw, "native")
        outs = list(self._call(args))
        prev = self.last.get(self.group)
        same = prev is not None and all(
            (isinstance(v, torch.Tensor) and isinstance(prev[0].get(k), torch.Tensor) and v.shape == prev[0][k].shape
             and torch.equal(v, prev[0][k])) or (not isinstance(v, torch.Tensor) and v == prev[0].get(k))
            for k, v in args.items())
        keep = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
        self.last[self.group] = (keep, [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs],
                                 bool(same), (prev[3] if prev else 0) + 1)
        return tuple(outs)

    def judged(self, i: int) -> Optional[Tuple[Dict[str, Any], List[Any]]]:
        """The judged call of the i-th workload, when it can be told: its inputs repeat the probe
        run's, or it was the workload's only call."""
        g = self.last.get(i)
        if g is None or not (g[2] or g[3] == 1):
            return None
        return g[0], g[1]


def _axis_sizes(problem: Problem, args: Dict[str, Any]) -> Dict[str, int]:
    sz = {a: s[0] for a, s in problem.shapes.items()}
    for k, spec in problem.inputs.items():
        if spec["shape"] is not None:
            for a, n in zip(spec["shape"], args[k].shape):
                sz[a] = int(n)
    return sz


def load_solution(problem: Problem, path: Optional[str]) -> Tuple[Callable[[Dict[str, Any]], List[Any]], str]:
    """(call(args) -> outputs, label) for the solution at path (None: the problem's own reference,
    run natively). Raises Unsupported with the reason when it cannot run here."""
    torch = _torch()
    if path is None:
        return (lambda args: problem.native(args)), "reference (native dtypes)"
    if problem.format == "kernelbench":
        with open(path) as f:
            src = f.read()
        if ("load_inline" in src or "triton" in src or ".cuda" in src) and not torch.cuda.is_available():
            raise Unsupported("the solution builds or launches GPU code (load_inline/Triton/CUDA) and no "
                              "CUDA device is available here")
        ns = _exec_source(src, "solution_" + os.path.basename(path), path)
        if "ModelNew" not in ns:
            raise ProblemFileError(path, "ModelNew", "a KernelBench solution defines class ModelNew")
        kb = problem._kb
        torch.manual_seed(kb["seed"])
        init = list(kb["ns"]["get_init_inputs"]())
        torch.manual_seed(kb["seed"])
        try:
            mnew = ns["ModelNew"](*init)
        except Exception as e:
            raise ProblemFileError(path, "ModelNew", "building it with the problem's init inputs raises %s: %s"
                                   % (type(e).__name__, e)) from e
        if kb["precision"] != "fp32":
            mnew = mnew.to(dtype=_tdtype(_KB_PRECISION[kb["precision"]]))

        def call_kb(args: Dict[str, Any]) -> List[Any]:
            with torch.no_grad():
                res = mnew(*[args[k] for k in problem.order])
            return _outputs_list(res, list(problem.outputs), path)
        return call_kb, "ModelNew (%s)" % os.path.basename(path)
    d = _read_json(path)
    spec = d.get("spec") if isinstance(d, dict) else None
    if not isinstance(spec, dict):
        raise ProblemFileError(path, "spec", "a solution needs a spec object")
    langs = spec.get("languages") or ([spec["language"]] if spec.get("language") else [])
    if not langs:
        raise ProblemFileError(path, "spec.languages", "missing (SOL: spec.languages, FlashInfer: spec.language)")
    langs = [str(x).lower() for x in langs]
    ep = spec.get("entry_point")
    if not isinstance(ep, str) or ep.count("::") != 1:
        raise ProblemFileError(path, "spec.entry_point", "expected \"file.py::function\", got %r" % (ep,))
    if any(x not in _PY_LANGS for x in langs):
        raise Unsupported("language %s: building C++/CUDA solutions is not implemented (only Python entry "
                          "points run)" % ", ".join(langs))
    if any(x not in _CPU_LANGS for x in langs) and not torch.cuda.is_available():
        raise Unsupported("language %s needs a CUDA device and none is available here" % ", ".join(langs))
    if any(x not in _CPU_LANGS for x in langs):
        raise Unsupported("language %s: GPU solutions are not run by this slice yet" % ", ".join(langs))
    sources = d.get("sources")
    if not isinstance(sources, list) or not sources:
        raise ProblemFileError(path, "sources", "expected a list of {path, content}")
    tmp = tempfile.mkdtemp(prefix="parity_solution_")
    for i, s in enumerate(sources):
        if not isinstance(s, dict) or not isinstance(s.get("path"), str) or not isinstance(s.get("content"), str):
            raise ProblemFileError(path, "sources[%d]" % i, "expected {path, content}")
        rel = os.path.normpath(s["path"])
        if os.path.isabs(rel) or rel.startswith(".."):
            raise ProblemFileError(path, "sources[%d].path" % i, "%r leaves the solution's folder" % s["path"])
        full = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(s["content"])
    file, fn_name = ep.split("::")
    full = os.path.join(tmp, os.path.normpath(file))
    if not os.path.isfile(full):
        raise ProblemFileError(path, "spec.entry_point", "file %s is not among the sources" % file)
    sys.path.insert(0, tmp)
    try:
        mspec = importlib.util.spec_from_file_location("parity_solution_%d" % abs(hash(full)), full)
        mod = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
        mspec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception as e:
        raise ProblemFileError(path, "sources", "%s raises on import: %s: %s" % (file, type(e).__name__, e)) from e
    finally:
        sys.path.remove(tmp)
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ProblemFileError(path, "spec.entry_point", "%s defines no function %s" % (file, fn_name))
    dps = bool(spec.get("destination_passing_style", True))
    names = list(problem.outputs)

    def call_sol(args: Dict[str, Any]) -> List[Any]:
        pos = [args[k] for k in problem.order]
        with torch.no_grad():
            if dps:
                sz = _axis_sizes(problem, args)
                outs = [torch.empty([sz[a] for a in problem.outputs[o]["shape"]],
                                    dtype=_tdtype(problem.outputs[o]["dtype"])) for o in names]
                fn(*pos, *outs)
                return outs
            return _outputs_list(fn(*pos), names, path)
    return call_sol, "%s (%s, %s)" % (d.get("name", os.path.basename(path)), ep,
                                      "destination-passing" if dps else "value-returning")


# -- the benchmark's own rule -----------------------------------------------------------------------
def rule_text(rule: Dict[str, Any]) -> str:
    n = rule["name"]
    if n == "sol-execbench":
        s = "SOL-ExecBench: |x-y| <= %g + %g|y| on >= %g%% of elements after fp32 casts, no NaN/Inf, not all zero" % (
            rule["max_atol"], rule["max_rtol"], 100 * rule["required_matched_ratio"])
        if rule.get("max_error_cap") is not None:
            s += ", max |x-y| <= %g" % rule["max_error_cap"]
        return s
    if n == "flashinfer-bench":
        return ("FlashInfer-Bench: an element fails when |x-y| > %g and |x-y|/(|y|+1e-8) > %g; >= %g%% must pass"
                % (rule["atol"], rule["rtol"], 100 * rule["required_matched_ratio"]))
    return "KernelBench: torch.allclose(ref, out, atol=%g, rtol=%g) (%s)" % (rule["atol"], rule["rtol"], rule["precision"])


def _t32(t: Any) -> Any:
    torch = _torch()
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().to(torch.float32)
    return torch.from_numpy(np.ascontiguousarray(np.asarray(t, dtype=np.float32)))


def rule_check(rule: Dict[str, Any], out: Any, ref: Any) -> Tuple[bool, str]:
    """The benchmark's rule on one output (re-implemented from its public description), in torch
    after fp32 casts of both."""
    torch = _torch()
    x, y = _t32(out), _t32(ref)
    if tuple(x.shape) != tuple(y.shape):
        return False, "shape %s, expected %s" % (tuple(x.shape), tuple(y.shape))
    if x.numel() == 0:
        return True, "no elements"
    err = (x - y).abs()
    n = rule["name"]
    if n == "sol-execbench":
        if rule.get("allow_negative_inf"):
            both = (x == -math.inf) & (y == -math.inf)
            keep = ~both
            if bool((~(torch.isfinite(x) & torch.isfinite(y)) & keep).any()):
                return False, "NaN/Inf in the output or the reference"
            x, y, err = x[keep], y[keep], err[keep]
        elif not (bool(torch.isfinite(x).all()) and bool(torch.isfinite(y).all())):
            return False, "NaN/Inf in the output or the reference"
        if bool((y != 0).any()) and not bool((x != 0).any()):
            return False, "all-zero output"
        if err.numel() == 0:
            return True, "no finite elements"
        bad = err > rule["max_atol"] + rule["max_rtol"] * y.abs()
        ratio = 1.0 - float(bad.sum()) / err.numel()
        mx = float(err.max())
        ok = ratio >= rule["required_matched_ratio"]
        if rule.get("max_error_cap") is not None and mx > rule["max_error_cap"]:
            ok = False
        return bool(ok), "matched %.4f, max |x-y| %.3g" % (ratio, mx)
    if n == "flashinfer-bench":  # NaN compares false: a NaN element is not counted as failing
        bad = (err > rule["atol"]) & (err / (y.abs() + 1e-8) > rule["rtol"])
        ratio = 1.0 - float(bad.sum()) / err.numel()
        return bool(ratio >= rule["required_matched_ratio"]), "matched %.4f, max |x-y| %.3g" % (
            ratio, float(torch.nan_to_num(err, nan=math.inf).max()))
    ok = bool(torch.allclose(y, x, atol=rule["atol"], rtol=rule["rtol"]))  # KernelBench: allclose(ref, new)
    return ok, "max |x-y| %.3g" % float(torch.nan_to_num(err, nan=math.inf).max())


def apply_rule(problem: Problem, call: Callable[[Dict[str, Any]], List[Any]], workloads: Sequence[str],
               seed: int, given: Optional[Dict[str, Dict[str, Any]]] = None,
               rec: Optional[_Recorder] = None) -> Dict[str, Any]:
    """The benchmark's rule on the inputs parity judged, the solution's outputs against the
    reference run natively on them: the judged call's inputs and outputs as the recorder kept
    them, else the inputs regenerated (parity.inputs, the same seed and dtype; a given workload's
    own inputs) and the solution called once more."""
    import parity
    results = []
    for i, w in enumerate(workloads):
        kept = rec.judged(i) if rec is not None else None
        if kept is not None:
            args, outs = kept
        else:
            if given and w in given:  # the problem's own workload: the inputs it was given
                args = problem._torch_args(given[w], "native")
            else:
                args = problem._torch_args(dict(parity.inputs(problem.op, w, seed=seed, dtype=problem.dtype,
                                                              like="torch").items()), "native")
            try:
                outs = call(args)
            except Exception as e:  # parity's verdict already says how it failed
                results.append({"workload": w, "output": "", "pass": False,
                                "detail": "%s: %s" % (type(e).__name__, e)})
                continue
        refs = problem.native(args)
        for o, x, y in zip(problem.outputs, outs, refs):
            ok, det = rule_check(problem.rule, x, y)
            results.append({"workload": w, "output": o, "shape": list(_t32(y).shape), "pass": ok, "detail": det})
    verdict = "pass" if results and all(r["pass"] for r in results) else ("fail" if results else "not-run")
    return {"name": problem.rule["name"], "verdict": verdict, "rule": rule_text(problem.rule), "calls": results}


# -- judging ----------------------------------------------------------------------------------------
class Judgement:
    """parity's verdict under the problem's contract beside the benchmark's own rule."""

    def __init__(self, problem: Problem, report: Any, rule: Dict[str, Any], solution: str,
                 verdict: Optional[str] = None, reason: str = "", seconds: float = 0.0) -> None:
        self.problem, self.report, self.rule, self.solution = problem, report, rule, solution
        self.verdict = verdict or report.verdict
        self.reason, self.seconds = reason, seconds
        self.reproduce = ""  # the parity problem command that judges the same (set by judge())

    @property
    def ok(self) -> bool:
        return self.verdict == "faithful"

    def to_dict(self) -> Dict[str, Any]:
        p = self.problem
        d: Dict[str, Any] = {
            "verdict": self.verdict, "contract": p.contract,
            "benchmark_rule": {"name": self.rule["name"], "verdict": self.rule["verdict"],
                               "rule": self.rule.get("rule", ""), "calls": self.rule.get("calls", [])},
            "problem": {"name": p.name, "format": p.format, "path": p.path, "dtype": p.dtype,
                        "roles": {k: {"role": r, "vocab": v, "why": p.role_why.get(k, "")}
                                  for k, (r, v) in p.roles.items()},
                        "scalars": p.scalars, "sizes": p.shapes, "notes": p.notes},
            "solution": self.solution, "seconds": round(self.seconds, 3)}
        if self.reason:
            d["reason"] = self.reason
        if self.reproduce:
            d["reproduce"] = self.reproduce
        if self.report is not None:
            d["parity"] = json.loads(self.report.to_json())
        return d

    def text(self) -> str:
        lines = [self.problem.describe(), "solution: %s" % self.solution, ""]
        if self.report is not None:
            lines.append(str(self.report).rstrip())
            lines.append("")
        lines.append("parity verdict (contract %s): %s%s" % (self.problem.contract, self.verdict,
                                                            " -- " + self.reason if self.reason else ""))
        lines.append("benchmark rule (%s): %s" % (self.rule.get("rule", self.rule["name"]), self.rule["verdict"]))
        if self.reproduce:
            lines.append("reproduce: %s" % self.reproduce)
        return "\n".join(lines) + "\n"


_ST_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I64": "int64",
              "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def _read_safetensors(path: str, key: str, where: str) -> Any:
    """One tensor of a .safetensors file (an 8-byte little-endian header length, a JSON header
    {key: {dtype, shape, data_offsets}}, the data), as a torch tensor."""
    torch = _torch()
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(n))
            if key not in head:
                raise ProblemFileError(where, "tensor_key", "%s holds no tensor %r" % (path, key))
            meta = head[key]
            a, b = meta["data_offsets"]
            f.seek(8 + n + a)
            raw = f.read(b - a)
    except OSError as e:
        raise ProblemFileError(where, "path", "cannot read %s: %s" % (path, e.strerror)) from e
    dt = _ST_DTYPES.get(meta["dtype"])
    if dt is None:
        raise ProblemFileError(where, "dtype", "%s: safetensors dtype %s not supported" % (path, meta["dtype"]))
    t = torch.frombuffer(bytearray(raw), dtype=_tdtype(dt)) if raw else torch.empty(0, dtype=_tdtype(dt))
    return t.reshape(meta["shape"]).clone()


def own_workloads(problem: Problem, seed: int = 1, limit: int = 6,
                  max_elems: int = 1 << 22) -> Tuple[List[Dict[str, Any]], Dict[str, Dict[str, Any]], List[str]]:
    """The problem's own workload lines as given workloads for parity.check: their axes, their
    inputs (`random`: torch.randn / randint in the declared dtypes, seeded; `scalar`; `safetensors`
    loaded; `custom`: the definition's custom_inputs_entrypoint), at most `limit` lines whose
    largest tensor holds at most max_elems elements, those whose scalars are the op's (an op has
    one set of attributes). Returns (given workloads, {name: torch inputs}, notes)."""
    torch = _torch()
    lines = getattr(problem, "own_lines", [])
    out: List[Dict[str, Any]] = []
    args_of: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    skipped_big = skipped_scalar = 0
    axes = getattr(problem, "axes_spec", {})
    for i, w in enumerate(lines):
        if len(out) >= limit:
            break
        sizes = {a: s[0] for a, s in problem.shapes.items() if a in problem.fixed}
        sizes.update({a: int(v) for a, v in w["axes"].items()})
        for a, spec in axes.items():
            if isinstance(spec, dict) and spec.get("type") == "expr":
                sizes[a] = _eval_expr(spec["expression"], sizes, problem.path, a)
        ins = w.get("inputs") or {}
        scal = {k: v.get("value") for k, v in ins.items() if isinstance(v, dict) and v.get("type") == "scalar"}
        if any(problem.scalars.get(k) != v for k, v in scal.items() if k in problem.scalars):
            skipped_scalar += 1
            continue
        try:
            big = max(int(np.prod([sizes[a] for a in s["shape"]])) for s in
                      list(problem.inputs.values()) + list(problem.outputs.values()) if s["shape"] is not None)
        except KeyError as e:
            raise ProblemFileError(problem.path, "workload line %d: axes" % (i + 1), "no size for axis %s" % e) from e
        if big > max_elems:
            skipped_big += 1
            continue
        gen = torch.Generator().manual_seed(int(seed) * 1000003 + i)
        args: Dict[str, Any] = {}
        custom = [k for k, v in ins.items() if isinstance(v, dict) and v.get("type") == "custom"]
        if custom:
            entry = getattr(problem, "custom_entry", None)
            if entry is None:
                raise ProblemFileError(problem.path, "custom_inputs_entrypoint",
                                       "workload line %d has custom inputs and the definition names no entry point" % (i + 1))
            torch.manual_seed(int(seed) * 1000003 + i)
            made = entry(dict(sizes, **problem.scalars), torch.device("cpu"))
            args.update({k: v for k, v in made.items() if k in problem.inputs})
        for k, s in problem.inputs.items():
            if s["shape"] is None or k in args:
                continue
            shape = [sizes[a] for a in s["shape"]]
            kind = (ins.get(k) or {}).get("type", "random")
            if kind == "safetensors":
                rel = ins[k].get("path", "")
                cands = [rel] if os.path.isabs(rel) else [os.path.join(problem.own_root, rel),  # type: ignore[attr-defined]
                                                          os.path.join(os.path.dirname(problem.path), rel)]
                path = next((c for c in cands if os.path.isfile(c)), cands[0])
                t = _read_safetensors(path, ins[k].get("tensor_key", k), problem.path)
                args[k] = t.to(_tdtype(s["dtype"]))
            elif s["dtype"] in _FLOAT_NAMES:
                args[k] = torch.randn(shape, generator=gen).to(_tdtype(s["dtype"]))
            else:
                role, vocab = problem.roles.get(k, ("", None))
                hi = sizes.get(vocab, 2) if vocab else 2
                args[k] = torch.randint(0, hi, shape, generator=gen).to(_tdtype(s["dtype"]))
        name = "wl-%d" % (i + 1)
        given: Dict[str, Any] = {}
        for k, t in args.items():
            if problem._is_float(k):
                if problem.dtype == "bf16":
                    given[k] = t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
                else:
                    given[k] = t.to(torch.float16 if problem.dtype == "f16" else torch.float32).numpy().copy()
            else:
                given[k] = t.to(torch.int64).numpy().copy()
        out.append({"name": name, "inputs": given, "attrs": dict(problem.scalars)})
        args_of[name] = dict(args, **problem.scalars)
    if out:
        notes.append("the problem's own workloads judged too: %s (its axes and inputs, float inputs given in %s)"
                     % (", ".join(x["name"] for x in out), problem.dtype))
    if skipped_big:
        notes.append("%d own workload line(s) over %d elements per tensor not judged" % (skipped_big, max_elems))
    if skipped_scalar:
        notes.append("%d own workload line(s) with other scalar values not judged (one op, one set of scalars)"
                     % skipped_scalar)
    return out, args_of, notes


def judge(problem: Problem, solution: Optional[str] = None, *, contract: Optional[str] = None, seed: int = 1,
          quick: bool = False, workloads: Any = None, own: bool = True) -> Judgement:
    """parity.check of the solution (None: the problem's reference run natively) on the problem's
    op under `contract` (default: the problem's), with the benchmark's own rule beside it. Unless
    quick (or workloads= is given, or own=False), the problem's own workload lines are judged
    too (own_workloads)."""
    import parity
    if contract and contract != problem.contract:
        problem = problem.with_contract(contract)
    t0 = time.perf_counter()
    try:
        call, label = load_solution(problem, solution)
    except Unsupported as e:
        return Judgement(problem, None, {"name": problem.rule["name"], "verdict": "not-run",
                                         "rule": rule_text(problem.rule), "calls": []},
                         solution or "", verdict="unsupported", reason=str(e))
    rec = _Recorder(problem, call, label)
    wl = workloads if workloads is not None else ("quick" if quick else None)
    given: Dict[str, Dict[str, Any]] = {}
    if own and workloads is None and not quick:
        dicts, given, notes = own_workloads(problem, seed)
        if dicts:
            problem = copy.copy(problem)
            problem.notes = problem.notes + notes
            wl = problem.op.workload_names(None) + dicts
    report = parity.check(problem.op, rec, workloads=wl, seed=seed, dtype=problem.dtype, like="torch",
                          progress=rec.progress)
    rule = apply_rule(problem, call, [w.name for w in report.workloads], seed, given, rec)
    j = Judgement(problem, report, rule, label, seconds=time.perf_counter() - t0)
    j.reproduce = _reproduce(problem, solution, seed, quick and workloads is None)
    return j


def _reproduce(problem: Problem, solution: Optional[str], seed: int, quick: bool) -> str:
    import shlex
    path = problem.path
    if problem.format == "sol" and os.path.basename(path) == "definition.json":
        path = os.path.dirname(path)
    cmd = ["parity", "problem", path]
    if solution:
        cmd += ["--solution", solution]
    cmd += ["--contract", problem.contract, "--seed", str(seed)]
    prec = problem._kb.get("precision") if problem._kb else None
    if prec and prec != "fp32":
        cmd += ["--precision", prec]
    if quick:
        cmd.append("--quick")
    return " ".join(shlex.quote(c) for c in cmd)


# -- CLI --------------------------------------------------------------------------------------------
_USAGE = """usage: parity problem PATH [--solution FILE] [--contract math|reference] [--json FILE] [--seed N] [--quick]
                      [--solution-name NAME] [--precision fp32|fp16|bf16]

Judge a benchmark problem as it is: PATH is a SOL-ExecBench / FlashInfer-Bench problem folder
(definition.json, optional workload.jsonl and reference.py) or definition JSON, or a KernelBench
problem .py file. The solution is the benchmark's own format (a solution JSON with a Python entry
point "file.py::fn", destination-passing or value-returning; a KernelBench file with ModelNew);
without --solution the problem's reference itself, run in its own dtypes, is judged.
--contract: math (fp32 internals, one rounding per output) or reference (default: the roundings
the reference performs are allowed). The benchmark's own rule is reported beside the verdict.
--precision: a KernelBench problem's precision (its inputs and models cast to it; tolerance 1e-4 for
fp32, 1e-2 otherwise, as KernelBench's). Without --quick the problem's own workloads are judged too.
PATH may also be a folder of problem folders / KernelBench files: each is judged (its solution,
with --solution-name NAME, the file of that name inside each problem folder).
exit codes: 0 faithful, 1 not faithful (or unsupported), 2 usage, 3 bad problem or solution file.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with parity's wording
        sys.stderr.write("parity problem: %s\n%s" % (message, _USAGE))
        raise SystemExit(2)


def _is_problem(path: str) -> bool:
    """A problem folder (definition.json inside) or a KernelBench problem file (class Model and
    get_inputs, no ModelNew: solution files beside the problems are skipped)."""
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = _Parser(prog="parity problem", add_help=False)
    ap.add_argument("path", nargs="?")
    ap.add_argument("--solution")
    ap.add_argument("--solution-name")
    ap.add_argument("--contract", choices=CONTRACTS)
    ap.add_argument("--json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--precision", choices=tuple(_KB_PRECISION), default="fp32")
    ap.add_argument("-h", "--help", action="store_true")
    a = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    if a.help:
        sys.stdout.write(_USAGE)
        return 0
    if not a.path:
        ap.error("PATH is required")
        return 2
    try:
        import torch  # noqa: F401
    except ImportError as e:
        sys.stderr.write("parity problem: needs torch in %s (%s)\n" % (sys.executable, e))
        return 2
    if not os.path.exists(a.path):
        sys.stderr.write("parity problem: %s: no such file or folder\n" % a.path)
        return 3
    if os.path.isdir(a.path) and not os.path.isfile(os.path.join(a.path, "definition.json")):
        items = sorted(os.path.join(a.path, n) for n in os.listdir(a.path))
        items = [x for x in items if _is_problem(x)]
        if not items:
            sys.stderr.write("parity problem: %s: neither a problem nor a folder of problems\n" % a.path)
            return 3
        if a.solution:
            ap.error("--solution names one file; with a folder of problems use --solution-name")
            return 2
    else:
        items = [a.path]
    dicts: List[Dict[str, Any]] = []
    worst = 0
    for item in items:
        sol = a.solution
        if a.solution_name and os.path.isdir(item):
            cand = os.path.join(item, a.solution_name)
            sol = cand if os.path.isfile(cand) else None
        try:
            p = load(item, a.contract, precision=a.precision)
            j = judge(p, sol, seed=a.seed, quick=a.quick)
        except ProblemError as e:
            sys.stderr.write("parity problem: %s\n" % e)
            if len(items) == 1:
                return 3
            dicts.append({"verdict": "bad-problem", "problem": {"path": item}, "reason": str(e)})
            worst = max(worst, 3)
            continue
        sys.stdout.write(j.text())
        if len(items) > 1:
            sys.stdout.write("\n")
        dicts.append(j.to_dict())
        worst = max(worst, 0 if j.ok else 1)
    if len(items) > 1:
        sys.stdout.write("summary\n")
        for d in dicts:
            sys.stdout.write("  %-40s %-12s rule %s\n" % (d["problem"].get("name", d["problem"]["path"]),
                                                      d["verdict"], d.get("benchmark_rule", {}).get("verdict", "-")))
    if a.json:
        out = dicts[0] if len(items) == 1 else {"verdict": "faithful" if worst == 0 else "unfaithful",
                                                "problems": dicts}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
            f.write("\n")
    return worst


if __name__ == "__main__":
    sys.exit(main())

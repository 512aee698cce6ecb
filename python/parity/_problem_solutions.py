"""parity.problems: the benchmark's solution formats called as the benchmark calls them (issue
#37; docs/problems.md), the recorder that keeps each workload's judged call, and the problem's
own workload lines made into given workloads."""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from . import _problem_build as _build
from . import _problem_isolate as _isolate
from ._problem_core import Problem, _same_args
from ._problem_formats import _KB_PRECISION, _eval_expr, _exec_source, _read_json
from ._problem_oracle import (_CPU_LANGS, _FLOAT_NAMES, _PY_LANGS, ProblemFileError, _outputs_list, _tdtype,
                              _torch, grad_mode, run_low)


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
        # called with i when the check moves on from the i-th workload (its calls are all made)
        self.on_done: Optional[Callable[[int], None]] = None
        self._finished: Set[int] = set()
        # a problem without float outputs runs through the harness on the op that draws its
        # workloads (_problem_judge.py), whose outputs are the integer ones as float64
        self.ints_as_floats = False
        # parity.check judges the declared op's outputs, the float ones; the integer ones are
        # kept (self.last) for the exact judgement after it
        self._floats = [i for i, o in enumerate(problem.outputs) if o in problem.float_outputs]

    def progress(self, msg: str) -> None:
        m = re.match(r"\s*\[(\d+)/\d+\]", msg)
        if m:
            self.finished(self.group)
            self.group = int(m.group(1)) - 1
        elif re.match(r" {6}\S.* \([0-9.]+ s\)$", msg):  # the workload's verdict line: its calls are made
            self.finished(self.group)

    def finished(self, i: int) -> None:
        """The check is done with the i-th workload: on_done(i), once."""
        if self.on_done is not None and i >= 0 and i not in self._finished:
            self._finished.add(i)
            self.on_done(i)

    def __call__(self, **kw: Any) -> Any:
        torch = _torch()
        args = self.problem._torch_args(kw, "native")
        outs = list(self._call(args))
        prev = self.last.get(self.group)
        same = prev is not None and _same_args(prev[0], args)
        # inputs equal to the previous call's: keep that call's copy (the values are the same)
        keep = prev[0] if same and prev is not None else \
            {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
        self.last[self.group] = (keep, [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs],
                                 bool(same), (prev[3] if prev else 0) + 1)
        if self.ints_as_floats:  # the harness's calls of a problem with integer outputs only
            return tuple(o.to(torch.float64) if isinstance(o, torch.Tensor) else o for o in outs)
        return tuple(outs[i] for i in self._floats) if len(outs) == len(self.problem.outputs) else tuple(outs)

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


# A KernelBench ModelNew that needs a CUDA device: CUDA sources for load_inline/load, Triton, tensors
# or modules moved to CUDA. A load_inline of C++ sources alone builds and runs on the CPU.
_GPU_SOURCE = re.compile(r"cuda_sources|\.cu\b|\btriton\b|\.cuda\(|torch\.cuda\.|device\s*=\s*['\"]cuda|"
                         r"with_cuda\s*=\s*True|__global__")
_CPP_SOURCE = re.compile(r"\bload_inline\b|cpp_extension")


def _isolate_here(problem: Problem) -> bool:
    """A compiled solution runs in a child process, unless this is that child (or the problem was
    not made by load(), which the child would need to repeat)."""
    return not os.environ.get(_isolate.CHILD_ENV) and bool(problem.load_args)


def _isolated(problem: Problem, path: str, label: str, t0: float) -> Tuple[Callable[[Dict[str, Any]], List[Any]], str]:
    return _isolate.IsolatedCall(problem.load_args, problem.contract, os.path.abspath(path), t0 - 1.0), label


def _child_loader(load_args: Dict[str, Any], contract: str, solution: str) -> Callable[[Dict[str, Any]], List[Any]]:
    """In the child process: the same problem (load()'s own arguments) and solution, run here."""
    from ._problem_formats import load
    la = dict(load_args)
    p = load(la.pop("path"), contract, **la)
    return load_solution(p, solution)[0]


def serve_child(fd: int) -> None:
    """The child process's entry (_problem_isolate.IsolatedCall starts it)."""
    _isolate.serve(fd, _child_loader)


def _python_entry(path: str, tmp: str, file: str, fn_name: str) -> Any:
    """The function fn_name of the solution's Python file (its sources written in tmp)."""
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
    return fn


def load_solution(problem: Problem, path: Optional[str], isolate: bool = False
                  ) -> Tuple[Callable[[Dict[str, Any]], List[Any]], str]:
    """(call(args) -> outputs, label) for the solution at path (None: the problem's own reference,
    run natively). Raises Unsupported with the reason when it cannot run here. A compiled
    solution runs in a child process (_problem_isolate), a Python one too when isolate."""
    torch = _torch()
    if path is None:
        return (lambda args: problem.native(args)), "reference (native dtypes)"
    t0 = time.time()  # builds from here on are this solution's (a child process trusts them)
    if problem.format == "kernelbench":
        with open(path) as f:
            src = f.read()
        gpu = _GPU_SOURCE.search(src) is not None
        if gpu and not torch.cuda.is_available():
            raise Unsupported("the solution builds or launches GPU code (CUDA sources, Triton, .cuda()) and no "
                              "CUDA device is available here")
        compiled = not gpu and _CPP_SOURCE.search(src) is not None
        if compiled:  # C++ for the CPU through torch's extension loader
            why = _build.toolchain_missing()
            if why:
                raise Unsupported(why)
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
        dev = torch.device("cuda") if gpu else None
        if dev is not None:
            mnew = mnew.to(dev)

        def call_kb(args: Dict[str, Any]) -> List[Any]:
            with torch.no_grad(), on_device(args, dev) as a:
                res = run_low(lambda: mnew(*[a[k] for k in problem.order]))
                return [o.cpu() if isinstance(o, torch.Tensor) else o
                        for o in _outputs_list(res, list(problem.outputs), path)]
        if (compiled or isolate) and _isolate_here(problem):  # loaded here (errors reported), run in a child
            return _isolated(problem, path, "ModelNew (%s, in a child process)" % os.path.basename(path), t0)
        return call_kb, "ModelNew (%s%s)" % (os.path.basename(path), ", on %s" % dev if dev is not None else "")
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
    cpp = any(x in _build.CPP_LANGS | _build.CUDA_LANGS for x in langs)
    other = [x for x in langs if x not in _PY_LANGS | _build.CPP_LANGS | _build.CUDA_LANGS]
    if other:
        raise Unsupported("language %s: parity runs Python entry points and builds C++/CUDA (cpp, cuda) with torch's "
                          "extension loader; not %s" % (", ".join(langs), ", ".join(other)))
    dev = None
    if any(x not in _CPU_LANGS | _build.CPP_LANGS for x in langs):
        if not torch.cuda.is_available():
            raise Unsupported("language %s needs a CUDA device and none is available here" % ", ".join(langs))
        dev = torch.device("cuda")  # the inputs there, the outputs back (on_device)
    sources = d.get("sources")
    if not isinstance(sources, list) or not sources:
        raise ProblemFileError(path, "sources", "expected a list of {path, content}")
    tmp = tempfile.mkdtemp(prefix="parity_solution_")
    # removed when the process ends, not before: Triton reads a kernel's source when it first
    # compiles it, and a folder of problems loads a solution per problem
    atexit.register(shutil.rmtree, tmp, True)
    written: List[str] = []
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
        written.append(full)
    file, fn_name = ep.split("::")
    dps = bool(spec.get("destination_passing_style", True))
    what = "%s (%s, %s" % (d.get("name", os.path.basename(path)), ep, "destination-passing" if dps else "value-returning")
    if cpp:
        try:
            fn = _build.build_entry(path, tmp, written, spec, fn_name, cuda=dev is not None,
                                    default_binding="tvm-ffi" if problem.format == "flashinfer" else "torch")
        except _build.BuildUnavailable as e:
            raise Unsupported(str(e)) from e
    else:
        fn = _python_entry(path, tmp, file, fn_name)
    if (cpp or isolate) and _isolate_here(problem):  # loaded here (its errors reported), run in a child process
        return _isolated(problem, path, what + ", in a child process)", t0)
    names = list(problem.outputs)

    def call_sol(args: Dict[str, Any]) -> List[Any]:
        with grad_mode(True), on_device(args, dev) as a:  # a backward may use autograd
            pos = [a[k] for k in problem.order]

            def once() -> List[Any]:
                if dps:
                    sz = _axis_sizes(problem, args)
                    outs = [torch.empty([sz[x] for x in problem.outputs[o]["shape"] or ()],  # a scalar: 0-d
                                        dtype=_tdtype(problem.outputs[o]["dtype"]), device=dev) for o in names]
                    fn(*pos, *outs)
                    return outs
                return _outputs_list(fn(*pos), names, path)
            outs = run_low(once)
            return [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in outs]
    return call_sol, what + (", on %s)" % dev if dev is not None else ")")


class on_device:
    """`with on_device(args, dev) as a:` -- the tensor arguments copied to device dev (None: args
    as they are) for a GPU solution (Triton, CuTe DSL, a KernelBench ModelNew with CUDA), and,
    after the call, copied back into the caller's tensors: parity's harness checks the tensors it
    passed, so an input the solution edits on the device shows as edited (modified-inputs).
    Outputs come back with .cpu() (synchronizing). Written for a CUDA device; this machine has
    none, and the tests run it with dev = the CPU (docs/problems.md, "Solutions and verdicts")."""

    def __init__(self, args: Dict[str, Any], dev: Any) -> None:
        self.args, self.dev = args, dev
        self.moved: Dict[str, Any] = {}

    def __enter__(self) -> Dict[str, Any]:
        torch = _torch()
        if self.dev is None:
            return self.args
        self.moved = {k: v.to(self.dev, copy=True) if isinstance(v, torch.Tensor) else v
                      for k, v in self.args.items()}
        return self.moved

    def __exit__(self, *exc: Any) -> None:
        torch = _torch()
        for k, v in self.moved.items():
            if isinstance(v, torch.Tensor):
                back = v.to("cpu")
                if not torch.equal(back, self.args[k]):
                    self.args[k].copy_(back)


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


def _line_sizes(problem: Problem, i: int, w: Dict[str, Any]) -> Tuple[Dict[str, int], int]:
    """A workload line's size of every axis (const, its var axes, expr axes computed) and the
    element count of the largest tensor it makes."""
    sizes = {a: s[0] for a, s in problem.shapes.items() if a in problem.fixed}
    sizes.update({a: int(v) for a, v in w["axes"].items()})
    for a, spec in getattr(problem, "axes_spec", {}).items():
        if isinstance(spec, dict) and spec.get("type") == "expr":
            sizes[a] = _eval_expr(spec["expression"], sizes, problem.path, a)
    try:
        big = max(int(np.prod([sizes[a] for a in s["shape"]])) for s in
                  list(problem.inputs.values()) + list(problem.outputs.values()) if s["shape"] is not None)
    except KeyError as e:
        raise ProblemFileError(problem.path, "workload line %d: axes" % (i + 1), "no size for axis %s" % e) from e
    return sizes, big


def _line_args(problem: Problem, i: int, w: Dict[str, Any], sizes: Dict[str, int], seed: int,
               only: Optional[Set[str]] = None) -> Dict[str, Any]:
    """A workload line's tensor inputs as it describes them (torch, in the declared dtypes):
    `random` drawn with torch.randn / randint from a generator seeded by (seed, line), `safetensors`
    read, `custom` from the definition's entry point; only: those inputs (None: all)."""
    torch = _torch()
    ins = w.get("inputs") or {}
    gen = torch.Generator().manual_seed(int(seed) * 1000003 + i)
    args: Dict[str, Any] = {}
    custom = [k for k, v in ins.items() if isinstance(v, dict) and v.get("type") == "custom"
              and (only is None or k in only)]
    if custom:
        entry = getattr(problem, "custom_entry", None)
        if entry is None:
            raise ProblemFileError(problem.path, "custom_inputs_entrypoint",
                                   "workload line %d has custom inputs and the definition names no entry point" % (i + 1))
        torch.manual_seed(int(seed) * 1000003 + i)
        made = entry(dict(sizes, **problem.scalars), torch.device("cpu"))
        args.update({k: v for k, v in made.items() if k in problem.inputs and (only is None or k in only)})
    for k, s in problem.inputs.items():
        if s["shape"] is None or k in args or (only is not None and k not in only):
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
    for k in args:
        want = [sizes[a] for a in problem.inputs[k]["shape"] or []]
        if list(args[k].shape) != want:
            raise ProblemFileError(problem.path, "workload line %d: inputs.%s" % (i + 1, k),
                                   "shape %s, the line's axes make %s" % (list(args[k].shape), want))
    return args


def _as_given(problem: Problem, args: Dict[str, Any]) -> Dict[str, Any]:
    """Torch inputs as parity.check's given arrays: float inputs in the problem's dtype (bf16 as
    uint16 bits), integers as int64."""
    torch = _torch()
    given: Dict[str, Any] = {}
    for k, t in args.items():
        if problem._is_float(k):
            if problem.dtype == "bf16":
                given[k] = t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
            else:
                given[k] = t.to(torch.float16 if problem.dtype == "f16" else torch.float32).numpy().copy()
        else:
            given[k] = t.to(torch.int64).numpy().copy()
    return given


def _line_scalars(problem: Problem, w: Dict[str, Any]) -> Dict[str, Any]:
    """The scalar inputs' values on a workload line (the problem's where the line gives none)."""
    ins = w.get("inputs") or {}
    out = dict(problem.scalars)
    for k, v in ins.items():
        if k in problem.scalars and isinstance(v, dict) and v.get("type") == "scalar":
            out[k] = v.get("value")
    return out


def _scalars_differ(problem: Problem, w: Dict[str, Any]) -> bool:
    return _line_scalars(problem, w) != dict(problem.scalars)


def other_scalar_sets(problem: Problem) -> List[Dict[str, Any]]:
    """The sets of scalar values the problem's own lines give other than the op's, in line order
    (each is judged as an op of its own: a declared op has one set of attributes)."""
    out: List[Dict[str, Any]] = []
    for w in getattr(problem, "own_lines", []):
        s = _line_scalars(problem, w)
        if s != dict(problem.scalars) and s not in out:
            out.append(s)
    return out


def _spread(n: int, k: int) -> List[int]:
    """k of n positions spread evenly from the first to the last (all of them when k >= n)."""
    if k >= n:
        return list(range(n))
    if k <= 1:
        return [0][:k]
    return sorted(set(round(j * (n - 1) / (k - 1)) for j in range(k)))


def own_workloads(problem: Problem, seed: int = 1, limit: int = 6,
                  max_elems: int = 1 << 22) -> Tuple[List[Dict[str, Any]], Dict[str, Dict[str, Any]], List[str]]:
    """The problem's own workload lines as given workloads for parity.check: their axes, their
    inputs (`random`: torch.randn / randint in the declared dtypes, seeded; `scalar`; `safetensors`
    loaded; `custom`: the definition's custom_inputs_entrypoint), of the lines whose scalars are
    the op's (an op has one set of attributes: other_scalar_sets) and whose largest tensor holds
    at most max_elems elements, at most `limit` spread evenly over their sizes (the smallest and
    the largest among them), named wl-N after their line N. Returns (given workloads,
    {name: torch inputs}, notes)."""
    lines = getattr(problem, "own_lines", [])
    out: List[Dict[str, Any]] = []
    args_of: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    skipped_big = skipped_scalar = 0
    fit = []
    for i, w in enumerate(lines):
        if _scalars_differ(problem, w):
            skipped_scalar += 1
            continue
        sizes, big = _line_sizes(problem, i, w)
        if big > max_elems:
            skipped_big += 1
            continue
        fit.append((big, i, w, sizes))
    by_size = sorted(fit, key=lambda t: (t[0], t[1]))
    chosen = sorted((by_size[j] for j in _spread(len(by_size), max(0, limit))), key=lambda t: t[1])
    for _, i, w, sizes in chosen:
        args = _line_args(problem, i, w, sizes, seed)
        name = "wl-%d" % (i + 1)
        out.append({"name": name, "inputs": _as_given(problem, args), "attrs": dict(problem.scalars)})
        args_of[name] = dict(args, **problem.scalars)
    if out:
        notes.append("the problem's own workloads judged too: %s (its axes and inputs, float inputs given in %s)"
                     % (", ".join(x["name"] for x in out), problem.dtype))
    if len(chosen) < len(fit):
        notes.append("%d of %d own workload lines judged, spread over their sizes (--own-lines N judges more)"
                     % (len(chosen), len(fit)))
    if skipped_big:
        notes.append("%d own workload line(s) over %d elements per tensor not judged" % (skipped_big, max_elems))
    if skipped_scalar:
        notes.append("%d own workload line(s) with other scalar values judged apart (one op per set of scalars)"
                     % skipped_scalar)
    return out, args_of, notes


def kernelbench_own_workloads(problem: Problem, seeds: Tuple[int, ...] = (42, 43, 44)) -> Tuple[
        List[Dict[str, Any]], Dict[str, Dict[str, Any]], List[str]]:
    """A KernelBench problem's inputs as its get_inputs() draws them (at the scaled sizes), one
    given workload per seed, named get_inputs-sSEED: for references defined only on the inputs the
    problem draws (a KL divergence of softmax outputs: the log of parity's N(0,1) inputs is NaN).
    Returns (given workloads, {name: torch inputs}, notes)."""
    torch = _torch()
    kb = problem._kb
    out: List[Dict[str, Any]] = []
    args_of: Dict[str, Dict[str, Any]] = {}
    for s in seeds:
        torch.manual_seed(s)
        xs = list(kb["ns"]["get_inputs"]())
        args = {k: x for k, x in zip(problem.order, xs) if isinstance(x, torch.Tensor) and k in problem.inputs}
        if problem.dtype != "f32":
            args = {k: x.to(_tdtype(problem.inputs[k]["dtype"])) if x.is_floating_point() else x for k, x in args.items()}
        name = "get_inputs-s%d" % s
        out.append({"name": name, "inputs": _as_given(problem, args), "attrs": dict(problem.scalars)})
        args_of[name] = dict(args, **problem.scalars)
    return out, args_of, ["the reference is not defined on parity's role-drawn inputs (%s); judged on the problem's "
                          "own get_inputs() draws instead: %s" % ("%s", ", ".join(x["name"] for x in out))]


_STRUCTURE_DRAWS = ("base", "outlier-ch", "magnitude")


def _lines_named(ns: List[int]) -> str:
    return "line %d" % ns[0] if len(ns) == 1 else "lines %s and %d" % (", ".join(str(n) for n in ns[:-1]), ns[-1])


def structure_workloads(problem: Problem, seed: int = 1, quick: bool = False,
                        max_elems: int = 1 << 24, limit: int = 6) -> Tuple[List[Dict[str, Any]], Dict[str, Any], List[str]]:
    """parity's workloads of a problem with structure inputs (integers only its own workload
    lines give: offsets, page tables; Problem.structure): the structure of one line, the float
    inputs drawn from their roles by parity's generator -- base, outlier-ch and magnitude on the
    smallest line whose var axes are all at least 8 (else the smallest), production on the
    largest line within max_elems elements per tensor (not with quick) -- then, unless quick, the
    own lines themselves (own_workloads). Returns (workloads, {name: torch inputs or the drawn
    workload}, notes)."""
    lines = getattr(problem, "own_lines", [])
    cands = []
    for i, w in enumerate(lines):
        if _scalars_differ(problem, w):
            continue
        sizes, big = _line_sizes(problem, i, w)
        cands.append((big, i, w, sizes))
    if not cands:
        raise ProblemFileError(problem.path, "workloads", "the structure inputs (%s) come from the problem's own "
                               "workload lines, and no line has the definition's scalar values"
                               % ", ".join(problem.structure))
    cands.sort(key=lambda t: (t[0], t[1]))
    var = [a for a in problem.shapes if a not in problem.fixed]
    rows_ok = [t for t in cands if all(t[3].get(a, 0) >= 8 for a in var)]
    picks = [(d, (rows_ok or cands)[0]) for d in _STRUCTURE_DRAWS]
    fit = [t for t in cands if t[0] <= max_elems]
    if not quick and fit and fit[-1] is not picks[0][1]:
        picks.append(("production", fit[-1]))
    out: List[Dict[str, Any]] = []
    given: Dict[str, Any] = {}
    for draw, (_, i, w, sizes) in picks:
        ints = _line_args(problem, i, w, sizes, seed, only=set(problem.structure))
        wl = {"name": draw, "inputs": _as_given(problem, ints), "attrs": dict(problem.scalars),
              "draw": "base" if draw == "production" else draw, "dtype": problem.dtype,
              "sizes": {a: int(sizes[a]) for a in problem.shapes}}
        out.append(wl)
        given[draw] = wl
    notes = ["structure input(s) %s: the values of the problem's own workload lines (%s); parity's workloads "
             "%s take them from %s, the float inputs drawn from their roles" % (
                 ", ".join(problem.structure), "offsets, page tables: nothing to draw them from",
                 ", ".join(x["name"] for x in out),
                 _lines_named(sorted(set(t[1] + 1 for _, t in picks))))]
    if not quick:
        own, args_of, more = own_workloads(problem, seed, limit)
        out += own
        given.update(args_of)
        notes += more
    return out, given, notes

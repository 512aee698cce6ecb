"""parity.check and parity.compare: workloads x one function, judged by the C library, reported
in the CLI's text and JSON. One signature for built-in ops (a name) and declared ops (a
parity.Op, judged by python/parity/_custom.py): an option that does not apply to the op is a
ValueError, never silently dropped."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union, cast

import numpy as np

from . import _arrays, _case, _harness
from ._case import _resolve
from ._lib import VERDICTS, b, lib, take_str
from ._report import Report

if TYPE_CHECKING:
    from ._custom import Op

Workloads = Union[None, str, Sequence[str]]
Progress = Union[None, bool, Callable[[str], Any]]


def _label(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    qn = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return "python:%s.%s" % (mod, qn)


def _description(fn: Any) -> str:
    doc = (getattr(fn, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""


class _Judge:
    """A C check (parity_py_check_*) of one candidate over n workloads."""

    def __init__(self, op: str, n: int, label: str, desc: str, seed: int, quick: bool) -> None:
        self.h = lib.parity_py_check_new(b(op), n, b(label), b(desc), int(seed), int(bool(quick)))
        if not self.h:
            raise MemoryError("parity: cannot start a check")
        self.op = op
        self.seconds: List[Optional[float]] = [None] * n
        self.causes: Dict[str, BaseException] = {}

    def __del__(self) -> None:
        h, self.h = getattr(self, "h", None), None
        if h:
            lib.parity_py_check_free(h)

    def judge(self, w: int, case: _case.Case, outputs: List[Tuple[Any, str]], floor: bool, seconds: float) -> None:
        """outputs: [(numpy storage, dtype name)] in the op's order, judged where they lie, each
        in its own dtype (its rounding is part of its tolerance; the diagnosis rounds its
        emulations to the first output's dtype)."""
        views = []
        for i, (a, dt) in enumerate(outputs):
            v = lib.parity_py_output_wrap(case.h, i, b(dt), a.ctypes.data)
            if not v:
                raise ValueError("output %s: dtype %s not accepted" % (case.output_names[i], dt))
            views.append(v)
        arr = (ctypes.c_void_p * len(views))(*views)
        try:
            rc = lib.parity_py_check_judge(self.h, w, case.h, arr, int(bool(floor)), float(seconds))
        finally:
            for v in views:
                lib.parity_py_output_unwrap(v)
        if rc != 0:
            raise RuntimeError("parity: the C library could not judge workload %s of %s (status %d: %s)" % (
                case.workload, case.op, rc, "out of memory" if rc == -2 else "invalid outputs or case"))
        self.seconds[w] = seconds

    def baseline(self, bi: int, case: _case.Case, outputs: List[Tuple[Any, str]]) -> None:
        """Baseline rule bi on outputs of its own case (workload "baseline:NAME")."""
        views = []
        for i, (a, dt) in enumerate(outputs):
            v = lib.parity_py_output_wrap(case.h, i, b(dt), a.ctypes.data)
            if not v:
                raise ValueError("output %s: dtype %s not accepted" % (case.output_names[i], dt))
            views.append(v)
        arr = (ctypes.c_void_p * len(views))(*views)
        try:
            rc = lib.parity_py_check_baseline(self.h, bi, case.h, arr)
        finally:
            for v in views:
                lib.parity_py_output_unwrap(v)
        if rc != 0:
            raise RuntimeError("parity: the C library could not apply baseline rule %d on %s (status %d)" % (
                bi, case.workload, rc))

    def baseline_failed(self, bi: int, verdict: str) -> None:
        lib.parity_py_check_baseline_set(self.h, bi, _harness.V[verdict])

    def set(self, w: int, workload: str, production: bool, verdict: str, detail: str,
            seconds: Optional[float]) -> None:
        if lib.parity_py_check_set(self.h, w, b(workload), int(bool(production)), _harness.V[verdict],
                                   b(detail[:250]), float(seconds or 0)) != 0:
            raise RuntimeError("parity: the C library refused verdict %r for workload %s" % (verdict, workload))
        self.seconds[w] = seconds

    def report(self, reproduce_of: Callable[[str], str], name: Optional[str] = None,
               declared_baselines: Optional[Dict[str, Any]] = None, label: str = "") -> Report:
        """The C library's text and JSON reports; name: the op's name when self.op is a declared
        op's key; declared_baselines: a declared op's detection matrix (_custom_baselines.run),
        added to both."""
        lib.parity_py_check_finish(self.h)
        worst = lib.parity_py_check_worst_workload(self.h).decode()
        rep = reproduce_of(worst)
        text = take_str(lib.parity_py_check_text(self.h, b(rep)))
        js = take_str(lib.parity_py_check_json(self.h, b(rep)))
        if js is None:
            raise MemoryError("parity: the C library could not render the JSON report")
        if declared_baselines is not None:
            import json
            from . import _custom_baselines
            d = json.loads(js)
            d["kernels"][0]["baselines"] = declared_baselines
            js = json.dumps(d, indent=1, default=float)
            text = (text or "") + _custom_baselines.matrix_text([(label, d["kernels"][0]["verdict"],
                                                                  declared_baselines)]) + "\n"
        return Report(name or self.op, text or "", js, rep, self.seconds, self.causes)


def _default_like(like: Optional[str]) -> str:
    if like is not None:
        if like not in ("torch", "numpy"):
            raise ValueError("like=%r: expected 'torch' or 'numpy'" % (like,))
        return like
    return "torch" if _arrays.have_torch() else "numpy"


def _reproducer(op: str, fn: Any, seed: int, dtype: str, like: str, device: Any,
                isolate: bool) -> Callable[[str], str]:
    def rep(worst: str) -> str:
        extra = ""
        if like != "torch":
            extra += ", like=%r" % like
        if device not in (None, "cpu"):
            extra += ", device=%r" % str(device)
        if isolate:
            extra += ", isolate=True"
        return "parity.check(%r, %s, workloads=[%r], seed=%d, dtype=%r%s)" % (
            op, _label(fn)[len("python:"):], worst, seed, dtype, extra)
    return rep


class _Ahead:
    """The cases of a check's workloads, each built while the one before it runs: a background
    thread builds case w + 1 (inputs, the fp64 reference, the tolerances: most of a declared op's
    time per workload) while the candidate runs on case w and is judged. The cases are the same
    either way (a case is a function of op, workload, seed and dtype); a reference called back
    from the build holds the user-code lock (_lib.USER_CODE), so it never runs beside the
    candidate, and only parity's own work overlaps. For declared ops (parity.Op, benchmark
    problems) only: a built-in op's judgement forks the noise floor's children, which must not
    inherit a build under way in another thread (a lock it holds stays held in the child), and a
    plugin op's C reference may share state with a kernel of the same library. Not ahead of a
    production-sized workload's judgement either (two such cases would be in memory at once). A
    build's error is raised when its workload comes, as without the thread."""

    def __init__(self, key: str, decl: Any, names: Sequence[Any], seed: int, dtype: str) -> None:
        self.key, self.decl, self.names, self.seed, self.dtype = key, decl, list(names), seed, dtype
        self.pending: Optional[Tuple[int, Any]] = None
        self.pool: Any = None
        self.ok = decl is not None

    def _build(self, w: int) -> _case.Case:
        wl = self.names[w]
        name: Any = wl
        if isinstance(wl, Mapping) and self.decl is not None:  # given inputs {"name", "inputs", "attrs"}
            from . import _declared
            name = _declared.given_of(self.decl.op, str(wl.get("name", "given")), wl.get("inputs", wl),
                                      wl.get("attrs"), wl.get("draw"), wl.get("sizes"), wl.get("dtype", ""))
        return _case.Case(self.key, name, self.seed, self.dtype)

    def case(self, w: int) -> _case.Case:
        if self.pending is not None and self.pending[0] == w:
            fut, self.pending = self.pending[1], None
            c: _case.Case = fut.result()  # the build's exception, raised here
        else:
            c = self._build(w)
        if self.ok and w + 1 < len(self.names) and not c.production:
            if self.pool is None:
                from concurrent.futures import ThreadPoolExecutor
                self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parity-case")
            self.pending = (w + 1, self.pool.submit(self._build, w + 1))
        return c

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)  # a build under way finishes; its case is dropped
            self.pool = None
        self.pending = None


def check(op: Union[str, "Op"], fn: Callable[..., Any], *, workloads: Workloads = None, seed: int = 1,
          dtype: Any = "bf16", like: Optional[str] = None, device: Any = "cpu", baselines: bool = False,
          floor: Optional[bool] = None, isolate: bool = False, timeout: Optional[float] = None,
          progress: Progress = None, out_dtype: Any = None) -> Report:
    """Judge fn as an implementation of op, as `parity check` judges a kernel. Returns a Report.

    op: a built-in op's name (parity.ops()) or a declared parity.Op (docs/custom-ops.md).
    fn(**inputs, **attrs) returns the outputs (a tuple in the op's order, or a dict by name);
    output dimensions the inputs leave open (V) come as keyword arguments; for a built-in op a
    fn that takes `out=` gets a dict of preallocated (NaN-filled, guarded) outputs to fill.
    workloads: None (every preset, as the CLI), "quick" (no production-sized ones), a name or a
    list of names ("text", "text@NxD[xV]"). like: "torch" (default when importable) or "numpy";
    bf16 inputs handed to numpy code are uint16 bit patterns. device: where inputs are created
    (outputs are copied to the host once). floor (built-in ops; default True): measure the
    faithful catalog variants' spread. isolate: run fn in a spawned worker (crash, os._exit,
    hang past timeout -> a verdict); the calling script must then guard its top level with
    `if __name__ == "__main__":`. timeout: seconds per call (in-process calls are flagged after
    the fact, not interrupted). out_dtype (built-in ops, `out=` functions; default "f32"): the
    dtype of the preallocated buffers. progress: True (lines on stderr) or a callable taking
    each message. An option that does not apply to the op raises ValueError.
    """
    if isolate:
        from ._worker import check_main_guard
        check_main_guard()
    key, decl = _resolve(op)
    if decl is not None:  # a declared parity.Op (docs/custom-ops.md): the same engine
        if floor:
            raise ValueError("floor=True does not apply to a declared op: it has no catalog of faithful "
                             "variants whose spread could be measured (its tolerance is derived from the "
                             "declaration, docs/custom-ops.md)")
        floor = False
    floor = True if floor is None else bool(floor)
    out_dtype = "f32" if out_dtype is None else out_dtype
    like = _default_like(like)
    dtype = _arrays.canon_dtype(dtype)
    out_dtype = _arrays.canon_dtype(out_dtype)
    names = _case.workload_names(key, workloads)
    quick = workloads == "quick"
    say = _harness.progress_fn(progress)
    judge = _Judge(key, len(names), _label(fn), _description(fn), seed, quick)
    worker = None
    probed: Set[Tuple[Any, ...]] = set()  # the input shapes the probes ran on
    ahead = _Ahead(key, decl, names, seed, dtype)
    try:
        for w, wl in enumerate(names):
            if say:
                say("[%d/%d] %s: building inputs and fp64 reference" % (
                    w + 1, len(names), wl.get("name", "given") if isinstance(wl, Mapping) else wl))
            case = ahead.case(w)
            # The harness's probes (decoy, other contents, the probe run: three more calls) on a
            # non-production workload whose input shapes no earlier workload of this check had:
            # what they expose (a memo keyed on pointers, shapes or a few bytes; nondeterminism
            # chosen by shape) depends on the shapes, not on the values, and a memo that carries
            # one workload's outputs into the next of the same shapes gives that workload wrong
            # outputs in its judged call anyway (docs/custom-ops.md, "What the harness does").
            shapes = tuple((x["name"], tuple(x["shape"])) for x in case.info["inputs"])
            small = not case.production and shapes not in probed
            if small:
                probed.add(shapes)
            if isolate:
                from . import _worker
                if worker is None:
                    worker = _worker.Worker()
                out = worker.run(fn, _case.worker_spec(case), case.workload, seed, dtype, like, device, small, small, timeout,
                                 out_dtype)
                if out.status in ("crashed", "timeout"):
                    worker.close()
                    worker = None
            else:
                out = _harness.run_in_process(fn, case, like, device, small, small, timeout, out_dtype)
            if out.exc is not None:
                judge.causes[case.workload] = out.exc
            if out.status == "ran" and out.outputs is not None:
                judge.judge(w, case, out.outputs, floor, out.seconds)
                if VERDICT_OF(judge, w) == "faithful":
                    found = out.rerun or _probe_finding(key, case, out.outputs, out.probe, lib.parity_py_check_wl_q(judge.h, w))
                    if found:
                        judge.set(w, case.workload, case.production, found[0], found[1], out.seconds)
            else:
                judge.set(w, case.workload, case.production, out.status, out.detail, out.seconds)
            if say:
                say("      %-40s %s (%.2f s)" % (_label(fn), VERDICT_OF(judge, w), out.seconds or 0))
        if baselines and decl is None:
            # Each rule on its own input scheme (workload "baseline:NAME", its fixed seed), one
            # plain run each, as `parity check --baselines` runs them (docs/baselines.md).
            for bi in range(lib.parity_py_baseline_count()):
                wname = "baseline:" + lib.parity_py_baseline_name(bi).decode()
                case = _case.Case(key, wname, seed, dtype)
                if isolate:
                    from . import _worker
                    if worker is None:
                        worker = _worker.Worker()
                    out = worker.run(fn, _case.worker_spec(case), wname, seed, dtype, like, device, False, False,
                                     timeout, out_dtype)
                    if out.status in ("crashed", "timeout"):
                        worker.close()
                        worker = None
                else:
                    out = _harness.run_in_process(fn, case, like, device, False, False, timeout, out_dtype)
                if out.status == "ran" and out.outputs is not None:
                    judge.baseline(bi, case, out.outputs)
                else:
                    judge.baseline_failed(bi, out.status)
                if say:
                    say("      [baseline %s] %s" % (wname[9:], "caught" if lib.parity_py_check_baseline_caught(judge.h, bi) else "pass"))
    finally:
        ahead.close()
        if worker is not None:
            worker.close()
    if decl is not None:
        from . import _custom
        bl = None
        if baselines:  # the detection matrix of a declared op (python/parity/_custom_baselines.py)
            from . import _custom_baselines
            bl = _custom_baselines.run(decl.op, fn, dtype=dtype, like=like, device=device, isolate=isolate,
                                       timeout=timeout)
        return judge.report(_custom._repro(decl.op, fn, seed, dtype, like, isolate), name=decl.op.name,
                            declared_baselines=bl, label=_label(fn))
    return judge.report(_reproducer(key, fn, seed, dtype, like, device, isolate))


def _probe_finding(key: str, case: _case.Case, first: List[Tuple[Any, str]], probe: Optional[List[Tuple[Any, str]]],
                   q_first: float) -> Optional[Tuple[str, str]]:
    """The verdict the probe run's outputs give a function judged faithful (python/parity/
    _harness.py run_in_process): None when they are the judged run's bits; "stale-cache" when
    they are unfaithful (as src/verify/check_anticache.c check_stale_outputs words it), else
    "nondeterministic"."""
    if probe is None:
        return None
    scratch = _Judge(key, 1, "probe", "", case.seed, False)
    scratch.judge(0, case, probe, False, 0.0)
    if VERDICT_OF(scratch, 0) == "unfaithful":
        return ("stale-cache", "stale outputs after earlier calls (a decoy writing into the same output buffers, "
                "then the same input buffers holding other contents: a memo keyed on pointers or a few input "
                "bytes): err/tol %.3g; faithful called on fresh copies (err/tol %.3g)" % (
                    lib.parity_py_check_wl_q(scratch.h, 0), q_first))
    differ = next((n for n, (a, _), (c, _) in zip(case.output_names, first, probe)
                   if a.nbytes != c.nbytes or not lib.parity_py_memeq(a.ctypes.data, c.ctypes.data, a.nbytes)),
                  case.output_names[0])
    return ("nondeterministic", "output %s differs bit-wise between two runs on the same inputs" % differ)


def VERDICT_OF(judge: _Judge, w: int) -> str:
    return VERDICTS[int(lib.parity_py_check_wl_verdict(judge.h, w))]


def _float_dtype(op: str, inputs: Mapping[str, Any]) -> str:
    """The dtype of the first floating-point input of a plain dict (bf16 bits: uint16)."""
    for x in _case._op_static(op)["inputs"]:
        if x["float"] and x["name"] in inputs:
            return _arrays.to_host(inputs[x["name"]])[1]
    return "f32"


def compare(op: Union[str, "Op"], inputs: Any, outputs: Any, *, workload: Optional[str] = None,
            seed: Optional[int] = None, dtype: Any = None, floor: Optional[bool] = None,
            name: str = "outputs") -> Report:
    """Judge outputs computed anywhere on inputs from parity.inputs(op, workload, ...): the
    inputs object carries its case. Plain dicts of arrays are accepted with workload= and seed=
    (and are then checked byte for byte against the regenerated inputs, as `parity compare`
    checks a file; dtype= names their dtype when it is not the first float input's). outputs: a
    tuple in the op's order, a dict by name, or the single output. op: a built-in op's name or a
    declared parity.Op (for which inputs may also be a workload name, regenerated with seed and
    dtype). floor (built-in ops; default True): as parity.check's."""
    key, decl = _resolve(op)
    opname = key if decl is None else decl.op.name
    given: Any = None
    if decl is not None:  # a declared parity.Op: its registered key goes where a name goes
        if floor:
            raise ValueError("floor=True does not apply to a declared op (no catalog to measure a floor on)")
        floor = False
        if isinstance(inputs, str):  # a workload name: the inputs regenerated (seed 1, f32 by default)
            given, dtype = inputs, "f32" if dtype is None else dtype
        elif isinstance(inputs, Mapping) and not hasattr(inputs, "_case") and workload is None:
            # the inputs as given (a dict of arrays, or {"name", "inputs", "attrs"})
            from . import _declared
            g = inputs if "inputs" in inputs else {"name": "given", "inputs": inputs}
            given = _declared.given_of(decl.op, str(g.get("name", "given")), g["inputs"], g.get("attrs"),
                                       cast(Optional[str], g.get("draw")), cast(Any, g.get("sizes")),
                                       str(g.get("dtype", "")))
    floor = True if floor is None else bool(floor)
    case = getattr(inputs, "_case", None)
    if case is not None and decl is not None and case.op != key:
        case_decl = getattr(case, "decl", None)
        if case_decl is not None and case_decl.op is decl.op:
            key = case.op  # the same parity.Op, declared again since
    if given is not None:
        case = _case.Case(key, given, 1 if seed is None else seed, dtype)
    elif case is None or (workload is not None and case.workload != workload) or (seed is not None and case.seed != seed):
        if workload is None:
            raise ValueError("compare: inputs do not come from parity.inputs(); pass workload= (and seed=)")
        dt = _float_dtype(key, inputs) if dtype is None else _arrays.canon_dtype(dtype)
        case = _case.Case(key, workload, 1 if seed is None else seed, dt)
        for k in case.input_names:
            if k not in inputs:
                raise ValueError("compare: inputs lack %s" % k)
            if not np.array_equal(_arrays.host_bits(inputs[k]), case.arrays()[k].reshape(-1).view(np.uint8)):
                raise ValueError("compare: input %s differs from parity's for workload %s, seed %d, dtype %s: "
                                 "the reference would not match" % (k, case.workload, case.seed, case.dtype))
    if case.op != key:
        raise ValueError("compare: inputs are for op %s, not %s" % (_case.display_name(case.op), opname))
    host = _harness._normalise(outputs, case)
    judge = _Judge(key, 1, name, "outputs judged with parity.compare", case.seed, False)
    judge.judge(0, case, host, floor, 0.0)
    c = case
    if decl is not None:
        return judge.report(lambda w: "parity.compare(%s, parity.inputs(%s, %r, seed=%d, dtype=%r), outputs)" % (
            opname, opname, w, c.seed, c.dtype), name=opname)
    return judge.report(lambda w: "parity.compare(%r, parity.inputs(%r, %r, seed=%d, dtype=%r), outputs)" % (
        key, key, w, c.seed, c.dtype))

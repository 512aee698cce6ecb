"""parity.check and parity.compare: workloads x one function, judged by the C library, reported
in the CLI's text and JSON."""
import ctypes
import os
import tempfile

import numpy as np

from . import _arrays, _case, _harness
from ._lib import b, lib, take_str
from .report import Report


def _label(fn):
    mod = getattr(fn, "__module__", None) or "?"
    qn = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return "python:%s.%s" % (mod, qn)


def _description(fn):
    doc = (getattr(fn, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""


class _Judge:
    """A C check (parity_py_check_*) of one candidate over n workloads."""

    def __init__(self, op, n, label, desc, seed, quick):
        self.h = lib.parity_py_check_new(b(op), n, b(label), b(desc), int(seed), int(bool(quick)))
        if not self.h:
            raise MemoryError("parity: cannot start a check")
        self.op = op
        self.seconds = [None] * n

    def __del__(self):
        h, self.h = getattr(self, "h", None), None
        if h:
            lib.parity_py_check_free(h)

    def judge(self, w, case, outputs, floor, seconds):
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
            raise RuntimeError("parity: judging workload %s failed" % case.workload)
        self.seconds[w] = seconds

    def baseline(self, bi, case, outputs):
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
            raise RuntimeError("parity: baseline rule %d failed on %s" % (bi, case.workload))

    def baseline_failed(self, bi, verdict):
        lib.parity_py_check_baseline_set(self.h, bi, _harness.V[verdict])

    def set(self, w, workload, production, verdict, detail, seconds):
        lib.parity_py_check_set(self.h, w, b(workload), int(bool(production)), _harness.V[verdict],
                                b(detail[:250]), float(seconds or 0))
        self.seconds[w] = seconds

    def report(self, reproduce_of):
        lib.parity_py_check_finish(self.h)
        worst = lib.parity_py_check_worst_workload(self.h).decode()
        rep = reproduce_of(worst)
        text = take_str(lib.parity_py_check_text(self.h, b(rep)))
        fd, path = tempfile.mkstemp(prefix="parity-", suffix=".json")
        os.close(fd)
        try:
            if lib.parity_py_check_json(self.h, b(path), b(rep)) != 0:
                raise OSError("parity: cannot write the JSON report to %s" % path)
            with open(path) as f:
                js = f.read()
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        return Report(self.op, text, js, rep, self.seconds)


def _default_like(like):
    if like is not None:
        if like not in ("torch", "numpy"):
            raise ValueError("like=%r: expected 'torch' or 'numpy'" % (like,))
        return like
    return "torch" if _arrays.have_torch() else "numpy"


def _reproducer(op, fn, seed, dtype, like, device, isolate):
    def rep(worst):
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


def check(op, fn, *, workloads=None, seed=1, dtype="bf16", like=None, device="cpu",
          baselines=False, floor=True, isolate=False, timeout=None, progress=None, out_dtype="f32"):
    """Judge fn as an implementation of op, as `parity check` judges a kernel. Returns a Report.

    fn(**inputs, **attrs) returns the outputs (a tuple in the op's order, or a dict by name);
    output dimensions the inputs leave open (V) come as keyword arguments; a fn that takes
    `out=` gets a dict of preallocated (NaN-filled, guarded) outputs to fill instead.
    workloads: None (every preset, as the CLI), "quick" (no production-sized ones), a name or a
    list of names ("text", "text@NxD[xV]"). like: "torch" (default when importable) or "numpy";
    bf16 inputs handed to numpy code are uint16 bit patterns. device: where inputs are created
    (outputs are copied to the host once). floor: measure the faithful catalog variants' spread.
    isolate: run fn in a spawned worker (crash, os._exit, hang past timeout -> a verdict).
    timeout: seconds per call (in-process calls are flagged after the fact, not interrupted).
    out_dtype: the dtype of the buffers an `out=` function gets ("f32", "bf16", ...).
    progress: True (lines on stderr) or a callable taking each message.
    """
    if not isinstance(op, str):  # a declared parity.Op (docs/custom-ops.md)
        from . import custom
        return custom.check(op, fn, workloads=workloads, seed=seed, dtype=dtype, like=like, device=device,
                            baselines=baselines, floor=floor, isolate=isolate, timeout=timeout,
                            progress=progress)
    like = _default_like(like)
    dtype = _arrays.canon_dtype(dtype)
    out_dtype = _arrays.canon_dtype(out_dtype)
    names = _case.workload_names(op, workloads)
    quick = workloads == "quick"
    say = _harness.progress_fn(progress)
    judge = _Judge(op, len(names), _label(fn), _description(fn), seed, quick)
    worker = None
    try:
        for w, name in enumerate(names):
            if say:
                say("[%d/%d] %s: building inputs and fp64 reference" % (w + 1, len(names), name))
            case = _case.Case(op, name, seed, dtype)
            small = not case.production
            if isolate:
                from . import _worker
                if worker is None:
                    worker = _worker.Worker()
                out = worker.run(fn, op, name, seed, dtype, like, device, small, small, timeout, out_dtype)
                if out.status in ("crashed", "timeout"):
                    worker.close()
                    worker = None
            else:
                out = _harness.run_in_process(fn, case, like, device, small, small, timeout, out_dtype)
            if out.status == "ran":
                judge.judge(w, case, out.outputs, floor, out.seconds)
                if out.rerun and VERDICT_OF(judge, w) == "faithful":
                    judge.set(w, case.workload, case.production, out.rerun[0], out.rerun[1], out.seconds)
            else:
                judge.set(w, case.workload, case.production, out.status, out.detail, out.seconds)
            if say:
                say("      %-40s %s (%.2f s)" % (_label(fn), VERDICT_OF(judge, w), out.seconds or 0))
        if baselines:
            # Each rule on its own input scheme (workload "baseline:NAME", its fixed seed), one
            # plain run each, as `parity check --baselines` runs them (docs/baselines.md).
            for bi in range(lib.parity_py_baseline_count()):
                wname = "baseline:" + lib.parity_py_baseline_name(bi).decode()
                case = _case.Case(op, wname, seed, dtype)
                if isolate:
                    from . import _worker
                    if worker is None:
                        worker = _worker.Worker()
                    out = worker.run(fn, op, wname, seed, dtype, like, device, False, False, timeout, out_dtype)
                    if out.status in ("crashed", "timeout"):
                        worker.close()
                        worker = None
                else:
                    out = _harness.run_in_process(fn, case, like, device, False, False, timeout, out_dtype)
                if out.status == "ran":
                    judge.baseline(bi, case, out.outputs)
                else:
                    judge.baseline_failed(bi, out.status)
                if say:
                    say("      [baseline %s] %s" % (wname[9:], "caught" if lib.parity_py_check_baseline_caught(judge.h, bi) else "pass"))
    finally:
        if worker is not None:
            worker.close()
    return judge.report(_reproducer(op, fn, seed, dtype, like, device, isolate))


def VERDICT_OF(judge, w):
    return _harness.VERDICTS[lib.parity_py_check_wl_verdict(judge.h, w)]


def _float_dtype(op, inputs):
    """The dtype of the first floating-point input of a plain dict (bf16 bits: uint16)."""
    for x in _case._op_static(op)["inputs"]:
        if x["float"] and x["name"] in inputs:
            return _arrays.to_host(inputs[x["name"]])[1]
    return "f32"


def compare(op, inputs, outputs, *, workload=None, seed=None, floor=True, name="outputs"):
    """Judge outputs computed anywhere on inputs from parity.inputs(op, workload, ...): the
    inputs object carries its case. Plain dicts of arrays are accepted with workload= and seed=
    (and are then checked byte for byte against the regenerated inputs, as `parity compare`
    checks a file). outputs: a tuple in the op's order, a dict by name, or the single output."""
    case = getattr(inputs, "_case", None)
    if case is None or (workload is not None and case.workload != workload) or (seed is not None and case.seed != seed):
        if workload is None:
            raise ValueError("compare: inputs do not come from parity.inputs(); pass workload= (and seed=)")
        dtype = _float_dtype(op, inputs)
        case = _case.Case(op, workload, 1 if seed is None else seed, dtype)
        for k in case.input_names:
            if k not in inputs:
                raise ValueError("compare: inputs lack %s" % k)
            if not np.array_equal(_arrays.host_bits(inputs[k]), case.arrays()[k].reshape(-1).view(np.uint8)):
                raise ValueError("compare: input %s differs from parity's for workload %s, seed %d, dtype %s: "
                                 "the reference would not match" % (k, case.workload, case.seed, case.dtype))
    if case.op != op:
        raise ValueError("compare: inputs are for op %s, not %s" % (case.op, op))
    host = _harness._normalise(outputs, case)
    judge = _Judge(op, 1, name, "outputs judged with parity.compare", case.seed, False)
    judge.judge(0, case, host, floor, 0.0)
    return judge.report(lambda w: "parity.compare(%r, parity.inputs(%r, %r, seed=%d, dtype=%r), outputs)" % (
        op, op, w, case.seed, case.dtype))

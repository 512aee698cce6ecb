"""Running a user's function on a declared op's workload, as parity.check runs one on a built-in
op (python/parity/_harness.py): a decoy call with every float input x -2 (exact), the judged
call (timed), inputs verified unmodified, and on non-production workloads a rerun compared bit
for bit. In the caller's process, or with isolate=True in the package's spawned worker
(python/parity/_worker.py), so that a function that segfaults, calls os._exit or hangs gives a
verdict and the caller survives.

What crosses to the worker is a _Spec -- the inputs' storage, dtypes, attributes and output
names -- never the parity.Op (its reference is often a lambda, which does not pickle); the
outputs come back as host arrays and are judged in the caller (python/parity/_custom.py).
Deliberately not here: judging, tolerances, workloads."""
from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set

import numpy as np

from . import _arrays
from ._signature import check_binds, expected_call

if TYPE_CHECKING:
    from ._custom import CustomCase


class Spec:
    """What a function needs to be called on one workload; picklable."""

    def __init__(self, storage: Dict[str, Any], floats: Dict[str, bool], dtype: str, attrs: Dict[str, Any],
                 outputs: List[str], op_name: str) -> None:
        self.storage, self.floats, self.dtype = storage, floats, dtype
        self.attrs, self.outputs, self.op_name = attrs, outputs, op_name


def spec_of(case: "CustomCase") -> Spec:
    op = case.op
    return Spec(case.storage, {k: x.is_float for k, x in op.inputs.items()}, case.dtype, case.attrs,
                list(op.outputs), op.name)


def exact_of(s: Any, dtype: str) -> Any:
    """Stored values as float64 (bf16 as uint16 bits)."""
    if dtype == "bf16":
        return (s.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return s.astype(np.float64)


def framework(spec: Spec, like: str, device: Any, scale: Optional[float] = None) -> Dict[str, Any]:
    """The inputs for fn (fresh copies: a function that writes its inputs is caught)."""
    from ._custom import _round_to
    out: Dict[str, Any] = {}
    for k, s in spec.storage.items():
        if scale is not None and spec.floats[k]:
            s = _round_to(exact_of(s, spec.dtype) * scale, spec.dtype)[1]  # -2 is exact: no rounding
        dt = spec.dtype if spec.floats[k] else "i64"
        out[k] = _arrays.to_framework(np.array(s, copy=True), dt, like, device)
    return out


def _params(fn: Any) -> Optional[Set[str]]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return set(sig.parameters)


def call(fn: Any, ins: Dict[str, Any], spec: Spec) -> Any:
    params = _params(fn)
    kw = dict(ins)
    for k, v in spec.attrs.items():
        if params is None or k in params:
            kw[k] = v
    check_binds(fn, kw, expected_call(list(spec.storage), list(spec.attrs)))
    return fn(**kw)


def by_name(res: Any, names: List[str], op_name: str) -> Dict[str, Any]:
    """fn's result (a dict by name, a tuple in order, or the single output) as {name: value}."""
    if isinstance(res, dict):
        missing = [n for n in names if n not in res]
        if missing:
            raise ValueError("outputs lack %s" % ", ".join(missing))
        return {n: res[n] for n in names}
    if isinstance(res, (tuple, list)):
        if len(res) != len(names):
            raise ValueError("%d outputs returned, op %s has %d (%s)" % (len(res), op_name, len(names), ", ".join(names)))
        return dict(zip(names, res))
    if len(names) != 1:
        raise ValueError("one output returned, op %s has %d (%s)" % (op_name, len(names), ", ".join(names)))
    return {names[0]: res}


def execute(fn: Any, spec: Spec, like: str, device: Any, small: bool) -> Dict[str, Any]:
    """Run fn as the harness does. Returns {"status": "ran" or a verdict, "detail", "outputs":
    {name: host storage array} (when ran), "seconds", "rerun": None or the name of an output
    that differed bit for bit on the rerun}."""
    t0 = 0.0
    try:
        if small:
            call(fn, framework(spec, like, device, scale=-2.0), spec)
        ins = framework(spec, like, device)
        before = {k: _arrays.host_bits(v).copy() for k, v in ins.items()}
        t0 = time.perf_counter()
        res = call(fn, ins, spec)
        if device not in (None, "cpu") and _arrays.torch is not None:
            _arrays.torch.cuda.synchronize()
        secs = time.perf_counter() - t0
    except NotImplementedError as e:
        return {"status": "unsupported", "detail": str(e) or "NotImplementedError", "seconds": 0.0, "exc": e}
    except Exception as e:  # the candidate raised: crashed, with the exception in the detail
        return {"status": "crashed", "detail": "%s: %s" % (type(e).__name__, e),
                "seconds": time.perf_counter() - t0 if t0 else 0.0, "exc": e}
    for k, v in ins.items():
        if not np.array_equal(_arrays.host_bits(v), before[k]):
            return {"status": "modified-inputs", "detail": "input %s was written" % k, "seconds": secs}
    try:
        outs = {o: _arrays.to_host(v)[0].copy() for o, v in by_name(res, spec.outputs, spec.op_name).items()}
    except (ValueError, TypeError) as e:
        return {"status": "crashed", "detail": str(e), "seconds": secs}
    rerun: Optional[str] = None
    if small:
        try:
            res2 = by_name(call(fn, framework(spec, like, device), spec), spec.outputs, spec.op_name)
        except Exception as e:  # a rerun that raises: the function is not repeatable
            return {"status": "crashed", "detail": "rerun: %s: %s" % (type(e).__name__, e), "seconds": secs}
        for o, v in res2.items():
            if not np.array_equal(_arrays.host_bits(v), outs[o].reshape(-1).view(np.uint8)):
                rerun = o
                break
    return {"status": "ran", "detail": "", "outputs": outs, "seconds": secs, "rerun": rerun}

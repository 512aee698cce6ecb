"""Running a user's function as `parity check` runs a plugin kernel: a decoy call first (inputs
scaled by -2, so state kept across calls shows), the judged call, a rerun compared bit for bit
(nondeterminism, or outputs left unwritten under `out=`), inputs verified unmodified, guard
regions around preallocated outputs. In the caller's process by default; isolate=True moves
the calls to a spawned worker (python/parity/_worker.py) so a crash or hang is a verdict.
Deliberately not here: judging (the C library's, through parity_py_check_judge)."""
from __future__ import annotations

import inspect
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from . import _arrays
from ._lib import USER_CODE, VERDICTS, lib
from ._signature import check_binds, expected_call

if TYPE_CHECKING:
    from ._case import Case

V = {name: i for i, name in enumerate(VERDICTS)}
HostOutputs = List[Tuple[Any, str]]


class Outcome:
    """What running the function on one workload gave: status is "ran" (outputs to judge) or a
    verdict name; outputs are host numpy arrays in the op's output order."""

    def __init__(self, status: str, detail: str = "", outputs: Optional[HostOutputs] = None,
                 seconds: float = 0.0, rerun: Optional[Tuple[str, str]] = None,
                 exc: Optional[BaseException] = None, probe: Optional[HostOutputs] = None) -> None:
        self.status, self.detail, self.outputs, self.seconds = status, detail, outputs, seconds
        # The exception fn raised in this process (the cause a KernelError is raised from).
        self.exc = exc
        # The probe calls' finding, (verdict, detail) or None (a crash or a modified input there):
        # applied only when the judged run is faithful, as `parity check` reruns only then.
        self.rerun = rerun
        # The probe run's outputs when they differ bit for bit from the judged run's: the caller
        # judges them (stale-cache when unfaithful, else nondeterministic).
        self.probe = probe


def _params(fn: Any) -> Tuple[Optional[Set[str]], bool]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, True
    names: Set[str] = set()
    var_kw = False
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.add(p.name)
    return names, var_kw


def call_kwargs(fn: Any, case: "Case", tensors: Dict[str, Any]) -> Dict[str, Any]:
    """fn(**inputs, **attrs, **dims): attributes and output dimensions are passed when fn names
    them or takes **kwargs (dimensions the inputs cannot tell: always through **kwargs)."""
    names, var_kw = _params(fn)
    kw = dict(tensors)
    for k, v in case.attrs.items():
        if names is None or var_kw or k in names:
            kw[k] = v
    for k, (v, needed) in case.extra_dims.items():
        if k in kw:  # an input named like a letter (attention's V) wins
            continue
        if names is None or k in names or (var_kw and needed):
            kw[k] = v
    return kw


def takes_out(fn: Any) -> bool:
    names, _ = _params(fn)
    return names is not None and "out" in names


def _decoy(tensors: Dict[str, Any], case: "Case") -> Dict[str, Any]:
    """The decoy inputs: floating-point inputs times -2 (exact), the others copied."""
    out: Dict[str, Any] = {}
    for k, t in tensors.items():
        isf = case.input_dtype(k) in _arrays.FLOAT_NAMES
        if _arrays.is_torch(t):
            out[k] = (t.float() * -2).to(t.dtype) if isf else t.clone()
        elif case.input_dtype(k) == "bf16":  # numpy bits: flip the sign, add one to the exponent
            f = (t.astype(np.uint32) << 16).view(np.float32) * np.float32(-2)
            out[k] = (f.view(np.uint32) >> 16).astype(np.uint16)
        else:
            out[k] = t * -2 if isf else t.copy()
    return out


def _normalise(ret: Any, case: "Case") -> HostOutputs:
    """fn's return value as a list in the op's output order (tuple/list, dict by name, or the
    single output). Raises TypeError/ValueError on anything else."""
    names = case.output_names
    if isinstance(ret, dict):
        missing = [n for n in names if n not in ret]
        if missing:
            raise ValueError("returned a dict without %s (outputs: %s)" % (", ".join(missing), ", ".join(names)))
        ret = [ret[n] for n in names]
    elif isinstance(ret, (tuple, list)):
        ret = list(ret)
    elif len(names) == 1 and ret is not None:
        ret = [ret]
    else:
        raise TypeError("returned %s; expected a tuple (%s) or a dict by name" % (type(ret).__name__, ", ".join(names)))
    if len(ret) != len(names):
        raise ValueError("returned %d outputs; the op has %d (%s)" % (len(ret), len(names), ", ".join(names)))
    host = []
    for n, want, x in zip(names, case.output_shapes, ret):
        a, dt = _arrays.to_host(x)
        if tuple(a.shape) != tuple(want):
            raise ValueError("output %s has shape %s; the op's is %s" % (n, tuple(a.shape), tuple(want)))
        host.append((a, dt))
    return host


def _sync(device: Any) -> None:
    if device not in (None, "cpu") and str(device).startswith("cuda"):
        _arrays.torch.cuda.synchronize()


def _exc_detail(what: str, e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = ""
    if tb:
        f = tb[-1]
        where = " (%s:%s)" % (f.filename.rsplit("/", 1)[-1], f.lineno)
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return "%s raised %s%s%s" % (what, type(e).__name__, ": " + msg if msg else "", where)


def run_in_process(fn: Callable[..., Any], case: "Case", like: str, device: Any, decoy: bool, rerun: bool,
                   timeout: Optional[float], out_dtype: str = "f32",
                   on_call: Optional[Callable[[], Any]] = None) -> Outcome:
    """Run fn on case's inputs; returns an Outcome. The case's C buffers are the inputs (on the
    CPU, without a copy), so modification is checked on the very bytes the reference used.

    With the probes (decoy/rerun: non-production workloads), the calls `parity check` makes of
    a kernel (src/verify/check.c, check_anticache.c), ordered for one process, where a memo
    outlives calls: the decoy call (float inputs x -2) writing into buffers B; a call on the
    judged input tensors holding other contents (one element in eight x -2, the first and last
    64 bytes kept; restored after) into B; the judged inputs into B (the probe run); last the
    judged call on fresh copies of the inputs into fresh NaN-prefilled buffers (the run that is
    judged). A memo keyed on output or input pointers or on a few input bytes answers the probe
    run with stale outputs; a nondeterministic function differs between the two runs. The probe
    run's outputs come back (Outcome.probe) when they differ bit for bit from the judged run's:
    the caller judges them (stale-cache when unfaithful, else nondeterministic). on_call, when
    given, is called before each call of fn (the isolated worker's heartbeat: its parent kills a
    call that does not return within the timeout)."""
    tensors = case.framework_inputs(like, device)
    host_before = case.hashes()
    uses_out = takes_out(fn)
    on_cpu = device in (None, "cpu")
    probes = decoy or rerun
    keep: List[Any] = []  # C output buffers alive until judged
    shared: List[Tuple[List["_OutBuf"], Dict[str, Any]]] = []  # the probes' buffers B (out= functions)

    def prealloc() -> Tuple[List["_OutBuf"], Dict[str, Any]]:
        from ._lib import b, lib
        bufs: List[_OutBuf] = []
        views: Dict[str, Any] = {}
        for i, n in enumerate(case.output_names):
            if on_cpu:
                t = lib.parity_py_output_new(case.h, i, b(out_dtype))
                if not t:
                    raise MemoryError("cannot allocate output %s" % n)
                bufs.append(_OutBuf(t))
                a = _arrays.view_of(lib.parity_py_tensor_data(t), int(np.prod(case.output_shapes[i])) *
                                    np.dtype(_arrays.NP_STORAGE[out_dtype]).itemsize, out_dtype,
                                    case.output_shapes[i], bufs[-1])
                views[n] = _arrays.to_framework(a, out_dtype, like, "cpu")
            else:
                views[n] = _arrays.torch.full(case.output_shapes[i], float("nan"),
                                              dtype=_arrays.torch_dtype(out_dtype), device=device)
        return bufs, views

    expected = expected_call(case.input_names, list(case.attrs) + [k for k, (_, needed) in case.extra_dims.items()
                                                                   if needed and k not in case.input_names]
                             + (["out"] if uses_out else []))

    def call(ins: Dict[str, Any], reuse: bool = False) -> Tuple[HostOutputs, List[_OutBuf]]:
        kw = call_kwargs(fn, case, ins)
        check_binds(fn, dict(kw, out=None) if uses_out else kw, expected)
        if on_call is not None:
            on_call()
        if uses_out:
            if not (reuse and shared):
                bv = prealloc()
                keep.append(bv[0])
                if reuse:
                    shared.append(bv)
            bufs, views = shared[0] if reuse else bv
            t = time.perf_counter()
            with USER_CODE:  # never beside a reference called back from the next case's build
                waited[0] = time.perf_counter() - t  # not the function's time
                fn(**kw, out=views)
            return _normalise(views, case), bufs
        t = time.perf_counter()
        with USER_CODE:
            waited[0] = time.perf_counter() - t
            ret = fn(**kw)
        return _normalise(ret, case), []

    probe: Optional[HostOutputs] = None
    found: Optional[Tuple[str, str]] = None
    waited = [0.0]  # the last call's wait for the user-code lock
    try:
        if probes:
            try:
                call(_decoy(tensors, case), reuse=True)
            except NotImplementedError as e:
                return Outcome("unsupported", _exc_detail("fn", e), exc=e)
            except Exception as e:  # the function's own failure is a verdict, never ours
                return Outcome("crashed", _exc_detail("the decoy call of fn", e), exc=e)
            try:
                with _OtherContents(tensors, case) as changed:
                    call(tensors, reuse=True)
                if changed:
                    found = ("modified-inputs", "input %s changed during the call on other contents" % changed[0])
                got, _ = call(tensors, reuse=True)
                _sync(device)
                probe = [(a.copy(), dt) for a, dt in got]
            except Exception as e:
                found = ("crashed", _exc_detail("the probe calls of fn (other contents, then the judged inputs, "
                                                "in the decoy's buffers)", e))
            bad = _modified(case, tensors, host_before, on_cpu)
            if bad and found is None:
                found = ("modified-inputs", "input %s changed during the probe calls" % bad)
        judged = _copies(tensors) if probes else tensors
        t0 = time.perf_counter()
        try:
            first, bufs = call(judged)
            _sync(device)
        except NotImplementedError as e:
            return Outcome("unsupported", _exc_detail("fn", e), exc=e)
        except Exception as e:
            return Outcome("crashed", _exc_detail("fn", e), exc=e)
        secs = time.perf_counter() - t0 - waited[0]
        if timeout is not None and secs > timeout:
            return Outcome("timeout", "ran %.3g s, past timeout=%g s (in-process calls are not "
                           "interrupted: isolate=True stops them)" % (secs, timeout), seconds=secs)
        for buf, n in zip(bufs + (shared[0][0] if shared else []), case.output_names * 2):
            if not buf.guards_ok():
                return Outcome("wrote-out-of-bounds", "bytes around output %s were overwritten" % n, seconds=secs)
        bad = _modified(case, tensors, host_before, on_cpu) or (_changed_copy(judged, case) if probes else None)
        if bad:
            return Outcome("modified-inputs", "input %s changed during the run" % bad, seconds=secs)
        if probe is not None and all(a.dtype == c.dtype and a.nbytes == c.nbytes and
                                     lib.parity_py_memeq(a.ctypes.data, c.ctypes.data, a.nbytes)
                                     for (a, _), (c, _) in zip(first, probe)):
            probe = None  # the same bits: nothing to judge
        return Outcome("ran", outputs=first, seconds=secs, rerun=found, probe=probe)
    finally:
        del tensors


def _copies(tensors: Dict[str, Any]) -> Dict[str, Any]:
    """Fresh copies of the inputs (other addresses: a memo keyed on pointers misses them)."""
    return {k: (t.clone() if _arrays.is_torch(t) else np.array(t, copy=True)) for k, t in tensors.items()}


def _changed_copy(copies: Dict[str, Any], case: "Case") -> Optional[str]:
    """The first copied input whose bytes differ from the case's (the function wrote it)."""
    arrays = case.arrays()
    for k, t in copies.items():
        if not np.array_equal(_arrays.host_bits(t), arrays[k].reshape(-1).view(np.uint8)):
            return k
    return None


# Bytes at each end of every float input the other contents leave alone (src/verify/
# check_anticache.c SAME_KEEP_BYTES: one cache line, the usual cheap fingerprint).
_SAME_KEEP_BYTES = 64


class _OtherContents:
    """For the duration of a with block: about one element in eight of every float input
    (between the kept ends) multiplied by -2 in place, which is exact; the inputs restored from
    a copy afterwards. The list it yields receives the inputs the function changed meanwhile."""

    def __init__(self, tensors: Dict[str, Any], case: "Case") -> None:
        self.tensors, self.case = tensors, case
        self.saved: Dict[str, Tuple[Any, Any]] = {}
        self.changed: List[str] = []

    def __enter__(self) -> List[str]:
        for k, t in self.tensors.items():
            dt = self.case.input_dtype(k)
            n = int(np.prod(t.shape))
            es = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8}.get(dt)
            if es is None:
                continue  # token ids, fp8: left as they are
            keep = (_SAME_KEEP_BYTES + es - 1) // es
            if n <= 2 * keep + 3:
                continue
            idx = np.arange(keep + 3, n - keep, 8)
            orig = t.clone() if _arrays.is_torch(t) else t.copy()
            if _arrays.is_torch(t):
                flat = t.view(-1)
                ti = _arrays.torch.as_tensor(idx, device=t.device)
                flat[ti] = flat[ti] * -2
            else:
                flat = t.reshape(-1)
                if dt == "bf16":  # uint16 bits: through float32, exact both ways
                    f = (flat[idx].astype(np.uint32) << 16).view(np.float32) * np.float32(-2)
                    flat[idx] = (f.view(np.uint32) >> 16).astype(np.uint16)
                else:
                    flat[idx] = flat[idx] * -2
            self.saved[k] = (orig, _arrays.host_bits(t).copy())
        return self.changed

    def __exit__(self, *exc: Any) -> None:
        for k, (orig, perturbed) in self.saved.items():
            t = self.tensors[k]
            if not np.array_equal(_arrays.host_bits(t), perturbed):
                self.changed.append(k)
            if _arrays.is_torch(t):
                t.copy_(orig)
            else:
                np.copyto(t, orig)


def _modified(case: "Case", tensors: Dict[str, Any], before: List[int], on_cpu: bool) -> Optional[str]:
    if on_cpu:
        after = case.hashes()
        for n, x, y in zip(case.input_names, before, after):
            if x != y:
                return n
        # a function may have rebound the tensors' storage (t.set_, resize_): compare the values
    arrays = case.arrays()
    for n, t in tensors.items():
        if not on_cpu or (_arrays.is_torch(t) and t.data_ptr() != arrays[n].ctypes.data):
            if not np.array_equal(_arrays.host_bits(t), arrays[n].reshape(-1).view(np.uint8)):
                return n
    return None


class _OutBuf:
    """A C output buffer with guards (for out= functions), freed when no view of it is left."""

    def __init__(self, h: Optional[int]) -> None:
        self.h = h

    def guards_ok(self) -> bool:
        from ._lib import lib
        return bool(lib.parity_py_tensor_guards_ok(self.h))

    def __del__(self) -> None:
        from ._lib import lib
        h, self.h = self.h, None
        if h:
            lib.parity_py_tensor_free(h)


def progress_fn(progress: Any) -> Optional[Callable[[str], Any]]:
    """progress=True: one line per step on stderr (forced, like the CLI's --progress); a
    callable gets each message; None/False: silent."""
    if callable(progress):
        cb: Callable[[str], Any] = progress
        return cb
    if progress:
        def p(msg: str) -> None:
            sys.stderr.write(msg + "\n")
            sys.stderr.flush()
        return p
    return None

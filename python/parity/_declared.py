"""A parity.Op made into a C declared op (include/parity/custom_op.h parity_custom_op_declare,
through python/csrc/bridge.c parity_py_decl_new), so that its cases, judgement, diagnosis and
reports are the C engine's -- the code that judges the built-in ops (issue #35). What stays in
Python: the reference, called back from C (on copies of the C buffers), and the attribute values
as the user gave them (the C side holds none of them).

The declared op is registered in the bridge under a key of its own ("NAME#declN"): every
function of the package that takes a built-in op's name takes that key too (python/parity/
_case.py, _check.py). Deliberately not here: running the user's function (_harness.py) and
judging (the C library)."""
from __future__ import annotations

import ctypes
import json
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

import numpy as np

from ._custom import _is_float
from ._custom_cause import active, params_of, trial_of
from ._errors import ProblemError
from ._lib import DTYPE_CODE, ROLES, USER_CODE, b, errbuf, lib

if TYPE_CHECKING:
    from ._custom import Op

ROLE_CODE = {r: i for i, r in enumerate(ROLES)}  # op_abi.h parity_role_t, from the C library
_F64, _F32 = DTYPE_CODE["f64"], DTYPE_CODE["f32"]  # kernel_abi.h parity_dtype_t
REF_OK, REF_UNSUPPORTED, REF_ERROR = 0, 1, 2

_REF_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
                           ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                           ctypes.POINTER(ctypes.c_int32))
_SIGS = {
    "parity_py_decl_new": (ctypes.c_void_p, [ctypes.c_char_p, _REF_FN, ctypes.c_char_p, ctypes.c_size_t]),
    "parity_py_decl_key": (ctypes.c_char_p, [ctypes.c_void_p]),
    "parity_py_decl_free": (None, [ctypes.c_void_p]),
    "parity_py_decl_given": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64),
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_size_t]),
}
for _n, (_r, _a) in _SIGS.items():
    _f = getattr(lib, _n)
    _f.restype, _f.argtypes = _r, _a

_BY_KEY: "weakref.WeakValueDictionary[str, Decl]" = weakref.WeakValueDictionary()

# The dtype of the case this thread is building (_case.Case), None outside a build: the inputs a
# reference is called with during a build are exact in it (the C engine rounds every float input
# to the case's dtype; the build's reruns double, take |x| or zero them, which keeps that).
_building = threading.local()


def building_dtype() -> Optional[str]:
    return getattr(_building, "dtype", None)


class building:
    """`with building(dtype):` around a case build on this thread."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __enter__(self) -> None:
        self.prev, _building.dtype = building_dtype(), self.dtype

    def __exit__(self, *exc: Any) -> None:
        _building.dtype = self.prev


def declaration(op: "Op") -> Dict[str, Any]:
    """The op_abi.h declaration of op, as the bridge's JSON."""
    # The attributes stay Python's (the reference and the function get them as given); the C
    # side, which holds 4 numbers, needs none of them: no C kernel runs a parity.Op. It gets the
    # float ones as the cause classifier's parameters, and the intermediates the reference marks
    # (python/parity/_custom_cause.py).
    return {"name": op.name, "description": op.description, "multilinear": bool(op.multilinear),
            "dims": [{"name": d, "sizes": list(s), "fixed": d in op.fixed} for d, s in op.shapes.items()],
            "inputs": [{"name": k, "role": ROLE_CODE[x.role], "dims": list(x.shape), "vocab": x.vocab}
                       for k, x in op.inputs.items()],
            "outputs": [{"name": o, "dims": list(s), "reduced": list(op.reductions.get(o, []))}
                        for o, s in op.outputs.items()],
            "attrs": {}, "params": params_of(op.attrs),
            "intermediates": list(getattr(op, "intermediates", ())),
            "rounded": dict(getattr(op, "rounded", {}))}


def _view(addr: int, n: int, dt: Any) -> Any:
    """n elements of dtype dt at C address addr, as a numpy array over that memory."""
    if not n:
        return np.zeros(0, dtype=dt)
    buf: Any = (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(addr)
    return np.frombuffer(buf, dtype=dt, count=n)


def _host(a: Any) -> Any:
    if hasattr(a, "detach"):  # a torch tensor
        a = a.detach().cpu()
        if str(a.dtype) == "torch.bfloat16":
            a = a.float()
        return a.numpy()
    return np.asarray(a)


class Decl:
    """One parity.Op declared to the C library: .key names it to every name-taking bridge
    function; .op the parity.Op; .error the exception (or the note) of the reference's last
    failed call on this thread, for the message the caller raises (per thread: parity.check
    builds the next case on another thread, _check.py _Ahead)."""

    def __init__(self, op: "Op", spec: str) -> None:
        self.op = op
        self.spec = spec
        self.attrs: Dict[str, Any] = dict(op.attrs)
        self._last = threading.local()
        self._cb = _REF_FN(self._reference)  # kept alive as long as the C op
        err = errbuf()
        self.h = lib.parity_py_decl_new(b(spec), self._cb, err, len(err))
        if not self.h:
            raise ProblemError("op %s: %s" % (op.name, err.value.decode()))
        self.key: str = lib.parity_py_decl_key(self.h).decode()
        _BY_KEY[self.key] = self

    @property
    def error(self) -> Optional[BaseException]:
        e: Optional[BaseException] = getattr(self._last, "error", None)
        return e

    @error.setter
    def error(self, e: Optional[BaseException]) -> None:
        self._last.error = e

    @property
    def note(self) -> str:
        return str(getattr(self._last, "note", ""))

    @note.setter
    def note(self, n: str) -> None:
        self._last.note = n

    def __del__(self) -> None:
        h, self.h = getattr(self, "h", None), None
        if h:
            lib.parity_py_decl_free(h)

    def _reference(self, dtype: int, shapes: Any, ins: Any, outs: Any, trial: Optional[bytes], used: Any) -> int:
        """The C engine's call of the reference (never raises into C); trial: the cause
        classifier's (_custom_cause.trial_of), used[0] set when the reference marked the
        intermediate it rounds."""
        try:
            if getattr(self.op.reference, "_parity_locks_itself", False):  # a problem's (_problem_core.py)
                return self._evaluate(dtype, shapes, ins, outs, trial, used)
            with USER_CODE:  # never beside the candidate (_lib.py)
                return self._evaluate(dtype, shapes, ins, outs, trial, used)
        except BaseException as e:  # noqa: B902 -- any failure of user code is reported, not raised through C
            self.error = e
            return REF_ERROR

    def _evaluate(self, dtype: int, shapes: Any, ins: Any, outs: Any, trial: Optional[bytes] = None,
                  used: Any = None) -> int:
        op = self.op
        t = trial_of(trial)
        attrs = self.attrs
        if t is not None and "param" in t:  # the classifier's refit: that attribute at the trial value
            attrs = dict(attrs)
            attrs[str(t["param"])] = float(t["value"])
        fdt = np.float64 if dtype == _F64 else np.float32
        # the reference gets copies of the C buffers (it may edit its inputs in place), unless it
        # says it copies them itself (a benchmark problem's, _problem_core.py)
        borrow = bool(getattr(op.reference, "_parity_borrows_inputs", False))
        arrays: Dict[str, Any] = {}
        off = 0
        for i, (k, x) in enumerate(op.inputs.items()):
            shape = tuple(int(shapes[off + d]) for d in range(len(x.shape)))
            off += len(x.shape)
            dt = fdt if x.is_float else np.int64
            n = int(np.prod(shape, dtype=np.int64))
            a = _view(ins[i], n, dt).reshape(shape)
            arrays[k] = a if borrow else a.copy()
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"), active(t) as run:
            res = op.reference(**arrays, **attrs)
        if run.used and used:
            used[0] = 1
        got = by_name(res, list(op.outputs), op.name)
        for o, (name, dims) in enumerate(op.outputs.items()):
            shape = tuple(int(shapes[off + d]) for d in range(len(dims)))
            off += len(dims)
            a = _host(got[name])
            if _is_float(a.dtype) and a.dtype.itemsize < np.dtype(fdt).itemsize:
                a = a.astype(fdt)  # parity.round_to(y, "bf16") in a reference: exact promotion
            if dtype == _F32 and a.dtype == np.float64:
                self.note = ("the reference returns float64 on float32 inputs, so parity cannot evaluate it in "
                             "the contract precision: write it with functions that keep the dtype (np.exp(a), "
                             "a * b, not np.float64 constants or dtype=np.float64)")
                return REF_UNSUPPORTED
            if tuple(a.shape) != shape:
                raise ProblemError("reference of %s: output %s has shape %s, expected %s" % (
                    op.name, name, tuple(a.shape), shape))
            n = int(np.prod(shape, dtype=np.int64))
            if n:
                _view(outs[o], n, fdt)[...] = np.asarray(a, dtype=fdt).reshape(-1)
        return REF_OK

    def given(self, g: Dict[str, Any]) -> None:
        """Make g (given_of's) the op's given workload in C (parity_custom_op_given)."""
        sizes = (ctypes.c_int64 * len(g["sizes"]))(*g["sizes"])
        ptrs = (ctypes.c_void_p * len(g["values"]))(*[None if v is None else v.ctypes.data for v in g["values"]])
        err = errbuf()
        if lib.parity_py_decl_given(self.h, b(g["name"]), sizes, ptrs, b(g.get("draw") or ""), err, len(err)) != 0:
            raise ValueError(err.value.decode())

    def given_clear(self) -> None:
        err = errbuf()
        lib.parity_py_decl_given(self.h, b"", None, None, None, err, len(err))

    def failure(self, msg: str) -> ProblemError:
        """The error for a C message about this op: with the reference's own exception or note."""
        e, self.error = self.error, None
        note, self.note = self.note, ""
        if e is not None:
            if isinstance(e, ProblemError):
                return e
            return ProblemError("%s; the reference raised %s: %s" % (msg, type(e).__name__, e))
        if note and "F32" in msg:
            return ProblemError("op %s: %s" % (self.op.name, note))
        # C's words for a C plugin's flag, in the parity.Op's terms
        msg = msg.replace("declared PARITY_OP_MULTILINEAR", "declared multilinear (reductions=)")
        msg = msg.replace("drop the flag to use", "pass multilinear=False to use")
        return ProblemError(msg)


_GIVEN_DTYPES = {"float32": "f32", "float16": "f16", "uint16": "bf16"}


def given_of(op: Any, name: str, arrays: Any, attrs: Any = None, draw: Optional[str] = None,
             sizes: Optional[Mapping[str, int]] = None, dtype: str = "") -> Dict[str, Any]:
    """Given inputs of op ({input: array}; bf16 as uint16 bits) as what Decl.given takes:
    {"name", "dtype", "sizes" (per declared dimension), "values" (float inputs as float64,
    token ids as int64), "draw"}. Sizes come from `sizes`, then the arrays' shapes, a dimension no
    input carries from the declaration's first size. With draw ("base", "outlier-ch",
    "magnitude"), a float input left out of arrays is drawn from its role under that variant
    (its value None here; `dtype` then names the float dtype when no float input is given).
    Raises ValueError naming what is wrong."""
    for k, v in (attrs or {}).items():
        if k in op.attrs and v != op.attrs[k]:
            raise ValueError("given inputs: attribute %s=%r differs from the op's %r: declare the op with "
                             "attrs={%r: %r}" % (k, v, op.attrs[k], k, v))
    from . import _arrays
    have: Dict[str, int] = {k: int(v) for k, v in (sizes or {}).items()}
    values: List[Any] = []
    for k, x in op.inputs.items():
        if k not in arrays and draw and x.is_float:
            values.append(None)  # drawn from its role (parity_custom_op_given_drawn)
            continue
        if k not in arrays:
            raise ValueError("inputs lack %s (op %s takes %s)" % (k, op.name, ", ".join(op.inputs)))
        if x.is_float:
            a, dt = _arrays.to_host(arrays[k])
        else:  # token ids (any integer dtype)
            a, dt = np.asarray(_host(arrays[k])), ""
            if a.dtype.kind not in "iub":
                raise ValueError("input %s: token ids of dtype %s (expected an integer dtype)" % (k, a.dtype))
        if a.ndim != len(x.shape):
            raise ValueError("input %s has %d dimensions, the op's has %d (%s)" % (k, a.ndim, len(x.shape),
                                                                               ", ".join(x.shape)))
        for d, n in zip(x.shape, a.shape):
            if have.setdefault(d, int(n)) != int(n):
                raise ValueError("input %s: dimension %s is %d here, %d %s" % (
                    k, d, n, have[d], "given" if sizes and d in sizes else "in another input"))
        if x.is_float:
            if dt not in ("f32", "f16", "bf16"):
                raise ValueError("input %s: dtype %s (declared ops take float32, float16 or bf16 inputs, bf16 as "
                                 "uint16 bits)" % (k, dt))
            if dtype and dt != dtype:
                raise ValueError("input %s is %s, another float input %s: one float dtype" % (k, dt, dtype))
            dtype = dt
            if dt == "bf16":
                v = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            else:
                v = a.astype(np.float64)
        else:
            v = a.astype(np.int64)
        values.append(np.ascontiguousarray(v))
    return {"name": name, "dtype": dtype or "f32", "draw": draw or "",
            "sizes": [have.get(d, int(s[0])) for d, s in op.shapes.items()], "values": values}


def decl_of(op: "Op") -> Decl:
    """op's declaration in the C library, made once per declaration (re-made when the op's
    fields or reference change)."""
    spec = json.dumps(declaration(op), sort_keys=True)
    d: Optional[Decl] = getattr(op, "_parity_decl", None)
    if d is None or d.spec != spec or d.attrs != dict(op.attrs) or getattr(op, "_parity_decl_ref", None) is not op.reference:
        d = Decl(op, spec)
        op._parity_decl = d  # type: ignore[attr-defined]
        op._parity_decl_ref = op.reference  # type: ignore[attr-defined]
    return d


def lookup(key: str) -> Optional[Decl]:
    """The declaration registered under key (None: a built-in op's name)."""
    return _BY_KEY.get(key)


def by_name(res: Any, names: List[str], op_name: str) -> Dict[str, Any]:
    """A result (a dict by name, a tuple in order, or the single output) as {name: value}."""
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


class _StandinInput:
    def __init__(self, shape: List[str], is_float: bool) -> None:
        self.shape, self.is_float = tuple(shape), is_float


class _Standin:
    """An op-like stand-in for a parity.Op in the isolated worker: the same declaration (hence
    the same workloads and inputs, built by the same C code from the same seed), no reductions
    and not multilinear (it judges nothing: the worker only runs the function), and for a
    reference the parent's fp64 reference of the one case the worker builds."""

    def __init__(self, spec: Dict[str, Any], attrs: Dict[str, Any], refs: List[Any]) -> None:
        self.name = spec["name"]
        self.description = spec.get("description", "")
        self.multilinear = False
        self.inputs = {x["name"]: _StandinInput(x["dims"], x["role"] != ROLE_CODE["token_ids"])
                       for x in spec["inputs"]}
        self.outputs = {o["name"]: tuple(o["dims"]) for o in spec["outputs"]}
        self.attrs = dict(attrs)
        self.refs = refs

    def reference(self, **kw: Any) -> Any:
        fl = [v for k, v in kw.items() if k in self.inputs and self.inputs[k].is_float]
        dt = fl[0].dtype if fl else np.float64
        return tuple(np.asarray(r, dtype=dt) for r in self.refs)


def standin(spec_json: str, attrs: Dict[str, Any], refs: List[Any]) -> Decl:
    """The worker's declaration of a parity.Op it only runs functions of (_case.case_from_spec)."""
    spec = json.loads(spec_json)
    spec["multilinear"] = False
    spec["rounded"] = {}  # its stand-in reference marks nothing, and the worker judges nothing
    for o in spec["outputs"]:
        o["reduced"] = []
    d = Decl(_Standin(json.loads(spec_json), attrs, refs), json.dumps(spec, sort_keys=True))  # type: ignore[arg-type]
    return d

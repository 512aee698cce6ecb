"""A C-declared op in Python: parity.Op.from_plugin(path, name) loads an op a plugin declares
through include/parity/op_abi.h (docs/custom-ops.md, "In C") and returns a parity.Op whose
reference runs in C (the plugin's reference function, through the bridge), so that a Python
function -- a torch kernel, a Triton launcher -- is judged against a C reference with everything
parity.check, parity.power, baselines=True and the diagnosis give a parity.Op.

The Op's workloads are the Python ones (numpy's generator, as for every parity.Op): the same
laws as the C harness's, other draws. The reference computes in float64, or in float32 for the
contract evaluation when the plugin's reference supports F32 (otherwise it returns float64 for
float32 inputs, as a numpy reference that does not keep the dtype: the op then needs a
multilinear reduction, as in C). For other float dtypes (bf16, fp16: the power self-test's
"bf16-math") the reference runs in float32 and its result is rounded to that dtype once -- C's
"bf16-out", the most a C reference offers.
Deliberately not here: the plugin's kernels (judge them with `parity check --op-plugin`)."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._lib import lib

_VP = ctypes.c_void_p
_KERNEL_OK, _KERNEL_UNSUPPORTED = 0, 1


def _sig(name: str, res: Any, args: List[Any]) -> Any:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
    return f


_load = _sig("parity_py_custom_op_load", _VP, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t])
_free = _sig("parity_py_custom_op_free", None, [_VP])
_json = _sig("parity_py_custom_op_json", _VP, [_VP])
_ref = _sig("parity_py_custom_op_reference", ctypes.c_int, [_VP, _VP, ctypes.c_int, _VP, _VP])
_pyfree = _sig("parity_py_free", None, [_VP])


class _Handle:
    """The loaded declaration (and its shared object); freed with the last reference to it."""

    def __init__(self, path: str, name: Optional[str]) -> None:
        err = ctypes.create_string_buffer(1024)
        self.h = _load(str(path).encode(), (name or "").encode(), err, 1024)
        if not self.h:
            raise ValueError(err.value.decode())
        p = _json(self.h)
        if not p:
            raise MemoryError("parity_custom_op_json")
        self.desc: Dict[str, Any] = json.loads(ctypes.string_at(p).decode())
        _pyfree(p)

    def __del__(self) -> None:
        if getattr(self, "h", None):
            _free(self.h)
            self.h = None


class CReference:
    """reference(**inputs, **attrs) calling the plugin's reference (see the module's docstring);
    the attributes are ignored: the C reference takes the declared values itself (and, when the
    cause classifier refits one, the trial value, which the C library passes on to it:
    src/custom/custom_cause.c)."""

    runs_in_c = True  # _custom_power.py: no bf16 evaluation, the fp32 one rounded instead

    def __init__(self, handle: _Handle) -> None:
        self.handle = handle
        d = handle.desc
        self.dims = list(d["dims"])
        self.inputs = d["inputs"]
        self.outputs = d["outputs"]

    def _call(self, arrays: Dict[str, Any], dt: int, cast: Any) -> Tuple[int, List[Any]]:
        sizes = {k: int(v[0]) for k, v in self.handle.desc["dims"].items()}
        ins = []
        for x in self.inputs:
            a = np.asarray(arrays[x["name"]])
            for dname, s in zip(x["dims"], a.shape):
                sizes[dname] = int(s)
            ins.append(np.ascontiguousarray(a, dtype=np.int64 if x["role"] == "token_ids" else cast))
        sz = np.array([sizes[dn] for dn in self.dims], dtype=np.int64)
        outs = [np.full(tuple(sizes[dn] for dn in o["dims"]), np.nan, dtype=cast) for o in self.outputs]
        ip = (_VP * len(ins))(*[a.ctypes.data for a in ins])
        op = (_VP * len(outs))(*[a.ctypes.data for a in outs])
        rc = _ref(self.handle.h, sz.ctypes.data, dt, ctypes.cast(ip, _VP), ctypes.cast(op, _VP))
        return int(rc), outs

    def __call__(self, **kw: Any) -> Any:
        floats = [np.asarray(kw[x["name"]]).dtype for x in self.inputs if x["role"] != "token_ids"]
        want = floats[0] if floats else np.dtype(np.float64)
        if want == np.float64:
            rc, outs = self._call(kw, 0, np.float64)
        else:
            rc, outs = self._call(kw, 1, np.float32)  # PARITY_DT_F32
            if rc == _KERNEL_UNSUPPORTED:  # fp64 only: float64 results, as a dtype-dropping reference
                rc, outs = self._call(kw, 0, np.float64)
            elif rc == _KERNEL_OK and want != np.float32:
                outs = [o.astype(want) for o in outs]  # bf16/fp16: the fp32 result rounded once
        if rc != _KERNEL_OK:
            raise ValueError("the reference of %s returned %d" % (self.handle.desc["name"], rc))
        return tuple(outs) if len(outs) > 1 else outs[0]


def open_op(path: str, name: Optional[str] = None) -> _Handle:
    """The op `name` (None: the plugin's only one) that the shared object at path declares
    (op_abi.h), loaded: its declaration is .desc, CReference(it) its reference. parity.Op.from_plugin
    (_custom.py) builds the parity.Op from them: this module stays below _custom.py, importing
    nothing of it."""
    return _Handle(path, name)

"""A catalog kernel as a Python function (`out=` style, numpy inputs), for benchmarks and tests:
parity.check on it runs the same C code as `parity check --kernel builtin:NAME`, so the two can
be timed and compared. Not part of the public API."""
from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from . import _case
from ._lib import DTYPE_CODE, b, lib

_DT = DTYPE_CODE  # kernel_abi.h parity_dtype_t, from the C library
_NP = {np.dtype(np.float64): 0, np.dtype(np.float32): 1, np.dtype(np.float16): 3,
       np.dtype(np.int32): 4, np.dtype(np.int64): 5, np.dtype(np.uint8): 6}


def kernel(op: str, name: str, threads: int = 1) -> Any:
    """fn(**inputs, out=...) running catalog kernel `name`; inputs as numpy arrays in the
    kernel's own input dtype (bf16 as uint16 bits: check with like="numpy", dtype=in_dtype)."""
    in_dt = lib.parity_py_builtin_dtype(b(op), b(name), 0)
    if in_dt is None:
        raise ValueError("op %s has no catalog kernel %r" % (op, name))
    in_dt = in_dt.decode()
    static = _case._op_static(op)
    in_names = [x["name"] for x in static["inputs"]]
    floats = {x["name"]: x["float"] for x in static["inputs"]}
    out_names = static["outputs"]
    MAXD = 8

    def fn(out: Any, **kw: Any) -> None:
        ins = [np.ascontiguousarray(kw[n]) for n in in_names]
        outs = [out[n] for n in out_names]
        attrs = [(k, float(v)) for k, v in kw.items() if k not in in_names and isinstance(v, float)]
        ptr = (ctypes.c_void_p * len(ins))(*[a.ctypes.data for a in ins])
        dts = (ctypes.c_int32 * len(ins))(*[_DT[in_dt] if floats[n] else _NP[a.dtype] for n, a in zip(in_names, ins)])
        nd = (ctypes.c_int32 * len(ins))(*[a.ndim for a in ins])
        sh = (ctypes.c_int64 * (MAXD * len(ins)))()
        for j, a in enumerate(ins):
            for d, s in enumerate(a.shape):
                sh[j * MAXD + d] = s
        optr = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        ond = (ctypes.c_int32 * len(outs))(*[o.ndim for o in outs])
        osh = (ctypes.c_int64 * (MAXD * len(outs)))()
        for j, o in enumerate(outs):
            for d, s in enumerate(o.shape):
                osh[j * MAXD + d] = s
        an = (ctypes.c_char_p * max(len(attrs), 1))(*[b(k) for k, _ in attrs])
        av = (ctypes.c_double * max(len(attrs), 1))(*[v for _, v in attrs])
        rc = lib.parity_py_run_builtin(b(op), b(name), len(ins), ptr, dts, nd, sh, len(outs), optr, ond, osh,
                                       len(attrs), an, av, threads)
        if rc == 1:
            raise NotImplementedError("builtin:%s does not support this shape/dtype" % name)
        if rc != 0:
            raise RuntimeError("builtin:%s returned %d" % (name, rc))

    fn.__name__ = fn.__qualname__ = "builtin_" + name.replace(".", "_")
    fn.__doc__ = "catalog kernel builtin:%s called through the Python layer" % name
    k: Any = fn
    k.in_dtype = in_dt
    k.out_dtype = lib.parity_py_builtin_dtype(b(op), b(name), 1).decode()
    return k

"""parity.make_values: the value schemes parity's workloads are made of (what make_tensor is to
torch.testing), drawn by the C library's own generators (include/parity/workload.h through the
bridge), so a test can build inputs with the laws -- and, for the same seed and stream, the very
values -- of parity's workloads."""
from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._formats import round_bits
from ._lib import errbuf, lib

# scheme name -> the bridge's kind (parity_vals_kind_t; 100 + parity_gamma_kind_t; 200 +
# parity_ids_kind_t) and what it draws.
SCHEMES: Dict[str, Tuple[int, str]] = {
    "normal": (0, "N(0,1) x scale"),
    "gradient": (1, "per row a magnitude 10^U(-6,-3) x scale, times N(0,1) (real backward passes)"),
    "outlier": (2, "N(0,1) x scale with `outliers` seed-chosen columns times outlier_factor"),
    "uniform01": (3, "U[0,1) x scale (torch.rand, as KernelBench feeds kernels)"),
    "int": (4, "integers uniform in [-4, 4] (exact sums in fp32)"),
    "ones": (5, "all scale"),
    "sparse-pow2": (6, "0 with probability 1/2, else +-2^e, |e| <= 2, times scale (exact sums)"),
    "gamma-trained": (101, "exp(0.5 N(0,1)): a trained norm weight (stream unused)"),
    "gamma-normal": (102, "N(0,1) norm weight (stream unused)"),
    "ids-uniform": (200, "token ids uniform over [0, vocab)"),
    "ids-zipf": (201, "token ids Zipf(zipf_s) over vocab ranks, ranks mapped to ids by a seeded permutation"),
    "ids-text": (202, "GPT-2 ids of parity's text corpus (vocab >= 50257; needs the shipped data)"),
}
_ALIASES = {"randn": "normal", "gradient-scale": "gradient", "rand": "uniform01", "intprobe": "int",
            "sparse_pow2": "sparse-pow2", "zipf": "ids-zipf", "text": "ids-text"}


def make_values(shape: Union[int, Sequence[int]], scheme: str = "normal", dtype: Optional[str] = None,
                seed: int = 1, *, stream: int = 0, scale: float = 1.0, outliers: int = 0,
                outlier_factor: float = 1.0, vocab: Optional[int] = None, zipf_s: float = 1.1,
                like: str = "numpy", device: str = "cpu") -> Any:
    """An array of `shape` drawn by parity's workload generator `scheme` (SCHEMES lists them:
    normal, gradient, outlier, uniform01, int, ones, sparse-pow2, gamma-trained, gamma-normal,
    ids-uniform, ids-zipf, ids-text), rounded to `dtype` once (round to nearest even).

    Rows are the leading dimensions flattened, columns the last one: each row draws from its own
    stream of (seed, stream, row), as in the C library, so gemm's A of workload W with seed s is
    make_values((M, K), W's scheme, dtype, s, stream=0x41, scale=...) bit for bit.
    dtype: "f32" (default), "f64", "f16" or "bf16" for values; token ids are int32 (dtype None,
    "i32") or "i64". like="numpy" gives what parity.inputs gives (bf16 as uint16 bit patterns),
    like="torch" a torch tensor (torch.bfloat16) on `device`."""
    if not hasattr(lib, "parity_py_workload_values"):
        raise RuntimeError("this build's bridge (%s) predates parity.make_values: rebuild it (cmake --build "
                           "BUILD --target parity_python)" % getattr(lib, "_name", "libparity_python.so"))
    scheme = _ALIASES.get(scheme, scheme)
    if scheme not in SCHEMES:
        raise ValueError("scheme %r: expected one of %s" % (scheme, ", ".join(SCHEMES)))
    kind = SCHEMES[scheme][0]
    dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in dims):
        raise ValueError("shape %s: sizes must be >= 0" % (dims,))
    cols = dims[-1] if dims else 1
    rows = int(np.prod(dims[:-1], dtype=np.int64)) if dims else 1
    err = errbuf()
    if kind >= 200:
        if vocab is None:
            raise ValueError("scheme %s: pass vocab= (ids are drawn in [0, vocab))" % scheme)
        name = "i32" if dtype is None else str(dtype)
        if name not in ("i32", "i64"):
            raise ValueError("dtype %r: token ids are i32 or i64" % (dtype,))
        ids = np.empty(rows * cols, dtype=np.int32)
        rc = lib.parity_py_workload_values(kind, 1.0, 0, 1.0, int(seed), 0, rows, cols, None, float(zipf_s),
                                           int(vocab), ids.ctypes.data_as(ctypes.c_void_p), err, len(err))
        if rc != 0:
            raise ValueError("make_values(%s): %s" % (scheme, err.value.decode()))
        out: Any = ids.reshape(dims).astype(np.int64 if name == "i64" else np.int32, copy=False)
        return _arrays.to_framework(out, name, like, device)
    name = _arrays.canon_dtype("f32" if dtype is None else dtype)
    vals = np.empty(rows * cols, dtype=np.float64)
    rc = lib.parity_py_workload_values(kind, float(scale), int(outliers), float(outlier_factor), int(seed),
                                       int(stream), rows, cols, vals.ctypes.data_as(ctypes.c_void_p), 0.0, 0,
                                       None, err, len(err))
    if rc != 0:
        raise ValueError("make_values(%s): %s" % (scheme, err.value.decode()))
    if name == "bf16":
        store: Any = round_bits(vals, "bf16").astype(np.uint16)
    else:
        store = vals.astype(_arrays.NP_STORAGE[name])
    return _arrays.to_framework(np.ascontiguousarray(store.reshape(dims)), name, like, device)

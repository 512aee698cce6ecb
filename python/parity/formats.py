"""parity.round: the values an array becomes in a number format, bit-exact (the library's
encoder: correctly rounded from the exact double, no double rounding; docs/formats.md)."""
import numpy as np

from . import _arrays
from ._lib import b, errbuf, lib

_MODES = {"nearest": 0, "nearest_even": 0, "toward_zero": 1, "truncate": 1, "stochastic": 2}
FORMATS = ("fp32", "tf32", "bf16", "fp16", "e4m3fn", "e5m2")


def round(x, fmt, *, mode="nearest", seed=None, saturate=None, bits=False):  # noqa: A001 (parity.round)
    """The values x becomes in `fmt`: "bf16", "fp16", "e4m3fn", "e5m2", "tf32", "fp32" or
    "custom:m=T,e=W" (T fraction bits, W exponent bits). mode: "nearest" (ties to even),
    "toward_zero" or "stochastic" (seeded; seed=None means 0). saturate: None for the format's
    default (e4m3fn overflows to NaN, the others to inf, as ml_dtypes and PyTorch), True to clamp
    to the largest finite value, False to overflow. Returns float64 values (bits=True: the
    codes as uint32). x: anything numpy converts, or a torch tensor (returned as torch, f64)."""
    was_torch = _arrays.is_torch(x)
    if was_torch:
        t = x.detach().cpu()
        xa = (t.float() if t.dtype == _arrays.torch.bfloat16 else t).numpy().astype(np.float64)
    else:
        xa = np.asarray(x, dtype=np.float64)
    if mode not in _MODES:
        raise ValueError("mode=%r: expected nearest, toward_zero or stochastic" % (mode,))
    if mode == "stochastic" and seed is None:
        seed = 0
    flat = np.ascontiguousarray(xa.reshape(-1))
    out = np.empty_like(flat)
    codes = np.empty(flat.shape, dtype=np.uint32)
    err = errbuf()
    sat = -1 if saturate is None else int(bool(saturate))
    rc = lib.parity_py_round(b(fmt), _MODES[mode], int(seed or 0), sat, flat.ctypes.data, flat.size,
                             out.ctypes.data, codes.ctypes.data, err, len(err))
    if rc != 0:
        raise ValueError(err.value.decode())
    res = (codes if bits else out).reshape(xa.shape)
    if was_torch:
        return _arrays.torch.from_numpy(res.astype(np.int64) if bits else res)
    return res if res.shape else res[()]

"""parity.round_to: the values an array becomes in a number format, bit-exact (the library's
encoder: correctly rounded from the exact double, no double rounding; docs/formats.md), returned
in a dtype that holds them exactly."""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from . import _arrays
from ._lib import b, errbuf, lib

_MODES = {"nearest": 0, "nearest_even": 0, "toward_zero": 1, "truncate": 1, "stochastic": 2}
FORMATS = ("fp32", "tf32", "bf16", "fp16", "e4m3fn", "e5m2")
_ALIASES = {"f32": "fp32", "float32": "fp32", "f16": "fp16", "float16": "fp16", "half": "fp16",
            "bfloat16": "bf16", "float8_e4m3fn": "e4m3fn", "float8_e5m2": "e5m2"}


def _ml_dtypes() -> Any:
    try:
        import ml_dtypes
        return ml_dtypes
    except ImportError:
        return None


def _custom_fits_f32(fmt: str) -> bool:
    """custom:m=T,e=W fits float32 exactly when T <= 23 fraction bits and W <= 8 exponent bits."""
    try:
        kv = dict(p.split("=", 1) for p in fmt[len("custom:"):].split(","))
        return int(kv["m"]) <= 23 and int(kv["e"]) <= 8
    except (ValueError, KeyError):
        return False


def result_dtype(fmt: str) -> np.dtype[Any]:
    """The numpy dtype parity.round_to returns for fmt: the format's own where numpy has one
    (float32 for fp32 and tf32 -- tf32 values are float32 values --, float16 for fp16),
    ml_dtypes' bfloat16 / float8_e4m3fn / float8_e5m2 when ml_dtypes is importable; without it
    the narrowest numpy float that holds every value of the format exactly (float32 for bf16,
    float16 for e4m3fn and e5m2); float32 for custom formats that fit it, else float64."""
    fmt = _ALIASES.get(fmt, fmt)
    ml = _ml_dtypes()
    if fmt in ("fp32", "tf32"):
        return np.dtype(np.float32)
    if fmt == "fp16":
        return np.dtype(np.float16)
    if fmt == "bf16":
        return np.dtype(ml.bfloat16) if ml is not None else np.dtype(np.float32)
    if fmt in ("e4m3fn", "e5m2"):
        return np.dtype(getattr(ml, "float8_" + fmt)) if ml is not None else np.dtype(np.float16)
    if fmt.startswith("custom:") and _custom_fits_f32(fmt):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _encode(x: Any, fmt: str, mode: str, seed: Optional[int], saturate: Optional[bool]
            ) -> "tuple[npt.NDArray[np.float64], npt.NDArray[np.uint32], bool]":
    """(values as float64, codes as uint32, whether x was a torch tensor), shaped as x."""
    was_torch = _arrays.is_torch(x)
    if was_torch:
        t = x.detach().cpu()
        torch = _arrays.torch
        xa = np.asarray((t.float() if t.dtype == torch.bfloat16 else t).numpy(), dtype=np.float64)
    else:
        xa = np.asarray(x, dtype=np.float64)
    if mode not in _MODES:
        raise ValueError("mode=%r: expected nearest, toward_zero or stochastic" % (mode,))
    if mode == "stochastic" and seed is None:
        seed = 0
    fmt = _ALIASES.get(fmt, fmt)
    flat = np.ascontiguousarray(xa.reshape(-1))
    out = np.empty_like(flat)
    codes = np.empty(flat.shape, dtype=np.uint32)
    err = errbuf()
    sat = -1 if saturate is None else int(bool(saturate))
    rc = lib.parity_py_round(b(fmt), _MODES[mode], int(seed or 0), sat, flat.ctypes.data, flat.size,
                             out.ctypes.data, codes.ctypes.data, err, len(err))
    if rc != 0:
        raise ValueError(err.value.decode())
    return out.reshape(xa.shape), codes.reshape(xa.shape), was_torch


def round_f64(x: Any, fmt: str, *, mode: str = "nearest", seed: Optional[int] = None,
              saturate: Optional[bool] = None) -> "npt.NDArray[np.float64]":
    """The rounded values as a float64 array (the package's own arithmetic uses this)."""
    return _encode(np.asarray(x, dtype=np.float64), fmt, mode, seed, saturate)[0]


def round_bits(x: Any, fmt: str) -> "npt.NDArray[np.uint32]":
    """The codes (round to nearest even, the format's default overflow) as uint32."""
    return _encode(np.asarray(x, dtype=np.float64), fmt, "nearest", None, None)[1]


def round_to(x: Any, fmt: str, *, mode: str = "nearest", seed: Optional[int] = None,
             saturate: Optional[bool] = None, bits: bool = False) -> Any:
    """The values x becomes in `fmt`: "bf16", "fp16", "e4m3fn", "e5m2", "tf32", "fp32" or
    "custom:m=T,e=W" (T fraction bits, W exponent bits). mode: "nearest" (ties to even),
    "toward_zero" or "stochastic" (seeded; seed=None means 0). saturate: None for the format's
    default (e4m3fn overflows to NaN, the others to inf, as ml_dtypes and PyTorch), True to clamp
    to the largest finite value, False to overflow.

    Returns an array of the format's dtype (result_dtype(fmt): float32 for fp32/tf32, float16
    for fp16, ml_dtypes.bfloat16 / float8_e4m3fn / float8_e5m2 when ml_dtypes is importable,
    else the narrowest numpy float that holds the values exactly), a scalar of it for a scalar
    x, or with bits=True the codes as uint32. x: anything numpy converts, or a torch tensor
    (returned as a torch tensor of the format's torch dtype when torch has one)."""
    vals, codes, was_torch = _encode(x, fmt, mode, seed, saturate)
    if bits:
        if was_torch:
            return _arrays.torch.from_numpy(codes.astype(np.int64))
        return codes if codes.shape else codes[()]
    dt = result_dtype(fmt)
    res = vals.astype(dt)  # exact: every value of the format is a value of dt
    if was_torch:
        torch = _arrays.torch
        tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
               "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None),
               "float8_e5m2": getattr(torch, "float8_e5m2", None)}.get(dt.name)
        if tdt is None:
            return torch.from_numpy(vals)
        return torch.from_numpy(np.ascontiguousarray(vals.astype(np.float32))).to(tdt)
    return res if res.shape else res[()]


def round(x: Any, fmt: str, *, mode: str = "nearest", seed: Optional[int] = None,  # noqa: A001
          saturate: Optional[bool] = None, bits: bool = False) -> Any:
    """Deprecated: parity.round_to (which returns the format's dtype). This alias keeps the old
    behaviour, float64 values (or uint32 codes with bits=True)."""
    warnings.warn("parity.round is deprecated (it shadows the builtin round): use parity.round_to, "
                  "which returns the format's dtype (float64(parity.round_to(...)) for the old values)",
                  DeprecationWarning, stacklevel=2)
    vals, codes, was_torch = _encode(x, fmt, mode, seed, saturate)
    res = codes if bits else vals
    if was_torch:
        return _arrays.torch.from_numpy(res.astype(np.int64) if bits else res)
    return res if res.shape else res[()]

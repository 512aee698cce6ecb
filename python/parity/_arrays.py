"""Tensors across the boundary: parity's dtypes in numpy and torch, zero-copy views of the
C library's buffers, and a function's outputs brought to the host once for judging.

bf16 and fp8 travel as their bit patterns (uint16 / uint8) where a framework has no dtype for
them: numpy without ml_dtypes, torch before 2.1 for fp8. torch has no uint16 before 2.3, so a
bf16 buffer reaches torch as int16 reinterpreted with .view(torch.bfloat16), which is free.
"""
from __future__ import annotations

import ctypes
import importlib.util
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

# torch is optional, and imported only when a call needs it (like="torch", a torch output): a
# numpy user, or a worker process judging numpy code, does not pay its import (seconds).
_torch: List[Any] = []


def _t() -> Any:
    if not _torch:
        import torch
        _torch.append(torch)
    return _torch[0]


def have_torch() -> bool:
    return bool(_torch) or importlib.util.find_spec("torch") is not None


def __getattr__(name: str) -> Any:  # parity._arrays.torch: the module, or None when it cannot be imported
    if name == "torch":
        try:
            return _t()
        except Exception:
            return None
    raise AttributeError(name)

# parity dtype name -> (numpy dtype of the storage, bytes)
NP_STORAGE: Dict[str, Any] = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.uint16,
    "i32": np.int32, "i64": np.int64, "u8": np.uint8, "e4m3fn": np.uint8, "e5m2": np.uint8,
}
FLOAT_NAMES = {"f64", "f32", "f16", "bf16", "e4m3fn", "e5m2"}


def canon_dtype(name: Any) -> str:
    """'bf16', 'bfloat16', 'fp32', 'float32', torch.bfloat16, np.float32 ... -> parity's name."""
    s = str(name).replace("torch.", "").lower()
    if isinstance(name, type) and issubclass(name, np.generic):
        s = np.dtype(name).name
    table = {"bf16": "bf16", "bfloat16": "bf16", "f32": "f32", "fp32": "f32", "float32": "f32",
             "float": "f32", "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
             "f64": "f64", "fp64": "f64", "float64": "f64", "double": "f64"}
    if s in table:
        return table[s]
    raise ValueError("dtype %r: expected bf16, f32, f16 or f64" % (name,))


def torch_dtype(name: str) -> Any:
    torch = _t()
    t = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
         "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}
    if name in t:
        return t[name]
    fp8 = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}.get(name)
    return getattr(torch, fp8, None) if fp8 else None


class _Holder:
    """The C buffer seen through the array interface, referencing the Python object that frees
    it: an array made from it has the holder as its base, so the memory outlives every view."""
    __slots__ = ("buf", "owner", "__weakref__")

    def __init__(self, buf: Any, owner: Any) -> None:
        self.buf = buf
        self.owner = owner

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        return {"data": (ctypes.addressof(self.buf), False), "shape": (ctypes.sizeof(self.buf),),
                "typestr": "|u1", "version": 3}


def view_of(addr: int, nbytes: int, dtype_name: str, shape: Sequence[int], owner: Any) -> Any:
    """A writable numpy array over C memory [addr, addr + nbytes), keeping `owner` alive as long
    as the array or any view of it (a torch tensor from torch.from_numpy included) lives."""
    buf = (ctypes.c_char * max(int(nbytes), 1)).from_address(addr)
    raw = np.asarray(_Holder(buf, owner))
    dt = np.dtype(NP_STORAGE[dtype_name])
    count = int(np.prod(shape, dtype=np.int64))
    return raw[: count * dt.itemsize].view(dt).reshape(shape)


def to_framework(arr: Any, dtype_name: str, like: str, device: Any = "cpu") -> Any:
    """numpy storage -> what `like` asks for: the array itself ("numpy"), or a torch tensor
    sharing its memory on the CPU (a copy on another device)."""
    if like == "numpy":
        if device not in (None, "cpu"):
            raise ValueError("like='numpy' works on the CPU only (device=%r)" % (device,))
        return arr
    try:
        torch = _t()
    except Exception as e:
        raise ImportError("like='torch' needs torch, which cannot be imported here (%s)" % e)
    if dtype_name == "bf16":
        t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    elif dtype_name in ("e4m3fn", "e5m2"):
        t = torch.from_numpy(arr)
        td = torch_dtype(dtype_name)
        if td is not None:
            t = t.view(td)
    else:
        t = torch.from_numpy(arr)
    if device not in (None, "cpu"):
        t = t.to(device)
    return t


def is_torch(x: Any) -> bool:
    t = sys.modules.get("torch")  # a tensor exists only once torch is imported
    return t is not None and isinstance(x, t.Tensor)


def to_host(x: Any) -> Tuple[Any, str]:
    """A function's output as (contiguous numpy storage, parity dtype name). CPU torch tensors
    and numpy arrays are not copied unless non-contiguous; device tensors are copied once."""
    if is_torch(x):
        torch = _t()
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), "bf16"
        for nm in ("e4m3fn", "e5m2"):
            td = torch_dtype(nm)
            if td is not None and t.dtype == td:
                return t.view(torch.uint8).numpy(), nm
        a = t.numpy()
    else:
        a = np.asarray(x)
    if a.ndim == 0:  # a 0-d result (a loss): ascontiguousarray would make it (1,)
        a = a.copy()
    else:
        a = np.ascontiguousarray(a)
    name = a.dtype.name
    if name == "bfloat16":  # ml_dtypes
        return a.view(np.uint16), "bf16"
    if name in ("float8_e4m3fn", "float8_e5m2"):
        return a.view(np.uint8), name[len("float8_"):]
    m = {"float64": "f64", "float32": "f32", "float16": "f16", "uint16": "bf16"}
    if name not in m:
        raise TypeError("output of dtype %s: expected float32, float64, float16 or bfloat16 "
                        "(bf16 as uint16 bit patterns)" % name)
    return a, m[name]


def host_bits(x: Any) -> Any:
    """The bytes of an array or tensor as a flat uint8 numpy array (for bit-for-bit checks)."""
    if is_torch(x):
        torch = _t()
        t = x.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        elif t.dtype in tuple(d for d in (torch_dtype("e4m3fn"), torch_dtype("e5m2")) if d is not None):
            t = t.view(torch.uint8)
        a = t.numpy()
    else:
        a = np.ascontiguousarray(np.asarray(x))
    return a.reshape(-1).view(np.uint8)

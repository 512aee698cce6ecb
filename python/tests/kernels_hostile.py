"""Hostile functions written against a built-in op (rmsnorm_fwd: x, gamma, eps -> y) and a
declared one (the SCALE op of test_hostile.py: x, gamma -> y = x * gamma), each with out= (parity
preallocates guarded, NaN-prefilled buffers) so that every misbehaviour `parity check` catches
in a C kernel can be written in Python: blocking ignoring signals, writing past or before its
output, memoising on the output pointer or on the input pointer, editing an input, differing
between runs. Module level: isolate=True pickles them by reference."""
import ctypes
import signal
import time

import numpy as np


def _rms(x, gamma, eps):
    x = x.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma.astype(np.float64)).astype(np.float32)


def rms_good(x, gamma, eps, out):
    out["y"][...] = _rms(x, gamma, eps)


def scale_good(x, gamma, out):
    out["y"][...] = (x.astype(np.float64) * gamma.astype(np.float64)).astype(np.float32)


def _blocks():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.5)


def rms_blocks(x, gamma, eps, out):
    _blocks()


def scale_blocks(x, gamma, out):
    _blocks()


def _poke(a, offset):
    """Write 8 bytes at offset from the start of a's buffer (past its end, or before it)."""
    ctypes.memset(a.ctypes.data + offset, 0x7F, 8)


def rms_oob_after(x, gamma, eps, out):
    rms_good(x, gamma, eps, out)
    _poke(out["y"], out["y"].nbytes)


def rms_oob_before(x, gamma, eps, out):
    rms_good(x, gamma, eps, out)
    _poke(out["y"], -8)


def scale_oob_after(x, gamma, out):
    scale_good(x, gamma, out)
    _poke(out["y"], out["y"].nbytes)


def scale_oob_before(x, gamma, out):
    scale_good(x, gamma, out)
    _poke(out["y"], -8)


_MEMO = {}


def rms_memo_out(x, gamma, eps, out):
    """answers from a memo keyed on the output buffer's address"""
    key = ("rms-out", out["y"].ctypes.data)
    if key in _MEMO:
        out["y"][...] = _MEMO[key]
        return
    rms_good(x, gamma, eps, out)
    _MEMO[key] = out["y"].copy()


def scale_memo_out(x, gamma, out):
    """answers from a memo keyed on the output buffer's address"""
    key = ("scale-out", out["y"].ctypes.data)
    if key in _MEMO:
        out["y"][...] = _MEMO[key]
        return
    scale_good(x, gamma, out)
    _MEMO[key] = out["y"].copy()


def scale_memo_in(x, gamma, out):
    """answers from a memo keyed on the input's address and its first bytes"""
    key = ("scale-in", x.ctypes.data, x.reshape(-1)[:4].tobytes())
    if key in _MEMO:
        out["y"][...] = _MEMO[key]
        return
    scale_good(x, gamma, out)
    _MEMO[key] = out["y"].copy()


def rms_modifies(x, gamma, eps, out):
    rms_good(x, gamma, eps, out)
    x.reshape(-1)[5] = 0


def scale_modifies(x, gamma, out):
    scale_good(x, gamma, out)
    x.reshape(-1)[5] = 0


_N = [0]


def rms_nondet(x, gamma, eps, out):
    _N[0] += 1
    rms_good(x, gamma, eps, out)
    out["y"].reshape(-1)[_N[0] % out["y"].size] *= np.float32(1 + 2 ** -22)


def scale_nondet(x, gamma, out):
    _N[0] += 1
    scale_good(x, gamma, out)
    out["y"].reshape(-1)[_N[0] % out["y"].size] *= np.float32(1 + 2 ** -22)

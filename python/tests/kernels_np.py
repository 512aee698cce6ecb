"""numpy-only implementations of embedding_rmsnorm_bwd, and functions that crash, exit or hang:
what the isolate=True tests run in spawned workers, which then never import torch."""
import ctypes
import os
import time

import numpy as np


def numpy_fp32(dy, x, gamma, ids, eps, V):
    """RMSNorm backward by hand in fp32 numpy, dE by np.add.at"""
    xf, g, d = x.astype(np.float32), gamma.astype(np.float32), dy.astype(np.float32)
    r = np.float32(1) / np.sqrt((xf * xf).mean(-1, keepdims=True, dtype=np.float32) + np.float32(eps))
    xh = xf * r
    dxh = d * g
    dx = r * (dxh - xh * (dxh * xh).mean(-1, keepdims=True, dtype=np.float32))
    dE = np.zeros((V, xf.shape[1]), np.float32)
    np.add.at(dE, ids, dx.astype(np.float32))
    return dE, (d * xh).sum(0, dtype=np.float32)


def segfaults(dy, x, gamma, ids, eps, V):
    """reads address 0"""
    ctypes.string_at(0)


def exits(dy, x, gamma, ids, eps, V):
    os._exit(3)


def hangs(dy, x, gamma, ids, eps, V):
    time.sleep(3600)


# ---- for the declared SwiGLU op (examples/python/custom_op.py) under isolate=True -----------
def swiglu_np(a, b):
    """numpy fp32 x * sigmoid(x) * b"""
    a = a.astype(np.float32)
    with np.errstate(over="ignore"):
        return a * (np.float32(1) / (np.float32(1) + np.exp(-a))) * b


def swiglu_segfaults(a, b):
    ctypes.string_at(0)


def swiglu_exits(a, b):
    os._exit(3)


def swiglu_hangs(a, b):
    time.sleep(3600)

"""Implementations of embedding_rmsnorm_bwd that the tests judge: faithful and unfaithful ones in
torch and numpy, and functions that crash, hang, exit, or misbehave in the ways parity's
harness must catch. dy (N,D), x (N,D), gamma (D), ids (N) -> dE (V,D), dgamma (D)."""
import numpy as np

from kernels_np import exits, hangs, numpy_fp32, segfaults  # noqa: F401 (one namespace for tests)

try:
    import torch
except Exception:  # the numpy ones work without it
    torch = None


def _rmsnorm_bwd_torch(dy, x, gamma, eps):
    x = x.float().requires_grad_(True)
    g = gamma.float().requires_grad_(True)
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    (x * rms * g).backward(dy.float())
    return x.grad, g.grad


def torch_fp32(dy, x, gamma, ids, eps, V):
    """autograd through RMSNorm in fp32, dE by index_add_ into an fp32 buffer"""
    dx, dg = _rmsnorm_bwd_torch(dy, x, gamma, eps)
    dE = torch.zeros(V, x.shape[1], dtype=torch.float32, device=dx.device).index_add_(0, ids.long(), dx)
    return dE, dg


def torch_bf16(dy, x, gamma, ids, eps, V):
    """the same, dE accumulated by index_add_ into a bf16 buffer (the incident)"""
    dx, dg = _rmsnorm_bwd_torch(dy, x, gamma, eps)
    dE = torch.zeros(V, x.shape[1], dtype=torch.bfloat16, device=dx.device).index_add_(0, ids.long(), dx.bfloat16())
    return {"dE": dE, "dgamma": dg.bfloat16()}


def index_add_accumulates_in_bf16():
    """Whether this torch's CPU index_add_ into a bf16 buffer rounds after every addition (torch
    1.13) or sums duplicates in fp32 first (torch 2.x): 4096 N(0,1) terms into one row, where a
    bf16 accumulator is off by whole units and an fp32 one by less than one bf16 ulp of the sum."""
    g = torch.Generator().manual_seed(0)
    src = torch.randn(4096, 8, generator=g).bfloat16()
    got = torch.zeros(1, 8, dtype=torch.bfloat16).index_add_(0, torch.zeros(4096, dtype=torch.long), src)
    ref = src.double().sum(0)
    return bool(((got[0].double() - ref).abs() > 1.0).any())


def torch_out(dy, x, gamma, ids, eps, out):
    """fp32, writing into the preallocated outputs"""
    dx, dg = _rmsnorm_bwd_torch(dy, x, gamma, eps)
    out["dE"].zero_().index_add_(0, ids.long(), dx)
    out["dgamma"].copy_(dg)


def torch_out_partial(dy, x, gamma, ids, eps, out):
    """fills only the rows that have tokens: the others keep whatever the buffer held"""
    dx, dg = _rmsnorm_bwd_torch(dy, x, gamma, eps)
    rows = torch.unique(ids.long())
    acc = torch.zeros(out["dE"].shape, dtype=torch.float32).index_add_(0, ids.long(), dx)
    out["dE"][rows] = acc[rows]
    out["dgamma"].copy_(dg)


def torch_modifies(dy, x, gamma, ids, eps, V):
    """scales dy in place (inputs must not change)"""
    dy.mul_(2)
    return torch_fp32(dy, x, gamma, ids, eps, V)


_calls = [0]


def torch_stateful(dy, x, gamma, ids, eps, V):
    """adds a little noise from the second call on: differs between runs on the same inputs"""
    _calls[0] += 1
    dE, dg = torch_fp32(dy, x, gamma, ids, eps, V)
    if _calls[0] % 2 == 0:
        dE = dE.clone()
        dE[ids[0].long(), 0] += 2.0 ** -20 * max(1.0, abs(float(dE[ids[0].long(), 0])))
    return dE, dg


def numpy_f16_accum(dy, x, gamma, ids, eps, V):
    """the numpy one with dE accumulated in fp16 (np.add.at into a float16 buffer)"""
    dE, dg = numpy_fp32(dy, x, gamma, ids, eps, V)
    dx = _numpy_dx(dy, x, gamma, eps)
    dE = np.zeros((V, x.shape[1]), np.float16)
    np.add.at(dE, ids, dx.astype(np.float16))
    return dE, dg


def _numpy_dx(dy, x, gamma, eps):
    xf, g, d = x.astype(np.float32), gamma.astype(np.float32), dy.astype(np.float32)
    r = np.float32(1) / np.sqrt((xf * xf).mean(-1, keepdims=True, dtype=np.float32) + np.float32(eps))
    xh = xf * r
    dxh = d * g
    return r * (dxh - xh * (dxh * xh).mean(-1, keepdims=True, dtype=np.float32))


def raises(dy, x, gamma, ids, eps, V):
    raise ValueError("no kernel for this shape")


def wrong_shape(dy, x, gamma, ids, eps, V):
    dE, dg = numpy_fp32(dy, x, gamma, ids, eps, V)
    return dE[:-1], dg



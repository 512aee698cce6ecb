#!/usr/bin/env python3
"""parity in three lines: is this kernel faithful to embedding_rmsnorm_bwd's math?

    pip install .                      # from the repository root (numpy; torch if you have it)
    python examples/python/quickstart.py

The op takes dy (N,D), x (N,D), gamma (D), ids (N) and eps, and returns dE (V,D) and dgamma (D)
(`parity.op_info("embedding_rmsnorm_bwd")`). V is not in any input's shape, so parity passes it.
Two kernels: fp32 accumulation (faithful) and dE accumulated in a bf16 buffer, the incident
(unfaithful).

With PyTorch they are torch code (index_add_ into an fp32 or a bf16 buffer). The diagnosis says
how the bf16 one fails: torch 1.13's CPU index_add_ (and CUDA's atomicAdd) round after every
addition -- "closest to bf16 sequential"; torch 2.x's CPU index_add_ sums repeated ids in fp32
and rounds once, so what is left is each term rounded to bf16 -- "~10 bits".

Without PyTorch (numpy is parity's only hard dependency) the same two kernels are numpy code:
RMSNorm's backward by hand in fp32, dE by np.add.at into fp32, or into a bf16 accumulator that
rounds after every addition (numpy has no bf16: float32 values rounded to bf16's 8-bit
significand, ties to even) -- "closest to bf16 sequential". The first line of the output says
which kernels ran; the last line is "verdicts: faithful unfaithful" either way.
"""
import numpy as np

import parity

try:
    import torch
except ImportError:  # numpy is the only hard dependency: fall back to numpy kernels
    torch = None


if torch is not None:
    KERNELS = "torch %s" % torch.__version__

    def rmsnorm_embedding_bwd(dy, x, gamma, ids, eps, V, acc=torch.float32):
        """autograd through RMSNorm in fp32, dE by index_add_ into a buffer of dtype acc"""
        x = x.float().requires_grad_(True)
        g = gamma.float().requires_grad_(True)
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
        (x * rms * g).backward(dy.float())
        dE = torch.zeros(V, x.shape[1], dtype=acc).index_add_(0, ids.long(), x.grad.to(acc))
        return dE, g.grad.to(acc)

    def bf16_accumulation(dy, x, gamma, ids, eps, V):
        """the same with dE accumulated by index_add_ into a bf16 buffer (the incident)"""
        return rmsnorm_embedding_bwd(dy, x, gamma, ids, eps, V, acc=torch.bfloat16)

else:
    KERNELS = "numpy %s (torch is not installed)" % np.__version__

    def _f32(a):
        """an input as float32: numpy has no bf16, so parity hands bf16 inputs over as their
        uint16 bit patterns (docs/python.md, "Tensors across the boundary"), widened exactly"""
        if a.dtype == np.uint16:
            return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return a.astype(np.float32)

    def _rmsnorm_bwd(dy, x, gamma, eps):
        """RMSNorm's backward by hand in fp32: dx (N,D) and dgamma (D)"""
        x, g, d = _f32(x), _f32(gamma), _f32(dy)
        r = np.float32(1) / np.sqrt((x * x).mean(-1, keepdims=True, dtype=np.float32) + np.float32(eps))
        xh = x * r
        dxh = d * g
        dx = r * (dxh - xh * (dxh * xh).mean(-1, keepdims=True, dtype=np.float32))
        return dx, (d * xh).sum(0, dtype=np.float32)

    def _to_bf16(a):
        """float32 values rounded to the nearest bf16 (ties to even), kept as float32"""
        u = np.ascontiguousarray(a, np.float32).view(np.uint32)
        u = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
        return u.view(np.float32)

    def rmsnorm_embedding_bwd(dy, x, gamma, ids, eps, V):
        """RMSNorm backward by hand in fp32, dE by np.add.at into an fp32 buffer"""
        dx, dgamma = _rmsnorm_bwd(dy, x, gamma, eps)
        dE = np.zeros((V, dx.shape[1]), np.float32)
        np.add.at(dE, ids, dx)
        return dE, dgamma

    def bf16_accumulation(dy, x, gamma, ids, eps, V):
        """the same with dE accumulated in bf16, rounded after every addition (the incident)"""
        dx, dgamma = _rmsnorm_bwd(dy, x, gamma, eps)
        ids = np.asarray(ids).astype(np.int64)
        # Token order within each id, as a sequential scatter-add: the k-th occurrence of every
        # id is added in round k (one vectorised step per round; ids are distinct within one).
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        first = np.r_[True, sid[1:] != sid[:-1]]
        starts = np.flatnonzero(first)
        rank = np.arange(len(sid)) - np.repeat(starts, np.diff(np.r_[starts, len(sid)]))
        by_rank = order[np.argsort(rank, kind="stable")]
        counts = np.bincount(rank)
        dE = np.zeros((V, dx.shape[1]), np.float32)
        terms = _to_bf16(dx)
        at = 0
        for n in counts:
            pos = by_rank[at:at + n]
            at += n
            rows = ids[pos]
            dE[rows] = _to_bf16(dE[rows] + terms[pos])
        return dE, _to_bf16(dgamma)


if __name__ == "__main__":
    like = "numpy" if torch is None else "torch"
    print("kernels:", KERNELS)
    report = parity.check("embedding_rmsnorm_bwd", rmsnorm_embedding_bwd, workloads=["uniform", "text"], like=like)
    print(report)
    bad = parity.check("embedding_rmsnorm_bwd", bf16_accumulation, workloads=["text"], like=like)
    print(bad)
    print("verdicts:", report.verdict, bad.verdict)
    raise SystemExit(0 if report.ok and not bad.ok else 1)

#!/usr/bin/env python3
"""parity in three lines: is this PyTorch kernel faithful to embedding_rmsnorm_bwd's math?

    pip install .                      # from the repository root (numpy; torch if you have it)
    python examples/python/quickstart.py

The op takes dy (N,D), x (N,D), gamma (D), ids (N) and eps, and returns dE (V,D) and dgamma (D)
(`parity.op_info("embedding_rmsnorm_bwd")`). V is not in any input's shape, so parity passes it.
Two kernels: fp32 accumulation (faithful) and index_add_ into a bf16 buffer, the incident
(unfaithful). The diagnosis says how: torch 1.13's CPU index_add_ (and CUDA's atomicAdd) round
after every addition -- "closest to bf16 sequential"; torch 2.x's CPU index_add_ sums repeated
ids in fp32 and rounds once, so what is left is each term rounded to bf16 -- "~10 bits".
"""
import torch

import parity


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


if __name__ == "__main__":
    report = parity.check("embedding_rmsnorm_bwd", rmsnorm_embedding_bwd, workloads=["uniform", "text"])
    print(report)
    bad = parity.check("embedding_rmsnorm_bwd", bf16_accumulation, workloads=["text"])
    print(bad)
    print("verdicts:", report.verdict, bad.verdict)
    raise SystemExit(0 if report.ok and not bad.ok else 1)

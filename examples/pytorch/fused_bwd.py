#!/usr/bin/env python3
"""The fused embedding-gradient + RMSNorm backward in PyTorch, for parity's file-based flow.

    parity gen embedding_rmsnorm_bwd --workload text --out in.safetensors
    python fused_bwd.py in.safetensors out.safetensors [--variant faithful|bf16_accum]
    parity compare embedding_rmsnorm_bwd in.safetensors out.safetensors

Inputs (names from `parity ops embedding_rmsnorm_bwd`): dy (N,D), x (N,D), gamma (D), ids (N).
x is the embedding output E[ids] that feeds RMSNorm; dy the gradient at RMSNorm's output.
Outputs: dE (V,D) and dgamma (D); V and eps come from the file's metadata.

variants:
  faithful    autograd through RMSNorm in fp32, dE accumulated with index_add_ into an fp32 buffer
  bf16_accum  the same, but index_add_ into a bf16 dE: every addition rounds to bf16 (the incident)
"""
import argparse
import sys

from st_io import load, require, save  # safetensors files without the safetensors package

torch = require("torch")  # a clear message naming what is missing when it cannot be imported


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs")
    ap.add_argument("outputs")
    ap.add_argument("--variant", choices=["faithful", "bf16_accum"], default="faithful")
    a = ap.parse_args()
    t, meta = load(a.inputs)
    V = int(meta["parity.output.dE.shape"].split(",")[0])
    eps = float(meta["parity.attr.eps"])

    x = t["x"].float().requires_grad_(True)
    gamma = t["gamma"].float().requires_grad_(True)
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = x * rms * gamma
    y.backward(t["dy"].float())
    ids = t["ids"].long()
    if a.variant == "faithful":
        dE = torch.zeros(V, x.shape[1], dtype=torch.float32).index_add_(0, ids, x.grad)
        out = {"dE": dE, "dgamma": gamma.grad.float()}
    else:
        dE = torch.zeros(V, x.shape[1], dtype=torch.bfloat16).index_add_(0, ids, x.grad.bfloat16())
        out = {"dE": dE, "dgamma": gamma.grad.bfloat16()}
    save(out, a.outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Attention forward in PyTorch, for parity's file-based flow.

    parity gen attention_fwd --workload long-causal@1024x64x2 --out in.safetensors
    python attention.py in.safetensors out.safetensors [--variant fp32|eager_bf16]
    parity compare attention_fwd in.safetensors out.safetensors

Inputs (names from `parity ops attention_fwd`): Q, K, V (H,T,Dh). Attributes from the file's
metadata: scale, softcap (0: none), causal. Outputs: O (H,T,Dh) and LSE (H,T).

variants:
  fp32            everything in fp32: scores, softcap, mask, logsumexp, softmax, P @ V
  eager_bf16      what an unfused bf16 model does: Q @ K^T, softmax and P @ V each return bf16
                  (scores of 20-30 rounded to bf16 lose about 0.06); LSE from the bf16 scores
  sdpa_flash      PyTorch's fused FlashAttention-2 kernel (CUDA only; no softcap): O in bf16,
                  its fp32 LSE written as bf16 (parity compare takes one dtype per file)
  sdpa_efficient  PyTorch's memory-efficient attention kernel (CUDA only; no softcap), likewise
The two sdpa variants are how docs/ops/attention.md ("Real kernels") judged them on an H200.
"""
import argparse

from st_io import load, require, save  # safetensors files without the safetensors package

torch = require("torch")  # a clear message naming what is missing when it cannot be imported


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs")
    ap.add_argument("outputs")
    ap.add_argument("--variant", choices=["fp32", "eager_bf16", "sdpa_flash", "sdpa_efficient"], default="fp32")
    a = ap.parse_args()
    t, meta = load(a.inputs)
    q, k, v = (t[n] for n in ("Q", "K", "V"))
    scale = float(meta["parity.attr.scale"])
    cap = float(meta["parity.attr.softcap"])
    causal = float(meta["parity.attr.causal"]) != 0
    if a.variant.startswith("sdpa_"):
        if not torch.cuda.is_available():
            ap.error("--variant %s needs a CUDA device (PyTorch's fused kernels)" % a.variant)
        if cap > 0:
            ap.error("--variant %s: scaled_dot_product_attention has no softcap (this workload's is %g)" % (a.variant, cap))
        t = q.shape[1]
        q, k, v = (x.cuda()[None] for x in (q, k, v))  # (1, H, T, Dh)
        if a.variant == "sdpa_flash":
            r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
        else:
            r = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal, scale=scale)
        o, lse = r[0][0], r[1][0, :, :t]  # the efficient kernel pads LSE's T
        save({"O": o, "LSE": lse.float().to(o.dtype)}, a.outputs)
        return
    if a.variant == "fp32":
        q, k, v = q.float(), k.float(), v.float()
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    t = s.shape[-1]
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    lse = torch.logsumexp(s.float(), -1)
    o = torch.matmul(torch.softmax(s, -1), v)
    if a.variant == "eager_bf16":
        lse = lse.bfloat16()  # parity compare wants one dtype for all outputs
    save({"O": o, "LSE": lse}, a.outputs)


if __name__ == "__main__":
    main()

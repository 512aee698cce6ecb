#!/usr/bin/env python3
"""Attention forward in PyTorch on the package (examples/pytorch/attention.py is the file-flow
version): Q, K, V (H,T,Dh) and the attributes scale, softcap (0: none), causal come as keyword
arguments; the function returns O (H,T,Dh) and LSE (H,T).

    python examples/python/attention.py [--variant fp32|eager_bf16] [--workloads quick]

  fp32        everything in fp32: scores, softcap, mask, logsumexp, softmax, P @ V
  eager_bf16  an unfused bf16 model: Q @ K^T, softmax and P @ V each return bf16
"""
import argparse
import sys

try:
    import torch

    import parity
except ImportError as e:  # say what is missing and for which interpreter, not a traceback
    sys.stderr.write(
        "%s: this Python (%s) cannot import %s: %s.\nIt needs PyTorch (Debian 12: apt-get install "
        "python3-torch; elsewhere pip install torch) and the parity package (pip install . from the "
        "repository root; or, from a build tree, PYTHONPATH=python "
        "PARITY_PY_LIB=build/python/libparity_python.so).\n" % (sys.argv[0], sys.executable, e.name, e))
    sys.exit(3)


def _attention(Q, K, V, scale, softcap, causal, fp32):
    if fp32:
        Q, K, V = Q.float(), K.float(), V.float()
    s = torch.matmul(Q, K.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    t = s.shape[-1]
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool, device=s.device), 1), float("-inf"))
    lse = torch.logsumexp(s.float(), -1)
    o = torch.matmul(torch.softmax(s, -1), V)
    return o, (lse if fp32 else lse.to(o.dtype))


def fp32(Q, K, V, scale, softcap, causal):
    """attention in fp32 throughout"""
    return _attention(Q, K, V, scale, softcap, causal, True)


def eager_bf16(Q, K, V, scale, softcap, causal):
    """unfused bf16: scores, softmax and P @ V rounded to bf16"""
    return _attention(Q, K, V, scale, softcap, causal, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=["fp32", "eager_bf16"], default="fp32")
    ap.add_argument("--workloads", default="quick")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    wl = "quick" if a.workloads == "quick" else a.workloads.split(",")
    r = parity.check("attention_fwd", globals()[a.variant], workloads=wl, device=a.device, progress=True)
    print(r)
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

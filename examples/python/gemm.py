#!/usr/bin/env python3
"""gemm (C = A @ B) in PyTorch on the package (examples/pytorch/gemm_torch.py is the file-flow
version, with gemm_bwd and cuBLAS options).

    python examples/python/gemm.py [--variant bf16|fp32|tf32] [--device cuda] [--workloads quick]

  bf16  the inputs' dtype as is (bf16 in, bf16 out)
  fp32  operands converted to fp32, TF32 off (fp32 out)
  tf32  operands converted to fp32, TF32 on (on CUDA, cuBLAS rounds inputs to 10-bit mantissas)
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


def bf16(A, B):
    """A @ B in the inputs' dtype"""
    return torch.matmul(A, B)


def fp32(A, B):
    """A @ B in fp32, TF32 off"""
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch.matmul(A.float(), B.float())


def tf32(A, B):
    """A @ B in fp32 with TF32 allowed"""
    torch.backends.cuda.matmul.allow_tf32 = True
    return torch.matmul(A.float(), B.float())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=["bf16", "fp32", "tf32"], default="fp32")
    ap.add_argument("--workloads", default="quick")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    wl = "quick" if a.workloads == "quick" else a.workloads.split(",")
    r = parity.check("gemm", globals()[a.variant], workloads=wl, device=a.device, progress=True)
    print(r)
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

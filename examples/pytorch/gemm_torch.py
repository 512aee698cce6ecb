#!/usr/bin/env python3
"""gemm / gemm_bwd in PyTorch (CPU or CUDA/cuBLAS), for parity's file-based flow.

    parity gen gemm --workload dw-32k --out in.safetensors
    python gemm_torch.py in.safetensors out.safetensors [--variant bf16|fp32|tf32] [--device cuda]
    parity compare gemm in.safetensors out.safetensors

The op (gemm or gemm_bwd) is read from the file's metadata. gemm: C = A @ B; gemm_bwd:
dX = dY @ W.T, dW = X.T @ dY.

variants:
  bf16  the inputs' dtype as is (bf16 in, bf16 out: cuBLAS with fp32 accumulation)
  fp32  operands converted to fp32, TF32 off (fp32 out)
  tf32  operands converted to fp32, TF32 on (cuBLAS rounds fp32 inputs to 10-bit mantissas)
--no-reduced sets torch.backends.cuda.matmul.allow_{bf16,fp16}_reduced_precision_reduction
to False (PyTorch's default is True). --kernels prints the CUDA kernels the call launched
(cuBLAS's split-K shows as *splitK* and splitKreduce_kernel).
"""
import argparse

from st_io import load, require, save  # safetensors files without the safetensors package

torch = require("torch")  # a clear message naming what is missing when it cannot be imported


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--variant", default="bf16", choices=["bf16", "fp32", "tf32"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-reduced", action="store_true")
    ap.add_argument("--kernels", action="store_true")
    a = ap.parse_args()
    t, meta = load(a.inp)
    op = meta.get("parity.op", "gemm")
    t = {k: v.to(a.device) for k, v in t.items()}
    if a.device.startswith("cuda"):
        m = torch.backends.cuda.matmul
        m.allow_bf16_reduced_precision_reduction = not a.no_reduced
        m.allow_fp16_reduced_precision_reduction = not a.no_reduced
        m.allow_tf32 = a.variant == "tf32"
    cv = (lambda x: x) if a.variant == "bf16" else (lambda x: x.float())

    def run():
        if op == "gemm_bwd":
            return {"dX": cv(t["dY"]) @ cv(t["W"]).t(), "dW": cv(t["X"]).t() @ cv(t["dY"])}
        return {"C": cv(t["A"]) @ cv(t["B"])}

    out = run()
    if a.kernels and a.device.startswith("cuda"):
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        for name in sorted({e.name for e in prof.events() if "cuda" in str(e.device_type).lower()}):
            print(name[:100])
    save(out, a.out)


if __name__ == "__main__":
    main()

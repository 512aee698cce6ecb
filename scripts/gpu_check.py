#!/usr/bin/env python3
"""The Python half of scripts/gpu-check.sh: parity.check on device tensors, and a Triton kernel
where Triton imports. Prints one table row per check: `name | expected | got | ok`.

    python3 scripts/gpu_check.py [--device cuda|cpu] [--rows FILE]

--device cpu runs the same checks on CPU tensors (Triton skipped): the script's own test, on a
machine without a GPU (tests/cli_gpu_check.sh). Exit 0 when every row is as expected, 1 otherwise,
77 when torch is missing or the device is not there.
"""
import argparse
import sys
import traceback


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--rows", help="append the table rows to this file as well")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("skip: this Python has no torch (the GPU checks judge torch kernels)")
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 77
    import parity

    dev = args.device
    rows = []

    def row(name, expected, fn):
        try:
            got = fn()
        except Exception as e:  # a broken check is a failed row, with the reason, not a dead script
            traceback.print_exc()
            got = "error: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__)
        rows.append((name, expected, got, "ok" if got == expected else "FAIL"))

    # parity.check on device tensors: the quickstart's two kernels, computed on the device.
    def emb_bwd(dy, x, gamma, ids, eps, V, acc=torch.float32):
        """autograd through RMSNorm in fp32, dE by index_add_ into a buffer of dtype acc"""
        x = x.float().requires_grad_(True)
        g = gamma.float().requires_grad_(True)
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
        (x * rms * g).backward(dy.float())
        dE = torch.zeros(V, x.shape[1], dtype=acc, device=x.device).index_add_(0, ids.long(), x.grad.to(acc))
        return dE, g.grad.to(acc)

    def emb_bwd_bf16(dy, x, gamma, ids, eps, V):
        """dE accumulated by index_add_ into a bf16 buffer (the incident; atomicAdd on CUDA)"""
        return emb_bwd(dy, x, gamma, ids, eps, V, acc=torch.bfloat16)

    for fn, want in ((emb_bwd, "faithful"), (emb_bwd_bf16, "unfaithful")):
        row("parity.check %s torch %s (text, zipf1.1)" % (dev, fn.__name__), want,
            lambda fn=fn: parity.check("embedding_rmsnorm_bwd", fn, workloads=["text", "zipf1.1"],
                                       device=dev).verdict)

    def rmsnorm_torch(x, gamma, eps):
        """RMSNorm forward in fp32"""
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma.float()

    def rmsnorm_torch_eps_1e6(x, gamma, eps):
        """RMSNorm forward in fp32 called with eps 1e-6 whatever the op's eps"""
        return rmsnorm_torch(x, gamma, 1e-6)

    for fn, want in ((rmsnorm_torch, "faithful"), (rmsnorm_torch_eps_1e6, "unfaithful")):
        row("parity.check %s torch %s (small-x, x1e-3)" % (dev, fn.__name__), want,
            lambda fn=fn: parity.check("rmsnorm_fwd", fn, workloads=["small-x", "x1e-3"], device=dev).verdict)

    # A Triton kernel, where Triton imports and there is a GPU: RMSNorm forward, one program per
    # row, the sum of squares in fp32; and the same with eps 1e-6 against the op's (a real bug
    # class: a wrapper passing the wrong eps), which the x1e-3 workload (x^2 ~ 1e-6) exposes.
    triton = None
    if dev == "cuda":
        try:
            import triton
            import triton.language as tl
        except ImportError:
            triton = None
    if triton is None:
        rows.append(("triton rmsnorm_fwd", "-", "skipped: %s" % ("no GPU (--device cpu)" if dev != "cuda"
                                                                 else "triton does not import"), "skip"))
    else:
        @triton.jit
        def _rms_fwd(X, G, Y, D, eps, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            cols = tl.arange(0, BLOCK)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for start in range(0, D, BLOCK):
                m = start + cols < D
                v = tl.load(X + r * D + start + cols, mask=m, other=0.0).to(tl.float32)
                acc += v * v
            rinv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / D + eps)
            for start in range(0, D, BLOCK):
                m = start + cols < D
                v = tl.load(X + r * D + start + cols, mask=m, other=0.0).to(tl.float32)
                g = tl.load(G + start + cols, mask=m, other=0.0).to(tl.float32)
                tl.store(Y + r * D + start + cols, v * rinv * g, mask=m)

        def launch(x, gamma, eps):
            x = x.contiguous()
            y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            _rms_fwd[(x.shape[0],)](x, gamma.contiguous(), y, x.shape[1], eps, BLOCK=1024)
            return y

        def triton_rmsnorm(x, gamma, eps):
            """Triton RMSNorm forward, fp32 sum of squares"""
            return launch(x, gamma, eps)

        def triton_rmsnorm_eps_1e6(x, gamma, eps):
            """Triton RMSNorm forward called with eps 1e-6 whatever the op's eps"""
            return launch(x, gamma, 1e-6)

        for fn, want in ((triton_rmsnorm, "faithful"), (triton_rmsnorm_eps_1e6, "unfaithful")):
            row("triton %s (small-x, x1e-3)" % fn.__name__, want,
                lambda fn=fn: parity.check("rmsnorm_fwd", fn, workloads=["small-x", "x1e-3"], device=dev).verdict)

    w = max(len(r[0]) for r in rows)
    lines = ["%-*s | %-10s | %-24s | %s" % (w, *r) for r in rows]
    print("\n".join(lines))
    if args.rows:
        with open(args.rows, "a") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if any(r[3] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

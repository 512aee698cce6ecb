"""Training-step throughput of `parity train` and where the time goes (forward, backward without the
op, the embedding_rmsnorm_bwd op, optimizer), for the in-process fp32 reference and a candidate
kernel, measured in the same run (parity train --timing --jobs 1); beside it the same model step
(same shapes, class-factorized head, SGD) in PyTorch on the CPU with one thread, when torch is
importable. Tokens per second of a whole step; no timing assertions anywhere.

usage: python bench/bench_train.py [--parity build/parity] [--kernel builtin:bf16_accum]
                                   [--steps 20] [--batch 128] [--dim 32] [--seq-len 64]
                                   [--preset production]   (D 16, T 32, 2048 sequences)
"""
import argparse
import os
import re
import subprocess
import sys
import time


def find_parity(arg):
    here = os.path.dirname(os.path.abspath(__file__))
    for c in [arg, os.environ.get("PARITY"),
              os.path.join(os.environ.get("PARITY_BUILD", ""), "parity"),
              os.path.join(here, "..", "build", "parity")]:
        if c and os.path.isfile(c):
            return c
    sys.exit("bench_train: parity binary not found: build first or pass --parity")


def parity_timing(exe, kernel, steps, batch, dim, data, seq_len):
    cmd = [exe, "train", "--kernel", kernel, "--data", data, "--optimizer", "sgd",
           "--steps", str(steps), "--batch", str(batch), "--dim", str(dim),
           "--seq-len", str(seq_len), "--floor-orders", "1", "--jobs", "1",
           "--eval-every", str(steps), "--timing", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit("bench_train: %s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr))
    rows = {}
    for line in out.stdout.splitlines():
        m = re.match(r"timing \S+ (reference|candidate): (.*)", line)
        if m:
            kv = m.group(2).split()
            rows[m.group(1)] = {kv[i]: float(kv[i + 1]) for i in range(0, len(kv), 2)}
    return " ".join(cmd), rows


def torch_step_rate(steps, batch, dim, T=64, V=11706, heads=2):
    try:
        import torch
    except Exception:
        return None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    C = int(V ** 0.5 + 0.999999)
    S = (V + C - 1) // C
    C = (V + S - 1) // S
    F = 4 * dim
    P = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.1)
    params = dict(wte=P(V, dim), g0=P(dim), wpe=P(T, dim), g1=P(dim), wqkv=P(dim, 3 * dim),
                  wo=P(dim, dim), g2=P(dim), w1=P(dim, F), w2=P(F, dim), gf=P(dim),
                  wc=P(dim, C), wout=P(dim, V))

    def rms(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g

    def step(ids, tgt):
        p = params
        x = rms(p["wte"][ids], p["g0"]) + p["wpe"]
        a = rms(x, p["g1"]) @ p["wqkv"]
        q, k, v = a.split(dim, -1)
        sh = lambda t: t.view(batch, T, heads, dim // heads).transpose(1, 2)
        att = (sh(q) @ sh(k).transpose(-1, -2)) / (dim // heads) ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = (att.softmax(-1) @ sh(v)).transpose(1, 2).reshape(batch, T, dim)
        x = x + y @ p["wo"]
        x = x + torch.nn.functional.silu(rms(x, p["g2"]) @ p["w1"]) @ p["w2"]
        f = rms(x, p["gf"]).reshape(-1, dim)
        t = tgt.reshape(-1)
        cls = t // S
        lc = torch.nn.functional.cross_entropy(f @ p["wc"], cls)
        # word logits of the target's class only: gather the class's S columns
        cols = (cls[:, None] * S + torch.arange(S)[None, :]).clamp(max=V - 1)
        lw = torch.einsum("nd,dns->ns", f, p["wout"][:, cols])
        lw = lw.masked_fill(cls[:, None] * S + torch.arange(S)[None, :] >= V, float("-inf"))
        loss = lc + torch.nn.functional.cross_entropy(lw, t - cls * S)
        for q_ in params.values():
            q_.grad = None
        loss.backward()
        with torch.no_grad():
            for q_ in params.values():
                q_ -= 1.0 * q_.grad

    ids = torch.randint(0, V, (batch, T))
    tgt = torch.randint(0, V, (batch, T))
    step(ids, tgt)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(ids, tgt)
    dt = (time.perf_counter() - t0) / steps
    return torch.__version__, batch * T / dt, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parity")
    ap.add_argument("--kernel", default="builtin:bf16_accum")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--data", default="text")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--preset", choices=["default", "production"], default="default")
    a = ap.parse_args()
    if a.preset == "production":  # parity_train_config_production's shapes
        a.batch, a.dim, a.seq_len = 2048, 16, 32
    exe = find_parity(a.parity)
    cmd, rows = parity_timing(exe, a.kernel, a.steps, a.batch, a.dim, a.data, a.seq_len)
    print("command: " + cmd)
    print("%-22s %10s %9s %9s %9s %9s %9s" % ("path", "tokens/s", "step s", "forward",
                                              "bwd-op", "op", "optim"))
    for who in ("reference", "candidate"):
        r = rows.get(who)
        if not r:
            continue
        label = "parity fp32 reference" if who == "reference" else "parity " + a.kernel
        print("%-22s %10.0f %9.4f %9.4f %9.4f %9.4f %9.4f" % (
            label[:22], r["tokens_per_s"], r["step"], r["forward"], r["backward_excl_op"],
            r["op"], r["optimizer"]))
    if "reference" in rows and "candidate" in rows:
        print("candidate / reference step time: %.2fx; op share of the candidate step: %.1f%%" % (
            rows["candidate"]["step"] / rows["reference"]["step"],
            100 * rows["candidate"]["op"] / rows["candidate"]["step"]))
    pt = torch_step_rate(a.steps, a.batch, a.dim, T=a.seq_len)
    if pt is None:
        print("peer: torch not importable, no peer figure")
    else:
        ver, tps, dt = pt
        print("%-22s %10.0f %9.4f   (same shapes, fp32, 1 thread, autograd)" % (
            ("torch " + ver)[:22], tps, dt))
        if "reference" in rows:
            print("parity reference / torch tokens/s: %.2fx" % (rows["reference"]["tokens_per_s"] / tps))


if __name__ == "__main__":
    main()

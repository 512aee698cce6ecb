#!/usr/bin/env python3
"""bench_bisect: what bisecting a capture costs against the forward passes that produced it
(issue #38: at most 2x). Two models, each in the same run:

- parity's MoE model (stories260K-moe, the shipped prompts): `parity model capture --moe --path
  bf16 --out A`, `... --path bf16+fusedmoe --replay A --out B` (a forward pass and the replay
  pass) and `... --path bf16+splitk2 --replay A --out F` (the floor); then `parity bisect A B`
  and `parity bisect A B --floor F`. The forward passes alone, `parity model dump` of each path
  over the same prompts, are timed too.
- a PyTorch model (python/tests/capture_model.py's TinyLM at --d/--layers/--seq): two plain
  forward passes (torch, no hooks), parity.capture(A), parity.capture(B, replay_from=A) with one
  RMSNorm in bf16, parity.capture(A2, replay_from=A) (another summation order), then
  parity.bisect(A, B) and parity.bisect(A, B, floor=A2) (each a `parity bisect` process).

Printed: best-of --reps wall seconds of each, and bisect's time over the time of the two captures
that produced it (ratio <= 2 meets the issue) and over two plain forward passes. The capture with
replay costs more than a forward pass (a PyTorch parent's replay runs its children: about nesting
depth + 1 passes); that is capture's cost, not bisect's, and is printed separately.
usage: bench/bench_bisect.py [--parity build/parity] [--reps 3] [--d 128] [--layers 4] [--seq 128]
                             [--batch 2] [--no-torch]"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def best(reps, fn):
    t = None
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        t = dt if t is None else min(t, dt)
    return t


def run(cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p


def c_model(binary, reps, td):
    A, B, F = (os.path.join(td, x) for x in ("cA", "cB", "cF"))
    cap = [binary, "model", "capture", "--moe"]
    rows = [
        ("parity model dump --moe --path bf16 (forward)", best(reps, lambda: run(
            [binary, "model", "dump", "--moe", "--path", "bf16", "--out", os.path.join(td, "a.jsonl")]))),
        ("parity model dump --moe --path bf16+fusedmoe", best(reps, lambda: run(
            [binary, "model", "dump", "--moe", "--path", "bf16+fusedmoe", "--out", os.path.join(td, "b.jsonl")]))),
        ("capture A: --path bf16", best(reps, lambda: run(cap + ["--path", "bf16", "--out", A]))),
        ("capture B: --path bf16+fusedmoe --replay A", best(reps, lambda: run(
            cap + ["--path", "bf16+fusedmoe", "--replay", A, "--out", B]))),
        ("capture F: --path bf16+splitk2 --replay A", best(reps, lambda: run(
            cap + ["--path", "bf16+splitk2", "--replay", A, "--out", F]))),
        ("parity bisect A B", best(reps, lambda: run([binary, "bisect", A, B], ok=(0, 1)))),
        ("parity bisect A B --floor F", best(reps, lambda: run([binary, "bisect", A, B, "--floor", F], ok=(0, 1)))),
    ]
    size = sum(os.path.getsize(os.path.join(d, "capture.safetensors")) for d in (A, B))
    return rows, size


def torch_model(reps, td, a):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
    import torch
    import capture_model as cm
    import parity
    torch.set_num_threads(1)
    model = cm.make(vocab=512, d=a.d, n_heads=max(1, a.d // 64), hidden=4 * a.d, n_layers=a.layers,
                    moe_layer=a.layers - 1)
    ids = cm.token_ids(batch=a.batch, seq=a.seq, vocab=512)
    served = cm.swap(model, "layers.1.attn_norm", cm.BF16RMSNorm)
    floor = cm.reorder(model)
    A, B, F = (os.path.join(td, x) for x in ("tA", "tB", "tF"))

    with torch.no_grad():
        model(ids)  # warm-up: the first call's one-time costs
    def fwd2():
        with torch.no_grad():
            model(ids)
            served(ids)
    rows = [
        ("two plain forward passes (A and B, torch, no hooks)", best(reps, fwd2)),
        ("parity.capture(A)", best(reps, lambda: parity.capture(model, (ids,), A))),
        ("parity.capture(B, replay_from=A)", best(reps, lambda: parity.capture(served, (ids,), B, replay_from=A))),
        ("parity.capture(A2, replay_from=A)", best(reps, lambda: parity.capture(floor, (ids,), F, replay_from=A))),
        ("parity.bisect(A, B)", best(reps, lambda: parity.bisect(A, B))),
        ("parity.bisect(A, B, floor=A2)", best(reps, lambda: parity.bisect(A, B, floor=F))),
    ]
    r = parity.bisect(A, B, floor=F)
    size = sum(os.path.getsize(os.path.join(d, "capture.safetensors")) for d in (A, B))
    n_mod = len(r["modules"])
    return rows, size, n_mod, r["first_departing"]["module"], torch.__version__


def show(title, rows):
    print(title)
    for name, t in rows:
        print(f"  {name:56s} {t * 1e3:10.1f} ms")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parity", default=os.path.join(here, "..", "build", "parity"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.parity)
    os.environ.setdefault("PARITY_CLI", binary)
    with tempfile.TemporaryDirectory() as td:
        rows, size = c_model(binary, a.reps, td)
        t = dict(rows)
        show(f"parity's MoE model (stories260K-moe, shipped prompts; A + B captures {size / 2**20:.1f} MiB), "
             f"best of {a.reps}:", rows)
        caps = t["capture A: --path bf16"] + t["capture B: --path bf16+fusedmoe --replay A"]
        fwd = t["parity model dump --moe --path bf16 (forward)"] + t["parity model dump --moe --path bf16+fusedmoe"]
        for k in ("parity bisect A B", "parity bisect A B --floor F"):
            print(f"  {k}: {t[k] / caps:.2f}x the two captures that produced it, {t[k] / fwd:.2f}x two "
                  f"plain forward passes (model dump)")
        if a.no_torch:
            return 0
        try:
            rows, size, n_mod, first, tv = torch_model(a.reps, td, a)
        except ImportError as e:
            print(f"PyTorch part skipped: {e}")
            return 0
        t = dict(rows)
        show(f"\nPyTorch TinyLM (torch {tv}, 1 thread; d={a.d}, {a.layers} layers, the last MoE, batch "
             f"{a.batch} x {a.seq} tokens; {n_mod} modules; A + B captures {size / 2**20:.1f} MiB; bisect "
             f"names {first}), best of {a.reps}:", rows)
        caps = t["parity.capture(A)"] + t["parity.capture(B, replay_from=A)"]
        fwd = t["two plain forward passes (A and B, torch, no hooks)"]
        for k in ("parity.bisect(A, B)", "parity.bisect(A, B, floor=A2)"):
            print(f"  {k}: {t[k] / caps:.2f}x the two captures that produced it, {t[k] / fwd:.2f}x two "
                  f"plain forward passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

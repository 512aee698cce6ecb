#!/usr/bin/env python3
"""Bench: the speed of `parity check` beside a plain torch CPU script doing the bare version of the
same check, in the same run (docs/check-speed.md).

  1. quick: `parity check embedding_rmsnorm_bwd --kernel builtin:fp32_fast --quick`, cold floor
     cache (a fresh --cache folder) and warm, beside the torch script on the same nine shapes.
  2. production: the same with `--workload prod` (N=65536 D=2048 V=50257) beside the torch script
     on that shape (skip with --no-prod: it needs ~10 GB and minutes on 2 cores).
  3. k kernels: one check of K catalog kernels beside K single-kernel checks, on one workload
     (default text), warm cache: the shared setup is paid once, so the K-kernel check should cost
     about setup + K x one candidate's runs.

The torch script is what a kernel author writes without parity: inputs (bf16 dy and x, fp32
gamma, int64 ids), an fp64 reference (RMSNorm backward, index_add_ into dE, dgamma), the candidate
(the same math in fp32, standing in for the kernel under test) and torch.allclose. It has none of
parity's rigour (error-model tolerances, child isolation, guard regions, decoy and rerun, noise
floor): the comparison is of wall time for a verdict, not of what the verdict means.

First line: what 824 MiB of fresh shared memory costs on this machine to touch (one store per
page) against a pass over it once touched; where the ratio is large (it was 20-80x on the
virtual machine this was written on), both sides' wall times mostly measure page handling.

Every figure is measured in this run, best of --reps: wall-clock seconds, and CPU seconds (user +
system, parity's children included; torch's threads included) because on a shared machine the
wall time mostly measures the other users. The machine this was written on has 2 cores shared
with other users: expect noise of tens of percent between runs.

usage: bench_check.py [--reps 1] [--jobs 0] [--no-prod] [--k 12] [--k-workload text]
env:   PARITY (the CLI); default: build/parity next to this script.
"""
import argparse
import functools
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

print = functools.partial(print, flush=True)  # noqa: A001 (progress while the runs go)
HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("PARITY", os.path.join(HERE, "..", "build", "parity"))
OP = "embedding_rmsnorm_bwd"
EPS = 1e-5


def workloads(quick):
    """(name, N, D, V) of the op's presets, read from `parity ops OP`."""
    out = subprocess.run([CLI, "ops", OP], capture_output=True, text=True, check=True).stdout
    wl = []
    for line in out.splitlines():
        m = re.match(r"\s+(\S+)\s+N=(\d+)\s+D=(\d+)\s+V=(\d+)", line)
        if m:
            prod = "[skipped by --quick]" in line
            if quick != prod:
                wl.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return wl


def torch_bare_check(torch, shapes, seed=1):
    """The bare check on each shape; returns ((wall, cpu) seconds, all passed)."""
    g = torch.Generator().manual_seed(seed)
    ok = True
    t0, c0 = time.perf_counter(), time.process_time()
    for _, n, d, v in shapes:
        dy = (torch.randn(n, d, generator=g) * 1e-3).to(torch.bfloat16)
        x = torch.randn(n, d, generator=g).to(torch.bfloat16)
        gamma = torch.exp(0.5 * torch.randn(d, generator=g))
        ids = torch.randint(0, v, (n,), generator=g)

        def rms_bwd(dy, x, gamma, dt):
            dy, x, gamma = dy.to(dt), x.to(dt), gamma.to(dt)
            r = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + EPS)
            xhat = x * r
            gdy = gamma * dy
            c = (gdy * xhat).mean(dim=1, keepdim=True)
            dx = r * (gdy - xhat * c)
            dE = torch.zeros(v, d, dtype=dt).index_add_(0, ids, dx)
            return dE, (dy * xhat).sum(dim=0)

        ref_dE, ref_dg = rms_bwd(dy, x, gamma, torch.float64)
        got_dE, got_dg = rms_bwd(dy, x, gamma, torch.float32)
        # torch.testing.assert_close's defaults for float32, what such a script uses.
        ok &= torch.allclose(got_dE.double(), ref_dE, rtol=1.3e-6, atol=1e-5)
        ok &= torch.allclose(got_dg.double(), ref_dg, rtol=1.3e-6, atol=1e-5)
        del ref_dE, got_dE
    return (time.perf_counter() - t0, time.process_time() - c0), bool(ok)


def fresh_memory_probe(mib=824):
    """(first touch, second pass) seconds over MiB of fresh shared memory: what a page the process
    has not touched yet costs here beside what its bytes cost. Both sides of this bench map such
    memory (parity's shared buffers, torch's tensors), so where the first number is large the
    wall times mostly measure the machine's page handling (docs/check-speed.md)."""
    import mmap
    try:
        import numpy as np
    except ImportError:
        return None
    n = mib << 20
    m = mmap.mmap(-1, n)  # anonymous, shared
    a = np.frombuffer(m, dtype=np.uint8)
    t0 = time.perf_counter()
    a[::4096] = 1  # one store per page: the fault and the kernel's zeroing of the page
    t1 = time.perf_counter()
    a.fill(2)  # every byte, pages present
    t2 = time.perf_counter()
    del a
    m.close()
    return t1 - t0, t2 - t1


def parity_check(args, cache, jobs):
    cmd = [CLI, "check", OP, "-q", "--cache", cache, "--jobs", str(jobs)] + args
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def best(fn, reps):
    """(wall, cpu) of the run with the least wall time."""
    return min((fn() for _ in range(reps)), key=lambda t: t[0])


def add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def line(name, s, peer=None):
    ratio = (f"   torch/parity: wall {peer[0] / s[0]:5.2f}x, cpu {peer[1] / s[1]:5.2f}x"
             if peer else "")
    print(f"  {name:58s} {s[0]:8.2f} s wall {s[1]:8.2f} s cpu{ratio}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=0,
                    help="parity check --jobs (default 0: one per core, parity's own default)")
    ap.add_argument("--no-prod", action="store_true")
    ap.add_argument("--k", type=int, default=12)
    ap.add_argument("--k-workload", default="text")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: torch not importable (the peer of this bench)")
        return 77
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"bench_check: {os.cpu_count()} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, parity --jobs {a.jobs}, best of {a.reps}")
    probe = fresh_memory_probe()
    if probe:
        print(f"machine: 824 MiB of fresh shared memory: first touch {probe[0]:.2f} s, "
              f"a pass over it once touched {probe[1]:.3f} s ({probe[0] / probe[1]:.0f}x)")
    tmp = tempfile.mkdtemp(prefix="parity-bench-check-")
    try:
        fast = ["--kernel", "builtin:fp32_fast"]
        for quick in (True, False):
            if not quick and a.no_prod:
                continue
            shapes = workloads(quick)
            sel = ["--quick"] if quick else ["--workload", shapes[0][0]]
            label = "quick" if quick else "production"
            print(f"{label}: {', '.join(f'{s[0]} {s[1]}x{s[2]}x{s[3]}' for s in shapes)}")
            peer, ok = None, True

            def run_torch():
                nonlocal ok
                s, ok = torch_bare_check(torch, shapes)
                return s
            peer = best(run_torch, a.reps)

            def cold():
                c = tempfile.mkdtemp(dir=tmp)
                return parity_check(fast + sel, c, a.jobs)
            warm_dir = os.path.join(tmp, f"warm-{label}")
            parity_check(fast + sel, warm_dir, a.jobs)  # fills the cache
            line(f"torch bare check (allclose {'passed' if ok else 'FAILED'})", peer)
            line(f"parity check {' '.join(sel)} fp32_fast, cold cache", best(cold, a.reps), peer)
            line(f"parity check {' '.join(sel)} fp32_fast, warm cache",
                 best(lambda: parity_check(fast + sel, warm_dir, a.jobs), a.reps), peer)
        # k kernels in one check vs k checks, warm cache (the floor is shared setup either way).
        names = re.findall(r"builtin:(\S+)", subprocess.run([CLI, "kernels", OP], capture_output=True,
                                                               text=True, check=True).stdout)[: a.k]
        wl = ["--workload", a.k_workload]
        kd = os.path.join(tmp, "k")
        parity_check(wl + ["--kernel", "builtin:" + names[0]], kd, a.jobs)
        one = best(lambda: parity_check(wl + ["--kernel", "builtin:" + names[0]], kd, a.jobs), a.reps)
        many = best(lambda: parity_check(wl + sum((["--kernel", "builtin:" + n] for n in names), []),
                                         kd, a.jobs), a.reps)
        singles = best(lambda: functools.reduce(add, (parity_check(wl + ["--kernel", "builtin:" + n],
                                                                    kd, a.jobs) for n in names)), a.reps)
        print(f"{len(names)} catalog kernels on workload {a.k_workload}, warm cache:")
        line(f"{len(names)} single-kernel checks", singles)
        line(f"one check of {len(names)} kernels", many)
        line(f"one check of 1 kernel ({names[0]})", one)
        print(f"  {len(names)} single checks / one {len(names)}-kernel check: wall {singles[0] / many[0]:.2f}x, "
              f"cpu {singles[1] / many[1]:.2f}x; one {len(names)}-kernel check / one 1-kernel check: "
              f"wall {many[0] / one[0]:.2f}x, cpu {many[1] / one[1]:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

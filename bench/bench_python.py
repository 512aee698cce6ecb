#!/usr/bin/env python3
"""Bench: the Python layer's cost. `parity.check` on a catalog kernel called through Python
(parity._builtin: the very C kernel, so the kernel's own time is the same on both sides) beside
`parity check --kernel builtin:NAME` (the CLI) on the same workloads, in the same run; the
kernel's own time per call measured directly. Both sides make the same calls (decoy, judged
run, rerun: 3 on the non-production workloads, 1 on production ones) and skip the floor.

    overhead = (T_python - T_cli) / (calls x t_kernel)     issue #17 asks for <= 10%

in wall time and in CPU time (user + system, the CLI's children included: on a loaded machine
wall time measures the neighbours as much as the code). Negative means the Python layer is
cheaper than the CLI (no process start, no fork per run).
usage: bench_python.py [--kernel fp32_seq] [--workloads uniform,text,odd-d4097] [--prod] [--reps 3]
env:   PARITY (the CLI), PARITY_PY_LIB (the bridge); default: build/ next to this script.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLI = os.environ.get("PARITY", os.path.join(ROOT, "build", "parity"))
os.environ.setdefault("PARITY_PY_LIB", os.path.join(ROOT, "build", "python", "libparity_python.so"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402

import parity  # noqa: E402
from parity import _builtin, _case  # noqa: E402

OP = "embedding_rmsnorm_bwd"


def _cpu():
    import resource
    a, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + c.ru_utime + c.ru_stime


def best(fn, reps):
    """(best wall seconds, best CPU seconds, last result) over reps runs."""
    ts, cs = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), _cpu()
        r = fn()
        ts.append(time.perf_counter() - t0)
        cs.append(_cpu() - c0)
    return min(ts), min(cs), r


def kernel_time(fn, wl, reps):
    x = parity.inputs(OP, wl, dtype=fn.in_dtype, like="numpy")
    out = {n: np.empty(s, np.float32) for n, s in x.output_shapes.items()}
    t, c, _ = best(lambda: fn(out=out, **x), reps)
    return t, c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="fp32_seq")
    ap.add_argument("--workloads", default="uniform,text,odd-d4097")
    ap.add_argument("--prod", action="store_true", help="add the production-sized workload (minutes)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    wls = a.workloads.split(",") + (["prod"] if a.prod else [])
    fn = _builtin.kernel(OP, a.kernel)
    print("bench_python: parity.check (Python) vs parity check (CLI), builtin:%s on %s, best of %d, no floor"
          % (a.kernel, OP, a.reps))
    print("%-12s %5s %14s %14s %14s %16s  %s" % ("workload", "calls", "kernel ms", "CLI s",
                                                  "Python s", "overhead", "same verdict"))
    print("%-12s %5s %14s %14s %14s %16s" % ("", "", "wall / cpu", "wall / cpu", "wall / cpu", "wall / cpu"))
    prod = {w["name"]: w["production"] for w in _case._op_static(OP)["workloads"]}
    worst = -1e9
    for wl in wls:
        calls = 1 if prod.get(wl.split("@")[0], False) else 3
        tk, ck = kernel_time(fn, wl, a.reps)
        with tempfile.TemporaryDirectory() as td:
            js = os.path.join(td, "c.json")
            cmd = [CLI, "check", OP, "--kernel", "builtin:" + a.kernel, "--workload", wl, "--no-floor", "-q",
                   "--json", js]
            t_cli, c_cli, _ = best(lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False), a.reps)
            import json
            v_cli = json.load(open(js))["kernels"][0]["verdict"]
        t_py, c_py, rep = best(lambda: parity.check(OP, fn, workloads=[wl], like="numpy", dtype=fn.in_dtype,
                                                    out_dtype=fn.out_dtype, floor=False), a.reps)
        ov, oc = (t_py - t_cli) / (calls * tk), (c_py - c_cli) / (calls * ck)
        worst = max(worst, oc)
        print("%-12s %5d %6.0f / %5.0f %6.2f / %5.2f %6.2f / %5.2f %+6.1f%% / %+6.1f%%  %s" % (
            wl, calls, tk * 1e3, ck * 1e3, t_cli, c_cli, t_py, c_py, 100 * ov, 100 * oc,
            "yes" if rep.verdict == v_cli else "NO (%s vs %s)" % (rep.verdict, v_cli)))
    print("worst overhead in CPU time %+.1f%% of the kernel's own (target <= 10%%): %s" % (
        100 * worst, "met" if worst <= 0.10 else "NOT met"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench_problem: what judging a benchmark problem with parity costs against the benchmark's own
correctness check on the same shapes (issue #37: at most 2x).

The problem: PATH (a SOL-ExecBench / FlashInfer-Bench folder, a KernelBench file) with --solution,
or by default an RMSNorm problem written here in SOL-ExecBench's format (hidden 4096, bf16 in and
out, a gamma, eps 1e-5; batch from --rows) with a faithful PyTorch solution.

Timed, best of --reps, in one process:
- parity: parity.problems.judge(problem, solution, quick=True): parity.check on the quick
  workloads (each: the inputs, the fp64 oracle, the reference's contract evaluation, the
  tolerance, the harness's decoy and probe calls and the judged call of the solution) plus the
  benchmark's own rule on the judged call (the reference run natively once more per workload).
- parity.check alone (the same, without the benchmark's rule beside it).
- the benchmark's own check, re-implemented here on the same shapes as parity's workloads: per
  workload, inputs drawn in the declared dtypes (torch.randn), the reference run natively, the
  solution run once, SOL-ExecBench's rule (|x-y| <= atol + rtol|y| on >= 99% after fp32 casts,
  NaN/Inf and all-zero checks).

Printed: wall and process CPU seconds of each (best of --reps, the three taking turns within each
repetition) and the ratios parity / benchmark check. Like `parity problem`, the script first lets glibc keep freed memory
(problems.keep_freed_memory; --no-keep-heap leaves malloc as it is), for all three alike.
usage: PYTHONPATH=python PARITY_PY_LIB=build/python/libparity_python.so \\
       python3 bench/bench_problem.py [PATH --solution FILE] [--rows 512] [--reps 7] [--contract C]"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

from parity import problems

REF = '''import torch

@torch.no_grad()
def run(hidden_states, weight, eps):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x * inv_rms * weight.to(torch.float32)).to(hidden_states.dtype)
'''
SOL = '''import torch

def run(hidden_states, weight, eps, output):
    x = hidden_states.float()
    output.copy_((x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight.float()).to(output.dtype))
'''


def write_default(root, rows):
    d = os.path.join(root, "rmsnorm_h4096_bench")
    os.makedirs(d)
    with open(os.path.join(d, "definition.json"), "w") as f:
        json.dump({"name": "rmsnorm_h4096_bench", "op_type": "rmsnorm",
                   "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 4096}},
                   "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
                              "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
                              "eps": {"shape": None, "dtype": "float32"}},
                   "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
                   "reference": REF}, f)
    with open(os.path.join(d, "workload.jsonl"), "w") as f:
        f.write(json.dumps({"uuid": "bench", "axes": {"batch_size": rows},
                            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"},
                                       "eps": {"type": "scalar", "value": 1e-5}}}) + "\n")
    sol = os.path.join(d, "solution.json")
    with open(sol, "w") as f:
        json.dump({"name": "rmsnorm_torch", "definition": "rmsnorm_h4096_bench", "author": "bench",
                   "spec": {"languages": ["pytorch"], "target_hardware": ["LOCAL"],
                            "entry_point": "kernel.py::run", "destination_passing_style": True},
                   "sources": [{"path": "kernel.py", "content": SOL}]}, f)
    return d, sol


def best(reps, fns):
    """Per function, (wall seconds, process CPU seconds), each the best of reps. The functions
    take turns within each repetition, so that a slow spell of a shared machine falls on all of
    them alike rather than on whichever ran then."""
    out = [[None, None] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            out[i][0] = dt if out[i][0] is None else min(out[i][0], dt)
            out[i][1] = dc if out[i][1] is None else min(out[i][1], dc)
    return [tuple(x) for x in out]


def benchmark_check(p, call, sizes_list):
    """The benchmark's own correctness check on the given shapes (re-implemented: inputs drawn
    natively, the reference natively, the solution once, the rule)."""
    ok = True
    for sizes in sizes_list:
        args = {}
        for k, s in p.inputs.items():
            if s["shape"] is None:
                args[k] = p.scalars[k]
                continue
            shape = [sizes[a] for a in s["shape"]]
            dt = getattr(torch, s["dtype"])
            args[k] = torch.randn(shape).to(dt) if dt.is_floating_point else torch.randint(0, 2, shape).to(dt)
        refs = p.native(args)
        outs = call(args)
        for x, y in zip(outs, refs):
            ok &= problems.rule_check(dict(p.rule, name=p.rule["name"]), x, y)[0]
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--solution")
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--contract", default="reference")
    ap.add_argument("--no-keep-heap", action="store_true",
                    help="leave glibc's malloc as it is (parity problem keeps freed memory: problems.keep_freed_memory)")
    a = ap.parse_args()
    if not a.no_keep_heap and hasattr(problems, "keep_freed_memory"):  # as `parity problem` does; the
        problems.keep_freed_memory()                                     # benchmark's check shares the process
    tmp = tempfile.mkdtemp(prefix="bench_problem_")
    path, sol = (a.path, a.solution) if a.path else write_default(tmp, a.rows)
    p = problems.load(path, a.contract)
    call, label = problems.load_solution(p, sol)
    names = [w for w in p.op.workload_names("quick")]
    spec = {w[0]: w[1] for w in p.op.workloads()}
    sizes_list = [spec[n] for n in names]
    print("problem %s, solution %s, contract %s, torch %s, %d threads" % (
        p.name, label, p.contract, torch.__version__, torch.get_num_threads()))
    print("shapes (parity's quick workloads: %s): %s" % (", ".join(names), "; ".join(
        ", ".join("%s=%d" % kv for kv in s.items()) for s in sizes_list)))
    j = problems.judge(p, sol, quick=True)
    print("parity verdict: %s (worst err/tol %.3g); benchmark rule: %s" % (
        j.verdict, max(w.err_over_tol for w in j.report.workloads), j.rule["verdict"]))
    t_bench, t_check, t_judge = best(a.reps, [
        lambda: benchmark_check(p, call, sizes_list),
        lambda: __import__("parity").check(p.op, problems._Recorder(p, call, label), workloads="quick",
                                           dtype=p.dtype, like="torch"),
        lambda: problems.judge(p, sol, quick=True)])
    print("                                       wall s   ratio    CPU s   ratio   (malloc keeps freed memory: %s)"
          % ("no" if a.no_keep_heap else "yes"))
    for what, t in (("benchmark's own check (same shapes)", t_bench), ("parity.check (judging alone)", t_check),
                    ("parity problem (judging + the rule)", t_judge)):
        print("%-37s %8.3f %7.2f %8.3f %7.2f" % (what, t[0], t[0] / t_bench[0], t[1], t[1] / t_bench[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

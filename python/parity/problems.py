"""Benchmark problems as they are (issue #37, first slice; docs/problems.md).

    from parity import problems
    p = problems.load("path/to/problem_folder")          # SOL-ExecBench / FlashInfer-Bench
    p = problems.load("path/to/19_ReLU.py")              # KernelBench problem file
    print(p.describe())                                  # the inferred roles
    r = problems.judge(p, solution="solution.json")      # parity's verdict + the benchmark's rule
    print(r.text()); r.to_dict()

A problem becomes a parity.Op (the public declared-op API): its inputs with roles inferred from
the definition, its reference made into an fp64 oracle (the PyTorch reference re-run with every
floating dtype promoted to float64 by a torch function mode), declared multilinear=False so that
parity's empirical floor judges it. The contract decides what the reference's float32 evaluation
(the one the floor is measured on) is: `math` promotes every float to float32 (fp32 internals,
one rounding per output), `reference` runs the reference in its own dtypes (bf16 intermediates
and all), so the floor allows exactly the roundings the reference itself performs.

Formats read (facts from the benchmarks' public docs; no code of theirs):
- SOL-ExecBench / FlashInfer-Bench definition JSON: name, axes {const value | var | expr
  expression}, inputs/outputs {name: {shape: [axis names] | null (a scalar), dtype}}, reference
  (PyTorch source with a global `run`, inline or reference.py beside it); workload.jsonl lines
  {uuid, axes, inputs {name: {type: random|scalar|safetensors|custom, ...}}, tolerance}
  (FlashInfer traces wrap it as {"definition", "workload"}).
- Solutions: JSON with spec.entry_point "file.py::fn", spec.languages (SOL, a list) or
  spec.language (FlashInfer), spec.destination_passing_style (default true: outputs
  pre-allocated and passed after the inputs), sources [{path, content}].
- KernelBench: a problem file with class Model(nn.Module), get_inputs(), get_init_inputs();
  a solution file with class ModelNew built from the same init inputs under the same seed.

The code is split along its seams: _problem_oracle (errors, dtype tables, the fp64 oracle's torch
modes), _problem_core (Problem), _problem_formats (reading the formats, roles, load),
_problem_solutions (solutions, own workloads), _problem_rules (the benchmarks' rules),
_problem_ints (integer outputs judged exactly), _problem_judge (judge, Judgement); this module re-exports them and holds the CLI.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _problem_folders as _folders
from ._errors import ProblemError as ProblemError
from ._problem_core import Problem as Problem
from ._problem_formats import _KB_PRECISION, load as load
from ._problem_judge import Judgement as Judgement, judge as judge
from ._problem_oracle import (CONTRACTS as CONTRACTS, ProblemFileError as ProblemFileError,
                              RefusedReference as RefusedReference, keep_freed_memory as keep_freed_memory)
from ._problem_rules import apply_rule as apply_rule, rule_check as rule_check, rule_text as rule_text
from ._problem_solutions import (Unsupported as Unsupported, _Recorder as _Recorder,
                                 load_solution as load_solution, own_workloads as own_workloads,
                                 structure_workloads as structure_workloads)

__all__ = ["load", "judge", "Problem", "Judgement", "ProblemFileError", "RefusedReference", "main",
           "CONTRACTS", "load_solution", "ProblemError", "Unsupported", "own_workloads", "structure_workloads", "apply_rule",
           "rule_check", "rule_text"]


# -- CLI --------------------------------------------------------------------------------------------
_USAGE = """usage: parity problem PATH [--solution FILE | --solutions DIR [--sample S]] [--contract math|reference]
                      [--json FILE] [--seed N] [--quick] [--own-lines N] [--solution-name NAME]
                      [--precision fp32|fp16|bf16] [--jobs N] [--isolate]

Judge a benchmark problem as it is: PATH is a SOL-ExecBench / FlashInfer-Bench problem folder
(definition.json, optional workload.jsonl and reference.py) or definition JSON, or a KernelBench
problem .py file. The solution is the benchmark's own format (a solution JSON with a Python entry
point "file.py::fn", destination-passing or value-returning; a KernelBench file with ModelNew);
without one the problem's reference itself, run in its own dtypes, is judged.
--contract: math (fp32 internals, one rounding per output) or reference (default: the roundings
the reference performs are allowed). The benchmark's own rule is reported beside the verdict.
--precision: a KernelBench problem's precision (its inputs and models cast to it; tolerance 1e-4 for
fp32, 1e-2 otherwise, as KernelBench's). Without --quick the problem's own workload lines are judged
too: at most --own-lines N (default 6) per set of scalar values, spread over their sizes; lines whose
scalars (eps, sm_scale) differ from the definition's first are judged as an op of their own.

Many at once. PATH may be a folder of problem folders / KernelBench files (levelN/ subfolders
included), or a FlashInfer-Bench dataset root (definitions/, workloads/, solutions/). Solutions are
found by the benchmark's naming: --solutions DIR, a folder of solution JSONs, each judged on the
problem its "definition" field names (a FlashInfer-Bench root uses its own solutions/), or a
KernelBench run folder, whose level_L_problem_P_sample_S_kernel.py files are judged on levelL/P_*.py
(--sample S: that sample only); --solution-name NAME: the file of that name inside each problem
folder. Problems the solutions folder has nothing for are listed and skipped. --jobs N: judge N at
once, each in its own process (0: one per core; default 1); the report and the JSON keep the order.
Under mpirun or srun, the ranks split a folder's problems; rank 0 reports (docs/problems.md).
Compiled solutions (C++) run in a child process, so that a crash or a hang (PARITY_PROBLEM_TIMEOUT
seconds, default 300) is a verdict; --isolate runs Python solutions there too.
Integer outputs (argmax, top-k indices) are judged exactly: each element must equal the fp64
oracle's or the native reference's (docs/problems.md, "Integer outputs").
exit codes: 0 faithful, 1 not faithful (or unsupported), 2 usage, 3 bad problem or solution file.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with parity's wording
        sys.stderr.write("parity problem: %s\n%s" % (message, _USAGE))
        raise SystemExit(2)


def _judge_item(item: str, sol: Optional[str], contract: Optional[str], precision: str, seed: int,
                quick: bool, own_lines: int = 6, isolate: bool = False) -> Tuple[str, Dict[str, Any], int, str]:
    """One problem of the command: (report text, JSON dict, exit code, error message). Runs in
    the command's process, or in a worker process with --jobs."""
    try:
        p = load(item, contract, precision=precision)
        j = judge(p, sol, seed=seed, quick=quick, own_lines=own_lines, isolate=isolate)
    except ProblemError as e:
        return "", {"verdict": "bad-problem", "problem": {"path": item}, "reason": str(e)}, 3, str(e)
    return j.text(), j.to_dict(), 0 if j.ok else 1, ""


def _worker_init(threads: int) -> None:
    """A --jobs worker: malloc keeps freed memory, torch uses its share of the cores."""
    keep_freed_memory()
    import torch
    torch.set_num_threads(threads)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _judge_all(jobs_: List[Tuple[str, Optional[str]]], a: Any) -> Iterator[Tuple[str, Dict[str, Any], int, str]]:
    """The problems' results in the folder's order: here one after the other, or with --jobs N
    in N spawned worker processes (spawn, not fork: torch and the bridge hold threads and state
    a forked child must not inherit)."""
    n = min(a.jobs if a.jobs > 0 else _cores(), len(jobs_))
    if n <= 1:
        for item, sol in jobs_:
            yield _judge_item(item, sol, a.contract, a.precision, a.seed, a.quick, a.own_lines, a.isolate)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init, initargs=(max(1, _cores() // n),)) as ex:
        futs = [ex.submit(_judge_item, item, sol, a.contract, a.precision, a.seed, a.quick, a.own_lines, a.isolate)
                for item, sol in jobs_]
        for f in futs:
            yield f.result()


def _shard_spec(text: str) -> Tuple[int, int]:
    """--shard R/S: rank R of S."""
    try:
        r, s = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("--shard wants RANK/SIZE, got %r" % text) from None
    if not 0 <= r < s:
        raise argparse.ArgumentTypeError("--shard wants 0 <= RANK < SIZE, got %r" % text)
    return r, s


def _local_ranks() -> int:
    """How many ranks of the job share this machine (Open MPI, MPICH, Slurm say so)."""
    for k in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"):
        try:
            return max(1, int(os.environ.get(k, "").split("(")[0]))
        except ValueError:
            continue
    return 1


def _run_shard(todo: List[Tuple[str, Optional[str]]], a: Any) -> int:
    """One MPI rank's share (problems R, R+S, R+2S, ...): its results into --shard-out, for rank
    0's --merge; a line per problem on stderr as it is judged. The ranks on one machine share its
    cores (torch's threads), as check's ranks do."""
    rank, size = a.shard
    import torch
    torch.set_num_threads(max(1, _cores() // _local_ranks()))
    mine = list(range(rank, len(todo), size))
    rows: List[Dict[str, Any]] = []
    for k, (i, (text, d, code, err)) in enumerate(zip(mine, _judge_all([todo[i] for i in mine], a))):
        rows.append({"index": i, "text": text, "dict": d, "code": code, "err": err})
        sys.stderr.write("parity problem: rank %d: %d/%d %s: %s\n" % (
            rank, k + 1, len(mine), d["problem"].get("name", d["problem"]["path"]), d["verdict"]))
        sys.stderr.flush()
    tmp = a.shard_out + ".part"
    with open(tmp, "w") as f:
        json.dump({"rank": rank, "size": size, "n": len(todo), "results": rows}, f, default=str)
    os.replace(tmp, a.shard_out)
    return 0


def _merged(files: Sequence[str], n: int) -> List[Tuple[str, Dict[str, Any], int, str]]:
    """The ranks' shard files as one run's results, in the problems' order."""
    got: Dict[int, Tuple[str, Dict[str, Any], int, str]] = {}
    for path in files:
        try:
            with open(path) as f:
                doc = json.load(f)
            for row in doc["results"]:
                got[int(row["index"])] = (row["text"], row["dict"], int(row["code"]), row["err"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError("--merge %s: not a rank's results (%s)" % (path, e)) from None
    if sorted(got) != list(range(n)):
        raise ValueError("--merge: the ranks' results cover %d of %d problems" % (len(got), n))
    return [got[i] for i in range(n)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = _Parser(prog="parity problem", add_help=False)
    ap.add_argument("path", nargs="?")
    ap.add_argument("--solution")
    ap.add_argument("--solution-name")
    ap.add_argument("--solutions")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--contract", choices=CONTRACTS)
    ap.add_argument("--json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--precision", choices=tuple(_KB_PRECISION), default="fp32")
    ap.add_argument("--jobs", "-j", type=int, default=1)
    ap.add_argument("--own-lines", type=int, default=6)
    ap.add_argument("--isolate", action="store_true")
    ap.add_argument("-h", "--help", action="store_true")
    # Between the C command and this module under an MPI launcher (programs/problem_mpi.c): one
    # rank's share of the problems into a file, then rank 0 merges the ranks' files.
    ap.add_argument("--shard", type=_shard_spec, help=argparse.SUPPRESS)
    ap.add_argument("--shard-out", help=argparse.SUPPRESS)
    ap.add_argument("--merge", nargs="+", help=argparse.SUPPRESS)
    args = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    if "--shard" in args[:-1] and not args[args.index("--shard") + 1].startswith("0/"):
        sys.stderr = open(os.devnull, "w")  # under MPI, rank 0 says what is wrong with the command
    a = ap.parse_args(args)
    if a.own_lines < 0:
        ap.error("--own-lines wants 0 or more, got %d" % a.own_lines)
        return 2
    if not 0 <= a.jobs <= 256:
        ap.error("--jobs wants 0..256, got %d" % a.jobs)
        return 2
    if a.help:
        sys.stdout.write(_USAGE)
        return 0
    if a.shard and not a.shard_out:
        ap.error("--shard wants --shard-out FILE")
        return 2
    if not a.path:
        ap.error("PATH is required")
        return 2
    try:
        import torch  # noqa: F401
    except ImportError as e:
        sys.stderr.write("parity problem: needs torch in %s (%s)\n" % (sys.executable, e))
        return 2
    keep_freed_memory()
    if not os.path.exists(a.path):
        sys.stderr.write("parity problem: %s: no such file or folder\n" % a.path)
        return 3
    if a.solution and a.solutions:
        ap.error("--solution names one file, --solutions a folder of them: give one")
        return 2
    if a.sample is not None and not a.solutions:
        ap.error("--sample picks a KernelBench run's sample: give --solutions RUN_DIR")
        return 2
    if a.solutions and not os.path.isdir(a.solutions):
        sys.stderr.write("parity problem: --solutions %s: no such folder\n" % a.solutions)
        return 3
    if os.path.isdir(a.path) and not os.path.isfile(os.path.join(a.path, "definition.json")):
        items = _folders.problems_in(a.path)
        if not items:
            sys.stderr.write("parity problem: %s: neither a problem nor a folder of problems (problem folders with "
                             "definition.json, KernelBench files, levelN/ folders, or definitions/)\n" % a.path)
            return 3
        if a.solution:
            ap.error("--solution names one file; with a folder of problems use --solutions or --solution-name")
            return 2
    else:
        items = [a.path]
    dicts: List[Dict[str, Any]] = []
    worst = 0
    todo, missing = _folders.pair(items, a.solution_name, a.solutions, a.sample, a.path if os.path.isdir(a.path) else None)
    if a.solution:
        todo = [(a.path, a.solution)]
    if missing and not a.shard:  # under MPI, rank 0's --merge says it
        sys.stderr.write("parity problem: no solution in %s for %d problem(s), skipped: %s\n" % (
            a.solutions or os.path.join(a.path, "solutions"), len(missing),
            ", ".join(os.path.basename(m) for m in missing)))
    if not todo:
        sys.stderr.write("parity problem: nothing to judge\n")
        return 3
    items = [t[0] for t in todo]
    if a.shard:
        sys.stderr = stderr
        return _run_shard(todo, a)
    results: Iterator[Tuple[str, Dict[str, Any], int, str]]
    if a.merge:
        try:
            results = iter(_merged(a.merge, len(todo)))
        except ValueError as e:
            sys.stderr.write("parity problem: %s\n" % e)
            return 2
    else:
        results = _judge_all(todo, a)
    for text, d, code, err in results:
        if err:
            sys.stderr.write("parity problem: %s\n" % err)
            if len(items) == 1:
                return 3
        else:
            sys.stdout.write(text)
            if len(items) > 1:
                sys.stdout.write("\n")
        sys.stdout.flush()
        dicts.append(d)
        worst = max(worst, code)
    if len(items) > 1:
        sys.stdout.write("summary\n")
        for d in dicts:
            sol = d.get("solution") or "-"
            sys.stdout.write("  %-40s %-12s rule %-8s %s\n" % (d["problem"].get("name", d["problem"]["path"]),
                                                            d["verdict"], d.get("benchmark_rule", {}).get("verdict", "-"),
                                                            sol if len(sol) <= 60 else "..." + sol[-57:]))
    if a.json:
        out = dicts[0] if len(items) == 1 else {"verdict": "faithful" if worst == 0 else "unfaithful",
                                                "problems": dicts, "skipped": [{"path": m, "reason": "no solution"}
                                                                               for m in missing]}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
            f.write("\n")
    return worst


if __name__ == "__main__":
    sys.exit(main())

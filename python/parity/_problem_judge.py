"""parity.problems: judge() -- parity.check of a solution on a problem's op, the benchmark's rule
beside it -- and the Judgement it returns (issue #37; docs/problems.md)."""
from __future__ import annotations

import copy
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from ._problem_core import Problem
from ._problem_ints import combine, judge_ints
from ._problem_oracle import LOW_FALLBACK_USED
from ._problem_rules import apply_rule, judged_calls, rule_rows, rule_text
from ._errors import ProblemError
from ._problem_solutions import (Unsupported, _Recorder, kernelbench_own_workloads, load_solution,
                                 other_scalar_sets, own_workloads, structure_workloads)


# -- judging ----------------------------------------------------------------------------------------
class Judgement:
    """parity's verdict under the problem's contract beside the benchmark's own rule."""

    def __init__(self, problem: Problem, report: Any, rule: Dict[str, Any], solution: str,
                 verdict: Optional[str] = None, reason: str = "", seconds: float = 0.0,
                 ints: Optional[Dict[str, Any]] = None) -> None:
        # report: parity.check's report of the float outputs (None when the problem has none, or
        # the solution did not run); ints: the integer outputs' exact judgement (_problem_ints)
        self.problem, self.report, self.rule, self.solution = problem, report, rule, solution
        self.ints = ints
        self.verdict = verdict or combine(report.verdict if report is not None else None,
                                          ints["verdict"] if ints is not None else None)
        self.reason, self.seconds = reason, seconds
        self.reproduce = ""  # the parity problem command that judges the same (set by judge())
        # the own workload lines with other scalar values, each judged as an op of its own
        self.parts: List[Tuple[Dict[str, Any], "Judgement"]] = []

    def add_part(self, scalars: Dict[str, Any], j: "Judgement") -> None:
        """Lines with other scalars, judged apart: the verdict is the worse one, the benchmark
        rule fails when it fails there."""
        self.parts.append((scalars, j))
        self.verdict = combine(self.verdict, j.verdict)
        if j.rule.get("verdict") == "fail" and self.rule.get("verdict") == "pass":
            self.rule = dict(self.rule, verdict="fail")

    @property
    def ok(self) -> bool:
        return self.verdict == "faithful"

    def to_dict(self) -> Dict[str, Any]:
        p = self.problem
        d: Dict[str, Any] = {
            "verdict": self.verdict, "contract": p.contract,
            "benchmark_rule": {"name": self.rule["name"], "verdict": self.rule["verdict"],
                               "rule": self.rule.get("rule", ""), "calls": self.rule.get("calls", [])},
            "problem": {"name": p.name, "format": p.format, "path": p.path, "dtype": p.dtype,
                        "roles": {k: {"role": r, "vocab": v, "why": p.role_why.get(k, "")}
                                  for k, (r, v) in p.roles.items()},
                        "scalars": p.scalars, "sizes": p.shapes, "notes": p.notes},
            "solution": self.solution, "seconds": round(self.seconds, 3)}
        if self.reason:
            d["reason"] = self.reason
        if self.reproduce:
            d["reproduce"] = self.reproduce
        if self.report is not None:
            d["parity"] = json.loads(self.report.to_json())
        elif self.ints is not None:
            d["parity"] = None  # no float output: no declared op was checked
        if self.ints is not None:
            d["integer_outputs"] = self.ints
        if self.parts:
            d["scalar_sets"] = [{"scalars": sc, "verdict": j.verdict,
                                 "benchmark_rule": {"name": j.rule["name"], "verdict": j.rule["verdict"],
                                                    "calls": j.rule.get("calls", [])},
                                 "parity": json.loads(j.report.to_json()) if j.report is not None else None,
                                 **({"integer_outputs": j.ints} if j.ints is not None else {})}
                                for sc, j in self.parts]
        return d

    def text(self) -> str:
        lines = [self.problem.describe(), "solution: %s" % self.solution, ""]
        if self.report is not None:
            # the declared op's own `reproduce: parity.check(...)` lines name an op built inside
            # this judgement; the last line names the command that judges the same
            lines.extend(x for x in str(self.report).rstrip().split("\n")
                         if not x.strip().startswith("reproduce: parity.check("))
            lines.append("")
        if self.ints is not None:
            lines.extend(_ints_text(self.ints, self.report))
            lines.append("")
        for sc, j in self.parts:
            lines.append("own workload lines with %s (an op of its own):" % ", ".join(
                "%s=%r" % kv for kv in sc.items()))
            if j.report is not None:
                lines.extend("  " + x for x in str(j.report).rstrip().split("\n")
                             if not x.strip().startswith("reproduce: parity.check("))
            if j.ints is not None:
                lines.extend("  " + x for x in _ints_text(j.ints, j.report))
            lines.append("  verdict: %s; benchmark rule: %s" % (j.verdict, j.rule["verdict"]))
            lines.append("")
        lines.append("parity verdict (contract %s): %s%s" % (self.problem.contract, self.verdict,
                                                            " -- " + self.reason if self.reason else ""))
        lines.append("benchmark rule (%s): %s" % (self.rule.get("rule", self.rule["name"]), self.rule["verdict"]))
        if self.reproduce:
            lines.append("reproduce: %s" % self.reproduce)
        return "\n".join(lines) + "\n"


def _ints_text(ints: Dict[str, Any], report: Any) -> List[str]:
    """The integer outputs' part of the text report: the rule, one line per output and workload
    that differs (at most 8), else one line per output."""
    lines = ["integer outputs (%s): %s" % (", ".join(ints["outputs"]), ints["rule"])]
    if report is not None:
        lines.append("  float outputs (parity.check): %s" % report.verdict)
    bad = [r for r in ints["calls"] if not r["pass"]]
    for r in bad[:8]:
        lines.append("  %s" % r["detail"])
    if len(bad) > 8:
        lines.append("  ... %d more" % (len(bad) - 8))
    if not bad:
        ws = sorted(set(r["workload"] for r in ints["calls"]), key=[r["workload"] for r in ints["calls"]].index)
        ties = sum(r.get("ties", 0) for r in ints["calls"])
        lines.append("  all match on %d workload(s): %s%s" % (len(ws), ", ".join(ws), (
            "; %d element(s) where the oracle and the native reference differ (either accepted)" % ties
            if ties else "")))
    lines.append("  integer outputs: %s" % ints["verdict"])
    return lines


def judge(problem: Problem, solution: Optional[str] = None, *, contract: Optional[str] = None, seed: int = 1,
          quick: bool = False, workloads: Any = None, own: bool = True, own_lines: int = 6,
          isolate: bool = False, _given: Optional[Dict[str, Any]] = None) -> Judgement:
    """parity.check of the solution (None: the problem's reference run natively) on the problem's
    op under `contract` (default: the problem's), with the benchmark's own rule beside it. Unless
    quick (or workloads= is given, or own=False), the problem's own workload lines are judged
    too (own_workloads: at most own_lines of them per set of scalar values, spread over their
    sizes); lines with other scalar values than the op's are judged as ops of their own
    (Judgement.parts). isolate: run a Python solution in a child process too, as compiled ones
    always are (a crash or a hang is then a verdict; docs/problems.md)."""
    import parity
    if contract and contract != problem.contract:
        problem = problem.with_contract(contract)
    t0 = time.perf_counter()
    try:
        call, label = load_solution(problem, solution, isolate=isolate)
    except Unsupported as e:
        return Judgement(problem, None, {"name": problem.rule["name"], "verdict": "not-run",
                                         "rule": rule_text(problem.rule), "calls": []},
                         solution or "", verdict="unsupported", reason=str(e))
    LOW_FALLBACK_USED.clear()
    rec = _Recorder(problem, call, label)
    wl: Any = workloads if workloads is not None else ("quick" if quick else None)
    given: Dict[str, Any] = dict(_given or {})
    if problem.structure and workloads is None:
        # integer structure only the problem's lines give: parity's workloads on their values
        dicts, given, notes = structure_workloads(problem, seed, quick or not own, limit=own_lines)
        problem = copy.copy(problem)
        problem.notes = problem.notes + notes
        wl = dicts
    elif own and workloads is None and not quick:
        dicts, given, notes = own_workloads(problem, seed, own_lines)
        if dicts:
            problem = copy.copy(problem)
            problem.notes = problem.notes + notes
            wl = problem.draw_op.workload_names(None) + dicts  # type: ignore[union-attr]
    report = harness = None
    early: Dict[int, Any] = {}
    pool = None
    if problem.op is not None:
        if not problem.int_outputs:
            # The benchmark's rule on each workload's judged call, in a thread of its own as soon as
            # the check moves on to the next workload (it is parity's code on copies the recorder
            # keeps: it runs beside the candidate, and the rule costs nothing at the end).
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parity-rule")

            def done(i: int) -> None:
                kept = rec.judged(i)
                if kept is not None:
                    early[i] = pool.submit(rule_rows, problem, kept[0], kept[1])
            rec.on_done = done
        try:
            for attempt in range(3):
                assert problem.op is not None
                try:
                    report = parity.check(problem.op, rec, workloads=wl, seed=seed, dtype=problem.dtype,
                                          like="torch", progress=rec.progress)
                    break
                except ProblemError as e:
                    if workloads is not None or _given or attempt == 2:
                        raise
                    wl2, given2, note = _remedy(problem, e, wl, seed, own_lines)
                    if wl2 is None:
                        raise
                    wl, given = wl2, (given2 if given2 is not None else given)
                    problem = copy.copy(problem)
                    problem.notes = problem.notes + [note]
                    early.clear()
                    rec = _Recorder(problem, call, label)
                    rec.on_done = done if pool is not None else None
            if pool is not None:
                rec.finished(rec.group)  # the last workload's, unless its verdict line started it
        finally:
            rec.on_done = None
            if pool is not None and report is None:
                pool.shutdown(wait=True)
        assert report is not None
        names = [w.name for w in report.workloads]
    else:
        # Integer outputs only (argmax): the solution runs through the harness all the same
        # (decoy and probes, modified inputs, a crash, stale or nondeterministic outputs), on the
        # op that draws the workloads, its outputs the integer ones as float64. Its numbers are
        # not the judgement (an index has no tolerance; ties): the exact one below is, and of the
        # harness's verdicts only those that are not about numbers count (_harness_verdict).
        assert problem.draw_op is not None
        rec.ints_as_floats = True
        harness = parity.check(problem.draw_op, rec, workloads=wl, seed=seed, dtype=problem.dtype, like="torch",
                               progress=rec.progress)
        names = [w.name for w in harness.workloads]
    calls = judged_calls(problem, call, names, seed, given, rec)
    ints = None
    if problem.int_outputs:
        calls += _own_inputs_calls(problem, call)
        ints = judge_ints(problem, calls)
    try:
        rule = apply_rule(problem, call, names, seed, given, rec, calls=calls, early=early)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    if LOW_FALLBACK_USED:  # said in the report (docs/problems.md, "Low precision on this CPU")
        problem = copy.copy(problem)
        problem.notes = problem.notes + [
            "torch here has no fp16/bf16 CPU kernel for %s: those ops ran in fp32 with their outputs rounded to "
            "the low-precision dtype (in the reference's native runs and the solution alike)"
            % ", ".join(sorted(LOW_FALLBACK_USED))]
    hv, why = _harness_verdict(harness)
    j = Judgement(problem, report, rule, label, seconds=time.perf_counter() - t0, ints=ints,
                  verdict=combine(hv, ints["verdict"] if ints is not None else None) if hv else None, reason=why)
    j.reproduce = _reproduce(problem, solution, seed, quick and workloads is None, own_lines, isolate)
    if own and workloads is None and not quick and own_lines > 0:
        for sc in other_scalar_sets(problem):
            sub = problem.with_scalars(sc)
            dicts, sub_given, _ = own_workloads(sub, seed, own_lines)
            if dicts:
                j.add_part(sc, judge(sub, solution, seed=seed, workloads=dicts, _given=sub_given))
    return j


def _remedy(problem: Problem, e: ProblemError, wl: Any, seed: int, own_lines: int) -> Tuple[Any, Any, str]:
    """What to judge instead when the problem's reference fails on parity's workloads (e: the
    check's error), as (workloads, given inputs or None to keep them, note), or (None, None, ""):
    the odd workload left out when the reference raises at the odd sizes only; the problem's own
    inputs when the reference is NaN on parity's role-drawn ones (a log of probabilities, the
    square root of a variance) -- KernelBench's get_inputs() draws, a definition's workload lines."""
    msg = str(e)
    if "the reference raises" in msg and problem.draw_op is not None and not problem.structure:
        wl2, why = _without_odd_if_refused(problem, wl)
        if why:
            return wl2, None, why
    if "not defined on these inputs" in msg and not problem.structure:
        if problem.format == "kernelbench":
            dicts, given, notes = kernelbench_own_workloads(problem)
            return dicts, given, notes[0] % msg.split(": ", 1)[-1]
        dicts, given, _ = own_workloads(problem, seed, max(own_lines, 1), max_elems=1 << 24)
        if dicts:
            return dicts, given, ("the reference is not defined on parity's role-drawn inputs (%s); judged on the "
                                  "problem's own workload lines instead: %s"
                                  % (msg.split(": ", 1)[-1], ", ".join(x["name"] for x in dicts)))
    return None, None, ""


def _without_odd_if_refused(problem: Problem, wl: Any) -> Tuple[Any, str]:
    """parity's `odd` workload moves every var axis to an odd size; a reference that needs some
    divisibility (a rotary embedding's even head dimension, quantization blocks of 16) raises
    there. Probed, once the check has failed on a reference error, natively on N(0,1) inputs:
    when the reference runs at the base sizes and raises at the odd ones, `odd` is left out, with
    the reason. wl: None, "quick" or a list."""
    op = problem.draw_op
    assert op is not None
    names = op.workload_names(wl) if wl is None or isinstance(wl, str) else list(wl)
    if "odd" not in names:
        return wl, ""
    dims = {w[0]: w[1] for w in op.workloads()}
    if dims.get("odd") == dims.get("base"):
        return wl, ""

    err = problem.fails_at(dims["odd"])
    if not err or problem.fails_at(dims["base"]):
        return wl, ""
    return [x for x in names if x != "odd"], (
        "the reference raises at the odd sizes (%s: %s), so odd is not judged; it runs at the base sizes"
        % (", ".join("%s=%d" % (a, v) for a, v in dims["odd"].items() if v != dims["base"][a]), err[:200]))


def _harness_verdict(harness: Any) -> Tuple[Optional[str], str]:
    """The first harness verdict (crashed, timeout, modified-inputs, stale-cache, ...) of the
    harness run of a problem with integer outputs only, and what it says; (None, "") when every
    workload was judged on numbers (those the exact judgement decides)."""
    for w in harness.workloads if harness is not None else []:
        if w.verdict not in ("faithful", "unfaithful"):
            return w.verdict, "%s on workload %s: %s" % (w.verdict, w.name, w.detail)
    return None, ""


def _own_inputs_calls(problem: Problem, call: Any) -> List[Tuple[str, Any, Any, str]]:
    """A KernelBench problem's own inputs (get_inputs() under its seed) as one more judged call,
    named get_inputs, for the integer outputs: parity draws its workloads from the roles, which
    rarely tie; a benchmark's rounded or integer-valued inputs do, and that is where a tie rule
    is decided."""
    own = problem._kb.get("inputs") if problem._kb else None
    if not own:
        return []
    args = problem._torch_args(dict(own, **problem.scalars), "native")
    try:
        return [("get_inputs", args, list(call(args)), "")]
    except Exception as e:
        return [("get_inputs", args, None, "%s: %s" % (type(e).__name__, e))]


def _reproduce(problem: Problem, solution: Optional[str], seed: int, quick: bool, own_lines: int = 6,
               isolate: bool = False) -> str:
    import shlex
    path = problem.path
    if problem.format == "sol" and os.path.basename(path) == "definition.json":
        path = os.path.dirname(path)
    cmd = ["parity", "problem", path]
    if solution:
        cmd += ["--solution", solution]
    cmd += ["--contract", problem.contract, "--seed", str(seed)]
    prec = problem._kb.get("precision") if problem._kb else None
    if prec and prec != "fp32":
        cmd += ["--precision", prec]
    if quick:
        cmd.append("--quick")
    elif own_lines != 6:
        cmd += ["--own-lines", str(own_lines)]
    if isolate and solution:
        cmd.append("--isolate")
    return " ".join(shlex.quote(c) for c in cmd)


"""parity.problems: judge() -- parity.check of a solution on a problem's op, the benchmark's rule
beside it -- and the Judgement it returns (issue #37; docs/problems.md)."""
from __future__ import annotations

import copy
import json
import os
import time
from typing import Any, Dict, Optional

from ._problem_core import Problem
from ._problem_rules import apply_rule, rule_text
from ._problem_solutions import Unsupported, _Recorder, load_solution, own_workloads


# -- judging ----------------------------------------------------------------------------------------
class Judgement:
    """parity's verdict under the problem's contract beside the benchmark's own rule."""

    def __init__(self, problem: Problem, report: Any, rule: Dict[str, Any], solution: str,
                 verdict: Optional[str] = None, reason: str = "", seconds: float = 0.0) -> None:
        self.problem, self.report, self.rule, self.solution = problem, report, rule, solution
        self.verdict = verdict or report.verdict
        self.reason, self.seconds = reason, seconds
        self.reproduce = ""  # the parity problem command that judges the same (set by judge())

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
        return d

    def text(self) -> str:
        lines = [self.problem.describe(), "solution: %s" % self.solution, ""]
        if self.report is not None:
            lines.append(str(self.report).rstrip())
            lines.append("")
        lines.append("parity verdict (contract %s): %s%s" % (self.problem.contract, self.verdict,
                                                            " -- " + self.reason if self.reason else ""))
        lines.append("benchmark rule (%s): %s" % (self.rule.get("rule", self.rule["name"]), self.rule["verdict"]))
        if self.reproduce:
            lines.append("reproduce: %s" % self.reproduce)
        return "\n".join(lines) + "\n"


def judge(problem: Problem, solution: Optional[str] = None, *, contract: Optional[str] = None, seed: int = 1,
          quick: bool = False, workloads: Any = None, own: bool = True) -> Judgement:
    """parity.check of the solution (None: the problem's reference run natively) on the problem's
    op under `contract` (default: the problem's), with the benchmark's own rule beside it. Unless
    quick (or workloads= is given, or own=False), the problem's own workload lines are judged
    too (own_workloads)."""
    import parity
    if contract and contract != problem.contract:
        problem = problem.with_contract(contract)
    t0 = time.perf_counter()
    try:
        call, label = load_solution(problem, solution)
    except Unsupported as e:
        return Judgement(problem, None, {"name": problem.rule["name"], "verdict": "not-run",
                                         "rule": rule_text(problem.rule), "calls": []},
                         solution or "", verdict="unsupported", reason=str(e))
    rec = _Recorder(problem, call, label)
    wl = workloads if workloads is not None else ("quick" if quick else None)
    given: Dict[str, Dict[str, Any]] = {}
    if own and workloads is None and not quick:
        dicts, given, notes = own_workloads(problem, seed)
        if dicts:
            problem = copy.copy(problem)
            problem.notes = problem.notes + notes
            wl = problem.op.workload_names(None) + dicts
    report = parity.check(problem.op, rec, workloads=wl, seed=seed, dtype=problem.dtype, like="torch",
                          progress=rec.progress)
    rule = apply_rule(problem, call, [w.name for w in report.workloads], seed, given, rec)
    j = Judgement(problem, report, rule, label, seconds=time.perf_counter() - t0)
    j.reproduce = _reproduce(problem, solution, seed, quick and workloads is None)
    return j


def _reproduce(problem: Problem, solution: Optional[str], seed: int, quick: bool) -> str:
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
    return " ".join(shlex.quote(c) for c in cmd)


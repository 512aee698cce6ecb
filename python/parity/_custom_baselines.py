"""The baselines matrix for declared ops (parity.check(op, fn, baselines=True)): what
SOL-ExecBench, KernelBench, torch.testing.assert_close, FlashAttention's tests, Composable Kernel,
hipDNN and FlashInfer would say about fn (docs/custom-ops.md, "Baselines"; the rules:
docs/baselines.md). Each rule on its own input scheme at the op's base sizes with its fixed seed,
one plain run of fn (no decoy, no rerun, as those verifiers run a kernel once), then the rule.

The rules are the C library's (src/verify/baseline.c, through parity_custom_baseline_judge in
src/custom/custom_baseline.c), so a parity.Op, a C-declared op and a built-in op are judged by
the same code; so is which rules apply (hipDNN's needs sum |products|, which only a multilinear
reduction defines: n/a otherwise, with the reason), and so are each rule's inputs, fp64
reference, K, sum |terms| and plain low-precision implementation (the declared op's case at
workload "baseline:NAME", python/parity/_declared.py).
Deliberately not here: parity's own judgement (_check.py), running fn (_harness.py)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ._lib import DTYPE_CODE, lib

if TYPE_CHECKING:
    from ._custom import Op

_DT = {n: c for n, c in DTYPE_CODE.items() if n in ("f64", "f32", "bf16", "f16")}  # the rules' output dtypes
_C = ctypes
_VP = _C.c_void_p


def _sig(name: str, res: Any, args: List[Any]) -> Any:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
    return f


_count = _sig("parity_py_baseline_count", _C.c_int, [])
_name = _sig("parity_py_baseline_name", _C.c_char_p, [_C.c_int])
_rule = _sig("parity_py_baseline_rule", _C.c_char_p, [_C.c_int])
_applies = _sig("parity_py_custom_baseline_applies", _C.c_int,
                [_C.c_int, _C.c_int, _VP, _C.c_int, _C.c_char_p, _C.c_size_t])
_case_judge = _sig("parity_py_decl_baseline_judge", _C.c_int,
                   [_VP, _C.c_int, _C.POINTER(_VP), _C.POINTER(_C.c_int), _C.POINTER(_C.c_double),
                    _C.POINTER(_C.c_double), _C.c_char_p, _C.c_size_t])

RULES: List[str] = [_name(b).decode() for b in range(_count())]


def rule_text(b: int) -> str:
    return str(_rule(b).decode())


def applies(op: "Op") -> List[Tuple[bool, str]]:
    """[(applies, why)] per rule, from the C library's parity_custom_baseline_applies."""
    outs = list(op.outputs)
    red = (_C.c_int * len(outs))(*[1 if op.reductions.get(o) else 0 for o in outs])
    res = []
    for b in range(len(RULES)):
        why = _C.create_string_buffer(200)
        ok = _applies(b, len(outs), _C.cast(red, _VP), 1 if op.multilinear else 0, why, 200)
        res.append((bool(ok), why.value.decode()))
    return res


def _judge_rule(b: int, case: Any, outputs: List[Tuple[Any, str]]) -> Dict[str, Any]:
    """Rule b on a run's host outputs [(storage, dtype)] of the declared case built at the rule's
    workload: the C library's parity_custom_baseline_case (src/custom/custom_baseline.c)."""
    views = []
    for i, (a, dt) in enumerate(outputs):
        if dt not in _DT:
            return {"caught": True, "pass_fraction": 0.0, "margin": float("inf"),
                    "detail": "output %s: dtype %s is not judged by the baseline rules" % (case.output_names[i], dt)}
        v = lib.parity_py_output_wrap(case.h, i, dt.encode(), a.ctypes.data)
        if not v:
            raise ValueError("output %s: dtype %s not accepted" % (case.output_names[i], dt))
        views.append(v)
    arr = (_VP * len(views))(*views)
    caught, pf, mg = _C.c_int(), _C.c_double(), _C.c_double()
    detail = _C.create_string_buffer(160)
    try:
        rc = _case_judge(case.h, b, arr, _C.byref(caught), _C.byref(pf), _C.byref(mg), detail, 160)
    finally:
        for v in views:
            lib.parity_py_output_unwrap(v)
    if rc != 0:
        raise ValueError("baseline %s on %s: the rule could not be applied (status %d; at most 8 outputs)" % (
            RULES[b], case.op, -rc))
    return {"caught": bool(caught.value), "pass_fraction": pf.value, "margin": mg.value,
            "detail": detail.value.decode()}


def run(op: "Op", fn: Any, *, dtype: str, like: str, device: Any, isolate: bool = False,
        timeout: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
    """{rule: {"applies", "caught", "pass_fraction", "margin", "rule", "detail"} or
    {"applies": False, "caught": None, "why"}} for fn, every rule in the matrix's order: each
    rule's case built by the C library (workload "baseline:NAME" of the declared op, the rule's
    seed), fn run once by the package's one harness (python/parity/_harness.py, or the isolated
    worker), the rule applied by the C library."""
    from . import _case, _declared, _harness
    key = _declared.decl_of(op).key
    res: Dict[str, Dict[str, Any]] = {}
    worker: Any = None
    try:
        for b, (ok, why) in enumerate(applies(op)):
            rule = RULES[b]
            if not ok:
                res[rule] = {"applies": False, "caught": None, "why": why}
                continue
            try:
                c = _case.Case(key, "baseline:" + rule, 1, dtype)
            except ValueError as e:  # the reference is not defined on these inputs (NaN)
                res[rule] = {"applies": False, "caught": None, "why": str(e)}
                continue
            if isolate:
                from . import _worker
                if worker is None:
                    worker = _worker.Worker()
                out = worker.run(fn, _case.worker_spec(c), c.workload, c.seed, dtype, like, device, False, False,
                                 timeout)
                if out.status in ("crashed", "timeout"):
                    worker.close()
                    worker = None
            else:
                out = _harness.run_in_process(fn, c, like, device, False, False, timeout)
            if out.status != "ran" or out.outputs is None:  # no outputs to judge: a rejection, as the CLI's
                r = {"caught": True, "pass_fraction": 0.0, "margin": float("inf"),
                     "detail": "%s: %s" % (out.status, out.detail)}
            else:
                r = _judge_rule(b, c, out.outputs)
            res[rule] = dict(r, applies=True, rule=rule_text(b))
    finally:
        if worker is not None:
            worker.close()
    return res


def matrix_text(rows: Sequence[Tuple[str, str, Dict[str, Any]]]) -> str:
    """The detection matrix for [(kernel label, parity verdict, baselines dict)], in the layout
    of `parity check --baselines` (src/verify/report.c prints the same for a C-declared op)."""
    w = max([28] + [len(r[0]) for r in rows])
    bw = [max(6, len(n)) for n in RULES]
    lines = ["detection matrix (CAUGHT = the verifier rejects the kernel; for a faithful kernel that is a false "
             "alarm; n/a = the rule cannot apply to this op)",
             "%-*s %-10s" % (w, "kernel", "parity") + "".join(" %-*s" % (bw[i], n) for i, n in enumerate(RULES))]
    for label, verdict, bl in rows:
        cells = ["n/a" if not bl[n]["applies"] else "CAUGHT" if bl[n]["caught"] else "pass" for n in RULES]
        lines.append("%-*s %-10s" % (w, label, "pass" if verdict == "faithful" else "CAUGHT") +
                     "".join(" %-*s" % (bw[i], x) for i, x in enumerate(cells)))
    lines += ["", "baseline rules (each on its own inputs at the op's base sizes and its fixed seed; "
              "docs/custom-ops.md, \"Baselines\"):"]
    bl0 = rows[0][2]
    lines += ["  %-14s %s" % (n, rule_text(b)) for b, n in enumerate(RULES) if bl0[n]["applies"]]
    lines += ["  %-14s n/a: %s" % (n, bl0[n]["why"]) for n in RULES if not bl0[n]["applies"]]
    return "\n".join(lines) + "\n"

"""parity.problems: integer outputs judged exactly (issue #37: argmax, top-k indices, sampled ids;
docs/problems.md, "Integer outputs").

parity's engine judges floats against a tolerance; an index has none: it is right or wrong. The
rule: on each judged workload's inputs (the inputs the solution was given), the reference's
integer outputs are computed twice, by the fp64 oracle (every float promoted to float64) and by
the reference in its own dtypes. An element is accepted when the solution's value equals either.
So a tie, or a near-tie that the rounding of the native evaluation resolves differently from the
exact one, is accepted when the solution resolves it as one of the two references does. Any
other difference is a difference: in particular, two indices of exactly equal values that
neither reference picks (a kernel breaking ties toward the last index where torch picks the
first) count, since the reference states its tie order and a downstream gather would differ."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ._problem_core import Problem
from ._problem_oracle import _torch

RULE = ("exact: each element equals the fp64 oracle's or the native reference's "
        "(ties accepted when resolved as one of them)")


def _as_tensor(t: Any) -> Any:
    torch = _torch()
    if isinstance(t, torch.Tensor):
        return t.detach().cpu()
    import numpy as np
    return torch.from_numpy(np.ascontiguousarray(np.asarray(t)))


def _index(flat: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    idx = []
    for n in reversed(shape):
        idx.append(flat % n if n else 0)
        flat = flat // n if n else 0
    return tuple(reversed(idx))


def compare(name: str, dtype: str, got: Any, oracle: Any, native: Any, workload: str = "") -> Dict[str, Any]:
    """One integer output on one workload: {pass, differ, elements, ties (where the oracle and
    the native reference disagree, both accepted), first {index, got, oracle, native}, detail}."""
    torch = _torch()
    g, o, n = _as_tensor(got), _as_tensor(oracle), _as_tensor(native)
    name = "%s on %s" % (name, workload) if workload else name
    res: Dict[str, Any] = {"pass": False, "differ": 0, "elements": int(o.numel()), "ties": 0}
    if g.is_floating_point() or g.is_complex():
        res["detail"] = "%s is returned as %s; the problem declares %s (an integer output)" % (
            name, str(g.dtype).replace("torch.", ""), dtype)
        return res
    if tuple(g.shape) != tuple(o.shape):
        res["detail"] = "%s has shape %s, expected %s" % (name, tuple(g.shape), tuple(o.shape))
        return res
    g64 = g.to(torch.int64)
    o64 = o.to(torch.int64) if not o.is_floating_point() else o.round().to(torch.int64)
    n64 = n.to(torch.int64) if not n.is_floating_point() else n.round().to(torch.int64)
    if tuple(n64.shape) != tuple(o64.shape):  # the native run disagrees on the shape: the oracle's alone
        n64 = o64
    bad = (g64 != o64) & (g64 != n64)
    res["differ"] = int(bad.sum())
    res["ties"] = int((o64 != n64).sum())
    if res["differ"] == 0:
        res["pass"] = True
        res["detail"] = "%s: all %d elements match%s" % (name, res["elements"], (
            " (%d where the oracle and the native reference differ, either accepted)" % res["ties"]
            if res["ties"] else ""))
        return res
    flat = int(bad.reshape(-1).nonzero()[0, 0])
    at = _index(flat, tuple(o64.shape))
    got_, ora, nat = int(g64.reshape(-1)[flat]), int(o64.reshape(-1)[flat]), int(n64.reshape(-1)[flat])
    res["first"] = {"index": list(at), "got": got_, "oracle": ora, "native": nat}
    res["detail"] = "%s: %d of %d elements differ; first at %s: got %d, oracle %d%s" % (
        name, res["differ"], res["elements"], at, got_, ora, "" if nat == ora else " (native %d)" % nat)
    return res


def judge_ints(problem: Problem, calls: List[Tuple[str, Optional[Dict[str, Any]], Optional[List[Any]], str]]
               ) -> Dict[str, Any]:
    """The integer outputs of every judged call (_problem_rules.judged_calls: workload, inputs,
    the solution's outputs, error) against the fp64 oracle and the native reference on the same
    inputs. Returns {verdict: faithful | unfaithful | crashed, rule, outputs, calls: [{workload,
    output, pass, differ, elements, ties, first, detail}]}."""
    names = problem.int_outputs
    pos = {o: i for i, o in enumerate(problem.outputs)}
    rows: List[Dict[str, Any]] = []
    crashed = False
    for w, args, outs, err in calls:
        if outs is None or args is None:
            crashed = True
            rows.append({"workload": w, "output": "", "pass": False,
                         "detail": "the solution raised on %s: %s" % (w, err)})
            continue
        oracle = problem._run_reference("f64", problem._torch_args(args, "f64"))
        native = problem.native(args)
        for o in names:
            i = pos[o]
            if i >= len(outs):
                rows.append({"workload": w, "output": o, "pass": False, "detail": "%s on %s is not returned" % (o, w)})
                continue
            r = compare(o, problem.outputs[o]["dtype"], outs[i], oracle[i], native[i], w)
            rows.append(dict({"workload": w, "output": o}, **r))
    if crashed:
        verdict = "crashed"
    elif rows and all(r["pass"] for r in rows):
        verdict = "faithful"
    else:
        verdict = "unfaithful"
    return {"verdict": verdict, "rule": RULE, "outputs": names, "calls": rows}


# the combined verdict: faithful < unfaithful < every harness verdict (crashed, modified-inputs,
# stale-cache, nondeterministic, ...), which says more about the solution than a wrong value
def _rank(v: str) -> int:
    return {"faithful": 0, "unfaithful": 1}.get(v, 2)


def combine(float_verdict: Optional[str], int_verdict: Optional[str]) -> str:
    """faithful only when both parts are (an absent part counts as faithful); else the worse one,
    the float part's when they rank alike (its harness verdict names what happened)."""
    parts = [v for v in (float_verdict, int_verdict) if v is not None]
    if not parts:
        return "faithful"
    return max(parts, key=_rank)

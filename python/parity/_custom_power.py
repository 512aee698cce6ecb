"""The power self-test of a declared op: generic mutants built from the op's own reference,
judged with the tolerance parity derived, so a user sees what that tolerance catches before
trusting it (docs/custom-ops.md, "The power self-test"). The mutants are outputs, not functions:
they skip the harness (decoy, rerun) and go straight to the judge -- the C library's, through
parity.compare on the case parity.inputs built (python/parity/_declared.py), so the power
self-test measures the very tolerance parity.check applies."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ._custom import Op, _is_float
from ._declared import by_name

Mutant = Tuple[str, Optional[Dict[str, Any]], Optional[str]]


class _Eval:
    """One workload's inputs (built by the C library: parity.inputs) as float64 values, and the
    op's reference evaluated on any arrays: what the mutants are made from."""

    def __init__(self, op: Op, workload: str, seed: int, dtype: str) -> None:
        from ._case import inputs
        self.op, self.dtype = op, dtype
        self.x = inputs(op, workload, seed=seed, dtype=dtype, like="numpy")
        self.workload = self.x.workload
        self.exact: Dict[str, Any] = {}
        self.sizes: Dict[str, int] = {d: int(s[0]) for d, s in op.shapes.items()}
        for k, x in op.inputs.items():
            a = np.asarray(self.x[k])
            if x.is_float and dtype == "bf16":
                a = (a.astype(np.uint32) << 16).view(np.float32)
            self.exact[k] = a.astype(np.float64) if x.is_float else a.astype(np.int64)
            self.sizes.update(zip(x.shape, a.shape))
        self.out_shapes = {o: tuple(self.sizes[d] for d in s) for o, s in op.outputs.items()}

    def evaluate(self, arrays: Dict[str, Any]) -> Dict[str, Any]:
        """The reference on arrays, its outputs promoted to the float inputs' dtype where
        narrower (a reference ending in parity.round_to)."""
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            res = by_name(self.op.reference(**arrays, **self.op.attrs), list(self.op.outputs), self.op.name)
        fl = [np.asarray(arrays[k]).dtype for k, x in self.op.inputs.items() if x.is_float]
        want = fl[0] if fl else np.dtype(np.float64)
        out = {}
        for o, a in res.items():
            a = np.asarray(a)
            if a.dtype != want and a.dtype.itemsize < want.itemsize and _is_float(a.dtype) and _is_float(want):
                a = a.astype(want)
            out[o] = a
        return out

    def contract_eval(self, cast: Any = np.float32, inputs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        src = self.exact if inputs is None else inputs
        return self.evaluate({k: (src[k].astype(cast) if x.is_float else src[k]) for k, x in self.op.inputs.items()})


def _lower(x: Any, dtype: str) -> Tuple[Any, str]:
    """Inputs one format lower than the contract dtype: f32 -> tf32, f16 -> e5m2, bf16 ->
    e4m3fn (saturating, so that large values stay finite)."""
    from ._formats import round_f64 as _r
    fmt, sat = {"f32": ("tf32", None), "f16": ("e5m2", None), "bf16": ("e4m3fn", True)}.get(dtype, ("bf16", None))
    return _r(x, fmt, saturate=sat), fmt


def _bf16_type() -> Any:
    try:
        import ml_dtypes
        return ml_dtypes.bfloat16
    except ImportError:  # pragma: no cover
        return None


def _seq_accum(case: _Eval, o: str, fmt: str) -> Any:
    """A sequential accumulator in `fmt` over the declared reduction dims, with fp32 terms: for a
    multilinear op the reference on one slice of the reduced dimension is that slice's term, so
    acc = round_fmt(acc + round_f32(term_t)) for t = 0..k-1 is exactly what a kernel with a
    narrow accumulator computes (the reduced dims are walked in C order)."""
    from ._formats import round_f64 as _r
    op = case.op
    dims = op.reductions[o]
    sizes = [case.sizes[d] for d in dims]
    acc = np.zeros(case.out_shapes[o])
    for flat in range(int(np.prod(sizes))):
        pos = dict(zip(dims, np.unravel_index(flat, sizes)))
        sl = {}
        for k, x in op.inputs.items():
            a = case.exact[k]
            if x.is_float:
                idx = tuple(slice(pos[d], pos[d] + 1) if d in pos else slice(None) for d in x.shape)
                b = np.zeros_like(a)
                b[idx] = a[idx]
                a = b
            sl[k] = a
        term = case.evaluate(sl)[o].astype(np.float32).astype(np.float64)
        acc = _r(acc + term, fmt)
    return acc


def mutants(case: _Eval) -> Dict[str, Mutant]:
    """{name: (description, outputs or None, why-not)} for one case."""
    op, dt = case.op, case.dtype
    out: Dict[str, Mutant] = {}
    out["control"] = ("the reference in fp32 (a faithful evaluation: must pass)", case.contract_eval(), None)
    if op.multilinear and op.reductions:
        res = {o: (_seq_accum(case, o, "bf16") if o in op.reductions else case.contract_eval()[o]) for o in op.outputs}
        out["bf16-accum"] = ("sequential bf16 accumulator over the declared reduction, fp32 terms", res, None)
        res = {o: (_seq_accum(case, o, "fp16") if o in op.reductions else case.contract_eval()[o]) for o in op.outputs}
        out["fp16-accum"] = ("sequential fp16 accumulator over the declared reduction, fp32 terms", res, None)
    elif getattr(op.reference, "runs_in_c", False):  # a C reference (_custom_plugin.py): F64/F32 only
        from ._formats import round_f64 as _r
        good = case.contract_eval()
        for nm, ofmt in (("bf16-out", "bf16"), ("fp16-out", "fp16")):  # as the C power self-test
            out[nm] = ("the reference in fp32, its result rounded to %s" % ofmt,
                       {o: _r(a, ofmt) for o, a in good.items()}, None)
    else:
        bt = _bf16_type()
        if bt is None:
            out["bf16-math"] = ("", None, "ml_dtypes is not installed")
        else:
            with np.errstate(all="ignore"):
                out["bf16-math"] = ("the reference with every numpy op in bf16 (ml_dtypes)", case.contract_eval(bt), None)
        with np.errstate(all="ignore"):
            out["fp16-math"] = ("the reference with every numpy op in fp16 (numpy float16)", case.contract_eval(np.float16), None)
    low: Dict[str, Any] = {}
    fmt: Optional[str] = None
    for k, x in op.inputs.items():
        if x.is_float:
            low[k], fmt = _lower(case.exact[k], dt)
        else:
            low[k] = case.exact[k]
    out["inputs-lower"] = ("float inputs rounded to %s, then fp32 math" % fmt, case.contract_eval(inputs=low), None)
    good = case.contract_eval()
    first = list(op.outputs)[0]
    r = {o: a.copy() for o, a in good.items()}
    if r[first].ndim >= 2:
        r[first][..., -1, :] = 0
        out["row-dropped"] = ("the last row of %s left zero" % first, r, None)
    else:
        out["row-dropped"] = ("", None, "output %s has no rows" % first)
    c = {o: a.copy() for o, a in good.items()}
    if c[first].ndim >= 1 and c[first].shape[-1] > 1:
        c[first][..., -1] = 0
        out["col-dropped"] = ("the last column of %s left zero" % first, c, None)
    else:
        out["col-dropped"] = ("", None, "output %s has one column" % first)
    if op.reductions:
        dims = set(d for ds in op.reductions.values() for d in ds)
        t = {}
        for k, x in op.inputs.items():
            a = case.exact[k].copy()
            if x.is_float:
                for d in dims & set(x.shape):
                    idx = [slice(None)] * a.ndim
                    idx[x.shape.index(d)] = slice(-1, None)
                    a[tuple(idx)] = 0
            t[k] = a
        out["tail-dropped"] = ("the last index of %s dropped (its inputs zeroed)" % "/".join(sorted(dims)),
                               case.contract_eval(inputs=t), None)
    else:
        out["tail-dropped"] = ("", None, "no reduction declared")
    return out


class PowerTable:
    """rows: [{mutant, description, workload, caught (bool or None), err_over_tol, why_not}]."""

    def __init__(self, op: Op, rows: List[Dict[str, Any]]) -> None:
        self.op = op
        self.rows = rows

    def caught(self, mutant: str) -> Union[None, bool, str]:
        """True if every workload where the mutant exists catches it, False if none does,
        "partly" otherwise, None if it does not apply."""
        c = [r["caught"] for r in self.rows if r["mutant"] == mutant and r["caught"] is not None]
        if not c:
            return None
        return True if all(c) else False if not any(c) else "partly"

    def __str__(self) -> str:
        ws = list(dict.fromkeys(r["workload"] for r in self.rows))
        ms = list(dict.fromkeys(r["mutant"] for r in self.rows))
        cell = {(r["mutant"], r["workload"]): r for r in self.rows}
        head = "power self-test of %s (err/tol per workload; caught when > 1; control must be <= 1)" % self.op.name
        lines = [head, "  %-13s" % "mutant" + "".join("%18s" % w for w in ws)]
        for m in ms:
            s = "  %-13s" % m
            for w in ws:
                r = cell.get((m, w))
                if r is None or r["caught"] is None:
                    s += "%18s" % "n/a"
                else:
                    q = r["err_over_tol"]
                    s += "%18s" % (("%.3g" % q) + ("  CAUGHT" if q > 1 else "  missed") if m != "control" else
                                   ("%.3g" % q) + ("  ok" if q <= 1 else "  FAIL"))
            lines.append(s)
        notes = dict.fromkeys("  %s: %s" % (r["mutant"], r["description"] or r["why_not"]) for r in self.rows)
        return "\n".join(lines + [""] + list(notes))

    def to_dict(self) -> Dict[str, Any]:
        return {"op": self.op.name, "rows": self.rows}


def power(op: Op, *, workloads: Any = "quick", seed: int = 1, dtype: str = "f32") -> PowerTable:
    """The power self-test: every generic mutant on every workload, judged with the derived
    tolerance. Returns a PowerTable (str() prints it)."""
    from ._check import compare
    rows: List[Dict[str, Any]] = []
    for w in op.workload_names(workloads):
        case = _Eval(op, w, seed, dtype)
        for m, (desc, outs, why) in mutants(case).items():
            if outs is None:
                rows.append({"mutant": m, "description": desc, "workload": case.workload, "caught": None,
                             "err_over_tol": None, "why_not": why})
                continue
            r = compare(op, case.x, {o: np.asarray(a, dtype=np.float64).astype(np.float32)
                                     if np.asarray(a).dtype != np.float32 else a for o, a in outs.items()})
            q = r.workloads[0].err_over_tol
            q = float("inf") if q is None or q != q else q
            rows.append({"mutant": m, "description": desc, "workload": case.workload, "caught": bool(q > 1),
                         "err_over_tol": q, "why_not": None})
    return PowerTable(op, rows)

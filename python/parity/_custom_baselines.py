"""The baselines matrix for declared ops (parity.check(op, fn, baselines=True)): what
SOL-ExecBench, KernelBench, torch.testing.assert_close, FlashAttention's tests, Composable Kernel,
hipDNN and FlashInfer would say about fn (docs/custom-ops.md, "Baselines"; the rules:
docs/baselines.md). Each rule on its own input scheme at the op's base sizes with its fixed seed,
one plain run of fn (no decoy, no rerun, as those verifiers run a kernel once), then the rule.

The rules are the C library's (src/verify/baseline.c, through parity_custom_baseline_judge in
src/custom/custom_baseline.c), so a parity.Op, a C-declared op and a built-in op are judged by
the same code; so is which rules apply (hipDNN's needs sum |products|, which only a multilinear
reduction defines: n/a otherwise, with the reason). What is computed here: the inputs (numpy's
generator, as every parity.Op workload), the fp64 reference, K, sum |terms| and the plain
low-precision implementation (the reference evaluated in fp32).
Deliberately not here: parity's own judgement (_custom.py), running fn (_custom_run.py)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _arrays
from ._lib import lib

if TYPE_CHECKING:
    from ._custom import CustomCase, Input, Op

_DT = {"f64": 0, "f32": 1, "bf16": 2, "f16": 3}
_C = ctypes
_VP = _C.c_void_p


def _sig(name: str, res: Any, args: List[Any]) -> Any:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
    return f


_count = _sig("parity_py_baseline_count", _C.c_int, [])
_name = _sig("parity_py_baseline_name", _C.c_char_p, [_C.c_int])
_rule = _sig("parity_py_baseline_rule", _C.c_char_p, [_C.c_int])
_seed = _sig("parity_py_custom_baseline_seed", _C.c_uint64, [_C.c_int])
_applies = _sig("parity_py_custom_baseline_applies", _C.c_int,
                [_C.c_int, _C.c_int, _VP, _C.c_int, _C.c_char_p, _C.c_size_t])
_judge = _sig("parity_py_custom_baseline_judge", _C.c_int,
              [_C.c_int, _C.c_char_p, _C.c_int, _C.c_int, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP,
               _C.POINTER(_C.c_int), _C.POINTER(_C.c_double), _C.POINTER(_C.c_double), _C.c_char_p,
               _C.c_size_t])

RULES: List[str] = [_name(b).decode() for b in range(_count())]
# The input scheme of each rule (docs/baselines.md: SOL-ExecBench randn with norm weights all
# ones, KernelBench torch.rand, Composable Kernel integers in [-4, 4], the others torch.randn);
# the float roles are not those verifiers' concern, so they are ignored, but a mask stays a 0/1
# mask and token ids are uniform.
_SCHEME = {"sol-execbench": "sol", "kernelbench": "rand01", "ck": "int"}


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


def _values(x: "Input", shape: Tuple[int, ...], scheme: str, rng: np.random.Generator,
            sizes: Dict[str, int]) -> Any:
    n = int(np.prod(shape, dtype=np.int64))
    if x.role == "token_ids":
        return rng.integers(0, sizes[x.vocab], n).astype(np.int64).reshape(shape)
    if x.role == "mask":
        return (rng.random(n) < 0.9).astype(np.float64).reshape(shape)
    if scheme == "rand01":
        return rng.random(n).reshape(shape)
    if scheme == "int":
        return rng.integers(-4, 5, n).astype(np.float64).reshape(shape)
    if scheme == "sol" and x.role == "norm_weight":
        return np.ones(shape)
    return rng.standard_normal(n).reshape(shape)


def case(op: "Op", rule: str, dtype: str) -> "CustomCase":
    """The CustomCase of one rule's input scheme (raises ValueError when the reference is not
    defined on it)."""
    from . import _custom
    b = RULES.index(rule)
    sizes = op.workloads()[0][1]  # the base sizes
    storage: Dict[str, Any] = {}
    for k, x in op.inputs.items():
        shape = tuple(sizes[d] for d in x.shape)
        v = _values(x, shape, _SCHEME.get(rule, "randn"), _custom._rng(_seed(b), op.name, "baseline:" + rule, k), sizes)
        storage[k] = _custom._round_to(v, dtype)[1] if x.is_float else v
    return _custom.CustomCase(op, {"name": "baseline:" + rule, "inputs": storage}, _seed(b), dtype)


def _plain(c: "CustomCase") -> Optional[Dict[str, Any]]:
    """The reference evaluated in fp32 on the case's inputs (FlashAttention's out_pt before its
    rounding to the input dtype), or None when the reference does not keep the dtype."""
    try:
        got = c.contract_eval()
    except Exception:  # a reference that fails in fp32 has no plain fp32 implementation
        return None
    if any(np.asarray(a).dtype == np.float64 for a in got.values()):
        return None
    return {o: np.ascontiguousarray(a, dtype=np.float64) for o, a in got.items()}


def _ptrs(arrs: Sequence[Any]) -> Any:
    return _C.cast((_VP * len(arrs))(*[None if a is None else a.ctypes.data for a in arrs]), _VP)


def _judge_rule(b: int, c: "CustomCase", outs: Dict[str, Any]) -> Dict[str, Any]:
    op = c.op
    names = list(op.outputs)
    ref = [np.ascontiguousarray(c.ref[o], dtype=np.float64) for o in names]
    cols = np.array([r.shape[-1] if r.ndim else 1 for r in ref], np.int64)
    rows = np.array([r.size // cl if cl else 0 for r, cl in zip(ref, cols)], np.int64)
    k = np.array([int(np.prod([c.sizes[d] for d in op.reductions.get(o, [])], dtype=np.int64)) for o in names],
                 np.int64)
    s_acc = [None if c.s_acc.get(o) is None else np.ascontiguousarray(c.s_acc[o], np.float64) for o in names]
    plain = _plain(c) if RULES[b] == "flash-attn" else None
    pl = None if plain is None else [plain[o] for o in names]
    host: List[Any] = []
    odts: List[int] = []
    for o in names:
        a, dt = _arrays.to_host(outs[o])
        if dt not in _DT:
            return {"caught": True, "pass_fraction": 0.0, "margin": float("inf"),
                    "detail": "output %s: dtype %s is not judged by the baseline rules" % (o, dt)}
        if tuple(a.shape) != c.out_shapes[o]:
            return {"caught": True, "pass_fraction": 0.0, "margin": float("inf"),
                    "detail": "crashed: output %s has shape %s, expected %s" % (o, a.shape, c.out_shapes[o])}
        host.append(np.ascontiguousarray(a))
        odts.append(_DT[dt])
    odt = np.array(odts, np.int32)
    caught, pf, mg = _C.c_int(), _C.c_double(), _C.c_double()
    detail = _C.create_string_buffer(160)
    rc = _judge(b, op.name.encode(), _DT[c.dtype], len(names), rows.ctypes.data, cols.ctypes.data, k.ctypes.data,
                _ptrs(ref), _ptrs(s_acc), None if pl is None else _ptrs(pl), odt.ctypes.data, _ptrs(host),
                _C.byref(caught), _C.byref(pf), _C.byref(mg), detail, 160)
    if rc != 0:
        raise ValueError("baseline %s on %s: the rule could not be applied (status %d; at most 8 outputs)" % (
            RULES[b], op.name, -rc))
    return {"caught": bool(caught.value), "pass_fraction": pf.value, "margin": mg.value,
            "detail": detail.value.decode()}


def run(op: "Op", fn: Any, *, dtype: str, like: str, device: Any, isolate: bool = False,
        timeout: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
    """{rule: {"applies", "caught", "pass_fraction", "margin", "rule", "detail"} or
    {"applies": False, "caught": None, "why"}} for fn, every rule in the matrix's order."""
    from . import _custom, _custom_run
    res: Dict[str, Dict[str, Any]] = {}
    worker: Any = None
    try:
        for b, (ok, why) in enumerate(applies(op)):
            rule = RULES[b]
            if not ok:
                res[rule] = {"applies": False, "caught": None, "why": why}
                continue
            try:
                c = case(op, rule, dtype)
            except ValueError as e:  # the reference is not defined on these inputs (NaN)
                res[rule] = {"applies": False, "caught": None, "why": str(e)}
                continue
            spec = _custom_run.spec_of(c)
            if isolate:
                from . import _worker
                if worker is None:
                    worker = _worker.Worker()
                ex = worker.run_custom(fn, spec, like, device, False, timeout)
                if ex["status"] in ("crashed", "timeout"):
                    worker.close()
                    worker = None
            else:
                ex = _custom_run.execute(fn, spec, like, device, False)
            if ex["status"] != "ran":  # no outputs to judge: a rejection, as the CLI's
                r = {"caught": True, "pass_fraction": 0.0, "margin": float("inf"),
                     "detail": "%s: %s" % (ex["status"], ex.get("detail", ""))}
            else:
                r = _judge_rule(b, c, _custom._normalise(ex["outputs"], op))
            res[rule] = dict(r, applies=True, rule=rule_text(b))
    finally:
        if worker is not None:
            worker.close()
    return res


def matrix_text(rows: Sequence[Tuple[str, str, Dict[str, Any]]]) -> str:
    """The detection matrix for [(kernel label, parity verdict, baselines dict)], in the layout
    of `parity check --baselines` (programs/cmd_check_declared.c prints the same for a C op)."""
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

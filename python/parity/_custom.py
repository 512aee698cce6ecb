"""User-declared ops: parity.Op / parity.Input, workloads made from the inputs' roles, tolerances
derived from the declaration (docs/custom-ops.md), and a Python harness that judges a function
against the op's fp64 reference.

Deliberately not here: running the function (python/parity/_custom_run.py, in process or in the
isolate=True worker), the baselines matrix (python/parity/_custom_baselines.py). C plugins declare ops through
include/parity/op_abi.h, judged by src/custom_*.c to the same formulas. The judging is done in numpy float64 in
Python, not by the C library (its judge takes only the ops compiled into it); the error-model
formulas are the C library's (src/verify/verify.c) re-stated in Python.
"""
from __future__ import annotations

import json
import math
import zlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._errors import ProblemError
from ._report import Report

Sizes = Dict[str, int]


class _ProblemTypeError(ProblemError, TypeError):
    """A declaration of the wrong type (an input that is not a parity.Input): a ProblemError, and
    the TypeError it was before parity.ProblemError existed."""
Workload = Tuple[str, Sizes, bool, str]

ROLES = ("token_ids", "activation", "gradient", "weight", "norm_weight", "logits", "mask")

# Unit roundoff u and smallest subnormal spacing of each dtype (src/verify/verify.c dtype_precision).
_U = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "bf16": 2.0 ** -8, "f16": 2.0 ** -11}
_TINY = {"f64": 2.0 ** -1074, "f32": 2.0 ** -149, "bf16": 2.0 ** -133, "f16": 2.0 ** -24}
_BITS = {"f32": 24, "bf16": 8, "f16": 11}  # significand bits (with the implicit one)
# Failure probability of a faithful kernel per output per workload, as the built-in ops
# (PARITY_ALPHA, docs/error-model.md): lambda = sqrt(2 ln(2 n M / alpha)).
ALPHA = 1e-6
# The empirical floor's minimum, in units of u|ref|: one last operation of a faithful kernel, at
# the 2-ulp error bound that CUDA documents for its single-precision expf, sinf, cosf, powf
# (CUDA C++ Programming Guide, "Mathematical Functions"; glibc's are within 1 ulp), and one ulp
# is at most 2u|y|: 2 x 2u = 4u. Measured need: logf's 1-ulp difference on log_softmax rows whose
# numpy fp32 evaluation is exact (docs/custom-ops.md).
MIN_ROUNDINGS = 4.0
# A faithful kernel need not use the reference's formula (1/base**t vs base**-t for rotary
# frequencies, x*sigmoid(x) vs x/(1+exp(-x))): allowing up to 4x the roundings per element of
# the reference as written, whose random errors grow like their square root (Higham & Mary's
# probabilistic bound), is a factor sqrt(4) = 2 on the error scale -- FlashAttention's factor 2,
# with this as its derivation (docs/custom-ops.md).
FORMULA_FACTOR = 2.0


class Input:
    """One input of a declared op: `shape`, a tuple of dimension names ("N", "H"); `role`, one of
    ROLES (what its values look like, docs/custom-ops.md "Roles"); `vocab`, for token ids, the
    name of the dimension that bounds them (default "V")."""

    def __init__(self, shape: Sequence[str], role: str = "activation", *, vocab: str = "V") -> None:
        if role not in ROLES:
            raise ProblemError("role %r: expected one of %s" % (role, ", ".join(ROLES)))
        self.shape: Tuple[str, ...] = tuple(shape)
        self.role = role
        self.vocab = vocab
        self.is_float = role != "token_ids"

    def __repr__(self) -> str:
        return "Input(%r, role=%r)" % (self.shape, self.role)


class Op:
    """A user-declared op (docs/custom-ops.md).

    name; inputs {name: Input}; outputs {name: shape tuple}; reference(**inputs, **attrs), a
    function on float64 numpy arrays (token ids as int64) returning one array, a tuple in the
    outputs' order or a dict -- written with numpy functions that keep the dtype of their
    arguments, so that parity can also evaluate it in the contract precision (float32);
    shapes {dim: [sizes]} (the first size is the base workload's, the largest a production one);
    attrs {name: value} passed to the reference and to the candidate; reductions {output: [dims]}
    the input dimensions summed into each output, or None; multilinear: whether the op is
    linear in each float input separately (default: True when reductions are declared) -- only
    then the built-in error model applies (parity checks the declaration on every workload)."""

    def __init__(self, name: str, *, inputs: Mapping[str, "Input"], outputs: Mapping[str, Sequence[str]],
                 reference: Callable[..., Any], shapes: Mapping[str, Union[int, Sequence[int]]],
                 attrs: Optional[Mapping[str, Any]] = None,
                 reductions: Optional[Mapping[str, Sequence[str]]] = None,
                 multilinear: Optional[bool] = None, fixed: Iterable[str] = ()) -> None:
        self.name = name
        self.description = ""
        self.inputs: Dict[str, Input] = dict(inputs)
        self.outputs: Dict[str, Tuple[str, ...]] = {k: tuple(v) for k, v in dict(outputs).items()}
        self.reference = reference
        self.shapes: Dict[str, List[int]] = {k: [int(x) for x in v] if isinstance(v, (list, tuple))
                                             else [int(v)]  # type: ignore[arg-type]
                                             for k, v in shapes.items()}
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.reductions: Dict[str, List[str]] = {k: list(v) for k, v in (reductions or {}).items()}
        self.multilinear = bool(self.reductions) if multilinear is None else bool(multilinear)
        self.fixed = tuple(fixed)  # dims the "odd" workload leaves alone (an even head dim)
        for k, x in self.inputs.items():
            if not isinstance(x, Input):
                raise _ProblemTypeError("input %s: expected parity.Input, got %r" % (k, x))
        dims = set(d for x in self.inputs.values() for d in x.shape) | \
            set(d for s in self.outputs.values() for d in s) | \
            set(x.vocab for x in self.inputs.values() if x.role == "token_ids")
        missing = dims - set(self.shapes)
        if missing:
            raise ProblemError("op %s: no size for dimension(s) %s in shapes=" % (name, ", ".join(sorted(missing))))
        for o, ds in self.reductions.items():
            if o not in self.outputs:
                raise ProblemError("reductions: %s is not an output" % o)
            for d in ds:
                if self.multilinear and d in self.outputs[o]:
                    raise ProblemError("reductions: %s is a dimension of output %s, so it is not summed into it" % (d, o))

    def __repr__(self) -> str:
        return "parity.Op(%r, inputs=%s, outputs=%s)" % (self.name, list(self.inputs), list(self.outputs))

    @classmethod
    def from_plugin(cls, path: str, name: Optional[str] = None) -> "Op":
        """The op `name` (None: its only one) that the C plugin at path declares (op_abi.h), as a
        parity.Op whose reference runs in C (python/parity/_custom_plugin.py)."""
        from ._custom_plugin import from_plugin
        return from_plugin(path, name)

    # -- workloads ---------------------------------------------------------------------------
    def workloads(self) -> List[Workload]:
        """[(name, dims, production, value variant)]: the workloads made from the roles."""
        base = {d: int(s[0]) for d, s in self.shapes.items()}
        roles = set(x.role for x in self.inputs.values())
        out: List[Workload] = [("base", base, False, "base")]
        if "token_ids" in roles:
            out.append(("zipf", base, False, "zipf"))
            out.append(("text", base, False, "text"))
        if "activation" in roles:
            out.append(("outlier-ch", base, False, "outlier"))
        odd = {d: (s if d in self.fixed else s + 1 if s % 2 == 0 else s + 2) for d, s in base.items()}
        out.append(("odd", odd, False, "base"))
        out.append(("magnitude", base, False, "magnitude"))
        prod = {d: int(max(s)) for d, s in self.shapes.items()}
        if prod != base:
            out.append(("production", prod, True, "base"))
        return out

    def workload_names(self, which: Any) -> List[Any]:
        ws = self.workloads()
        if which is None:
            return [w[0] for w in ws]
        if which == "quick":
            return [w[0] for w in ws if not w[2]]
        if isinstance(which, (str, dict)):
            return [which]
        return list(which)


def _rng(seed: int, *names: Any) -> np.random.Generator:
    ent = [int(seed)] + [zlib.crc32(str(n).encode()) for n in names]
    return np.random.default_rng(np.random.SeedSequence(ent))


def _values(x: Input, shape: Tuple[int, ...], variant: str, rng: np.random.Generator, dtype: str,
            sizes: Sizes) -> Any:
    """Float64 values for one input (before rounding to the contract dtype)."""
    n = int(np.prod(shape, dtype=np.int64))
    rows = shape[0] if shape else 1
    if x.role == "token_ids":
        v = sizes[x.vocab]
        if variant == "text":
            return _text_ids(n, v, seed_of(rng)).reshape(shape)
        if variant == "zipf":  # Zipf s = 1.1 over the vocabulary by inverse CDF (word-frequency-like)
            p = 1.0 / np.arange(1, v + 1, dtype=np.float64) ** 1.1
            c = np.cumsum(p / p.sum())
            ids = np.minimum(np.searchsorted(c, rng.random(n)), v - 1)
            ids = rng.permutation(v)[ids]  # frequent tokens are not the lowest ids
        else:
            ids = rng.integers(0, v, n)
        return ids.astype(np.int64).reshape(shape)
    if x.role == "mask":
        return (rng.random(n) < 0.9).astype(np.float64).reshape(shape)
    a = rng.standard_normal(n).reshape(shape)
    if x.role == "gradient":  # one magnitude 10^U(-6,-3) per row, as parity's gradient scale
        a *= 10.0 ** rng.uniform(-6, -3, (rows,) + (1,) * (len(shape) - 1))
    elif x.role == "weight":
        a *= 0.02
    elif x.role == "norm_weight":
        a = 1.0 + 0.1 * a
    elif x.role == "logits":  # LM-like: spread 3, a few confident tokens per row
        a *= 3.0
        if len(shape) >= 1 and shape[-1] > 0:
            flat = a.reshape(-1, shape[-1])
            hot = rng.integers(0, shape[-1], (flat.shape[0], 2))
            np.put_along_axis(flat, hot, 15.0 + rng.standard_normal(hot.shape), axis=1)
    if variant == "outlier" and x.role == "activation" and shape:
        ch = rng.choice(shape[-1], size=min(4, shape[-1]), replace=False)  # LLM.int8-style channels
        a[..., ch] *= 80.0
    if variant == "magnitude" and len(shape) >= 2:  # exact power-of-two scale per row: exponent
        # stress (vectors -- a norm's gamma, a bias -- keep their values: they have no rows)
        e = 6 if dtype == "f16" else 24
        a *= 2.0 ** rng.integers(-e, e + 1, (rows,) + (1,) * (len(shape) - 1))
    return a


def seed_of(rng: np.random.Generator) -> int:
    return int(rng.integers(1, 2 ** 31))


def _text_ids(n: int, v: int, seed: int) -> Any:
    """n token ids of real text: the GPT-2 ids of parity's text corpus (the embedding ops' `text`
    workload, the C library's own generator), relabelled by frequency rank within the sample so
    that the most frequent token is 0, and folded into [0, v) by rank modulo v when v is smaller
    than the number of distinct tokens (only rare tokens fold)."""
    from . import _case
    x = _case.inputs("embedding_bwd", "text@%dx1x50257" % n, seed=seed, dtype="f32", like="numpy")
    ids = np.asarray(x["ids"], dtype=np.int64).copy()
    uniq, inv, counts = np.unique(ids, return_inverse=True, return_counts=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(len(uniq))
    return rank[inv] % v


def _round_to(a: Any, dtype: str) -> Tuple[Any, Any]:
    """Float64 values rounded to dtype, returned as float64 (exact) and as storage."""
    if dtype == "f64":
        return a.copy(), a.astype(np.float64)
    if dtype == "f32":
        s = a.astype(np.float32)
        return s.astype(np.float64), s
    if dtype == "f16":
        s = a.astype(np.float16)
        return s.astype(np.float64), s
    if dtype == "bf16":
        from ._formats import round_bits
        bits = round_bits(a, "bf16").astype(np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), bits
    raise ValueError("dtype %r: expected f32, bf16, f16 or f64" % dtype)


class CustomCase:
    """One workload of a declared op: inputs (storage and exact float64), attrs, the fp64
    reference and the per-element tolerance of every output."""

    def __init__(self, op: Op, workload: Any, seed: int, dtype: str) -> None:
        self.op = op
        self.seed = int(seed)
        self.dtype = dtype
        self.attrs = dict(op.attrs)
        if isinstance(workload, dict):  # inputs given by the caller (the built-in comparisons)
            self.workload = workload.get("name", "given")
            self.production = False
            self.storage: Dict[str, Any] = {}
            self.exact: Dict[str, Any] = {}
            for k, x in op.inputs.items():
                if k not in workload["inputs"]:
                    raise ValueError("inputs lack %s (op %s takes %s)" % (k, op.name, ", ".join(op.inputs)))
                a = np.asarray(workload["inputs"][k])
                if x.is_float:
                    if a.dtype == np.uint16:
                        ex = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                        self.dtype = "bf16"
                    else:
                        ex = a.astype(np.float64)
                        self.dtype = {"float32": "f32", "float16": "f16", "float64": "f64"}.get(a.dtype.name, "")
                        if not self.dtype:
                            raise ValueError("input %s: dtype %s (expected float32, float64, float16 or bf16 "
                                             "as uint16 bits)" % (k, a.dtype))
                    self.storage[k], self.exact[k] = np.ascontiguousarray(a), ex
                else:
                    self.storage[k] = self.exact[k] = np.ascontiguousarray(a.astype(np.int64))
            self.attrs.update(workload.get("attrs", {}))
            self.sizes = self._sizes_from_inputs()
        else:
            spec = {w[0]: w for w in op.workloads()}
            if workload not in spec:
                raise ValueError("op %s has no workload %r (it has %s)" % (op.name, workload, ", ".join(spec)))
            _, self.sizes, self.production, variant = spec[workload]
            self.workload = workload
            self.storage = {}
            self.exact = {}
            for k, x in op.inputs.items():
                shape = tuple(self.sizes[d] for d in x.shape)
                v = _values(x, shape, variant, _rng(seed, op.name, workload, k), dtype, self.sizes)
                if x.is_float:
                    self.exact[k], self.storage[k] = _round_to(v, dtype)
                else:
                    self.exact[k] = self.storage[k] = v
        self.out_shapes = {o: tuple(self.sizes[d] for d in s) for o, s in op.outputs.items()}
        self.ref = self.evaluate(self.exact)
        for o, r in self.ref.items():
            if np.isnan(r).any():
                raise ProblemError("op %s, workload %s: the reference gives NaN in %s: it is not defined on "
                                 "these inputs" % (op.name, self.workload, o))
        self.model: Dict[str, Dict[str, Any]] = {}
        self.s_acc: Dict[str, Any] = {}  # sum |terms| of the outputs with a multilinear reduction (the baselines' S)
        self.tol = {o: self._tolerance(o) for o in op.outputs}

    def _sizes_from_inputs(self) -> Sizes:
        sizes: Sizes = {}
        for k, x in self.op.inputs.items():
            for d, s in zip(x.shape, self.storage[k].shape):
                sizes[d] = s
        for d, s in self.op.shapes.items():
            sizes.setdefault(d, int(s[0]))
        return sizes

    def evaluate(self, arrays: Dict[str, Any]) -> Dict[str, Any]:
        """The reference on `arrays` (any float dtype), as {output: array} in that dtype. An
        output in a narrower float dtype than the float inputs' (a reference that ends with
        parity.round_to(y, "bf16"): ml_dtypes' bfloat16, float16) is promoted, exactly, to the
        inputs' dtype: the reference evaluated in float64 stays float64, the contract
        evaluation float32."""
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            res = self.op.reference(**arrays, **self.attrs)
        try:
            outs = _normalise(res, self.op)
        except ValueError as e:
            raise ProblemError("reference of %s: %s" % (self.op.name, e)) from e
        fl = [np.asarray(arrays[k]).dtype for k, x in self.op.inputs.items() if x.is_float and k in arrays]
        want = fl[0] if fl else np.dtype(np.float64)
        for o, a in outs.items():
            a = np.asarray(a)
            if a.dtype != want and a.dtype.itemsize < want.itemsize and _is_float(a.dtype) and _is_float(want):
                a = a.astype(want)
            if a.shape != self.out_shapes[o]:
                raise ProblemError("reference of %s: output %s has shape %s, expected %s" % (
                    self.op.name, o, a.shape, self.out_shapes[o]))
            outs[o] = a
        return outs

    def contract_eval(self, cast: Any = np.float32, inputs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The reference evaluated with float inputs as `cast` arrays (the contract precision)."""
        src = self.exact if inputs is None else inputs
        arr = {k: (src[k].astype(cast) if x.is_float else src[k]) for k, x in self.op.inputs.items()}
        return self.evaluate(arr)

    # -- tolerances ---------------------------------------------------------------------------
    def _tolerance(self, o: str) -> Any:
        ref = self.ref[o]
        M = max(ref.size, 1)
        if self.op.multilinear and o in self.op.reductions:
            return self._error_model(o, ref, M)
        return self._empirical(o, ref, M)

    def _error_model(self, o: str, ref: Any, M: int) -> Any:
        """The built-in error model (docs/error-model.md), with k and s_acc from the declaration:
        k = product of the reduced dimensions' sizes; s_acc = the reference on |inputs| (for a
        multilinear op every term is a product of one element of each float input, so this is
        sum |term|); products of p float inputs of t significand bits are exact in fp32 when
        p*t <= 24 (m_up = 0), else rounded at most p-1 times (m_up = p-1, s_up = s_acc)."""
        self._check_multilinear(o)
        k = int(np.prod([self.sizes[d] for d in self.op.reductions[o]], dtype=np.int64))
        absin = {kk: (np.abs(v) if self.op.inputs[kk].is_float else v) for kk, v in self.exact.items()}
        s_acc = self.s_acc[o] = np.abs(self.evaluate(absin)[o])
        p = sum(1 for x in self.op.inputs.values() if x.is_float)
        t = _BITS.get(self.dtype, 53)
        m_up = 0 if p * t <= 24 else p - 1
        lam = math.sqrt(2 * math.log(2 * max(k, m_up, 1) * M / ALPHA))
        u = _U["f32"]
        g_k = _gamma_prob(k - 1, u, lam)
        g_m = _gamma_prob(m_up, u, lam)
        acc = g_k * s_acc + g_m * (s_acc if m_up else 0) + (k + m_up) * _TINY["f32"]
        self.model[o] = {"kind": "error-model", "k": k, "m_up": m_up, "lambda": lam,
                         "degree": p, "accumulator": "f32"}
        return acc  # the output rounding is added at judging time, from the candidate's dtype

    def _check_multilinear(self, o: str) -> None:
        """A multilinear op doubles exactly when one float input is doubled (powers of two are
        exact): a wrongly declared op (softmax, a norm) fails this and gets an error."""
        for k, x in self.op.inputs.items():
            if not x.is_float:
                continue
            two = dict(self.exact)
            two[k] = self.exact[k] * 2.0
            r2 = self.evaluate(two)[o]
            if not np.allclose(r2, 2.0 * self.ref[o], rtol=1e-12, atol=0, equal_nan=True):
                raise ProblemError("op %s: declared multilinear (reductions=) but output %s is not linear in "
                                 "input %s; pass multilinear=False to use the empirical floor" % (self.op.name, o, k))

    def _empirical(self, o: str, ref: Any, M: int) -> Any:
        """The empirical floor (docs/custom-ops.md, "The empirical floor"): e = the reference in
        fp32 minus fp64; per row (all but the last output axis) sigma = RMS(e), rho = RMS(ref),
        sigma raised to the median row's sigma/rho times rho and, per element, to its column's
        RMS(e/rho) times rho;
        tol_ij = F * max(lambda * sigma_row * max(1, |ref_ij| / rho_row), 2 e_ij) + 4 u32 |ref_ij|
        (never below FlashAttention's 2x the contract evaluation's own error there), with
        lambda = sqrt(2 ln(2 M / alpha)) (a union bound over the M elements for errors of scale
        sigma) and F = 2 (FORMULA_FACTOR) times sqrt(k) when a reduction of length k is declared
        (multilinear=False: the evaluation order of a faithful kernel is free, sequential vs
        pairwise)."""
        got = self.contract_eval()[o]
        if got.dtype == np.float64:
            raise ProblemError("op %s: the reference returns float64 on float32 inputs, so parity cannot evaluate "
                             "it in the contract precision: write it with functions that keep the dtype "
                             "(np.exp(a), a * b, not np.float64 constants or dtype=np.float64)" % self.op.name)
        e = np.abs(got.astype(np.float64) - ref)
        e[~np.isfinite(e)] = 0  # infinities are judged by sign, not by tolerance
        r = np.where(np.isfinite(ref), ref, 0)
        shape2 = (-1, ref.shape[-1]) if ref.ndim >= 1 else (1, 1)
        e2, r2 = e.reshape(shape2), r.reshape(shape2)
        sigma = np.sqrt(np.mean(e2 * e2, axis=1, keepdims=True))
        rho = np.sqrt(np.mean(r2 * r2, axis=1, keepdims=True))
        # A row can be lucky (its fp32 evaluation nearly exact: a power-of-4 mean square, exact
        # subtractions of few-bit inputs) where another faithful order is not: no row's error
        # scale is taken below the median over rows of sigma/rho (relative to the row's magnitude).
        live = rho[:, 0] > 0
        if live.any():
            rel = float(np.median(sigma[live, 0] / rho[live, 0]))
            sigma = np.maximum(sigma, rel * rho)
        # Error scales also vary along the last axis (outlier channels, rotary frequencies: a few
        # columns carry most of a row's error), so each element takes the larger of its row's
        # scale and its column's (the RMS over rows of e / rho, times its row's rho).
        with np.errstate(divide="ignore", invalid="ignore"):
            erel = np.where(rho > 0, e2 / rho, 0.0)
        col = np.sqrt(np.mean(erel * erel, axis=0, keepdims=True))
        sigma = np.maximum(sigma, col * rho)
        k = int(np.prod([self.sizes[d] for d in self.op.reductions.get(o, [])], dtype=np.int64))
        F = FORMULA_FACTOR * (math.sqrt(k) if o in self.op.reductions else 1.0)
        lam = math.sqrt(2 * math.log(2 * M / ALPHA))
        scale = np.maximum(1.0, np.divide(np.abs(r2), rho, out=np.zeros_like(r2), where=rho > 0))
        tol = F * np.maximum(lam * sigma * scale, 2.0 * e.reshape(shape2)) + MIN_ROUNDINGS * _U["f32"] * np.abs(r2) \
            + _TINY["f32"]
        self.model[o] = {"kind": "empirical-floor", "factor": F, "lambda": lam, "k": k,
                         "sigma_max": float(sigma.max()) if sigma.size else 0.0}
        return tol.reshape(ref.shape)


def _gamma_prob(n: int, u: float, lam: float) -> float:
    """Higham & Mary's probabilistic gamma (src/verify/verify.c parity_gamma_prob)."""
    if n <= 0:
        return 0.0
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


def _is_float(dt: "np.dtype[Any]") -> bool:
    """numpy's floats and ml_dtypes' (bfloat16, float8_*: kind 'V', named as floats)."""
    return dt.kind == "f" or (dt.kind == "V" and ("float" in dt.name))


def _normalise(res: Any, op: Op) -> Dict[str, Any]:
    from ._custom_run import by_name
    return by_name(res, list(op.outputs), op.name)


def _host_f64(x: Any) -> Tuple[Any, str]:
    """A candidate's output as (float64 values, parity dtype name)."""
    a, dt = _arrays.to_host(x)
    if dt == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64), dt
    return a.astype(np.float64), dt


# -- judging ------------------------------------------------------------------------------------
def judge_outputs(case: CustomCase, outputs: Any) -> Dict[str, Any]:
    """Judge outputs (dict/tuple/single, any float dtype) against case: returns a dict with
    verdict, max_err_over_tol, rows_failed, rows_judged, worst, detail."""
    outs = _normalise(outputs, case.op)
    best: Optional[Dict[str, Any]] = None
    rows_failed = rows_judged = 0
    for o, x in outs.items():
        y, dt = _host_f64(x)
        if y.shape != case.out_shapes[o]:
            return {"verdict": "crashed", "detail": "output %s has shape %s, expected %s" % (
                o, y.shape, case.out_shapes[o])}
        ref = case.ref[o]
        tol = case.tol[o].copy()
        kind = case.model[o]["kind"]
        u_out = _U.get(dt, 0.0)
        if u_out > _U["f32"]:  # one final rounding to a narrower output (src/verify/verify.c tol_from)
            tol = tol + u_out * (np.abs(np.where(np.isfinite(ref), ref, 0)) + tol) + _TINY[dt]
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(y - ref)
        nan = np.isnan(y)
        inf = np.isinf(y) | np.isinf(ref)
        err[inf] = np.where(y[inf] == ref[inf], 0.0, np.inf)
        err[nan] = np.inf  # NaN never matches
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(err == 0, 0.0, err / tol)
        q2 = q.reshape(-1, ref.shape[-1]) if ref.ndim >= 1 else q.reshape(1, 1)
        rq = q2.max(axis=1) if q2.size else np.zeros(0)
        rows_failed += int((rq > 1).sum())
        rows_judged += int(q2.shape[0])
        i = int(np.argmax(q)) if q.size else 0
        if q.size and (best is None or q.flat[i] > best["q"]):
            idx = tuple(int(t) for t in np.unravel_index(i, q.shape))
            best = {"q": float(q.flat[i]), "output": o, "index": list(idx), "got": float(y.flat[i]),
                    "ref": float(ref.flat[i]), "err": float(err.flat[i]), "tol": float(tol.flat[i]),
                    "tolerance": kind, "out_dtype": dt, "nan_count": int(nan.sum())}
    if best is None:
        return {"verdict": "faithful", "max_err_over_tol": 0.0, "rows_failed": 0, "rows_judged": 0,
                "worst": {}, "detail": "no elements"}
    v = "faithful" if best["q"] <= 1 else "unfaithful"
    detail = "err/tol %.3g at %s%s: got %.9g, ref %.9g, |err| %.3g %s tol %.3g (%s)" % (
        best["q"], best["output"], best["index"], best["got"], best["ref"], best["err"],
        ">" if best["q"] > 1 else "<=", best["tol"], best["tolerance"])
    if best["nan_count"]:
        detail += "; %d NaN" % best["nan_count"]
    return {"verdict": v, "max_err_over_tol": best["q"], "rows_failed": rows_failed,
            "rows_judged": rows_judged, "worst": best, "detail": detail}


def _run(fn: Any, case: CustomCase, like: str, device: Any, small: bool, worker: Any = None,
         timeout: Optional[float] = None) -> Tuple[Dict[str, Any], float]:
    """The harness's steps (python/parity/_custom_run.py), in this process or in `worker`, then
    the outputs judged here: -> (result dict, seconds)."""
    from . import _custom_run
    spec = _custom_run.spec_of(case)
    if worker is not None:
        ex = worker.run_custom(fn, spec, like, device, small, timeout)
    else:
        ex = _custom_run.execute(fn, spec, like, device, small)
        if ex["status"] == "ran" and timeout is not None and ex["seconds"] > timeout:
            ex = {"status": "timeout", "detail": "ran %.3g s, past timeout=%g s" % (ex["seconds"], timeout),
                  "seconds": ex["seconds"]}
    if ex["status"] != "ran":
        return {"verdict": ex["status"], "detail": ex["detail"], "exc": ex.get("exc")}, ex["seconds"]
    try:
        r = judge_outputs(case, ex["outputs"])
    except (ValueError, TypeError) as e:
        return {"verdict": "crashed", "detail": str(e), "exc": e}, ex["seconds"]
    if r["verdict"] == "faithful" and ex.get("rerun"):
        r = dict(r, verdict="nondeterministic", detail="output %s differs bit for bit on a rerun" % ex["rerun"])
    if r["verdict"] == "unfaithful" and small:  # which accumulator the error looks like
        from . import _custom_diagnosis
        o = r["worst"]["output"]
        y, dt = _host_f64(_normalise(ex["outputs"], case.op)[o])
        r["diagnosis"], r["no_diagnosis"] = _custom_diagnosis.diagnose(case, y, dt, o)
    return r, ex["seconds"]


def _label(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    qn = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return "python:%s.%s" % (mod, qn)


_ORDER = ["faithful", "unsupported", "nondeterministic", "unfaithful", "modified-inputs", "crashed"]


def check(op: Op, fn: Callable[..., Any], *, workloads: Any = None, seed: int = 1, dtype: Any = "bf16",
          like: Optional[str] = None, device: Any = "cpu", isolate: bool = False, timeout: Optional[float] = None,
          baselines: bool = False, progress: Any = None) -> Report:
    """parity.check for a declared op (parity.check dispatches here, having refused the options
    that do not apply: floor, out_dtype): fn judged on the op's workloads. Returns a Report.
    isolate=True runs fn in a spawned worker (a module-level, picklable fn): a crash, os._exit or
    a hang past `timeout` seconds per call is a verdict."""
    from ._check import _default_like
    from ._harness import progress_fn
    like = _default_like(like)
    dtype = _arrays.canon_dtype(dtype)
    names = op.workload_names(workloads)
    say = progress_fn(progress)
    results: List[Dict[str, Any]] = []
    seconds: List[Optional[float]] = []
    models: Dict[str, Any] = {}
    causes: Dict[str, BaseException] = {}
    worker = None
    try:
        for i, w in enumerate(names):
            case = CustomCase(op, w, seed, dtype)
            if say:
                say("[%d/%d] %s: %s" % (i + 1, len(names), op.name, case.workload))
            if isolate and worker is None:
                from . import _worker
                worker = _worker.Worker()
            r, s = _run(fn, case, like, device, not case.production, worker, timeout)
            if worker is not None and r["verdict"] in ("crashed", "timeout"):
                worker.close()  # a dead or killed worker: the next workload gets a fresh one
                worker = None
            exc = r.pop("exc", None)
            if exc is not None:
                causes[case.workload] = exc
            r.update(name=case.workload, production=case.production)
            results.append(r)
            seconds.append(s)
            models[case.workload] = case.model
    finally:
        if worker is not None:
            worker.close()
    bl = None
    if baselines:  # the detection matrix (python/parity/_custom_baselines.py)
        from . import _custom_baselines
        bl = _custom_baselines.run(op, fn, dtype=dtype, like=like, device=device, isolate=isolate, timeout=timeout)
    return _report(op, _label(fn), (fn.__doc__ or "").strip().split("\n")[0], results, seconds, models,
                   seed, dtype, _repro(op, fn, seed, dtype, like, isolate), bl, causes)


def compare(op: Op, inputs: Any, outputs: Any, *, workload: Optional[str] = None, seed: Optional[int] = None,
            dtype: Any = None, name: str = "outputs") -> Report:
    """parity.compare for a declared op. inputs: what parity.inputs(op, ...) returned (it carries
    its case); a workload name (the inputs regenerated with seed= and dtype=, default 1 and
    "f32"); a dict of arrays with workload= (checked against the regenerated inputs) or without
    (the inputs as given, dtype from the arrays); or {"name": ..., "inputs": {...}}."""
    case = getattr(inputs, "_case", None)
    if isinstance(inputs, CustomCase):
        case = inputs
    if not isinstance(case, CustomCase) or (workload is not None and case.workload != workload) or \
            (seed is not None and case.seed != seed):
        sd = 1 if seed is None else int(seed)
        dt = "f32" if dtype is None else _arrays.canon_dtype(dtype)
        if isinstance(inputs, str):
            case = CustomCase(op, inputs, sd, dt)
        elif workload is not None:
            arrays = inputs.get("inputs", inputs) if isinstance(inputs, Mapping) else inputs
            if dtype is None:
                fl = [k for k, x in op.inputs.items() if x.is_float and k in arrays]
                dt = _arrays.to_host(arrays[fl[0]])[1] if fl else "f32"
            case = CustomCase(op, workload, sd, dt)
            for k in op.inputs:
                if k not in arrays:
                    raise ValueError("compare: inputs lack %s" % k)
                if not np.array_equal(_arrays.host_bits(arrays[k]), np.ascontiguousarray(case.storage[k])
                                      .reshape(-1).view(np.uint8)):
                    raise ValueError("compare: input %s differs from parity's for workload %s, seed %d, dtype %s: "
                                     "the reference would not match" % (k, case.workload, case.seed, case.dtype))
        elif isinstance(inputs, Mapping):
            given = dict(inputs) if "inputs" in inputs else {"name": "given", "inputs": dict(inputs)}
            case = CustomCase(op, given, sd, dt)
        else:
            raise TypeError("compare: inputs must come from parity.inputs(op, ...), or be a workload name or a "
                            "dict of arrays")
    if case.op is not op:
        raise ValueError("compare: inputs are for op %s, not %s" % (case.op.name, op.name))
    r = judge_outputs(case, outputs)
    r.update(name=case.workload, production=case.production)
    return _report(op, name, "outputs judged with parity.compare", [r], [0.0],
                   {case.workload: case.model}, case.seed, case.dtype,
                   "parity.compare(%s, parity.inputs(%s, %r, seed=%d, dtype=%r), outputs)" % (
                       op.name, op.name, case.workload, case.seed, case.dtype))


def inputs(op: Op, workload: str, *, seed: int = 1, dtype: Any = "bf16", like: str = "numpy",
           device: Any = "cpu") -> Any:
    """parity.inputs for a declared op: the inputs of one workload as fn receives them (plus the
    attributes), carrying the case for parity.compare."""
    from ._case import Inputs
    from . import _custom_run
    case = CustomCase(op, workload, seed, _arrays.canon_dtype(dtype))
    tensors = _custom_run.framework(_custom_run.spec_of(case), like, device)
    return Inputs(case, tensors, op=op.name, input_names=list(op.inputs), attrs=case.attrs,
                  workload=case.workload, seed=case.seed, dtype=case.dtype, dims={},
                  output_shapes=case.out_shapes)


def _repro(op: Op, fn: Any, seed: int, dtype: str, like: str, isolate: bool = False) -> Callable[[str], str]:
    def rep(worst: str) -> str:
        return "parity.check(%s, %s, workloads=[%r], seed=%d, dtype=%r, like=%r%s)" % (
            op.name, _label(fn)[len("python:"):], worst, seed, dtype, like, ", isolate=True" if isolate else "")
    return rep


def _report(op: Op, label: str, desc: str, results: List[Dict[str, Any]], seconds: Sequence[Optional[float]],
            models: Dict[str, Any], seed: int, dtype: str, repro: Union[str, Callable[[str], str]],
            baselines: Optional[Dict[str, Any]] = None, causes: Optional[Dict[str, BaseException]] = None) -> Report:
    worst = max(results, key=lambda r: (_ORDER.index(r["verdict"]) if r["verdict"] in _ORDER else 9,
                                        r.get("max_err_over_tol", 0)))
    verdict = worst["verdict"]
    rep = repro(worst["name"]) if callable(repro) else repro
    wl = []
    for r in results:
        wl.append({"name": r["name"], "verdict": r["verdict"], "production": r["production"],
                   "max_err_over_tol": r.get("max_err_over_tol"), "rows_failed": r.get("rows_failed", 0),
                   "rows_judged": r.get("rows_judged", 0), "worst": r.get("worst", {}),
                   "detail": r.get("detail", ""), "tolerance": models.get(r["name"], {})})
        if r.get("diagnosis"):
            wl[-1]["diagnosis"] = r["diagnosis"]
    # The diagnosis the kernel reports: the worst diagnosed unfaithful workload, else the worst
    # unfaithful one with the reason it has none (as programs/cmd_check_declared.c).
    bad = [r for r in results if r["verdict"] == "unfaithful" and not r["production"]]
    dw = max(bad, key=lambda r: (r.get("diagnosis") is not None, r.get("max_err_over_tol", 0))) if bad else None
    d: Dict[str, Any] = {"schema": "parity.check/1", "op": op.name, "custom_op": True, "seed": seed, "dtype": dtype,
         "judge": "python float64 (parity.custom)", "reproduce": rep,
         "kernels": [{"name": label, "description": desc, "verdict": verdict, "workloads": wl,
                      "worst_workload": worst["name"], "diagnosis": dw and dw.get("diagnosis")}]}
    if dw is not None and not dw.get("diagnosis"):
        d["kernels"][0]["no_diagnosis"] = dw.get("no_diagnosis")
    if baselines is not None:
        d["kernels"][0]["baselines"] = baselines
    lines = ["parity check (declared op %s, judged in Python float64; docs/custom-ops.md)" % op.name,
             "kernel: %s%s" % (label, ("  what: " + desc) if desc else ""),
             "seed %d, inputs %s" % (seed, dtype), ""]
    for r in wl:
        q = r["max_err_over_tol"]
        tk = ", ".join("%s: %s" % (o, m.get("kind")) for o, m in r["tolerance"].items())
        lines.append("  %-12s %-16s err/tol %-9s rows failed %d / %d  [%s]" % (
            r["name"], r["verdict"], "-" if q is None else "%.3g" % q, r["rows_failed"], r["rows_judged"], tk))
        if r["detail"]:
            lines.append("               %s" % r["detail"])
    if dw is not None:
        from . import _custom_diagnosis
        lines.append(_custom_diagnosis.line(dw["diagnosis"]) if dw.get("diagnosis") else
                     "  no diagnosis: %s" % dw.get("no_diagnosis"))
    lines += ["", "verdict: %s (worst workload %s)" % (verdict, worst["name"]), "reproduce: %s" % rep, ""]
    if baselines is not None:
        from . import _custom_baselines
        lines += [_custom_baselines.matrix_text([(label, verdict, baselines)])]
    return Report(op.name, "\n".join(lines), json.dumps(d, indent=1, default=float), rep, seconds, causes)

"""User-declared ops: parity.Op / parity.Input and the workloads made from the inputs' roles
(docs/custom-ops.md). A parity.Op is judged by the C library's engine, the one that judges the
built-in ops: python/parity/_declared.py declares it to the C library (its reference called back
from C), and parity.check / parity.compare / parity.inputs (python/parity/_check.py, _case.py)
take it where they take a built-in op's name -- the same cases, harness, judge, diagnosis and
report. C plugins declare ops through include/parity/op_abi.h, judged by the same engine.
Deliberately not here: tolerances, judging, reports (the C library's), running the function
(python/parity/_harness.py, in process or in the isolate=True worker), the baselines matrix
(python/parity/_custom_baselines.py), the power self-test (python/parity/_custom_power.py).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import ProblemError
from ._lib import ROLES as _ROLES

Sizes = Dict[str, int]


class _ProblemTypeError(ProblemError, TypeError):
    """A declaration of the wrong type (an input that is not a parity.Input): a ProblemError, and
    the TypeError it was before parity.ProblemError existed."""
Workload = Tuple[str, Sizes, bool, str]

ROLES = tuple(_ROLES)  # op_abi.h parity_role_t, in its order, from the C library


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
    then the built-in error model applies (parity checks the declaration on every workload);
    intermediates [names] the reference marks with parity.intermediate(name, x), which the
    diagnosis may round to bf16 or fp16 to name a cause (float attrs are refit likewise);
    rounded {name: "bf16" | "fp16"}: marked intermediates the contract allows rounded to that
    format (the judge accepts the reference computed so as well as the exact one)."""

    def __init__(self, name: str, *, inputs: Mapping[str, "Input"], outputs: Mapping[str, Sequence[str]],
                 reference: Callable[..., Any], shapes: Mapping[str, Union[int, Sequence[int]]],
                 attrs: Optional[Mapping[str, Any]] = None,
                 reductions: Optional[Mapping[str, Sequence[str]]] = None,
                 multilinear: Optional[bool] = None, fixed: Iterable[str] = (),
                 intermediates: Iterable[str] = (), rounded: Optional[Mapping[str, str]] = None) -> None:
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
        # what the reference marks with parity.intermediate (python/parity/_custom_cause.py)
        self.intermediates: Tuple[str, ...] = tuple(intermediates)
        if len(self.intermediates) > 4 or not all(isinstance(n, str) and 0 < len(n) < 32 for n in self.intermediates):
            raise ProblemError("op %s: intermediates: at most 4 names of 1 to 31 characters" % name)
        # intermediates the contract allows rounded to a format: the judge accepts either reference
        self.rounded: Dict[str, str] = dict(rounded or {})
        if len(self.rounded) > 4 or not all(isinstance(n, str) and 0 < len(n) < 32 and f in ("bf16", "fp16")
                                            for n, f in self.rounded.items()):
            raise ProblemError("op %s: rounded: at most 4 {name: 'bf16' or 'fp16'}" % name)
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
        from ._custom_plugin import CReference, open_op
        h = open_op(path, name)
        d = h.desc
        inputs = {x["name"]: Input(tuple(x["dims"]), role=x["role"], vocab=x.get("vocab", "V")) for x in d["inputs"]}
        outputs = {o["name"]: tuple(o["dims"]) for o in d["outputs"]}
        reductions = {o["name"]: list(o["reduced"]) for o in d["outputs"] if o["reduced"]}
        op = Op(d["name"], inputs=inputs, outputs=outputs, reference=CReference(h),
                shapes={k: [int(s) for s in v] for k, v in d["dims"].items()}, attrs=d["attrs"],
                reductions=reductions or None, multilinear=bool(d["multilinear"]) if reductions else False,
                fixed=tuple(d["fixed"]))
        op.description = d["description"]
        return op

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


def _is_float(dt: "np.dtype[Any]") -> bool:
    """numpy's floats and ml_dtypes' (bfloat16, float8_*: kind 'V', named as floats)."""
    return dt.kind == "f" or (dt.kind == "V" and ("float" in dt.name))


def _label(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    qn = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return "python:%s.%s" % (mod, qn)


def _repro(op: Op, fn: Any, seed: int, dtype: str, like: str, isolate: bool = False) -> Callable[[str], str]:
    def rep(worst: str) -> str:
        return "parity.check(%s, %s, workloads=[%r], seed=%d, dtype=%r, like=%r%s)" % (
            op.name, _label(fn)[len("python:"):], worst, seed, dtype, like, ", isolate=True" if isolate else "")
    return rep

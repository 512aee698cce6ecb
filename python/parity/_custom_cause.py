"""A parity.Op in the diagnosis's cause classifier (issue #36; docs/custom-ops.md "Causes"): its
float attributes are the parameters the classifier may refit (cause "parameter"), and the
intermediates its reference marks with parity.intermediate(name, x) -- named once in
parity.Op(..., intermediates=[...]) -- are the ones it may round (cause "intermediate-rounding").
The classifier itself is the C library's: it calls the reference back (python/parity/_declared.py)
under a trial, one parameter at another value or one intermediate rounded to bf16 or fp16, which
this module applies. Deliberately not here: the fits (src/verify/check_cause.c, check_variant.c).
"""
from __future__ import annotations

import json
import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._formats import round_f64

# (precision bits p, exponent of the smallest normal) of the formats an intermediate may be
# rounded to: the spacing of x's binade is 2^(max(e, emin) - p + 1), e = floor(log2 |x|).
_FORMATS: Dict[str, Tuple[int, int]] = {"bf16": (8, -126), "fp16": (11, -14)}

_state = threading.local()


def trial_of(text: Optional[bytes]) -> Optional[Dict[str, Any]]:
    """The bridge's trial JSON (bridge_decl.c py_ref_fn) as a dict, or None for a plain call."""
    return json.loads(text.decode()) if text else None


class active:
    """`with active(trial):` the reference runs under trial (None: a plain call); .used tells
    whether parity.intermediate met the intermediate the trial rounds."""

    def __init__(self, trial: Optional[Dict[str, Any]]) -> None:
        self.trial = trial if trial and "intermediate" in trial else None
        self.used = False

    def __enter__(self) -> "active":
        self.prev = getattr(_state, "cur", None)
        _state.cur = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.cur = self.prev


def _round(x: Any, fmt: str, direction: int) -> Any:
    """x (float64) rounded to fmt: to nearest even (direction 0, the C library's rounding), or to
    the format's neighbour below (-1) or above (+1) the exact value, as op.h parity_variant_round."""
    near = round_f64(x, fmt, mode="nearest")
    if direction == 0:
        return near
    p, emin = _FORMATS[fmt]
    tz = round_f64(x, fmt, mode="toward_zero")
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.abs(x)))
    spacing = np.ldexp(1.0, (np.maximum(np.nan_to_num(e, neginf=emin), emin) - p + 1).astype(np.int64))
    away = tz + np.sign(x) * spacing
    toward = (direction < 0) == (np.asarray(x) > 0)
    out = np.where(tz == x, x, np.where(toward, tz, away))
    return np.where(np.isfinite(x), out, x)


def intermediate(name: str, x: Any) -> Any:
    """Mark x as the intermediate `name` of a parity.Op's reference (declared in
    parity.Op(..., intermediates=[name])): returns x unchanged, except when the cause classifier
    re-runs the reference with that intermediate rounded to bf16 or fp16 -- then x rounded to
    that format (from its float64 value: one rounding, to nearest even), same dtype and shape.
    Outside a reference, or for a name the classifier is not trying, it is the identity."""
    cur: Optional[active] = getattr(_state, "cur", None)
    t = cur.trial if cur is not None else None
    if t is None or t.get("intermediate") != name or t.get("format") not in _FORMATS:
        return x
    cur.used = True  # type: ignore[union-attr]
    a = np.asarray(x, dtype=np.float64)
    r = _round(a, str(t["format"]), int(t.get("dir", 0)))
    if isinstance(x, np.ndarray):
        return r.astype(x.dtype, copy=False)
    if np.ndim(r) == 0:
        return type(x)(float(r)) if isinstance(x, (float, np.floating)) else float(r)
    return r


def params_of(attrs: Dict[str, Any]) -> Dict[str, float]:
    """The refittable parameters of an op with attrs: its float attributes (not ints or bools), at
    most 4 (the classifier's limit, op.h PARITY_OP_MAX_PARAMS), in the order given."""
    out: Dict[str, float] = {}
    for k, v in attrs.items():
        if isinstance(v, (float, np.floating)) and not isinstance(v, bool) and len(out) < 4 and 0 < len(k) < 16:
            out[k] = float(v)
    return out

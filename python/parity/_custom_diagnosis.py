"""The diagnosis of a declared op (docs/custom-ops.md, "Diagnosis"): for an unfaithful function of
an op with a multilinear reduction, which emulated accumulator its error looks like -- bf16, an
11-bit or an fp32 accumulator, sequential or pairwise -- worded as the built-in ops' diagnosis
line. The same measures as the C library's (src/custom/custom_diag.c, which restates
src/verify/check.c's diagnose() for declared ops): the terms are the reference on one slice of the
reduced dimensions at a time (_custom_power.py's accumulator mutants use the same slices), rounded
to fp32 as a faithful kernel forms them; the emulations sum them in each format and order with one
rounding per addition (pairwise: recursive halving, leaves of one term) -- the C library's sums,
through the bridge, so both languages emulate alike; the error measure is the
RMS of err / sum |terms| over up to 64 evenly spaced rows.
Deliberately not here: a diagnosis without a multilinear reduction (there is then no slice that
is a term: the report says "no diagnosis" and why)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

if TYPE_CHECKING:
    from ._custom import CustomCase

EMU = [("bf16 sequential", "bf16", False), ("bf16 pairwise", "bf16", True),
       ("11-bit sequential", "custom:m=10,e=8", False), ("11-bit pairwise", "custom:m=10,e=8", True),
       ("fp32 sequential", "fp32", False), ("fp32 pairwise", "fp32", True)]
DIAG_ROWS = 64          # as check.c's 32 + 32 rows; here evenly spaced (every row has k terms)
TERM_BUDGET = 2 ** 28   # k x (input + output elements) the slice evaluation may touch
TERMS_KEPT = 2 ** 24    # terms held for the emulations
_OUT_FMT = {"bf16": "bf16", "f16": "fp16", "f32": "fp32"}


def terms(case: "CustomCase", o: str) -> Iterator[Any]:
    """Yield, for t = 0..k-1 in C order over output o's reduced dimensions, the reference on slice
    t (every float input carrying a reduced dimension zeroed off the slice) rounded to fp32: term t
    of every element of o, for a multilinear op."""
    op = case.op
    dims = op.reductions[o]
    sizes = [case.sizes[d] for d in dims]
    for flat in range(int(np.prod(sizes, dtype=np.int64))):
        pos = dict(zip(dims, np.unravel_index(flat, sizes)))
        sl = {}
        for k, x in op.inputs.items():
            a = case.exact[k]
            if x.is_float and any(d in pos for d in x.shape):
                idx = tuple(slice(pos[d], pos[d] + 1) if d in pos else slice(None) for d in x.shape)
                b = np.zeros_like(a)
                b[idx] = a[idx]
                a = b
            sl[k] = a
        yield case.evaluate(sl)[o].astype(np.float32).astype(np.float64)


def _round(x: Any, fmt: str) -> Any:
    from ._formats import round_f64 as _r
    return np.asarray(_r(x, fmt), dtype=np.float64)


def _sums(T: Any, fmt: str, pairwise: bool) -> Any:
    """Column sums of T (k, n) in fmt, one rounding per addition, sequential or by recursive
    halving: the C library's parity_format_sum results (the emulations of custom_diag.c)."""
    import ctypes
    from ._lib import lib
    f = lib.parity_py_format_sum_cols
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    T = np.ascontiguousarray(T, dtype=np.float64)
    out = np.empty(T.shape[1])
    if f(fmt.encode(), 1 if pairwise else 0, T.ctypes.data, T.shape[0], T.shape[1], out.ctypes.data) != 0:
        raise MemoryError("parity_format_sum_fast_cols failed")
    return out


def _error(v: Any, ref: Any, s: Any, out_fmt: Optional[str]) -> float:
    """RMS over the elements with sum |terms| > 0 of (round_out(v) - ref) / sum |terms|."""
    live = s > 0
    if not live.any():
        return 0.0
    vv = v if out_fmt is None else _round(v, out_fmt)
    d = (vv[live] - ref[live]) / s[live]
    return float(np.sqrt(np.mean(d * d)))


def diagnose(case: "CustomCase", y: Any, out_dtype: str, output: str
             ) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(diagnosis dict, None) or (None, why not) for output values y (float64, the candidate's
    output `output` decoded) of dtype out_dtype on case."""
    op = case.op
    if not (op.multilinear and op.reductions.get(output)):
        return None, ("no reduction declared" if not op.reductions.get(output) else
                      "the declared reduction is not multilinear: its terms are not the reference on slices")
    k = int(np.prod([case.sizes[d] for d in op.reductions[output]], dtype=np.int64))
    touched = case.ref[output].size + sum(a.size for a in case.exact.values())
    ref = case.ref[output]
    cols = ref.shape[-1] if ref.ndim else 1
    rows = ref.size // cols if cols else 0
    if k * touched > TERM_BUDGET or k * cols > TERMS_KEPT or output not in case.s_acc:
        return None, "the reduction is too long to emulate here (k = %d)" % k
    nr = min(rows, DIAG_ROWS)
    while nr > 1 and nr * cols * k > TERMS_KEPT:
        nr //= 2
    sel = np.array([(q * rows) // nr for q in range(nr)], dtype=np.int64)  # evenly spaced rows
    T = np.stack([t.reshape(rows, cols)[sel].reshape(-1) for t in terms(case, output)])
    r2 = ref.reshape(rows, cols)[sel].reshape(-1)
    s2 = case.s_acc[output].reshape(rows, cols)[sel].reshape(-1)
    v = np.asarray(y, dtype=np.float64).reshape(rows, cols)[sel].reshape(-1)
    fmt_out = _OUT_FMT.get(out_dtype)
    cand = _error(v, r2, s2, None)  # the candidate's values are already in its dtype
    if not math.isfinite(cand):
        return None, "non-finite outputs: nothing to compare"
    emu = []
    for _, fmt, pair in EMU:
        emu.append(_error(_sums(T, fmt, pair), r2, s2, fmt_out))
    best, closest = math.inf, 0
    for e in (4, 5, 2, 3, 0, 1):  # ties: higher precision, sequential first (check.c)
        dist = abs(math.log2((cand + 1e-300) / (emu[e] + 1e-300)))
        if dist < best:
            best, closest = dist, e
    p = [8.0, 11.0, 24.0]
    le = [math.log2(emu[2 * i] + 1e-300) for i in range(3)]
    lc = math.log2(cand + 1e-300)
    beyond = False
    if cand == 0:
        bits = math.inf
    elif lc <= le[2]:
        bits = p[2]
    elif lc >= le[0]:
        slope = (le[1] - le[0]) / (p[1] - p[0])
        bits = p[0] + (lc - le[0]) / slope if slope < 0 else p[0]
        beyond = cand > 4 * emu[0]  # check.c: 2 bits worse than bf16 accumulation
    else:
        i = 0 if lc >= le[1] else 1
        t = (le[i] - lc) / (le[i] - le[i + 1]) if le[i] != le[i + 1] else 0.0
        bits = p[i] + t * (p[i + 1] - p[i])
    masked = (not beyond) and emu[0] < 1.5 * emu[4]  # check.c: the output rounding swamps it
    d = {"workload": case.workload, "output": output, "effective_bits": bits, "closest": EMU[closest][0],
         "beyond_8bit": beyond, "unresolvable": masked, "candidate_error": cand,
         "emulation_errors": {EMU[e][0]: emu[e] for e in range(len(EMU))}}
    d["cause"], d["detail"] = _cause(d, closest, emu, k)
    if d["cause"] != "accumulator" and not math.isinf(bits) and not 0 <= bits <= 53:
        d["effective_bits"] = math.nan  # no bit count where no accumulator fits
    return d, None


SAME, BITS_APART, TIGHT = 1.5, 3.0, 0.25  # src/verify/check_verdict.c's CAUSE_SAME, _BITS_APART, _TIGHT
_BITS = [8, 8, 11, 11, 24, 24]


def _cause(d: Dict[str, Any], closest: int, emu: List[float], k: int) -> Tuple[str, str]:
    """(cause, detail) as src/verify/check_verdict.c's diagnosis_cause (issue #36, first slice):
    "accumulator" only where the emulations explain the error, else "unknown" with the figures."""
    c, e8, f32, bits = d["candidate_error"], emu[0], min(emu[4], emu[5]), d["effective_bits"]
    ce = emu[closest]
    apart = abs(math.log2((c + 1e-300) / (ce + 1e-300)))
    if c == 0:
        return "unknown", ("the sampled rows are exact: the error lies in rows the diagnosis did not sample, and no "
                           "accumulator figure applies")
    if d["beyond_8bit"]:
        return "unknown", ("relative error %.3g is %.1fx what 8-bit accumulation gives (%.3g): not an accumulator "
                           "effect" % (c, c / e8, e8))
    tight = apart <= TIGHT * abs(math.log2((c + 1e-300) / (f32 + 1e-300)))
    if _BITS[closest] == 24 or (not c > SAME * f32 and not tight):
        return "unknown", ("a faithful fp32 accumulator gives %s error on the sampled rows (relative error "
                           "%.3g, the kernel's %.3g): not an accumulator effect"
                           % ("the closest" if _BITS[closest] == 24 else "about the same", f32, c))
    if d["unresolvable"] and not tight:
        return "unknown", ("after rounding to the output dtype, 8- to 24-bit accumulators give the same error "
                           "(relative %.3g to %.3g), the kernel's is %.3g: not an accumulator effect" % (e8, emu[4], c))
    if not 0 <= bits <= 53:
        return "unknown", ("the accumulator emulations (relative error %.3g at 8 bits to %.3g at 24) fit no bit "
                           "count to the kernel's %.3g: not an accumulator effect" % (e8, emu[4], c))
    if abs(bits - _BITS[closest]) > BITS_APART:
        return "unknown", ("the emulations disagree: the error's size (relative %.3g) reads as ~%.1f bits, but the "
                           "closest emulation is %s (%.3g): no accumulator reproduces it"
                           % (c, bits, EMU[closest][0], ce))
    if k == 1 and apart > math.log2(SAME):
        return "unknown", ("the worst elements have one term each and no accumulator emulation of the op's inner "
                           "sums comes within %.1fx of their error (relative %.3g, closest %s %.3g): not an "
                           "accumulator effect" % (SAME, c, EMU[closest][0], ce))
    return "accumulator", ("%s ~%.1f effective bits (closest emulation %s, relative error %.3g against the kernel's "
                           "%.3g)" % ("the op's inner sums accumulated at" if k == 1 else "accumulation at", bits,
                                      EMU[closest][0], ce, c))


def line(d: Dict[str, Any]) -> str:
    """The report's diagnosis line (check_report.c's wording)."""
    s = "  diagnosis (%s, %s): " % (d["workload"], d["output"])
    if math.isinf(d["effective_bits"]):
        return s + "exact on the sampled rows"
    cause = "\n  cause: %s \u2014 %s" % (d["cause"], d["detail"]) if d.get("cause") else ""
    e = d["emulation_errors"]
    if d["beyond_8bit"]:
        return s + "error %.3g is beyond what 8-bit accumulation gives (%.3g): not an accumulator-precision " \
            "problem" % (d["candidate_error"], e["bf16 sequential"]) + cause
    if math.isnan(d["effective_bits"]) or d.get("cause", "accumulator") != "accumulator":
        return s + "relative error %.3g; accumulator emulations (sequential) 8-bit %.3g, 11-bit %.3g, fp32 %.3g" % (
            d["candidate_error"], e["bf16 sequential"], e["11-bit sequential"], e["fp32 sequential"]) + cause
    return s + "effective accumulator ~%.1f bits, closest to %s%s" % (
        d["effective_bits"], d["closest"], " (weak evidence: after rounding to the output dtype, 8- and 24-bit "
        "accumulation differ by < 1.5x on the sampled rows)" if d["unresolvable"] else "") + cause

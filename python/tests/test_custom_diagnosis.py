"""The diagnosis of declared ops (docs/custom-ops.md, "Diagnosis"): an unfaithful function of an op
with a multilinear reduction gets the built-in ops' diagnosis line (which emulated accumulator its
error looks like); without one, the report says why there is none. The C harness says the same of
the C plugin's GEMM (tests/cli_declared_ops.sh)."""
import json
import os
import sys

import numpy as np
import pytest

import parity
from test_custom_baselines import GEMM, _bf16, gemm_bf16_acc, swiglu_bf16_gate
from test_custom_ops import LOG_SOFTMAX

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from custom_op import swiglu  # noqa: E402


def gemm_fp16_acc(A, B):
    """sequential fp16 accumulator"""
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    with np.errstate(over="ignore"):  # the magnitude workload overflows fp16: inf, not diagnosed
        for k in range(A.shape[1]):
            acc = (acc + np.outer(A[:, k], B[k])).astype(np.float16).astype(np.float32)
    return acc


def gemm_scaled(A, B):
    """fp32 matmul, the result times (1 + 2^-6): a wrong scale"""
    return (A @ B) * np.float32(1 + 2 ** -6)


def _diag(op, fn):
    r = parity.check(op, fn, workloads="quick", dtype="f32", like="numpy")
    assert r.verdict == "unfaithful", str(r)
    k = json.loads(r.to_json())["kernels"][0]
    return r, k.get("diagnosis"), k.get("no_diagnosis")


def test_narrow_accumulators_are_named():
    # The functions are the emulations themselves (sequential, fp32 products, one rounding per
    # addition but for float32's own rounding before the cast: rare double-rounding ties), so the
    # candidate's error is the emulation's and the effective bits land on 8 (bf16) and 11 (fp16
    # significand; the 11-bit emulation's 8-bit exponent only differs where fp16 overflows, and
    # such non-finite workloads are not diagnosed). 0.5 bit of slack for the ties.
    pytest.importorskip("ml_dtypes")
    r, d, _ = _diag(GEMM, gemm_bf16_acc)
    assert d["closest"] == "bf16 sequential" and abs(d["effective_bits"] - 8) <= 0.5, d
    assert "diagnosis (%s, C): effective accumulator ~8.0 bits, closest to bf16 sequential" % d["workload"] in str(r)
    assert d["cause"] == "accumulator" and "\n  cause: accumulator \u2014 accumulation at ~8.0" in str(r), d
    r, d, _ = _diag(GEMM, gemm_fp16_acc)
    assert d["closest"] == "11-bit sequential" and abs(d["effective_bits"] - 11) <= 0.5, d
    for w in r.workloads:  # per workload too, where diagnosed
        if w.diagnosis:
            assert w.diagnosis["closest"].startswith("11-bit"), (w.name, w.diagnosis)


def test_cause_has_no_impossible_bit_count():
    # C's figures (tests/test_diagnosis.c): log_softmax's bf16_steps mutant on text, where the
    # output's rounding hides the accumulator and the old extrapolation read ~-219 bits. Issue #36,
    # first slice: "unknown", the bits NaN, the line without accumulator wording.
    from parity import _custom_diagnosis as cd
    emu = [0.03943, 0.03945, 0.03929, 0.03929, 0.03929, 0.03929]
    d = {"workload": "text", "output": "logprobs", "effective_bits": -219.1, "closest": "bf16 pairwise",
         "beyond_8bit": False, "unresolvable": True, "candidate_error": 0.0521,
         "emulation_errors": {cd.EMU[e][0]: emu[e] for e in range(6)}}
    d["cause"], d["detail"] = cd._cause(d, 1, emu, 50257)
    assert d["cause"] == "unknown", d
    d["effective_bits"] = float("nan")
    ln = cd.line(d)
    assert "effective accumulator" not in ln and "~-" not in ln and "\n  cause: unknown \u2014 " in ln, ln


def test_the_error_measure_by_hand():
    # The measure is the RMS over the diagnosis rows (all 16 rows of C here: fewer than 64) of
    # err / sum |terms|. For C (1 + 2^-6) the error is 2^-6 C up to fp32's own rounding (relative
    # 2^-24 sqrt(K) ~ 1e-6 of sum |terms|, against 2^-6 |C| / sum |terms| ~ 1e-3), so the measure
    # must be 2^-6 RMS(C / sum |terms|), computed here from the case: 1e-3 relative.
    from parity import _custom as custom
    r = parity.check(GEMM, gemm_scaled, workloads=["base"], dtype="f32", like="numpy")
    d = r.workloads[0].diagnosis
    case = custom.CustomCase(GEMM, "base", 1, "f32")
    want = 2.0 ** -6 * np.sqrt(np.mean((case.ref["C"] / case.s_acc["C"]) ** 2))
    assert d["candidate_error"] == pytest.approx(want, rel=1e-3), (d, want)
    # ... which is of the size a bf16 accumulator gives (measured 0.0010 against the bf16
    # sequential emulation's 0.0018 and the 11-bit one's 0.00023): the diagnosis measures the
    # error's size, so it cannot tell a wrong scale from a narrow accumulator (docs/custom-ops.md).
    assert d["closest"].startswith("bf16"), d


def test_no_diagnosis_without_a_multilinear_reduction():
    pytest.importorskip("ml_dtypes")
    r, d, why = _diag(swiglu, swiglu_bf16_gate)
    assert d is None and why == "no reduction declared"
    assert "  no diagnosis: no reduction declared" in str(r)

    def bf16_sum(logits):
        """log-softmax with the sum of exponentials rounded to bf16"""
        z = logits - logits.max(axis=-1, keepdims=True)
        return (z - np.log(_bf16(np.exp(z).sum(axis=-1, keepdims=True)))).astype(np.float32)
    r, d, why = _diag(LOG_SOFTMAX, bf16_sum)
    assert d is None and why.startswith("the declared reduction is not multilinear")

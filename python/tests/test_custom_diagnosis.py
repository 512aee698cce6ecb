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
    # such non-finite workloads read unknown with no emulation, closest null). 0.5 bit of slack
    # for the ties.
    pytest.importorskip("ml_dtypes")
    r, d, _ = _diag(GEMM, gemm_bf16_acc)
    assert d["closest"] == "bf16 sequential" and abs(d["effective_bits"] - 8) <= 0.5, d
    assert "diagnosis (%s, C): effective accumulator ~8.0 bits, closest to bf16 sequential" % d["workload"] in str(r)
    assert d["cause"] == "accumulator" and "\n  cause: accumulator \u2014 accumulation at ~8.0" in str(r), d
    r, d, _ = _diag(GEMM, gemm_fp16_acc)
    assert d["closest"] == "11-bit sequential" and abs(d["effective_bits"] - 11) <= 0.5, d
    for w in r.workloads:  # per workload too, where diagnosed
        if w.diagnosis and w.diagnosis["closest"] is not None:
            assert w.diagnosis["closest"].startswith("11-bit"), (w.name, w.diagnosis)
        elif w.diagnosis:  # fp16 overflows on magnitude: no emulation compares, said plainly
            assert w.diagnosis["cause"] == "unknown" and "NaN or Inf" in w.diagnosis["detail"], (w.name, w.diagnosis)


def test_the_error_measure_by_hand():
    # The measure is the RMS over the diagnosis rows (all 16 rows of C here) of err / sum |terms|.
    # For C (1 + 2^-6) the error is 2^-6 C up to fp32's own rounding (relative 2^-24 sqrt(K) ~ 1e-6
    # of sum |terms|, against 2^-6 |C| / sum |terms| ~ 1e-3), so the kernel's measure, which the
    # cause's detail prints ("against the kernel's X"), must be 2^-6 RMS(C / sum |terms|), computed
    # here from the inputs in float64: 1e-2 relative (the detail prints 3 digits).
    import re
    r = parity.check(GEMM, gemm_scaled, workloads=["base"], dtype="f32", like="numpy")
    d = r.workloads[0].diagnosis
    x = parity.inputs(GEMM, "base", dtype="f32", like="numpy")
    A, B = np.asarray(x["A"], np.float64), np.asarray(x["B"], np.float64)
    want = 2.0 ** -6 * np.sqrt(np.mean(((A @ B) / (np.abs(A) @ np.abs(B))) ** 2))
    got = float(re.search(r"against the kernel's ([0-9.e+-]+)", d["detail"]).group(1))
    assert got == pytest.approx(want, rel=1e-2), (d, want)
    # ... which is of the size a bf16 accumulator gives (measured 0.0011 against the bf16
    # sequential emulation's 0.0019): the diagnosis measures the error's size, so it cannot tell
    # a wrong scale from a narrow accumulator (docs/custom-ops.md); its match (the fraction of
    # elements the emulation reproduces) says how little it explains.
    assert d["closest"].startswith("bf16") and d["match"] < 0.5, d


def test_no_diagnosis_without_a_multilinear_reduction():
    pytest.importorskip("ml_dtypes")
    r, d, why = _diag(swiglu, swiglu_bf16_gate)
    assert d is None and "diagnosis (" not in str(r), str(r)

    def bf16_sum(logits):
        """log-softmax with the sum of exponentials rounded to bf16"""
        z = logits - logits.max(axis=-1, keepdims=True)
        return (z - np.log(_bf16(np.exp(z).sum(axis=-1, keepdims=True)))).astype(np.float32)
    r, d, why = _diag(LOG_SOFTMAX, bf16_sum)
    assert d is None and "diagnosis (" not in str(r), str(r)

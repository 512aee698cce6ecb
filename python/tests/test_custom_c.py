"""The C declared-op harness (src/custom/custom_tol.c, `parity check --op-plugin`) and the Python one
(python/parity/custom.py) are two implementations of one specification (docs/custom-ops.md):
the empirical floor computed by libparity's parity_custom_floor equals the Python floor on the
same reference and contract evaluation, for an elementwise op (SwiGLU, F = 2) and a declared
non-multilinear reduction (log-softmax, F = 2 sqrt(V)), to 1e-12 relative on every element.
(The error-model path is verify.c's gamma/lambda in both; the C GEMM's verdicts are checked by
tests/cli_declared_ops.sh.)"""
import ctypes
import os
import sys

import numpy as np
import pytest

from parity import custom

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from custom_op import swiglu  # noqa: E402
from test_custom_ops import LOG_SOFTMAX  # noqa: E402


def _libparity():
    exe = os.environ.get("PARITY")  # a build tree's CLI, or an installed package's bin/parity
    cands = [os.path.join(os.path.dirname(exe), d, "libparity.so") for d in (".", "../lib")] if exe else []
    p = next((c for c in cands if os.path.exists(c)), None)
    if p is None:
        pytest.skip("libparity.so not found beside $PARITY or in ../lib (ctest sets PARITY)")
    lib = ctypes.CDLL(p)
    f = lib.parity_custom_floor
    f.restype = ctypes.c_double
    P = ctypes.POINTER(ctypes.c_double)
    f.argtypes = [P, P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, P]
    return f


def _c_floor(f, ref, got, k):
    ref = np.ascontiguousarray(ref, dtype=np.float64)
    got = np.ascontiguousarray(got, dtype=np.float64)
    rows, cols = ref.reshape(-1, ref.shape[-1]).shape
    tol = np.empty_like(ref)
    P = ctypes.POINTER(ctypes.c_double)
    F = f(ref.ctypes.data_as(P), got.ctypes.data_as(P), rows, cols, k, tol.ctypes.data_as(P))
    return F, tol


@pytest.mark.parametrize("op,out,workload", [(swiglu, "y", "outlier-ch"), (swiglu, "y", "magnitude"),
                                             (LOG_SOFTMAX, "logprobs", "base"), (LOG_SOFTMAX, "logprobs", "odd")])
def test_c_floor_equals_python_floor(op, out, workload):
    f = _libparity()
    case = custom.CustomCase(op, workload, 1, "bf16")
    got = case.contract_eval()[out].astype(np.float64)
    k = case.model[out]["k"] if out in op.reductions else 0
    F, tol = _c_floor(f, case.ref[out], got, k)
    assert F == pytest.approx(case.model[out]["factor"], rel=1e-15)
    np.testing.assert_allclose(tol, case.tol[out], rtol=1e-12, atol=0)

"""parity.Op.from_plugin (python/parity/_custom_plugin.py): an op declared in C through op_abi.h
(tests/plugins/declared.c), loaded into the Python package with its reference running in C, and
judged like any parity.Op: the loaded GEMM gives the Python-declared GEMM's err/tol, SwiGLU's
verdicts, the power self-test with C's mutants, the text workload for token ids."""
import os

import numpy as np
import pytest

import parity
from conftest import cli
from test_custom_baselines import GEMM, gemm_bf16_acc, gemm_f32, swiglu_bf16_gate, swiglu_f32


def _plugin():
    exe = cli()
    p = os.path.join(os.path.dirname(exe), "tests", "plugins", "libparity_declared.so") if exe else ""
    if not os.path.exists(p):
        pytest.skip("the declared-op test plugin is not built beside $PARITY")
    return p


def test_loaded_gemm_is_the_python_gemm():
    # Same name, dimensions, roles and seed: the same numpy draws. The error model is the same
    # formula; the references differ only in summation order (C's sequential loop, numpy's BLAS),
    # which moves ref and sum |terms| by ~K u64 = 6e-14 relative, against errors of 1e-7 or more
    # relative: err/tol equal to 1e-6.
    pytest.importorskip("ml_dtypes")
    g = parity.Op.from_plugin(_plugin(), "gemm_declared")
    assert g.multilinear and g.reductions == {"C": ["K"]} and g.shapes == GEMM.shapes
    for fn in (gemm_f32, gemm_bf16_acc):
        rc = parity.check(g, fn, workloads="quick", dtype="f32", like="numpy")
        rp = parity.check(GEMM, fn, workloads="quick", dtype="f32", like="numpy")
        assert rc.verdict == rp.verdict
        for a, b in zip(rc.workloads, rp.workloads):
            assert a.name == b.name and a.err_over_tol == pytest.approx(b.err_over_tol, rel=1e-6), (a, b)
    assert rc.diagnosis["closest"] == "bf16 sequential"  # the diagnosis runs on the C reference too


def test_loaded_swiglu_verdicts_and_power():
    pytest.importorskip("ml_dtypes")
    s = parity.Op.from_plugin(_plugin(), "swiglu_fwd")
    assert parity.check(s, swiglu_f32, workloads="quick", dtype="f32", like="numpy").ok
    bad = parity.check(s, swiglu_bf16_gate, workloads="quick", dtype="f32", like="numpy", baselines=True)
    assert bad.verdict == "unfaithful" and bad.baselines["hipdnn"]["applies"] is False
    t = parity.power(s, dtype="bf16")
    # A C reference computes in F64/F32 only: C's bf16-out/fp16-out mutants, not bf16-math.
    assert [r["mutant"] for r in t.rows if r["workload"] == "base"] == [
        "control", "bf16-out", "fp16-out", "inputs-lower", "row-dropped", "col-dropped", "tail-dropped"]
    assert t.caught("control") is False and t.caught("bf16-out") is True and t.caught("tail-dropped") is None


def test_loaded_token_ids_and_refusals():
    g = parity.Op.from_plugin(_plugin(), "gather_declared")
    assert [w[0] for w in g.workloads()] == ["base", "zipf", "text", "odd", "magnitude"]

    def gather(ids, E):
        """row copy"""
        return E[ids]
    r = parity.check(g, gather, dtype="f32", like="numpy")
    assert r.ok and all(w.err_over_tol == 0 for w in r.workloads), str(r)
    with pytest.raises(ValueError, match="declares 4 ops: name one"):
        parity.Op.from_plugin(_plugin())
    with pytest.raises(ValueError, match="declares no op named nosuch"):
        parity.Op.from_plugin(_plugin(), "nosuch")
    ids = np.zeros(3, np.int64)
    assert g.reference(ids=ids, E=np.arange(8 * 1024, dtype=np.float64).reshape(1024, 8)).shape == (3, 8)

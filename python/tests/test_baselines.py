"""parity.check(..., baselines=True): the seven baseline rules' verdicts on a Python function,
each on its own input scheme, in the report as in the CLI's JSON (docs/baselines.md)."""
import json

import numpy as np

import parity

RULES = ["sol-execbench", "kernelbench", "assert_close", "flash-attn", "ck", "hipdnn", "flashinfer"]


def gemm_f64(A, B):
    """Faithful: the product in float64, rounded once to float32."""
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def gemm_ktail(A, B):
    """Drops the last term of every K-sum (a loop bound off by one)."""
    return (A[:, :-1].astype(np.float64) @ B[:-1].astype(np.float64)).astype(np.float32)


def gemm_half(A, B):
    """Grossly wrong: half the product."""
    return (0.5 * (A.astype(np.float64) @ B.astype(np.float64))).astype(np.float32)


def check(fn):
    return parity.check("gemm", fn, workloads=["odd-k1000"], dtype="f32", like="numpy",
                        baselines=True, floor=False)


def test_faithful_passes_every_rule():
    rep = check(gemm_f64)
    assert rep.ok, str(rep)
    assert rep.baselines is not None and sorted(rep.baselines) == sorted(RULES)
    for name, b in rep.baselines.items():
        assert b["caught"] is False, (name, b)
        assert b["pass_fraction"] == 1.0
        assert b["rule"]
    # The JSON carries the same matrix, the text the detection matrix.
    d = json.loads(rep.to_json())
    assert sorted(d["kernels"][0]["baselines"]) == sorted(RULES)
    assert "detection matrix" in str(rep)


def test_gross_error_caught_by_every_rule():
    rep = check(gemm_half)
    assert not rep.ok
    for name, b in rep.baselines.items():
        assert b["caught"] is True, (name, b)
        assert b["margin"] > 1


def test_dropped_tail_escapes_the_loose_rules():
    # One product of the K-sum missing: parity catches it on K = 1000; KernelBench's allclose
    # (atol = rtol = 1e-2) on its torch.rand 512^3 product (|C| ~ 128, one product ~ 0.25)
    # does not.
    rep = check(gemm_ktail)
    assert rep.verdict == "unfaithful"
    assert rep.baselines["kernelbench"]["caught"] is False


def test_without_baselines_no_matrix():
    rep = parity.check("gemm", gemm_f64, workloads=["odd-k1000"], dtype="f32", like="numpy", floor=False)
    assert rep.baselines is None
    assert "detection matrix" not in str(rep)

"""The baselines matrix for declared ops (parity.check(op, fn, baselines=True), docs/custom-ops.md
"Baselines"): on a declared SwiGLU (elementwise) and a declared GEMM (a multilinear reduction),
the faithful functions pass every rule that applies, known-bad ones that parity flags pass at
least one weak rule (SOL-ExecBench's 99%, KernelBench's allclose: what the matrix is for), hipDNN's
rule is n/a with its reason where no multilinear reduction is declared, and the Python package
and the C harness (`parity check --op-plugin ... --baselines`) agree on which rules apply."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import parity
from parity import _custom_baselines as custom_baselines

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from custom_op import swiglu  # noqa: E402
from conftest import cli  # noqa: E402

RULES = ["sol-execbench", "kernelbench", "assert_close", "flash-attn", "ck", "hipdnn", "flashinfer"]

# The GEMM of tests/plugins/declared.c (M 16, K 512, N 8), declared in Python: K = 512 is what
# makes KernelBench's miss of a dropped K index certain (test_gemm_matrix).
GEMM = parity.Op("gemm_declared",
                 inputs={"A": parity.Input(("M", "K"), role="activation"),
                         "B": parity.Input(("K", "N"), role="weight")},
                 outputs={"C": ("M", "N")}, reference=lambda A, B: A @ B,
                 shapes={"M": [16], "K": [512], "N": [8]}, reductions={"C": ["K"]})


def _bf16(x):
    import ml_dtypes
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def swiglu_f32(a, b):
    """numpy fp32, x * sigmoid(x)"""
    with np.errstate(over="ignore"):
        return a * (np.float32(1) / (np.float32(1) + np.exp(-a))) * b


def swiglu_bf16_gate(a, b):
    """silu(a) stored in bf16 before x b (the unfused path)"""
    with np.errstate(over="ignore"):
        return _bf16(a / (np.float32(1) + np.exp(-a))) * b


def gemm_f32(A, B):
    """numpy fp32 matmul"""
    return A @ B


def gemm_ktail(A, B):
    """drops the last K index"""
    return A[:, :-1] @ B[:-1]


def gemm_bf16_acc(A, B):
    """sequential bf16 accumulator"""
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        acc = _bf16(acc + np.outer(A[:, k], B[k]))
    return acc


def _matrix(op, fn):
    r = parity.check(op, fn, workloads="quick", dtype="f32", like="numpy", baselines=True)
    assert sorted(r.baselines) == sorted(RULES)
    d = json.loads(r.to_json())
    assert d["kernels"][0]["baselines"] == json.loads(json.dumps(r.baselines)), "JSON and Report disagree"
    assert "detection matrix" in str(r) and "n/a = the rule cannot apply" in str(r)
    return r


def _caught(r):
    return {n: b["caught"] for n, b in r.baselines.items()}


def test_swiglu_matrix():
    pytest.importorskip("ml_dtypes")
    good = _matrix(swiglu, swiglu_f32)
    assert good.ok, str(good)
    # hipDNN's S (sum |products|) needs a multilinear reduction; SwiGLU declares none.
    hd = good.baselines["hipdnn"]
    assert hd["applies"] is False and hd["caught"] is None and "no reduction declared" in hd["why"]
    assert "hipdnn         n/a: no reduction declared" in str(good)
    # No false alarm: every rule that applies passes the faithful function.
    assert {n: c for n, c in _caught(good).items() if n != "hipdnn"} == {n: False for n in RULES if n != "hipdnn"}
    bad = _matrix(swiglu, swiglu_bf16_gate)
    assert bad.verdict == "unfaithful"
    # The gate's bf16 rounding is a relative error <= 2^-9 = 0.002 of silu(a) * b: inside
    # SOL-ExecBench's and KernelBench's 1e-2 + 1e-2 |r| on every element, so both pass it ...
    assert bad.baselines["sol-execbench"]["caught"] is False
    assert bad.baselines["kernelbench"]["caught"] is False
    # ... while assert_close's fp32 rtol 1.3e-6 (the output is fp32) rejects it.
    assert bad.baselines["assert_close"]["caught"] is True


def test_gemm_matrix():
    pytest.importorskip("ml_dtypes")
    good = _matrix(GEMM, gemm_f32)
    assert good.ok, str(good)
    assert all(b["applies"] for b in good.baselines.values())  # a multilinear reduction: hipDNN applies
    # No false alarm, except that assert_close is not asserted: its fp32 rtol 1.3e-6 (~11 ulps)
    # with atol 1e-5 is below what a faithful fp32 sum of 512 randn products reaches on a
    # cancelling element (measured margin 0.89 with numpy's BLAS, whose blocking varies by CPU).
    assert not any(c for n, c in _caught(good).items() if n != "assert_close"), _caught(good)
    kt = _matrix(GEMM, gemm_ktail)
    assert kt.verdict == "unfaithful"
    # KernelBench: torch.rand inputs, so the dropped product a*b < 1 while every |C| is a sum of
    # 511 products of mean 1/4 and sd 0.22 (127.75 +- 5.0): allclose's 1e-2 |r| >= 1 needs
    # |C| >= 100, 5.5 sd below the mean. The miss is certain, not luck.
    assert kt.baselines["kernelbench"]["caught"] is False
    assert kt.baselines["hipdnn"]["caught"] is True  # gamma_2K S ~ 6e-5 S, one product ~ S/512
    acc = _matrix(GEMM, gemm_bf16_acc)
    assert acc.verdict == "unfaithful" and all(_caught(acc).values()), _caught(acc)


def test_rules_apply_as_the_c_harness_says():
    """Python's parity.Op and the C plugin's declarations of the same two ops: the same rules
    apply, with the same reasons; and the C matrix shows the same weak-rule misses."""
    exe = cli()
    if exe is None:
        pytest.skip("$PARITY (the CLI of this build) is not set")
    plug = os.path.join(os.path.dirname(exe), "tests", "plugins", "libparity_declared.so")
    if not os.path.exists(plug):
        pytest.skip("%s not built" % plug)
    out = {}
    for op, name in ((swiglu, "swiglu_fwd"), (GEMM, "gemm_declared")):
        js = os.path.join(os.environ.get("TMPDIR", "/tmp"), "parity_bl_%d_%s.json" % (os.getpid(), name))
        subprocess.run([exe, "check", name, "--op-plugin", plug, "--quick", "-q", "--timeout", "20",
                        "--baselines", "--json", js], stdout=subprocess.DEVNULL, check=False)
        with open(js) as f:
            d = json.load(f)
        os.unlink(js)
        ks = {k["name"].rsplit(":", 1)[1]: k["baselines"] for k in d["kernels"]}
        py = dict(zip(RULES, custom_baselines.applies(op)))
        for kn, bl in ks.items():
            assert list(bl) == RULES
            for n in RULES:
                assert bl[n]["applies"] == py[n][0], (name, kn, n)
                if not py[n][0]:
                    assert bl[n]["why"] == py[n][1]
        out[name] = ks
    sw, gm = out["swiglu_fwd"], out["gemm_declared"]
    assert sw["bf16_intermediate"]["kernelbench"]["caught"] is False
    assert sw["bf16_intermediate"]["sol-execbench"]["caught"] is False
    assert gm["ktail_drop"]["kernelbench"]["caught"] is False
    assert all(b["caught"] for b in sw["segfault"].values() if b["applies"])  # no outputs: rejected

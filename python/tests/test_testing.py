"""parity.testing.assert_faithful and parity.cases: the pytest face of the package."""
import pytest

import kernels
import parity
from conftest import needs_torch

OP = "embedding_rmsnorm_bwd"


@needs_torch
def test_assert_faithful_message():
    parity.testing.assert_faithful(OP, kernels.torch_fp32, workloads=["uniform"])
    with pytest.raises(parity.UnfaithfulError) as ei:
        parity.testing.assert_faithful(OP, kernels.torch_bf16, workloads=["text"])
    assert isinstance(ei.value, AssertionError)
    m = str(ei.value)
    lines = m.splitlines()
    assert lines[0] == ("python:kernels.torch_bf16 is unfaithful as embedding_rmsnorm_bwd "
                        "(workload text, seed 1).")
    assert lines[1].startswith("Mismatched rows: ") and " / 50513 (" in lines[1]
    assert lines[2].startswith("Greatest error over tolerance: ") and "at dE[" in lines[2]
    assert lines[3].startswith("  got ") and " ref " in lines[3] and " > tol " in lines[3]
    # closest to bf16 where index_add_ accumulates in bf16 (torch 1.13); torch 2.x sums in fp32
    # and what is left is the bf16-rounded terms (test_check.py says more)
    bf16 = kernels.index_add_accumulates_in_bf16()
    assert any(l.startswith("Diagnosis (text, dE): effective accumulator") and ("closest to bf16" in l) == bf16
               for l in lines), m
    assert lines[-1] == ("Reproduce: parity.check('embedding_rmsnorm_bwd', kernels.torch_bf16, "
                         "workloads=['text'], seed=1, dtype='bf16')")
    assert ei.value.report.verdict == "unfaithful"


def test_assert_faithful_msg_option():
    with pytest.raises(parity.UnfaithfulError, match="^mine: python:kernels.raises is crashed"):
        parity.testing.assert_faithful(OP, kernels.raises, workloads=["uniform"], like="numpy", dtype="f32",
                                       floor=False, msg=lambda m: "mine: " + m)


@pytest.mark.parametrize("case", parity.cases(OP, dtype="f32")[:2], ids=str)
def test_cases_parametrize(case):
    x = case.inputs(like="numpy")
    r = case.judge(kernels.numpy_fp32(**x, **x.dims), floor=False)
    r.assert_ok()
    assert r.verdict == "faithful" and r.workloads[0].name == case.workload

"""The cause classifier on realistic bugs written in PyTorch (issue #36; the same functions as
tests/cause_table.py's realistic rows, tests/cause_realistic.py): each names the cause planted,
with match 1, on a workload it fails. torch 1.13's bf16 log_softmax keeps the row's sum of exps
and its log in bf16 (checked bit for bit; ops/log_softmax/log_softmax.h), F.cross_entropy on bf16
logits rounds the log-probabilities too, Hugging Face's eager attention rounds q.k and then its
product with the scale, torch.set_flush_denormal runs the fp32 GEMM under FTZ/DAZ."""
import importlib.util
import json
import os

import pytest

torch = pytest.importorskip("torch")
import parity  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "cause_realistic", os.path.join(_HERE, "..", "..", "tests", "cause_realistic.py"))
cr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cr)


def _diag(op, fn, workload):
    d = json.loads(parity.check(op, fn, workloads=[workload], seed=1).to_json())["kernels"][0]
    return d["verdict"], d.get("diagnosis") or {}


@pytest.mark.parametrize("op,fn,workload,cause,words", [
    ("log_softmax", "log_softmax_bf16", "text", "intermediate-rounding", "the row's sum of exps and then its log"),
    ("cross_entropy", "cross_entropy_bf16", "text", "intermediate-rounding", "each log-probability"),
    ("attention_fwd", "attention_eager_bf16", "odd-t1031", "intermediate-rounding", "the scores q.k, and then"),
    ("gemm", "gemm_ftz", "subnormal", "flush-to-zero", "fp32 partial sums flushed"),
    ("rmsnorm_fwd", "rmsnorm_unbiased", "small-x", "parameter", "divisor"),
    ("rmsnorm_fwd", "rmsnorm_eps_1e6", "small-x", "parameter", "eps"),
    ("attention_bwd", "attention_bwd_autograd", "long-causal", "ignored-input", "the given O"),
])
def test_realistic_bug_names_its_cause(op, fn, workload, cause, words):
    f = getattr(cr, fn)
    try:
        verdict, d = _diag(op, f, workload)
    except NotImplementedError as e:  # gemm_ftz on a CPU without a flush-to-zero mode
        pytest.skip(str(e))
    assert verdict == "unfaithful", (verdict, d)
    assert d.get("cause") == cause and words in d.get("detail", ""), d
    assert d.get("match") == 1, d


@pytest.mark.parametrize("op,fn,workload", [
    ("log_softmax", "log_softmax_fp32", "text"), ("attention_fwd", "attention_fp32", "odd-t1031"),
    ("gemm", "gemm_fp32", "subnormal"), ("rmsnorm_fwd", "rmsnorm_fp32", "small-x"),
])
def test_faithful_torch_gets_no_cause(op, fn, workload):
    verdict, d = _diag(op, getattr(cr, fn), workload)
    assert verdict == "faithful" and not d, (verdict, d)

"""parity.check on Python functions: verdicts, diagnosis, the harness's checks, and agreement
with the CLI on the same kernel (the Python layer must judge exactly as `parity check`)."""
import json
import subprocess

import numpy as np
import pytest

import kernels
import parity
from conftest import cli, needs_cli, needs_cuda, needs_torch

OP = "embedding_rmsnorm_bwd"


@needs_torch
def test_torch_fp32_faithful_and_bf16_unfaithful_with_diagnosis():
    good = parity.check(OP, kernels.torch_fp32, workloads=["uniform", "text"], floor=False)
    assert good.verdict == "faithful" and good.ok, str(good)
    assert [w.name for w in good.workloads] == ["uniform", "text"]
    assert all(0 < w.err_over_tol <= 1 for w in good.workloads)
    bad = parity.check(OP, kernels.torch_bf16, workloads=["text"])
    assert bad.verdict == "unfaithful" and not bad.ok
    w = bad.workloads[0]
    assert w.err_over_tol > 1 and w.rows_failed > 0
    if kernels.index_add_accumulates_in_bf16():
        # The diagnosis names bf16 accumulation (the emulation closest to the error) and ~8 bits.
        assert bad.diagnosis["closest"].startswith("bf16"), bad.diagnosis
        assert 6 <= bad.diagnosis["effective_bits"] <= 10, bad.diagnosis
        assert "closest to bf16" in str(bad)
    else:
        # torch >= 2 on the CPU sums duplicate indices of a bf16 index_add_ in fp32 and rounds
        # once (measured: torch 2.15, kernels.index_add_accumulates_in_bf16): what is left is the
        # terms rounded to bf16 (dx.bfloat16()), one bf16 rounding per term, and the diagnosis
        # says so -- more bits than a bf16 accumulator, fewer than fp32's 24.
        assert not bad.diagnosis["closest"].startswith("bf16"), bad.diagnosis
        assert 8 < bad.diagnosis["effective_bits"] <= 14, bad.diagnosis



def test_numpy_implementation_is_judged():
    r = parity.check(OP, kernels.numpy_fp32, workloads=["uniform"], dtype="f32", like="numpy")
    assert r.verdict == "faithful", str(r)
    r16 = parity.check(OP, kernels.numpy_f16_accum, workloads=["zipf1.4"], dtype="f32", like="numpy", floor=False)
    assert r16.verdict == "unfaithful", str(r16)


def test_numpy_gets_bf16_as_bits():
    seen = {}

    def look(dy, x, gamma, ids, eps, V):
        seen["dtype"] = dy.dtype
        f = lambda a: (a.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
        return kernels.numpy_fp32(f(dy), f(x), f(gamma), ids, eps, V)

    r = parity.check(OP, look, workloads=["uniform"], dtype="bf16", like="numpy", floor=False)
    assert seen["dtype"] == np.uint16 and r.verdict == "faithful", str(r)


def _cli_json(kernel, workload, tmp_path, floor=True):
    out = tmp_path / ("%s.json" % kernel)
    cmd = [cli(), "check", OP, "--kernel", "builtin:" + kernel, "--workload", workload, "-q", "--json", str(out)]
    if not floor:
        cmd.append("--no-floor")
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    return json.loads(out.read_text())["kernels"][0]


@needs_cli
@pytest.mark.parametrize("kernel", ["fp32_seq", "bf16_accum", "no_zero_init", "tail_d128"])
def test_same_judgement_as_the_cli(kernel, tmp_path):
    from parity import _builtin
    try:
        fn = _builtin.kernel(OP, kernel)
    except ValueError:
        pytest.skip("no catalog kernel %s" % kernel)
    floor = kernel == "fp32_seq"  # the floor once (it is the same C code either way)
    r = parity.check(OP, fn, workloads=["uniform"], like="numpy", dtype=fn.in_dtype, out_dtype=fn.out_dtype,
                     floor=floor)
    k = _cli_json(kernel, "uniform", tmp_path, floor=floor)
    mine = r.to_dict()["kernels"][0]
    assert mine["verdict"] == k["verdict"]
    a, c = mine["workloads"][0], k["workloads"][0]
    for key in ("verdict", "max_err_over_tol", "max_err_over_worst_case_bound", "noise_floor", "rows_judged",
                "rows_failed", "worst", "worst_rows", "diagnosis"):
        assert a.get(key) == c.get(key), key


def test_report_text_and_json():
    r = parity.check(OP, kernels.numpy_f16_accum, workloads=["zipf1.4"], dtype="f32", like="numpy", floor=False)
    d = json.loads(r.to_json())
    assert d["schema"] == "parity.check/1" and d["op"] == OP
    k = d["kernels"][0]
    assert k["name"] == "python:kernels.numpy_f16_accum" and k["verdict"] == "unfaithful"
    assert k["reproduce"].startswith("parity.check('embedding_rmsnorm_bwd', kernels.numpy_f16_accum, workloads=['zipf1.4']")
    t = str(r)
    assert t.startswith("parity check embedding_rmsnorm_bwd  (seed 1)")
    assert "reproduce: parity.check(" in t and "summary: 1 kernel(s), 0 faithful, 1 not" in t
    assert "<table>" in r._repr_html_()


@needs_torch
def test_out_functions_get_guarded_buffers():
    r = parity.check(OP, kernels.torch_out, workloads=["uniform"], floor=False)
    assert r.verdict == "faithful", str(r)
    # Rows without tokens left unwritten: NaN in the first run (the judged one) -> unfaithful.
    p = parity.check(OP, kernels.torch_out_partial, workloads=["zipf1.4"], floor=False)
    assert p.verdict == "unfaithful" and "NaN" in p.workloads[0].detail, str(p)


@needs_torch
def test_modified_inputs_and_nondeterminism():
    m = parity.check(OP, kernels.torch_modifies, workloads=["uniform"], floor=False)
    assert m.verdict == "modified-inputs" and "dy" in m.workloads[0].detail
    n = parity.check(OP, kernels.torch_stateful, workloads=["uniform"], floor=False)
    assert n.verdict == "nondeterministic", str(n)


def test_failures_of_the_function_are_verdicts():
    r = parity.check(OP, kernels.raises, workloads=["uniform"], like="numpy", dtype="f32", floor=False)
    assert r.verdict == "crashed" and "ValueError: no kernel for this shape" in r.workloads[0].detail
    s = parity.check(OP, kernels.wrong_shape, workloads=["uniform"], like="numpy", dtype="f32", floor=False)
    assert s.verdict == "crashed" and "shape" in s.workloads[0].detail


def test_workload_selection_and_errors():
    with pytest.raises(ValueError, match="no workload 'nope'"):
        parity.check(OP, kernels.numpy_fp32, workloads="nope", like="numpy")
    with pytest.raises(ValueError, match="no op"):
        parity.check("no_such_op", kernels.numpy_fp32)
    quick = [w["name"] for w in parity.op_info(OP)["workloads"] if not w["production"]]
    assert "prod" not in quick and len(quick) >= 5
    r = parity.check(OP, kernels.numpy_fp32, workloads="uniform@64x32x100", like="numpy", dtype="f32",
                     floor=False)
    assert r.verdict == "faithful" and r.workloads[0].name == "uniform@64x32x100"


@needs_cuda
def test_cuda_inputs_on_the_device():
    r = parity.check(OP, kernels.torch_fp32, workloads=["uniform"], device="cuda")
    assert r.verdict == "faithful", str(r)
    b = parity.check(OP, kernels.torch_bf16, workloads=["text"], device="cuda")
    assert b.verdict == "unfaithful"

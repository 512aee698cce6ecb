"""parity.inputs: zero-copy views of parity's own buffers, identical to `parity gen`'s file."""
import json
import subprocess

import numpy as np
import pytest

import kernels
import parity
from conftest import cli, needs_cli, needs_torch

OP = "embedding_rmsnorm_bwd"


def test_ops_and_op_info():
    assert OP in parity.ops()
    info = parity.op_info(OP)
    assert [x["name"] for x in info["inputs"]] == ["dy", "x", "gamma", "ids"]
    assert [x["name"] for x in info["outputs"]] == ["dE", "dgamma"]
    assert "eps" in info["attrs"] and any(w["name"] == "text" for w in info["workloads"])


@needs_torch
def test_torch_views_share_parity_memory():
    import torch
    x = parity.inputs(OP, "uniform", like="torch")
    n = parity.inputs(OP, "uniform", like="numpy")
    assert x["dy"].dtype == torch.bfloat16 and n["dy"].dtype == np.uint16
    assert np.array_equal(x["dy"].view(torch.int16).numpy().view(np.uint16), n["dy"])
    a = x._case.arrays()["dy"]
    assert x["dy"].data_ptr() == a.ctypes.data  # the tensor is parity's buffer, not a copy
    assert x.dims == {"V": 4096} and parity.inputs(OP, "text").dims == {"V": 50257}  # uniform: V == N
    assert x["eps"] == x.attrs["eps"] > 0


@needs_cli
def test_inputs_equal_parity_gen(tmp_path):
    f = tmp_path / "in.safetensors"
    subprocess.run([cli(), "gen", OP, "--workload", "text", "--seed", "3", "--out", str(f)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = f.read_bytes()  # safetensors: u64 header length, JSON header, data (read by hand:
    n = int.from_bytes(raw[:8], "little")  # numpy has no bfloat16 for the safetensors package)
    header = json.loads(raw[8:8 + n])
    mine = parity.inputs(OP, "text", seed=3, dtype="bf16", like="numpy")
    for k in ("dy", "x", "gamma", "ids"):
        lo, hi = header[k]["data_offsets"]
        assert raw[8 + n + lo:8 + n + hi] == mine[k].tobytes(), k


def test_compare_judges_outputs_computed_anywhere():
    x = parity.inputs(OP, "uniform", dtype="f32", like="numpy")
    r = parity.compare(OP, x, kernels.numpy_fp32(**x, **x.dims), floor=False)
    assert r.verdict == "faithful"
    plain = {k: np.array(v) for k, v in x.tensors.items()}
    r2 = parity.compare(OP, plain, kernels.numpy_fp32(**x, **x.dims), workload="uniform", floor=False)
    assert r2.workloads[0].err_over_tol == r.workloads[0].err_over_tol
    plain["dy"][0, 0] += 1
    with pytest.raises(ValueError, match="input dy differs"):
        parity.compare(OP, plain, kernels.numpy_fp32(**x, **x.dims), workload="uniform")

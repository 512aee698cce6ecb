"""parity.problems: benchmark problems as they are (issue #37; docs/problems.md).

Every problem and solution here is written for these tests (python/tests/problems/), in the
formats SOL-ExecBench / FlashInfer-Bench and KernelBench document; none is a copy of theirs."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity.problems runs PyTorch references")

from parity import problems  # noqa: E402
from problem_helpers import cli, write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
P = os.path.join(HERE, "problems")
KB = os.path.join(P, "kernelbench")
FI = os.path.join(P, "flashinfer")
FI_DEF = os.path.join(FI, "definitions", "rmsnorm", "add_rmsnorm_h128_fi_test.json")
FI_SOL = os.path.join(FI, "solutions", "rmsnorm", "add_rmsnorm_h128_fi_test")


def _sol(problem, name):
    return os.path.join(P, problem, "solution_%s.json" % name)


def _judge(path, solution, contract):
    p = problems.load(path, contract)
    return problems.judge(p, solution, quick=True)


# -- loading: roles, sizes, scalars ------------------------------------------------------------------
def test_sol_rmsnorm_roles_and_sizes():
    p = problems.load(os.path.join(P, "sol_rmsnorm"))
    assert p.format == "sol" and p.contract == "reference"
    assert p.roles == {"x": ("activation", None), "weight": ("norm_weight", None)}
    assert p.scalars == {"eps": 1e-5}
    # base: the smallest workload with >= 8 rows (24), production: the largest (96); const axes fixed
    assert p.shapes == {"batch": [24, 96], "hidden": [256]} and p.fixed == ["hidden"]
    assert p.dtype == "bf16"
    assert p.rule["name"] == "sol-execbench" and p.rule["required_matched_ratio"] == 0.99
    text = p.describe()
    assert "role norm_weight" in text and "eps" in text and "1e-05" in text


def test_flashinfer_layout_and_rule():
    p = problems.load(FI_DEF)
    assert p.format == "flashinfer" and p.shapes["batch_size"] == [8, 40]
    assert p.roles["weight"] == ("norm_weight", None)
    assert p.rule == {"name": "flashinfer-bench", "atol": 1e-2, "rtol": 1e-2, "required_matched_ratio": 1.0}


def test_kernelbench_roles():
    p = problems.load(os.path.join(KB, "rmsnorm_gamma.py"))
    assert p.format == "kernelbench" and p.dtype == "f32"
    assert p.roles == {"x": ("activation", None), "gamma": ("norm_weight", None)}
    assert list(p.outputs) == ["output"] and p.rule["atol"] == 1e-4


def test_token_ids_bounded_by_the_indexed_axis(tmp_path):
    d = {"name": "gather_rows_test", "axes": {"T": {"type": "var"}, "V": {"type": "const", "value": 100},
                                              "H": {"type": "const", "value": 16}},
         "inputs": {"ids": {"shape": ["T"], "dtype": "int64"}, "table": {"shape": ["V", "H"], "dtype": "float32"}},
         "outputs": {"out": {"shape": ["T", "H"], "dtype": "float32"}},
         "reference": "import torch\ndef run(ids, table):\n    return table[ids] * 2.0\n"}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    p = problems.load(str(tmp_path))
    assert p.roles["ids"] == ("token_ids", "V")
    j = problems.judge(p, None, quick=True)
    assert j.verdict == "faithful"
    assert [w.name for w in j.report.workloads][:3] == ["base", "zipf", "text"]


# -- the fp64 oracle ---------------------------------------------------------------------------------
def test_oracle_promotes_every_float_cast():
    p = problems.load(os.path.join(P, "sol_scaled_softmax"), "math")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 512)).astype(np.float32).astype(np.float64)  # the declared dtype's values
    y64 = p.op.reference(scores=x, scale=0.125)[0]
    assert y64.dtype == np.float64
    z = x * 0.125
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert np.max(np.abs(y64 - want) / want) < 1e-13  # the bf16 cast of the logits promoted away
    y32 = p.op.reference(scores=x.astype(np.float32), scale=0.125)[0]
    assert y32.dtype == np.float32 and np.max(np.abs(y32 - want) / want) < 1e-5  # math: fp32 throughout
    r = problems.load(os.path.join(P, "sol_scaled_softmax"), "reference")
    y_native = r.op.reference(scores=x.astype(np.float32), scale=0.125)[0]
    assert np.max(np.abs(y_native - want) / want) > 1e-4  # reference: its bf16 logits kept


def test_reference_contract_undoes_only_the_output_rounding():
    p = problems.load(os.path.join(P, "sol_gemm"), "reference")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 256)).astype(np.float32)
    b = rng.standard_normal((64, 256)).astype(np.float32)
    c = p.op.reference(A=a, B=b)[0]
    ab = torch.from_numpy(a).bfloat16().float()
    bb = torch.from_numpy(b).bfloat16().float()
    exact = (ab @ bb.T).numpy()
    assert c.dtype == np.float32 and np.array_equal(c, exact)  # not rounded to bf16 a second time


def test_view_dtype_refused(tmp_path):
    d = {"name": "bits_test", "axes": {"N": {"type": "var"}},
         "inputs": {"x": {"shape": ["N"], "dtype": "float32"}}, "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
         "reference": "import torch\ndef run(x):\n    return (x.view(torch.int32) & 0x7fffffff).view(torch.float32)\n"}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    p = problems.load(str(tmp_path))
    with pytest.raises(problems.RefusedReference, match="view\\(dtype\\)"):
        problems.judge(p, None, quick=True)


@pytest.mark.parametrize("field,edit,msg", [
    ("reference", lambda d: d.pop("reference"), "reference"),
    ("axes", lambda d: d["inputs"]["x"].update(shape=["batch", "nope"]), "inputs.x.shape"),
    ("dtype", lambda d: d["inputs"]["x"].update(dtype="float8_e4m3fn"), "inputs.x.dtype"),
])
def test_bad_definition_names_file_and_field(tmp_path, field, edit, msg):
    with open(os.path.join(P, "sol_rmsnorm", "definition.json")) as f:
        d = json.load(f)
    edit(d)
    (tmp_path / "definition.json").write_text(json.dumps(d))
    with pytest.raises(problems.ProblemFileError) as e:
        problems.load(str(tmp_path))
    assert "definition.json" in str(e.value) and msg in str(e.value)


# -- verdicts ----------------------------------------------------------------------------------------
CASES = [
    # (problem, solution, contract, parity verdict, benchmark rule verdict)
    ("sol_rmsnorm", "faithful", "reference", "faithful", "pass"),
    ("sol_rmsnorm", "faithful", "math", "faithful", "pass"),
    ("sol_rmsnorm", None, "math", "faithful", "pass"),
    ("sol_rmsnorm", "ignores_gamma", "reference", "unfaithful", "fail"),
    ("sol_rmsnorm", "wrong_eps", "reference", "unfaithful", None),
    ("sol_rmsnorm", "wrong_eps", "math", "unfaithful", None),
    ("sol_rmsnorm", "bf16_sumsq", "reference", "unfaithful", None),
    ("sol_rmsnorm", "bf16_sumsq", "math", "unfaithful", None),
    ("sol_gemm", "faithful", "reference", "faithful", "pass"),
    ("sol_gemm", "faithful", "math", "faithful", "pass"),
    ("sol_gemm", "bf16_acc", "reference", "unfaithful", None),
    ("sol_gemm", "bf16_acc", "math", "unfaithful", None),
    ("sol_gemm", "ktail", "reference", "unfaithful", None),
    ("sol_gemm", "ktail", "math", "unfaithful", None),
    ("sol_scaled_softmax", "fp32", "reference", "faithful", "pass"),
    ("sol_scaled_softmax", "fp32", "math", "faithful", "pass"),
    # a bf16 intermediate the reference performs: allowed under `reference` only
    ("sol_scaled_softmax", "bf16_logits", "reference", "faithful", "pass"),
    ("sol_scaled_softmax", "bf16_logits", "math", "unfaithful", "pass"),
    ("sol_scaled_softmax", None, "reference", "faithful", "pass"),
    ("sol_scaled_softmax", None, "math", "unfaithful", "pass"),
    # a bf16 intermediate the reference does not perform: unfaithful under both (SOL's rule passes it)
    ("sol_scaled_softmax", "bf16_exp", "reference", "unfaithful", "pass"),
    ("sol_scaled_softmax", "bf16_exp", "math", "unfaithful", "pass"),
    # a scalar output (a loss): destination-passing into a 0-d tensor, a bf16 running total, and a
    # divisor off by one column (0.2%) that SOL's 1e-2 rule passes
    ("sol_mse_loss", "faithful", "reference", "faithful", "pass"),
    ("sol_mse_loss", "faithful", "math", "faithful", "pass"),
    ("sol_mse_loss", "bf16_acc", "reference", "unfaithful", None),
    ("sol_mse_loss", "sum_not_mean", "reference", "unfaithful", "pass"),
]


@pytest.mark.parametrize("problem,solution,contract,verdict,rule", CASES)
def test_sol_verdicts(problem, solution, contract, verdict, rule):
    j = _judge(os.path.join(P, problem), None if solution is None else _sol(problem, solution), contract)
    assert j.verdict == verdict, j.text()
    if rule is not None:
        assert j.rule["verdict"] == rule, j.rule
    d = j.to_dict()
    assert d["verdict"] == verdict and d["contract"] == contract
    assert d["benchmark_rule"]["name"] == "sol-execbench" and d["benchmark_rule"]["verdict"] in ("pass", "fail")


def test_ignored_gamma_caught_by_the_roles():
    """SOL generates `random` gammas; parity's are 1 + 0.1 N(0,1) by the inferred role, so a kernel that
    ignores gamma fails by far, on every workload."""
    j = _judge(os.path.join(P, "sol_rmsnorm"), _sol("sol_rmsnorm", "ignores_gamma"), "reference")
    assert min(w.err_over_tol for w in j.report.workloads) > 10


def test_wrong_eps_caught_on_small_rows():
    j = _judge(os.path.join(P, "sol_rmsnorm"), _sol("sol_rmsnorm", "wrong_eps"), "reference")
    by = {w.name: w for w in j.report.workloads}
    assert by["base"].ok and not by["magnitude"].ok and by["magnitude"].err_over_tol > 10


@pytest.mark.parametrize("solution,contract,verdict", [
    ("python_bf16_sum", "reference", "faithful"), ("python_bf16_sum", "math", "unfaithful"),
    ("python_fp32_sum", "reference", "faithful"), ("python_fp32_sum", "math", "faithful")])
def test_flashinfer_residual_bf16(solution, contract, verdict):
    j = _judge(FI_DEF, os.path.join(FI_SOL, solution + ".json"), contract)
    assert j.verdict == verdict, j.text()
    assert j.to_dict()["benchmark_rule"]["name"] == "flashinfer-bench"


@pytest.mark.parametrize("problem,solution,contract,verdict", [
    ("rmsnorm_gamma", "faithful", "reference", "faithful"), ("rmsnorm_gamma", "faithful", "math", "faithful"),
    ("rmsnorm_gamma", "no_gamma", "reference", "unfaithful"),
    ("gemm", "faithful", "reference", "faithful"), ("gemm", "faithful", "math", "faithful"),
    ("gemm", "bf16_acc", "reference", "unfaithful"), ("gemm", "bf16_acc", "math", "unfaithful"),
    ("softmax", "faithful", "reference", "faithful"), ("softmax", "faithful", "math", "faithful"),
    ("softmax", "tail", "math", "unfaithful"), ("softmax", None, "math", "faithful"),
    # a 0-d output (KernelBench's losses); a bf16 running total the 1e-4 rule catches too
    ("mse_loss", "faithful", "reference", "faithful"), ("mse_loss", "bf16_acc", "reference", "unfaithful")])
def test_kernelbench_verdicts(problem, solution, contract, verdict):
    sol = None if solution is None else os.path.join(KB, "%s_new_%s.py" % (problem, solution))
    j = _judge(os.path.join(KB, problem + ".py"), sol, contract)
    assert j.verdict == verdict, j.text()
    assert j.to_dict()["benchmark_rule"]["name"] == "kernelbench"


def test_gpu_solutions_unsupported_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: Triton/CUDA solutions are not unsupported here")
    for path, sol, why in [(os.path.join(P, "sol_rmsnorm"), _sol("sol_rmsnorm", "triton"), "CUDA device"),
                           (os.path.join(P, "sol_gemm"), _sol("sol_gemm", "cuda"), "CUDA device"),
                           (os.path.join(KB, "gemm.py"), os.path.join(KB, "gemm_new_cuda.py"), "CUDA device")]:
        j = _judge(path, sol, "reference")
        assert j.verdict == "unsupported" and why in j.reason
        assert j.to_dict()["benchmark_rule"]["verdict"] == "not-run"


# -- the benchmarks' own rules -----------------------------------------------------------------------
def test_sol_rule():
    rule = dict(name="sol-execbench", max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99,
                max_error_cap=None, allow_negative_inf=False)
    y = np.ones(200, np.float32)
    x = y.copy()
    x[:2] += 0.5                    # 1% off: passes
    assert problems.rule_check(rule, x, y)[0]
    x[:3] += 0.5                    # 1.5% off: fails
    assert not problems.rule_check(rule, x, y)[0]
    assert not problems.rule_check(rule, np.where(np.arange(200) == 0, np.nan, y), y)[0]
    assert not problems.rule_check(rule, np.zeros(200, np.float32), y)[0]
    assert not problems.rule_check(dict(rule, max_error_cap=0.1), np.where(np.arange(200) == 0, 1.5, y), y)[0]


def test_flashinfer_rule_needs_both_atol_and_rtol():
    rule = dict(name="flashinfer-bench", atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)
    y = np.array([100.0, 1e-4], np.float32)
    assert problems.rule_check(rule, y + np.array([0.5, 0], np.float32), y)[0]       # rel 0.5% only
    assert not problems.rule_check(rule, y + np.array([2.0, 0], np.float32), y)[0]   # abs and rel over


def test_kernelbench_rule():
    rule = dict(name="kernelbench", atol=1e-4, rtol=1e-4, precision="fp32")
    y = np.ones(8, np.float32)
    assert problems.rule_check(rule, y + 1e-4, y)[0]
    assert not problems.rule_check(rule, y + 1e-3, y)[0]


# -- the CLI -----------------------------------------------------------------------------------------
_cli = cli


def test_cli_exit_codes_and_json(tmp_path):
    out = str(tmp_path / "r.json")
    r = _cli(os.path.join(P, "sol_gemm"), "--solution", _sol("sol_gemm", "faithful"), "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "parity verdict (contract reference): faithful" in r.stdout and "role activation" in r.stdout
    d = json.load(open(out))
    assert d["verdict"] == "faithful" and d["contract"] == "reference"
    assert d["benchmark_rule"]["name"] == "sol-execbench" and d["benchmark_rule"]["verdict"] == "pass"
    assert d["parity"]["kernels"][0]["verdict"] == "faithful"
    assert d["reproduce"].startswith("parity problem ") and "--solution" in d["reproduce"] and "--quick" in d["reproduce"]
    # one reproduce line in the text: the command (the inner op's parity.check lines are dropped)
    assert [x.strip() for x in r.stdout.splitlines() if "reproduce:" in x] == ["reproduce: " + d["reproduce"]]
    r = _cli(os.path.join(P, "sol_gemm"), "--solution", _sol("sol_gemm", "ktail"), "--quick", "--contract", "math")
    assert r.returncode == 1 and "unfaithful" in r.stdout
    r = _cli(os.path.join(P, "sol_gemm"), "--contract", "fp8")
    assert r.returncode == 2 and "usage" in r.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "definition.json").write_text('{"name": "x", "axes": {}, "inputs": {}}')
    r = _cli(str(bad))
    assert r.returncode == 3 and "definition.json" in r.stderr and "outputs" in r.stderr


def test_cli_folder_of_problems(tmp_path):
    out = str(tmp_path / "all.json")
    r = _cli(KB, "--quick", "--json", out)   # no solution: each problem's own Model, natively
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(out))
    names = sorted(x["problem"]["name"] for x in d["problems"])
    assert names == ["gemm", "mse_loss", "rmsnorm_gamma", "softmax"] and d["verdict"] == "faithful"
    assert "summary" in r.stdout


BIG_KB = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.lin = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.softmax(self.lin(x), dim=1)


batch_size = 16384
in_features = 8192
out_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''


def test_kernelbench_too_large_is_scaled(tmp_path):
    """A problem sized for a GPU (16384 x 8192 inputs, a 8192 x 4096 Linear: 168M elements) is sized
    on the meta device, never drawn, and its module-level size constants halved together until
    inputs, parameters and outputs fit; the model and get_inputs see the same constants."""
    f = tmp_path / "big_linear_softmax.py"
    f.write_text(BIG_KB)
    p = problems.load(str(f))
    # inputs, parameters and outputs counted (the output is batch x out_features), every size halved
    # together (4 times: 234M elements -> 0.9M), so their proportions stay
    assert p.shapes == {"x_0": [1024], "x_1": [512], "out0_1": [256]}, p.shapes
    assert any("batch_size 16384 -> 1024, in_features 8192 -> 512, out_features 4096 -> 256" in n for n in p.notes)
    small = problems.load(str(f), max_elems=1 << 13)
    assert small.shapes["x_0"][0] * small.shapes["x_1"][0] <= 1 << 13 and any("scaled" in n for n in small.notes)
    j = problems.judge(small, None, quick=True)
    assert j.verdict == "faithful" and "scaled shapes" in j.text()


def test_roles_sidecar(tmp_path):
    import shutil
    d = tmp_path / "p"
    shutil.copytree(os.path.join(P, "sol_rmsnorm"), str(d))
    (d / "parity_roles.json").write_text(json.dumps({"roles": {"x": "gradient"}}))
    p = problems.load(str(d))
    assert p.roles["x"] == ("gradient", None) and "parity_roles.json" in p.describe()
    (d / "parity_roles.json").write_text(json.dumps({"roles": {"nope": "gradient"}}))
    with pytest.raises(problems.ProblemFileError, match="parity_roles.json"):
        problems.load(str(d))


# -- the problem's own workloads ---------------------------------------------------------------------
def test_own_workloads_judged_unless_quick():
    p = problems.load(os.path.join(P, "sol_rmsnorm"))
    j = problems.judge(p, _sol("sol_rmsnorm", "faithful"))
    names = [w.name for w in j.report.workloads]
    assert names[-3:] == ["wl-1", "wl-2", "wl-3"] and "production" in names, names
    assert j.verdict == "faithful" and j.rule["verdict"] == "pass"
    assert {c["workload"] for c in j.rule["calls"]} >= {"wl-1", "wl-2", "wl-3"}
    assert any("own workloads judged" in n for n in j.problem.notes)
    q = problems.judge(p, _sol("sol_rmsnorm", "faithful"), quick=True)
    assert not any(w.name.startswith("wl-") for w in q.report.workloads)


def test_custom_inputs_two_outputs_one_op():
    """A linear backward (dx = dy w, dw = dy^T x: each output linear in a different pair) is one
    declared op; the workloads' custom inputs come from the definition's custom_inputs_entrypoint."""
    d = os.path.join(P, "sol_linear_bwd")
    j = problems.judge(problems.load(d, "math"), _sol("sol_linear_bwd", "faithful"))
    assert j.verdict == "faithful" and [w.name for w in j.report.workloads][-2:] == ["wl-1", "wl-2"]
    bad = problems.judge(problems.load(d), _sol("sol_linear_bwd", "bf16_dw"))
    assert bad.verdict == "unfaithful" and all(w.err_over_tol > 100 for w in bad.report.workloads)


_write_safetensors = write_safetensors


def test_safetensors_inputs(tmp_path):
    import shutil
    d = tmp_path / "p"
    shutil.copytree(os.path.join(P, "sol_rmsnorm"), str(d))
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(12, 256, generator=g) * 1e-3).bfloat16()  # small rows: eps matters
    w = (1 + 0.1 * torch.randn(256, generator=g)).bfloat16()
    _write_safetensors(str(d / "inputs.safetensors"), {"x": x, "weight": w})
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "st", "axes": {"batch": 12}, "inputs": {
        "x": {"type": "safetensors", "path": "inputs.safetensors", "tensor_key": "x"},
        "weight": {"type": "safetensors", "path": "inputs.safetensors", "tensor_key": "weight"},
        "eps": {"type": "scalar", "value": 1e-5}}}) + "\n")
    p = problems.load(str(d))
    dicts, args, _ = problems.own_workloads(p)
    assert torch.equal(args["wl-1"]["x"], x) and torch.equal(args["wl-1"]["weight"], w)
    j = problems.judge(p, _sol("sol_rmsnorm", "wrong_eps"))
    by = {w.name: w for w in j.report.workloads}
    assert not by["wl-1"].ok and by["wl-1"].err_over_tol > 10, by["wl-1"]


def test_autocast_inside_a_reference_is_promoted_away(tmp_path):
    """A reference that runs its GEMM under autocast(bfloat16): the oracle ignores autocast (fp64
    throughout), `math` runs it in fp32, `reference` keeps the bf16 GEMM of autocast."""
    d = {"name": "autocast_gemm_test", "axes": {"M": {"type": "var"}, "K": {"type": "const", "value": 128},
                                                "N": {"type": "const", "value": 32}},
         "inputs": {"a": {"shape": ["M", "K"], "dtype": "float32"}, "b": {"shape": ["K", "N"], "dtype": "float32"}},
         "outputs": {"c": {"shape": ["M", "N"], "dtype": "float32"}},
         "reference": ("import torch\n\ndef run(a, b):\n    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
                       "        c = a @ b\n    return c.float()\n")}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 128)).astype(np.float32)
    b = rng.standard_normal((128, 32)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    p = problems.load(str(tmp_path), "math")
    assert np.max(np.abs(p.op.reference(a=a.astype(np.float64), b=b.astype(np.float64))[0] - exact)) < 1e-9
    assert np.max(np.abs(p.op.reference(a=a, b=b)[0] - exact)) < 1e-3
    native = problems.load(str(tmp_path), "reference").op.reference(a=a, b=b)[0]
    assert np.max(np.abs(native - exact)) > 1e-2  # bf16 autocast kept under `reference`
    j = problems.judge(problems.load(str(tmp_path), "math"), None, quick=True)
    assert j.verdict == "unfaithful"  # the reference itself breaks `math`
    assert problems.judge(problems.load(str(tmp_path), "reference"), None, quick=True).verdict == "faithful"


def test_kernelbench_precision_bf16():
    """KernelBench's precision option: inputs and models cast to bf16, its 1e-2 tolerance. The bf16
    model keeps its own contract and breaks `math` (its softmax computes in bf16)."""
    f = os.path.join(KB, "softmax.py")
    p = problems.load(f, "math", precision="bf16")
    assert p.dtype == "bf16" and p.inputs["x"]["dtype"] == "bfloat16" and p.outputs["output"]["dtype"] == "bfloat16"
    assert p.rule["atol"] == p.rule["rtol"] == 1e-2 and "bf16" in problems.rule_text(p.rule)
    assert problems.judge(p, os.path.join(KB, "softmax_new_faithful.py"), quick=True).verdict == "unfaithful"
    r = problems.load(f, "reference", precision="bf16")
    assert problems.judge(r, None, quick=True).verdict == "faithful"
    assert problems.judge(r, os.path.join(KB, "softmax_new_tail.py"), quick=True).verdict == "unfaithful"


def test_rule_runs_on_the_judged_inputs():
    """The benchmark's rule uses the judged call as the recorder kept it (the harness's last call
    of a workload, on the inputs of its probe run): the same inputs parity.inputs regenerates."""
    import parity
    p = problems.load(os.path.join(P, "sol_rmsnorm"))
    call, label = problems.load_solution(p, _sol("sol_rmsnorm", "faithful"))
    rec = problems._Recorder(p, call, label)
    r = parity.check(p.op, rec, workloads=None, seed=3, dtype=p.dtype, like="torch", progress=rec.progress)
    for i, w in enumerate(r.workloads):
        kept = rec.judged(i)
        assert kept is not None, w.name
        again = p._torch_args(dict(parity.inputs(p.op, w.name, seed=3, dtype=p.dtype, like="torch").items()), "native")
        assert all(torch.equal(kept[0][k], again[k]) for k in ("x", "weight")), w.name


def test_cli_folder_with_solution_name(tmp_path):
    import shutil
    for name in ("sol_gemm", "sol_rmsnorm"):
        shutil.copytree(os.path.join(P, name), str(tmp_path / name))
    out = str(tmp_path / "all.json")
    r = _cli(str(tmp_path), "--solution-name", "solution_faithful.json", "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(out))
    assert [x["verdict"] for x in d["problems"]] == ["faithful", "faithful"]
    assert sorted(x["solution"].split(" (")[0] for x in d["problems"]) == ["gemm_fp32_acc", "rmsnorm_fp32_dps"]
    r = _cli(str(tmp_path), "--solution-name", "solution_ktail.json", "--quick")  # only sol_gemm has one
    assert r.returncode == 1 and "summary" in r.stdout


def test_cli_folder_jobs_same_as_one_by_one(tmp_path):
    """--jobs 2: the problems judged in two worker processes give the verdicts, the rule and the
    order of the one-by-one run; a bad problem among them is reported, the others judged."""
    import shutil
    for name in ("sol_gemm", "sol_rmsnorm"):
        shutil.copytree(os.path.join(P, name), str(tmp_path / name))
    bad = tmp_path / "sol_bad"
    bad.mkdir()
    (bad / "definition.json").write_text('{"name": "x", "axes": {}, "inputs": {}}')
    got = {}
    for jobs in ("1", "2"):
        out = str(tmp_path / ("all%s.json" % jobs))
        r = _cli(str(tmp_path), "--solution-name", "solution_bf16_acc.json", "--quick", "--jobs", jobs, "--json", out)
        assert r.returncode == 3, r.stdout + r.stderr   # the worst: the bad problem
        assert "summary" in r.stdout and "outputs" in r.stderr
        d = json.load(open(out))
        got[jobs] = [(x["problem"]["path"], x["verdict"], x.get("benchmark_rule", {}).get("verdict"))
                     for x in d["problems"]]
    assert got["1"] == got["2"], got
    # sol_gemm's bf16 accumulator fails; sol_rmsnorm has no such file: its reference is judged
    assert [v for _, v, _ in got["2"]] == ["bad-problem", "unfaithful", "faithful"], got
    r = _cli(str(tmp_path), "--jobs", "-1")
    assert r.returncode == 2 and "--jobs" in r.stderr


def test_reference_that_raises_is_a_bad_problem(tmp_path):
    d = {"name": "raises_test", "axes": {"N": {"type": "var"}},
         "inputs": {"x": {"shape": ["N"], "dtype": "float32"}}, "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
         "reference": "import torch\ndef run(x):\n    if x.dtype == torch.float64:\n"
                      "        raise RuntimeError('\"my_op\" not implemented for \\'Double\\'')\n    return x * 2\n"}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    with pytest.raises(problems.ProblemError, match="no Double path for my_op"):
        problems.judge(problems.load(str(tmp_path)), None, quick=True)
    r = _cli(str(tmp_path), "--quick")
    assert r.returncode == 3 and "the oracle" in r.stderr and "Traceback" not in r.stderr


def test_reduction_to_a_scalar_has_a_derived_tolerance():
    """An MSE over 64 x 512 terms: the declared reduction's k is one operand's terms (not both
    operands' axes multiplied), and its tolerance is the error model's accumulation term for k
    terms at most (docs/custom-ops.md), not a share of the value: below 1e-3 relative."""
    p = problems.load(os.path.join(P, "sol_mse_loss"), "reference")
    assert sorted(p.op.reductions["loss"]) == ["batch", "hidden"]
    j = problems.judge(p, _sol("sol_mse_loss", "faithful"), quick=True)
    for w in j.to_dict()["parity"]["kernels"][0]["workloads"]:
        assert w["worst"]["tol"] < 1e-3 * abs(w["worst"]["ref"]), w


# -- integer outputs (argmax, top-k indices): judged exactly ---------------------------------------
KBI = os.path.join(P, "kernelbench_int")
TOPK = os.path.join(P, "sol_topk_routing")


def test_integer_outputs_loaded_apart_from_the_float_ones():
    p = problems.load(TOPK)
    assert p.int_outputs == ["topk_indices"] and p.float_outputs == ["topk_weights"]
    assert list(p.op.outputs) == ["topk_weights"]          # the declared op: the float outputs only
    assert "judged exactly" in p.describe()
    a = problems.load(os.path.join(KBI, "argmax_dim1.py"))
    assert a.outputs == {"output": {"dtype": "int64", "shape": ["x_0", "x_2"]}}
    assert a.op is None and a.draw_op is not None          # no float output: no declared op to check


@pytest.mark.parametrize("problem,solution,verdict,rule", [
    ("argmax_dim1", None, "faithful", "pass"),
    ("argmax_dim1", "faithful", "faithful", "pass"),
    ("argmax_dim1", "argmin", "unfaithful", "fail"),
    ("argmax_dim1", "no_transpose", "unfaithful", "fail"),
    # ties toward the last index: no exact ties in randn inputs, so the same indices as torch's
    ("argmax_dim1", "last_tie", "faithful", "pass"),
    ("argmax_ties", "faithful", "faithful", "pass"),
    # on inputs that tie (values in {0..3}) it picks an index neither the oracle nor the native
    # reference picks (both take the first maximum): a difference under the stated rule
    ("argmax_ties", "last_tie", "unfaithful", "fail"),
])
def test_kernelbench_argmax(problem, solution, verdict, rule):
    sol = None if solution is None else os.path.join(KBI, "argmax_dim1_new_%s.py" % solution)
    j = _judge(os.path.join(KBI, problem + ".py"), sol, "reference")
    assert j.verdict == verdict, j.text()
    assert j.rule["verdict"] == rule, j.rule
    assert j.report is None and j.ints["verdict"] == verdict
    d = j.to_dict()
    assert d["verdict"] == verdict and d["parity"] is None and d["integer_outputs"]["outputs"] == ["output"]
    assert d["benchmark_rule"]["name"] == "kernelbench" and d["problem"]["name"] == problem
    # parity's workloads and KernelBench's own inputs (get_inputs(), where the ties are)
    assert [r["workload"] for r in d["integer_outputs"]["calls"]] == ["base", "outlier-ch", "odd", "magnitude",
                                                                      "get_inputs"]
    assert "integer outputs" in j.text() and "parity verdict (contract reference): %s" % verdict in j.text()


@pytest.mark.parametrize("solution,verdict,where", [
    ("cached", "stale-cache", "base"),
    ("edits_input", "modified-inputs", "base"),
    ("raises_on_outliers", "crashed", "outlier-ch"),
])
def test_integer_only_problems_get_the_harness(solution, verdict, where):
    """A problem with integer outputs only runs its solution through the harness too (decoy and
    probes, inputs verified, exceptions caught): right indices from a memo, from a kernel that
    scribbles on its input, or from a kernel that refuses large inputs are not faithful."""
    j = _judge(os.path.join(KBI, "argmax_dim1.py"), os.path.join(KBI, "argmax_dim1_new_%s.py" % solution),
               "reference")
    assert j.verdict == verdict, j.text()
    assert j.reason.startswith("%s on workload %s: " % (verdict, where)), j.reason
    assert j.to_dict()["verdict"] == verdict and j.report is None
    assert ("parity verdict (contract reference): %s -- %s" % (verdict, j.reason)) in j.text()


def test_argmax_difference_named():
    j = _judge(os.path.join(KBI, "argmax_ties.py"), os.path.join(KBI, "argmax_dim1_new_last_tie.py"), "math")
    bad = [r for r in j.ints["calls"] if not r["pass"]]
    assert [r["workload"] for r in bad] == ["get_inputs"]   # the role-drawn workloads do not tie
    r = bad[0]
    assert r["differ"] == r["elements"] == 16 * 64 and r["first"]["index"] == [0, 0]
    assert r["first"]["got"] > r["first"]["oracle"]          # the last of the tied maxima, not the first
    assert r["detail"].startswith("output on get_inputs: 1024 of 1024 elements differ; first at (0, 0): got ")
    assert "output on get_inputs: 1024 of 1024" in j.text()
    j = _judge(os.path.join(KBI, "argmax_dim1.py"), os.path.join(KBI, "argmax_dim1_new_argmin.py"), "reference")
    assert all(not r["pass"] and r["differ"] > 0 for r in j.ints["calls"])


def test_integer_output_returned_as_float_is_named():
    j = _judge(os.path.join(KBI, "argmax_dim1.py"), os.path.join(KBI, "argmax_dim1_new_as_float.py"), "reference")
    assert j.verdict == "unfaithful"
    assert "output on base is returned as float32; the problem declares int64" in j.ints["calls"][0]["detail"]
    assert not j.rule["calls"][0]["pass"] and "returned as" in j.rule["calls"][0]["detail"]


@pytest.mark.parametrize("solution,verdict,float_part,int_part", [
    ("faithful", "faithful", "faithful", "faithful"),
    ("bf16_softmax", "unfaithful", "unfaithful", "faithful"),
    ("off_by_one", "unfaithful", "faithful", "unfaithful"),
    # the limit of the rule, measured: on `magnitude` the probabilities underflow to exactly 0 past
    # the first two experts; the reference's topk picks among those tied zeros in its own order,
    # this solution by logit, and neither reference picks its index
    ("topk_of_logits", "unfaithful", "faithful", "unfaithful"),
])
def test_sol_topk_routing(solution, verdict, float_part, int_part):
    j = _judge(TOPK, _sol("sol_topk_routing", solution), "reference")
    assert j.verdict == verdict, j.text()
    assert j.report.verdict == float_part and j.ints["verdict"] == int_part
    bad = {r["workload"] for r in j.ints["calls"] if not r["pass"]}
    if solution == "off_by_one":
        assert bad == {"base", "odd", "magnitude"}
        r = j.ints["calls"][0]
        assert r["first"]["got"] == r["first"]["oracle"] + 1 and "topk_indices on base:" in r["detail"]
    if solution == "topk_of_logits":
        assert bad == {"magnitude"}
    d = j.to_dict()
    assert d["parity"]["kernels"][0]["verdict"] == float_part and d["integer_outputs"]["verdict"] == int_part
    assert [c["output"] for c in d["benchmark_rule"]["calls"][:2]] == ["topk_weights", "topk_indices"]


def test_sol_topk_own_workloads_judged_for_the_indices():
    j = problems.judge(problems.load(TOPK), _sol("sol_topk_routing", "faithful"))
    assert j.verdict == "faithful"
    assert {r["workload"] for r in j.ints["calls"]} >= {"wl-1", "wl-2", "wl-3", "production"}


def test_rounding_boundary_resolved_either_way(tmp_path):
    """An argmax over bf16-rounded values: the native reference ties where the oracle (the cast
    promoted away) does not. A solution that takes the exact maximum (the oracle's) and one that
    takes the first of the rounded maxima (the native's) are both accepted; one that takes the
    last of the rounded maxima is neither."""
    d = {"name": "argmax_bf16_test", "axes": {"N": {"type": "const", "value": 256},
                                                "H": {"type": "const", "value": 512}},
         "inputs": {"x": {"shape": ["N", "H"], "dtype": "float32"}},
         "outputs": {"idx": {"shape": ["N"], "dtype": "int64"}},
         "reference": "import torch\ndef run(x):\n    return torch.argmax(x.to(torch.bfloat16), dim=-1)\n"}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    bodies = {"exact": "torch.argmax(x, dim=-1)", "rounded": "torch.argmax(x.to(torch.bfloat16), dim=-1)",
              "rounded_last": "(x.shape[-1] - 1) - torch.argmax(torch.flip(x.to(torch.bfloat16), [-1]), dim=-1)"}
    p = problems.load(str(tmp_path))
    got = {}
    for name, body in bodies.items():
        sol = {"name": name, "spec": {"entry_point": "k.py::run", "languages": ["pytorch"],
                                      "destination_passing_style": False},
               "sources": [{"path": "k.py", "content": "import torch\ndef run(x):\n    return %s\n" % body}]}
        (tmp_path / ("%s.json" % name)).write_text(json.dumps(sol))
        got[name] = problems.judge(p, str(tmp_path / ("%s.json" % name)), quick=True)
    assert got["exact"].verdict == "faithful" and got["rounded"].verdict == "faithful"
    assert sum(r["ties"] for r in got["exact"].ints["calls"]) > 0  # the two references do differ
    assert got["rounded"].rule["verdict"] == "pass" and got["exact"].rule["verdict"] == "fail"
    assert got["rounded_last"].verdict == "unfaithful", got["rounded_last"].text()


def test_integer_rule_is_exact():
    for rule in (dict(name="kernelbench", atol=1e-4, rtol=1e-4, precision="fp32"),
                 dict(name="sol-execbench", max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99,
                      max_error_cap=None, allow_negative_inf=False),
                 dict(name="flashinfer-bench", atol=1e-2, rtol=1e-2, required_matched_ratio=0.95)):
        y = torch.arange(1000, dtype=torch.int32)
        assert problems.rule_check(rule, y.clone(), y)[0]
        x = y.clone()
        x[5] += 1                                    # 0.1% off: every rule's ratio would pass it
        ok, det = problems.rule_check(rule, x, y)
        assert not ok and "1 of 1000" in det
        assert not problems.rule_check(rule, y.float(), y)[0]


def test_combined_verdict():
    from parity._problem_ints import combine
    assert combine("faithful", "faithful") == "faithful"
    assert combine("faithful", "unfaithful") == combine("unfaithful", "faithful") == "unfaithful"
    assert combine("crashed", "unfaithful") == combine("unfaithful", "crashed") == "crashed"
    assert combine(None, "faithful") == "faithful" and combine("modified-inputs", None) == "modified-inputs"


def test_cli_integer_outputs(tmp_path):
    out = str(tmp_path / "r.json")
    r = _cli(TOPK, "--solution", _sol("sol_topk_routing", "faithful"), "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(out))
    assert d["verdict"] == "faithful" and d["integer_outputs"]["verdict"] == "faithful"
    assert d["parity"]["kernels"][0]["verdict"] == "faithful"
    r = _cli(TOPK, "--solution", _sol("sol_topk_routing", "off_by_one"), "--quick", "--json", out)
    assert r.returncode == 1 and "topk_indices on base: 32 of 32 elements differ" in r.stdout
    d = json.load(open(out))
    assert d["verdict"] == "unfaithful" and d["integer_outputs"]["verdict"] == "unfaithful"
    assert d["parity"]["kernels"][0]["verdict"] == "faithful"
    r = _cli(os.path.join(KBI, "argmax_dim1.py"), "--solution", os.path.join(KBI, "argmax_dim1_new_faithful.py"),
             "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(out))
    assert d["verdict"] == "faithful" and d["parity"] is None and d["benchmark_rule"]["verdict"] == "pass"
    assert d["contract"] == "reference" and d["solution"].startswith("ModelNew") and d["problem"]["format"] == "kernelbench"
    r = _cli(os.path.join(KBI, "argmax_ties.py"), "--solution", os.path.join(KBI, "argmax_dim1_new_last_tie.py"),
             "--quick")
    assert r.returncode == 1 and "parity verdict (contract reference): unfaithful" in r.stdout
    r = _cli(KBI, "--quick")  # a folder: both problems' own Models, natively
    assert r.returncode == 0 and "summary" in r.stdout, r.stdout + r.stderr

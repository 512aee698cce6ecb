"""What real benchmark files do that the first test problems did not (docs/problems.md): shape
entries that are integers or expressions, references and solutions that use autograd, fp16 ops
torch has no CPU kernel for, outputs that overflow their dtype. Each problem is written here for
these tests, in SOL-ExecBench's folder layout."""
import json

import pytest

torch = pytest.importorskip("torch", reason="parity.problems runs PyTorch references")

from parity import problems  # noqa: E402


def _problem(tmp_path, name, axes, inputs, outputs, reference, lines):
    d = tmp_path / name
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({"name": name, "axes": axes, "inputs": inputs, "outputs": outputs,
                                                   "reference": reference}))
    (d / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in lines))
    return str(d)


def _solution(tmp_path, name, src, dps=False):
    s = {"name": name, "definition": "x", "spec": {"languages": ["pytorch"], "entry_point": "k.py::run",
                                                   "destination_passing_style": dps},
         "sources": [{"path": "k.py", "content": src}]}
    p = tmp_path / ("%s.json" % name)
    p.write_text(json.dumps(s))
    return str(p)


def test_integer_and_expression_shape_entries(tmp_path):
    """["M", "1"] (a kept reduced dimension) and "2 * N" are sizes, not axis names: they become a
    const axis "1" and an expr axis "2*N"."""
    d = _problem(tmp_path, "rowsum_pairs_test", {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
                 {"x": {"shape": ["M", "2 * N"], "dtype": "float32"}},
                 {"y": {"shape": ["M", 1], "dtype": "float32"}},
                 "import torch\n\ndef run(x):\n    return x.sum(dim=1, keepdim=True)\n",
                 [{"uuid": "a", "axes": {"M": 16}, "inputs": {"x": {"type": "random"}}}])
    p = problems.load(d)
    assert p.inputs["x"]["shape"] == ["M", "2*N"] and p.outputs["y"]["shape"] == ["M", "1"]
    assert p.shapes["2*N"] == [128] and p.shapes["1"] == [1]
    j = problems.judge(p, _solution(tmp_path, "ok", "def run(x):\n    return x.double().sum(1, keepdim=True).float()\n"))
    assert j.verdict == "faithful", j.text()
    bad = problems.judge(p, _solution(tmp_path, "tail", "def run(x):\n    return x[:, :-1].sum(1, keepdim=True)\n"),
                         quick=True)
    assert bad.verdict == "unfaithful"


def test_autograd_in_reference_and_solution(tmp_path):
    """A backward written with autograd (x.requires_grad_(), y.backward(dy)) in the reference and
    in the solution: both run with autograd on."""
    ref = ("import torch\n\ndef run(x, dy):\n    xr = x.clone().requires_grad_()\n"
           "    y = torch.tanh(xr) * xr\n    y.backward(dy)\n    return xr.grad\n")
    d = _problem(tmp_path, "tanh_mul_bwd_test", {"M": {"type": "var"}, "N": {"type": "const", "value": 96}},
                 {"x": {"shape": ["M", "N"], "dtype": "float32"}, "dy": {"shape": ["M", "N"], "dtype": "float32"}},
                 {"dx": {"shape": ["M", "N"], "dtype": "float32"}}, ref,
                 [{"uuid": "a", "axes": {"M": 24}, "inputs": {"x": {"type": "random"}, "dy": {"type": "random"}}}])
    p = problems.load(d, "math")
    same = problems.judge(p, _solution(tmp_path, "autograd", ref.replace("import torch\n", "import torch  # same\n")))
    assert same.verdict == "faithful", same.text()
    closed = ("import torch\n\ndef run(x, dy):\n    t = torch.tanh(x)\n    return dy * (t + x * (1 - t * t))\n")
    assert problems.judge(p, _solution(tmp_path, "closed", closed), quick=True).verdict == "faithful"
    wrong = ("import torch\n\ndef run(x, dy):\n    t = torch.tanh(x)\n    return dy * (t + x * (1 - t))\n")
    assert problems.judge(p, _solution(tmp_path, "wrong", wrong), quick=True).verdict == "unfaithful"


def test_fp16_ops_without_a_cpu_kernel_and_overflow(tmp_path):
    """An fp16 GEMM: torch 1.13 has no fp16 matmul on the CPU, so the reference's native run and
    the solution run it in fp32 with fp16 outputs (said in the notes). On the magnitude workload
    (rows scaled by up to 2^6) some outputs exceed fp16's range: inf is then the correctly
    rounded output, not an error."""
    d = _problem(tmp_path, "gemm_f16_test", {"M": {"type": "var"}, "N": {"type": "const", "value": 48},
                                             "K": {"type": "const", "value": 512}},
                 {"a": {"shape": ["M", "K"], "dtype": "float16"}, "b": {"shape": ["K", "N"], "dtype": "float16"}},
                 {"c": {"shape": ["M", "N"], "dtype": "float16"}},
                 "import torch\n\ndef run(a, b):\n    return a @ b\n",
                 [{"uuid": "a", "axes": {"M": 32}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}])
    p = problems.load(d)
    j = problems.judge(p, None, quick=True)  # the reference itself
    assert j.verdict == "faithful", j.text()
    assert any("no fp16/bf16 CPU kernel for matmul" in n for n in j.problem.notes), j.problem.notes
    # SOL-ExecBench's rule fails any Inf, though inf is the fp16 value of those outputs
    assert any(c["workload"] == "magnitude" and "Inf" in c["detail"] for c in j.rule["calls"]), j.rule["calls"]
    acc16 = ("import torch\n\ndef run(a, b):\n    c = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)\n"
             "    for k in range(a.shape[1]):\n        c = (c.float() + a[:, k:k + 1].float() * b[k:k + 1].float()).half()\n"
             "    return c\n")
    bad = problems.judge(p, _solution(tmp_path, "acc16", acc16), quick=True)
    assert bad.verdict == "unfaithful", bad.text()


def test_overflow_to_inf_is_the_rounded_value():
    """The judge's rule directly: an fp16 output of inf (or NaN) where the exact value is beyond
    65520 is faithful; inf or NaN where the exact value is 1000 is not; -inf for +70000 is not."""
    import numpy as np
    import parity

    def ref(x):
        return {"y": x * 1000.0}
    op = parity.Op("scale_1000_test", inputs={"x": parity.Input(("N",))}, outputs={"y": ("N",)}, reference=ref,
                   shapes={"N": [4]})
    x = np.array([70.0, 1.0, -80.0, 0.5], dtype=np.float32)
    given = {"name": "g", "inputs": {"x": x}}

    def run(out):
        return lambda x: {"y": np.array(out, dtype=np.float16)}
    assert parity.check(op, run([np.inf, 1000, -np.inf, 500]), workloads=[given], dtype="f32",
                        out_dtype="f16").verdict == "faithful"
    assert parity.check(op, run([np.inf, np.inf, -np.inf, 500]), workloads=[given], dtype="f32",
                        out_dtype="f16").verdict == "unfaithful"
    assert parity.check(op, run([-np.inf, 1000, -np.inf, 500]), workloads=[given], dtype="f32",
                        out_dtype="f16").verdict == "unfaithful"
    # NaN (an intermediate inf - inf) where the exact value has no fp16 value; nowhere else
    assert parity.check(op, run([np.nan, 1000, np.nan, 500]), workloads=[given], dtype="f32",
                        out_dtype="f16").verdict == "faithful"
    assert parity.check(op, run([np.inf, np.nan, -np.inf, 500]), workloads=[given], dtype="f32",
                        out_dtype="f16").verdict == "unfaithful"


def test_sdpa_where_torch_predates_it():
    """torch 1.13 has no F.scaled_dot_product_attention (2.0); problems and solutions that call it
    run on the math its documentation states. Checked against that math written out, causal, with
    a bool mask, a float mask, a given scale and grouped KV heads."""
    from parity._problem_oracle import _sdpa_math, _torch
    F = _torch().nn.functional
    assert hasattr(F, "scaled_dot_product_attention")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))

    def explicit(q, k, v, bias, scale):
        return torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1) @ v
    causal = torch.full((5, 5), float("-inf"), dtype=torch.float64).triu(1)
    assert torch.allclose(_sdpa_math(q, k, v, is_causal=True), explicit(q, k, v, causal, 8 ** -0.5))
    m = torch.rand(5, 5, generator=g) > 0.3
    m[:, 0] = True
    assert torch.allclose(_sdpa_math(q, k, v, attn_mask=m, scale=0.5),
                          explicit(q, k, v, torch.zeros(5, 5, dtype=torch.float64).masked_fill(~m, float("-inf")), 0.5))
    fm = torch.randn(5, 5, generator=g, dtype=torch.float64)
    assert torch.allclose(_sdpa_math(q, k, v, attn_mask=fm), explicit(q, k, v, fm, 8 ** -0.5))
    k2, v2 = k[:, :2], v[:, :2]
    assert torch.allclose(_sdpa_math(q, k2, v2, enable_gqa=True),
                          explicit(q, k2.repeat_interleave(2, 1), v2.repeat_interleave(2, 1), 0, 8 ** -0.5))
    with pytest.raises(NotImplementedError):
        _sdpa_math(q, k, v, dropout_p=0.1)


def test_class_targets_of_a_loss_are_bounded_by_the_class_axis(tmp_path):
    d = _problem(tmp_path, "xent_test", {"B": {"type": "var"}, "C": {"type": "var"}},
                 {"logits": {"shape": ["B", "C"], "dtype": "float32"}, "labels": {"shape": ["B"], "dtype": "int64"}},
                 {"loss": {"shape": None, "dtype": "float32"}},
                 "import torch.nn.functional as F\n\ndef run(logits, labels):\n    return F.cross_entropy(logits, labels)\n",
                 [{"uuid": "a", "axes": {"B": 64, "C": 100}, "inputs": {"logits": {"type": "random"},
                                                                         "labels": {"type": "random"}}}])
    p = problems.load(d)
    assert p.roles["labels"] == ("token_ids", "C"), p.roles
    assert problems.judge(p, None, quick=True).verdict == "faithful"


def test_too_large_for_this_machine_is_refused_up_front(tmp_path):
    """Const axes sized for a GPU (a 65536 x 65536 fp32 weight) are refused with the sizes named,
    instead of the process being killed midway."""
    d = _problem(tmp_path, "huge_linear_test", {"B": {"type": "var"}, "IN": {"type": "const", "value": 65536},
                                                "OUT": {"type": "const", "value": 65536}},
                 {"x": {"shape": ["B", "IN"], "dtype": "float32"}, "w": {"shape": ["OUT", "IN"], "dtype": "float32"}},
                 {"y": {"shape": ["B", "OUT"], "dtype": "float32"}},
                 "def run(x, w):\n    return x @ w.t()\n",
                 [{"uuid": "a", "axes": {"B": 8}, "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}])
    with pytest.raises(problems.ProblemError, match="too large for this machine.*IN=65536"):
        problems.load(d)


def test_reference_defined_on_the_problems_own_inputs_only(tmp_path):
    """A normalisation by a variance input: on parity's N(0,1) draws the square root of a negative
    variance is NaN, so the problem is judged on its own workload lines (custom inputs with
    positive variances), said in a note."""
    ref = ("import torch\n\ndef make(axes_and_scalars, device):\n    n, c = axes_and_scalars['N'], axes_and_scalars['C']\n"
           "    return {'x': torch.randn(n, c), 'var': torch.rand(c) + 0.5}\n\n"
           "def run(x, var):\n    return x / torch.sqrt(var + 1e-5)\n")
    d = tmp_path / "norm_by_var_test"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "norm_by_var_test", "axes": {"N": {"type": "var"}, "C": {"type": "const", "value": 64}},
        "custom_inputs_entrypoint": "make",
        "inputs": {"x": {"shape": ["N", "C"], "dtype": "float32"}, "var": {"shape": ["C"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N", "C"], "dtype": "float32"}}, "reference": ref}))
    (d / "workload.jsonl").write_text("".join(json.dumps({"uuid": str(n), "axes": {"N": n}, "inputs": {
        "x": {"type": "custom"}, "var": {"type": "custom"}}}) + "\n" for n in (16, 40)))
    p = problems.load(str(d))
    j = problems.judge(p, None, quick=True)
    assert j.verdict == "faithful", j.text()
    assert [w.name for w in j.report.workloads] == ["wl-1", "wl-2"]
    assert any("not defined on parity's role-drawn inputs" in n for n in j.problem.notes)
    bad = problems.judge(p, _solution(tmp_path, "no_eps", "import torch\n\ndef run(x, var):\n"
                                      "    return x * torch.rsqrt(var.half().float())\n"), quick=True)
    assert bad.verdict == "unfaithful"


def test_gpu_sized_lines_give_smaller_var_sizes(tmp_path):
    """The smallest workload line has 4096 rows of a 1024-wide GEMM (8M elements in the tensors M
    sizes): parity's own workloads halve M until they hold at most 2^22, after a native run of the
    reference there; a reference that asserts the line's M keeps it."""
    def make(name, ref):
        return _problem(tmp_path, name, {"M": {"type": "var"}, "K": {"type": "const", "value": 1024},
                                         "N": {"type": "const", "value": 1024}},
                        {"a": {"shape": ["M", "K"], "dtype": "float32"}, "b": {"shape": ["K", "N"], "dtype": "float32"}},
                        {"c": {"shape": ["M", "N"], "dtype": "float32"}}, ref,
                        [{"uuid": "a", "axes": {"M": 4096}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}])
    p = problems.load(make("gemm_big_test", "def run(a, b):\n    return a @ b\n"))
    assert p.shapes["M"][0] == 2048, p.shapes
    assert any("M 4096 -> 2048" in n for n in p.notes), p.notes
    q = problems.load(make("gemm_fixed_test", "def run(a, b):\n    assert a.shape[0] == 4096\n    return a @ b\n"))
    assert q.shapes["M"][0] == 4096 and not any("smaller var sizes" in n for n in q.notes)


def test_odd_sizes_left_out_where_the_reference_refuses_them(tmp_path):
    """A rotation of pairs needs an even last dimension: at parity's odd sizes the reference
    raises, so `odd` is left out with the reason; the other workloads are judged."""
    ref = ("import torch\n\ndef run(x):\n    p = x.reshape(*x.shape[:-1], -1, 2)\n"
           "    return torch.stack([-p[..., 1], p[..., 0]], dim=-1).reshape(x.shape)\n")
    d = _problem(tmp_path, "pair_rotate_test", {"T": {"type": "var"}, "D": {"type": "var"}},
                 {"x": {"shape": ["T", "D"], "dtype": "float32"}}, {"y": {"shape": ["T", "D"], "dtype": "float32"}}, ref,
                 [{"uuid": "a", "axes": {"T": 16, "D": 64}, "inputs": {"x": {"type": "random"}}}])
    j = problems.judge(problems.load(d), None, quick=True)
    assert j.verdict == "faithful", j.text()
    assert [w.name for w in j.report.workloads] == ["base", "outlier-ch", "magnitude"]
    assert any("raises at the odd sizes" in n and "D=65" in n for n in j.problem.notes), j.problem.notes


def test_reduction_inside_the_op_is_found_by_perturbing(tmp_path):
    """A row softmax keeps its reduced axis in the output: the probe finds it (a note, the op's
    reduction), so a plain sequential fp32 row sum is faithful; an elementwise op mixes nothing."""
    d = _problem(tmp_path, "softmax_rows_test", {"M": {"type": "var"}, "N": {"type": "const", "value": 1000}},
                 {"x": {"shape": ["M", "N"], "dtype": "float32"}}, {"y": {"shape": ["M", "N"], "dtype": "float32"}},
                 "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n",
                 [{"uuid": "a", "axes": {"M": 24}, "inputs": {"x": {"type": "random"}}}])
    p = problems.load(d)
    assert p._mixed_axes() == {"y": ["N"]}
    assert any("mixes axis N" in n for n in p.notes), p.notes
    seq = ("import torch\n\ndef run(x):\n    m = x.max(dim=-1, keepdim=True).values\n    e = torch.exp(x - m)\n"
           "    s = torch.zeros(x.shape[0], 1)\n    for j in range(x.shape[1]):\n        s = s + e[:, j:j + 1]\n"
           "    return e / s\n")
    j = problems.judge(p, _solution(tmp_path, "seq", seq), quick=True)
    assert j.verdict == "faithful", j.text()
    tail = seq.replace("range(x.shape[1])", "range(x.shape[1] - 1)")
    j = problems.judge(p, _solution(tmp_path, "tail", tail), quick=True)
    assert j.verdict == "unfaithful", j.text()
    e = _problem(tmp_path, "gelu_test", {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
                 {"x": {"shape": ["M", "N"], "dtype": "float32"}}, {"y": {"shape": ["M", "N"], "dtype": "float32"}},
                 "import torch\n\ndef run(x):\n    return torch.nn.functional.gelu(x)\n",
                 [{"uuid": "a", "axes": {"M": 8}, "inputs": {"x": {"type": "random"}}}])
    assert problems.load(e)._mixed_axes() == {}


def _kb_file(tmp_path, name, init, body, consts, inputs, init_inputs="[]"):
    """A KernelBench problem file written for a test: Model(*init) with `body` (its __init__'s
    extra lines and forward), module constants, get_inputs() returning `inputs`."""
    src = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self%s):\n"
           "        super().__init__()\n%s\n\n\n%s\n\n\ndef get_inputs():\n    return %s\n\n\n"
           "def get_init_inputs():\n    return %s\n" % (init, body, consts, inputs, init_inputs))
    f = tmp_path / name
    f.write_text(src)
    return str(f)


def test_kernelbench_scaling_steps_back_where_the_model_breaks(tmp_path):
    """The meta device passes a halving the model does not survive (it asserts its width): the
    model is run at the scaled sizes and the step undone, with a note; the problem judges."""
    f = _kb_file(tmp_path, "1_Asserting.py", "", "\n    def forward(self, x):\n        assert x.shape[1] >= 512, "
                 "\"needs 512 columns\"\n        return torch.relu(x)", "batch_size = 4096\ndim = 1024",
                 "[torch.randn(batch_size, dim)]")
    p = problems.load(f)
    assert any("halving step(s) undone" in n and "needs 512 columns" in n for n in p.notes), p.notes
    assert [v[0] for a, v in p.shapes.items() if a == "x_1"] == [512]
    assert problems.judge(p, None, quick=True).verdict == "faithful"


def test_kernelbench_model_with_a_closure_over_its_layers(tmp_path):
    """minGPT's block keeps `self.mlpf = lambda x: m.c_proj(m.c_fc(x))` over its own layers: the
    fp64 oracle's model is a new instance with the same state (a deepcopy would share the lambda
    and run the original's fp32 layers on fp64 inputs: 'mat1 and mat2 must have the same dtype')."""
    f = _kb_file(tmp_path, "1_Closure.py", ", d", "        self.mlp = nn.ModuleDict(dict(fc=nn.Linear(d, 2 * d), "
                 "proj=nn.Linear(2 * d, d)))\n        m = self.mlp\n        self.mlpf = lambda x: m.proj(torch.relu(m.fc(x)))"
                 "\n\n    def forward(self, x):\n        return x + self.mlpf(x)", "d = 32", "[torch.randn(8, d)]", "[d]")
    j = problems.judge(problems.load(f), None, quick=True)
    assert j.verdict == "faithful", j.text()


def test_reference_past_fp32_range_keeps_a_finite_floor(tmp_path):
    """A cumulative product on the magnitude workload: the fp64 oracle reaches 1e200 where the
    fp32 output is inf (the overflow rule's). Squared in a row's statistics such values made the
    row's tolerances NaN and the problem's own reference unfaithful (KernelBench 90_cumprod);
    the floor now leaves values past 2^128 to the overflow rule."""
    f = _kb_file(tmp_path, "90_Cumprod.py", "", "\n    def forward(self, x):\n        return torch.cumprod(x, dim=1)", "",
                 "[torch.rand(64, 96)]")
    j = problems.judge(problems.load(f), None, quick=True)
    assert j.verdict == "faithful", j.text()
    assert "nan" not in j.text().lower()


def test_isolate_gives_python_crashes_and_hangs_a_verdict(tmp_path, monkeypatch):
    """isolate=True (--isolate) runs a Python solution in a child process: one that segfaults (a
    read through a null pointer with ctypes) or never returns is `crashed`, and the command goes on;
    a faithful one is faithful there too."""
    import os
    rms = os.path.join(os.path.dirname(os.path.abspath(__file__)), "problems", "sol_rmsnorm")
    p = problems.load(rms)
    crash = _solution(tmp_path, "crash", "import ctypes\n\ndef run(x, weight, eps):\n    return ctypes.string_at(0)\n")
    j = problems.judge(p, crash, quick=True, workloads=["base"], isolate=True)
    assert j.verdict == "crashed" and "SIGSEGV" in j.text(), j.text()
    monkeypatch.setenv("PARITY_PROBLEM_TIMEOUT", "2")
    hang = _solution(tmp_path, "hang", "def run(x, weight, eps):\n    while True:\n        pass\n")
    j = problems.judge(p, hang, quick=True, workloads=["base"], isolate=True)
    assert j.verdict == "crashed" and "did not answer within 2 s" in j.text(), j.text()
    ok = _solution(tmp_path, "ok", "import torch\n\ndef run(x, weight, eps):\n    xf = x.float()\n"
                   "    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)\n")
    j = problems.judge(p, ok, quick=True, isolate=True)
    assert j.verdict == "faithful" and "in a child process" in j.solution, j.text()

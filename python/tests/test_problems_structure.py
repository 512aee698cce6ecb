"""Problems whose integer inputs are structure (offsets, page tables) that only the problem's own
workload lines give (docs/problems.md, "Structure inputs"), and the engine's given workloads with
drawn float inputs they rest on (docs/custom-ops.md, "Given inputs").

The problem here (python/tests/problems/sol_paged_decode) is written for these tests: decode
attention over a paged KV cache, in SOL-ExecBench's folder layout with custom inputs; the
FlashInfer-Bench layout with safetensors page tables is written to a temporary folder."""
import json
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity.problems runs PyTorch references")

import parity  # noqa: E402
from parity import problems  # noqa: E402
from parity._problem_rules import judged_calls  # noqa: E402
from parity._problem_solutions import _line_args, _line_sizes  # noqa: E402
from problem_helpers import cli, write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PAGED = os.path.join(HERE, "problems", "sol_paged_decode")


def _sol(name):
    return os.path.join(PAGED, "solution_%s.json" % name)


def test_structure_roles():
    p = problems.load(PAGED)
    assert p.structure == ["kv_indptr", "kv_indices"]
    assert p.roles["kv_indptr"] == ("structure", None) and p.roles["q"] == ("activation", None)
    text = p.describe()
    assert "role structure" in text and "own workloads give it" in text
    assert not any(n.startswith("custom inputs (") for n in p.notes)  # the structure note says what is drawn


@pytest.mark.parametrize("name,verdict", [("faithful", "faithful"), ("last_page_dropped", "unfaithful"),
                                          ("default_scale", "unfaithful"), ("bf16_accumulator", "unfaithful")])
def test_structure_verdicts(name, verdict):
    j = problems.judge(problems.load(PAGED), _sol(name), quick=True)
    assert [w.name for w in j.report.workloads] == ["base", "outlier-ch", "magnitude"]
    assert j.verdict == verdict, j.text()
    if verdict == "faithful":
        assert all(w.err_over_tol < 1 for w in j.report.workloads)
    assert any("structure input(s) kv_indptr, kv_indices" in n for n in j.problem.notes)


def test_structure_full_run_judges_production_and_own_lines():
    j = problems.judge(problems.load(PAGED), _sol("bf16_accumulator"))
    names = [w.name for w in j.report.workloads]
    assert names == ["base", "outlier-ch", "magnitude", "production", "wl-1", "wl-2", "wl-3"]
    by = {w.name: w for w in j.report.workloads}
    # 128 pages per sequence on line 1: the bf16 sum of p·v is out of tolerance there
    assert not by["base"].ok and not by["wl-1"].ok


def test_structure_drawn_inputs_keep_the_lines_structure():
    """parity's workloads take the page table of the base line bit for bit, draw the float inputs
    from their roles (outlier-ch: the last channel among the outlier channels), the same for the
    same seed."""
    p = problems.load(PAGED)
    dicts, given, _ = problems.structure_workloads(p, seed=1, quick=True)
    seen = {}

    def call(args):
        seen[len(seen)] = args
        return [torch.zeros(args["q"].shape, dtype=torch.bfloat16),
                torch.zeros(args["q"].shape[:2], dtype=torch.float32)]
    calls = judged_calls(p, call, [d["name"] for d in dicts], 1, given)
    assert [c[0] for c in calls] == ["base", "outlier-ch", "magnitude"]
    sizes, _ = _line_sizes(p, 0, p.own_lines[0])
    line = _line_args(p, 0, p.own_lines[0], sizes, 1, only={"kv_indptr", "kv_indices"})
    for _, args, _, _ in calls:
        assert torch.equal(args["kv_indptr"], line["kv_indptr"]) and torch.equal(args["kv_indices"], line["kv_indices"])
        assert args["kv_indptr"].dtype == torch.int32 and args["q"].shape == (8, 4, 32)
    base, out = calls[0][1]["q"].float(), calls[1][1]["q"].float()
    assert not torch.equal(base, out)
    per_channel = out.abs().reshape(-1, out.shape[-1]).mean(0)
    last = per_channel[-1] / per_channel.median()
    assert last > 20, last  # the last channel scaled by 80
    again = judged_calls(p, call, ["base"], 1, given)[0][1]
    assert torch.equal(again["q"], calls[0][1]["q"])


def test_structure_lines_required():
    """Lines that draw the page table at random give parity nothing to judge on: refused (exit
    3) with the way out."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        d = os.path.join(t, "p")
        shutil.copytree(PAGED, d)
        lines = [json.loads(x) for x in open(os.path.join(d, "workload.jsonl"))]
        for w in lines:
            w["inputs"]["kv_indptr"] = {"type": "random"}
        with open(os.path.join(d, "workload.jsonl"), "w") as f:
            f.write("".join(json.dumps(w) + "\n" for w in lines))
        with pytest.raises(parity.ProblemError, match="parity_roles.json"):
            problems.load(d)
        r = cli(d, "--quick")
        assert r.returncode == 3, r.stdout + r.stderr
        assert "kv_indptr" in r.stderr and "safetensors" in r.stderr


_write_safetensors = write_safetensors


def test_structure_from_safetensors_in_flashinfer_layout(tmp_path):
    """FlashInfer-Bench's layout: definitions/<op_type>/<name>.json, traces in
    workloads/<op_type>/<name>.jsonl whose page tables are safetensors blobs, q/k/v random."""
    d = json.load(open(os.path.join(PAGED, "definition.json")))
    d.pop("custom_inputs_entrypoint")
    (tmp_path / "definitions" / "gqa_paged").mkdir(parents=True)
    (tmp_path / "workloads" / "gqa_paged").mkdir(parents=True)
    (tmp_path / "definitions" / "gqa_paged" / "paged_decode_test.json").write_text(json.dumps(d))
    g = torch.Generator().manual_seed(11)
    traces = []
    for i, (b, pages, n) in enumerate([(8, 96, 512), (12, 160, 600)]):
        cuts = torch.randperm(n - 1, generator=g)[: b - 1] + 1
        indptr = torch.cat([torch.zeros(1, dtype=torch.long), cuts.sort().values, torch.full((1,), n)]).to(torch.int32)
        indices = torch.randint(0, pages, (n,), generator=g).to(torch.int32)
        blob = "blob/pages_%d.safetensors" % i
        (tmp_path / "workloads" / "gqa_paged" / "blob").mkdir(exist_ok=True)
        _write_safetensors(str(tmp_path / "workloads" / "gqa_paged" / blob), {"indptr": indptr, "indices": indices})
        traces.append({"definition": "paged_decode_test", "solution": None, "evaluation": None, "workload": {
            "uuid": "st-%d" % i, "axes": {"batch_size": b, "num_pages": pages, "len_indptr": b + 1, "num_kv_indices": n},
            "inputs": {"q": {"type": "random"}, "k_cache": {"type": "random"}, "v_cache": {"type": "random"},
                       "kv_indptr": {"type": "safetensors", "path": blob, "tensor_key": "indptr"},
                       "kv_indices": {"type": "safetensors", "path": blob, "tensor_key": "indices"},
                       "sm_scale": {"type": "scalar", "value": 0.125}}}})
    (tmp_path / "workloads" / "gqa_paged" / "paged_decode_test.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in traces))
    p = problems.load(str(tmp_path / "definitions" / "gqa_paged" / "paged_decode_test.json"))
    assert p.format == "flashinfer" and p.structure == ["kv_indptr", "kv_indices"]
    good = problems.judge(p, _sol("faithful"))
    assert good.verdict == "faithful", good.text()
    assert [w.name for w in good.report.workloads] == ["base", "outlier-ch", "magnitude", "production", "wl-1", "wl-2"]
    bad = problems.judge(p, _sol("last_page_dropped"), quick=True)
    assert bad.verdict == "unfaithful" and bad.rule["verdict"] == "fail"


# -- the engine: given workloads whose float inputs parity draws ---------------------------------------
def _gather_op():
    def ref(x, idx, scale):
        return {"y": x[idx] * scale}
    return parity.Op("gather_scaled_test", inputs={"x": parity.Input(("P", "D")),
                                                   "idx": parity.Input(("N",), role="token_ids", vocab="P")},
                     outputs={"y": ("N", "D")}, reference=ref, shapes={"P": [40], "D": [24], "N": [16]},
                     attrs={"scale": 0.5})


def test_given_workload_with_drawn_floats():
    op = _gather_op()
    idx = np.array([3, 3, 39, 0, 7, 7, 7, 1, 2, 38, 5, 5, 9, 10, 11, 39], dtype=np.int64)
    got = {}

    def fn(x, idx, scale):
        got.setdefault("x", []).append(np.array(x))
        assert np.array_equal(np.asarray(idx), [3, 3, 39, 0, 7, 7, 7, 1, 2, 38, 5, 5, 9, 10, 11, 39])
        return {"y": np.asarray(x)[np.asarray(idx)] * scale}
    wls = [{"name": d, "inputs": {"idx": idx}, "draw": d, "sizes": {"P": 64, "D": 24, "N": 16}, "dtype": "f32"}
           for d in ("base", "outlier-ch", "magnitude")]
    r = parity.check(op, fn, workloads=wls, dtype="f32")
    assert r.verdict == "faithful" and [w.name for w in r.workloads] == ["base", "outlier-ch", "magnitude"]
    xs = got["x"]
    assert all(x.shape == (64, 24) for x in xs)  # the given sizes, not the declaration's
    by = {}
    for x in xs:
        by.setdefault(x.tobytes(), x)
    assert len(by) >= 3  # three different draws (and the harness's decoy calls)
    r2 = parity.check(op, lambda x, idx, scale: {"y": np.asarray(x)[np.asarray(idx)] * scale * (1 + 1e-3)},
                      workloads=wls[:1], dtype="f32")
    assert r2.verdict == "unfaithful"
    with pytest.raises(ValueError, match="expected base, outlier-ch or magnitude"):
        parity.check(op, fn, workloads=[dict(wls[0], draw="zipf")], dtype="f32")
    with pytest.raises(ValueError, match="inputs lack idx"):
        parity.check(op, fn, workloads=[dict(wls[0], inputs={})], dtype="f32")


# -- the problem's own lines: other scalar values, many lines ------------------------------------------
RMS = os.path.join(HERE, "problems", "sol_rmsnorm")


def _rms_with_lines(tmp_path, lines):
    d = tmp_path / "p"
    shutil.copytree(RMS, str(d))
    (d / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in lines))
    return str(d)


def _line(batch, eps, **inputs):
    ins = {"x": {"type": "random"}, "weight": {"type": "random"}, "eps": {"type": "scalar", "value": eps}}
    ins.update(inputs)
    return {"uuid": "l%d-%g" % (batch, eps), "axes": {"batch": batch}, "inputs": ins}


def _solution(tmp_path, name, eps_expr):
    src = ("import torch\n\ndef run(x, weight, eps):\n    xf = x.float()\n"
           "    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + %s) * weight.float()).to(x.dtype)\n" % eps_expr)
    s = {"name": name, "definition": "rmsnorm_h256_test", "author": "parity tests",
         "spec": {"languages": ["pytorch"], "entry_point": "k.py::run", "destination_passing_style": False},
         "sources": [{"path": "k.py", "content": src}]}
    path = tmp_path / ("%s.json" % name)
    path.write_text(json.dumps(s))
    return str(path)


def test_lines_with_other_scalars_are_an_op_of_their_own(tmp_path):
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(128, 256, generator=g) * 1e-3).bfloat16()  # small rows: eps matters
    w = (1 + 0.1 * torch.randn(256, generator=g)).bfloat16()
    d = _rms_with_lines(tmp_path, [_line(24, 1e-5), _line(96, 1e-5), _line(128, 1e-6, **{
        "x": {"type": "safetensors", "path": "small.safetensors", "tensor_key": "x"},
        "weight": {"type": "safetensors", "path": "small.safetensors", "tensor_key": "weight"}}), _line(200, 1e-6)])
    _write_safetensors(os.path.join(d, "small.safetensors"), {"x": x, "weight": w})
    p = problems.load(d)
    assert p.scalars == {"eps": 1e-5}  # the base line's (the smallest with at least 8 rows: 24)
    good = problems.judge(p, _solution(tmp_path, "uses_eps", "eps"))
    assert good.verdict == "faithful", good.text()
    assert [sc for sc, _ in good.parts] == [{"eps": 1e-6}]
    assert [w.name for w in good.parts[0][1].report.workloads] == ["wl-3", "wl-4"]
    assert "own workload lines with eps=1e-06" in good.text()
    d1 = good.to_dict()
    assert d1["scalar_sets"][0]["scalars"] == {"eps": 1e-6} and d1["scalar_sets"][0]["verdict"] == "faithful"
    # a kernel that keeps the definition's first eps: right on its lines, wrong on the small rows of eps 1e-6
    fixed = problems.judge(p, _solution(tmp_path, "eps_1e5", "1e-5"))
    assert fixed.report.verdict == "faithful" and fixed.parts[0][1].verdict == "unfaithful"
    assert fixed.verdict == "unfaithful"
    by = {w.name: w for w in fixed.parts[0][1].report.workloads}
    assert not by["wl-3"].ok and by["wl-3"].err_over_tol > 10, by["wl-3"]
    assert fixed.to_dict()["scalar_sets"][0]["verdict"] == "unfaithful"
    # --quick judges parity's workloads only
    assert problems.judge(p, _solution(tmp_path, "eps_1e5", "1e-5"), quick=True).parts == []


def test_own_lines_spread_over_sizes(tmp_path):
    d = _rms_with_lines(tmp_path, [_line(b, 1e-5) for b in (40, 8, 24, 16, 64, 32, 48, 56, 12, 20)])
    p = problems.load(d)
    dicts, _, notes = problems.own_workloads(p, limit=3)
    # by size 8 < 12 < 16 < 20 < 24 < 32 < ... < 64: the smallest (8, line 2), the fifth of ten (24,
    # line 3) and the largest (64, line 5), in line order
    assert [x["name"] for x in dicts] == ["wl-2", "wl-3", "wl-5"], [x["name"] for x in dicts]
    assert any("3 of 10 own workload lines judged" in n for n in notes)
    assert len(problems.own_workloads(p, limit=20)[0]) == 10
    assert problems.own_workloads(p, limit=0)[0] == []
    j = problems.judge(p, _solution(tmp_path, "uses_eps", "eps"), own_lines=2)
    assert [w.name for w in j.report.workloads if w.name.startswith("wl-")] == ["wl-2", "wl-5"]  # 8 and 64
    assert "--own-lines 2" in j.reproduce


# -- a GPU solution's inputs on its device ---------------------------------------------------------------
def test_on_device_copies_there_and_edits_back():
    """The wrapper GPU solutions run under (a CUDA device where one is; this machine has none, so
    the CPU stands in): the solution sees copies, and an input it edits shows in the caller's
    tensor, where parity's harness looks (modified-inputs)."""
    from parity._problem_solutions import on_device
    x = torch.arange(6.0).reshape(2, 3)
    ids = torch.tensor([1, 2], dtype=torch.int32)
    args = {"x": x, "ids": ids, "eps": 1e-5}
    with on_device(args, torch.device("cpu")) as a:
        assert a["x"] is not x and torch.equal(a["x"], x) and a["eps"] == 1e-5
        a["x"][0, 0] = 42.0
    assert x[0, 0] == 42.0 and torch.equal(ids, torch.tensor([1, 2], dtype=torch.int32))
    with on_device(args, None) as a:
        assert a is args


def test_structure_role_is_for_integer_inputs(tmp_path):
    d = tmp_path / "p"
    shutil.copytree(RMS, str(d))
    (d / "parity_roles.json").write_text(json.dumps({"roles": {"x": "structure"}}))
    with pytest.raises(problems.ProblemFileError, match="parity_roles.json: roles.x: structure is a role of integer"):
        problems.load(str(d))

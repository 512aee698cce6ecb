"""parity problem on folders, each problem with its solutions found by the benchmark's own naming
(docs/problems.md, "Folders and the benchmarks' naming"): a KernelBench run folder's
level_L_problem_P_sample_S_kernel.py files, a FlashInfer-Bench dataset root's solutions/, solution
JSONs matched by their "definition" field. The problems and solutions are parity's test files
(python/tests/problems/), copied into KernelBench's and FlashInfer-Bench's layouts."""
import json
import os
import shutil

import pytest

pytest.importorskip("torch", reason="parity.problems runs PyTorch references")

from parity import _problem_folders as folders  # noqa: E402
from problem_helpers import cli  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
P = os.path.join(HERE, "problems")
KB = os.path.join(P, "kernelbench")
KB2 = os.path.join(P, "kernelbench_more")  # problems written for the scaling and own-inputs cases


_cli = cli


def _kernelbench_run(tmp_path):
    lv = tmp_path / "KernelBench" / "level1"
    run = tmp_path / "runs" / "my_run"
    lv.mkdir(parents=True)
    run.mkdir(parents=True)
    shutil.copy(os.path.join(KB, "softmax.py"), str(lv / "23_Softmax.py"))
    shutil.copy(os.path.join(KB, "rmsnorm_gamma.py"), str(lv / "36_RMSNorm_.py"))
    shutil.copy(os.path.join(KB, "mse_loss.py"), str(lv / "94_MSELoss.py"))
    shutil.copy(os.path.join(KB, "softmax_new_faithful.py"), str(run / "level_1_problem_23_sample_0_kernel.py"))
    shutil.copy(os.path.join(KB, "softmax_new_tail.py"), str(run / "level_1_problem_23_sample_1_kernel.py"))
    shutil.copy(os.path.join(KB, "rmsnorm_gamma_new_faithful.py"), str(run / "level_1_problem_36_sample_0_kernel.py"))
    # another level's problem 36: not this folder's
    shutil.copy(os.path.join(KB, "rmsnorm_gamma_new_no_gamma.py"), str(run / "level_2_problem_36_sample_0_kernel.py"))
    return tmp_path / "KernelBench", run


def test_kernelbench_run_folder(tmp_path):
    root, run = _kernelbench_run(tmp_path)
    items = folders.problems_in(str(root))
    assert [os.path.basename(x) for x in items] == ["23_Softmax.py", "36_RMSNorm_.py", "94_MSELoss.py"]
    out = str(tmp_path / "r.json")
    r = _cli(str(root), "--solutions", str(run), "--quick", "--json", out)
    assert r.returncode == 1, r.stdout + r.stderr  # sample 1 of problem 23 drops the last column
    assert "no solution in" in r.stderr and "94_MSELoss.py" in r.stderr
    d = json.load(open(out))
    got = [(p["problem"]["name"], os.path.basename(p["solution"].split("(")[-1].rstrip(")")), p["verdict"])
           for p in d["problems"]]
    assert got == [("23_Softmax", "level_1_problem_23_sample_0_kernel.py", "faithful"),
                   ("23_Softmax", "level_1_problem_23_sample_1_kernel.py", "unfaithful"),
                   ("36_RMSNorm_", "level_1_problem_36_sample_0_kernel.py", "faithful")]
    assert [os.path.basename(s["path"]) for s in d["skipped"]] == ["94_MSELoss.py"]
    r = _cli(str(root), "--solutions", str(run), "--sample", "0", "--quick")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sample_1" not in r.stdout
    # one problem file and a run folder: that problem's samples
    r = _cli(str(root / "level1" / "23_Softmax.py"), "--solutions", str(run), "--quick")
    assert r.returncode == 1 and r.stdout.count("parity verdict") == 2, r.stdout + r.stderr


def test_flashinfer_root_finds_its_solutions(tmp_path):
    root = tmp_path / "flashinfer-trace"
    shutil.copytree(os.path.join(P, "flashinfer"), str(root))
    # the dataset's layout puts an author level above op_type: solutions/<author>/<op_type>/<def>/
    (root / "solutions" / "parity-tests").mkdir()
    shutil.move(str(root / "solutions" / "rmsnorm"), str(root / "solutions" / "parity-tests" / "rmsnorm"))
    out = str(tmp_path / "r.json")
    r = _cli(str(root), "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(out))
    assert sorted(p["solution"].split(" ")[0] for p in d["problems"]) == ["add_rmsnorm_bf16_sum", "add_rmsnorm_fp32_sum"]
    assert all(p["problem"]["format"] == "flashinfer" for p in d["problems"])
    r = _cli(str(root), "--quick", "--solution-name", "python_fp32_sum.json")
    assert r.returncode == 0 and r.stdout.count("parity verdict") == 1, r.stdout + r.stderr


def test_solutions_matched_by_definition(tmp_path):
    """Solution JSONs anywhere under --solutions, each judged on the problem its "definition"
    names; a solution of no problem here is ignored."""
    probs = tmp_path / "problems"
    probs.mkdir()
    shutil.copytree(os.path.join(P, "sol_gemm"), str(probs / "gemm"))
    sols = tmp_path / "sols" / "deep" / "er"
    sols.mkdir(parents=True)
    for n in ("solution_faithful.json", "solution_bf16_acc.json"):
        shutil.move(str(probs / "gemm" / n), str(sols / n))
    shutil.copy(os.path.join(P, "sol_rmsnorm", "solution_faithful.json"), str(sols / "other.json"))
    found = folders.solutions_by_definition(str(tmp_path / "sols"))
    assert sorted(len(v) for v in found.values()) == [1, 2]
    out = str(tmp_path / "r.json")
    r = _cli(str(probs), "--solutions", str(tmp_path / "sols"), "--quick", "--json", out)
    assert r.returncode == 1, r.stdout + r.stderr
    d = json.load(open(out))
    assert sorted(p["verdict"] for p in d["problems"]) == ["faithful", "unfaithful"]


def test_folder_usage_errors(tmp_path):
    root, run = _kernelbench_run(tmp_path)
    r = _cli(str(root), "--solutions", str(run), "--solution", "x.py")
    assert r.returncode == 2 and "give one" in r.stderr
    r = _cli(str(root), "--sample", "0")
    assert r.returncode == 2 and "--solutions RUN_DIR" in r.stderr
    r = _cli(str(root), "--solutions", str(tmp_path / "nope"))
    assert r.returncode == 3 and "no such folder" in r.stderr
    r = _cli(str(root), "--solutions", str(tmp_path))  # no kernels at all
    assert r.returncode == 3 and "nothing to judge" in r.stderr


def test_kernelbench_scaling_keeps_equal_sizes_equal():
    """KernelBench problems sized for a GPU are scaled down by halving their size constants; a
    size held in a tuple constant (input_shape = (4096,)) that must equal an int constant
    (batch_size) is halved with it, so the problem still runs."""
    from parity import problems
    p = problems.load(os.path.join(KB2, "row_scale_tuple_shape.py"))
    note = next(n for n in p.notes if n.startswith("scaled shapes"))
    assert "batch_size 4096 -> 512" in note and "input_shape (4096,) -> (512,)" in note, note
    j = problems.judge(p, None, quick=True)
    assert j.verdict == "faithful", j.text()


def test_kernelbench_scaling_counts_the_outputs():
    """An 8192 x 16 by 16 x 8192 product: 262144 input elements, 67 million output elements.
    The outputs count towards the cap, so the fp64 oracle's output fits this machine."""
    from parity import problems
    p = problems.load(os.path.join(KB2, "outer_gemm.py"))
    m = p.shapes[p.inputs["a"]["shape"][0]][0]
    assert m * m <= 1 << 20 and m < 8192, p.shapes
    assert problems.judge(p, None, quick=True).verdict == "faithful"


def test_kernelbench_reference_defined_on_its_own_inputs_only():
    """A KL divergence takes the log of probabilities: on parity's N(0,1) inputs the reference is
    NaN, so the problem is judged on its own get_inputs() draws (three seeds), said in a note."""
    from parity import problems
    p = problems.load(os.path.join(KB2, "kl_div_probs.py"))
    good = problems.judge(p, os.path.join(KB2, "kl_div_probs_new_faithful.py"), quick=True)
    assert good.verdict == "faithful", good.text()
    assert [w.name for w in good.report.workloads] == ["get_inputs-s42", "get_inputs-s43", "get_inputs-s44"]
    assert any("not defined on parity's role-drawn inputs" in n for n in good.problem.notes)
    bad = problems.judge(p, os.path.join(KB2, "kl_div_probs_new_mean.py"), quick=True)
    assert bad.verdict == "unfaithful" and bad.rule["verdict"] == "fail"

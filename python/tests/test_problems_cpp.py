"""C++ solutions built with torch's extension loader (docs/problems.md, "C++ and CUDA solutions"):
a SOL-ExecBench solution JSON of language cpp bound with "torch", and a KernelBench ModelNew that
builds C++ with load_inline, both run on the CPU; the tvm-ffi binding, CUDA without a device and a
machine without a compiler are `unsupported` with the reason; a source that does not compile is a
bad solution file naming the compiler's error. Written for parity's tests (not from the
benchmarks). Each build takes 15-25 s on 2 cores; the same sources are built once per process."""
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="parity.problems runs PyTorch references")

from parity import problems  # noqa: E402
from parity import _problem_build  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
P = os.path.join(HERE, "problems")
SOL = os.path.join(P, "sol_rmsnorm_cpp")
KB = os.path.join(P, "kernelbench")
needs_toolchain = pytest.mark.skipif(_problem_build.toolchain_missing() is not None,
                                     reason="cannot build C++ here: %s" % _problem_build.toolchain_missing())


def _judge(problem, solution, **kw):
    return problems.judge(problems.load(problem), solution, quick=True, **kw)


@needs_toolchain
def test_sol_cpp_solution_is_built_and_judged():
    """The same C++ file: its float-sum entry point is faithful, its bf16 running sum is not (both
    contracts' verdicts, and the benchmark's rule beside them). The second entry point reuses the
    first build (one module per sources and flags)."""
    j = _judge(SOL, os.path.join(SOL, "solution_cpp_faithful.json"))
    assert j.verdict == "faithful", j.text()
    assert "rmsnorm.cpp::run" in j.solution
    j = _judge(SOL, os.path.join(SOL, "solution_cpp_bf16_acc.json"))
    assert j.verdict == "unfaithful", j.text()
    assert len(_problem_build._BUILT) >= 1


@needs_toolchain
def test_kernelbench_load_inline_cpp_runs_on_the_cpu(monkeypatch):
    """A ModelNew whose load_inline has C++ sources only is built and run here (no CUDA needed):
    faithful as written, unfaithful when its row sum leaves out the last column."""
    prob = os.path.join(KB, "softmax.py")
    sol = os.path.join(KB, "softmax_new_cpp.py")
    j = _judge(prob, sol)
    assert j.verdict == "faithful", j.text()
    monkeypatch.setenv("PARITY_TEST_SOFTMAX_TAIL", "1")
    j = _judge(prob, sol)
    assert j.verdict == "unfaithful", j.text()


def _with_spec(tmp_path, **spec):
    with open(os.path.join(SOL, "solution_cpp_faithful.json")) as f:
        d = json.load(f)
    d["spec"].update(spec)
    d["spec"] = {k: v for k, v in d["spec"].items() if v is not None}
    p = tmp_path / "solution.json"
    p.write_text(json.dumps(d))
    return str(p)


def test_tvm_ffi_binding_and_cuda_without_a_device_are_unsupported(tmp_path):
    j = _judge(SOL, os.path.join(SOL, "solution_cpp_tvm_ffi.json"))
    assert j.verdict == "unsupported" and "tvm-ffi" in j.reason, j.reason
    # FlashInfer-Bench's default binding for C++ is tvm-ffi; SOL-ExecBench's (this folder) is torch
    fi = os.path.join(P, "flashinfer")
    assert os.path.isdir(fi)
    if not torch.cuda.is_available():
        j = _judge(SOL, _with_spec(tmp_path, language="cuda"))
        assert j.verdict == "unsupported" and "CUDA device" in j.reason, j.reason


def test_no_compiler_is_unsupported_with_the_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    why = _problem_build.toolchain_missing()
    assert why is not None and "no-such-compiler" in why and "apt-get install" in why
    j = _judge(SOL, os.path.join(SOL, "solution_cpp_faithful.json"))
    assert j.verdict == "unsupported" and "C++ compiler" in j.reason, j.reason


@needs_toolchain
def test_source_that_does_not_compile_is_a_bad_solution_file(tmp_path):
    with open(os.path.join(SOL, "solution_cpp_faithful.json")) as f:
        d = json.load(f)
    d["sources"][0]["content"] = d["sources"][0]["content"].replace("float ss = 0.0f;", "float ss = ;")
    p = tmp_path / "broken.json"
    p.write_text(json.dumps(d))
    with pytest.raises(problems.ProblemFileError) as e:
        _judge(SOL, str(p))
    assert "does not build" in str(e.value) and "error" in str(e.value) and "broken.json" in str(e.value)


@needs_toolchain
def test_entry_point_the_module_does_not_bind(tmp_path):
    p = _with_spec(tmp_path, entry_point="rmsnorm.cpp::nope")
    with pytest.raises(problems.ProblemFileError) as e:
        _judge(SOL, p)
    assert "binds no function 'nope'" in str(e.value)


@needs_toolchain
def test_crashing_and_hanging_cpp_kernels_get_a_verdict(tmp_path, monkeypatch):
    """A compiled solution runs in a child process: a null write is `crashed` naming SIGSEGV, a
    kernel that never returns is killed after PARITY_PROBLEM_TIMEOUT seconds, `crashed` too; the
    command itself carries on (the same sources: the build is reused)."""
    j = _judge(SOL, _with_spec(tmp_path, entry_point="rmsnorm.cpp::crash"), workloads=["base"])
    assert j.verdict == "crashed" and "SIGSEGV" in j.text(), j.text()
    monkeypatch.setenv("PARITY_PROBLEM_TIMEOUT", "3")
    j = _judge(SOL, _with_spec(tmp_path, entry_point="rmsnorm.cpp::spin"), workloads=["base"])
    assert j.verdict == "crashed" and "did not answer within 3 s" in j.text(), j.text()
    assert "in a child process" in j.solution


@needs_toolchain
def test_isolated_call_copies_the_kernels_writes_back(tmp_path):
    """Destination-passing through the child: the output the kernel writes there is the output
    here (the faithful verdict above depends on it); the child process is reused across calls."""
    from parity._problem_isolate import IsolatedCall
    p = problems.load(SOL)
    call = IsolatedCall(p.load_args, p.contract, os.path.join(SOL, "solution_cpp_faithful.json"), 0.0)
    x = torch.randn(8, 256).to(torch.bfloat16)
    w = torch.ones(256, dtype=torch.bfloat16)
    outs = call({"x": x, "weight": w, "eps": 1e-5})
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16)
    assert (outs[0].float() - ref.float()).abs().max() <= 2 ** -7
    pid = call.proc.pid
    call({"x": x, "weight": w, "eps": 1e-5})
    assert call.proc.pid == pid
    call.close()

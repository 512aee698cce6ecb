"""The typed public API of issue #40: exceptions with causes (UnfaithfulError, KernelError,
ProblemError, Report.assert_ok), one check/compare signature for built-in and declared ops,
parity.make_values against parity.inputs, parity.round_to's dtypes against ml_dtypes, the
isolate=True guard on an unguarded __main__, the expected signature in a misnamed kernel's
detail, the single-sourced version."""
import importlib
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kernels
import kernels_np
import parity
from conftest import cli, needs_cli

OP = "embedding_rmsnorm_bwd"
QUICK = dict(workloads=["uniform"], like="numpy", dtype="f32", floor=False)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
from custom_op import swiglu  # noqa: E402


# -- exceptions -------------------------------------------------------------------------------
def test_assert_ok_unfaithful_and_kernel_error_with_cause():
    bad = parity.check(OP, kernels.numpy_f16_accum, workloads=["zipf1.4"], like="numpy", dtype="f32", floor=False)
    assert bad.verdict == "unfaithful"
    with pytest.raises(parity.UnfaithfulError) as ei:
        bad.assert_ok()
    assert not isinstance(ei.value, parity.KernelError) and ei.value.report is bad
    assert "Reproduce: parity.check(" in str(ei.value)
    with pytest.raises(parity.UnfaithfulError, match="^mine$"):
        bad.assert_ok("mine")

    crashed = parity.check(OP, kernels.raises, **QUICK)
    with pytest.raises(parity.KernelError) as ke:
        crashed.assert_ok()
    e = ke.value
    assert isinstance(e, parity.UnfaithfulError) and isinstance(e, AssertionError)  # old callers keep working
    assert e.verdict == "crashed" and e.workload == "uniform" and "no kernel for this shape" in e.detail
    assert isinstance(e.__cause__, ValueError) and str(e.__cause__) == "no kernel for this shape"
    # assert_faithful raises the same, and a faithful report returns itself
    with pytest.raises(parity.KernelError):
        parity.testing.assert_faithful(OP, kernels.raises, **QUICK)
    good = parity.check(OP, kernels.numpy_fp32, **QUICK)
    assert good.assert_ok() is good


def test_problem_error_is_a_value_error():
    with pytest.raises(parity.ProblemError, match="no size for dimension"):
        parity.Op("p", inputs={"x": parity.Input(("N", "D"))}, outputs={"y": ("N", "D")},
                  reference=lambda x: x, shapes={"N": [4]})
    with pytest.raises(ValueError):  # existing callers catching ValueError keep working
        parity.Input(("N",), role="nonsense")
    bad_shape = parity.Op("p2", inputs={"x": parity.Input(("N", "D"))}, outputs={"y": ("N", "D")},
                          reference=lambda x: x[:1], shapes={"N": [4], "D": [8]})
    with pytest.raises(parity.ProblemError, match="shape"):
        parity.check(bad_shape, lambda x: x, workloads=["base"], like="numpy", dtype="f32")


# -- one signature ----------------------------------------------------------------------------
def test_options_that_do_not_apply_to_a_declared_op_are_errors():
    kw = dict(workloads=["base"], like="numpy", dtype="f32")
    # out_dtype applies to declared ops too since issue #35 (one harness): the dtype of out= buffers
    assert parity.check(swiglu, kernels_np.swiglu_np, out_dtype="bf16", **kw).ok
    with pytest.raises(ValueError, match="floor"):
        parity.check(swiglu, kernels_np.swiglu_np, floor=True, **kw)
    assert parity.check(swiglu, kernels_np.swiglu_np, floor=False, **kw).ok  # what it does anyway
    # parity.inputs / parity.compare take declared ops like built-in ones
    x = parity.inputs(swiglu, "base", dtype="f32")
    assert isinstance(x, parity.Inputs) and x.workload == "base" and set(x.tensors) == set(swiglu.inputs)
    y = kernels_np.swiglu_np(**x.tensors)
    r = parity.compare(swiglu, x, y)
    assert r.ok and "parity.compare(swiglu" in r.reproduce
    plain = {k: np.array(v) for k, v in x.tensors.items()}
    assert parity.compare(swiglu, plain, y, workload="base").workloads[0].err_over_tol == r.workloads[0].err_over_tol
    plain["a"][0, 0] += 1
    with pytest.raises(ValueError, match="input a differs"):
        parity.compare(swiglu, plain, y, workload="base")
    with pytest.raises(ValueError, match="floor"):
        parity.compare(swiglu, x, y, floor=True)


def test_reference_returning_round_to_bf16_is_promoted():
    """#37: a reference ending in parity.round_to(y, "bf16") gave float64 under the contract
    evaluation (float32 inputs), which parity refused; it now gives bf16, promoted exactly to the
    inputs' dtype (float64 for the reference, float32 for the contract evaluation)."""
    op = parity.Op("round_bf16", inputs={"x": parity.Input(("N", "D"))}, outputs={"y": ("N", "D")},
                   reference=lambda x: parity.round_to(x * x, "bf16"), shapes={"N": [16], "D": [32]})
    x = parity.inputs(op, "base", dtype="f32")
    want = np.asarray(parity.round_to(np.asarray(x["x"], np.float64) ** 2, "bf16"), dtype=np.float32)
    r = parity.compare(op, x, want)
    assert r.ok, str(r)
    ref = np.empty((16, 32))  # the fp64 reference the C library holds: the bf16 values, exactly
    assert parity._lib.lib.parity_py_case_reference(x._case.h, 0, ref.ctypes.data, ref.size) == 0
    assert np.array_equal(ref, np.asarray(want, np.float64))


# -- kernel signature ---------------------------------------------------------------------------
def misnamed(dy, x, gama, ids, eps):
    raise AssertionError("never called")


def swiglu_misnamed(a, c):
    raise AssertionError("never called")


def test_wrong_arguments_name_the_expected_signature():
    r = parity.check(OP, misnamed, **QUICK)
    d = r.workloads[0].detail
    assert r.verdict == "crashed"
    assert "fn(dy, x, gamma, ids, *, eps=" in d and "gama" in d, d
    s = parity.check(swiglu, swiglu_misnamed, workloads=["base"], like="numpy", dtype="f32")
    d = s.workloads[0].detail
    assert s.verdict == "crashed" and "fn(a, b)" in d and "(a, c)" in d, d
    with pytest.raises(parity.KernelError) as ke:
        s.assert_ok()
    assert isinstance(ke.value.__cause__, TypeError)


# -- make_values ------------------------------------------------------------------------------
def test_make_values_are_the_workloads_values():
    """gemm's A and B are workload values from streams 0x41 and 0x42; embedding's ids from the
    ids stream: make_values with the same seed gives them bit for bit (and parity.inputs is
    `parity gen`'s bytes, test_inputs.py)."""
    x = parity.inputs("gemm", "exact", seed=3, dtype="f32")
    assert np.array_equal(parity.make_values((64, 1031), "sparse-pow2", "f32", 3, stream=0x41), x["A"])
    assert np.array_equal(parity.make_values((1031, 48), "sparse-pow2", "f32", 3, stream=0x42), x["B"])
    y = parity.inputs("gemm", "x64", seed=2, dtype="bf16")
    a = parity.make_values((64, 1031), "normal", "bf16", 2, stream=0x41, scale=64)
    assert a.dtype == np.uint16 and np.array_equal(a, y["A"])
    e = parity.inputs(OP, "uniform", seed=5, dtype="f32")
    assert np.array_equal(parity.make_values(e["ids"].shape, "ids-uniform", seed=5, vocab=4096), e["ids"])
    # laws
    u = parity.make_values((64, 256), "uniform01", "f64", 1)
    assert u.dtype == np.float64 and 0 <= u.min() and u.max() < 1
    k = parity.make_values(1000, "int", "f32", 1)
    assert set(np.unique(k)) <= set(range(-4, 5))
    g = parity.make_values(512, "gamma-trained", "f32", 1)
    assert (g > 0).all()
    assert not np.array_equal(parity.make_values((4, 8), seed=1), parity.make_values((4, 8), seed=2))
    with pytest.raises(ValueError, match="scheme"):
        parity.make_values(4, "gaussian")
    with pytest.raises(ValueError, match="vocab"):
        parity.make_values(4, "ids-zipf")


@needs_cli
def test_make_values_equal_parity_gen(tmp_path):
    """The same values as `parity gen`'s file, byte for byte (bf16, the CLI's default dtype)."""
    f = tmp_path / "in.safetensors"
    subprocess.run([cli(), "gen", "gemm", "--workload", "x64", "--seed", "4", "--out", str(f)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for name, shape, stream in (("A", (64, 1031), 0x41), ("B", (1031, 48), 0x42)):
        lo, hi = header[name]["data_offsets"]
        mine = parity.make_values(shape, "normal", "bf16", 4, stream=stream, scale=64)
        assert raw[8 + n + lo:8 + n + hi] == mine.tobytes(), name


# -- round_to ---------------------------------------------------------------------------------
def test_round_to_returns_the_formats_dtype():
    ml = pytest.importorskip("ml_dtypes")
    x = parity.make_values(4096, "normal", "f64", 7, scale=100.0)
    for fmt, dt in (("fp32", np.float32), ("tf32", np.float32), ("fp16", np.float16), ("bf16", ml.bfloat16),
                    ("e4m3fn", ml.float8_e4m3fn), ("e5m2", ml.float8_e5m2)):
        got = parity.round_to(x, fmt)
        assert got.dtype == np.dtype(dt), fmt
        if fmt != "tf32":  # numpy / ml_dtypes round from float64 directly, as parity
            with np.errstate(over="ignore", invalid="ignore"):
                want = x.astype(dt)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8), equal_nan=False) or \
                np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True), fmt
    assert isinstance(parity.round_to(0.1, "bf16"), ml.bfloat16)
    assert parity.round_to(0.1, "custom:m=3,e=4").dtype == np.float32
    assert parity.round_to([1.5], "bf16", bits=True).dtype == np.uint32


def test_round_to_without_ml_dtypes_holds_the_values_exactly(monkeypatch):
    from parity import _formats
    monkeypatch.setattr(_formats, "_ml_dtypes", lambda: None)
    x = np.linspace(-500, 500, 1001)
    assert parity.round_to(x, "bf16").dtype == np.float32
    assert parity.round_to(x, "e4m3fn", saturate=True).dtype == np.float16
    assert np.array_equal(parity.round_to(x, "bf16").astype(np.float64), _formats.round_f64(x, "bf16"))
    e5 = parity.round_to(x, "e5m2")
    assert np.array_equal(e5.astype(np.float64), _formats.round_f64(x, "e5m2"))


def test_round_is_a_deprecated_alias_keeping_float64():
    with pytest.warns(DeprecationWarning, match="round_to"):
        v = parity.round(np.array([0.1, 1 + 2 ** -8]), "bf16")
    assert v.dtype == np.float64 and v[1] == 1.0
    assert "round" not in parity.__all__ and "round_to" in parity.__all__


# -- isolate=True and __main__ ----------------------------------------------------------------
SCRIPT = """import sys
sys.path.insert(0, {here!r})
import kernels_np
import parity


def main():
    r = parity.check("embedding_rmsnorm_bwd", kernels_np.numpy_fp32, workloads=["uniform"], like="numpy",
                     dtype="f32", floor=False, isolate=True)
    print("verdict", r.verdict)

{tail}
"""


def _run_script(tmp_path, tail):
    p = tmp_path / "script.py"
    p.write_text(SCRIPT.format(here=HERE, tail=tail))
    return subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_isolate_refuses_an_unguarded_main(tmp_path):
    r = _run_script(tmp_path, "main()\n")
    assert r.returncode != 0 and "verdict" not in r.stdout
    assert 'if __name__ == "__main__":' in r.stderr and "isolate=True" in r.stderr, r.stderr
    assert "line 12" in r.stderr, r.stderr  # the top-level line that leads to the call
    ok = _run_script(tmp_path, 'if __name__ == "__main__":\n    main()\n')
    assert ok.returncode == 0 and "verdict faithful" in ok.stdout, ok.stderr


def test_isolate_names_a_lambda_that_cannot_be_sent():
    r = parity.check(swiglu, lambda a, b: a * b, workloads=["base"], like="numpy", dtype="f32", isolate=True)
    assert r.verdict == "crashed" and "lambda" in r.workloads[0].detail, str(r)


# -- version ----------------------------------------------------------------------------------
def test_version_is_cmakes_project_version():
    src = os.path.join(HERE, "..", "..", "CMakeLists.txt")
    with open(src) as f:
        m = re.search(r"project\(parity\s+VERSION\s+([0-9.]+)", f.read())
    assert m and parity.__version__ == m.group(1)


def test_public_api_is_annotated():
    import inspect
    for name in parity.__all__:
        obj = getattr(parity, name)
        if inspect.isfunction(obj):
            assert "return" in obj.__annotations__, name
    here = os.path.dirname(parity.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module("parity.testing").assert_faithful  # no warning on import


def swiglu_off(a, b):
    """swiglu with a relative error of 2^-10 on every element"""
    return (a / (1 + np.exp(-a)) * b * (1 + 2.0 ** -10)).astype(np.float32)


def test_declared_op_failure_message():
    r = parity.check(swiglu, swiglu_off, workloads=["base"], like="numpy", dtype="f32")
    with pytest.raises(parity.UnfaithfulError) as ei:
        r.assert_ok()
    msg = str(ei.value)
    assert "Greatest error over tolerance" in msg and " at y[" in msg and "|err| nan" not in msg, msg


def test_a_declared_op_may_take_a_builtin_ops_name():
    """A parity.Op is known to the C library by a key of its own (python/parity/_declared.py),
    so naming it like a built-in op ("gemm") neither collides with nor shadows the built-in."""
    op = parity.Op("gemm", inputs={"A": parity.Input(("M", "K")), "B": parity.Input(("K", "N"), role="weight")},
                   outputs={"C": ("M", "N")}, reference=lambda A, B: A @ B,
                   shapes={"M": [8], "K": [64], "N": [4]}, reductions={"C": ["K"]})
    r = parity.check(op, lambda A, B: (np.asarray(A, np.float64) @ np.asarray(B, np.float64)).astype(np.float32),
                     workloads=["base"], like="numpy", dtype="f32")
    import json
    assert r.ok and r.op == "gemm" and json.loads(r.to_json())["custom_op"] is True, str(r)
    assert "llm-fwd" in [w["name"] for w in parity.op_info("gemm")["workloads"]]  # the built-in is untouched

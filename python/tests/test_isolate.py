"""isolate=True: a function that segfaults, exits or hangs gives a verdict in a spawned worker,
and the test process goes on."""
import os

import kernels_np as kernels
import parity

OP = "embedding_rmsnorm_bwd"
KW = dict(workloads=["uniform"], like="numpy", dtype="f32", floor=False, isolate=True)


def test_segfault_is_crashed_and_we_survive():
    pid = os.getpid()
    r = parity.check(OP, kernels.segfaults, **KW)
    assert r.verdict == "crashed", str(r)
    assert "SIGSEGV" in r.workloads[0].detail
    assert os.getpid() == pid  # still here


def test_exit_and_hang():
    e = parity.check(OP, kernels.exits, **KW)
    assert e.verdict == "crashed" and "status 3" in e.workloads[0].detail, str(e)
    h = parity.check(OP, kernels.hangs, timeout=2, **KW)
    assert h.verdict == "timeout", str(h)


def test_isolated_good_function_is_judged_as_in_process():
    a = parity.check(OP, kernels.numpy_fp32, **KW)
    b = parity.check(OP, kernels.numpy_fp32, **dict(KW, isolate=False))
    assert a.verdict == b.verdict == "faithful"
    assert a.workloads[0].err_over_tol == b.workloads[0].err_over_tol


def test_declared_op_isolated():
    """isolate=True for a declared op (parity.Op): the op itself never crosses to the worker (its
    reference is a lambda, which does not pickle); the verdicts are those of the in-process run."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
    from custom_op import swiglu
    kw = dict(workloads=["base", "odd"], like="numpy", dtype="f32", isolate=True)
    pid = os.getpid()
    a = parity.check(swiglu, kernels.swiglu_np, **kw)
    b = parity.check(swiglu, kernels.swiglu_np, **dict(kw, isolate=False))
    assert a.verdict == b.verdict == "faithful", str(a)
    assert [w.err_over_tol for w in a.workloads] == [w.err_over_tol for w in b.workloads]
    s = parity.check(swiglu, kernels.swiglu_segfaults, **kw)
    assert s.verdict == "crashed" and all("SIGSEGV" in w.detail for w in s.workloads), str(s)
    assert "isolate=True" in s.reproduce
    e = parity.check(swiglu, kernels.swiglu_exits, **dict(kw, workloads=["base"]))
    assert e.verdict == "crashed" and "status 3" in e.workloads[0].detail, str(e)
    h = parity.check(swiglu, kernels.swiglu_hangs, timeout=2, **dict(kw, workloads=["base"]))
    assert h.verdict == "timeout", str(h)
    assert os.getpid() == pid

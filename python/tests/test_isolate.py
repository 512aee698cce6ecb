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

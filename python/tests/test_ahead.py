"""parity.check builds a declared op's next case while the candidate runs on the current one
(python/parity/_check.py _Ahead; docs/custom-ops.md, "One workload ahead"): user code never runs
on two threads at once, the report is the one a build at a time gives, a later workload's build
error is raised at its workload, a case's C buffers go with the last reference to them, and the
harness's probes run once per set of input shapes (a pointer memo still caught)."""
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import parity
from parity import _case, _check


class Inside:
    """Counts the threads inside user code at once; the largest count seen."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.threads = set()

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.get_ident())
        time.sleep(0.002)  # long enough for another thread to come in, were it allowed

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


def _silu_op(inside, fail_on=None):
    def ref(x):
        with inside:
            if fail_on is not None and x.shape[0] == fail_on:
                raise ValueError("the reference refuses %d rows" % fail_on)
            return x / (1 + np.exp(-x))
    return parity.Op("ahead_silu", inputs={"x": parity.Input(("N", "D"), role="activation")},
                     outputs={"y": ("N", "D")}, reference=ref, shapes={"N": [64], "D": [256]})


def test_user_code_never_runs_on_two_threads_at_once():
    inside = Inside()
    op = _silu_op(inside)

    def fn(x):
        with inside:
            x = x.float()
            return (x * (1 / (1 + (-x).exp()))).to(x.dtype)
    rep = parity.check(op, fn, workloads="quick", like="torch")
    assert rep.verdict == "faithful", str(rep)
    assert inside.most == 1
    assert len(inside.threads) == 2  # the references ran on the build thread too: ahead


def test_the_report_is_the_one_built_one_case_at_a_time():
    """The same numbers with the build ahead and without (each case built in turn)."""
    op = _silu_op(Inside())

    def fn(x):
        x = x.float()
        return (x * (1 / (1 + (-x).exp()))).to(x.dtype)
    ahead = parity.check(op, fn, workloads="quick", like="torch")
    ok = _check._Ahead.__init__

    def sequential(self, *a, **k):
        ok(self, *a, **k)
        self.ok = False
    _check._Ahead.__init__ = sequential
    try:
        alone = parity.check(op, fn, workloads="quick", like="torch")
    finally:
        _check._Ahead.__init__ = ok
    assert [(w.name, w.verdict, w.err_over_tol) for w in ahead.workloads] == \
        [(w.name, w.verdict, w.err_over_tol) for w in alone.workloads]


def test_a_later_workloads_build_error_is_raised_at_its_workload():
    """The reference fails on the odd workload (65 x 257), built while `base` runs: the check
    raises the reference's error after the workloads before it were run, and no build thread
    is left behind."""
    op = _silu_op(Inside(), fail_on=65)
    seen = []

    def fn(x):
        seen.append(tuple(x.shape))
        x = x.float()
        return (x * (1 / (1 + (-x).exp()))).to(x.dtype)
    before = threading.active_count()
    with pytest.raises(Exception, match="refuses 65 rows"):
        parity.check(op, fn, workloads="quick", like="torch")
    assert (64, 256) in seen and (65, 257) not in seen
    assert threading.active_count() == before


def test_a_cases_buffers_go_with_it_without_the_cyclic_collector():
    """The input views keep the C case alive, not the Case object: dropping both frees it by
    reference counting alone (a cycle made every case wait for gc, and the heap grew)."""
    op = _silu_op(Inside())
    key, _ = _check._resolve(op)
    gc.disable()
    try:
        c = _case.Case(key, "base", 1, "bf16")
        h = weakref.ref(c._hd)
        x = c.arrays()["x"]
        del c
        assert h() is not None  # the view holds it
        del x
        assert h() is None
    finally:
        gc.enable()


def test_the_probes_run_once_per_set_of_input_shapes():
    """quick: base, outlier-ch and magnitude share one shape, odd has its own: the probes (three
    more calls) on base and odd only; and a memo keyed on the input pointer is still caught."""
    op = _silu_op(Inside())
    calls = []

    def fn(x):
        calls.append(tuple(x.shape))
        x = x.float()
        return (x * (1 / (1 + (-x).exp()))).to(x.dtype)
    rep = parity.check(op, fn, workloads="quick", like="torch")
    assert [w.name for w in rep.workloads] == ["base", "outlier-ch", "odd", "magnitude"]
    assert calls.count((64, 256)) == 4 + 1 + 1 and calls.count((65, 257)) == 4

    memo = {}

    def cached(x):  # keyed on the input pointer; the inputs kept, so no address comes back
        k = x.data_ptr()
        if k not in memo:
            y = x.float()
            memo[k] = (x, (y * (1 / (1 + (-y).exp()))).to(x.dtype))
        return memo[k][1]
    rep = parity.check(op, cached, workloads="quick", like="torch")
    assert [w.verdict for w in rep.workloads] == ["stale-cache", "faithful", "stale-cache", "faithful"], str(rep)

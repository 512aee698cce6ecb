"""parity.cases: an op's workloads as objects for pytest.mark.parametrize, each able to hand out
its inputs and judge outputs computed from them.

    @pytest.mark.parametrize("case", parity.cases("embedding_rmsnorm_bwd"), ids=str)
    def test_mine(case):
        x = case.inputs(like="torch")
        case.judge(my_kernel(**x, **x.dims)).assert_ok()
"""
from . import _case
from ._check import compare
from .report import UnfaithfulError


class ParityCase:
    def __init__(self, op, workload, seed, dtype):
        self.op, self.workload, self.seed, self.dtype = op, workload, seed, dtype
        self._inputs = None

    def __str__(self):
        return self.workload

    def __repr__(self):
        return "parity.cases(%r)[%s, seed=%d, dtype=%s]" % (self.op, self.workload, self.seed, self.dtype)

    def inputs(self, *, like="torch", device="cpu"):
        """The workload's inputs (and attributes; output dimensions in .dims)."""
        self._inputs = _case.inputs(self.op, self.workload, seed=self.seed, dtype=self.dtype,
                                    like=like, device=device)
        return self._inputs

    def judge(self, outputs, *, floor=True):
        """A Report on outputs computed from this case's inputs; report.assert_ok() raises
        parity.UnfaithfulError with assert_faithful's message."""
        if self._inputs is None:
            self.inputs(like="numpy")
        return _Judged(compare(self.op, self._inputs, outputs, floor=floor))


class _Judged:
    """A Report with assert_ok()."""

    def __init__(self, report):
        self.report = report

    def __getattr__(self, k):
        return getattr(self.report, k)

    def __str__(self):
        return str(self.report)

    def _repr_html_(self):
        return self.report._repr_html_()

    def assert_ok(self, msg=None):
        __tracebackhide__ = True
        if not self.report.ok:
            from .testing import failure_message
            raise UnfaithfulError(msg or failure_message(self.report), self.report)
        return self.report


def cases(op, *, quick=True, dtype="bf16", seed=1):
    """One ParityCase per workload of op (production-sized ones too when quick=False)."""
    return [ParityCase(op, w, seed, dtype) for w in _case.workload_names(op, "quick" if quick else None)]

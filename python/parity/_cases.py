"""parity.cases: an op's workloads as objects for pytest.mark.parametrize, each able to hand out
its inputs and judge outputs computed from them.

    @pytest.mark.parametrize("case", parity.cases("embedding_rmsnorm_bwd"), ids=str)
    def test_mine(case):
        x = case.inputs(like="torch")
        case.judge(my_kernel(**x, **x.dims)).assert_ok()
"""
from __future__ import annotations

from typing import Any, List, Optional

from . import _case
from ._check import compare
from ._report import Report


class ParityCase:
    """One workload of an op: .inputs() hands them out, .judge(outputs) returns a Report."""

    def __init__(self, op: str, workload: str, seed: int, dtype: str) -> None:
        self.op, self.workload, self.seed, self.dtype = op, workload, seed, dtype
        self._inputs: Optional[_case.Inputs] = None

    def __str__(self) -> str:
        return self.workload

    def __repr__(self) -> str:
        return "parity.cases(%r)[%s, seed=%d, dtype=%s]" % (self.op, self.workload, self.seed, self.dtype)

    def inputs(self, *, like: str = "torch", device: Any = "cpu") -> _case.Inputs:
        """The workload's inputs (and attributes; output dimensions in .dims)."""
        self._inputs = _case.inputs(self.op, self.workload, seed=self.seed, dtype=self.dtype,
                                    like=like, device=device)
        return self._inputs

    def judge(self, outputs: Any, *, floor: bool = True) -> Report:
        """A Report on outputs computed from this case's inputs; report.assert_ok() raises
        parity.UnfaithfulError (parity.KernelError) with assert_faithful's message."""
        if self._inputs is None:
            self.inputs(like="numpy")
        return compare(self.op, self._inputs, outputs, floor=floor)


def cases(op: str, *, quick: bool = True, dtype: str = "bf16", seed: int = 1) -> List[ParityCase]:
    """One ParityCase per workload of op (production-sized ones too when quick=False)."""
    return [ParityCase(op, w, seed, dtype) for w in _case.workload_names(op, "quick" if quick else None)]

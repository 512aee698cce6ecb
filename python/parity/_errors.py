"""The package's exceptions. Each says what went wrong and keeps what caused it (`raise ... from`):
a kernel's own exception, the C library's status, the declaration that is wrong.

    UnfaithfulError (AssertionError)  assert_faithful / Report.assert_ok on a report that is not
                                      faithful; .report holds the Report
      KernelError                     ... because the kernel did not run to a numeric verdict
                                      (crashed, timeout, wrote-out-of-bounds, modified-inputs,
                                      nondeterministic, unsupported): .verdict, .detail (the
                                      message of the call or of the isolated worker), .workload
    ProblemError (ValueError)         a parity.Op / parity.Input declaration parity cannot judge
                                      against (a missing size, a reference that gives NaN or the
                                      wrong shape, a reduction that is not multilinear)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._report import Report

__all__ = ["UnfaithfulError", "KernelError", "ProblemError"]


class UnfaithfulError(AssertionError):
    """A report that is not faithful, raised as an assertion; .report holds the Report."""

    def __init__(self, message: str, report: Optional["Report"] = None) -> None:
        super().__init__(message)
        self.report = report


class KernelError(UnfaithfulError):
    """The kernel did not run to a numeric verdict: .verdict (the report's verdict string),
    .detail (what the call, or the isolated worker running it, said), .workload. Its __cause__
    is the kernel's own exception when it ran in this process."""

    def __init__(self, message: str, report: Optional["Report"] = None, *, verdict: str = "crashed",
                 detail: str = "", workload: Optional[str] = None) -> None:
        super().__init__(message, report)
        self.verdict = verdict
        self.detail = detail
        self.workload = workload


class ProblemError(ValueError):
    """A declaration (parity.Op, parity.Input) that cannot be judged against. A ValueError, so
    callers that caught ValueError before keep working."""

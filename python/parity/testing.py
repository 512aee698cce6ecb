"""parity.testing.assert_faithful: parity.check as an assertion for pytest, in the manner of
torch.testing.assert_close (keyword-only options, an AssertionError subclass, msg as a string
or a callable, this helper's frame hidden from pytest's traceback)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from ._check import check
from ._errors import KernelError, UnfaithfulError
from ._report import Report, failure_message

__all__ = ["assert_faithful", "UnfaithfulError", "KernelError", "failure_message"]


def assert_faithful(op: Any, fn: Callable[..., Any], *, msg: Union[str, Callable[[str], str], None] = None,
                    **check_kwargs: Any) -> Report:
    """Raise parity.UnfaithfulError unless parity.check(op, fn, **check_kwargs) says "faithful"
    (parity.KernelError, a subclass, when the kernel did not run to a numeric verdict: crashed,
    timeout, ...). msg: a string replacing the message, or a callable taking the generated
    message and returning the one to raise with. Returns the Report when faithful."""
    __tracebackhide__ = True
    return check(op, fn, **check_kwargs).assert_ok(msg)

"""parity: is a kernel faithful to its op's math? The Python door to libparity.

    import parity
    report = parity.check("embedding_rmsnorm_bwd", my_kernel, workloads="quick")
    print(report)                      # the CLI's text report
    parity.testing.assert_faithful("embedding_rmsnorm_bwd", my_kernel, workloads="quick")

docs/python.md has the whole API; numpy is the only hard dependency, torch is used when present.
"""
from . import logprobs, testing
from ._case import inputs, op_info, ops
from ._check import check, compare
from ._lib import VERDICTS
from .cases import cases
from .formats import round  # noqa: A004 (parity.round, as the issue names it)
from .report import Report, UnfaithfulError, WorkloadResult
from . import custom, custom_power  # noqa: E402 (declared ops, docs/custom-ops.md)
from .custom import Input, Op  # noqa: E402
from .custom_power import power  # noqa: E402

__version__ = "0.1.0"
__all__ = ["check", "compare", "inputs", "ops", "op_info", "cases", "round", "logprobs", "testing",
           "Report", "WorkloadResult", "UnfaithfulError", "VERDICTS", "Op", "Input", "power"]

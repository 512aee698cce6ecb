"""parity: is a kernel faithful to its op's math? The Python door to libparity.

    import parity
    report = parity.check("embedding_rmsnorm_bwd", my_kernel, workloads="quick")
    print(report)                      # the CLI's text report
    report.assert_ok()                 # parity.UnfaithfulError / parity.KernelError unless faithful
    parity.testing.assert_faithful("embedding_rmsnorm_bwd", my_kernel, workloads="quick")
    parity.capture(model, (ids,), "A"); parity.capture(served, (ids,), "B", replay_from="A")
    parity.bisect("A", "B", floor="A2")  # which module first departs (docs/bisect.md)

docs/python.md has the whole API; numpy is the only hard dependency, torch is used when present.
The public API is what __all__ lists (typed: the package ships py.typed); modules whose names
start with "_" are internal.
"""
from . import logprobs, testing
from ._case import Inputs, inputs, op_info, ops
from ._capture import bisect, capture, read_capture
from ._cases import ParityCase, cases
from ._check import check, compare
from ._custom import Input, Op
from ._custom_cause import intermediate
from ._custom_power import PowerTable, power
from ._errors import KernelError, ProblemError, UnfaithfulError
from ._formats import FORMATS, round, round_to  # round: deprecated alias of round_to
from ._lib import VERDICTS, version as _version
from ._report import Report, WorkloadResult
from ._values import SCHEMES, make_values

__version__: str = _version()
__all__ = ["check", "compare", "inputs", "Inputs", "ops", "op_info", "cases", "ParityCase", "round_to",
           "FORMATS", "make_values", "SCHEMES", "logprobs", "testing", "Report", "WorkloadResult",
           "UnfaithfulError", "KernelError", "ProblemError", "VERDICTS", "Op", "Input", "intermediate", "power",
           "PowerTable", "capture", "bisect", "read_capture", "__version__"]

"""parity.testing.assert_faithful: parity.check as an assertion for pytest, in the manner of
torch.testing.assert_close (keyword-only options, an AssertionError subclass, msg as a string
or a callable, this helper's frame hidden from pytest's traceback)."""
from ._check import check
from .report import UnfaithfulError

__all__ = ["assert_faithful", "UnfaithfulError", "failure_message"]


def _fmt(x):
    if isinstance(x, str):
        return x
    return "%.9g" % x


def failure_message(report):
    """The message assert_faithful raises with: what failed, the worst element with got, ref and
    tolerance, rows failed / total, the diagnosis line and the one-line reproducer."""
    w = report.worst
    lines = ["%s is %s as %s (workload %s, seed %s)." % (report.kernel, report.verdict, report.op,
                                                         w.name, report.seed)]
    if w.verdict in ("faithful", "unfaithful"):
        e = w.worst
        tok = ' (token "%s")' % e["token_text"] if e.get("token_text") else ""
        pct = 100.0 * w.rows_failed / w.rows_judged if w.rows_judged else 0.0
        lines.append("Mismatched rows: %d / %d (%.1f%%)" % (w.rows_failed, w.rows_judged, pct))
        lines.append("Greatest error over tolerance: %s at %s[%s, %s]%s, %s terms" % (
            "%.3g" % w.err_over_tol, e.get("output"), e.get("row"), e.get("col"), tok, e.get("terms")))
        lines.append("  got %s, ref %s: |err| %s > tol %s" % (_fmt(e.get("got")), _fmt(e.get("ref")),
                                                              "%.3g" % float(e.get("abs_err")),
                                                              "%.3g" % float(e.get("tol"))))
        if w.noise_floor is not None:
            lines.append("  (the faithful catalog variants reach err/tol %.3g here)" % w.noise_floor)
    else:
        lines.append("%s: %s" % (w.verdict, w.detail))
    diag = [l.strip() for l in report.text.splitlines() if l.strip().startswith("diagnosis (")]
    if diag:
        lines.append(diag[0][0].upper() + diag[0][1:])
    others = ", ".join("%s %s" % (x.name, "ok" if x.ok else x.verdict) for x in report.workloads)
    lines.append("Workloads: " + others)
    lines.append("Reproduce: " + report.reproduce)
    return "\n".join(lines)


def assert_faithful(op, fn, *, msg=None, **check_kwargs):
    """Raise parity.UnfaithfulError unless parity.check(op, fn, **check_kwargs) says "faithful".
    msg: a string replacing the message, or a callable taking the generated message and
    returning the one to raise with. Returns the Report when faithful."""
    __tracebackhide__ = True
    report = check(op, fn, **check_kwargs)
    if report.ok:
        return report
    text = failure_message(report)
    if callable(msg):
        text = msg(text)
    elif msg is not None:
        text = str(msg)
    raise UnfaithfulError(text, report)

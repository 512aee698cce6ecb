"""Reports: what parity.check and parity.compare return. The text is the CLI's report and the
JSON the CLI's schema (docs/check-json.md), both produced by the same C code as `parity check`;
the Python objects are views of that JSON."""
from __future__ import annotations

import html
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._errors import KernelError, UnfaithfulError

__all__ = ["Report", "WorkloadResult", "UnfaithfulError", "KernelError", "failure_message"]


class WorkloadResult:
    """One workload of a report: name, verdict, err_over_tol (worst |error| / tolerance, > 1
    fails), detail, rows_failed, rows_judged, worst (the worst element), diagnosis (or None),
    noise_floor, seconds (the judged call's wall time)."""

    def __init__(self, d: Dict[str, Any], seconds: Optional[float] = None) -> None:
        self._d = d
        self.name: str = d["name"]
        self.verdict: str = d["verdict"]
        self.ok = self.verdict == "faithful"
        q = d.get("max_err_over_tol")
        self.err_over_tol = float(q) if q is not None else float("nan")
        self.detail: str = d.get("detail", "")
        self.rows_failed: int = d.get("rows_failed", 0)
        self.rows_judged: int = d.get("rows_judged", 0)
        self.worst: Dict[str, Any] = d.get("worst", {})
        self.worst_rows: List[Any] = d.get("worst_rows", [])
        self.diagnosis: Optional[Dict[str, Any]] = d.get("diagnosis")
        nf = d.get("noise_floor")
        self.noise_floor: Optional[float] = None if nf is None or (isinstance(nf, (int, float)) and nf < 0) else nf
        self.seconds = seconds

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._d)

    def __repr__(self) -> str:
        return "WorkloadResult(%r, %r, err_over_tol=%.3g)" % (self.name, self.verdict, self.err_over_tol)


class Report:
    """The verdict on one function for one op. verdict: the CLI's verdict string ("faithful",
    "unfaithful", "crashed", "timeout", "wrote-out-of-bounds", "modified-inputs",
    "nondeterministic", "unsupported", "stale-cache"); ok: verdict == "faithful"; workloads: one
    WorkloadResult per workload; str(report): the CLI's text report; to_json(): the CLI's JSON."""

    def __init__(self, op: str, text: str, json_text: str, reproduce: str,
                 seconds: Optional[Sequence[Optional[float]]] = None,
                 causes: Optional[Dict[str, BaseException]] = None) -> None:
        self.op = op
        self.text = text
        self._json = json_text
        d = json.loads(json_text)
        self._d = d
        k = d["kernels"][0]
        self.kernel: str = k["name"]
        self.verdict: str = k["verdict"]
        self.ok = self.verdict == "faithful"
        secs = list(seconds) if seconds else [None] * len(k["workloads"])
        self.workloads = [WorkloadResult(w, s) for w, s in zip(k["workloads"], secs)]
        self.worst_workload: str = k["worst_workload"]
        self.diagnosis: Optional[Dict[str, Any]] = k.get("diagnosis")
        # baselines=True: {rule name: {"caught", "pass_fraction", "margin", "rule"}}, the CLI
        # JSON's "baselines" object (docs/check-json.md); None otherwise.
        self.baselines: Optional[Dict[str, Any]] = k.get("baselines")
        self.reproduce = reproduce
        self.seed: int = d["seed"]
        # The exception a workload's in-process call raised, by workload (the __cause__ of the
        # KernelError assert_ok raises).
        self.causes: Dict[str, BaseException] = dict(causes or {})

    def assert_ok(self, msg: Union[str, Callable[[str], str], None] = None) -> "Report":
        """Return the report when faithful; else raise parity.UnfaithfulError (an unfaithful
        verdict) or parity.KernelError (crashed, timeout, wrote-out-of-bounds, modified-inputs,
        nondeterministic, unsupported: .verdict, .detail), with assert_faithful's message, from
        the kernel's own exception when it raised one in this process. msg: a string replacing
        the message, or a callable taking the generated message and returning the one to raise."""
        __tracebackhide__ = True
        if self.ok:
            return self
        text = failure_message(self)
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = str(msg)
        if self.verdict == "unfaithful":
            raise UnfaithfulError(text, self)
        w = self.worst
        raise KernelError(text, self, verdict=self.verdict, detail=w.detail,
                          workload=w.name) from self.causes.get(w.name)

    @property
    def worst(self) -> WorkloadResult:
        """The WorkloadResult that decided the verdict."""
        return next(w for w in self.workloads if w.name == self.worst_workload)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return "<parity.Report %s %s: %s (%s)>" % (self.op, self.kernel, self.verdict,
                                                   ", ".join("%s %s" % (w.name, w.verdict) for w in self.workloads))

    def to_json(self) -> str:
        """The CLI's JSON report (`parity check --json`, schema docs/check-json.md)."""
        return self._json

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = json.loads(self._json)
        return d

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.ok else "#cf222e"
        rows = "".join(
            "<tr><td>%s</td><td style='color:%s'>%s</td><td>%s</td><td>%s / %s</td><td>%s</td></tr>" % (
                html.escape(w.name), "#1a7f37" if w.ok else "#cf222e", html.escape(w.verdict),
                "%.3g" % w.err_over_tol, w.rows_failed, w.rows_judged, html.escape(w.detail))
            for w in self.workloads)
        return ("<div><b>parity</b> %s &mdash; <code>%s</code>: <b style='color:%s'>%s</b>"
                "<table><tr><th>workload</th><th>verdict</th><th>err/tol</th><th>rows failed</th>"
                "<th>detail</th></tr>%s</table><details><summary>report</summary><pre>%s</pre>"
                "</details></div>" % (html.escape(self.op), html.escape(self.kernel), color,
                                      html.escape(self.verdict), rows, html.escape(self.text)))


def _fmt(x: Any) -> str:
    if isinstance(x, str):
        return x
    return "%.9g" % x


def failure_message(report: Report) -> str:
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
        if "index" in e:  # a declared op's worst element: its full index, no term count
            where = "%s%s" % (e.get("output"), list(e["index"]))
            terms = ""
        else:
            where = "%s[%s, %s]" % (e.get("output"), e.get("row"), e.get("col"))
            terms = ", %s terms" % e.get("terms")
        lines.append("Greatest error over tolerance: %s at %s%s%s" % ("%.3g" % w.err_over_tol, where, tok, terms))
        err, tol = e.get("abs_err", e.get("err")), e.get("tol")
        lines.append("  got %s, ref %s: |err| %s > tol %s" % (
            _fmt(e.get("got")), _fmt(e.get("ref")), "%.3g" % (float("nan") if err is None else float(err)),
            "%.3g" % (float("nan") if tol is None else float(tol))))
        if w.noise_floor is not None:
            lines.append("  (the faithful catalog variants reach err/tol %.3g here)" % w.noise_floor)
    else:
        lines.append("%s: %s" % (w.verdict, w.detail))
    diag = [ln.strip() for ln in report.text.splitlines() if ln.strip().startswith("diagnosis (")]
    if diag:
        lines.append(diag[0][0].upper() + diag[0][1:])
    others = ", ".join("%s %s" % (x.name, "ok" if x.ok else x.verdict) for x in report.workloads)
    lines.append("Workloads: " + others)
    lines.append("Reproduce: " + report.reproduce)
    return "\n".join(lines)

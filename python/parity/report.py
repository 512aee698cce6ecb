"""Reports: what parity.check and parity.compare return. The text is the CLI's report and the
JSON the CLI's schema (docs/check-json.md), both produced by the same C code as `parity check`;
the Python objects are views of that JSON."""
import html
import json


class UnfaithfulError(AssertionError):
    """Raised by parity.testing.assert_faithful; .report holds the Report."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


class WorkloadResult:
    """One workload of a report: name, verdict, err_over_tol (worst |error| / tolerance, > 1
    fails), detail, rows_failed, rows_judged, worst (the worst element), diagnosis (or None),
    noise_floor, seconds (the judged call's wall time)."""

    def __init__(self, d, seconds=None):
        self._d = d
        self.name = d["name"]
        self.verdict = d["verdict"]
        self.ok = self.verdict == "faithful"
        q = d.get("max_err_over_tol")
        self.err_over_tol = float(q) if q is not None else float("nan")
        self.detail = d.get("detail", "")
        self.rows_failed = d.get("rows_failed", 0)
        self.rows_judged = d.get("rows_judged", 0)
        self.worst = d.get("worst", {})
        self.worst_rows = d.get("worst_rows", [])
        self.diagnosis = d.get("diagnosis")
        nf = d.get("noise_floor")
        self.noise_floor = None if nf is None or (isinstance(nf, (int, float)) and nf < 0) else nf
        self.seconds = seconds

    def to_dict(self):
        return dict(self._d)

    def __repr__(self):
        return "WorkloadResult(%r, %r, err_over_tol=%.3g)" % (self.name, self.verdict, self.err_over_tol)


class Report:
    """The verdict on one function for one op. verdict: the CLI's verdict string ("faithful",
    "unfaithful", "crashed", "timeout", "wrote-out-of-bounds", "modified-inputs",
    "nondeterministic", "unsupported", "stale-cache"); ok: verdict == "faithful"; workloads: one
    WorkloadResult per workload; str(report): the CLI's text report; to_json(): the CLI's JSON."""

    def __init__(self, op, text, json_text, reproduce, seconds=None):
        self.op = op
        self.text = text
        self._json = json_text
        d = json.loads(json_text)
        self._d = d
        k = d["kernels"][0]
        self.kernel = k["name"]
        self.verdict = k["verdict"]
        self.ok = self.verdict == "faithful"
        secs = seconds or [None] * len(k["workloads"])
        self.workloads = [WorkloadResult(w, s) for w, s in zip(k["workloads"], secs)]
        self.worst_workload = k["worst_workload"]
        self.diagnosis = k.get("diagnosis")
        # baselines=True: {rule name: {"caught", "pass_fraction", "margin", "rule"}}, the CLI
        # JSON's "baselines" object (docs/check-json.md); None otherwise.
        self.baselines = k.get("baselines")
        self.reproduce = reproduce
        self.seed = d["seed"]

    @property
    def worst(self):
        """The WorkloadResult that decided the verdict."""
        return next(w for w in self.workloads if w.name == self.worst_workload)

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<parity.Report %s %s: %s (%s)>" % (self.op, self.kernel, self.verdict,
                                                   ", ".join("%s %s" % (w.name, w.verdict) for w in self.workloads))

    def to_json(self):
        """The CLI's JSON report (`parity check --json`, schema docs/check-json.md)."""
        return self._json

    def to_dict(self):
        return json.loads(self._json)

    def _repr_html_(self):
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

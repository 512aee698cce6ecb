"""The cause classifier's table (issue #36, docs/error-model.md "Cause"): every catalog kernel of
the 13 built-in ops plus realistic bugs written in PyTorch, judged on the quick workloads, the
cause parity names against the one planted.

    PYTHONPATH=python PARITY_PY_LIB=build/python/libparity_python.so \
        .venv/bin/python tests/cause_table.py --parity build/parity [--seed 1] [--json F] [--check]

A row is right when the kernel-level cause (kernels[].diagnosis.cause of the JSON) is one of the
words planted for it; a faithful kernel is right when neither it nor any of its workloads names a
cause. A wrong word is *confident* when its match is 0.9 or more; that is counted at the kernel
level and at every unfaithful workload. --check exits 1 unless at least 90% of the rows are right
and nothing is confidently wrong (issue #36's "Done means").

The planted words are what the bug is, read from its description, not from what parity says: a
bug outside the classifier's candidates (a formula bug such as eps added outside the sqrt, a
missing chain-rule factor) is planted as "unknown", which is then the right answer.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

OPS = ["embedding_rmsnorm_bwd", "embedding_bwd", "embedding_fwd", "rmsnorm_fwd", "rmsnorm_bwd",
       "log_softmax", "cross_entropy", "moe_router_combine", "moe_router_combine_bwd", "gemm",
       "gemm_bwd", "attention_fwd", "attention_bwd"]

ACC = ("accumulator",)
UNK = ("unknown",)
# (op, kernel) -> the acceptable words for the planted bug (kernel names without "builtin:").
PLANTED = {
    ("embedding_rmsnorm_bwd", "bf16_accum"): ACC,
    ("embedding_rmsnorm_bwd", "fp16_accum"): ACC,
    ("embedding_rmsnorm_bwd", "bf16_accum_sr"): ACC,
    ("embedding_rmsnorm_bwd", "dropped_updates"): ("dropped-terms",),
    ("embedding_rmsnorm_bwd", "eps_outside_sqrt"): UNK,
    ("embedding_rmsnorm_bwd", "gamma_ignored"): ("ignored-input",),
    ("embedding_rmsnorm_bwd", "tail_d128"): ("dropped-terms",),
    # it adds into whatever the output held: none of the candidates, said plainly
    ("embedding_rmsnorm_bwd", "no_zero_init"): UNK,
    ("embedding_bwd", "bf16_accum"): ACC,
    ("embedding_bwd", "fp16_accum"): ACC,
    ("embedding_bwd", "dropped_updates"): ("dropped-terms",),
    ("embedding_bwd", "tail_d128"): ("dropped-terms",),
    ("embedding_fwd", "off_by_one"): ("structural",),
    ("rmsnorm_fwd", "eps_outside_sqrt"): UNK,
    ("rmsnorm_fwd", "bf16_sumsq"): ACC,
    ("rmsnorm_fwd", "gamma_ignored"): ("ignored-input",),
    ("rmsnorm_bwd", "eps_outside_sqrt"): UNK,
    ("rmsnorm_bwd", "gamma_ignored"): ("ignored-input",),
    ("rmsnorm_bwd", "bf16_dgamma"): ACC,
    # exp overflows fp32 without the max shift: an intermediate (exp(x)) out of fp32's range
    ("log_softmax", "no_max"): ("intermediate-rounding", "unknown"),
    # every intermediate rounded to bf16, the sum of exps accumulated in bf16 among them
    ("log_softmax", "bf16_steps"): ("intermediate-rounding", "accumulator"),
    ("log_softmax", "bf16_sum"): ACC,
    ("log_softmax", "sum_rounded_bf16"): ("intermediate-rounding",),
    ("cross_entropy", "no_onehot"): ("ignored-input",),
    ("cross_entropy", "sum_rounded_bf16"): ("intermediate-rounding",),
    ("cross_entropy", "log_of_softmax"): ("intermediate-rounding",),
    ("moe_router_combine", "bf16_softmax"): ("intermediate-rounding",),
    ("moe_router_combine", "bf16_combine"): ACC,
    ("moe_router_combine", "tie_highid"): ("tie",),
    ("moe_router_combine", "renorm_always"): ("parameter",),
    ("moe_router_combine_bwd", "bf16_dot"): ACC,
    ("moe_router_combine_bwd", "no_jacobian"): UNK,
    ("moe_router_combine_bwd", "dense_dexp"): ("structural",),
    ("moe_router_combine_bwd", "renorm_ignored"): ("parameter",),
    ("gemm", "splitk_bf16"): ACC,
    ("gemm", "fp16_acc"): ACC,
    ("gemm", "ktail_drop"): ("dropped-terms",),
    ("gemm", "ktail_twice"): ("duplicated-terms",),
    ("gemm_bwd", "dw_splitk_bf16"): ACC,
    ("gemm_bwd", "dw_chunks_bf16"): ACC,
    ("gemm_bwd", "dw_tail_drop"): ("dropped-terms",),
    ("gemm_bwd", "dx_fp16_acc"): ACC,
    ("attention_fwd", "skip_rescale"): UNK,
    ("attention_fwd", "scale_twice"): ("parameter",),
    ("attention_fwd", "no_softcap"): ("parameter",),
    ("attention_fwd", "l_bf16"): ACC,
    ("attention_fwd", "acc_bf16"): ACC,
    ("attention_fwd", "scores_bf16"): ("intermediate-rounding",),
    ("attention_bwd", "no_softcap_grad"): UNK,
    ("attention_bwd", "dk_no_scale"): ("parameter",),
    ("attention_bwd", "lse_log2"): UNK,
    ("attention_bwd", "recomputed_o"): ("ignored-input",),
}


def run_catalog(parity, seed, workdir):
    def one(op):
        out = os.path.join(workdir, op + ".json")
        subprocess.run([parity, "check", op, "--kernel", "builtin:all", "--quick", "--seed", str(seed),
                        "-q", "--no-cache", "--json", out], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        with open(out) as f:
            return json.load(f)
    with ThreadPoolExecutor(max_workers=2) as ex:
        return list(ex.map(one, OPS))


def rows_of(report, planted_of):
    """One row per kernel of a parity.check/1 report: (op, kernel, verdict, planted, named, match,
    workload-level confident wrongs)."""
    rows = []
    op = report["op"]
    for k in report["kernels"]:
        name = k["name"].split(":", 1)[-1]
        dg = k.get("diagnosis") or {}
        planted = planted_of(op, name, k["verdict"])
        named = dg.get("cause")
        match = dg.get("match")
        wl_wrong = []
        for w in k.get("workloads", []):
            wd = w.get("diagnosis") or {}
            c = wd.get("cause")
            if c is None:
                continue
            if planted is None:
                wl_wrong.append((w["name"], c, wd.get("match")))
            elif c not in planted and c != "unknown" and (wd.get("match") or 0) >= 0.9:
                wl_wrong.append((w["name"], c, wd.get("match")))
        rows.append((op, name, k["verdict"], planted, named, match, wl_wrong))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parity", default="build/parity")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--check", action="store_true", help="exit 1 unless >= 90%% right, none confidently wrong")
    ap.add_argument("--no-realistic", action="store_true", help="the catalog only (no torch)")
    a = ap.parse_args()

    def planted_of(op, name, verdict):
        if (op, name) in PLANTED:
            return PLANTED[(op, name)]
        if verdict == "faithful":
            return None
        return ("?",)  # an unfaithful kernel nobody planted a cause for: a row that counts wrong

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for rep in run_catalog(a.parity, a.seed, d):
            rows += rows_of(rep, planted_of)
    if not a.no_realistic:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cause_realistic  # noqa: E402 (torch, imported only here)
        for op, fn, planted in cause_realistic.cases():
            rep = json.loads(cause_realistic.judge(op, fn, a.seed))
            rows += rows_of(rep, lambda o, n, v, p=planted: p)

    right = conf_wrong = 0
    print(f"{'op':23s} {'kernel':36s} {'verdict':10s} {'planted':28s} {'named':22s} match  ok")
    for op, name, verdict, planted, named, match, wl_wrong in rows:
        if planted is None:
            ok = named is None and not wl_wrong
        else:
            ok = named in planted
            if not ok and named not in (None, "unknown") and (match or 0) >= 0.9:
                conf_wrong += 1
        conf_wrong += len(wl_wrong) if planted is not None else 0
        right += ok
        m = "" if match is None else f"{match:.3f}"
        pl = "(faithful)" if planted is None else "/".join(planted)
        print(f"{op:23s} {name:36s} {verdict:10s} {pl:28s} {str(named):22s} {m:6s} {'yes' if ok else 'NO'}")
        for w, c, wm in wl_wrong:
            print(f"{'':23s}   workload {w}: {c} match {wm}  <- confidently wrong")
    n = len(rows)
    print(f"\n{right} of {n} right ({100.0 * right / max(n, 1):.1f}%), {conf_wrong} confidently wrong")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(zip(["op", "kernel", "verdict", "planted", "named", "match", "workload_wrong"], r))
                       for r in rows], f, indent=1)
    if a.check and (right < 0.9 * n or conf_wrong):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Declared ops in C end to end (op_abi.h, docs/custom-ops.md "In C"): `parity check --op-plugin`
# on tests/plugins/declared.c -- SwiGLU forward (empirical floor) and a declared GEMM (the
# built-in error model): faithful kernels pass, the bf16-intermediate, bf16-accumulator and
# dropped-K-tail kernels fail, a segfault is "crashed" and the report completes, state kept
# across calls is caught by the decoy; the JSON report; the reproducer reproduces; a wrong
# multilinear declaration, an unknown op and a plugin without the entry symbol are refused.
set -u
: "${PARITY:?set PARITY to the parity binary}"
: "${PARITY_BUILD:?set PARITY_BUILD to the build directory}"
PL="$PARITY_BUILD/tests/plugins"
D="$PL/libparity_declared.so"
for f in "$D" "$PL/libparity_noentry.so"; do
    if [ ! -f "$f" ]; then echo "skip: $f not built"; exit 77; fi
done
command -v python3 >/dev/null || { echo "skip: python3 needed to read the JSON report"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

# verdicts JSON: "name=verdict" per kernel, and per workload "name/workload=verdict:err_over_tol"
verdicts() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "parity.check/1" and d["custom_op"] is True, d
for k in d["kernels"]:
    n = k["name"].rsplit(":", 1)[1]
    print("%s=%s" % (n, k["verdict"]))
    for w in k["workloads"]:
        print("%s/%s=%s:%s" % (n, w["name"], w["verdict"], w["max_err_over_tol"]))
PY
}

"$PARITY" check swiglu_fwd --op-plugin "$D" --quick -q --timeout 10 --json "$tmp/sw.json" > "$tmp/sw.txt"
rc=$?
[ $rc -eq 1 ] || bad "swiglu_fwd: exit $rc, expected 1 (some kernels fail)"
verdicts "$tmp/sw.json" > "$tmp/sw.v" || bad "swiglu_fwd: JSON unreadable"
for want in fp32=faithful bf16=faithful bf16_intermediate=unfaithful segfault=crashed stateful=unfaithful; do
    grep -qx "$want" "$tmp/sw.v" || bad "swiglu_fwd: expected $want, got: $(grep -v / "$tmp/sw.v" | tr '\n' ' ')"
done
# every quick workload judged, and the known-bad kernel far outside the tolerance on each
n=$(grep -c '^bf16_intermediate/' "$tmp/sw.v")
[ "$n" -eq 4 ] || bad "swiglu_fwd: $n workloads for bf16_intermediate, expected 4 (base outlier-ch odd magnitude)"
python3 - "$tmp/sw.json" <<'PY' || bad "swiglu_fwd: err/tol of the faithful/known-bad kernels out of range"
import json, sys
d = json.load(open(sys.argv[1]))
k = {x["name"].rsplit(":", 1)[1]: x for x in d["kernels"]}
assert all(0 < w["max_err_over_tol"] <= 1 for w in k["fp32"]["workloads"]), k["fp32"]
assert all(w["max_err_over_tol"] > 100 for w in k["bf16_intermediate"]["workloads"]), k["bf16_intermediate"]
# (the detail names the signal; under ASan the child reports the SEGV itself and exits 1)
assert all(w["verdict"] == "crashed" and w["detail"] for w in k["segfault"]["workloads"])
assert all(w["tolerance"].startswith("y: empirical-floor") for w in k["fp32"]["workloads"])
PY
grep -q "^summary: 2 of 5 kernels faithful" "$tmp/sw.txt" || bad "swiglu_fwd: summary line missing or wrong"

"$PARITY" check gemm_declared --op-plugin "$D" --quick -q --json "$tmp/gm.json" > "$tmp/gm.txt"
rc=$?
[ $rc -eq 1 ] || bad "gemm_declared: exit $rc, expected 1"
verdicts "$tmp/gm.json" > "$tmp/gm.v" || bad "gemm_declared: JSON unreadable"
for want in fp32=faithful bf16_acc=unfaithful ktail_drop=unfaithful; do
    grep -qx "$want" "$tmp/gm.v" || bad "gemm_declared: expected $want"
done
grep -q "error-model k=512 m_up=0" "$tmp/gm.txt" || bad "gemm_declared: the built-in error model was not used"

# the reproducer printed for the worst workload runs that one case and gives the same verdict
rep=$(grep -m1 'reproduce: parity check gemm_declared .* --kernel bf16_acc ' "$tmp/gm.txt" | sed 's/^ *reproduce: parity //')
[ -n "$rep" ] || bad "gemm_declared: no reproducer for bf16_acc"
# shellcheck disable=SC2086
"$PARITY" $rep -q > "$tmp/rep.txt"
rc=$?
[ $rc -eq 1 ] && grep -q "verdict: unfaithful" "$tmp/rep.txt" || bad "reproducer: exit $rc, $(cat "$tmp/rep.txt")"

# only the faithful kernel, every workload including production: exit 0
"$PARITY" check gemm_declared --op-plugin "$D" --kernel fp32 -q > "$tmp/one.txt"
rc=$?
[ $rc -eq 0 ] || bad "gemm_declared --kernel fp32: exit $rc, expected 0"

# refusals
"$PARITY" check silu_sum_wrong --op-plugin "$D" -q > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 3 ] && grep -q "not linear in input a" "$tmp/err" || bad "wrong multilinear declaration: exit $rc, $(cat "$tmp/err")"
"$PARITY" check nosuch --op-plugin "$D" -q > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "declares no op named nosuch" "$tmp/err" || bad "unknown op: exit $rc, $(cat "$tmp/err")"
"$PARITY" check --op-plugin "$D" -q > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "declares 3 ops: name one" "$tmp/err" || bad "no op named: exit $rc, $(cat "$tmp/err")"
"$PARITY" check --op-plugin "$PL/libparity_noentry.so" -q > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 3 ] && grep -q "parity_op_entry" "$tmp/err" || bad "no entry symbol: exit $rc, $(cat "$tmp/err")"

[ $fail -eq 0 ] && echo "ok: declared ops in C (swiglu_fwd, gemm_declared), refusals"
exit $fail

#!/usr/bin/env bash
# parity check: exit codes, usage errors, the catalog's verdicts on a real-text workload, the
# diagnosis of the incident kernel, JSON keys, byte-identical JSON for the same seed, and that the
# printed reproducer reproduces.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
expect_rc() { # expected-rc description cmd...
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want"; cat "$tmp/err"; fi
}
OP=embedding_rmsnorm_bwd

expect_rc 2 "no op" "$P" check
expect_rc 2 "unknown op" "$P" check no_such_op --kernel builtin:all
expect_rc 2 "no kernel" "$P" check $OP
expect_rc 2 "unknown builtin" "$P" check $OP --kernel builtin:nope
expect_rc 2 "unknown workload" "$P" check $OP --kernel builtin:fp32_seq --workload nope
expect_rc 2 "bad seed" "$P" check $OP --kernel builtin:fp32_seq --seed -4
expect_rc 2 "unknown option" "$P" check $OP --kernel builtin:fp32_seq --frobnicate
expect_rc 0 "help" "$P" check --help
grep -q "builtin:all" "$tmp/out" && ok || bad "help does not teach builtin:all"
expect_rc 3 "missing plugin file" "$P" check $OP --kernel /nonexistent/libx.so
grep -q "/nonexistent/libx.so" "$tmp/err" && ok || bad "missing plugin message does not name the file"
expect_rc 0 "ops" "$P" ops $OP
grep -q "prod" "$tmp/out" && ok || bad "ops does not list the prod workload"
expect_rc 0 "kernels" "$P" kernels $OP
grep -q "bf16_accum" "$tmp/out" && ok || bad "kernels does not list bf16_accum"

# A faithful kernel alone: exit 0.
expect_rc 0 "faithful kernel" "$P" check $OP --kernel builtin:fp32_seq --workload text -q

# The whole catalog on real text: every verdict as the catalog expects, except tail_d128, which
# is correct at D = 256 (a multiple of 128) and must fail on an odd D instead.
"$P" check $OP --kernel builtin:all --workload text --seed 3 -q --no-floor --json "$tmp/a.json" >"$tmp/a.txt" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || bad "catalog run: exit $rc, want 1"
# Byte-identical JSON for the same seed (two kernels, twice, to keep the suite fast).
for f in c d; do
  "$P" check $OP --kernel builtin:fp32_shuffled --kernel builtin:bf16_accum --workload text --seed 3 -q --json "$tmp/$f.json" >/dev/null 2>&1
done
cmp -s "$tmp/c.json" "$tmp/d.json" && ok || bad "same seed gave different JSON"
"$PY" - "$tmp/a.json" <<'PYEOF' && ok || bad "catalog verdicts / JSON schema"
import json, sys
r = json.load(open(sys.argv[1]))
errs = []
for key in ("op", "seed", "kernels"):
    if key not in r: errs.append("missing top-level key " + key)
for k in r["kernels"]:
    for key in ("name", "expected", "verdict", "workloads", "reproduce"):
        if key not in k: errs.append(k.get("name", "?") + ": missing " + key)
    want = k["expected"]
    if k["name"] == "builtin:tail_d128":
        want = "faithful"
    got = "faithful" if k["verdict"] == "faithful" else "unfaithful"
    if got != want:
        errs.append("%s: verdict %s, expected %s" % (k["name"], k["verdict"], want))
inc = [k for k in r["kernels"] if k["name"] == "builtin:bf16_accum"][0]
d = inc.get("diagnosis", {})
if not d or not d["closest"].startswith("bf16") or not (6.5 <= d["effective_bits"] <= 9.5):
    errs.append("bf16_accum diagnosis: %r" % d)
for e in errs: print(e)
sys.exit(1 if errs else 0)
PYEOF

expect_rc 1 "tail_d128 on odd D" "$P" check $OP --kernel builtin:tail_d128 --workload odd-d1000 -q --no-floor

# --shape: the requested shape and its neighbours. tail_d128 is right at D = 256 and wrong at
# 255 and 257; a bad shape is a usage error.
"$P" check $OP --kernel builtin:tail_d128 --workload uniform --shape 512x256 -q --no-floor --json "$tmp/s.json" >/dev/null 2>&1
"$PY" - "$tmp/s.json" <<'PYEOF' && ok || bad "--shape neighbours"
import json, sys
w = {x["name"]: x["verdict"] for x in json.load(open(sys.argv[1]))["kernels"][0]["workloads"]}
want = {"uniform@512x256x4096": "faithful", "uniform@513x257x4096": "unfaithful", "uniform@511x255x4096": "unfaithful"}
if w != want: print(w)
sys.exit(0 if w == want else 1)
PYEOF
expect_rc 2 "bad --shape" "$P" check $OP --kernel builtin:fp32_seq --shape 12
expect_rc 2 "absurd workload shape" "$P" check $OP --kernel builtin:fp32_seq --workload "uniform@100000000x100000"

# The reproducer printed for the incident kernel reproduces its verdict.
rep=$(grep -A20 "^builtin:bf16_accum " "$tmp/a.txt" | grep -m1 "reproduce:" | sed 's/.*reproduce: parity //')
if [ -n "$rep" ]; then
  # shellcheck disable=SC2086
  "$P" $rep -q --no-floor >"$tmp/rep.txt" 2>&1
  rc=$?
  [ $rc = 1 ] && grep -q "^builtin:bf16_accum *unfaithful" "$tmp/rep.txt" && ok || bad "reproducer '$rep' did not reproduce (exit $rc)"
else
  bad "no reproducer line for bf16_accum"
fi

# A repeated --workload is a usage error (exit 2), never silently reduced to the last one.
"$P" check $OP --kernel builtin:fp32_seq --workload uniform --workload text -q >"$tmp/ww" 2>&1
[ $? = 2 ] && grep -q "given twice" "$tmp/ww" && ok || bad "repeated --workload: not a usage error"

# --shape on an op without a vocabulary (V = 0): NxD workloads, not NxDx0 refused as "too large".
"$P" check rmsnorm_fwd --kernel builtin:fp32 --shape 64x32 --quick --no-floor -q >"$tmp/v0" 2>&1
[ $? = 0 ] && grep -q "unit@64x32" "$tmp/v0" && ok || { bad "--shape 64x32 on rmsnorm_fwd"; cat "$tmp/v0"; }

echo "$pass passed, $fail failed"
[ $fail = 0 ]

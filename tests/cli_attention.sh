#!/usr/bin/env bash
# parity check attention: the op and its workloads are listed, every catalog kernel's verdict
# matches its expected one on small softcap and odd-T shapes, faithful kernels alone exit 0,
# no_softcap passes where the op has no softcap (it is only wrong where a cap applies) and fails
# on the softcap workload, and a malformed shape is a usage error. Small shapes keep it to
# a few seconds.
set -u
P=${PARITY:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
CAP=softcap@192x64x1
ODD=odd-t1031@131x32x2

"$P" ops attention >"$tmp/ops" 2>&1 && ok || bad "ops attention"
for w in long-causal softcap outlier-channels odd-t1031 near-zero prod-llama3; do
  grep -q "$w" "$tmp/ops" && ok || bad "ops attention does not list $w"
done
"$P" kernels attention >"$tmp/k" 2>&1 && ok || bad "kernels attention"
[ "$(grep -c "builtin:" "$tmp/k")" -ge 7 ] && ok || bad "kernels attention: fewer than 7 kernels"

# The whole catalog on the small softcap case: exit 1 (mutants fail), every verdict as expected.
"$P" check attention --kernel builtin:all --workload $CAP -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "catalog on $CAP: exit $rc, want 1"; cat "$tmp/err"; }
n=$(grep -c "(as expected)" "$tmp/all")
k=$(grep -c "^builtin:" "$tmp/all")
[ "$k" -ge 7 ] && [ "$n" = "$k" ] && ok || { bad "$n of $k kernels as expected on $CAP"; grep "NOT AS EXPECTED" "$tmp/all"; }

# Faithful kernels alone: exit 0 on both shapes (T = 131 is no multiple of any block).
for kn in fp32 online online_exp2 bf16_out; do
  for w in $CAP $ODD; do
    "$P" check attention --kernel builtin:$kn --workload $w -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $w"
  done
done
# Mutants that do not depend on the cap fail on the odd-T case without one.
for kn in skip_rescale scale_twice; do
  "$P" check attention --kernel builtin:$kn --workload $ODD -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$kn not caught on $ODD"
done
# no_softcap is the faithful online kernel when there is no cap, and wrong where one applies.
"$P" check attention --kernel builtin:no_softcap --workload $ODD -q --no-floor >/dev/null 2>&1 && ok || bad "no_softcap should pass without a softcap"
"$P" check attention --kernel builtin:no_softcap --workload $CAP -q --no-floor >"$tmp/nc" 2>&1
[ $? = 1 ] && ok || bad "no_softcap not caught on $CAP"
grep -q "unfaithful" "$tmp/nc" && ok || bad "no_softcap: no unfaithful verdict printed"

# JSON: both outputs judged, attributes applied.
"$P" check attention --kernel builtin:online --workload $CAP -q --no-floor --json "$tmp/r.json" >/dev/null 2>&1 && ok || bad "json run"
grep -q '"attention"' "$tmp/r.json" && ok || bad "json lacks the op name"

# A shape that is not TxDhxH is a usage error (exit 2).
"$P" check attention --kernel builtin:online --workload softcap@12x -q >/dev/null 2>&1
[ $? = 2 ] && ok || bad "malformed shape: want exit 2"

echo "cli_attention: $pass passed, $fail failed"
[ $fail = 0 ]

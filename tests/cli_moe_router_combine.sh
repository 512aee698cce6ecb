#!/usr/bin/env bash
# parity check moe_router_combine: the op and its workloads are listed, every catalog kernel's
# verdict matches its expected one on small shapes of a tie workload (renormalised) and a
# many-experts workload (raw probabilities), renorm_always is faithful where the model does
# renormalise (it is the same computation there) and caught where it does not, exit codes, and
# a bad shape is a usage error. Small shapes keep it to a few seconds.
. "$(dirname "$0")/lib_cli.sh"
OP=moe_router_combine
TIES=bf16-ties@256x16x128
MANY=e256-top8@128x16x256

"$P" ops $OP >"$tmp/ops" 2>&1 && ok || bad "ops $OP"
for w in mixtral skewed e256-top8 bf16-ties grad-scale outlier-odd-d prod-dsv3; do
  grep -q "$w" "$tmp/ops" && ok || bad "ops $OP does not list $w"
done
"$P" kernels $OP >"$tmp/k" 2>&1 && ok || bad "kernels $OP"
for k in fp32 topk_logits fp32_in bf16_out bf16_softmax bf16_combine tie_highid renorm_always; do
  grep -q "$k" "$tmp/k" && ok || bad "kernels $OP does not list $k"
done

# The whole catalog on the many-experts workload (no renormalisation, so renorm_always fails
# there too): exit 1 (mutants fail), every verdict as expected.
"$P" check $OP --kernel builtin:all --workload $MANY -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "catalog: exit $rc, want 1"; cat "$tmp/err"; }
n=$(grep -c "(as expected)" "$tmp/all")
k=$(grep -c "^builtin:" "$tmp/all")
[ "$k" = 8 ] && [ "$n" = "$k" ] && ok || { bad "$n of $k kernels as expected"; grep "NOT AS EXPECTED" "$tmp/all"; }

# Faithful kernels alone: exit 0.
for kn in fp32 topk_logits fp32_in bf16_out; do
  for w in $TIES $MANY; do
    "$P" check $OP --kernel builtin:$kn --workload $w -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $w"
  done
done
# Each mutant alone on the workload that catches it: exit 1.
for pair in "bf16_softmax $TIES" "bf16_combine $TIES" "tie_highid $TIES" "renorm_always $MANY"; do
  set -- $pair
  "$P" check $OP --kernel builtin:$1 --workload $2 -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$1 not caught on $2"
done
# renorm_always computes the renormalised weights: faithful where the model renormalises.
"$P" check $OP --kernel builtin:renorm_always --workload $TIES -q --no-floor >/dev/null 2>&1 && ok || bad "renorm_always should pass on a renormalising workload"
# The tie mutant's failure is a selection error: an unselected gate is nonzero (ref 0).
"$P" check $OP --kernel builtin:tie_highid --workload $TIES --no-floor >"$tmp/tie" 2>&1
grep -q "gates row .* ref 0$" "$tmp/tie" && ok || bad "tie_highid: worst is not a gate the reference leaves at 0"

# k larger than E: usage error, not a crash.
"$P" check $OP --kernel builtin:fp32 --workload e256-top8@4x4x4 -q >/dev/null 2>"$tmp/e"
rc=$?
[ $rc = 2 ] || [ $rc = 3 ] && ok || bad "k > E: exit $rc, want 2 or 3"
grep -q "k (8)" "$tmp/e" && ok || bad "k > E: message does not name k"

echo "cli_moe_router_combine: $pass passed, $fail failed"
[ $fail = 0 ]

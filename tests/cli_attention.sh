#!/usr/bin/env bash
# parity check attention_fwd / attention_bwd: the ops and their workloads are listed, every catalog kernel's verdict
# matches its expected one on small softcap and odd-T shapes, faithful kernels alone exit 0,
# no_softcap passes where the op has no softcap (it is only wrong where a cap applies) and fails
# on the softcap workload, and a malformed shape is a usage error. Small shapes keep it to
# a few seconds.
. "$(dirname "$0")/lib_cli.sh"
CAP=softcap@192x64x1
ODD=odd-t1031@131x32x2

"$P" ops attention_fwd >"$tmp/ops" 2>&1 && ok || bad "ops attention"
for w in long-causal softcap outlier-channels odd-t1031 near-zero prod-llama3; do
  grep -q "$w" "$tmp/ops" && ok || bad "ops attention_fwd does not list $w"
done
"$P" kernels attention_fwd >"$tmp/k" 2>&1 && ok || bad "kernels attention"
[ "$(grep -c "builtin:" "$tmp/k")" -ge 7 ] && ok || bad "kernels attention: fewer than 7 kernels"

# The whole catalog on the small softcap case: exit 1 (mutants fail), every verdict as expected.
"$P" check attention_fwd --kernel builtin:all --workload $CAP -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "catalog on $CAP: exit $rc, want 1"; cat "$tmp/err"; }
# (acc_bf16, a bf16 output accumulator, only departs on rows of many key blocks: judged below.)
n=$(grep -v "^builtin:acc_bf16 " "$tmp/all" | grep -c "(as expected)")
k=$(grep "^builtin:" "$tmp/all" | grep -vc "^builtin:acc_bf16 ")
[ "$k" -ge 7 ] && [ "$n" = "$k" ] && ok || { bad "$n of $k kernels as expected on $CAP"; grep "NOT AS EXPECTED" "$tmp/all"; }
"$P" check attention_fwd --kernel builtin:acc_bf16 --workload outlier-channels@1024x128x1 -q --no-floor >/dev/null 2>&1
[ $? = 1 ] && ok || bad "acc_bf16 not caught on outlier-channels@1024x128x1"

# Faithful kernels alone: exit 0 on both shapes (T = 131 is no multiple of any block).
for kn in fp32 online online_exp2 bf16_out; do
  for w in $CAP $ODD; do
    "$P" check attention_fwd --kernel builtin:$kn --workload $w -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $w"
  done
done
# Mutants that do not depend on the cap fail on the odd-T case without one.
for kn in skip_rescale scale_twice; do
  "$P" check attention_fwd --kernel builtin:$kn --workload $ODD -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$kn not caught on $ODD"
done
# no_softcap is the faithful online kernel when there is no cap, and wrong where one applies.
"$P" check attention_fwd --kernel builtin:no_softcap --workload $ODD -q --no-floor >/dev/null 2>&1 && ok || bad "no_softcap should pass without a softcap"
"$P" check attention_fwd --kernel builtin:no_softcap --workload $CAP -q --no-floor >"$tmp/nc" 2>&1
[ $? = 1 ] && ok || bad "no_softcap not caught on $CAP"
grep -q "unfaithful" "$tmp/nc" && ok || bad "no_softcap: no unfaithful verdict printed"

# JSON: both outputs judged, attributes applied.
"$P" check attention_fwd --kernel builtin:online --workload $CAP -q --no-floor --json "$tmp/r.json" >/dev/null 2>&1 && ok || bad "json run"
grep -q '"attention_fwd"' "$tmp/r.json" && ok || bad "json lacks the op name"

# A shape that is not TxDhxH is a usage error (exit 2).
"$P" check attention_fwd --kernel builtin:online --workload softcap@12x -q >/dev/null 2>&1
[ $? = 2 ] && ok || bad "malformed shape: want exit 2"

# The backward: catalog verdicts on a small softcap case, faithful kernels on an odd T without
# a cap, and no_softcap_grad harmless without a cap.
BCAP=softcap@128x64x1
BODD=odd-t1031@67x32x1
"$P" ops attention_bwd >"$tmp/ops" 2>&1 && ok || bad "ops attention_bwd"
grep -q "prod-llama3" "$tmp/ops" && ok || bad "ops attention_bwd does not list prod-llama3"
"$P" check attention_bwd --kernel builtin:all --workload $BCAP -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "bwd catalog on $BCAP: exit $rc, want 1"; cat "$tmp/err"; }
n=$(grep -c "(as expected)" "$tmp/all")
k=$(grep -c "^builtin:" "$tmp/all")
[ "$k" -ge 6 ] && [ "$n" = "$k" ] && ok || { bad "bwd: $n of $k kernels as expected on $BCAP"; grep "NOT AS EXPECTED" "$tmp/all"; }
for kn in fp32 fa2 bf16_out no_softcap_grad; do
  "$P" check attention_bwd --kernel builtin:$kn --workload $BODD -q --no-floor >/dev/null 2>&1 && ok || bad "bwd $kn not faithful on $BODD"
done
for kn in dk_no_scale lse_log2; do
  "$P" check attention_bwd --kernel builtin:$kn --workload $BODD -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "bwd $kn not caught on $BODD"
done

# A real FlashAttention-2 output (torch 2.11 scaled_dot_product_attention, flash backend, bf16,
# one NVIDIA H200; docs/ops/attention.md "Real kernels") on odd-t1031 seed 1: within the bf16
# contract (P~ rounded to bf16 before P~V), so faithful.
FA2="${PARITY_SRC:-.}/tests/data/attention/odd-t1031.seed1.torch-flash-h200.safetensors"
if [ -f "$FA2" ]; then
  "$P" gen attention_fwd --workload odd-t1031 --seed 1 --out "$tmp/fa2_in.safetensors" >/dev/null 2>&1 || bad "gen odd-t1031"
  "$P" compare attention_fwd "$tmp/fa2_in.safetensors" "$FA2" >"$tmp/fa2" 2>&1 && ok || { bad "torch flash-attention output not faithful"; cat "$tmp/fa2"; }
else
  bad "missing $FA2"
fi

echo "cli_attention: $pass passed, $fail failed"
[ $fail = 0 ]

#!/usr/bin/env bash
# parity check moe_router_combine_bwd: the op and its workloads are listed, every catalog
# kernel's verdict matches its expected one on small shapes of a renormalising tie workload and a
# many-experts raw-probability workload, renorm_ignored is faithful where the model does not
# renormalise (the same computation there) and caught where it does, exit codes, a bad shape is a
# usage error. Small shapes keep it to a few seconds.
. "$(dirname "$0")/lib_cli.sh"
OP=moe_router_combine_bwd
TIES=bf16-ties@64x32x128
MANY=e256-top8@32x32x256

"$P" ops $OP >"$tmp/ops" 2>&1 && ok || bad "ops $OP"
for w in mixtral skewed e256-top8 bf16-ties grad-scale outlier-odd-d; do
  grep -q "$w" "$tmp/ops" && ok || bad "ops $OP does not list $w"
done
"$P" kernels $OP >"$tmp/k" 2>&1 && ok || bad "kernels $OP"
for k in fp32 fma fp32_in bf16_out bf16_dot no_jacobian dense_dexp renorm_ignored; do
  grep -q "$k" "$tmp/k" && ok || bad "kernels $OP does not list $k"
done

# --workload takes one workload (the last one given wins), so each is checked on its own.
# The renormalising workload catches every mutant.
"$P" check $OP --kernel builtin:all --workload $TIES -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "catalog: exit $rc, want 1"; cat "$tmp/err"; }
n=$(grep -c "(as expected)" "$tmp/all")
k=$(grep -c "^builtin:" "$tmp/all")
[ "$k" = 8 ] && [ "$n" = "$k" ] && ok || { bad "$n of $k kernels as expected"; grep "NOT AS EXPECTED" "$tmp/all"; }

for kn in fp32 fma fp32_in bf16_out; do
  for w in $TIES $MANY; do
    "$P" check $OP --kernel builtin:$kn --workload $w -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $w"
  done
done
for pair in "bf16_dot $MANY" "no_jacobian $MANY" "no_jacobian $TIES" "dense_dexp $TIES" "renorm_ignored $TIES"; do
  set -- $pair
  "$P" check $OP --kernel builtin:$1 --workload $2 -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$1 not caught on $2"
done
"$P" check $OP --kernel builtin:renorm_ignored --workload $MANY -q --no-floor >/dev/null 2>&1 && ok || bad "renorm_ignored should pass on a raw-probability workload"
# The leak is a nonzero d_expert_out where the reference is exactly 0.
"$P" check $OP --kernel builtin:dense_dexp --workload $TIES --no-floor >"$tmp/leak" 2>&1
grep -q "d_expert_out row .* ref 0$" "$tmp/leak" && ok || bad "dense_dexp: worst is not a d_expert_out element the reference leaves at 0"
# The diagnosis (mrb_emulate): the leak is named structural, not an accumulator; the bf16 dot
# product is named bf16 accumulation, from the d_logits it corrupts.
grep -q "diagnosis (.*d_expert_out): an element whose terms are all zero (0 in the reference) holds .*: a structural error" "$tmp/leak" \
  && ok || { bad "dense_dexp: diagnosis does not name the structural error"; grep diagnosis "$tmp/leak"; }
"$P" check $OP --kernel builtin:dense_dexp --workload $TIES --no-floor --json "$tmp/leak.json" >/dev/null 2>&1
grep -q '"zero_written":[[:space:]]*true' "$tmp/leak.json" && ok || bad "dense_dexp: JSON diagnosis lacks zero_written true"
"$P" check $OP --kernel builtin:bf16_dot --workload $MANY --no-floor >"$tmp/dot" 2>&1
grep -q "diagnosis (.*d_logits): effective accumulator ~[78]\.[0-9] bits, closest to bf16" "$tmp/dot" \
  && ok || { bad "bf16_dot: diagnosis is not bf16 accumulation"; grep diagnosis "$tmp/dot"; }
"$P" check $OP --kernel builtin:fp32 --workload $MANY --no-floor --diagnose >"$tmp/f32d" 2>&1
grep -q "diagnosis (.*): .*\(exact on the sampled rows\|closest to fp32\)" "$tmp/f32d" \
  && ok || { bad "fp32 --diagnose: not fp32 (the emulation at 24 bits is the fp32 kernel)"; grep diagnosis "$tmp/f32d"; }

"$P" check $OP --kernel builtin:fp32 --workload e256-top8@4x4x4 -q >/dev/null 2>"$tmp/e"
rc=$?
[ $rc = 2 ] || [ $rc = 3 ] && ok || bad "k > E: exit $rc, want 2 or 3"
grep -q "k (8)" "$tmp/e" && ok || bad "k > E: message does not name k"

echo "cli_moe_router_combine_bwd: $pass passed, $fail failed"
[ $fail = 0 ]

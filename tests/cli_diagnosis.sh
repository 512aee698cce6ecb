#!/usr/bin/env bash
# parity check's diagnosis line for the ops whose emulation was added for it (log_softmax,
# cross_entropy, attention_fwd, rmsnorm_fwd, rmsnorm_bwd): the bf16-accumulating mutants read as
# ~8 bits closest to a bf16 emulation, the faithful fp32 kernels as ~24 bits closest to an fp32
# one (docs/ops/*.md, "Diagnosis"). Small shapes keep it to a few seconds.
. "$(dirname "$0")/lib_cli.sh"

# op workload kernel expected-closest-emulation-prefix expected-bits
expect() {
  "$P" check "$1" --kernel "builtin:$3" --workload "$2" -q --no-floor --diagnose >"$tmp/out" 2>&1
  line=$(grep "diagnosis (" "$tmp/out")
  if [ -z "$line" ]; then
    bad "$1 $3 on $2: no diagnosis line"
    cat "$tmp/out"
    return
  fi
  echo "$line" | grep -q "effective accumulator ~$5\.[0-9] bits, closest to $4" && ok ||
    bad "$1 $3 on $2: '$line', want ~$5 bits closest to $4"
}

expect log_softmax small-v@256x1x1000 bf16_sum "bf16 " 8
expect log_softmax small-v@256x1x1000 bf16_steps "bf16 " 8
expect log_softmax small-v@256x1x1000 fp32 "fp32 " 24
expect log_softmax small-v@256x1x1000 online "fp32 " 2[34]
expect cross_entropy small-v@256x1x1000 fp32 "fp32 " 24
expect attention_fwd long-causal@256x32x1 fp32 "fp32 " 24
expect attention_fwd long-causal@256x32x1 online "fp32 " 2[34]
expect rmsnorm_fwd unit@256x512x1 bf16_sumsq "bf16 " 8
expect rmsnorm_fwd unit@256x512x1 fp32 "fp32 " 24
expect rmsnorm_bwd unit@512x128x1 bf16_dgamma "bf16 " 8
expect rmsnorm_bwd unit@512x128x1 fp32 "fp32 " 24
# bf16 outputs whose rounding swamps the accumulation (LSE, loss): a faithful kernel must not
# read as a bf16 accumulator; the tie goes to fp32, flagged as weak evidence for the LSE.
expect attention_fwd odd-t1031@256x32x1 bf16_out "fp32 " 24
grep -q "weak evidence" "$tmp/out" && ok || bad "attention_fwd bf16_out: no weak-evidence note"
expect cross_entropy small-v@256x1x1000 bf16_out "fp32 " 24

echo "cli_diagnosis: $pass passed, $fail failed"
[ $fail = 0 ]

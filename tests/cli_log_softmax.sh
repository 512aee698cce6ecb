#!/usr/bin/env bash
# parity check log_softmax / cross_entropy: every catalog kernel's verdict matches its expected
# one on a small outlier-rows workload (logits 110-120 in 1 row of 8: where no_max and
# log_of_softmax fail), the two mutants that only fail there stay faithful at realistic
# magnitudes (measured, documented in docs/ops/log_softmax.md), exit codes, and the workload
# list. Small shapes (V <= 4000) keep it to about a second.
. "$(dirname "$0")/lib_cli.sh"
OUT=outlier-rows@64x1x4000
SMALL=small-v@256x1x1000

for op in log_softmax cross_entropy; do
  "$P" ops "$op" >"$tmp/ops" 2>&1 && ok || bad "ops $op"
  for w in text odd-v32001 outlier-rows small-v prod-llama3; do
    grep -q "$w" "$tmp/ops" && ok || bad "ops $op does not list $w"
  done
  "$P" kernels "$op" >"$tmp/k" 2>&1 && ok || bad "kernels $op"

  # The whole catalog on outlier rows: exit 1 (mutants fail), and every verdict as expected.
  "$P" check "$op" --kernel builtin:all --workload $OUT -q --no-floor >"$tmp/all" 2>"$tmp/err"
  rc=$?
  [ $rc = 1 ] && ok || { bad "$op catalog on $OUT: exit $rc, want 1"; cat "$tmp/err"; }
  n=$(grep -c "(as expected)" "$tmp/all")
  k=$(grep -c "^builtin:" "$tmp/all")
  [ "$k" -ge 6 ] && [ "$n" = "$k" ] && ok || { bad "$op: $n of $k kernels as expected"; grep "NOT AS EXPECTED" "$tmp/all"; }

  # Faithful kernels alone: exit 0 (on both workloads).
  for kn in fp32 online fp32_in bf16_out; do
    "$P" check "$op" --kernel builtin:$kn --workload $OUT -q --no-floor >/dev/null 2>&1 && ok || bad "$op $kn not faithful on $OUT"
    "$P" check "$op" --kernel builtin:$kn --workload $SMALL -q --no-floor >/dev/null 2>&1 && ok || bad "$op $kn not faithful on $SMALL"
  done
done

# Mutants that only show with logits past exp's range: faithful at realistic magnitudes.
"$P" check log_softmax --kernel builtin:no_max --workload $SMALL -q --no-floor >/dev/null 2>&1 && ok || bad "no_max should pass at small logits"
"$P" check cross_entropy --kernel builtin:log_of_softmax --workload $SMALL -q --no-floor >/dev/null 2>&1 && ok || bad "log_of_softmax should pass at small logits"
# ... and fail on outlier rows with an infinity where the reference is finite.
"$P" check log_softmax --kernel builtin:no_max --workload $OUT -q --no-floor >"$tmp/nm" 2>&1
grep -q "got -inf" "$tmp/nm" && ok || bad "no_max on outlier rows: no -inf reported"
"$P" check cross_entropy --kernel builtin:log_of_softmax --workload $OUT -q --no-floor >"$tmp/ls" 2>&1
grep -q "loss row .*got inf" "$tmp/ls" && ok || bad "log_of_softmax on outlier rows: no inf loss reported"
# Mutants caught everywhere.
for pair in "log_softmax bf16_sum" "log_softmax bf16_steps" "cross_entropy no_onehot"; do
  set -- $pair
  "$P" check "$1" --kernel builtin:$2 --workload $SMALL -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$1 $2 not caught on $SMALL"
done

echo "cli_log_softmax: $pass passed, $fail failed"
[ $fail = 0 ]

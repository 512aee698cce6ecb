#!/usr/bin/env bash
# parity check gemm / gemm_bwd: the ops and their workloads are listed, every catalog kernel's verdict matches
# its expected one on a small odd-K case (K = 1000: where the K-tail mutants fail), the K-tail
# mutants pass when K is a multiple of their tile (the limitation the odd-K workloads exist
# for, docs/ops/gemm.md), the split-K bf16 workspace is diagnosed as a narrow accumulator,
# the baseline matrix is printed, exit codes. Small shapes keep it to a few seconds.
. "$(dirname "$0")/lib_cli.sh"
ODD=odd-k1000@64x1000x32
EVEN=llm-fwd@64x1024x32

"$P" ops >"$tmp/all_ops" 2>&1 && grep -q "^gemm" "$tmp/all_ops" && ok || bad "parity ops does not list gemm"
"$P" ops gemm >"$tmp/ops" 2>&1 && ok || bad "ops gemm"
for w in llm-fwd odd-k4097 odd-k1000 outlier-ch dw-32k dw-varlen prod-llama7b-down; do
  grep -q "$w" "$tmp/ops" && ok || bad "ops gemm does not list $w"
done
"$P" kernels gemm >"$tmp/k" 2>&1 && ok || bad "kernels gemm"
[ "$(grep -c "builtin:" "$tmp/k")" -ge 10 ] && ok || bad "kernels gemm: fewer than 10 kernels"

# The whole catalog on odd K: exit 1 (mutants fail), every verdict as expected.
"$P" check gemm --kernel builtin:all --workload $ODD -q --no-floor >"$tmp/all" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && ok || { bad "catalog on $ODD: exit $rc, want 1"; cat "$tmp/err"; }
n=$(grep -c "(as expected)" "$tmp/all")
k=$(grep -c "^builtin:" "$tmp/all")
[ "$k" -ge 10 ] && [ "$n" = "$k" ] && ok || { bad "$n of $k kernels as expected on $ODD"; grep "NOT AS EXPECTED" "$tmp/all"; }
# splitk_bf16 rounds a handful of partials to bf16, not K terms: its error's size reads as
# 13-18 bits by seed, about 3 bits from the closest (11-bit) emulation, the border of the
# "emulations disagree" rule (~14.1 at seed 1: unknown; issue #36 has no intermediate-rounding
# word yet), so either cause, but one; fp16_acc is an 11-bit accumulator.
grep -A8 "^builtin:splitk_bf16" "$tmp/all" | grep -q "diagnosis (" && ok || bad "splitk_bf16: no diagnosis"
grep -A9 "^builtin:splitk_bf16" "$tmp/all" | grep -Eq "^  cause: (unknown|accumulator) " && ok || bad "splitk_bf16: no cause"
grep -A9 "^builtin:fp16_acc" "$tmp/all" | grep -q "^  cause: accumulator .* ~1[01]\.[0-9] effective bits" && ok || bad "fp16_acc: cause not an 11-bit accumulator"
grep -A8 "^builtin:ktail_drop" "$tmp/all" | grep -q "not an accumulator-precision problem" && ok || bad "ktail_drop: not diagnosed as a non-precision error"
# The dropped-terms cause (issue #36): ktail_drop never runs the partial last tile, the 40 terms
# [960, 1000) of K = 1000, and says so in the text and the JSON; ktail_twice (a tile counted
# twice) is no dropped tail; the faithful kernels get no cause.
grep -A9 "^builtin:ktail_drop" "$tmp/all" | grep -q "^  cause: dropped-terms .* the last 40 of the 1000 terms of each C sum dropped (terms \[960, 1000))" &&
  ok || bad "ktail_drop: cause not dropped-terms, the last 40 of 1000"
grep -A9 "^builtin:ktail_twice" "$tmp/all" | grep -q "^  cause: dropped-terms" && bad "ktail_twice: called dropped-terms" || ok
# ktail_twice clamps the last tile to [K - 64, K) without masking: terms [936, 960) of K = 1000
# are added twice; the duplicated-terms cause names them (never accumulator).
grep -A9 "^builtin:ktail_twice" "$tmp/all" | grep -q "^  cause: duplicated-terms .* terms \[936, 960) of the 1000 terms of each C sum counted twice" &&
  ok || bad "ktail_twice: cause not duplicated-terms [936, 960) of 1000"
"$P" check gemm --kernel builtin:ktail_twice --workload $ODD -q --no-floor --json "$tmp/kt2.json" >/dev/null 2>&1
"${PARITY_PYTHON:-python3}" - "$tmp/kt2.json" <<'PYEOF' && ok || bad "ktail_twice JSON: diagnosis.duplicated not {936, 960, 1000}"
import json, sys
d = json.load(open(sys.argv[1]))["kernels"][0]["diagnosis"]
dr = d.get("duplicated") or {}
sys.exit(0 if d.get("cause") == "duplicated-terms" and (dr.get("from"), dr.get("to"), dr.get("of")) == (936, 960, 1000)
         and dr.get("err_tol_duplicated") <= 1 < dr.get("err_tol_full") and d.get("match") == 1 else 1)
PYEOF
for kn in fp32 tiled splitk4 splitk16 bf16_out fp32_in; do
  grep -A6 "^builtin:$kn " "$tmp/all" | grep -q "^  cause:" && bad "$kn: faithful with a cause" || ok
done
"$P" check gemm --kernel builtin:ktail_drop --workload $ODD -q --no-floor --json "$tmp/kt.json" >/dev/null 2>&1
"${PARITY_PYTHON:-python3}" - "$tmp/kt.json" <<'PYEOF' && ok || bad "ktail_drop JSON: diagnosis.dropped not {960, 1000, 1000}"
import json, sys
d = json.load(open(sys.argv[1]))["kernels"][0]["diagnosis"]
dr = d.get("dropped") or {}
print("ktail_drop: cause %s, dropped %s" % (d.get("cause"), dr))
sys.exit(0 if d.get("cause") == "dropped-terms" and (dr.get("from"), dr.get("to"), dr.get("of")) == (960, 1000, 1000)
         and dr.get("err_tol_dropped") <= 1 < dr.get("err_tol_full") else 1)
PYEOF

# Faithful kernels alone: exit 0 on both shapes.
for kn in fp32 tiled splitk4 splitk16 bf16_out fp32_in; do
  "$P" check gemm --kernel builtin:$kn --workload $ODD -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $ODD"
  "$P" check gemm --kernel builtin:$kn --workload $EVEN -q --no-floor >/dev/null 2>&1 && ok || bad "$kn not faithful on $EVEN"
done
# K-tail mutants: invisible when K is a multiple of 64, caught on odd K.
for kn in ktail_drop ktail_twice; do
  "$P" check gemm --kernel builtin:$kn --workload $EVEN -q --no-floor >/dev/null 2>&1 && ok || bad "$kn should pass at K = 1024"
done
# Accumulator mutants: caught at K = 1024 too.
for kn in splitk_bf16 fp16_acc; do
  "$P" check gemm --kernel builtin:$kn --workload $EVEN -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$kn not caught on $EVEN"
done

# The baseline matrix (one kernel, one small workload; the baselines' own shapes).
"$P" check gemm --kernel builtin:ktail_drop --workload $ODD --baselines -q --no-floor >"$tmp/b" 2>&1
[ $? = 1 ] && ok || bad "baselines run: exit code"
for b in sol-execbench kernelbench assert_close; do
  grep -q "$b" "$tmp/b" && ok || bad "baseline matrix lacks $b"
done

# gemm_bwd: listed; the catalog on a token count no tile divides (2000 = 31 x 64 + 16): every
# verdict as expected; the token-tail mutant passes at 2048 tokens, the bf16 dW mutants do not.
"$P" ops gemm_bwd >"$tmp/bops" 2>&1 && grep -q "train-varlen" "$tmp/bops" && ok || bad "ops gemm_bwd"
"$P" check gemm_bwd --kernel builtin:all --workload train-varlen@2000x16x24 -q --no-floor >"$tmp/ball" 2>&1
rc=$?
[ $rc = 1 ] && ok || bad "gemm_bwd catalog: exit $rc, want 1"
n=$(grep -c "(as expected)" "$tmp/ball")
k=$(grep -c "^builtin:" "$tmp/ball")
[ "$k" -ge 8 ] && [ "$n" = "$k" ] && ok || { bad "gemm_bwd: $n of $k kernels as expected"; grep "NOT AS EXPECTED" "$tmp/ball"; }
# dw_tail_drop drops the 16 tokens past the last whole tile of 64 from dW: cause dropped-terms
# (it read "accumulator ~7.4 bits" before issue #36's dropped-terms slice); the bf16 dW
# accumulators stay accumulator; the faithful kernels get no cause.
grep -A9 "^builtin:dw_tail_drop" "$tmp/ball" | grep -q "^  cause: dropped-terms .* the last 16 of the 2000 terms of each dW sum dropped (terms \[1984, 2000))" &&
  ok || bad "dw_tail_drop: cause not dropped-terms, the last 16 of 2000"
for kn in dw_splitk_bf16 dw_chunks_bf16; do
  grep -A9 "^builtin:$kn " "$tmp/ball" | grep -q "^  cause: accumulator " && ok || bad "$kn: cause not accumulator"
done
for kn in fp32 tiled_splitk bf16_out fp32_in; do
  grep -A6 "^builtin:$kn " "$tmp/ball" | grep -q "^  cause:" && bad "$kn: faithful with a cause" || ok
done
"$P" check gemm_bwd --kernel builtin:dw_tail_drop --workload train-varlen@2000x16x24 -q --no-floor --json "$tmp/dwt.json" >/dev/null 2>&1
"${PARITY_PYTHON:-python3}" - "$tmp/dwt.json" <<'PYEOF' && ok || bad "dw_tail_drop JSON: diagnosis.dropped not {1984, 2000, 2000}"
import json, sys
d = json.load(open(sys.argv[1]))["kernels"][0]["diagnosis"]
dr = d.get("dropped") or {}
print("dw_tail_drop: cause %s, dropped %s" % (d.get("cause"), dr))
sys.exit(0 if d.get("cause") == "dropped-terms" and (dr.get("from"), dr.get("to"), dr.get("of")) == (1984, 2000, 2000) else 1)
PYEOF
# At 2048 tokens (a multiple of its 64-token tile) the workload itself passes (no row fails); the
# check's shape neighbours at N = 31..33 (docs/check-json.md, "Caching") catch the dropped tail.
"$P" check gemm_bwd --kernel builtin:dw_tail_drop --workload train-8k@2048x16x24 -q --no-floor >"$tmp/dwt" 2>&1
[ $? = 1 ] && grep -q " 0 of [0-9]* rows fail" "$tmp/dwt" && grep -q "note: neighbours N=31,32,33 .*unfaithful at N=" "$tmp/dwt" &&
  ok || bad "dw_tail_drop: should pass the 2048-token rows and fail its shape neighbours"
for kn in dw_chunks_bf16 dw_splitk_bf16; do
  "$P" check gemm_bwd --kernel builtin:$kn --workload train-8k@2048x16x24 -q --no-floor >/dev/null 2>&1
  [ $? = 1 ] && ok || bad "$kn not caught at 2048 tokens"
done
# The symmetric reduction class (docs/error-model.md): the bf16 split-K workspace that the general
# bound let through at K = 65,536 (err/tol 0.65) is caught, the faithful fp32 kernel is not, and
# the JSON names the class that judged.
# (The verdict alone would not show it: the shape-neighbour probe at D = 128 catches it anyway.)
LONGK=llm-fwd@32x65536x16
"$P" check gemm --kernel builtin:splitk_bf16 --workload $LONGK -q --no-floor --json "$tmp/sk.json" >/dev/null 2>&1
"${PARITY_PYTHON:-python3}" - "$tmp/sk.json" <<'PYEOF' && ok || bad "splitk_bf16 at K = 65536: not over its tolerance on the workload itself"
import json, sys
w = json.load(open(sys.argv[1]))["kernels"][0]["workloads"][0]
q = w["max_err_over_tol"]
print("splitk_bf16 on %s: err/tol %s, %s" % (w["name"], q, w.get("tolerance_class")))
sys.exit(0 if isinstance(q, (int, float)) and q > 2 and w.get("tolerance_class") == "symmetric" else 1)
PYEOF
"$P" check gemm --kernel builtin:fp32 --workload $LONGK -q --no-floor >/dev/null 2>&1 && ok || bad "fp32 not faithful at K = 65536"

# Usage errors.
"$P" check gemm --kernel builtin:fp32 --workload nosuch -q >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && ok || bad "unknown workload: exit $rc, want 2"
"$P" check gemm --kernel builtin:fp32 --workload llm-fwd@0x10x10 -q >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && ok || bad "malformed shape: exit $rc, want 2"
"$P" check gemm --kernel builtin:nosuch -q >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && ok || bad "unknown kernel: exit $rc, want 2"

echo "cli_gemm: $pass passed, $fail failed"
[ $fail = 0 ]

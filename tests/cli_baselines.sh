#!/usr/bin/env bash
# parity check --baselines: the seven rules (docs/baselines.md) each give every kernel a verdict,
# in the text matrix and in the JSON (docs/check-json.md); no rule raises a false alarm on a
# faithful gemm kernel; the gross mutant is caught by every rule, the fp16 accumulator by the
# derived-error rules (flash-attn, hipdnn) and by parity, and the dropped K-tail by parity only.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
W=odd-k1000@64x1000x32
"$P" check gemm --kernel builtin:fp32 --kernel builtin:fp16_acc --kernel builtin:ktail_drop --workload $W --baselines \
  -q --no-floor --no-cache --json "$tmp/b.json" >"$tmp/b.txt" 2>"$tmp/err"
[ $? = 1 ] && ok || bad "exit code (mutants present: 1)"
grep -q "^detection matrix" "$tmp/b.txt" && ok || bad "no detection matrix"
for r in sol-execbench kernelbench assert_close flash-attn ck hipdnn flashinfer; do
  grep -q "^kernel .* $r" "$tmp/b.txt" && ok || bad "matrix header lacks $r"
  grep -q "^  $r " "$tmp/b.txt" && ok || bad "rule line for $r missing"
done
"$PY" - "$tmp/b.json" <<'PYEOF' && ok || bad "JSON baselines"
import json, sys
d = json.load(open(sys.argv[1]))
rules = ["sol-execbench", "kernelbench", "assert_close", "flash-attn", "ck", "hipdnn", "flashinfer"]
k = {x["name"]: x for x in d["kernels"]}
for name, x in k.items():
    assert sorted(x["baselines"]) == sorted(rules), (name, sorted(x["baselines"]))
    for r in rules:
        b = x["baselines"][r]
        assert set(b) >= {"caught", "pass_fraction", "margin", "rule"}, b
fp32 = k["builtin:fp32"]["baselines"]
assert not any(fp32[r]["caught"] for r in rules), fp32       # no false alarm
acc = k["builtin:fp16_acc"]["baselines"]
assert acc["flash-attn"]["caught"] and acc["hipdnn"]["caught"], acc
assert k["builtin:fp16_acc"]["verdict"] == "unfaithful"
tail = k["builtin:ktail_drop"]
assert tail["verdict"] == "unfaithful"
assert not tail["baselines"]["kernelbench"]["caught"]
PYEOF
echo "cli_baselines: $pass passed, $fail failed"
[ $fail = 0 ]

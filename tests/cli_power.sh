#!/usr/bin/env bash
# parity power: the help teaches the mutant families; a small sweep (rmsnorm_fwd on one small
# workload, a small emulation budget) gives every judge a figure in the table, the Markdown and
# the JSON (schema parity.power/1); parity catches every accumulator of up to 16 bits there and
# raises no false alarm on the fp32 control, and is stronger on accumulators than the 1e-2
# allclose rules (SOL-ExecBench, KernelBench); usage errors exit 2.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
"$P" power --help >"$tmp/h" 2>&1 && ok || bad "--help exit code"
for w in acc-seq acc-pair drop tail tf32-in alarm --quick --workload --budget --json --markdown; do
  grep -q -- "$w" "$tmp/h" && ok || bad "help lacks $w"
done
"$P" power >/dev/null 2>&1; [ $? = 2 ] && ok || bad "no OP: exit 2"
"$P" power nope >/dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown op: exit 2"
"$P" power rmsnorm_fwd --budget 0 >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bad budget: exit 2"
"$P" power rmsnorm_fwd --workload nope -q >/dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown workload: exit 2"

"$P" power rmsnorm_fwd --workload unit@64x256 --budget 65536 -q --markdown --json "$tmp/p.json" >"$tmp/p.md" 2>"$tmp/err"
[ $? = 0 ] && ok || bad "sweep exit code"
grep -q "^| judge | set | acc-seq" "$tmp/p.md" && ok || bad "no Markdown table"
for j in parity sol-execbench kernelbench assert_close flash-attn ck hipdnn flashinfer; do
  grep -q "^| $j |" "$tmp/p.md" && ok || bad "Markdown lacks $j"
done
"$PY" - "$tmp/p.json" <<'PYEOF' && ok || bad "JSON figures"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "parity.power/1"
op = d["ops"][0]
assert op["op"] == "rmsnorm_fwd"
s = op["sets"][0]
assert s["name"] == "unit@64x256" and s["workloads"] == 1
j = s["judges"]
assert len(j) == 8, sorted(j)
p = j["parity"]
for k in ("acc_seq_bits", "acc_pair_bits", "drop_rate", "tail", "caught_seq", "caught_pair", "caught_drop"):
    assert k in p, k
assert p["acc_seq_bits"] >= 16, p["acc_seq_bits"]
assert all(p["caught_seq"][str(m)] == 1 for m in range(8, 17)), p["caught_seq"]
assert p["alarm_fp32_acc"] == 0, p
assert p["tail"] == 1
for weak in ("sol-execbench", "kernelbench"):
    assert j[weak]["acc_seq_bits"] < p["acc_seq_bits"], (weak, j[weak]["acc_seq_bits"])
PYEOF
echo "cli_power: $pass passed, $fail failed"
[ $fail = 0 ]

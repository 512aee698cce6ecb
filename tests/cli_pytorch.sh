#!/usr/bin/env bash
# The file-based flow end to end with a real framework: parity gen -> a PyTorch implementation
# of the fused op (examples/pytorch/fused_bwd.py) -> parity compare. The faithful variant must
# pass and the bf16-accumulating one fail; `parity compare` must agree with `parity check` on the
# same kernel and inputs (a catalog kernel run through `parity run`). Skips (77) without torch.
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:?}
if ! "$PY" -c 'import torch, safetensors' 2>/dev/null; then
  echo "skip: $PY cannot import torch and safetensors (make test, or make deps-test, prepares .venv with them)"
  exit 77
fi
. "$(dirname "$0")/lib_cli.sh"
OP=embedding_rmsnorm_bwd

"$P" gen $OP --workload text --seed 2 --out "$tmp/in.st" 2>/dev/null && ok || bad "gen failed"
for v in faithful bf16_accum; do
  "$PY" "$SRC/examples/pytorch/fused_bwd.py" "$tmp/in.st" "$tmp/$v.st" --variant $v || bad "pytorch $v failed"
  "$P" compare $OP "$tmp/in.st" "$tmp/$v.st" --no-floor >"$tmp/$v.txt" 2>&1
  rc=$?
  want=0; [ $v = bf16_accum ] && want=1
  [ $rc = $want ] && ok || { bad "compare of the PyTorch $v outputs: exit $rc, want $want"; cat "$tmp/$v.txt"; }
done

# compare and check agree on a catalog kernel and the same inputs.
"$P" run $OP --kernel builtin:bf16_accum --inputs "$tmp/in.st" --out "$tmp/k.st" && ok || bad "run failed"
"$P" compare $OP "$tmp/in.st" "$tmp/k.st" --no-floor --json "$tmp/cmp.json" >/dev/null 2>&1
rc=$?; [ $rc = 1 ] && ok || bad "compare of bf16_accum's output: exit $rc, want 1 (unfaithful)"
"$P" check $OP --kernel builtin:bf16_accum --workload text --seed 2 --no-floor -q --json "$tmp/chk.json" >/dev/null 2>&1
rc=$?; [ $rc = 1 ] && ok || bad "check of bf16_accum: exit $rc, want 1 (unfaithful)"
"$PY" - "$tmp/cmp.json" "$tmp/chk.json" <<'PYEOF' && ok || bad "compare and check disagree"
import json, sys
a, b = (json.load(open(p))["kernels"][0] for p in sys.argv[1:3])
wa, wb = a["workloads"][0], b["workloads"][0]
same = a["verdict"] == b["verdict"] and wa["max_err_over_tol"] == wb["max_err_over_tol"] and wa["worst"] == wb["worst"]
if not same: print(a["verdict"], b["verdict"], wa["max_err_over_tol"], wb["max_err_over_tol"])
sys.exit(0 if same else 1)
PYEOF

# Bad input: exit 3 with a message naming the file and what was expected.
printf 'not a safetensors file' >"$tmp/junk.st"
"$P" compare $OP "$tmp/junk.st" "$tmp/k.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "junk.st" "$tmp/err" && ok || bad "junk inputs: exit $rc, message: $(cat "$tmp/err")"
head -c 200 "$tmp/k.st" >"$tmp/trunc.st"
"$P" compare $OP "$tmp/in.st" "$tmp/trunc.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "trunc.st" "$tmp/err" && ok || bad "truncated outputs: exit $rc, message: $(cat "$tmp/err")"
"$P" gen embedding_bwd --workload uniform --out "$tmp/other.st" 2>/dev/null
"$P" compare $OP "$tmp/in.st" "$tmp/other.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "no tensor 'dE'\|dgamma\|shape" "$tmp/err" && ok || bad "outputs of another op: exit $rc, message: $(cat "$tmp/err")"
"$P" compare embedding_bwd "$tmp/in.st" "$tmp/k.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "embedding_rmsnorm_bwd" "$tmp/err" && ok || bad "inputs of another op: exit $rc"
"$PY" - "$tmp/in.st" "$tmp/mod.st" <<'PYEOF'
import sys
from safetensors import safe_open
from safetensors.torch import save_file
with safe_open(sys.argv[1], "pt") as f:
    meta = f.metadata(); t = {k: f.get_tensor(k) for k in f.keys()}
t["dy"][0, 0] += 1
save_file(t, sys.argv[2], metadata=meta)
PYEOF
"$P" compare $OP "$tmp/mod.st" "$tmp/k.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "'dy'" "$tmp/err" && ok || bad "modified inputs file: exit $rc, message: $(cat "$tmp/err")"
"$P" compare $OP "$tmp/in.st" 2>/dev/null; rc=$?
[ $rc = 2 ] && ok || bad "missing argument: exit $rc, want 2"
"$PY" - "$tmp/k.st" "$tmp/f16.st" <<'PYEOF'
import sys, torch
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1]); t["dE"] = t["dE"].to(torch.int32); save_file(t, sys.argv[2])
PYEOF
"$P" compare $OP "$tmp/in.st" "$tmp/f16.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "dtype" "$tmp/err" && ok || bad "int outputs: exit $rc, message: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]

#!/usr/bin/env bash
# Long (label "long"): across 5 seeds, on every workload of every op including the
# production-sized ones, every faithful catalog kernel passes and every mutant fails.
# About 1.5-2 hours on 2 cores (the fused op with its production preset dominates; the five ops
# added for GEMM, attention and MoE take 17-147 s per seed each). Run with: make test-long (or
# ctest -L long).
set -u
P=${PARITY:?}
PY=${PARITY_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
runs=0
# Every op of ops/ops.def (CTest passes the list as PARITY_ALL_OPS); PARITY_OPS="gemm attention_fwd"
# limits the run to those ops.
ALL=${PARITY_ALL_OPS:-$(sed -n 's/^PARITY_OP([a-z_0-9]*, *\([a-z_0-9]*\)).*/\1/p' "$(dirname "$0")/../ops/ops.def" | tr '\n' ' ')}
for op in ${PARITY_OPS:-$ALL}; do
  for seed in 1 2 3 4 5; do
    t0=$(date +%s)
    # A run that writes no report must not be judged on the previous run's.
    rm -f "$tmp/r.json"
    "$P" check $op --kernel builtin:all --seed $seed -q --json "$tmp/r.json" >"$tmp/r.txt" 2>&1
    rc=$?
    runs=$((runs + 1))
    if [ $rc -gt 1 ]; then echo "FAIL: $op seed $seed: exit $rc"; cat "$tmp/r.txt"; fail=$((fail + 1)); continue; fi
    if [ ! -s "$tmp/r.json" ]; then echo "FAIL: $op seed $seed: exit $rc but no JSON report"; cat "$tmp/r.txt"; fail=$((fail + 1)); continue; fi
    if ! "$PY" - "$tmp/r.json" "$op" "$seed" <<'PYEOF'; then fail=$((fail + 1)); fi
import json, sys
r = json.load(open(sys.argv[1]))
bad = [(k["name"], k["verdict"], k["expected"]) for k in r["kernels"]
       if (k["verdict"] == "faithful") != (k["expected"] == "faithful")]
for b in bad:
    print("FAIL: %s seed %s: %s is %s, expected %s" % (sys.argv[2], sys.argv[3], *b))
sys.exit(1 if bad else 0)
PYEOF
    echo "$op seed $seed: $(( $(date +%s) - t0 )) s"
  done
done
echo "$((runs - fail)) passed, $fail failed"
[ $fail = 0 ]

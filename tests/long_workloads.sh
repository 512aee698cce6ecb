#!/usr/bin/env bash
# Long (label "long"): the structure-and-range workloads (docs/workloads.md) over seeds 1-3 and
# all 13 ops, each workload on its own: every faithful catalog kernel passes every run, and every
# mutant fails at least one of the five in every seed. 195 runs of builtin:all, about 10 minutes
# of CPU on 2 cores. PARITY_OPS="gemm attention_fwd" limits the ops, PARITY_SEEDS the seeds.
set -u
P=${PARITY:?}
PY=${PARITY_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
runs=0
for op in ${PARITY_OPS:-$("$P" ops | awk '{print $1}')}; do
  for seed in ${PARITY_SEEDS:-1 2 3}; do
    for w in exact x1e-3 x64 near-max subnormal; do
      "$P" check $op --kernel builtin:all --workload $w --seed $seed -q --json "$tmp/$w.json" >"$tmp/r.txt" 2>&1
      rc=$?
      runs=$((runs + 1))
      if [ $rc -gt 1 ]; then echo "FAIL: $op $w seed $seed: exit $rc"; cat "$tmp/r.txt"; fail=$((fail + 1)); fi
    done
    if ! "$PY" - "$tmp" "$op" "$seed" <<'PYEOF'; then fail=$((fail + 1)); fi
import json, os, sys
d, op, seed = sys.argv[1:4]
caught, expected, bad = {}, {}, []
for w in ["exact", "x1e-3", "x64", "near-max", "subnormal"]:
    f = os.path.join(d, w + ".json")
    if not os.path.exists(f):
        bad.append("%s: no report" % w)
        continue
    for k in json.load(open(f))["kernels"]:
        expected[k["name"]] = k["expected"]
        caught.setdefault(k["name"], [])
        if k["verdict"] != "faithful":
            caught[k["name"]].append(w)
            if k["expected"] == "faithful":
                bad.append("faithful %s is %s on %s" % (k["name"], k["verdict"], w))
for name, e in expected.items():
    if e != "faithful" and not caught[name]:
        bad.append("mutant %s passes all five workloads" % name)
for b in bad:
    print("FAIL: %s seed %s: %s" % (op, seed, b))
print("%s seed %s: %d kernels, mutants caught by: %s" % (op, seed, len(expected),
      "; ".join("%s %s" % (n.split(":")[-1], ",".join(c)) for n, c in caught.items() if c)))
sys.exit(1 if bad else 0)
PYEOF
    rm -f "$tmp"/*.json
  done
done
echo "$runs runs, $fail failed"
[ $fail = 0 ]

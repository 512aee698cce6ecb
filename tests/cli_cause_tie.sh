#!/usr/bin/env bash
# The diagnosis's causes tie, structural and the parameter switch (issue #36; docs/error-model.md
# "Cause"), on the MoE router ops and embedding_fwd: each planted mutant reads its word in the
# text and the JSON, at kernel and workload level, with match 1 (its variant's reference
# reproduces every sampled element); a wrong selection that is no tie does not read tie; faithful
# kernels get no cause; and no wrong word comes with match >= 0.9. One workload each keeps it short.
. "$(dirname "$0")/lib_cli.sh"
PL="${PARITY_BUILD:?}/tests/plugins/libparity_topk_ties.so"

# op workload kernel expected-cause [text that must appear on the cause line]
cause() {
  "$P" check "$1" --kernel "$3" --workload "$2" -q --no-floor --no-cache --json "$tmp/c.json" >"$tmp/out" 2>&1
  grep -q "^  cause: $4 " "$tmp/out" && ok || { bad "$1 $3 on $2: no 'cause: $4' line"; cat "$tmp/out"; }
  if [ $# -ge 5 ]; then
    grep "^  cause: $4 " "$tmp/out" | grep -qF -- "$5" && ok || bad "$1 $3 on $2: cause line lacks '$5'"
  fi
  python3 - "$tmp/c.json" "$4" <<'EOF' && ok || bad "$1 $3 on $2: JSON"
import json, sys
j = json.load(open(sys.argv[1]))
k = j["kernels"][0]
ds = [k.get("diagnosis") or {}] + [w.get("diagnosis") or {} for w in k["workloads"]]
ds = [d for d in ds if d.get("cause")]
bad = [d for d in ds if d["cause"] != sys.argv[2] or d.get("match") != 1]
if not ds or bad:
    print("causes:", [(d.get("cause"), d.get("match")) for d in ds])
    sys.exit(1)
EOF
}

# no_cause op workload kernel: a faithful kernel, no cause anywhere even with --diagnose.
no_cause() {
  "$P" check "$1" --kernel "$3" --workload "$2" -q --no-floor --no-cache --diagnose --json "$tmp/f.json" >"$tmp/out" 2>&1
  grep -q "faithful" "$tmp/out" && ok || bad "$1 $3 on $2: not faithful"
  grep -q '"cause"\|cause:' "$tmp/out" "$tmp/f.json" && bad "$1 $3 on $2: faithful kernel given a cause" || ok
}

# not_confidently op workload kernel word: the kernel reads no `word`, and whatever word it reads
# comes with match below 0.9 (or none).
not_confidently() {
  "$P" check "$1" --kernel "$3" --workload "$2" -q --no-floor --no-cache --json "$tmp/n.json" >"$tmp/out" 2>&1
  python3 - "$tmp/n.json" "$4" <<'EOF' && ok || bad "$1 $3 on $2: a confident or forbidden cause"
import json, sys
j = json.load(open(sys.argv[1]))
k = j["kernels"][0]
assert k["verdict"] == "unfaithful", k["verdict"]
for d in [k.get("diagnosis") or {}] + [w.get("diagnosis") or {} for w in k["workloads"]]:
    if d.get("cause") == sys.argv[2] or (d.get("cause") not in (None, "unknown") and (d.get("match") or 0) >= 0.9):
        print("cause", d.get("cause"), "match", d.get("match"), d.get("detail"))
        sys.exit(1)
EOF
}

# tie: ties at the k-th expert broken toward the higher id (the op's rule is the lower id), and a
# kernel whose ties fall either way row by row (torch.topk's unstable order). bf16-ties forces
# exact ties at the boundary on 5% of the tokens.
cause moe_router_combine bf16-ties builtin:tie_highid tie "broken toward the higher expert id: "
grep "^  cause: tie " "$tmp/out" | grep -Eq "[0-9]+ of the [0-9]+ sampled rows ha(s|ve) a tie there that decides \(rows? [0-9]" &&
  ok || bad "tie_highid: the cause line does not list the rows whose tie decided"
cause moe_router_combine bf16-ties "$PL:topk_unstable" tie "the op's rule on the other"
# A wrong expert taken without a tie (every fifth row) is not a tie.
not_confidently moe_router_combine bf16-ties "$PL:rank_swap" tie
# parameter: renormalisation applied where the op's renorm is 0 (skewed), and the renorm = 0
# backward on a renormalising router (mixtral); diagnosis.parameter gives the two values.
cause moe_router_combine skewed builtin:renorm_always parameter "(renorm = 1; the op's is 0)"
python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["kernels"][0]["diagnosis"]["parameter"]
sys.exit(not (p["name"] == "renorm" and p["fitted"] == 1 and p["op"] == 0))' "$tmp/c.json" && ok ||
  bad "renorm_always: JSON diagnosis.parameter is not renorm 1 against 0"
cause moe_router_combine_bwd mixtral builtin:renorm_ignored parameter "(renorm = 0; the op's is 1)"
# intermediate-rounding: the router's probabilities rounded to bf16 (and the selection on them).
cause moe_router_combine mixtral builtin:bf16_softmax intermediate-rounding "the router probabilities"
# structural: the backward's gradient reaching experts the top-k did not select; the embedding
# gather at id + 1.
cause moe_router_combine_bwd mixtral builtin:dense_dexp structural "did not select"
cause embedding_fwd uniform builtin:off_by_one structural "rows gathered at id + 1"
# A formula bug outside the taxonomy (the softmax Jacobian's second term forgotten): no word with
# a confident match, never structural or parameter.
not_confidently moe_router_combine_bwd mixtral builtin:no_jacobian structural
not_confidently moe_router_combine_bwd subnormal builtin:no_jacobian parameter
# Faithful kernels: no cause.
no_cause moe_router_combine bf16-ties builtin:fp32
no_cause moe_router_combine bf16-ties builtin:topk_logits
no_cause moe_router_combine exact builtin:fp32
no_cause moe_router_combine_bwd mixtral builtin:fp32
no_cause embedding_fwd uniform builtin:copy

echo "cli_cause_tie: $pass passed, $fail failed"
[ $fail = 0 ]

# `parity moe`: bit-identity of identical specs, drift where the specs differ, perturbation 0,
# --max-flip / --max-ulp verdicts, the table, JSON determinism, usage errors. Small sizes: seconds.
set -u
P=${PARITY:?PARITY must point at the parity binary}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
S="--tokens 128 --experts 16 --topk 4 --hidden 64"
# shellcheck disable=SC2086
run() { out=$("$P" moe $S "$@" 2>&1); rc=$?; }

# The same spec twice (B defaults to A): bit-identical, 0 set flips, exit 0.
run --a softmax=bf16,order=slot
[ $rc -eq 0 ] && grep -q "bit-identical: yes (expected" <<<"$out" || fail "same spec: $rc $out"
grep -q "^  A vs B         0.0000   0.0000" <<<"$out" || fail "same spec: want 0 flips, 0 differ: $out"
# Perturbation 0 flips nothing.
run --perturb 0
grep -Eq "^ +0 +0.0000 +0.0000$" <<<"$out" || fail "perturb 0: $out"
# Reference vs a fused-kernel setup: drift, exit 0, JSON, byte-identical across runs.
run --b softmax=bf16,weights=fp32,order=slot,combine=fp32acc,shared=before --json "$T/a.json"
[ $rc -eq 0 ] && grep -q "bit-identical: no (not expected" <<<"$out" || fail "fused: $rc $out"
d=$(grep "^  A vs B" <<<"$out" | awk '{print $5}')
awk -v d="$d" 'BEGIN { exit !(d > 0.05) }' || fail "fused: fraction differing $d should be > 0.05"
run --b softmax=bf16,weights=fp32,order=slot,combine=fp32acc,shared=before --json "$T/b.json"
cmp -s "$T/a.json" "$T/b.json" || fail "JSON not byte-identical across runs"
grep -Eq '"schema":[[:space:]]+"parity.moe/1"' "$T/a.json" || fail "JSON schema key missing"
grep -q '"topk_set_differ_a_vs_b"' "$T/a.json" || fail "JSON: topk_set_differ_a_vs_b missing"
ls "$T" | grep -q tmp && fail "JSON temp file left behind"
# Verdicts: --max-ulp 0 on differing specs, --max-flip 0 with ties and opposite tie rules.
run --b order=slot --max-ulp 0
[ $rc -eq 1 ] && grep -q "^reproduce: parity moe" <<<"$out" || fail "--max-ulp 0: want 1, got $rc"
run --b topk=highid --ties 0.5 --perturb none --max-flip 0
[ $rc -eq 1 ] && grep -q "FAIL: A vs B top-k set flips" <<<"$out" || fail "--max-flip 0 ties: want 1, got $rc $out"
run --b order=slot --perturb none --max-flip 0
[ $rc -eq 0 ] || fail "--max-flip 0, same routing: want 0, got $rc $out"
run --perturb 0.5 --max-flip 0.01
[ $rc -eq 1 ] || fail "--max-flip 0.01 under --perturb 0.5: want 1, got $rc"
# The table: 12 rows, the control row bit-identical, JSON.
run --table --perturb 0,0.01 --json "$T/t.json"
[ $rc -eq 0 ] || fail "table: exit $rc $out"
[ "$(grep '^| [a-z]' <<<"$out" | grep -vc '^| eps')" -eq 12 ] || fail "table: want 12 rows: $out"
[ "$(grep -c '^| [0-9]' <<<"$out")" -eq 2 ] || fail "table: want 2 perturbation rows: $out"
grep -q '^| default | 0.0000 | 0.000 | 0 | 0 | 0 |' <<<"$out" || fail "table control row: $out"
grep -Eq '"schema":[[:space:]]+"parity.moe.table/1"' "$T/t.json" || fail "table JSON schema"
# Usage errors: exit 2 with a message saying what to type.
for bad in "--a softmax=fp16" "--b order=random" "--a bogus=1" "--a order" "--topk 17" \
           "--experts 0" "--perturb -1" "--sigma nan" "--table --a order=slot" "--bogus 1" "--tokens"; do
    # shellcheck disable=SC2086
    err=$("$P" moe $S $bad 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && grep -q "try:" <<<"$err" || fail "'$bad': want exit 2 with a hint, got $rc: $err"
done
err=$("$P" moe $S --a softmax=fp16 2>&1 >/dev/null)
grep -q "softmax=fp32|bf16" <<<"$err" || fail "bad value should list the accepted ones: $err"
"$P" moe --help | grep -q "^usage: parity moe" || fail "--help"
# A JSON path that cannot be written: exit 3.
run --json "$T/no/such/dir/x.json"
[ $rc -eq 3 ] || fail "unwritable --json: want 3, got $rc"
echo "cli_moe: $fails failures"
[ $fails -eq 0 ]

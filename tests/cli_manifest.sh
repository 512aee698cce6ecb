# `parity manifest`: capture with --set, ranked diff (a TP-size or all-reduce change ranks above a
# cosmetic one), bad manifests exit 3 naming the file and field, usage errors exit 2.
set -u
P=${PARITY:?PARITY must point at the parity binary}
D=${PARITY_SRC:?PARITY_SRC must point at the source tree}/tests/data/manifest
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Capture: environment NCCL_* plus --set, deterministic bytes, round-trips through diff.
env -i PATH=/usr/bin:/bin NCCL_ALGO=Tree "$P" manifest capture --no-probe --set parallel.tp=8 \
    --set fusion.allreduce_rmsnorm=true --out "$T/a.json" || fail "capture exit $?"
grep -q '"NCCL_ALGO":[[:space:]]*"Tree"' "$T/a.json" || fail "capture: NCCL_ALGO missing"
grep -q '"tp":[[:space:]]*8' "$T/a.json" || fail "capture: tp missing"
env -i PATH=/usr/bin:/bin NCCL_ALGO=Tree "$P" manifest capture --no-probe --set parallel.tp=8 \
    --set fusion.allreduce_rmsnorm=true --out "$T/b.json"
cmp -s "$T/a.json" "$T/b.json" || fail "capture not byte-identical"
out=$("$P" manifest diff "$T/a.json" "$T/b.json"); [ $? -eq 0 ] && grep -q ": 0 differences" <<<"$out" || fail "self diff: $out"

# Train (TP8, NCCL ring) vs serve (TP4, custom one-shot, fused): TP first, all-reduce next,
# cosmetic host/notes last.
out=$("$P" manifest diff "$D/train_tp8.json" "$D/serve_tp4.json" --json "$T/d.json"); rc=$?
[ $rc -eq 0 ] || fail "diff exit $rc"
first=$(grep -E '^ +1\.' <<<"$out")
grep -q "parallel.tp" <<<"$first" || fail "TP change should rank first: $out"
ar=$(grep -nE '^ +[0-9]+\. .*allreduce\.' <<<"$out" | head -1 | cut -d: -f1)
cos=$(grep -nE '^ +[0-9]+\. .*(host|notes)\.' <<<"$out" | head -1 | cut -d: -f1)
[ -n "$ar" ] && [ -n "$cos" ] && [ "$ar" -lt "$cos" ] || fail "all-reduce should rank above cosmetic: $out"
grep -Eq '"schema":[[:space:]]+"parity.manifest.diff/1"' "$T/d.json" || fail "diff JSON"
# Only cosmetic differences: every score 0.
out=$("$P" manifest diff "$D/serve_tp4.json" "$D/serve_tp4_cosmetic.json"); rc=$?
[ $rc -eq 0 ] || fail "cosmetic diff exit $rc"
grep -q ": 2 differences" <<<"$out" && grep -qE '^ +1\. \[  0\] host\.name' <<<"$out" &&
    grep -qE '^ +2\. \[  0\] notes\.run' <<<"$out" || fail "cosmetic diff should list host.name and notes.run at 0: $out"
grep -qE '\[ *[1-9][0-9]*\]' <<<"$out" && fail "cosmetic-only diff has a non-zero score: $out"

# Bad manifests: exit 3, the message names the file and the field.
check_bad() {
    err=$("$P" manifest diff "$D/$1" "$D/serve_tp4.json" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 3 ] && grep -q "$1" <<<"$err" && grep -q -- "$2" <<<"$err" || fail "$1: want exit 3 and '$2', got $rc: $err"
}
check_bad bad_tp.json "parallel.tp: expected a positive integer"
check_bad bad_json.json "not valid JSON"
check_bad bad_schema.json "schema: expected"
check_bad bad_fusion.json "fusion.allreduce_rmsnorm: expected true or false"
err=$("$P" manifest diff "$T/none.json" "$D/serve_tp4.json" 2>&1); [ $? -eq 3 ] || fail "missing file: $err"

# Usage errors: exit 2 with a hint.
for bad in "" "frob" "diff onlyone.json" "capture --set tp8" "capture --set parallel.tp=0" \
           "capture --set parallel.rank_device_map=a,b" "capture --bogus"; do
    # shellcheck disable=SC2086
    err=$("$P" manifest $bad 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && grep -q "try:" <<<"$err" || fail "'manifest $bad': want exit 2 with a hint, got $rc: $err"
done
echo "cli_manifest: $fails failures"
[ $fails -eq 0 ]

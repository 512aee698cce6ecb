# `parity allreduce`: bit-identity where expected, drift where not, the table, JSON determinism,
# exit codes. Small sizes: seconds.
set -u
P=${PARITY:?PARITY must point at the parity binary}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { out=$("$P" allreduce "$@" 2>&1); rc=$?; }

# The same spec twice: bit-identical, expected, exit 0.
run --a ring:8:bf16 --n 512 --k 256
[ $rc -eq 0 ] && grep -q "bit-identical: yes (expected" <<<"$out" || fail "same spec twice: $rc $out"
# Rabenseifner and recursive doubling share the per-element order: identical by construction.
run --a rabenseifner:6 --b rd:6 --n 300 --k 60
[ $rc -eq 0 ] && grep -q "bit-identical: yes (expected" <<<"$out" || fail "rd vs rabenseifner: $out"
# Open MPI number aliases: ompi:4 is the Open MPI ring, ompi:5 (segmented) too.
run --a ompi:4:8 --b ompi:5:8 --n 300 --k 64
[ $rc -eq 0 ] && grep -q "A = mpi_ring:8:fp32, B = mpi_ring:8:fp32" <<<"$out" || fail "ompi aliases: $out"
# Trained on 8, served on 4: drift, not expected identical, exit 0.
run --a ring:8:bf16 --b oneshot:4:bf16 --n 2000 --k 512 --json "$T/a.json"
[ $rc -eq 0 ] && grep -q "bit-identical: no (not expected" <<<"$out" || fail "8 vs 4: $rc $out"
d=$(grep "^  A vs B" <<<"$out" | awk '{print $4}')
awk -v d="$d" 'BEGIN { exit !(d > 0.05) }' || fail "8 vs 4 bf16: fraction differing $d should be > 0.05"
# Same seed, same JSON bytes.
run --a ring:8:bf16 --b oneshot:4:bf16 --n 2000 --k 512 --json "$T/b.json"
cmp -s "$T/a.json" "$T/b.json" || fail "JSON not byte-identical across runs"
grep -Eq '"schema":[[:space:]]+"parity.allreduce/1"' "$T/a.json" || fail "JSON schema key missing"
# Small integers: every order is exact, so every algorithm agrees bit for bit.
run --a ring:8 --b oneshot:4 --workload intprobe --n 500 --k 64
grep -q "bit-identical: yes" <<<"$out" || fail "intprobe should agree exactly: $out"
# --max-ulp turns drift into a verdict (exit 1) with a reproducer.
run --a ring:8:bf16 --b tree:4:bf16 --n 1000 --k 512 --max-ulp 0
[ $rc -eq 1 ] && grep -q "^reproduce: parity allreduce" <<<"$out" || fail "--max-ulp 0: want 1, got $rc"
# The table: the control rows are bit-identical; 18 rows.
run --table 8:4 --n 600 --k 256 --json "$T/t.json"
[ $rc -eq 0 ] || fail "table: exit $rc $out"
[ "$(grep -c '^| \(bf16\|fp32\) ' <<<"$out")" -eq 18 ] || fail "table: want 18 rows: $out"
grep -q '| bf16 | ring:8:bf16      | ring:8:bf16      |  0.000 |' <<<"$out" || fail "table control row"
# Usage errors: exit 2 with a hint.
for bad in "--a ring" "--a ring:0" "--a warp:4" "--a tree:4:ch2" "--a ring:4:bf17" "--table 8" \
           "--a ring:4 --workload nope" "--a ompi:2:4" "--bogus 1"; do
    # shellcheck disable=SC2086
    err=$("$P" allreduce $bad 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && grep -q "try:" <<<"$err" || fail "'$bad': want exit 2 with a hint, got $rc: $err"
done
"$P" allreduce --help | grep -q "^usage: parity allreduce" || fail "--help"
echo "cli_allreduce: $fails failures"
[ $fails -eq 0 ]

#!/usr/bin/env bash
# Hostile kernels of a declared op get the verdicts the same misbehaviour gets under a built-in op
# (issue #35): tests/plugins/declared_hostile.c declares rmsnorm_declared (the built-in
# rmsnorm_fwd's contract) and lists every kernel for both ops. `parity check --op-plugin` and
# `parity check rmsnorm_fwd --kernel` (one engine, one report: the same JSON schema) must give
#   control faithful, hang timeout (it blocks every signal and ignores SIGALRM: only the parent's
#   deadline and SIGKILL end it), oob_after / oob_before wrote-out-of-bounds, memo_ptr
#   stale-cache, modify_input modified-inputs, nondet nondeterministic;
# and a check of the blocking kernel ends within its --timeout plus a few seconds.
. "$(dirname "$0")/lib_cli.sh"
: "${PARITY_BUILD:?set PARITY_BUILD to the build directory}"
H="$PARITY_BUILD/tests/plugins/libparity_declared_hostile.so"
if [ ! -f "$H" ]; then echo "skip: $H not built"; exit 77; fi
command -v python3 >/dev/null || { echo "skip: python3 needed to read the JSON reports"; exit 77; }
T=3     # --timeout of the checks (seconds)
SLACK=5 # what a check of one workload may take beyond it: building the case, forks, the report

# "kernel=verdict" per kernel of a JSON report (built-in and declared reports alike)
verdicts() {
    python3 - "$1" <<'PY'
import json, sys
for k in json.load(open(sys.argv[1]))["kernels"]:
    print("%s=%s" % (k["name"].rsplit(":", 1)[1], k["verdict"]))
PY
}

want="control=faithful hang=timeout oob_after=wrote-out-of-bounds oob_before=wrote-out-of-bounds
memo_ptr=stale-cache modify_input=modified-inputs nondet=nondeterministic"

# the declared op, every quick workload, one worker per core (the grid's default)
"$P" check rmsnorm_declared --op-plugin "$H" --quick -q --timeout $T --jobs 2 --json "$tmp/d.json" > "$tmp/d.txt"
rc=$?
[ $rc -eq 1 ] && ok || bad "declared: exit $rc, expected 1 (hostile kernels fail)"
verdicts "$tmp/d.json" > "$tmp/d.v" || bad "declared: JSON unreadable"
# the built-in op on one workload (an odd shape), no floor
"$P" check rmsnorm_fwd --kernel "$H" --workload odd-d4097 -q --timeout $T --no-floor --no-cache \
    --json "$tmp/b.json" > "$tmp/b.txt" 2>"$tmp/b.err"
rc=$?
[ $rc -eq 1 ] && ok || bad "built-in: exit $rc, expected 1: $(head -3 "$tmp/b.err")"
verdicts "$tmp/b.json" > "$tmp/b.v" || bad "built-in: JSON unreadable"
for w in $want; do
    grep -qx "$w" "$tmp/d.v" && ok || bad "declared: expected $w, got $(grep "^${w%%=*}=" "$tmp/d.v")"
    grep -qx "$w" "$tmp/b.v" && ok || bad "built-in: expected $w, got $(grep "^${w%%=*}=" "$tmp/b.v")"
done
# every workload of the declared op gets the kernel's verdict (not only the worst one)
python3 - "$tmp/d.json" <<'PY' && ok || bad "declared: a workload's verdict differs from its kernel's"
import json, sys
for k in json.load(open(sys.argv[1]))["kernels"]:
    assert len(k["workloads"]) == 4, k["name"]
    assert all(w["verdict"] == k["verdict"] for w in k["workloads"]), (k["name"], k["workloads"])
PY

# a check of the blocking kernel ends within --timeout plus a few seconds, and says so
t0=$(date +%s.%N)
"$P" check rmsnorm_declared --op-plugin "$H" --kernel hang --workload base -q --timeout $T > "$tmp/h.txt"
rc=$?
t1=$(date +%s.%N)
el=$(python3 -c "print(round($t1 - $t0, 1))")
[ $rc -eq 1 ] && grep -q ":hang  *timeout " "$tmp/h.txt" && ok || bad "hang: exit $rc, $(cat "$tmp/h.txt")"
python3 -c "import sys; sys.exit(0 if $el <= $T + $SLACK else 1)" && ok \
    || bad "hang: the check took $el s with --timeout $T (at most $((T + SLACK)) s expected)"
echo "blocking kernel: timeout after $el s (--timeout $T)"

echo "declared hostile: $pass passed, $fail failed"
exit $((fail > 0))

#!/usr/bin/env bash
# Caching in every form (tests/plugins/caching.c): a memo keyed on pointers (both, or the output alone), on shapes, on the
# first bytes of the inputs, and a plan kept across neighbouring shapes each get the verdict
# "stale-cache" from `parity check`, naming the probe that exposed it; a kernel that skips work
# after its first calls loses its `parity bench` score; `--seed fresh` draws a seed that the JSON
# records and `--seed S` replays byte for byte.
. "$(dirname "$0")/lib_cli.sh"
: "${PARITY_BUILD:?set PARITY_BUILD to the build directory}"
C="$PARITY_BUILD/tests/plugins/libparity_caching.so"
[ -f "$C" ] || { echo "skip: $C not built"; exit 77; }
PY=${PARITY_PYTHON:-python3}
"$PY" -c 'import json' 2>/dev/null || { echo "skip: python3 needed to read the JSON reports"; exit 77; }
export XDG_CACHE_HOME="$tmp/cache"
OP=embedding_rmsnorm_bwd
COMMON=(--workload uniform --no-floor -q --timeout 20)

# field JSON KERNEL KEY: workload 0's KEY ("verdict", "detail") of the kernel whose name ends in :KERNEL
field() {
    "$PY" - "$1" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in d["kernels"]:
    if k["name"].endswith(":" + sys.argv[2]):
        print(k["verdict"] if sys.argv[3] == "verdict" else k["workloads"][0][sys.argv[3]])
        break
else:
    print("MISSING")
PY
}

# expect NAME VERDICT RC [DETAIL-SUBSTRING]
expect() {
    local name=$1 want=$2 want_rc=$3 sub=${4:-} rc got det
    "$P" check $OP --kernel "$C:$name" "${COMMON[@]}" --json "$tmp/$name.json" >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" = "$want_rc" ] || bad "$name: exit $rc, expected $want_rc"
    got=$(field "$tmp/$name.json" "$name" verdict)
    [ "$got" = "$want" ] && ok || bad "$name: verdict '$got', expected '$want'"
    if [ -n "$sub" ]; then
        det=$(field "$tmp/$name.json" "$name" detail)
        case "$det" in *"$sub"*) ok ;; *) bad "$name: detail '$det' does not say '$sub'" ;; esac
        grep -q "stale-cache on workload uniform" "$tmp/$name.out" && ok || bad "$name: text report has no stale-cache line"
    fi
}

expect control faithful 0
expect memo_pointer stale-cache 1 "same buffers holding other contents"
expect memo_shape stale-cache 1 "other buffers of the same shapes"
expect memo_first_bytes stale-cache 1 "same buffers holding other contents"
expect plan_neighbours stale-cache 1 "neighbours N=31,32,33"
expect skip_repeats stale-cache 1 "stale outputs"
expect memo_out_pointer stale-cache 1 "same buffers holding other contents"
expect skip_after_2 stale-cache 1 "stale outputs"
# Three calls per child are all a check makes: this one passes the check, and the bench below
# must still catch it.
expect skip_after_3 faithful 0

# ---- parity bench judges what it times ----
WL=zipf1.4@2048x64x4096
BENCH=(--workload $WL --check-workload $WL --runs 3 --warmup 1 --no-scrub --probe-mib 8 --threads 1 -q)
"$P" bench $OP --kernel "$C:control" --kernel "$C:skip_after_3" "${BENCH[@]}" --seed fresh \
    --json "$tmp/b.json" >"$tmp/b.out" 2>&1
rc=$?
[ "$rc" = 1 ] && ok || bad "bench with skip_after_3: exit $rc, expected 1"
grep -q "why: timed call 3: output dE is not the judged run's" "$tmp/b.out" && ok ||
    bad "bench: the report does not say which timed call differed"
"$PY" - "$tmp/b.json" <<'PY' && ok || bad "bench JSON: skip_after_3 must be unscored, control scored"
import json, sys
ks = {k["kernel"].rsplit(":", 1)[-1]: k for k in json.load(open(sys.argv[1]))["kernels"]}
s, c = ks["skip_after_3"], ks["control"]
assert s["verdict"] == "stale-cache" and not s["scored"] and s["timed_outputs"] == "differ", s
assert "timed call 3" in s["check_detail"] and "timed calls" in s["unscored_reason"], s
assert c["verdict"] == "faithful" and c["scored"] and c["timed_outputs"] == "as judged", c
base = ks["fp32_seq"]
assert base["timed_outputs"] == "as judged" and base["score"] == 0.5, base
PY
BS=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$tmp/b.json")
grep -q "^seed $BS drawn by --seed fresh" "$tmp/b.out" && ok || bad "bench --seed fresh: seed $BS not printed"

# ---- --seed fresh ----
"$P" check rmsnorm_fwd --kernel builtin:fp32 --kernel builtin:bf16_sumsq --quick --no-floor -q \
    --seed fresh --json "$tmp/f1.json" >"$tmp/f1.out" 2>&1
S=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$tmp/f1.json")
case "$S" in ''|*[!0-9]*) bad "--seed fresh: the JSON seed is '$S', not an integer" ;; *) ok ;; esac
grep -q "seed $S drawn by --seed fresh" "$tmp/f1.out" && ok || bad "--seed fresh: the text report does not print the seed"
grep -q -- "--seed $S" "$tmp/f1.out" && ok || bad "--seed fresh: the reproducer does not carry the drawn seed"
"$P" check rmsnorm_fwd --kernel builtin:fp32 --kernel builtin:bf16_sumsq --quick --no-floor -q \
    --seed "$S" --json "$tmp/f2.json" >/dev/null 2>&1
cmp -s "$tmp/f1.json" "$tmp/f2.json" && ok || bad "--seed $S does not reproduce the --seed fresh JSON byte for byte"
"$P" check rmsnorm_fwd --kernel builtin:fp32 --workload unit --no-floor -q --seed fresh \
    --json "$tmp/f3.json" >/dev/null 2>&1
S3=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$tmp/f3.json")
[ "$S3" != "$S" ] && ok || bad "two --seed fresh runs drew the same seed $S"
"$P" gen rmsnorm_fwd --seed fresh --out "$tmp/g.safetensors" 2>"$tmp/g.err" && ok || bad "gen --seed fresh failed"
grep -Eq "seed [0-9]+ \(drawn by --seed fresh\)" "$tmp/g.err" && ok || bad "gen --seed fresh does not print the seed"
"$P" check rmsnorm_fwd --kernel builtin:fp32 --seed stale -q >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--seed stale is not a usage error"

echo "cli_caching: $pass passed, $fail failed"
[ "$fail" = 0 ]

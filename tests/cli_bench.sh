#!/usr/bin/env bash
# parity bench: usage errors, the ceilings alone, a small bench whose faithful kernels are scored
# and whose incident kernel is timed but unscored with a pointer to the check, and the JSON keys.
# Small probe arrays (--probe-mib) and a small workload keep it to seconds; no timing asserted.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
"$PY" -c 'import json' 2>/dev/null || { echo "SKIP: no Python ($PY) for the JSON report check"; exit 77; }
export XDG_CACHE_HOME="$tmp/cache"
expect_rc() { # expected-rc description cmd...
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want"; cat "$tmp/err"; fi
}
expect_usage() { # description PATTERN cmd...: exit 2, stderr matching PATTERN (grep -E) and a hint
  local what=$1 pat=$2; shift 2
  expect_rc 2 "$what" "$@"
  grep -Eq -- "$pat" "$tmp/err" && grep -q "try: " "$tmp/err" && ok || { bad "$what: stderr lacks /$pat/ or a hint"; cat "$tmp/err"; }
}
OP=embedding_rmsnorm_bwd
WL=zipf1.4@4096x64x50257
SMALL=(--workload $WL --check-workload $WL --runs 3 --warmup 1 --no-scrub --probe-mib 8 --threads 2)

expect_usage "no op" "which op\\?" "$P" bench
expect_usage "unknown op" "no op 'no_such_op'" "$P" bench no_such_op --kernel builtin:all
expect_usage "no kernel" "no --kernel given" "$P" bench $OP
expect_usage "unknown builtin" "no built-in kernel 'nope'" "$P" bench $OP --kernel builtin:nope
expect_usage "unknown workload" "has no workload 'nope'" "$P" bench $OP --kernel builtin:fp32_seq --workload nope
expect_usage "bad runs" "--runs wants 1\\.\\.[0-9]+, got '0'" "$P" bench $OP --kernel builtin:fp32_seq --runs 0
expect_usage "unknown option" "unknown option '--frobnicate'" "$P" bench $OP --kernel builtin:fp32_seq --frobnicate
expect_rc 0 "help" "$P" bench --help
grep -q "speed-of-light\|speed of light" "$tmp/out" && ok || bad "help does not explain the speed of light"

# The ceilings alone, measured then cached.
expect_rc 0 "ceilings" "$P" bench --ceilings --probe-mib 8
grep -q "bandwidth: copy" "$tmp/out" && ok || bad "ceilings: no bandwidth line"
grep -q "peak: fp32" "$tmp/out" && ok || bad "ceilings: no peak line"
expect_rc 0 "ceilings cached" "$P" bench --ceilings --probe-mib 8
grep -q "cached:" "$tmp/out" && ok || bad "ceilings: second run not from the cache"
# An unwritable cache folder is not an error.
XDG_CACHE_HOME=/proc/no-such-dir expect_rc 0 "unwritable cache" "$P" bench --ceilings --probe-mib 8 --no-cache
grep -Eq "bandwidth: copy [0-9.]+ GB/s" "$tmp/out" && grep -q "not cached" "$tmp/out" && ok || bad "unwritable cache: no measured ceilings"

# Faithful kernels only: exit 0, scored.
expect_rc 0 "faithful bench" "$P" bench $OP --kernel builtin:fp32_fast "${SMALL[@]}" -q
grep -q "builtin:fp32_seq (base)" "$tmp/out" && ok || bad "baseline row missing"
grep -E "^builtin:fp32_seq \(base\).* 0\.500$" "$tmp/out" >/dev/null && ok || bad "baseline score is not 0.500"
grep -E "^builtin:fp32_fast .*faithful.* [01]\.[0-9]{3}$" "$tmp/out" >/dev/null && ok || bad "fp32_fast not scored"
grep -q "T_SOL" "$tmp/out" && ok || bad "no T_SOL"

# An odd number of timed calls (1 warm-up + 2 runs): each flips the signs of an input in the case's
# shared memory, and the kernels timed after the first must still be judged on the case's own
# inputs (they were judged unfaithful, err/tol ~1e5, when the last flip stayed).
ODD=(--workload $WL --check-workload $WL --runs 2 --warmup 1 --no-scrub --probe-mib 8 --threads 2)
expect_rc 0 "odd timed calls" "$P" bench $OP --kernel builtin:fp32_shuffled --kernel builtin:fp32_fast "${ODD[@]}" -q
for k in fp32_shuffled fp32_fast "fp32_seq \\(base\\)"; do
  # scored, or unscored only because the baseline beat the speed-of-light estimate (its data in a
  # cache larger than the bandwidth probe's 8 MiB arrays: a matter of timing, not of the verdict)
  grep -E "^builtin:$k +faithful .* ([01]\.[0-9]{3}|unscored: the baseline ran at [0-9]+% of the speed-of-light estimate .*)$" \
    "$tmp/out" >/dev/null && ok || { bad "odd timed calls: $k not faithful and scored"; cat "$tmp/out"; }
done

# A kernel that changes its inputs (tests/plugins/cheats.c modify_dy) timed first: the case is built
# again for the next kernel, which is judged on the reference's own inputs (it was judged
# unfaithful, err/tol ~1e6, on the inputs the first one left).
CHEATS="${PARITY_BUILD:?}/tests/plugins/libparity_cheats.so"
expect_rc 1 "modifying kernel first" "$P" bench $OP --kernel "$CHEATS:modify_dy" --kernel builtin:fp32_fast "${ODD[@]}" -q --json "$tmp/m.json"
"$PY" - "$tmp/m.json" <<'PYEOF' && ok || { bad "modify_dy not modified-inputs"; cat "$tmp/out"; }
import json, sys
ks = [k for k in json.load(open(sys.argv[1]))["kernels"] if k["kernel"].endswith(":modify_dy")]
assert len(ks) == 1 and ks[0]["verdict"] == "modified-inputs", ks
PYEOF
for k in fp32_fast "fp32_seq \\(base\\)"; do
  grep -E "^builtin:$k +faithful .* [01]\.[0-9]{3}$" "$tmp/out" >/dev/null && ok || { bad "after modify_dy: $k not faithful and scored"; cat "$tmp/out"; }
done

# With the incident kernel: exit 1, timed, unscored, pointing at the check.
expect_rc 1 "incident bench" "$P" bench $OP --kernel builtin:fp32_seq --kernel builtin:fp32_fast \
  --kernel builtin:bf16_accum "${SMALL[@]}" -q --json "$tmp/b.json"
grep -q "unscored: unfaithful on $WL" "$tmp/out" && ok || bad "bf16_accum not unscored"
grep -q "see: parity check $OP --kernel builtin:bf16_accum --workload $WL" "$tmp/out" && ok || bad "no pointer to the check"
"$PY" - "$tmp/b.json" <<'PYEOF' && ok || bad "JSON report"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("op", "workload", "ceilings", "cost", "t_sol_s", "kernels", "baseline", "threads", "runs"):
    assert k in r, k
assert r["baseline"] == "builtin:fp32_seq"
assert r["cost"]["bytes"] == r["cost"]["bytes_read"] + r["cost"]["bytes_written"]
ks = {k["kernel"]: k for k in r["kernels"]}
assert ks["builtin:fp32_seq"]["score"] == 0.5
assert ks["builtin:fp32_fast"]["scored"] and ks["builtin:fp32_fast"]["verdict"] == "faithful"
b = ks["builtin:bf16_accum"]
assert b["verdict"] == "unfaithful" and not b["scored"] and b["score"] is None
assert b["timed"] and b["t_median_s"] > 0 and "parity check" in b["unscored_reason"]
for k in r["kernels"]:
    for f in ("t_median_s", "t_best_s", "t_worst_s", "gbs", "gflops", "frac_sol"):
        assert f in k
PYEOF

echo "cli_bench: $pass passed, $fail failed"
[ "$fail" = 0 ]

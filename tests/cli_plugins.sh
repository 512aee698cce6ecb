#!/usr/bin/env bash
# Plugin kernels end to end: the example plugin (faithful_fp32 passes, bf16_accum fails), one
# cheating/broken kernel per verdict (tests/plugins/cheats.c), loader errors (no entry symbol,
# abi_version 999, missing file, unknown builtin), and one run over a whole .so whose report
# completes despite crashes and hangs among its kernels.
set -u
: "${PARITY:?set PARITY to the parity binary}"
: "${PARITY_BUILD:?set PARITY_BUILD to the build directory}"
EX="$PARITY_BUILD/examples/libparity_example.so"
PL="$PARITY_BUILD/tests/plugins"
for f in "$EX" "$PL/libparity_cheats.so" "$PL/libparity_noentry.so" "$PL/libparity_abi999.so"; do
    if [ ! -f "$f" ]; then echo "skip: $f not built"; exit 77; fi
done
command -v python3 >/dev/null || { echo "skip: python3 needed to read the JSON report"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
OP=embedding_rmsnorm_bwd
COMMON=(--workload uniform --no-floor -q --timeout 5)

bad() { echo "FAIL: $*" >&2; fail=1; }

# verdict JSON NAME: the overall verdict of kernel NAME (label suffix ":NAME") in the report
verdict() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in d["kernels"]:
    if k["name"].endswith(":" + sys.argv[2]):
        print(k["verdict"])
        break
else:
    print("MISSING")
PY
}

# expect SPEC NAME VERDICT RC: one kernel, one run
expect() {
    local spec=$1 name=$2 want=$3 want_rc=$4 rc got
    "$PARITY" check $OP --kernel "$spec:$name" "${COMMON[@]}" --json "$tmp/$name.json" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    [ "$rc" = "$want_rc" ] || bad "$name: exit $rc, expected $want_rc ($(head -c 300 "$tmp/$name.err"))"
    [ -s "$tmp/$name.json" ] || { bad "$name: no JSON report"; return; }
    got=$(verdict "$tmp/$name.json" "$name")
    [ "$got" = "$want" ] || bad "$name: verdict '$got', expected '$want'"
}

# ---- the example plugin ----
expect "$EX" faithful_fp32 faithful 0
expect "$EX" bf16_accum unfaithful 1

# ---- one verdict per cheat ----
C="$PL/libparity_cheats.so"
expect "$C" control faithful 0
expect "$C" segfault crashed 1
expect "$C" hang timeout 1
expect "$C" oob_write wrote-out-of-bounds 1
expect "$C" modify_dy modified-inputs 1
expect "$C" negate_pair modified-inputs 1
expect "$C" nondet nondeterministic 1
expect "$C" partial_write unfaithful 1
expect "$C" unsupported unsupported 1
expect "$C" exit3 crashed 1
expect "$C" error crashed 1
grep -q "NaN" "$tmp/partial_write.out" || bad "partial_write: report does not mention the NaN outputs"
grep -q "exited the process with status 3" "$tmp/exit3.out" || bad "exit3: report does not give the exit status"

# A kernel that caches its first call's output and returns it on every later call: the child runs
# a decoy call first, so the cached answer is the decoy's and the kernel must not pass.
"$PARITY" check $OP --kernel "$C:stale_cache" "${COMMON[@]}" --json "$tmp/stale.json" >/dev/null 2>&1
got=$(verdict "$tmp/stale.json" stale_cache)
if [ "$got" = faithful ]; then
    bad "stale_cache (returns the previous call's output) is judged faithful"
elif [ -z "$got" ] || [ "$got" = MISSING ]; then
    bad "stale_cache: no verdict"
fi

# ---- loader errors ----
"$PARITY" check $OP --kernel "$PL/libparity_noentry.so" "${COMMON[@]}" >"$tmp/ne.out" 2>&1
rc=$?
[ "$rc" = 3 ] || bad "no entry symbol: exit $rc, expected 3"
grep -q "libparity_noentry.so" "$tmp/ne.out" || bad "no entry symbol: message does not name the file"
grep -q "parity_plugin_entry" "$tmp/ne.out" || bad "no entry symbol: message does not name the symbol"

"$PARITY" check $OP --kernel "$PL/libparity_abi999.so" "${COMMON[@]}" >"$tmp/abi.out" 2>&1
rc=$?
[ "$rc" = 3 ] || bad "abi_version 999: exit $rc, expected 3"
grep -q "abi_version" "$tmp/abi.out" || bad "abi_version 999: message does not say abi_version"
grep -q "999" "$tmp/abi.out" || bad "abi_version 999: message does not give the version"

"$PARITY" check $OP --kernel "$tmp/does-not-exist.so" "${COMMON[@]}" >"$tmp/nx.out" 2>&1
rc=$?
[ "$rc" = 3 ] || bad "nonexistent plugin: exit $rc, expected 3"
grep -q "does-not-exist.so" "$tmp/nx.out" || bad "nonexistent plugin: message does not name the file"

"$PARITY" check $OP --kernel builtin:nope "${COMMON[@]}" >"$tmp/bn.out" 2>&1
rc=$?
[ "$rc" = 2 ] || bad "builtin:nope: exit $rc, expected 2"

"$PARITY" check $OP --kernel "$C:no_such_kernel" "${COMMON[@]}" >"$tmp/nk.out" 2>&1
rc=$?
[ "$rc" = 2 ] || bad "unknown plugin kernel: exit $rc, expected 2 (a usage error, like builtin:nope)"
grep -q "no_such_kernel" "$tmp/nk.out" || bad "unknown plugin kernel: message does not name it"

# ---- every kernel of one .so in ONE run: the report completes ----
"$PARITY" check $OP --kernel "$C" "${COMMON[@]}" --json "$tmp/all.json" >"$tmp/all.out" 2>"$tmp/all.err"
rc=$?
[ "$rc" = 1 ] || bad "whole .so: exit $rc, expected 1"
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["kernels"]))' "$tmp/all.json" 2>/dev/null)
[ "$n" = 13 ] || bad "whole .so: $n kernels in the report, expected 13"
grep -q "^summary: 13 kernel" "$tmp/all.out" || bad "whole .so: no summary line for 13 kernels"
for pair in control:faithful segfault:crashed hang:timeout oob_write:wrote-out-of-bounds \
            modify_dy:modified-inputs negate_pair:modified-inputs unsupported:unsupported exit3:crashed error:crashed \
            partial_write:unfaithful; do
    name=${pair%%:*} want=${pair#*:}
    got=$(verdict "$tmp/all.json" "$name")
    [ "$got" = "$want" ] || bad "whole .so: $name verdict '$got', expected '$want'"
done
# Kernels after modify_dy in the same run: the harness rebuilds the inputs modify_dy scribbled
# on, so later kernels keep their own verdicts.
for pair in nondet:nondeterministic control_after:faithful; do
    name=${pair%%:*} want=${pair#*:}
    got=$(verdict "$tmp/all.json" "$name")
    if [ "$got" != "$want" ]; then
        bad "whole .so: $name is '$got' (alone: '$want'): inputs modified by an earlier kernel leaked into its run"
    fi
done

# Example plugin as a whole: one faithful, one unfaithful, exit 1.
"$PARITY" check $OP --kernel "$EX" "${COMMON[@]}" --json "$tmp/ex.json" >/dev/null 2>&1
rc=$?
[ "$rc" = 1 ] || bad "example .so: exit $rc, expected 1"
[ "$(verdict "$tmp/ex.json" faithful_fp32)" = faithful ] || bad "example .so: faithful_fp32 not faithful"
[ "$(verdict "$tmp/ex.json" bf16_accum)" = unfaithful ] || bad "example .so: bf16_accum not unfaithful"

if [ "$fail" = 0 ]; then echo "cli_plugins: ok"; fi
exit $fail

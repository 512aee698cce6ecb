#!/usr/bin/env bash
# parity check's speed machinery never changes a report (docs/check-speed.md): the text and JSON
# reports are byte-identical with --no-cache, a cold and a warm floor cache, and --jobs 1, 2, 3;
# truncated and corrupt cache files are recomputed, never trusted, and rewritten whole;
# a well-formed entry is read (a forged floor shows in the report) and still changes no verdict;
# diagnosis runs for failing workloads only, unless --diagnose. Crashing, out-of-bounds, input-
# modifying and stale-cache plugin kernels (tests/plugins/cheats.c) keep their verdicts in workers.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
CHEATS="${PARITY_BUILD:?}/tests/plugins/libparity_cheats.so"
[ -f "$CHEATS" ] || { echo "SKIP: $CHEATS not built"; exit 77; }
OP=embedding_rmsnorm_bwd
# Three small workloads (uniform at 512x256 and its two neighbours) and kernels of every kind:
# faithful, unfaithful, crash, out-of-bounds, modified inputs, a cache across calls.
GRID=(--workload uniform --shape 512x256 --timeout 20 -q
      --kernel builtin:fp32_seq --kernel builtin:bf16_accum --kernel builtin:tail_d128
      --kernel "$CHEATS:segfault" --kernel "$CHEATS:oob_write" --kernel "$CHEATS:modify_dy"
      --kernel "$CHEATS:stale_cache")
run() { # NAME extra-args...: report in $tmp/NAME.txt and .json, exit code in $tmp/NAME.rc
  local name=$1; shift
  "$P" check $OP "${GRID[@]}" "$@" --json "$tmp/$name.json" >"$tmp/$name.txt" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}
same() { # NAME [REF]: same report and exit code as REF (default ref: --no-cache --jobs 1)
  local r=${2:-ref}
  if cmp -s "$tmp/$r.txt" "$tmp/$1.txt" && cmp -s "$tmp/$r.json" "$tmp/$1.json" &&
     cmp -s "$tmp/$r.rc" "$tmp/$1.rc"; then ok; else
    bad "$1: report differs from $r"; diff "$tmp/$r.txt" "$tmp/$1.txt" | head -20
    cat "$tmp/$1.err" | tail -5
  fi
}

run ref --no-cache --jobs 1
[ "$(cat "$tmp/ref.rc")" = 1 ] && ok || bad "reference run: exit $(cat "$tmp/ref.rc"), want 1"
grep -q "^builtin:fp32_seq  *faithful" "$tmp/ref.txt" && grep -q "cheats.so:segfault  *crashed" "$tmp/ref.txt" &&
  grep -q "cheats.so:oob_write  *wrote-out-of-bounds" "$tmp/ref.txt" && ok || bad "reference verdicts"

C="$tmp/cache"
run cold --cache "$C"
same cold
n=$(ls "$C" | grep -c '^floor-')
[ "$n" = 3 ] && ok || bad "cold run wrote $n floor files, want 3 (one per workload)"
ls "$C" | grep -q tmp && bad "temporary files left in the cache" || ok
run warm3 --cache "$C" --jobs 3
same warm3
run nocache2 --no-cache --jobs 2
same nocache2
# Baseline units too (their rule strings cross the worker boundary as pointers: re-pointed).
run bref --no-cache --baselines
run bjobs --no-cache --baselines --jobs 2
same bjobs bref
grep -q "^detection matrix" "$tmp/bjobs.txt" && ok || bad "--baselines --jobs 3: no detection matrix"

# Damaged entries: truncated, one flipped byte in the value, garbage. Each is recomputed (same
# report) and rewritten byte for byte as the good file.
f=$(ls "$C"/floor-* | head -1)
cp "$f" "$tmp/good"
damage() { # how: a command that damages $f
  cp "$tmp/good" "$f"; eval "$1"
  run damaged --cache "$C"; same damaged
  cmp -s "$f" "$tmp/good" && ok || bad "cache entry not rewritten after: $1"
}
damage 'head -c 40 "$tmp/good" >"$f"'
damage 'sed -i "s/^q 0x1\./q 0x1.f/" "$f"'

# A well-formed entry is trusted: forge one (right key, right checksum) with floor 0.5; the report
# shows it where that workload's floor is printed and not one verdict changes.
"$PY" - "$f" <<'PYEOF' || bad "could not forge a cache entry"
import sys
p = sys.argv[1]
lines = open(p, "rb").read().split(b"\n")
body = lines[0] + b"\n" + lines[1] + b"\nq 0x1p-1\n"
h = 0xcbf29ce484222325
for b in body:
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open(p, "wb").write(body + b"sum %016x\n" % h)
PYEOF
run forged --cache "$C"
"$PY" - "$tmp/ref.json" "$tmp/forged.json" <<'PYEOF' && ok || bad "forged floor: not read, or a verdict changed"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
floors = {w["noise_floor"] for k in b["kernels"] for w in k["workloads"]}
va = [(k["name"], k["verdict"], [w["verdict"] for w in k["workloads"]]) for k in a["kernels"]]
vb = [(k["name"], k["verdict"], [w["verdict"] for w in k["workloads"]]) for k in b["kernels"]]
sys.exit(0 if 0.5 in floors and va == vb else 1)
PYEOF
cp "$tmp/good" "$f"

# Diagnosis: failing workloads only; --diagnose adds the passing ones.
grep -A8 "^builtin:bf16_accum " "$tmp/ref.txt" | grep -q "diagnosis (" && ok || bad "bf16_accum: no diagnosis"
grep -A8 "^builtin:fp32_seq " "$tmp/ref.txt" | grep -q "diagnosis (" && bad "fp32_seq diagnosed without --diagnose" || ok
run diag --no-cache --diagnose
grep -A8 "^builtin:fp32_seq " "$tmp/diag.txt" | grep -q "diagnosis (.*~24.0 bits" && ok || bad "--diagnose: no fp32 diagnosis for fp32_seq"

# Usage errors.
"$P" check $OP --kernel builtin:fp32_seq --jobs x >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--jobs x: not a usage error"
"$P" check $OP --kernel builtin:fp32_seq --cache "$C" --no-cache >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--cache with --no-cache: not a usage error"
"$P" check --help | grep -q -- "--jobs N" && ok || bad "help does not document --jobs"

echo "cli_check_speed: $pass passed, $fail failed"
[ $fail = 0 ]

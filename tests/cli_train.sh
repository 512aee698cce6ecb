#!/usr/bin/env bash
# parity train: exit codes, usage errors, a faithful kernel within the floor on tiny runs, the
# incident kernel departing (exit 1, the cell named) beside a faithful one that does not, failing
# plugin kernels as verdicts, byte-identical JSON for the same seed, the text corpus's remap and
# hit counts, and exit 3 when the text data is missing. Small models only: a few seconds.
. "$(dirname "$0")/lib_cli.sh"
PY=${PARITY_PYTHON:-python3}
"$PY" -c 'import json' 2>/dev/null || { echo "SKIP: no Python ($PY) for the JSON checks"; exit 77; }
CHEATS=${PARITY_BUILD:?PARITY_BUILD must point at the build tree}/tests/plugins/libparity_cheats.so
[ -f "$CHEATS" ] || { echo "SKIP: $CHEATS not built (the failing plugin kernels are verdicts)"; exit 77; }
expect_rc() { # expected-rc description cmd...
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want"; cat "$tmp/err"; fi
}
# An error (exit 2 or 3) must say what is wrong: stderr matches PATTERN (grep -E), and a usage
# error points at the help.
expect_err() { # expected-rc description PATTERN cmd...
  local want=$1 what=$2 pat=$3; shift 3
  expect_rc "$want" "$what" "$@"
  grep -Eq -- "$pat" "$tmp/err" && ok || { bad "$what: stderr lacks /$pat/"; cat "$tmp/err"; }
  [ "$want" != 2 ] || { grep -q "(see: parity help train)" "$tmp/err" && ok || bad "$what: usage error without the help pointer"; }
}
# a tiny configuration: 8-wide model, 8 sequences of 16 tokens, 8 steps
TINY=(--dim 8 --heads 2 --batch 8 --seq-len 16 --steps 8 --eval-every 2 --val-seqs 4 --synth-tokens 5000 -q)

expect_rc 0 "help" "$P" train --help
grep -q -- "--optimizer" "$tmp/out" && ok || bad "help lacks --optimizer"
expect_err 2 "no kernel" "no --kernel given" "$P" train
expect_err 2 "unknown builtin" "no built-in kernel 'nope'" "$P" train --kernel builtin:nope
expect_err 2 "unknown data" "unknown data 'words'" "$P" train --kernel builtin:fp32_seq --data words
expect_err 2 "unknown optimizer" "unknown optimizer 'lion'" "$P" train --kernel builtin:fp32_seq --optimizer lion
expect_err 2 "zero steps" "--steps wants an integer in 1\\.\\.[0-9]+, got '0'" "$P" train --kernel builtin:fp32_seq --steps 0
expect_err 2 "dim not divisible by heads" "--dim 10 is not divisible by --heads 4" "$P" train --kernel builtin:fp32_seq --dim 10 --heads 4
expect_err 2 "unknown preset" "unknown preset 'huge'" "$P" train --kernel builtin:fp32_seq --preset huge
expect_err 2 "floor orders out of range" "--floor-orders wants an integer in 1\\.\\.[0-9]+, got '0'" "$P" train --kernel builtin:fp32_seq --floor-orders 0
expect_err 2 "unknown option" "unknown option '--frobnicate'" "$P" train --kernel builtin:fp32_seq --frobnicate 1
expect_err 3 "missing plugin" "/nonexistent/libx\\.so: cannot load" "$P" train --kernel /nonexistent/libx.so

# a faithful catalog kernel stays within the floor; exit 0
expect_rc 0 "fp32_seq synthetic" "$P" train --kernel builtin:fp32_seq --data zipf,uniform --optimizer sgd,sgdm,adamw "${TINY[@]}" --json "$tmp/a.json" --svg "$tmp/a.svg"
[ "$(grep -c within-floor "$tmp/out")" = 6 ] && ok || { bad "fp32_seq: 6 cells within the floor"; cat "$tmp/out"; }
# the JSON holds the six cells with their curves, not only their keys
"$PY" - "$tmp/a.json" <<'EOF' && ok || bad "JSON report of the 6 cells"
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "parity.train/2", r["schema"]
cells = r["cells"]
assert sorted((c["data"], c["optimizer"]) for c in cells) == sorted(
    (d, o) for d in ("zipf", "uniform") for o in ("sgd", "sgdm", "adamw")), [(c["data"], c["optimizer"]) for c in cells]
fin = lambda xs: len(xs) > 0 and all(math.isfinite(x) for x in xs)
for c in cells:
    assert c["kernel"] == "builtin:fp32_seq" and c["verdict"] == "within-floor", (c["kernel"], c["verdict"])
    assert c["first_departure_step"] == -1 and c["steps_done"] == 8 and c["margin"] > 1
    assert c["max_hits_per_row_per_step"] >= 1 and c["liger"]["steps"] == 8
    tl, vl = c["train_loss"], c["val_loss"]
    assert all(len(tl[k]) == 8 and fin(tl[k]) for k in ("reference", "reference_seed2", "candidate")), tl
    n = len(c["eval_steps"])  # 8 steps, evaluated every 2: 0, 2, 4, 6, 8
    assert n == 5 and all(len(vl[k]) == n and fin(vl[k]) for k in ("reference", "reference_seed2", "candidate"))
    assert len(vl["floor"]) == len(c["floor_gap"]) >= 1 and all(len(f) == n and fin(f) for f in vl["floor"])
    assert c["gradient"] and all(0 <= g["rel_err"] < 1 and "absorbed_bf16" in g for g in c["gradient"])
    assert c["embedding_drift"] and all(math.isfinite(e["candidate_drift"]) for e in c["embedding_drift"])
EOF
grep -q "</svg>" "$tmp/a.svg" && ok || bad "SVG incomplete"
# same seed: byte-identical JSON, whatever the number of jobs
expect_rc 0 "fp32_seq again" "$P" train --kernel builtin:fp32_seq --data zipf,uniform --optimizer all "${TINY[@]}" --jobs 1 --json "$tmp/b.json"
[ "$(grep -c within-floor "$tmp/out")" = 6 ] && ok || bad "fp32_seq again: 6 cells within the floor"
cmp -s "$tmp/a.json" "$tmp/b.json" && ok || bad "JSON differs between identical runs"
expect_rc 0 "other seed" "$P" train --kernel builtin:fp32_seq --data zipf --optimizer sgd "${TINY[@]}" --seed 7 --json "$tmp/c.json"
grep -q "seed 7" "$tmp/out" && ok || bad "seed 7 not in the report"
grep -q '"seed":	7' "$tmp/c.json" && ok || bad "seed not in JSON"

# the incident at a small size (12,288 tokens per step, ~1,300 hits on the top Zipf row): bf16_accum
# departs and is named, the faithful fp32_shuffled in the same run stays within the floor
SMALL=(--dim 8 --heads 2 --batch 1536 --seq-len 8 --steps 3 --eval-every 1 --val-seqs 16 --synth-tokens 50000 --floor-orders 3 -q)
expect_rc 1 "incident departs" "$P" train --kernel builtin:bf16_accum --kernel builtin:fp32_shuffled --data zipf --optimizer sgd "${SMALL[@]}"
grep -q "^departs: zipf/sgd builtin:bf16_accum" "$tmp/out" && ok || { bad "departing cell not named"; cat "$tmp/out"; }
grep -q "^zipf/sgd  *fp32_shuffled .*within-floor" "$tmp/out" && ok || { bad "fp32_shuffled not within the floor"; cat "$tmp/out"; }
grep -q "departs: .*fp32_shuffled" "$tmp/out" && bad "fp32_shuffled named as departing" || ok

# failing plugin kernels are verdicts (exit 1), not errors ($CHEATS checked at the top)
expect_rc 1 "error kernel" "$P" train --kernel "$CHEATS:error" --data zipf --optimizer sgd "${TINY[@]}"
grep -q "crashed" "$tmp/out" && ok || bad "error kernel: no crashed verdict"
grep -q "reproduce: parity train" "$tmp/out" && ok || bad "no reproducer line"
expect_rc 1 "partial write" "$P" train --kernel "$CHEATS:partial_write" --data zipf --optimizer sgd "${TINY[@]}"
grep -q "non-finite" "$tmp/out" && ok || bad "partial write: not reported as non-finite"
expect_rc 1 "out of bounds" "$P" train --kernel "$CHEATS:oob_write" --data zipf --optimizer sgd "${TINY[@]}"
grep -q "out of bounds" "$tmp/out" && ok || bad "oob write: not reported"
expect_rc 0 "control plugin" "$P" train --kernel "$CHEATS:control" --data uniform --optimizer adamw "${TINY[@]}"
grep -q "^uniform/adamw .*within-floor" "$tmp/out" && ok || { bad "control plugin: not within the floor"; cat "$tmp/out"; }

# real text (shipped in data/): dense remap of the GPT-2 ids, hits per row stated
expect_rc 0 "text" "$P" train --kernel builtin:fp32_sorted --data text --optimizer sgd "${TINY[@]}" --json "$tmp/t.json"
grep -q "11706 distinct ids remapped" "$tmp/out" && ok || { bad "text remap line"; cat "$tmp/out"; }
grep -q '"gpt2_ids_used":	11706' "$tmp/t.json" && ok || bad "text: gpt2_ids_used"
# 128 tokens per step: the most frequent token (11.8% of the text) gets well above 1 hit
"$PY" - "$tmp/t.json" <<'EOF' && ok || bad "text: max hits per row"
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
assert c["max_hits_per_row_per_step"] >= 8, c["max_hits_per_row_per_step"]
EOF

# Progress (a long default run takes many minutes): the plan first, the time left after each run.
"$P" train --kernel builtin:fp32_seq --data zipf --optimizer sgd --dim 8 --heads 2 --batch 8 --seq-len 16 \
    --steps 4 --eval-every 2 --val-seqs 4 --synth-tokens 5000 >/dev/null 2>"$tmp/progress.txt"
head -1 "$tmp/progress.txt" | grep -q "^parity train: 5 runs of 4 steps (8 sequences of 16 tokens a step), 2 at a time" &&
    ok || { bad "progress: no plan line first"; head -3 "$tmp/progress.txt"; }
[ "$(grep -c "s left)$" "$tmp/progress.txt")" = 4 ] && ok || { bad "progress: not 4 time-left estimates for 5 runs"; cat "$tmp/progress.txt"; }

echo "cli_train: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# parity train: exit codes, usage errors, a faithful kernel within the floor on tiny runs, the
# incident kernel departing (exit 1, the cell named) beside a faithful one that does not, failing
# plugin kernels as verdicts, byte-identical JSON for the same seed, the text corpus's remap and
# hit counts, and exit 3 when the text data is missing. Small models only: a few seconds.
. "$(dirname "$0")/lib_cli.sh"
expect_rc() { # expected-rc description cmd...
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want"; cat "$tmp/err"; fi
}
# a tiny configuration: 8-wide model, 8 sequences of 16 tokens, 8 steps
TINY=(--dim 8 --heads 2 --batch 8 --seq-len 16 --steps 8 --eval-every 2 --val-seqs 4 --synth-tokens 5000 -q)

expect_rc 0 "help" "$P" train --help
grep -q -- "--optimizer" "$tmp/out" && ok || bad "help lacks --optimizer"
expect_rc 2 "no kernel" "$P" train
expect_rc 2 "unknown builtin" "$P" train --kernel builtin:nope
expect_rc 2 "unknown data" "$P" train --kernel builtin:fp32_seq --data words
expect_rc 2 "unknown optimizer" "$P" train --kernel builtin:fp32_seq --optimizer lion
expect_rc 2 "zero steps" "$P" train --kernel builtin:fp32_seq --steps 0
expect_rc 2 "dim not divisible by heads" "$P" train --kernel builtin:fp32_seq --dim 10 --heads 4
expect_rc 2 "unknown preset" "$P" train --kernel builtin:fp32_seq --preset huge
expect_rc 2 "floor orders out of range" "$P" train --kernel builtin:fp32_seq --floor-orders 0
expect_rc 2 "unknown option" "$P" train --kernel builtin:fp32_seq --frobnicate 1
expect_rc 3 "missing plugin" "$P" train --kernel /nonexistent/libx.so

# a faithful catalog kernel stays within the floor; exit 0
expect_rc 0 "fp32_seq synthetic" "$P" train --kernel builtin:fp32_seq --data zipf,uniform --optimizer sgd,sgdm,adamw "${TINY[@]}" --json "$tmp/a.json" --svg "$tmp/a.svg"
[ "$(grep -c within-floor "$tmp/out")" = 6 ] && ok || { bad "fp32_seq: 6 cells within the floor"; cat "$tmp/out"; }
grep -q '"schema":	"parity.train/2"' "$tmp/a.json" && ok || bad "JSON schema key"
for k in '"val_loss"' '"train_loss"' '"reference_seed2"' '"first_departure_step"' '"max_hits_per_row_per_step"' '"embedding_drift"' '"floor"' '"gradient"' '"absorbed_bf16"' '"liger"' '"margin"'; do
  grep -q "$k" "$tmp/a.json" && ok || bad "JSON lacks $k"
done
grep -q "</svg>" "$tmp/a.svg" && ok || bad "SVG incomplete"
# same seed: byte-identical JSON, whatever the number of jobs
expect_rc 0 "fp32_seq again" "$P" train --kernel builtin:fp32_seq --data zipf,uniform --optimizer all "${TINY[@]}" --jobs 1 --json "$tmp/b.json"
cmp -s "$tmp/a.json" "$tmp/b.json" && ok || bad "JSON differs between identical runs"
expect_rc 0 "other seed" "$P" train --kernel builtin:fp32_seq --data zipf --optimizer sgd "${TINY[@]}" --seed 7 --json "$tmp/c.json"
grep -q '"seed":	7' "$tmp/c.json" && ok || bad "seed not in JSON"

# the incident at a small size (12,288 tokens per step, ~1,300 hits on the top Zipf row): bf16_accum
# departs and is named, the faithful fp32_shuffled in the same run stays within the floor
SMALL=(--dim 8 --heads 2 --batch 1536 --seq-len 8 --steps 3 --eval-every 1 --val-seqs 16 --synth-tokens 50000 --floor-orders 3 -q)
expect_rc 1 "incident departs" "$P" train --kernel builtin:bf16_accum --kernel builtin:fp32_shuffled --data zipf --optimizer sgd "${SMALL[@]}"
grep -q "^departs: zipf/sgd builtin:bf16_accum" "$tmp/out" && ok || { bad "departing cell not named"; cat "$tmp/out"; }
grep -q "^zipf/sgd  *fp32_shuffled .*within-floor" "$tmp/out" && ok || { bad "fp32_shuffled not within the floor"; cat "$tmp/out"; }
grep -q "departs: .*fp32_shuffled" "$tmp/out" && bad "fp32_shuffled named as departing" || ok

# failing plugin kernels are verdicts (exit 1), not errors
CHEATS=${PARITY_BUILD:-}/tests/plugins/libparity_cheats.so
if [ -f "$CHEATS" ]; then
  expect_rc 1 "error kernel" "$P" train --kernel "$CHEATS:error" --data zipf --optimizer sgd "${TINY[@]}"
  grep -q "crashed" "$tmp/out" && ok || bad "error kernel: no crashed verdict"
  grep -q "reproduce: parity train" "$tmp/out" && ok || bad "no reproducer line"
  expect_rc 1 "partial write" "$P" train --kernel "$CHEATS:partial_write" --data zipf --optimizer sgd "${TINY[@]}"
  grep -q "non-finite" "$tmp/out" && ok || bad "partial write: not reported as non-finite"
  expect_rc 1 "out of bounds" "$P" train --kernel "$CHEATS:oob_write" --data zipf --optimizer sgd "${TINY[@]}"
  grep -q "out of bounds" "$tmp/out" && ok || bad "oob write: not reported"
  expect_rc 0 "control plugin" "$P" train --kernel "$CHEATS:control" --data uniform --optimizer adamw "${TINY[@]}"
fi

# real text (shipped in data/): dense remap of the GPT-2 ids, hits per row stated
expect_rc 0 "text" "$P" train --kernel builtin:fp32_sorted --data text --optimizer sgd "${TINY[@]}" --json "$tmp/t.json"
grep -q "11706 distinct ids remapped" "$tmp/out" && ok || { bad "text remap line"; cat "$tmp/out"; }
grep -q '"gpt2_ids_used":	11706' "$tmp/t.json" && ok || bad "text: gpt2_ids_used"
# 128 tokens per step: the most frequent token (11.8% of the text) gets well above 1 hit
python3 - "$tmp/t.json" <<'EOF' && ok || bad "text: max hits per row"
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
assert c["max_hits_per_row_per_step"] >= 8, c["max_hits_per_row_per_step"]
EOF

echo "cli_train: $pass passed, $fail failed"
[ "$fail" = 0 ]

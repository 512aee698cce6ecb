# `parity model`: greedy output byte-identical to llama2.c's (stories260K, -t 0 -n 200), exit
# codes of usage and input errors, the dump schema (JSONL) and the parity report's sections.
# Uses $PARITY and $PARITY_SRC (the shipped data in $PARITY_SRC/data).
set -u
P=${PARITY:?PARITY must point at the parity binary}
D=${PARITY_SRC:?PARITY_SRC must point at the source tree}/data
[ -f "$D/stories260K.bin" ] || { echo "FAIL: $D/stories260K.bin missing (the data ships in data/)"; exit 1; }
PY=${PARITY_PYTHON:-python3}
"$PY" -c 'import json' 2>/dev/null || { echo "SKIP: no Python ($PY) for the dump schema check"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# 1. The issue's test: run.c prints the text plus one newline; the expected file lacks it.
for path in ref fp32; do
    "$P" model run -n 200 --path $path >"$T/out.txt" 2>"$T/err.txt" || fail "model run --path $path: exit $?"
    { cat "$D/stories260K_expected_t0_n200.txt"; printf '\n'; } >"$T/want.txt"
    cmp -s "$T/want.txt" "$T/out.txt" || { fail "model run -n 200 --path $path differs from llama2.c:"; diff "$T/want.txt" "$T/out.txt" | head; }
done
# Explicit files and llama2.c's -z spelling give the same.
"$P" model run "$D/stories260K.bin" -z "$D/tok512.bin" -t 0 -n 200 >"$T/out2.txt" 2>/dev/null || fail "model run MODEL -z TOK: exit $?"
cmp -s "$T/want.txt" "$T/out2.txt" || fail "model run MODEL -z TOK differs"
# A prompt is forced, then continued.
out=$("$P" model run -n 30 --prompt "Once upon a time, there was a dog" 2>/dev/null) || fail "model run --prompt: exit $?"
case "$out" in "Once upon a time, there was a dog"*) ;; *) fail "prompt not echoed: $out" ;; esac

# 2. Exit codes, and the message (-m PATTERN, grep -E on stderr) that says what is wrong.
expect_rc() { # want [-m PATTERN] parity-args...
    local want=$1 pat=; shift
    if [ "$1" = -m ]; then pat=$2; shift 2; fi
    err=$("$P" "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne "$want" ]; then fail "parity $*: want exit $want, got $rc ($err)"
    elif [ "$want" -eq 2 ] && ! grep -q "try:" <<<"$err"; then fail "parity $*: usage error without 'try:': $err"
    elif [ -n "$pat" ] && ! grep -Eq -- "$pat" <<<"$err"; then fail "parity $*: message lacks /$pat/: $err"; fi
}
out=$("$P" model --help) || fail "model --help: exit $?"
grep -q "model run" <<<"$out" && grep -q "model parity" <<<"$out" || fail "model --help lacks the subcommands: $out"
# Every option the parser takes is in the help, with what it does (--temperature and --steps
# were accepted but listed nowhere); the long and short spellings give the same run.
for opt in "-t TEMP, --temperature TEMP" "-n STEPS, --steps STEPS" "--prompt P, -i P" "--seed S" \
           "--out FILE, -o FILE" "--tokenizer TOK, -z TOK" "--top K" "--max-k3 X" "--markdown" \
           "--floor" "--manifest PREFIX" "--image N" "--moe, --moe-file FILE" \
           "--experts E, --topk K, --shared S" "--prompts FILE" "--path SPEC"; do
    grep -qF -- "$opt" <<<"$out" || fail "model --help does not list '$opt'"
done
grep -Eq -- "--temperature TEMP +run: sampling temperature" <<<"$out" || fail "model --help: --temperature undescribed"
grep -Eq -- "--steps STEPS +run: positions to generate" <<<"$out" || fail "model --help: --steps undescribed"
"$P" model run -t 0.8 --seed 7 -n 60 >"$T/s1.txt" 2>/dev/null || fail "model run -t 0.8: exit $?"
"$P" model run --temperature 0.8 --seed 7 --steps 60 >"$T/s2.txt" 2>/dev/null || fail "model run --temperature: exit $?"
cmp -s "$T/s1.txt" "$T/s2.txt" || fail "--temperature/--steps differ from -t/-n"
cmp -s "$T/s1.txt" <(head -c "$(wc -c <"$T/s1.txt")" "$T/want.txt") && fail "-t 0.8 gave the greedy text"
expect_rc 2 -m "--temperature wants a finite temperature >= 0, got '-1'" model run --temperature -1
expect_rc 2 -m "--steps wants a step count in 1..1048576, got 'x'" model run --steps x
expect_rc 2 -m "missing subcommand" model
expect_rc 2 -m "unknown subcommand 'fly'" model fly
expect_rc 2 -m "path spec 'bf17': unknown token 'bf17'" model run --path bf17
expect_rc 2 -m "tp3: expected 1\\.\\.8 ranks dividing n_heads" model run --path tp3
expect_rc 2 -m "unknown option '--frobnicate'" model run --frobnicate
expect_rc 2 -m "-n wants a step count in 1..1048576, got '0'" model run -n 0
expect_rc 2 -m "finite temperature" model run -t inf
expect_rc 2 -m "--max-k3 wants a finite number" model parity --max-k3 inf
expect_rc 2 -m "need two --path options" model parity --path ref
expect_rc 2 -m "missing --out" model dump --path bf16
expect_rc 3 -m "missing\\.bin: cannot open" model run "$T/missing.bin"
head -c 1000 "$D/stories260K.bin" >"$T/trunc.bin"
expect_rc 3 -m "trunc\\.bin: file size 1000 bytes" model run "$T/trunc.bin"
expect_rc 3 -m "missing\\.tok: cannot open" model run --tokenizer "$T/missing.tok"
expect_rc 3 -m "missing\\.txt: cannot open" model dump --prompts "$T/missing.txt" --out "$T/x.jsonl"

# 3. dump: one JSON object per prompt, parallel arrays of equal length, logprobs <= 0.
printf 'Once upon a time\n\nLily saw a cat.\n' >"$T/prompts.txt"
"$P" model dump --path bf16+kvcache --prompts "$T/prompts.txt" --out "$T/d.jsonl" --top 3 || fail "dump: exit $?"
[ "$(wc -l <"$T/d.jsonl")" -eq 2 ] || fail "dump: want 2 lines (empty line skipped), got $(wc -l <"$T/d.jsonl")"
"$PY" - "$T/d.jsonl" <<'EOF' || fail "dump schema check"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["id"] for r in rows] == [0, 1], rows
for r in rows:
    assert r["path"] == "bf16+kvcache" and r["context_ids"] == [1], r
    n = len(r["token_ids"])
    # parity's JSONL schema (docs/logprobs.md): "top_ids" and "top_logprobs", lists per token
    assert n > 0 and len(r["logprobs"]) == n and len(r["top_ids"]) == n and len(r["top_logprobs"]) == n
    for lp, ids, top, tid in zip(r["logprobs"], r["top_ids"], r["top_logprobs"], r["token_ids"]):
        assert lp <= 0 and len(top) == 3 and len(ids) == 3 and all(isinstance(i, int) for i in ids)
        assert top[0] >= top[1] >= top[2]
        assert lp <= top[0]
        if tid == ids[0]:
            assert lp == top[0]
assert rows[0]["text"] == "Once upon a time"
EOF
# `parity logprobs` reads what `dump --top K` writes (it refused it once: "fields 'top_ids' and
# 'top_logprobs' must be given together", exit 3), top-k metrics included.
out=$("$P" logprobs "$T/d.jsonl" "$T/d.jsonl" 2>&1); rc=$?
[ $rc -eq 0 ] || fail "logprobs on a dump --top 3: exit $rc: $out"
grep -q "top-k: top-1 agreement 1.0000, overlap 1.0000" <<<"$out" || fail "logprobs on a dump --top 3: no top-k line: $out"
"$P" model dump --path bf16acc --prompts "$T/prompts.txt" --out "$T/dacc.jsonl" --top 3 || fail "dump bf16acc: exit $?"
out=$("$P" logprobs "$T/d.jsonl" "$T/dacc.jsonl" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "logprobs bf16+kvcache vs bf16acc with top-k: exit $rc, want 1 (drift): $out"
grep -Eq "top-k: top-1 agreement [01]\.[0-9]{4}, overlap 0\.[0-9]{4}" <<<"$out" || fail "bf16acc top-k: no overlap below 1: $out"
# dump --seed S is a server run: it moves only epR:overlap's arrival order (a repeat with
# nonzero noise, for parity logprobs --floor-b), never a deterministic path.
"$P" model dump --path bf16acc --prompts "$T/prompts.txt" --out "$T/dacc7.jsonl" --top 3 --seed 7 || fail "dump --seed: exit $?"
cmp -s "$T/dacc.jsonl" "$T/dacc7.jsonl" || fail "dump --seed changed a deterministic path"
"$P" model dump --moe --path bf16+ep4:overlap --prompts "$T/prompts.txt" --out "$T/ov0.jsonl" || fail "dump ep4:overlap: exit $?"
"$P" model dump --moe --path bf16+ep4:overlap --prompts "$T/prompts.txt" --out "$T/ov1.jsonl" --seed 1 || fail "dump ep4:overlap --seed 1: exit $?"
cmp -s "$T/ov0.jsonl" "$T/ov1.jsonl" && fail "dump --seed 1 of ep4:overlap: the same bits as seed 0"
# The same path gives byte-identical dumps.
"$P" model dump --path bf16+kvcache --prompts "$T/prompts.txt" --out "$T/d2.jsonl" --top 3 || fail "dump again: exit $?"
cmp -s "$T/d.jsonl" "$T/d2.jsonl" || fail "dump not deterministic"

# 4. parity: report sections; identical paths agree exactly; --max-k3 turns drift into exit 1.
out=$("$P" model parity --path ref --path bf16+fused -n 40 2>&1) || fail "parity: exit $?"
for want in "k3 mean" "|dlogprob| p99" "per-layer drift" "layer 4" "final norm" "first greedy divergence"; do
    grep -qF "$want" <<<"$out" || fail "parity report lacks '$want'"
done
# bf16 against the fp64 reference drifts: nonzero figures, not only the row names
grep -Eq "^  k3 mean +[1-9]\.[0-9]{3}e-[0-9]{2}" <<<"$out" || fail "ref vs bf16+fused: k3 mean not a positive number"
grep -Eq "^  layer 4 +[1-9]\.[0-9]{3}e-[0-9]{2} +[1-9]\.[0-9]{3}e-[0-9]{2}$" <<<"$out" || fail "ref vs bf16+fused: layer 4 drift row"
out=$("$P" model parity --path fp32 --path fp32 -n 40 --prompts "$T/prompts.txt" 2>&1) || fail "identical paths: exit $?"
grep -Eq "k3 mean +0\.000e\+00" <<<"$out" || fail "identical paths: nonzero k3: $out"
grep -q "divergence (from BOS, 40 steps): none" <<<"$out" || fail "identical paths diverged: $out"
row=$("$P" model parity --path ref --path bf16acc -n 40 --markdown) || fail "markdown: exit $?"
grep -Eq '^\| bf16acc \| ref \| [0-9.e+-]+ \|' <<<"$row" || fail "markdown row: $row"
expect_rc 1 -m "mean k3 [0-9.e+-]+ above --max-k3" model parity --path ref --path bf16acc -n 10 --max-k3 0

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "cli_model: all passed"

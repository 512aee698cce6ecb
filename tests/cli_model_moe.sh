# `parity model` on the MoE built from stories260K, with the synthetic image modality: coherent
# greedy text, the parity report's MoE and modality sections, dumps with a modality per token
# read back by `parity logprobs` (modality slices, --rl), the JSON report unchanged by --rl,
# manifests ranked by `parity manifest diff`, and the usage/input errors of the new options.
# Uses $PARITY and $PARITY_SRC (the shipped data in $PARITY_SRC/data).
set -u
P=${PARITY:?PARITY must point at the parity binary}
D=${PARITY_SRC:?PARITY_SRC must point at the source tree}/data
[ -f "$D/stories260K_moe.bin" ] || { echo "FAIL: $D/stories260K_moe.bin missing"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_rc() { # want [-m PATTERN] parity-args...: the exit code, and the message (grep -E on stderr)
    local want=$1 pat=; shift
    if [ "$1" = -m ]; then pat=$2; shift 2; fi
    err=$("$P" "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne "$want" ]; then fail "parity $*: want exit $want, got $rc ($err)"
    elif [ "$want" -eq 2 ] && ! grep -q "try:" <<<"$err"; then fail "parity $*: usage error without 'try:': $err"
    elif [ -n "$pat" ] && ! grep -Eq -- "$pat" <<<"$err"; then fail "parity $*: message lacks /$pat/: $err"; fi
}
# a logprobs comparison is a verdict: 0 (within) or 1 (drift); anything else is an error
lp_rc() { [ "$1" -le 1 ] || fail "$2: exit $1"; }

# 1. The MoE's greedy text (fp64 reference), measured: coherent, and the same with bf16+fusedmoe
#    for its first sentence.
out=$("$P" model run --moe -n 40 2>/dev/null) || fail "model run --moe: exit $?"
case "$out" in "Once upon a time, there was a little girl named Lily."*) ;; *) fail "MoE greedy text: $out" ;; esac
out=$("$P" model run --moe -n 20 --path bf16+fusedmoe+ep4:overlap+tp4:tree 2>/dev/null) || fail "model run --moe serving path: exit $?"
case "$out" in "Once upon a time"*) ;; *) fail "MoE serving path text: $out" ;; esac

# 2. parity: per-modality columns, router flips, routing balance, floor, manifests.
printf 'Once upon a time, there was a cat.\nLily saw a big dog in the park.\n' >"$T/p.txt"
out=$("$P" model parity --moe --image 8 --floor --prompts "$T/p.txt" --path bf16 --path bf16+fusedmoe+ep4:overlap \
      -n 30 --manifest "$T/m" 2>&1) || fail "parity --moe: exit $?"
for want in "MoE: 8 experts, top-4, shared expert" "8-patch image after BOS" "router flips" "routing of A" \
            "entropy/ln E" "max/mean" "floor: A against a repeated run" "manifests:"; do
    grep -qF "$want" <<<"$out" || fail "MoE parity report lacks '$want'"
done
grep -Eq "^  k3 mean +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+$" <<<"$out" || fail "k3 row without all/text/image columns"
# every expert of every layer is used: the 'unused' column is 0 on all 10 routing rows
n0=$(grep -Ec "^  [0-4] .* 0$" <<<"$out")
[ "$n0" -eq 10 ] || fail "routing rows with every expert used: $n0 of 10"
# identical paths: zero drift, zero flips
out=$("$P" model parity --moe --image 4 --prompts "$T/p.txt" --path bf16+ep4 --path bf16+ep4 -n 10 2>&1) || fail "identical MoE paths: exit $?"
grep -Eq "^  k3 mean +0\.000e\+00 +0\.000e\+00 +0\.000e\+00$" <<<"$out" || fail "identical MoE paths: nonzero k3"
grep -Eq "^  total +0\.0000 +0\.0000 +0\.0000$" <<<"$out" || fail "identical MoE paths: router flips"
# overlap: a repeated run is another arrival order, so its floor is not zero
out=$("$P" model parity --moe --prompts "$T/p.txt" --floor --path bf16+ep4:overlap --path bf16 -n 10 2>&1) || fail "overlap floor: exit $?"
grep -Eq "^  all +k3 [1-9]" <<<"$out" || fail "overlap floor should be nonzero: $(grep -F 'all ' <<<"$out")"
row=$("$P" model parity --moe --image 4 --prompts "$T/p.txt" --path ref --path bf16+fusedmoe -n 10 --markdown) || fail "markdown: exit $?"
[ "$(grep -c '^| bf16+fusedmoe | ref | ' <<<"$row")" -eq 2 ] || fail "markdown: want a text and an image row: $row"
"$P" manifest diff "$T/m.a.json" "$T/m.b.json" >"$T/diff.txt" 2>&1
rc=$?; [ $rc -le 1 ] || fail "manifest diff: exit $rc"
grep -q "parallel.ep" "$T/diff.txt" && grep -q "backends.moe" "$T/diff.txt" || fail "manifest diff: $(cat "$T/diff.txt")"

# 3. dump with an image: a modality per token; logprobs slices by it and reports RL effects.
"$P" model dump --moe --image 8 --prompts "$T/p.txt" --path bf16+tp8:ring+ep8 --out "$T/train.jsonl" || fail "dump a"
"$P" model dump --moe --image 8 --prompts "$T/p.txt" --path bf16+fusedmoe+tp4:ring+ep4:overlap --out "$T/serve.jsonl" || fail "dump b"
grep -q '"model": "stories260K-moe"' "$T/train.jsonl" || fail "dump model name"
grep -q '"modality": \["image", "image"' "$T/train.jsonl" || fail "dump modality list"
"$P" logprobs "$T/train.jsonl" "$T/serve.jsonl" --moe --json "$T/plain.json" >"$T/lp.txt"; lp_rc $? "logprobs --moe"
grep -q "modality=image" "$T/lp.txt" && grep -q "modality=text" "$T/lp.txt" || fail "logprobs modality slices"
"$P" logprobs "$T/train.jsonl" "$T/serve.jsonl" --moe --slice-by modality >"$T/sl.txt"; lp_rc $? "logprobs --slice-by modality"
grep -q "modality=image" "$T/sl.txt" || fail "logprobs --slice-by modality: no image slice"
"$P" logprobs "$T/train.jsonl" "$T/serve.jsonl" --moe --rl --tis-cap 1.5 --json "$T/rl_main.json" --rl-json "$T/rl.json" >"$T/rl.txt"; lp_rc $? "logprobs --rl"
cmp -s "$T/plain.json" "$T/rl_main.json" || fail "--rl changed the main JSON report"
grep -q "RL effects of the mismatch" "$T/rl.txt" || fail "--rl section missing"
grep -q "min(r, 1.5)" "$T/rl.txt" || fail "--tis-cap not applied"
grep -q '"schema": "parity.logprobs.rl/1"' "$T/rl.json" && grep -q '"name": "modality=image"' "$T/rl.json" || fail "rl json: $(head -c 300 "$T/rl.json")"
# the same dump twice: zero k3, nothing clipped, every weight 1
"$P" logprobs "$T/train.jsonl" "$T/train.jsonl" --rl --rl-json "$T/rl0.json" >/dev/null || fail "logprobs of a dump with itself: exit $?"
grep -q '"k3_rollout": 0, "k3_trainer": 0, "k3_trainer_is": 0, "clip_frac": 0' "$T/rl0.json" || fail "rl of identical dumps: $(head -c 400 "$T/rl0.json")"
grep -q '"tis_mean": 1, "tis_max": 1, "tis_frac_capped": 0, "tis_ess": 1, "iw_mean": 1' "$T/rl0.json" || fail "rl weights of identical dumps"
expect_rc 2 -m "--clip-eps needs a number in \\(0, 1\\)" logprobs "$T/train.jsonl" "$T/serve.jsonl" --clip-eps 1.5
expect_rc 2 -m "--tis-cap needs a finite number >= 1" logprobs "$T/train.jsonl" "$T/serve.jsonl" --tis-cap 0.5

# 4. errors of the new options
expect_rc 2 -m "need an MoE model \\(--moe\\)" model run --path bf16+fusedmoe -n 5
expect_rc 2 -m "'ep3': expected epR with R 1, 2, 4 or 8" model run --moe --path bf16+ep3 -n 5
expect_rc 2 -m "moe:shared=none: the upcycled model has a shared expert" model run --moe --path bf16+moe:shared=none -n 5
expect_rc 2 -m "--image wants 0..64 patches, got '65'" model dump --image 65 --out "$T/x.jsonl"
expect_rc 2 -m "missing --out" model upcycle
expect_rc 2 -m "\\(F - shared\\) divisible by E" model upcycle --out "$T/u.bin" --shared 107
head -c 100 "$D/stories260K_moe.bin" >"$T/trunc_moe.bin"
expect_rc 3 -m "trunc_moe\\.bin: truncated" model run --moe-file "$T/trunc_moe.bin" -n 5
expect_rc 3 -m "missing\\.bin: cannot open" model run --moe-file "$T/missing.bin" -n 5

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "cli_model_moe: all passed"

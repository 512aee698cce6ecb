# `parity logprobs`: exit codes, every input format, slices, floor, JSON/HTML reports, malformed
# inputs (exit 3 with file and offset/line), usage errors (exit 2 with a hint). Uses $PARITY.
set -u
P=${PARITY:?PARITY must point at the parity binary}
SRC=${PARITY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
D=$SRC/tests/data/logprobs
C=$SRC/tests/corpus/logprobs
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC PATTERN ARGS...: exit code RC and combined output matching PATTERN
expect() {
    local want=$1 pat=$2; shift 2
    out=$("$P" logprobs "$@" 2>&1); rc=$?
    if [ $rc -ne "$want" ]; then fail "parity logprobs $*: want exit $want, got $rc:"; echo "$out" | head -20
    elif ! grep -Eq -- "$pat" <<<"$out"; then fail "parity logprobs $*: no line matching /$pat/:"; echo "$out" | head -20
    fi
}

# Drift injected in image tokens, a token-id divergence in r3 at position 7: exit 1.
expect 1 'modality=image .* alarm' "$D/a.jsonl" "$D/b.jsonl" --floor "$D/a2.jsonl" --slice-by domain \
    --json "$T/r.json" --html "$T/r.html"
expect 1 'r3 +pos 7 +A 75' "$D/a.jsonl" "$D/b.jsonl"
expect 1 'domain=chat' "$D/a.jsonl" "$D/b.jsonl" --slice-by domain
grep -q '"overall"' "$T/r.json" || fail "JSON report lacks overall"
for k in n_tokens max_abs_dlogprob mean_abs_dlogprob p99_abs_dlogprob k1 k2 k3 x_floor; do
    grep -q "\"$k\"" "$T/r.json" || fail "JSON report lacks $k"
done
grep -q '"kind":[[:space:]]*"measured"' "$T/r.json" || fail "JSON floor kind is not measured"
grep -q '<svg' "$T/r.html" && grep -q 'modality=image' "$T/r.html" || fail "HTML report lacks SVG plots or slices"
ls "$T" | grep -q tmp && fail "a temporary report file was left behind"
# Byte-identical JSON for the same inputs and thread count.
"$P" logprobs "$D/a.jsonl" "$D/b.jsonl" --floor "$D/a2.jsonl" --slice-by domain --json "$T/r2.json" >/dev/null
rc=$?; [ $rc -eq 1 ] || fail "second identical run: exit $rc, want 1 (the same alarm)"
cmp -s "$T/r.json" "$T/r2.json" || fail "JSON report differs between two identical runs"
# Identical data in other containers: exit 0.
expect 0 'compared 190' "$D/a.safetensors" "$D/a.jsonl"
expect 0 'compared 190' "$D/a.npy" "$D/a.safetensors"
expect 0 'within alarms' "$D/a.jsonl" "$D/a.jsonl" --no-slices
# Upstream shapes, each against itself (format detected), and forced.
expect 0 '\(openai-chat\).*\(openai-chat\)' "$D/openai_chat.jsonl" "$D/openai_chat.jsonl"
expect 0 'top-1 agreement 1' "$D/openai_chat.jsonl" "$D/openai_chat.jsonl"
expect 0 'compared 8, absent on a side 2' "$D/openai_completions.jsonl" "$D/openai_completions.jsonl"
expect 0 'compared 12, absent on a side 2' "$D/vllm.jsonl" "$D/vllm.jsonl" --format vllm
expect 0 'compared 12, absent on a side 2' "$D/sglang.jsonl" "$D/sglang.jsonl"
expect 0 'phase=decode' "$D/sglang.jsonl" "$D/sglang.jsonl"
# Alarms are overridable; --moe raises the k3 alarm.
expect 1 'k3 > 1e-09' "$D/a.jsonl" "$D/a2.jsonl" --k3-alarm 1e-9 --dlogprob-alarm 1e-9 --floor-factor 1
expect 0 'k3 > 0.1' "$D/a.jsonl" "$D/a2.jsonl" --moe
# Malformed inputs: exit 3, the message names the file and the offset or line.
expect 3 'bad_lengths.jsonl:1: .*token_ids' "$C/bad_lengths.jsonl" "$D/a.jsonl"
expect 3 'bad_nan.jsonl:1: ' "$C/bad_nan.jsonl" "$D/a.jsonl"
expect 3 'bad_inf.jsonl:1: .*logprobs' "$C/bad_inf.jsonl" "$D/a.jsonl"
expect 3 'truncated.safetensors: .*(offset|truncated)' "$C/truncated.safetensors" "$D/a.jsonl"
expect 3 'truncated.npy: offset' "$C/truncated.npy" "$D/a.jsonl"
expect 3 'absurd_shape.safetensors: header: .*(overflow|data_offsets)' "$C/absurd_shape.safetensors" "$D/a.jsonl"
expect 3 'absurd_hdrlen.safetensors: offset 0' "$C/absurd_hdrlen.safetensors" "$D/a.jsonl"
expect 3 'absurd_shape.npy: offset' "$C/absurd_shape.npy" "$D/a.jsonl"
expect 3 'cannot open' "$T/missing.jsonl" "$D/a.jsonl"
printf 'not json\n' > "$T/garbage.jsonl"
expect 3 'garbage.jsonl:1: ' "$T/garbage.jsonl" "$D/a.jsonl"
# Usage errors: exit 2 with a hint.
expect 2 'try:|two dumps' "$D/a.jsonl"
expect 2 'unknown format' "$D/a.jsonl" "$D/b.jsonl" --format nope
expect 2 'unknown option' "$D/a.jsonl" "$D/b.jsonl" --bogus
expect 2 'dtype' "$D/a.jsonl" "$D/b.jsonl" --dtype fp8
expect 2 "--k3-alarm needs a finite number >= 0, got 'inf'" "$D/a.jsonl" "$D/b.jsonl" --k3-alarm inf
expect 2 "--floor-factor needs a finite number >= 1, got '3x'" "$D/a.jsonl" "$D/b.jsonl" --floor-factor 3x
"$P" logprobs --help | grep -q 'usage: parity logprobs' || fail "--help"

[ $fails -eq 0 ] && echo "ok: parity logprobs CLI"
exit $((fails > 0))

# `parity logprobs` on inputs that cannot be logprobs (docs/logprobs.md, "What a logprob can be"):
# refused by default (exit 3 naming file, line or offset, field), compared as given with the
# matching --allow (exit 0 or 1 and a report), --allow listed in the help, a bad --allow name a
# usage error; tokens without an id shown by their text in the divergence list (never a hash);
# the slack itself: a value at +2^-14 passes, the next float above it does not.
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
H=$S/tests/hostile
D=$S/tests/data/logprobs
check() { # description expected-rc pattern cmd...: exit code and a line of the output
    local what=$1 want=$2 pat=$3; shift 3
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne "$want" ]; then bad "$what: exit $rc, expected $want: $(printf '%s' "$out" | tail -3)"
    elif ! printf '%s\n' "$out" | grep -Eq -- "$pat"; then bad "$what: no /$pat/ in: $(printf '%s' "$out" | tail -5)"
    else ok; fi
}
check "help lists --allow" 0 "--allow R\[,R\].*" "$P" logprobs --help
check "help names positive" 0 "^ +positive +values above \+2\^-14" "$P" logprobs --help
check "help names nonfinite" 0 "^ +nonfinite +NaN and \+inf" "$P" logprobs --help
check "bad --allow" 2 "--allow takes positive, nonfinite" "$P" logprobs "$D/a.jsonl" "$D/b.jsonl" --allow negative
check "positive refused" 3 "positive.jsonl:2: field 'logprobs'\[1\] is \+0\.5, positive beyond rounding" \
    "$P" logprobs "$H/jsonl/positive.jsonl" "$D/a.jsonl"
# r0 pairs with a.jsonl's r0; r1 too (one value at +0.5): a report, exit 1 (a.jsonl has more)
check "positive allowed" 1 "^sequences: A 2, B 6, paired 2" \
    "$P" logprobs "$H/jsonl/positive.jsonl" "$D/a.jsonl" --allow positive
check "NaN refused" 3 "nan.npy: offset [0-9]+: logprob of sequence 2, position 7 is NaN" \
    "$P" logprobs "$H/npy/nan.npy" "$D/b.npy"
check "NaN allowed" 1 "^sequences: A 4, B 6, paired 4" "$P" logprobs "$H/npy/nan.npy" "$D/b.npy" --allow nonfinite \
    --json "$tmp/nan.json"
# the NaN is compared (counted invalid in the overall slice), not dropped
grep -Eq '"n_invalid":[[:space:]]*1,' "$tmp/nan.json" && ok || bad "NaN allowed: overall n_invalid is not 1"
check "both allowed" 1 "verdict" "$P" logprobs "$H/npy/positive.npy" "$H/npy/nan.npy" --allow positive,nonfinite
# A bare NaN / Infinity literal (Python's json.dumps writes them by default) is not JSON: the file,
# the line, the field and what to write instead, not only "not a JSON object". --allow nonfinite
# does not make JSON of it (npy/safetensors only).
printf '%s\n' '{"id": "r0", "token_ids": [1, 2, 3], "logprobs": [-0.5, -2.0, -1.0]}' \
    '{"id": "r1", "token_ids": [1, 2, 3], "logprobs": [-0.5, NaN, -1.0]}' >"$tmp/pynan.jsonl"
check "NaN literal (line 2)" 3 "pynan.jsonl:2: not a JSON object: field 'logprobs'\[1\] is NaN, which JSON does not allow .*allow_nan=False.*write null" \
    "$P" logprobs "$tmp/pynan.jsonl" "$D/a.jsonl"
check "NaN literal, --allow nonfinite" 3 "pynan.jsonl:2: .*field 'logprobs'\[1\] is NaN" \
    "$P" logprobs "$D/a.jsonl" "$tmp/pynan.jsonl" --allow nonfinite
printf '%s\n' '{"id": "r0", "token_ids": [1, 2], "logprobs": [-Infinity, -1.0]}' >"$tmp/pyinf.jsonl"
check "-Infinity literal (line 1)" 3 "pyinf.jsonl:1: not a JSON object: field 'logprobs'\[0\] is -Infinity, .*the string \"-inf\"" \
    "$P" logprobs "$tmp/pyinf.jsonl" "$D/a.jsonl"
printf '%s\n' '{"id": "r0", "token_ids": [1, 2], "logprobs": [-0.5, -1.0], "top_ids": [[1], [2]], "top_logprobs": [[-0.5], [inf]]}' >"$tmp/cinf.jsonl"
check "inf literal in top_logprobs" 3 "cinf.jsonl:1: .*field 'top_logprobs'\[1\]\[0\] is inf, .*never \+inf" \
    "$P" logprobs "$tmp/cinf.jsonl" "$D/a.jsonl"
printf '%s\n' '{"choices": [{"logprobs": {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": []}, {"token": "b", "logprob": NaN, "top_logprobs": []}]}}]}' >"$tmp/chatnan.jsonl"
check "NaN literal, nested (OpenAI chat)" 3 "chatnan.jsonl:1: .*field 'choices'\[0\]\.logprobs\.content\[1\]\.logprob is NaN" \
    "$P" logprobs "$tmp/chatnan.jsonl" "$D/openai_chat.jsonl"
# a NaN inside a string is text, not a literal: the line's real error is reported
printf '%s\n' '{"id": "r0", "text": "NaN, Infinity", "token_ids": [1, }' >"$tmp/strnan.jsonl"
check "NaN in a string" 3 "strnan.jsonl:1: not a JSON object; expected JSONL" "$P" logprobs "$tmp/strnan.jsonl" "$D/a.jsonl"
check "empty dump" 3 "empty.jsonl: empty dump: no sequences" "$P" logprobs "$H/jsonl/empty.jsonl" "$D/a.jsonl"
check "empty dump as B" 3 "empty.jsonl: empty dump" "$P" logprobs "$D/a.jsonl" "$H/jsonl/empty.jsonl"
check "no common id" 3 "no sequence in common: .* has 2 sequences and .* 6" \
    "$P" logprobs "$H/jsonl/no_common_id.jsonl" "$D/a.jsonl"

# The slack, in fp32 npy written here: 2^-14 exactly is rounding, the next float is not.
py=${PARITY_PYTHON:-python3}
if "$py" -c 'import numpy' 2>/dev/null; then
    "$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
x = -np.ones((2, 4), np.float32)
np.save(f"{t}/ok.npy", x)
x[1, 2] = np.float32(2.0 ** -14)
np.save(f"{t}/edge.npy", x)
x[1, 2] = np.nextafter(np.float32(2.0 ** -14), np.float32(1))
np.save(f"{t}/over.npy", x)
x = -np.ones((2, 4)); x[0, 3] = np.nextafter(2.0 ** -14, 1)
np.save(f"{t}/over64.npy", x)
PY
    check "at the slack" 1 "verdict" "$P" logprobs "$tmp/ok.npy" "$tmp/edge.npy"
    check "one ulp over (fp32)" 3 "over.npy: offset [0-9]+: logprob of sequence 1, position 2 is \+6\.10351635e-05, positive" \
        "$P" logprobs "$tmp/ok.npy" "$tmp/over.npy"
    check "one ulp over (fp64)" 3 "over64.npy: offset [0-9]+: logprob of sequence 0, position 3 is \+6\.10351563e-05, positive" \
        "$P" logprobs "$tmp/over64.npy" "$tmp/ok.npy"
else
    echo "note: no numpy for $py: the slack edge is not checked here (tests/test_logprob.c has none either)"
fi

# Tokens without ids (OpenAI chat: text only) in the divergence list: their text, no hash.
sed '0,/"token": "Hello"/s//"token": "Howdy"/' "$D/openai_chat.jsonl" >"$tmp/chat_b.jsonl"
out=$("$P" logprobs "$D/openai_chat.jsonl" "$tmp/chat_b.jsonl" 2>&1); rc=$?
div=$(printf '%s\n' "$out" | sed -n '/token-id divergences/,/^$/p')
if [ $rc -ne 1 ]; then bad "chat divergence: exit $rc: $out"
elif ! printf '%s\n' "$div" | grep -q "pos 0 .*A 'Hello'  B 'Howdy'"; then bad "chat divergence not shown by text: $div"
elif printf '%s\n' "$div" | grep -Eq '[0-9]{10,}'; then bad "chat divergence shows a hash: $div"
else ok; fi
"$P" logprobs "$D/openai_chat.jsonl" "$tmp/chat_b.jsonl" --json "$tmp/c.json" >/dev/null 2>&1
rc=$?; [ $rc -le 1 ] || bad "chat divergence with --json: exit $rc"
if grep -Eq '"token_a":[[:space:]]*[0-9]{10,}' "$tmp/c.json"; then bad "JSON divergence shows a hash"
elif ! grep -q '"text_a":[[:space:]]*"Hello"' "$tmp/c.json"; then bad "JSON divergence has no text_a 'Hello'"
else ok; fi
echo "$pass passed, $fail failed"
exit $((fail > 0))

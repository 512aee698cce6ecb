# `parity logprobs` measured floors (issue 34): a floor is two runs of the SAME side. The README's
# old form `parity logprobs trainer server --floor server2` took a second server run as the
# trainer's floor, which measures the drift itself: a known-bad server (bf16acc, bf16 GEMM
# accumulation) got exit 0, "overall: ok", every metric "1x floor". Here, on real dumps of
# stories260K (`parity model dump`): the trainer is --path fp32, its repeat fp32+splitk4 (the
# same precision, another GEMM reduction order); the server is bf16acc, its repeat
# bf16acc+splitk2, and a second dump of the same path (bit-identical: the paths are
# deterministic). Checks: --floor-a / --floor-b / both exit 1 on the bad server; a plain --floor
# that cannot be told apart is exit 2 saying how to write it; a floor file given for the side it
# does not repeat is exit 2 saying which; the warning (text) and floor.as_large_as_drift (JSON)
# when the floor is as large as the drift; reports without a floor keep their bytes.
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
D=$S/tests/data/logprobs
[ -f "$S/data/stories260K.bin" ] || { echo "FAIL: $S/data/stories260K.bin missing"; exit 1; }
check() { # description expected-rc pattern cmd...: exit code and a line of the output
    local what=$1 want=$2 pat=$3; shift 3
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne "$want" ]; then bad "$what: exit $rc, expected $want: $(printf '%s' "$out" | head -12)"
    elif ! printf '%s\n' "$out" | grep -Eq -- "$pat"; then bad "$what: no /$pat/ in: $(printf '%s' "$out" | head -30)"
    else ok; fi
}
nocheck() { # description pattern cmd...: the output has no line matching pattern
    local what=$1 pat=$2; shift 2
    if "$@" 2>&1 | grep -Eq -- "$pat"; then bad "$what: /$pat/ found"; else ok; fi
}
for p in fp32 fp32+splitk4 bf16acc bf16acc+splitk2 bf16 bf16+tp2:ring; do
    "$P" model dump --path "$p" --out "$tmp/$p.jsonl" || bad "model dump --path $p: exit $?"
done
cp "$tmp/bf16acc.jsonl" "$tmp/server2.jsonl" # the same server dumped again: the same bits
T=$tmp/fp32.jsonl T2=$tmp/fp32+splitk4.jsonl
SV=$tmp/bf16acc.jsonl SV2=$tmp/bf16acc+splitk2.jsonl

# Without a floor: the alarm (unchanged).
check "no floor" 1 "^overall: alarm" "$P" logprobs "$T" "$SV"
# The README's old form with the server dumped again: the file is B's (identical to it), so the
# floor is zero, the drift an alarm, and the report says the floor measures nothing.
check "--floor server2 (identical to B)" 1 "^overall: alarm" "$P" logprobs "$T" "$SV" --floor "$tmp/server2.jsonl"
check "--floor server2: side found" 1 "server2.jsonl: a second run of B's side \(found by --floor; mean \|dlogprob\| 0 to B, 0\.076 to A\)" \
    "$P" logprobs "$T" "$SV" --floor "$tmp/server2.jsonl"
check "--floor server2: zero floor noted" 1 "note: .*server2.jsonl is identical to B .*a zero floor" \
    "$P" logprobs "$T" "$SV" --floor "$tmp/server2.jsonl"
# ... with a server run that differs (another reduction order): as close to A as to B, so which
# side it repeats cannot be told: exit 2, saying how to write it.
check "--floor server repeat: undecidable" 2 "cannot tell which side it repeats: .* Write --floor-a .* --floor-b " \
    "$P" logprobs "$T" "$SV" --floor "$SV2"
# The intended forms, written correctly: exit 1 on the bad server.
check "--floor-b server repeat" 1 "^overall: alarm" "$P" logprobs "$T" "$SV" --floor-b "$SV2" --json "$tmp/fb.json" --html "$tmp/fb.html"
check "--floor-a trainer repeat" 1 "^overall: alarm" "$P" logprobs "$T" "$SV" --floor-a "$T2" --json "$tmp/fa.json"
check "--floor trainer repeat (found: A)" 1 "fp32\+splitk4.jsonl: a second run of A's side \(found by --floor; mean \|dlogprob\| 1\.28e-06 to A, 0\.076 to B\)" \
    "$P" logprobs "$T" "$SV" --floor "$T2"
check "both floors" 1 "floor: A vs .*fp32\+splitk4.jsonl and B vs .*bf16acc\+splitk2.jsonl" \
    "$P" logprobs "$T" "$SV" --floor-a "$T2" --floor-b "$SV2"
check "both floors: verdict" 1 "^verdict: DRIFT" "$P" logprobs "$T" "$SV" --floor-a "$T2" --floor-b "$SV2"
# The server's own repeat is as large as the drift: the warning, and why k3 is an alarm anyway.
check "--floor-b: warning" 1 "^  warning: the floor is as large as the drift it bounds" "$P" logprobs "$T" "$SV" --floor-b "$SV2"
check "--floor-b: k3 not excused" 1 "^    overall: k3 0\.0084 \(alarm 0\.001\) is 0\.912x its floor 0\.00922: alarm anyway" \
    "$P" logprobs "$T" "$SV" --floor-b "$SV2"
check "--floor-b: max excused" 1 "^    overall: max \|dlogprob\| 0\.554 \(alarm 0\.05\) is 0\.828x its floor 0\.668: no alarm, only because of the floor" \
    "$P" logprobs "$T" "$SV" --floor-b "$SV2"
grep -Eq '"as_large_as_drift":[[:space:]]*true' "$tmp/fb.json" && ok || bad "--floor-b JSON: as_large_as_drift is not true"
grep -Eq '"side":[[:space:]]*"b"' "$tmp/fb.json" && ok || bad "--floor-b JSON: run side is not b"
grep -Eq '"alarm_anyway":[[:space:]]*true' "$tmp/fb.json" && ok || bad "--floor-b JSON: no excused k3 in alarm anyway"
grep -q 'the floor is as large as the drift' "$tmp/fb.html" && ok || bad "--floor-b HTML: no warning"
grep -Eq '"as_large_as_drift":[[:space:]]*false' "$tmp/fa.json" && ok || bad "--floor-a JSON: as_large_as_drift is not false"
nocheck "--floor-a: no warning" "warning" "$P" logprobs "$T" "$SV" --floor-a "$T2"
# A floor file given for the side it does not repeat (measurably): exit 2, naming the right one.
check "--floor-a with B's run" 2 "--floor-a .*server2.jsonl: it is a run of B's side, not A's: .* Write --floor-b " \
    "$P" logprobs "$T" "$SV" --floor-a "$tmp/server2.jsonl"
check "--floor-b with A's run" 2 "--floor-b .*fp32\+splitk4.jsonl: it is a run of A's side, not B's: .* Write --floor-a " \
    "$P" logprobs "$T" "$SV" --floor-b "$T2"
# A faithful bf16 server against the same trainer (overall only): k3 7.2e-4 is within the alarm,
# max |dlogprob| 0.158 is above it; the server's repeat (TP 2, bf16 hops) excuses it, and says so.
check "faithful server, --floor-b" 0 "max \|dlogprob\| 0\.158 \(alarm 0\.05\) is 0\.688x its floor 0\.23: no alarm, only because" \
    "$P" logprobs "$T" "$tmp/bf16.jsonl" --floor-b "$tmp/bf16+tp2:ring.jsonl" --no-slices
check "faithful server, trainer floor" 1 "^overall: alarm" "$P" logprobs "$T" "$tmp/bf16.jsonl" --floor-a "$T2" --no-slices
# Usage errors.
check "--floor with --floor-a" 2 "--floor with --floor-a: name the side of every floor file" \
    "$P" logprobs "$T" "$SV" --floor "$T2" --floor-a "$T2"
check "--floor-b twice" 2 "--floor-b given twice" "$P" logprobs "$T" "$SV" --floor-b "$SV2" --floor-b "$SV2"
check "--floor-a without a file" 2 "--floor-a needs a file" "$P" logprobs "$T" "$SV" --floor-a
check "help: --floor-a" 0 "^--floor-a A2 +a second run of A's side" "$P" logprobs --help
check "help: --floor-b" 0 "^--floor-b B2 +a second run of B's side" "$P" logprobs --help
check "help: example" 0 "parity logprobs train.jsonl serve.jsonl --floor-b serve2.jsonl" "$P" logprobs --help
check "floor error: missing file" 3 "floor: .*missing.jsonl" "$P" logprobs "$T" "$SV" --floor-b "$tmp/missing.jsonl"
# The sample pair's floor (a2.jsonl, a second run of A) is found by a plain --floor.
check "sample --floor a2" 1 "a2.jsonl: a second run of A's side \(found by --floor" "$P" logprobs "$D/a.jsonl" "$D/b.jsonl" --floor "$D/a2.jsonl"
# Without a floor the report's bytes are what they were: the analytic line, no floor runs.
"$P" logprobs "$D/a.jsonl" "$D/b.jsonl" --json "$tmp/nf.json" >"$tmp/nf.txt"
grep -qx "  (analytic floor from dtype fp32; measure it from a second run of one side: --floor-a A2 or --floor-b B2)" "$tmp/nf.txt" && ok || bad "no floor: the analytic line does not say how to measure a floor"
grep -Eq '"runs"|"as_large_as_drift"|"excused"|warning' "$tmp/nf.json" "$tmp/nf.txt" && bad "no floor: new floor keys in the report" || ok
echo "$pass passed, $fail failed"
exit $((fail > 0))

# `parity model capture` + `parity bisect` (issue #38): on the MoE model, each serving path that
# changes one component is bisected to the module it changed (replayed introduced error against
# a same-side repeat's floor); the estimator without replays; exit codes and messages of
# mismatched, truncated and malformed captures; a module of another kind compared with a note;
# the JSON keys and the HTML page.
# Uses $PARITY and $PARITY_SRC (the shipped data).
set -u
P=${PARITY:?PARITY must point at the parity binary}
PY=${PARITY_PYTHON:-python3}
"$PY" -c 'import json' 2>/dev/null || { echo "SKIP: no Python ($PY) to read the JSON"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
jget() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

cap() { # dir path [args...]
    local d=$1 p=$2; shift 2
    "$P" model capture --moe --path "$p" --out "$T/$d" "$@" 2>"$T/$d.err" || fail "model capture --path $p $*: exit $? ($(cat "$T/$d.err"))"
}

# 1. The four serving changes: A the reference side, B the path that changes one component,
#    F a repeat of A's side (another GEMM split) replayed on A; the module B changed must be the
#    first departing one, and every module before it must have introduced exactly 0 (replay).
check_path() { # name A B F expected
    cap "$1.A" "$2"
    cap "$1.B" "$3" --replay "$T/$1.A"
    cap "$1.F" "$4" --replay "$T/$1.A"
    "$P" bisect "$T/$1.A" "$T/$1.B" --floor "$T/$1.F" --json "$T/$1.json" >"$T/$1.txt" 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "bisect $1: want exit 1 (a module departs), got $rc: $(head -5 "$T/$1.txt")"
    got=$(jget "$T/$1.json" "r['first_departing']['module']")
    [ "$got" = "$5" ] || fail "bisect $1 ($2 vs $3): first departing is '$got', want '$5'"
    before=$(jget "$T/$1.json" "max([m['introduced'] for m in r['modules'][:r['first_departing']['index']]] + [0]) == 0")
    [ "$before" = "True" ] || fail "bisect $1: modules before the first departing one introduced $before, want 0 (replay)"
    from=$(jget "$T/$1.json" "r['first_departing']['introduced_from']")
    [ "$from" = replay ] || fail "bisect $1: introduced_from '$from', want replay"
    grep -q "first departing module: $5 " "$T/$1.txt" || fail "bisect $1: the text does not name $5: $(head -6 "$T/$1.txt")"
}
check_path fusedmoe bf16 bf16+fusedmoe bf16+splitk2 layers.0.moe
check_path combine bf16+moe:combine=fp32acc bf16+moe:combine=bf16buf bf16+moe:combine=fp32acc+splitk2 layers.0.moe
check_path tp bf16+tp8:ring bf16+tp4:ring bf16+tp8:ring+splitk2 layers.0.attn
check_path ep bf16+ep4 bf16+ep4:overlap bf16+ep4+splitk2 layers.0.moe

# JSON: the issue's keys, and routing flips as events.
keys=$(jget "$T/fusedmoe.json" "sorted(k for k in ['first_departing','modules','ranked','routing_flips','flat_walk'] if k in r)")
[ "$keys" = "['first_departing', 'flat_walk', 'modules', 'ranked', 'routing_flips']" ] || fail "JSON keys: $keys"
fd=$(jget "$T/fusedmoe.json" "sorted(r['first_departing'])")
case "$fd" in *"'floor'"*"'introduced'"*"'module'"*) ;; *) fail "first_departing lacks module/introduced/floor: $fd" ;; esac
nm=$(jget "$T/fusedmoe.json" "len(r['modules'])")
[ "$nm" = 23 ] || fail "MoE capture: $nm modules, want 23 (embed, 5 x 4, final_norm, lm_head)"
flip=$(jget "$T/tp.json" "sorted(r['routing_flips'][0]) if r['routing_flips'] else 'none'")
case "$flip" in *experts_a*experts_b*gate_margin*module*token*) ;; *) fail "routing flip event: $flip" ;; esac

# 2. A repeat against its own side departs nowhere: exit 0.
cap same.B bf16 --replay "$T/fusedmoe.A"
"$P" bisect "$T/fusedmoe.A" "$T/same.B" >"$T/same.txt" 2>&1; rc=$?
[ $rc -eq 0 ] || fail "bisect A against the same path: want exit 0, got $rc: $(head -6 "$T/same.txt")"

# 3. Without replays the introduced error is estimated (drift growth), and said so.
cap est.B bf16+fusedmoe
"$P" bisect "$T/fusedmoe.A" "$T/est.B" --floor "$T/fusedmoe.F" --json "$T/est.json" >/dev/null 2>&1
got=$(jget "$T/est.json" "(r['first_departing']['module'], r['first_departing']['introduced_from'])")
[ "$got" = "('layers.0.moe', 'estimate')" ] || fail "estimator: $got, want ('layers.0.moe', 'estimate')"

# 4. The golden fp64 run as floor: A's own introduced error against fp64.
cap gold ref
cap gA bf16 --replay "$T/gold"
cap gB bf16acc --replay "$T/gA"
"$P" bisect "$T/gA" "$T/gB" --golden "$T/gold" --json "$T/g.json" >"$T/g.txt" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "bisect bf16 vs bf16acc --golden: want exit 1, got $rc"
got=$(jget "$T/g.json" "(r['first_departing']['module'], r['modules'][0]['floor_from'])")
[ "$got" = "('layers.0.attn', 'golden')" ] || fail "golden floor: $got"

# 5. HTML: self-contained (no external resource), the plot and the first departing module.
"$P" bisect "$T/fusedmoe.A" "$T/fusedmoe.B" --floor "$T/fusedmoe.F" --html "$T/b.html" >/dev/null 2>&1
grep -q "<svg" "$T/b.html" && grep -q "layers.0.moe" "$T/b.html" || fail "HTML lacks the plot or the module"
if grep -Eo '(src|href)="[^"]*"' "$T/b.html" | grep -q .; then fail "HTML loads external resources"; fi

# 6. Bad input: exit 3 naming the first mismatch; a truncated capture names the tensor.
expect3() { # pattern args...
    local pat=$1; shift
    err=$("$P" "$@" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 3 ] || fail "parity $*: want exit 3, got $rc ($err)"
    grep -Eq -- "$pat" <<<"$err" || fail "parity $*: message lacks /$pat/: $err"
}
"$P" model capture --path bf16 --out "$T/dense" 2>/dev/null || fail "dense capture"
expect3 "different models: .*'stories260K-moe'.*'stories260K'" bisect "$T/fusedmoe.A" "$T/dense"
printf 'Once upon a time.\n' >"$T/p.txt"
cap short bf16 --prompts "$T/p.txt"
expect3 "module 'embed': tensor 'embed.out.0' is \(198, 64\) in .*fusedmoe.A, \(6, 64\) in .*short" bisect "$T/fusedmoe.A" "$T/short"
cp -r "$T/fusedmoe.B" "$T/renamed"
sed -i 's/"layers.2.attn"/"layers.2.attention"/' "$T/renamed/capture.json"
expect3 "tensor 'layers.2.attn.in.0' .*missing|module 10: .*'layers.2.attn'.*'layers.2.attention'" bisect "$T/fusedmoe.A" "$T/renamed"
# A module of another kind (B swapped in another implementation: a PyTorch class name) is
# compared as the same module, with a note; names and shapes must still match.
cp -r "$T/fusedmoe.B" "$T/kind"
sed -i 's/"kind":\t"moe"/"kind":\t"fused_moe"/' "$T/kind/capture.json"
"$P" bisect "$T/fusedmoe.A" "$T/kind" --floor "$T/fusedmoe.F" --json "$T/kind.json" >"$T/kind.txt" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "bisect with a swapped kind: want exit 1, got $rc: $(head -5 "$T/kind.txt")"
grep -q "note: module 'layers.0.moe' is a 'moe' in A, a 'fused_moe' in B" "$T/kind.txt" ||
    fail "swapped kind: no note naming it: $(head -6 "$T/kind.txt")"
got=$(jget "$T/kind.json" "r['first_departing']['module']")
[ "$got" = layers.0.moe ] || fail "swapped kind: first departing '$got', want layers.0.moe"
cp -r "$T/fusedmoe.B" "$T/trunc"
sz=$(stat -c %s "$T/trunc/capture.safetensors")
truncate -s $((sz / 2)) "$T/trunc/capture.safetensors"
expect3 "capture.safetensors: header: tensor '[^']+': data_offsets end .* truncated" bisect "$T/fusedmoe.A" "$T/trunc"
cp -r "$T/fusedmoe.B" "$T/schema"
sed -i 's#parity.capture/1#parity.capture/9#' "$T/schema/capture.json"
expect3 "capture.json: field 'schema': expected \"parity.capture/1\"" bisect "$T/fusedmoe.A" "$T/schema"
expect3 "cannot read the capture index" bisect "$T/fusedmoe.A" "$T/nonexistent"
expect3 "--replay .*different models|--replay .*model 'stories260K'" model capture --moe --path bf16 --out "$T/x" --replay "$T/dense"
err=$("$P" bisect "$T/fusedmoe.A" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "bisect with one capture: want exit 2, got $rc ($err)"

[ $fails -eq 0 ] && echo "cli_bisect: all checks passed"
exit $((fails > 0))

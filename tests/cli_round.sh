# `parity round`: outputs (value, bits, ulp error) and exit codes. Uses $PARITY.
set -u
P=${PARITY:?PARITY must point at the parity binary}
fails=0

# expect_line ARGS... -- PATTERN: the output of `parity round ARGS` must contain a line matching
# the extended regex PATTERN, and exit 0.
expect_line() {
    local args=() pat
    while [ "$1" != "::" ]; do args+=("$1"); shift; done
    pat=$2
    out=$("$P" round "${args[@]}" 2>&1); rc=$?
    if [ $rc -ne 0 ] || ! grep -Eq -- "$pat" <<<"$out"; then
        echo "FAIL: parity round ${args[*]}: want exit 0 and a line matching /$pat/, got exit $rc:"
        echo "$out"
        fails=$((fails + 1))
    fi
}

# expect_rc RC ARGS...: exit code RC; for usage errors (2) stderr must say what to type (try:).
expect_rc() {
    local want=$1; shift
    err=$("$P" round "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne "$want" ]; then
        echo "FAIL: parity round $*: want exit $want, got $rc ($err)"; fails=$((fails + 1))
    elif [ "$want" -eq 2 ] && ! grep -q "try:" <<<"$err"; then
        echo "FAIL: parity round $*: usage error without a 'try:' hint: $err"; fails=$((fails + 1))
    fi
}

# Values, bit patterns and ulp errors worked out by hand:
# 0.1 in bf16: 0x3dcd = 1.6015625 * 2^-4 = 0.10009765625; ulp there 2^-11; error 9.765625e-5 / 2^-11.
expect_line --format bf16 0.1 :: '^0\.1 +0\.10009765625 +0x3dcd \+0\.2$'
expect_line --format bf16 1 :: '^1 +1 +0x3f80 \+0$'
expect_line --format bf16 inf :: '^inf +inf +0x7f80 0$'
expect_line --format bf16 nan :: '^nan +nan +0x7fc0 '
expect_line --format bf16 -- -0.0 :: '^-0\.0 +-0 +0x8000 '
expect_line --format bf16 0x1.8p-3 :: '^0x1\.8p-3 +0\.1875 +0x3e40 \+0$'
# 1 + 2^-8 is a bf16 tie: nearest-even keeps 1.0 (even); 1 + 2^-8 + 2^-40 breaks it upward
# (ml_dtypes and torch 1.13 round double -> fp32 -> bf16 and get 1.0 here: double rounding).
expect_line --format bf16 1.00390625 :: '^1\.00390625 +1 +0x3f80 -0\.5$'
expect_line --format bf16 0x1.0100000001p0 :: ' 1\.0078125 +0x3f81 '
# e4m3fn: 464 ties to the even 448; above it NaN (ml_dtypes/PyTorch) or 448 with --saturate.
expect_line --format e4m3fn 464 :: '^464 +448 +0x7e -0\.5$'
expect_line --format e4m3fn 465 :: '^465 +nan +0x7f overflow to NaN$'
expect_line --format e4m3fn inf :: '^inf +nan +0x7f '
expect_line --format e4m3fn --saturate 480 :: '^480 +448 +0x7e -1$'
expect_line --format e4m3fn --saturate -- -inf :: '^-inf +-448 +0xfe '
expect_line --format e4m3fn 0.001953125 :: '^0\.001953125 +0\.001953125 +0x01 \+0$'
# e5m2 and fp16 overflow edges.
expect_line --format e5m2 61440 :: '^61440 +inf +0x7c overflow to inf$'
expect_line --format e5m2 61439.99 :: '^61439\.99 +57344 +0x7b '
expect_line --format fp16 65520 :: '^65520 +inf +0x7c00 '
expect_line --format fp16 65519.99 :: '^65519\.99 +65504 +0x7bff '
expect_line --format fp16 1e-8 :: '^1e-8 +0 +0x0000 '
# Toward zero: truncation, and overflow gives the largest finite (IEEE 754 7.4).
expect_line --format fp16 --rounding zero 1.0019 :: '^1\.0019 +1\.0009765625 +0x3c01 '
expect_line --format fp16 --rounding=zero 1e6 :: '^1e6 +65504 +0x7bff '
expect_line --format=tf32 3.14159265 :: '^3\.14159265 +3\.140625 +0x20248 '
expect_line --format custom:m=10,e=5 65520 :: ' 0x7c00 '
expect_line --format custom:m=3,e=4 -- -0.3 :: '^-0\.3 +-0\.3125 +0xaa '
# Stochastic: every result is one of the two neighbours, and the same seed repeats itself.
# 400 draws of 1.001: each line 1 (0x3f80) or 1.0078125 (0x3f81), up with probability
# p = 0.001 / 2^-7 = 0.128: 51.2 expected, sd sqrt(400 p (1 - p)) = 6.68; [18, 84] is +-5 sd
# (a correct rounder fails it with probability below 1e-6). Exit 0 and all 400 lines required,
# so empty output cannot pass.
args=$(for _ in $(seq 400); do printf '1.001 '; done)
# shellcheck disable=SC2086
out1=$("$P" round --format bf16 --rounding stochastic --seed 7 $args); rc1=$?
# shellcheck disable=SC2086
out2=$("$P" round --format bf16 --rounding stochastic --seed 7 $args)
if [ $rc1 -ne 0 ]; then echo "FAIL: stochastic rounding: exit $rc1"; fails=$((fails + 1)); fi
if [ "$out1" != "$out2" ]; then echo "FAIL: stochastic rounding not reproducible"; fails=$((fails + 1)); fi
rows=$(grep -c '^1\.001 ' <<<"$out1"); ups=$(grep -c '^1\.001 .* 0x3f81 ' <<<"$out1")
if [ "$rows" -ne 400 ] || grep '^1\.001 ' <<<"$out1" | grep -Ev ' (0x3f80|0x3f81) ' | grep -q .; then
    echo "FAIL: stochastic: want 400 results, each a neighbour (0x3f80/0x3f81), got $rows:"; echo "$out1" | head
    fails=$((fails + 1))
elif [ "$ups" -lt 18 ] || [ "$ups" -gt 84 ]; then
    echo "FAIL: stochastic: $ups of 400 rounded up, expected 51.2 +- 33 (p = 0.128)"; fails=$((fails + 1))
fi

# Exit codes: help 0, usage errors 2 with a hint.
expect_rc 0 --help
"$P" help round | grep -q "examples:" || { echo "FAIL: help has no examples"; fails=$((fails + 1)); }
expect_rc 2 --format bf17 1
expect_rc 2 --format custom:m=30,e=5 1
expect_rc 2 --format bf16 abc
expect_rc 2 --format bf16
expect_rc 2 1.0
expect_rc 2 --format bf16 --rounding up 1
expect_rc 2 --format bf16 --seed -3 1
expect_rc 2 --format bf16 --bogus 1
expect_rc 2 --format

if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "cli_round: all passed"

#!/usr/bin/env bash
# One strict grammar for the numbers every command takes (issue #34): shapes (--shape NxD[xV],
# --workload NAME@NxD[xV]), sizes, counts, seeds and the lists and specs that hold them. A
# trailing character, an empty field, a sign, a blank, hex, overflow or a zero size is a usage
# error (exit 2) whose message names the option and quotes the text; the legal forms still run
# (and "010" is ten). The help texts of ops, kernels and run have exit codes and examples, gen's
# --workload is optional, train documents --val-seqs and --synth-tokens, and compare -q silences
# its progress lines as check -q does. Each run is small: seconds in all.
. "$(dirname "$0")/lib_cli.sh"
OP=embedding_rmsnorm_bwd

# usage CMD-ARGS...: exit 2, and stderr names $opt and quotes $text (both set by the caller)
usage() {
  "$P" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc != 2 ]; then bad "$* -> exit $rc, want 2"; return; fi
  if grep -qF -- "$opt" "$tmp/err" && grep -qF -- "'$text" "$tmp/err"; then ok
  else bad "$*: stderr does not name $opt and '$text'"; cat "$tmp/err"; fi
}
runs() { # a legal form: exit 0
  "$P" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ $rc = 0 ] && ok || { bad "$* -> exit $rc, want 0"; cat "$tmp/err"; }
}
K=(--kernel builtin:fp32_seq)

# --- shapes: check --shape, and NAME@NxD[xV] in check, gen, bench and power ---------------
opt=--shape
for text in 8192x4096abc 64x32, 64x 64xx32 x32 -64x32 +64x32 " 64x32" 64X32 99999999999x32 \
            64x32x0 64x32x; do
  usage check $OP "${K[@]}" --shape "$text"
done
opt=--workload
for text in text@64x32abc text@64x32, text@64x32zzz text@ text@64xx32 text@+64x32 \
            "text@64x32 " text@64x32x0x1 text@3000000000x1; do
  usage check $OP "${K[@]}" --workload "$text"
done
text=text@64x32zzz usage gen $OP --workload text@64x32zzz --out "$tmp/g.st"
[ ! -e "$tmp/g.st" ] && ok || bad "gen wrote a file for a malformed workload"
text=text@64x32abc usage bench $OP "${K[@]}" --workload text@64x32abc
opt=--check-workload text=text@64x32, usage bench $OP "${K[@]}" --check-workload text@64x32,
# power: a malformed shape or an unknown preset is a usage error before anything runs
opt=--workload text=text@64x32abc usage power $OP --workload text@64x32abc -q
opt=--workload text=nope usage power $OP --workload nope -q
# the message says what was wrong
"$P" check $OP "${K[@]}" --shape 64x32abc 2>"$tmp/err" >/dev/null
grep -q "'abc' after 32 is not part of a shape" "$tmp/err" && ok || { bad "--shape 64x32abc: no reason"; cat "$tmp/err"; }
"$P" check $OP "${K[@]}" --workload text@0x32 2>"$tmp/err" >/dev/null
grep -q "size 1 is 0" "$tmp/err" && ok || { bad "text@0x32: no reason"; cat "$tmp/err"; }

# --- seeds: decimal digits only, in every command that takes one ------------------------------
opt=--seed
for text in 0x10 " 1" +1 1e3 1.0 18446744073709551616 12abc ""; do
  usage check $OP "${K[@]}" --seed "$text"
done
text=0x10
usage gen $OP --seed 0x10 --out "$tmp/g.st"
usage bench $OP "${K[@]}" --seed 0x10
usage power $OP --seed 0x10
usage round --format bf16 --seed 0x10 1
usage moe --seed 0x10
usage allreduce --a ring:2 --seed 0x10
usage splitk --seed 0x10
usage train "${K[@]}" --seed 0x10

# --- sizes and counts ----------------------------------------------------------------------------
opt=--threads text=0x2 usage check $OP "${K[@]}" --threads 0x2
opt=--jobs text=" 1" usage check $OP "${K[@]}" --jobs " 1"
opt=--runs text=+3 usage bench $OP "${K[@]}" --runs +3
opt=--n text=010x usage allreduce --a ring:2 --n 010x
opt=--tokens text=0x10 usage moe --tokens 0x10
opt=--k text=+64 usage splitk --k +64
opt=--steps text=1e3 usage train "${K[@]}" --steps 1e3
opt=--timeout text=inf usage check $OP "${K[@]}" --timeout inf

# --- lists and specs -------------------------------------------------------------------------------
opt=--splits
for text in 1,2, ,1 1,,2 "1, 2"; do usage splitk --splits "$text"; done
text=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33
usage splitk --splits "$text"
opt=--a
for text in ring::8 ring:8: :ring:8 "ring: 8" ring:+8; do usage allreduce --a "$text"; done
opt=--table
for text in 8:4x 8: :4 " 8:4" 8:+4; do usage allreduce --table "$text"; done
opt=--ulp
for text in "" acc=bf16 bf16:fp16; do usage allreduce --a ring:2 --ulp "$text"; done
opt=--perturb
for text in "0.1, 0.2" 0.1, " 0.1"; do usage moe --perturb "$text"; done
opt=--data
for text in text, ,text text,,zipf; do usage train "${K[@]}" --data "$text"; done
opt=--optimizer text=sgd, usage train "${K[@]}" --optimizer sgd,
# round's values: a blank before the number is not a number
"$P" round --format bf16 " 1.5" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "round ' 1.5': want exit 2"

# --- the legal forms still run -----------------------------------------------------------------------
runs check $OP "${K[@]}" --workload text@64x32 --no-floor --no-cache -q
runs check $OP "${K[@]}" --workload uniform@64x8x16 --shape 32x16 --no-floor --no-cache -q
runs gen $OP --workload text@64x32 --seed 010 --out "$tmp/in.st"
grep -q "seed 10," "$tmp/err" && ok || { bad "gen --seed 010 is not ten"; cat "$tmp/err"; }
runs allreduce --a ring:8:bf16 --b oneshot:4:bf16 --n 64 --seed 7
runs allreduce --table 8:4 --n 64 --k 64
runs allreduce --a ring:2 --ulp bf16 --n 64
runs splitk --k 64 --splits 1,2,4 --n 16
runs moe --tokens 64 --experts 8 --topk 2 --hidden 16 --perturb 0.001,0.01
runs round --format bf16 --rounding stochastic --seed 7 1.001 0x1.8p-3

# --- help texts -----------------------------------------------------------------------------------
for c in ops kernels run; do
  "$P" help $c >"$tmp/h" 2>&1
  grep -q "^exit" "$tmp/h" && ok || bad "parity help $c has no exit codes"
  grep -q "^examples:" "$tmp/h" && ok || bad "parity help $c has no examples"
  grep -q "2 usage error" "$tmp/h" && ok || bad "parity help $c does not name exit 2"
done
"$P" help gen | grep -q "usage: parity gen OP \[--workload W\]" && ok || bad "gen's usage marks --workload as required"
"$P" help train >"$tmp/h"
grep -q -- "--val-seqs N" "$tmp/h" && ok || bad "train help lacks --val-seqs"
grep -q -- "--synth-tokens N" "$tmp/h" && ok || bad "train help lacks --synth-tokens"
"$P" help compare | grep -q -- "-q, --quiet" && ok || bad "compare help lacks -q"
"$P" --help | grep -q "^numbers:" && ok || bad "parity --help does not state the number grammar"

# --- compare -q: progress lines on stderr without it, none with it, the same report -------------
runs run $OP "${K[@]}" --inputs "$tmp/in.st" --out "$tmp/out.st"
"$P" compare $OP "$tmp/in.st" "$tmp/out.st" --no-floor >"$tmp/c1" 2>"$tmp/e1"; r1=$?
"$P" compare $OP "$tmp/in.st" "$tmp/out.st" --no-floor -q >"$tmp/c2" 2>"$tmp/e2"; r2=$?
[ $r1 = 0 ] && [ $r2 = 0 ] && ok || bad "compare of fp32_seq's outputs: exit $r1 / $r2, want 0"
grep -q "err/tol" "$tmp/e1" && ok || { bad "compare: no progress line on stderr"; cat "$tmp/e1"; }
[ ! -s "$tmp/e2" ] && ok || { bad "compare -q: stderr not empty"; cat "$tmp/e2"; }
cmp -s "$tmp/c1" "$tmp/c2" && ok || bad "compare -q changed the report"

echo "$pass passed, $fail failed"
[ $fail = 0 ]

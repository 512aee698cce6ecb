#!/usr/bin/env bash
# `parity problem` (programs/cmd_problem.c -> python/parity/problems.py; docs/problems.md):
# benchmark problems written for parity's tests (python/tests/problems/) judged through the C
# CLI: exit codes 0 faithful / 1 not / 2 usage or no Python with torch / 3 bad problem file, the
# JSON's verdict, contract and benchmark_rule, the contract switch on a bf16 intermediate the
# reference performs. Skipped (77) when the tests' Python lacks numpy or torch.
set -u
: "${PARITY:?set PARITY to the parity binary}"
PY=${PARITY_PYTHON:-python3}
if ! "$PY" -c 'import numpy, torch' 2>/dev/null; then
  echo "skip: $PY cannot import numpy and torch (parity problem runs PyTorch references)"
  exit 77
fi
export PARITY_PYTHON="$PY"
. "$(dirname "$0")/lib_cli.sh" # tmp, fail, bad; preload_sanitizers
# The Python that parity problem starts imports this build's bridge (beside the binary): in a
# sanitizer build it needs the sanitizer runtimes first in the process, as every Python test.
preload_sanitizers "$(dirname "$PARITY")/python/libparity_python.so"
SRC=$(cd "$(dirname "$0")/.." && pwd)
P="$SRC/python/tests/problems"
expect() {  # expect RC ARGS...: run parity problem ARGS, check the exit code
  local want=$1; shift
  "$PARITY" problem "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] || { bad "parity problem $* -> exit $rc, expected $want"; cat "$tmp/out" "$tmp/err"; }
}
field() {  # field FILE EXPR: a value of the JSON
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

expect 0 "$P/sol_rmsnorm" --solution "$P/sol_rmsnorm/solution_faithful.json" --quick --json "$tmp/f.json"
grep -q "role norm_weight" "$tmp/out" || bad "the inferred roles are not printed"
[ "$(field "$tmp/f.json" 'd["verdict"], d["contract"], d["benchmark_rule"]["name"], d["benchmark_rule"]["verdict"]')" = \
  "('faithful', 'reference', 'sol-execbench', 'pass')" ] || bad "JSON fields: $(cat "$tmp/f.json" | head -c 300)"

expect 1 "$P/sol_rmsnorm" --solution "$P/sol_rmsnorm/solution_ignores_gamma.json" --quick --json "$tmp/g.json"
[ "$(field "$tmp/g.json" 'd["verdict"]')" = unfaithful ] || bad "ignored gamma not unfaithful"
# --isolate: the same verdicts with the solution in a child process
expect 1 "$P/sol_rmsnorm" --solution "$P/sol_rmsnorm/solution_ignores_gamma.json" --quick --isolate --json "$tmp/gi.json"
[ "$(field "$tmp/gi.json" 'd["verdict"], "child process" in d["solution"]')" = "('unfaithful', True)" ] ||
  bad "--isolate: $(head -c 300 "$tmp/gi.json")"
grep -q "^reproduce: parity problem .* --isolate" "$tmp/out" || bad "--isolate: the reproduce line does not say it"

# a folder of problems judged two at a time (--jobs 2): the folder's order, one JSON
expect 0 "$P/kernelbench" --quick --jobs 2 --json "$tmp/j.json"
[ "$(field "$tmp/j.json" 'd["verdict"], [x["problem"]["name"] for x in d["problems"]]')" = \
  "('faithful', ['gemm', 'mse_loss', 'rmsnorm_gamma', 'softmax'])" ] || bad "--jobs 2 folder JSON: $(head -c 300 "$tmp/j.json")"
expect 2 "$P/kernelbench" --jobs x

# the reference stores its scaled logits in bf16: a solution doing the same is faithful to the
# problem's own contract and not to `math`
expect 0 "$P/sol_scaled_softmax" --solution "$P/sol_scaled_softmax/solution_bf16_logits.json" --quick
expect 1 "$P/sol_scaled_softmax" --solution "$P/sol_scaled_softmax/solution_bf16_logits.json" --quick --contract math

expect 0 "$P/kernelbench/gemm.py" --solution "$P/kernelbench/gemm_new_faithful.py" --quick --contract math
expect 1 "$P/kernelbench/gemm.py" --solution "$P/kernelbench/gemm_new_bf16_acc.py" --quick

if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  expect 1 "$P/sol_gemm" --solution "$P/sol_gemm/solution_cuda.json" --json "$tmp/u.json"
  [ "$(field "$tmp/u.json" 'd["verdict"]')" = unsupported ] || bad "a CUDA solution without a GPU is not unsupported"
fi

expect 2 "$P/sol_gemm" --contract fp8
expect 2
mkdir "$tmp/bad"
echo '{"name": "x", "axes": {}, "inputs": {}, "outputs": {}, "reference": "def run(): pass"}' >"$tmp/bad/definition.json"
expect 3 "$tmp/bad"
grep -q "definition.json" "$tmp/err" || bad "a bad problem's message does not name the file"
grep -q "inputs" "$tmp/err" || bad "a bad problem's message does not name the field"

# no Python, or one without torch: exit 2 with a message
PARITY_PYTHON=/nonexistent/python expect 2 "$P/sol_gemm"
printf '#!/bin/sh\nexec %s -S "$@"\n' "$PY" >"$tmp/nosite"
chmod +x "$tmp/nosite"
PARITY_PYTHON="$tmp/nosite" expect 2 "$P/sol_gemm"
grep -q "torch" "$tmp/err" || bad "no torch: the message does not say so ($(cat "$tmp/err"))"

[ $fail = 0 ] && echo "cli_problem: ok"
exit $((fail > 0))

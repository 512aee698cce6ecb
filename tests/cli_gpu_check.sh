#!/usr/bin/env bash
# scripts/gpu-check.sh, the one script that runs everything needing a GPU: on a machine without
# one it says so and exits 77 having run nothing; its Python rows (parity.check on device tensors,
# a faithful kernel and a wrong-eps one) are tested here on CPU tensors with --cpu-dry-run, so the
# script a GPU session runs in its few minutes is known to work before it gets there.
. "$(dirname "$0")/lib_cli.sh"
SRC=${PARITY_SRC:?}
B=${PARITY_BUILD:?}
PY=${PARITY_PYTHON:-python3}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "note: a GPU is here; the no-GPU branch is not exercised"
else
  "$SRC/scripts/gpu-check.sh" --build "$B" >"$tmp/nogpu.txt" 2>&1
  rc=$?
  [ $rc = 77 ] && ok || bad "without a GPU: exit $rc, want 77"
  grep -q "no GPU on this machine" "$tmp/nogpu.txt" && ok || bad "without a GPU: no message saying so"
fi
"$SRC/scripts/gpu-check.sh" --bogus >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok || bad "unknown argument: exit $rc, want 2"
if [ ! -f "$B/python/libparity_python.so" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "$pass passed, $fail failed"
  [ $fail = 0 ] || exit 1
  echo "skip: the --cpu-dry-run half needs torch in $PY and $B/python/libparity_python.so"; exit 77
fi
preload_sanitizers "$B/python/libparity_python.so"
"$SRC/scripts/gpu-check.sh" --cpu-dry-run --build "$B" --python "$PY" >"$tmp/dry.txt" 2>&1
rc=$?
[ $rc = 0 ] && ok || { bad "--cpu-dry-run: exit $rc, want 0"; cat "$tmp/dry.txt"; }
grep -q "gpu-check: 4 passed, 0 failed, 2 skipped" "$tmp/dry.txt" && ok || { bad "--cpu-dry-run: not 4 rows as expected"; cat "$tmp/dry.txt"; }
grep -q "emb_bwd_bf16 .*| unfaithful *| unfaithful" "$tmp/dry.txt" && ok || bad "the incident's kernel row is missing"
echo "$pass passed, $fail failed"
[ $fail = 0 ]

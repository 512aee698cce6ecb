#!/usr/bin/env bash
# examples/python/quickstart.py (the README's "From Python") on the source-tree package and this
# build's bridge: with torch hidden (numpy is the package's only hard dependency) it must judge
# its numpy kernels, and with torch, when this Python has it, the torch kernels; either way the
# faithful one faithful, the bf16-accumulating one unfaithful ("closest to bf16 sequential" for
# the numpy emulation of a bf16 accumulator), the first line naming the kernels, the last line
# "verdicts: faithful unfaithful" (.ci/run prints it). Skips (77) when the Python lacks numpy.
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:?}
BUILD=${PARITY_BUILD:?}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "skip: $PY cannot import numpy (the Python package's one hard dependency)"
  exit 77
fi
BRIDGE=$BUILD/python/libparity_python.so
[ -f "$BRIDGE" ] || { echo "skip: $BRIDGE not built"; exit 77; }
. "$(dirname "$0")/lib_cli.sh"
preload_sanitizers "$BRIDGE"
export PARITY_PY_LIB=$BRIDGE

# torch hidden: sys.modules["torch"] = None makes `import torch` fail and find_spec answer None,
# as in a Python without it (sitecustomize runs first, spawned workers included).
mkdir -p "$tmp/notorch" "$tmp/run"
printf 'import sys\nsys.modules["torch"] = None  # as if torch were not installed\n' >"$tmp/notorch/sitecustomize.py"
if PYTHONPATH="$tmp/notorch" "$PY" -c 'import torch' 2>/dev/null; then bad "torch could not be hidden"; fi

quickstart() {  # quickstart.py run from another folder; $1: extra PYTHONPATH entry
  (cd "$tmp/run" && PYTHONPATH="$1${1:+:}$SRC/python" "$PY" "$SRC/examples/python/quickstart.py")
}
check_output() {  # $1 file, $2 expected "kernels:" word, $3 label
  [ "$(head -1 "$1" | cut -d' ' -f1-2)" = "kernels: $2" ] && ok || bad "$3: first line '$(head -1 "$1")', want 'kernels: $2 ...'"
  [ "$(tail -1 "$1")" = "verdicts: faithful unfaithful" ] && ok || bad "$3: last line '$(tail -1 "$1")'"
  grep -q "workloads: uniform ok (.*), text ok" "$1" && ok || bad "$3: the fp32 kernel is not faithful on uniform and text"
  grep -q "workloads: text FAIL" "$1" && ok || bad "$3: the bf16 kernel does not fail on text"
}

quickstart "$tmp/notorch" >"$tmp/np.txt" 2>&1; rc=$?
[ $rc = 0 ] && ok || bad "quickstart without torch: exit $rc"
check_output "$tmp/np.txt" numpy "without torch"
grep -q "closest to bf16 sequential" "$tmp/np.txt" && ok || bad "without torch: the diagnosis does not name a bf16 accumulator"
[ $fail = 0 ] || cat "$tmp/np.txt"

if "$PY" -c 'import torch' 2>/dev/null; then
  f0=$fail
  quickstart "" >"$tmp/torch.txt" 2>&1; rc=$?
  [ $rc = 0 ] && ok || bad "quickstart with torch: exit $rc"
  check_output "$tmp/torch.txt" torch "with torch"
  [ $fail = "$f0" ] || cat "$tmp/torch.txt"
else
  echo "note: $PY has no torch; the quickstart's torch kernels were not run"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]

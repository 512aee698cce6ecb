#!/usr/bin/env bash
# `mpirun -n R parity problem FOLDER ...` (programs/problem_mpi.c, docs/problems.md "Many problems,
# many machines"): the ranks split the folder's problems and rank 0 prints the report and writes
# the JSON of one process, in the folder's order, exit code included: 2, 3 and 6 ranks (6 > the
# problems: idle ranks), --jobs inside ranks, an unfaithful kernel (exit 1), a bad problem file
# (exit 3), problems with no solution (said once), a usage error (exit 2, said once). The JSON is
# compared without its "seconds" (a timing); the text byte for byte. Oversubscribed on 2 cores;
# skips (77) without mpirun, MPI support in the binary, or a Python with numpy and torch.
set -u
: "${PARITY:?set PARITY to the parity binary}"
PY=${PARITY_PYTHON:-python3}
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"; exit 77
fi
if ! ldd "$PARITY" 2>/dev/null | grep -q libmpi; then
  echo "SKIP: $PARITY was built without MPI (CMake found none, or -DPARITY_CHECK_MPI=OFF)"; exit 77
fi
if ! "$PY" -c 'import numpy, torch' 2>/dev/null; then
  echo "SKIP: $PY cannot import numpy and torch (parity problem runs PyTorch references)"; exit 77
fi
export PARITY_PYTHON="$PY"
. "$(dirname "$0")/lib_cli.sh" # tmp, fail, bad; preload_sanitizers
preload_sanitizers "$(dirname "$PARITY")/python/libparity_python.so"
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations are not ours
SRC=$(cd "$(dirname "$0")/.." && pwd)
KB="$SRC/python/tests/problems/kernelbench"
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none)

# A KernelBench level folder and a run folder by KernelBench's naming: a faithful kernel, a tail
# it drops (unfaithful), a problem with no kernel (skipped), a problem file that does not import
# (exit 3), and two SOL-ExecBench problem folders judged on their reference.
lv="$tmp/KernelBench/level1"; run="$tmp/run"
mkdir -p "$lv" "$run"
cp "$KB/gemm.py" "$lv/1_Gemm.py"
cp "$KB/softmax.py" "$lv/2_Softmax.py"
cp "$KB/mse_loss.py" "$lv/3_MSELoss.py"
cp "$KB/rmsnorm_gamma.py" "$lv/4_RMSNorm.py"
printf 'import torch\nclass Model(torch.nn.Module:\n    pass\ndef get_inputs():\n    return []\n' >"$lv/5_Broken.py"
cp "$KB/gemm_new_faithful.py" "$run/level_1_problem_1_sample_0_kernel.py"
cp "$KB/softmax_new_tail.py" "$run/level_1_problem_2_sample_0_kernel.py"
cp "$KB/rmsnorm_gamma_new_faithful.py" "$run/level_1_problem_4_sample_0_kernel.py"
cp "$KB/gemm_new_faithful.py" "$run/level_1_problem_5_sample_0_kernel.py"
sol="$tmp/sol"; mkdir -p "$sol"
cp -r "$SRC/python/tests/problems/sol_rmsnorm" "$SRC/python/tests/problems/sol_mse_loss" "$sol/"

strip() { "$PY" -c '
import json, sys
def s(o):
    if isinstance(o, dict): return {k: s(v) for k, v in o.items() if k != "seconds"}
    if isinstance(o, list): return [s(v) for v in o]
    return o
print(json.dumps(s(json.load(open(sys.argv[1]))), sort_keys=True))' "$1"; }

one() { # NAME ARGS...: the single-process run everything is compared with
  local name=$1; shift
  "$PARITY" problem "$@" --json "$tmp/$name.json" >"$tmp/$name.txt" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}
same() { # BASE NAME NP ARGS...: the MPI run of NP ranks reports what BASE did
  local base=$1 name=$2 np=$3; shift 3
  timeout 300 "${MPI[@]}" -np "$np" "$PARITY" problem "$@" --json "$tmp/$name.json" \
    >"$tmp/$name.txt" 2>"$tmp/$name.err"
  local rc=$?
  if [ "$rc" = "$(cat "$tmp/$base.rc")" ] && cmp -s "$tmp/$base.txt" "$tmp/$name.txt" &&
     [ "$(strip "$tmp/$base.json")" = "$(strip "$tmp/$name.json")" ]; then ok; else
    bad "-np $np $*: exit $rc (one process: $(cat "$tmp/$base.rc")), or its report differs"
    diff "$tmp/$base.txt" "$tmp/$name.txt" | head -20
    tail -20 "$tmp/$name.err"
    echo "reproduce: ${MPI[*]} -np $np $PARITY problem $*"
  fi
}

one kb "$lv" --solutions "$run" --quick
[ "$(cat "$tmp/kb.rc")" = 3 ] && ok || bad "single process: exit $(cat "$tmp/kb.rc"), want 3 (a broken problem file)"
grep -q "^  2_Softmax .* unfaithful" "$tmp/kb.txt" && ok || bad "single process: the dropped tail is not unfaithful"
same kb kb2 2 "$lv" --solutions "$run" --quick
same kb kb3 3 "$lv" --solutions "$run" --quick
same kb kb6 6 "$lv" --solutions "$run" --quick
same kb kb2j 2 "$lv" --solutions "$run" --quick --jobs 2
# the skipped problem and the broken file are each said once, by rank 0
[ "$(grep -c "no solution in" "$tmp/kb3.err")" = 1 ] && ok || bad "-np 3: the skipped problems are not said once"
[ "$(grep -v "^parity problem: rank " "$tmp/kb3.err" | grep -c "5_Broken")" = 1 ] && ok || bad "-np 3: the broken problem is not said once"
# progress: a line per problem from the rank that judged it
[ "$(grep -c "^parity problem: rank [0-9]*: [0-9]*/[0-9]* " "$tmp/kb3.err")" = 4 ] && ok ||
  bad "-np 3: no progress line per judged problem: $(cat "$tmp/kb3.err")"

one sol "$sol" --quick
[ "$(cat "$tmp/sol.rc")" = 0 ] && ok || bad "single process, SOL folders: exit $(cat "$tmp/sol.rc")"
same sol sol2 2 "$sol" --quick

# a usage error: exit 2, said once
timeout 120 "${MPI[@]}" -np 3 "$PARITY" problem "$lv" --jobs x >"$tmp/u.txt" 2>"$tmp/u.err"
rc=$?
[ "$rc" = 2 ] && ok || bad "-np 3 --jobs x: exit $rc, want 2"
[ "$(grep -c "jobs" "$tmp/u.err")" -ge 1 ] && [ "$(grep -c "^parity problem: argument --jobs" "$tmp/u.err")" = 1 ] && ok ||
  bad "-np 3 --jobs x: the usage error is not said once: $(head -c 600 "$tmp/u.err")"

echo "cli_problem_mpi: $pass passed, $fail failed"
[ $fail = 0 ]

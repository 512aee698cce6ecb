#!/usr/bin/env bash
# `mpirun -n R parity check ...`: the ranks split the check's grid (floors, kernel x workload,
# baselines) and rank 0 writes the report, byte-identical (text and JSON) to one process's, exit
# code included, for 2, 3 and 5 ranks (5 > the units of some workloads: idle ranks), with --jobs
# inside ranks, and with a floor cache that only rank 0 has. A segfaulting kernel is a verdict on
# whichever rank ran it. Oversubscribed on 2 cores; skips (77) without mpirun or MPI support.
. "$(dirname "$0")/lib_cli.sh"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"; exit 77
fi
if ! ldd "$P" 2>/dev/null | grep -q libmpi; then
  echo "SKIP: $P was built without MPI (CMake found none, or -DPARITY_CHECK_MPI=OFF)"; exit 77
fi
CHEATS="${PARITY_BUILD:?}/tests/plugins/libparity_cheats.so"
[ -f "$CHEATS" ] || { echo "SKIP: $CHEATS not built"; exit 77; }
# Leak checking of Open MPI's own allocations is not ours to judge.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none)
OP=embedding_rmsnorm_bwd
GRID=(--workload uniform --shape 512x256 --timeout 20 -q
      --kernel builtin:fp32_seq --kernel builtin:bf16_accum --kernel builtin:tail_d128
      --kernel "$CHEATS:segfault" --kernel "$CHEATS:oob_write")

"$P" check $OP "${GRID[@]}" --no-cache --json "$tmp/one.json" >"$tmp/one.txt" 2>"$tmp/one.err"
echo $? >"$tmp/one.rc"
[ "$(cat "$tmp/one.rc")" = 1 ] && ok || bad "single process: exit $(cat "$tmp/one.rc"), want 1"
grep -q "cheats.so:segfault  *crashed" "$tmp/one.txt" && ok || bad "single process: segfault not a crash verdict"

mpi_same() { # NAME NP extra-args...
  local name=$1 np=$2; shift 2
  timeout 300 "${MPI[@]}" -np "$np" "$P" check $OP "${GRID[@]}" "$@" --json "$tmp/$name.json" \
    >"$tmp/$name.txt" 2>"$tmp/$name.err"
  local rc=$?
  if [ "$rc" = "$(cat "$tmp/one.rc")" ] && cmp -s "$tmp/one.txt" "$tmp/$name.txt" &&
     cmp -s "$tmp/one.json" "$tmp/$name.json"; then ok; else
    bad "-np $np $*: exit $rc, or its report differs from one process's"
    diff "$tmp/one.txt" "$tmp/$name.txt" | head -20
    tail -20 "$tmp/$name.err"
    echo "reproduce: ${MPI[*]} -np $np $P check $OP ${GRID[*]} $*"
  fi
}
mpi_same np2 2 --no-cache
mpi_same np3 3 --no-cache
mpi_same np5 5 --no-cache
mpi_same np2j2 2 --no-cache --jobs 2
# A cache only rank 0 reads (every rank is handed its floors): cold, then warm.
mpi_same cold 3 --cache "$tmp/cache"
ls "$tmp/cache" | grep -q '^floor-' && ok || bad "rank 0 wrote no floor cache"
mpi_same warm 3 --cache "$tmp/cache"

echo "cli_check_mpi: $pass passed, $fail failed"
[ $fail = 0 ]

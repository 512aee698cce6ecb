# The all-reduce simulator against a real MPI_Allreduce under Open MPI: for each tuned algorithm
# (forced through coll_tuned_use_dynamic_rules / coll_tuned_allreduce_algorithm) and rank count,
# mpi/parity_mpi_allreduce must find the simulator of that algorithm bit-identical on every
# element. Skips (77) when mpirun or the MPI program is missing. Oversubscribed on 2 cores.
set -u
BIN=${PARITY_BUILD:?PARITY_BUILD must point at the build folder}/mpi/parity_mpi_allreduce
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"; exit 77
fi
if [ ! -x "$BIN" ]; then
    echo "SKIP: $BIN not built (CMake found no MPI, or mpi/ is not in the top CMakeLists' subdirectory list)"
    exit 77
fi
# Leak checking of Open MPI's own allocations is not ours to judge.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
# Shared-memory transport without CMA/ptrace (containers forbid it); root allowed in CI.
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca coll_tuned_use_dynamic_rules 1)
fails=0; runs=0
check() { # check NP ALGO [extra mca...] -- program args
    local np=$1 algo=$2; shift 2
    local mca=()
    while [ "$1" != "--" ]; do mca+=("$1"); shift; done
    shift
    out=$(timeout 120 "${MPI[@]}" "${mca[@]}" -np "$np" --mca coll_tuned_allreduce_algorithm "$algo" \
          "$BIN" "$@" 2>&1); rc=$?
    runs=$((runs + 1))
    if [ $rc -ne 0 ] || ! grep -q "agree bit for bit" <<<"$out"; then
        echo "FAIL: -np $np algorithm $algo ${mca[*]} $*: exit $rc"
        echo "$out"
        echo "reproduce: ${MPI[*]} ${mca[*]} -np $np --mca coll_tuned_allreduce_algorithm $algo $BIN $*"
        fails=$((fails + 1))
    else
        grep -E "^Open MPI|coll_tuned|predicted" <<<"$out" | sed 's/^/  /' | head -3
    fi
}
# 1 basic linear, 3 recursive doubling, 4 ring, 5 segmented ring, 6 Rabenseifner; 3, 6 and
# 8 ranks (non-powers of two exercise the pre-step of recursive doubling and Rabenseifner).
for algo in 1 3 4 5 6; do
    for np in 3 6 8; do
        check "$np" "$algo" -- --n 1001 --k 64 --seed 7
    done
done
# Other formats: bf16 (user op: fp32 add, bf16 rounding) and fp64.
check 8 4 -- --dtype bf16 --n 999 --k 64
check 6 3 -- --dtype bf16 --n 999 --k 64
check 5 6 -- --dtype fp64 --n 500 --k 64 --workload normal
# Fallbacks: ring with n < R runs recursive doubling; Rabenseifner with n < p' runs basic linear.
check 5 4 -- --n 3 --k 16
check 6 6 -- --n 3 --k 16
# Nonoverlapping = tuned reduce + bcast: predictable when the reduce is pinned to linear.
check 6 2 --mca coll_tuned_reduce_algorithm 1 -- --n 500 --k 64
echo "cli_mpi: $runs runs, $fails failures"
[ $fails -eq 0 ]

# ThreadSanitizer over the threaded paths: the logprob readers and comparison (parallel JSONL
# parse, dense rows, the direct path, pair comparison: test_logprob and the oracle's 1/2/3-thread
# runs), `parity train --jobs 2` (concurrent runs), `parity check --threads 4` (a kernel's
# threads and the reference's parallel loops) and `parity check --jobs 2 --threads 2` (the grid
# in forked workers, each with threaded kernels; its report must equal that of --jobs 1). Builds
# the library, the CLI and those tests with -fsanitize=thread into $PARITY_BUILD/tsan; any race
# report fails. Label "tsan" (and "long": it takes minutes, outside the fast suite):
#   cd build && ctest -L tsan --output-on-failure          (docs/fuzzing.md: what it covers)
set -u
SRC=${PARITY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
OUT=${PARITY_BUILD:-$SRC/build}/tsan
PY=${PARITY_PYTHON:-python3}
CC=${CC:-cc}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo 'int main(void){return 0;}' > "$T/t.c"
if ! "$CC" -fsanitize=thread "$T/t.c" -o "$T/t" 2>/dev/null || ! "$T/t"; then
    echo "SKIP: $CC cannot build and run with -fsanitize=thread (libtsan missing?)"; exit 77
fi
if ! cmake -S "$SRC" -B "$OUT" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$CC" \
       -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
       -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >"$T/cfg.log" 2>&1 ||
   ! cmake --build "$OUT" -j2 --target parity test_logprob test_train >"$T/build.log" 2>&1; then
    echo "FAIL: the TSan build"; tail -30 "$T/cfg.log" "$T/build.log"; exit 1
fi
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
fails=0
run() { # name, allowed exit codes ("0 1"), command...: fails on a race report (exit 66, or a
         # kernel child's status 66 in parity check's report) or any other exit code
    local name=$1 allowed=" $2 "; shift 2
    "$@" >"$T/$name.log" 2>&1
    local rc=$?
    if [ $rc -eq 66 ] || grep -q 'ThreadSanitizer\|status 66' "$T/$name.log"; then
        echo "FAIL: $name: ThreadSanitizer report"; grep -B2 -A30 'ThreadSanitizer\|status 66' "$T/$name.log" | head -60
        fails=$((fails + 1))
    elif [ "${allowed#* $rc }" = "$allowed" ]; then
        echo "FAIL: $name: exit $rc"; tail -20 "$T/$name.log"; fails=$((fails + 1))
    else
        echo "ok: $name (exit $rc, no race)"
    fi
}
D=$SRC/tests/data/logprobs
run test_logprob "0 77" env PARITY_SRC="$SRC" "$OUT/tests/test_logprob"
run logprobs_jsonl "0 1" "$OUT/parity" logprobs "$D/a.jsonl" "$D/b.jsonl" --floor "$D/a2.jsonl" --threads 4
run logprobs_npy "0 1" "$OUT/parity" logprobs "$D/a.npy" "$D/b.npy" --threads 4
if "$PY" -c 'import numpy' 2>/dev/null; then
    run oracle_logprobs "0" env PARITY="$OUT/parity" PARITY_SRC="$SRC" "$PY" "$SRC/tests/oracle_logprobs.py"
else
    echo "note: no numpy for $PY: the oracle's multi-thread runs are not covered"
fi
run test_train "0 77" env PARITY_SRC="$SRC" "$OUT/tests/test_train"
run train_jobs "0" "$OUT/parity" train --kernel builtin:fp32_seq --data zipf,uniform --optimizer sgd --steps 4 \
    --batch 8 --eval-every 2 --jobs 2 -q
# The kernel runs in a child forked from the (multi-threaded) parent: TSan starts threads there
# only with die_after_fork=0, and still reports their races (the child exits 66, which the
# report shows as a crash with status 66); the faithful kernel must pass (exit 0).
run check_threads "0" env TSAN_OPTIONS="$TSAN_OPTIONS die_after_fork=0" "$OUT/parity" check embedding_rmsnorm_bwd --kernel builtin:fp32_fast --workload uniform@1024x128x512 \
    --threads 4
# check --jobs: the workers are processes that share only an atomic unit counter and their result
# slots (TSan does not see across processes); what it sees is each worker's own threads (the
# kernels' --threads 2, the reference's loops) after the fork from a threaded parent. Three
# kernels and their floors are 5+ units, so both workers run some; bf16_accum fails (exit 1).
CK=(check embedding_rmsnorm_bwd --kernel builtin:fp32_fast --kernel builtin:fp32_seq --kernel builtin:bf16_accum
    --workload uniform@1024x128x512 --threads 2 --no-cache -q)
run check_jobs2 "1" env TSAN_OPTIONS="$TSAN_OPTIONS die_after_fork=0" "$OUT/parity" "${CK[@]}" --jobs 2 --json "$T/j2.json"
run check_jobs1 "1" env TSAN_OPTIONS="$TSAN_OPTIONS die_after_fork=0" "$OUT/parity" "${CK[@]}" --jobs 1 --json "$T/j1.json"
if cmp -s "$T/j1.json" "$T/j2.json"; then echo "ok: check --jobs 2 report equals --jobs 1"
else echo "FAIL: check --jobs 2 report differs from --jobs 1"; fails=$((fails + 1)); fi
echo "tsan: $fails failed"
exit $((fails > 0))

# A short libFuzzer run of every reader's fuzz target (fuzz/targets.list: one per file parity
# parses), each from its seed corpus: builds them with clang into $PARITY_FUZZ_BUILD (default
# build-fuzz-ci in the source tree, one folder for every build tree, so CI's second suite (the
# ASan one) reuses the first's: the whole library instrumented once takes minutes, incremental
# after) and runs each for $PARITY_FUZZ_SECONDS (default 2) seconds. Exit 77 (skip) when clang
# or libFuzzer is missing.
# The long run and the campaign figures: docs/fuzzing.md.
set -u
SRC=${PARITY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
OUT=${PARITY_FUZZ_BUILD:-$SRC/build-fuzz-ci}
SECS=${PARITY_FUZZ_SECONDS:-2}
CC=$(command -v clang || command -v clang-14 || true)
if [ -z "$CC" ]; then echo "SKIP: clang not found (apt-get install clang libclang-rt-14-dev)"; exit 77; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$T/p.c"
if ! "$CC" -fsanitize=fuzzer "$T/p.c" -o "$T/p" 2>/dev/null; then
    echo "SKIP: $CC has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"; exit 77
fi
if ! cmake -S "$SRC/fuzz" -B "$OUT" -DCMAKE_C_COMPILER="$CC" -DPARITY_FUZZ=ON >"$T/cfg.log" 2>&1 ||
   ! cmake --build "$OUT" -j2 >"$T/build.log" 2>&1; then
    echo "FAIL: building the fuzzers"; cat "$T/cfg.log" "$T/build.log" | grep -v Wpsabi | tail -30; exit 1
fi
fails=0 n=0
while read -r f corpus; do
    n=$((n + 1))
    mkdir -p "$T/$f"
    if [ ! -x "$OUT/$f" ] || ! ls "$SRC/$corpus"/* >/dev/null 2>&1; then
        echo "FAIL: $f: no binary or no seed corpus ($corpus)"; fails=$((fails + 1)); continue
    fi
    if ! PARITY_THREADS=1 ASAN_OPTIONS=detect_leaks=1 TMPDIR="$T" "$OUT/$f" -max_total_time="$SECS" -rss_limit_mb=1024 -timeout=10 \
         -artifact_prefix="$OUT/$f-" "$T/$f" "$SRC/$corpus" >"$T/$f.log" 2>&1; then
        echo "FAIL: $f found a crash (reproduce: $OUT/$f $(ls -t "$OUT/$f"-* 2>/dev/null | head -1)):"; grep -v "^#" "$T/$f.log" | tail -40
        fails=$((fails + 1))
    else
        runs=$(grep -Eo 'Done [0-9]+ runs' "$T/$f.log" | tail -1)
        # a target that ran nothing tested nothing
        if [ -z "$runs" ]; then echo "FAIL: $f: no 'Done N runs' line"; tail -5 "$T/$f.log"; fails=$((fails + 1))
        else echo "ok: $f $runs in ${SECS}s"; fi
    fi
done < <(grep '^fuzz_' "$SRC/fuzz/targets.list")
[ $n -ge 12 ] || { echo "FAIL: only $n targets in fuzz/targets.list"; fails=$((fails + 1)); }
exit $((fails > 0))

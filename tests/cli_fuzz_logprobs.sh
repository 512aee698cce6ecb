# A short libFuzzer run of each logprob reader (fuzz/), seeded from tests/corpus/logprobs:
# builds the fuzzers with clang into $PARITY_BUILD/fuzz and runs each for
# $PARITY_FUZZ_SECONDS (default 3) seconds. Exit 77 (skip) when clang or libFuzzer is missing.
# The long run: docs/logprobs.md, "Fuzzing".
set -u
SRC=${PARITY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
OUT=${PARITY_BUILD:-$SRC/build}/fuzz-logprobs
SECS=${PARITY_FUZZ_SECONDS:-3}
CC=$(command -v clang || command -v clang-14 || true)
if [ -z "$CC" ]; then echo "SKIP: clang not found (apt-get install clang libclang-rt-14-dev)"; exit 77; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$T/p.c"
if ! "$CC" -fsanitize=fuzzer "$T/p.c" -o "$T/p" 2>/dev/null; then
    echo "SKIP: $CC has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"; exit 77
fi
if ! cmake -S "$SRC/fuzz" -B "$OUT" -DCMAKE_C_COMPILER="$CC" -DPARITY_FUZZ=ON >"$T/cfg.log" 2>&1 ||
   ! cmake --build "$OUT" -j2 >"$T/build.log" 2>&1; then
    echo "FAIL: building the fuzzers"; cat "$T/cfg.log" "$T/build.log" | tail -30; exit 1
fi
fails=0
for f in fuzz_lp_jsonl fuzz_lp_npy fuzz_lp_safetensors; do
    mkdir -p "$T/$f"
    if ! ASAN_OPTIONS=detect_leaks=1 "$OUT/$f" -max_total_time="$SECS" -rss_limit_mb=1024 -timeout=10 \
         -artifact_prefix="$T/$f-" "$T/$f" "$SRC/tests/corpus/logprobs" >"$T/$f.log" 2>&1; then
        echo "FAIL: $f found a crash (reproduce: $OUT/$f <artifact>):"; tail -40 "$T/$f.log"
        fails=$((fails + 1))
    else
        echo "ok: $f $(grep -Eo 'Done [0-9]+ runs' "$T/$f.log" | tail -1) in ${SECS}s"
    fi
done
exit $((fails > 0))

#!/usr/bin/env bash
# The fuzz campaign: every target of fuzz/targets.list (or those named) for SECONDS each, one at a
# time, at the lowest priority, each from a working copy of its seed corpus, rebuilding first.
#   fuzz/campaign.sh [-t SECONDS] [-o DIR] [TARGET...]     (default 3600 s, DIR build-fuzz/campaign)
# Writes DIR/summary.tsv (target, seconds, executions, crashes) and DIR/TARGET.log; a crash's
# input is DIR/TARGET/crash-* (replay: build-fuzz/TARGET FILE). docs/fuzzing.md has the figures.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECS=3600
OUT=$SRC/build-fuzz/campaign
while getopts t:o: f; do case $f in t) SECS=$OPTARG ;; o) OUT=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
B=$SRC/build-fuzz
mkdir -p "$OUT"
cmake -S "$SRC/fuzz" -B "$B" -DCMAKE_C_COMPILER=clang -DPARITY_FUZZ=ON >/dev/null || exit 1
grep '^fuzz_' "$SRC/fuzz/targets.list" | while read -r t corpus; do
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$t"; then continue; fi
    nice -n 19 cmake --build "$B" -j1 --target "$t" >"$OUT/$t.build.log" 2>&1 || { echo "$t: build failed" >&2; continue; }
    mkdir -p "$OUT/$t/work"
    cp -n "$SRC/$corpus"/* "$OUT/$t/work/" 2>/dev/null
    start=$(date +%s)
    ASAN_OPTIONS=detect_leaks=1 nice -n 19 "$B/$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=20 \
        -print_final_stats=1 -artifact_prefix="$OUT/$t/" "$OUT/$t/work" >"$OUT/$t.log" 2>&1
    rc=$?
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$OUT/$t.log" | grep -Eo '[0-9]+$' | tail -1)
    crashes=$(ls "$OUT/$t" | grep -cE '^(crash|leak|timeout|oom)-')
    printf '%s\t%s\t%s\t%s\trc=%s\t%s\n' "$t" "$(($(date +%s) - start))" "${runs:-?}" "$crashes" "$rc" \
        "$(git -C "$SRC" rev-parse --short HEAD)" >>"$OUT/summary.tsv"
done

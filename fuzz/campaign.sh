#!/usr/bin/env bash
# The fuzz campaign: the targets of fuzz/targets.list (or those named), each from a working copy
# of its seed corpus that persists between sessions, at the lowest priority, rebuilding first.
#   fuzz/campaign.sh [-t SECONDS] [-n RUNS] [-j LANES] [-u DEADLINE] [-R] [-o DIR] [TARGET...]
#   fuzz/campaign.sh -s [-o DIR]        the totals so far, per target, as a Markdown table
# -t  seconds per session (default 3600); -n  executions per target, counted over all sessions
#     (default 10^7: a target that has them is skipped, a session runs only the rest);
# -j  1 or 2 lanes, each running its share of the targets one after the other (default 1);
# -u  a deadline (anything `date -d` reads, e.g. 23:15): no session runs past it;
# -R  repeat rounds until every target has its executions or the deadline comes;
# -o  the campaign folder (default build-fuzz/campaign).
# Writes DIR/summary.tsv (one line per session: target, seconds, executions, crashes, exit code,
# commit, corpus files, CPU seconds of the fuzzer) and DIR/TARGET.log (the last session's output); a crash's input is
# DIR/TARGET/crash-* (replay: build-fuzz/TARGET FILE). docs/fuzzing.md has the figures.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECS=3600 RUNS=10000000 LANES=1 UNTIL= REPEAT=0 SUMMARY=0
OUT=$SRC/build-fuzz/campaign
while getopts t:n:j:u:o:Rs f; do
    case $f in
    t) SECS=$OPTARG ;; n) RUNS=$OPTARG ;; j) LANES=$OPTARG ;; o) OUT=$OPTARG ;; R) REPEAT=1 ;; s) SUMMARY=1 ;;
    u) UNTIL=$(date -d "$OPTARG" +%s) || exit 2 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$SRC/build-fuzz
mkdir -p "$OUT"
touch "$OUT/summary.tsv"
done_runs() { awk -F'\t' -v t="$1" '$1 == t && $3 ~ /^[0-9]+$/ { s += $3 } END { print s + 0 }' "$OUT/summary.tsv"; }

if [ "$SUMMARY" = 1 ]; then
    # exec per CPU second: over the sessions that recorded their CPU time (column 8)
    echo "| target | sessions | seconds | executions | exec/s | CPU s | exec per CPU s | crashes | corpus files |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    awk -F'\t' '{ n[$1]++; s[$1] += $2; x[$1] += $3; c[$1] += $4; k[$1] = $7; if (!($1 in o)) o[$1] = ++m
                  if ($8 ~ /^[0-9.]+$/) { u[$1] += $8; ux[$1] += $3 } }
        END { for (t in o) r[o[t]] = t
              for (i = 1; i <= m; i++) { t = r[i]
                  printf "| `%s` | %d | %d | %d | %d | %.0f | %s | %d | %s |\n", t, n[t], s[t], x[t], s[t] ? x[t] / s[t] : 0,
                         u[t], u[t] ? sprintf("%d", ux[t] / u[t]) : "-", c[t], k[t] } }' \
        "$OUT/summary.tsv"
    exit 0
fi

cmake -S "$SRC/fuzz" -B "$B" -DCMAKE_C_COMPILER=clang -DPARITY_FUZZ=ON >/dev/null || exit 1
# The code fuzzed: the commit the targets are built from (once, here: a session later in this
# invocation runs the same binaries whatever HEAD is by then), "+dirty" with uncommitted changes
# to what is built.
REV=$(git -C "$SRC" rev-parse --short HEAD)
[ -z "$(git -C "$SRC" status --porcelain -- src ops include fuzz)" ] || REV=$REV+dirty
mapfile -t LINES < <(grep '^fuzz_' "$SRC/fuzz/targets.list")
SEL=()
for l in "${LINES[@]}"; do
    t=${l%% *}
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$t"; then continue; fi
    nice -n 19 cmake --build "$B" -j1 --target "$t" >"$OUT/$t.build.log" 2>&1 || { echo "$t: build failed" >&2; continue; }
    SEL+=("$l")
done

# One session of target $1 (corpus $2): at most SECS seconds (and not past the deadline), at
# most the executions it still lacks. 0 if it ran, 1 if there was nothing (left) to run.
session() {
    local t=$1 corpus=$2 secs=$SECS left now
    left=$((RUNS - $(done_runs "$t")))
    [ "$left" -gt 0 ] || return 1
    if [ -n "$UNTIL" ]; then
        now=$(date +%s)
        [ $((UNTIL - now)) -lt "$secs" ] && secs=$((UNTIL - now))
        [ "$secs" -ge 30 ] || return 1
    fi
    mkdir -p "$OUT/$t/work"
    cp -n "$SRC/$corpus"/* "$OUT/$t/work/" 2>/dev/null
    local start rc runs crashes rev=$REV
    start=$(date +%s)
    # quarantine_size_mb=16, malloc_context_size=5 and -purge_allocator_interval=-1: ASan's
    # 256 MiB quarantine and libFuzzer's purge made every allocation touch fresh pages (a third of
    # the CPU time of fuzz_llama_tok in page faults); a crash found is replayed for full stacks.
    # PARITY_THREADS=1: a session is one lane on one core; the library's worker threads (case
    # building in fuzz_compare_inputs) only added their start-up and contention: 3,000 runs of
    # that target on its campaign corpus took 7.9 CPU-s with the default threads, 1.9 with one.
    PARITY_THREADS=1 ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=16:malloc_context_size=5 nice -n 19 \
        /usr/bin/time -f '%U %S' -o "$OUT/$t.cpu" "$B/$t" \
        -max_total_time="$secs" -runs="$left" -rss_limit_mb=2048 -timeout=20 -purge_allocator_interval=-1 \
        -print_final_stats=1 -artifact_prefix="$OUT/$t/" "$OUT/$t/work" >"$OUT/$t.log" 2>&1
    rc=$?
    local cpu
    cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.1f", $1 + $2 }' "$OUT/$t.cpu" 2>/dev/null)
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$OUT/$t.log" | grep -Eo '[0-9]+$' | tail -1)
    # (no final stats when it died: the last progress line's count)
    [ -n "$runs" ] || runs=$(grep -Eo '^#[0-9]+' "$OUT/$t.log" | tail -1 | tr -d '#')
    crashes=$(ls "$OUT/$t" | grep -cE '^(crash|leak|timeout|oom)-')
    printf '%s\t%s\t%s\t%s\trc=%s\t%s\t%s\t%s\n' "$t" "$(($(date +%s) - start))" "${runs:-0}" "$crashes" "$rc" \
        "$rev" "$(ls "$OUT/$t/work" | wc -l)" "${cpu:--}" >>"$OUT/summary.tsv"
    return 0
}

lane() { # lane number: the targets i with i % LANES == lane
    local k=$1 i ran
    while :; do
        ran=0
        for i in "${!SEL[@]}"; do
            [ $((i % LANES)) -eq "$k" ] || continue
            session ${SEL[$i]} && ran=1
        done
        [ "$REPEAT" = 1 ] && [ "$ran" = 1 ] || break
    done
}
for ((k = 0; k < LANES; k++)); do lane "$k" & done
wait

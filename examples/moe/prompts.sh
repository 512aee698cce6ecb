#!/usr/bin/env bash
# Writes the prompts of docs/moe-model.md's tables to stdout: 24 stories the dense stories260K
# samples itself (temperature 1, seeds 101..124, 64 tokens each, one per line). Deterministic:
# the same binary and checkpoint give the same lines.
# usage: examples/moe/prompts.sh [PARITY_BINARY] > prompts.txt
set -eu
P=${1:-build/parity}
for s in $(seq 101 124); do
    "$P" model run -t 1 --seed "$s" -n 64 2>/dev/null | tr '\n' ' ' | sed 's/ *$//'
    echo
done

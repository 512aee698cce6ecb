#!/usr/bin/env bash
# Prints docs/moe-model.md's RL table: what the drift between the training path (bf16, TP 8,
# EP 8, stepwise MoE) and serving paths does to one GRPO/PPO step, from two teacher-forced
# dumps of the MoE built from stories260K with a 16-patch image before every prompt (the prompts
# of examples/moe/prompts.sh):
# `parity logprobs TRAIN SERVE --rl` (A = trainer, B = the rollout engine).
# usage: examples/moe/rl.sh [PARITY_BINARY]   (default: build/parity; about 1 min on one core)
set -eu
P=${1:-build/parity}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$(dirname "$0")/prompts.sh" "$P" >"$T/prompts.txt"
TRAIN=bf16+tp8:ring+ep8
"$P" model dump --moe --image 16 --prompts "$T/prompts.txt" --path "$TRAIN" --out "$T/train.jsonl"
for serve in bf16+tp4:ring+ep4 bf16+tp4:ring+ep4:overlap bf16+fusedmoe+tp4:ring+ep4:overlap; do
    "$P" model dump --moe --image 16 --prompts "$T/prompts.txt" --path "$serve" --out "$T/serve.jsonl"
    echo "### trainer $TRAIN, rollout $serve"
    echo '```'
    "$P" logprobs "$T/train.jsonl" "$T/serve.jsonl" --moe --rl | sed -n '/^RL effects/,$p'
    echo '```'
done

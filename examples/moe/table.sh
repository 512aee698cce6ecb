#!/usr/bin/env bash
# Prints docs/moe-model.md's table: the MoE built from stories260K (data/stories260K_moe.bin),
# every prompt prefixed with a 16-patch synthetic image, each serving path against the fp64
# reference, then each MoE serving option alone against the bf16 training path (stepwise gate,
# dispatch, experts, combine), then training on 8 ranks (TP 8, EP 8) against serving on 4.
# Every row: one `parity model parity --moe --image 16 --floor --markdown`, a line per modality.
# The prompts: examples/moe/prompts.sh (24 of the dense model's own stories; 1914 scored tokens
# with the image: 384 image, 1530 text).
# usage: examples/moe/table.sh [PARITY_BINARY]   (default: build/parity; about 6 min on one core)
set -eu
P=${1:-build/parity}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$(dirname "$0")/prompts.sh" "$P" >"$T/prompts.txt"
echo "| path B | path A | modality | k3 mean | max \|Δlogprob\| | p99 \|Δlogprob\| | floor k3 (A rerun) | floor max \|Δ\| | router flips | hidden drift, last layer | first greedy divergence |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
row() { "$P" model parity --moe --image 16 --floor --prompts "$T/prompts.txt" --path "$2" --path "$1" -n 200 --markdown; }
# Whole paths against the fp64 reference.
for b in fp32 bf16 bf16+fusedmoe bf16+fusedmoe+ep4; do row "$b" ref; done
# One MoE serving option at a time, against the bf16 training path.
for b in bf16+fusedmoe bf16+moe:softmax=bf16 bf16+moe:topk=highid bf16+moe:order=slot \
         bf16+moe:combine=fp32acc bf16+moe:weights=fp32 bf16+moe:shared=before bf16+ep8 bf16+ep4 \
         bf16+ep4:overlap bf16+tp4:ring bf16+tp4:tree bf16+tp4:oneshot; do
    row "$b" bf16
done
# Trained on 8 ranks, served on 4: the reduction layout alone, then with overlap, then the fused
# kernel on top; and the fused kernel's share alone at the serving layout.
T8=bf16+tp8:ring+ep8
row bf16+tp4:ring+ep4 $T8
row bf16+tp4:ring+ep4:overlap $T8
row bf16+fusedmoe+tp4:ring+ep4:overlap $T8
row bf16+fusedmoe+tp4:ring+ep4:overlap bf16+tp4:ring+ep4:overlap

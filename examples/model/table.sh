#!/usr/bin/env bash
# Prints docs/model.md's drift table: every serving option against the fp64 reference, the same
# options against faithful bf16 (to isolate each one), and TP 8 against TP 4.
# usage: examples/model/table.sh [PARITY_BINARY]   (default: build/parity)
set -eu
P=${1:-build/parity}
echo "| path B | path A | k3 mean | max \|Δlogprob\| | p99 \|Δlogprob\| | hidden drift after layer 4 | first greedy divergence |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
row() { "$P" model parity --path "$2" --path "$1" -n 200 --markdown; }
for b in fp32 bf16 fp16 bf16acc ref+kvcache ref+tp8:ring bf16+fused bf16+kvcache bf16+splitk4 \
         bf16+tp4:ring bf16+tp4:tree bf16+tp4:oneshot bf16+tp4:ring:fp32 bf16+batch4:padded \
         bf16+batch4:packed bf16+fused+kvcache+tp4:ring:bf16+splitk2; do
    row "$b" ref
done
for b in bf16+fused bf16+kvcache bf16+splitk4 bf16+tp4:ring bf16+tp4:oneshot; do
    row "$b" bf16
done
for b in fp32+splitk4 fp32+tp4:ring fp32+kvcache; do
    row "$b" fp32
done
# Batch composition: the same split-K heuristic kernel, alone vs in a batch of 4.
row fp32+batch4:padded fp32+batch1
row fp32+batch4:packed fp32+batch1
row bf16+batch4:padded bf16+batch1
row ref+tp8:ring ref+tp4:ring
row bf16+tp8:ring bf16+tp4:ring
row bf16+tp8:oneshot bf16+tp4:oneshot
row bf16+fused+tp8:ring bf16+fused+tp4:ring

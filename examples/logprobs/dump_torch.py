#!/usr/bin/env python3
"""Dump per-token logprobs of a PyTorch forward pass (the "trainer" side) as parity's JSONL and
as safetensors, ready for `parity logprobs`. The model here is a tiny random causal LM so the
script runs anywhere; replace `forward` with your model's logits (B, T, V) and `batch` with the
token ids you sent to the inference server.

Logprob of token t_i at position i is log_softmax(logits[i-1])[t_i] (the first token has none:
written as null, as vLLM's prompt_logprobs and SGLang's input_token_logprobs do). Computed in
float32 from the logits, the precision the trainer uses for its loss.

usage: python dump_torch.py OUT_PREFIX [--top-k 5] [--prefill 8]
writes OUT_PREFIX.jsonl and OUT_PREFIX.safetensors
"""
import argparse
import json
import struct

import torch


def forward(ids, vocab=1000, dim=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(vocab, dim, generator=g) / dim ** 0.5
    w = torch.randn(dim, vocab, generator=g)
    h = torch.cumsum(emb[ids], dim=1) / torch.arange(1, ids.shape[1] + 1).view(1, -1, 1)  # causal mixing
    return h @ w  # (B, T, V)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=8, help="tokens that were the prompt")
    o = ap.parse_args()
    torch.manual_seed(1)
    batch = torch.randint(0, 1000, (4, 24))
    with torch.no_grad():
        lp_all = torch.log_softmax(forward(batch).float(), dim=-1)  # (B, T, V)
    lp = torch.full(batch.shape, float("nan"))
    lp[:, 1:] = lp_all[:, :-1].gather(-1, batch[:, 1:, None])[..., 0]
    top_lp, top_ids = lp_all[:, :-1].topk(o.top_k, dim=-1)
    with open(o.out + ".jsonl", "w") as f:
        for b in range(batch.shape[0]):
            n = batch.shape[1]
            f.write(json.dumps({
                "id": f"req-{b}",
                "token_ids": batch[b].tolist(),
                "logprobs": [None] + lp[b, 1:].tolist(),
                "top_ids": [[]] + top_ids[b].tolist(),
                "top_logprobs": [[]] + top_lp[b].tolist(),
                "prefill_len": o.prefill,
                "modality": "text",
            }) + "\n")
    # safetensors: [sequences, positions] with a mask for the missing first logprob
    mask = torch.ones(batch.shape, dtype=torch.uint8)
    mask[:, 0] = 0
    phase = torch.full(batch.shape, 2, dtype=torch.int32)
    phase[:, :o.prefill] = 1
    tensors = {"logprobs": ("F32", torch.nan_to_num(lp, nan=0.0).float()), "token_ids": ("I64", batch.long()),
               "mask": ("U8", mask), "phase": ("I32", phase)}
    hdr, off, blobs = {"__metadata__": {"producer": "examples/logprobs/dump_torch.py"}}, 0, []
    for k, (dt, t) in tensors.items():
        b = t.contiguous().numpy().tobytes()
        hdr[k] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(o.out + ".safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    print(f"wrote {o.out}.jsonl and {o.out}.safetensors")


if __name__ == "__main__":
    main()

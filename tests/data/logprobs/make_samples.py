#!/usr/bin/env python3
"""Regenerates the sample dumps in this folder (committed; rerun only to change them).

The same 6 requests are written as A (a "trainer": fp32 logprobs), B (a "server" with drift
injected: image tokens get N(0, 0.05) noise, text tokens N(0, 1e-4), and request r3 diverges
at position 7), A2 (A's engine again: N(0, 1e-4) everywhere, the floor), in parity's JSONL,
safetensors and npy; plus one small file per upstream JSON shape (OpenAI chat, OpenAI
completions, vLLM offline RequestOutput, SGLang /generate) written exactly as those APIs
return them. Deterministic (seed 7)."""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
S, P, K, V = 6, 40, 3, 500

ids = rng.integers(0, V, size=(S, P))
lens = [40, 33, 40, 25, 40, 12]
logits = rng.normal(0, 3, size=(S, P, V))
lse = np.log(np.exp(logits).sum(-1, keepdims=True))
lp_full = logits - lse
lp = np.take_along_axis(lp_full, ids[..., None], -1)[..., 0].astype(np.float32).astype(np.float64)
top = np.argsort(-lp_full, -1)[..., :K]
top_lp = np.take_along_axis(lp_full, top, -1).astype(np.float32).astype(np.float64)
mod = np.zeros((S, P), dtype=np.int32)
mod[:, 10:20] = 1  # positions 10..19 are image tokens
prefill = [20, 15, 30, 10, 25, 6]
domains = ["math", "code", "math", "chat", "code", "chat"]


def perturb(x, image_sigma, text_sigma, seed):
    g = np.random.default_rng(seed)
    sig = np.where(mod == 1, image_sigma, text_sigma)
    y = x + g.normal(0, 1, size=x.shape) * sig
    return np.minimum(y, 0.0).astype(np.float32).astype(np.float64)


dumps = {
    "a": (lp, top_lp, ids),
    "b": (perturb(lp, 0.05, 1e-4, 11), perturb(top_lp[..., 0], 0.05, 1e-4, 12), ids.copy()),
    "a2": (perturb(lp, 1e-4, 1e-4, 13), perturb(top_lp[..., 0], 1e-4, 1e-4, 14), ids.copy()),
}
dumps["b"][2][3, 7] = (ids[3, 7] + 1) % V  # token-id divergence in r3 at position 7


def fl(x):
    return float(np.float32(x))


for name, (l, t0, tok) in dumps.items():
    with open(os.path.join(HERE, f"{name}.jsonl"), "w") as f:
        for s in range(S):
            n = lens[s]
            tl = top_lp[s, :n].copy()
            if name != "a":
                tl[:, 0] = t0[s, :n]
            rec = {
                "id": f"r{s}",
                "domain": domains[s],
                "token_ids": [int(v) for v in tok[s, :n]],
                "logprobs": [fl(v) for v in l[s, :n]],
                "tokens": [f"t{int(v)}" for v in tok[s, :n]],
                "top_ids": [[int(v) for v in top[s, p]] for p in range(n)],
                "top_logprobs": [[fl(v) for v in tl[p]] for p in range(n)],
                "modality": ["image" if mod[s, p] else "text" for p in range(n)],
                "prefill_len": prefill[s],
            }
            f.write(json.dumps(rec) + "\n")


def write_safetensors(path, tensors, meta):
    hdr, blobs, off = {"__metadata__": meta}, [], 0
    for k, (dt, arr) in tensors.items():
        b = arr.tobytes()
        hdr[k] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


mask = np.zeros((S, P), dtype=np.uint8)
for s, n in enumerate(lens):
    mask[s, :n] = 1
phase = np.where(np.arange(P)[None, :] < np.array(prefill)[:, None], 1, 2).astype(np.int32)
write_safetensors(os.path.join(HERE, "a.safetensors"), {
    "logprobs": ("F32", lp.astype("<f4")),
    "token_ids": ("I64", ids.astype("<i8")),
    "mask": ("U8", mask),
    "modality": ("I32", mod.astype("<i4")),
    "phase": ("I32", phase),
    "top_ids": ("I32", top.astype("<i4")),
    "top_logprobs": ("F32", top_lp.astype("<f4")),
}, {"modality_names": "text,image", "producer": "tests/data/logprobs/make_samples.py"})
np.save(os.path.join(HERE, "a.npy"), lp.astype(np.float32))
np.save(os.path.join(HERE, "a.mask.npy"), mask.astype(bool))
np.save(os.path.join(HERE, "a.tokens.npy"), ids.astype(np.int32))
np.save(os.path.join(HERE, "b.npy"), dumps["b"][0].astype(np.float64))

# ---- upstream shapes: two requests, 5 generated tokens each ----
words = ["Hello", ",", " world", "!", " The", " cat", " sat", ".", " on", " mat"]
g = np.random.default_rng(3)


def toplist(n):
    v = np.sort(g.uniform(-4, -0.01, n))[::-1]
    return [round(float(x), 6) for x in v]


with open(os.path.join(HERE, "openai_chat.jsonl"), "w") as f:
    for r in range(2):
        content = []
        for p in range(5):
            w = words[(r * 3 + p) % 10]
            tl = toplist(2)
            content.append({"token": w, "logprob": tl[0], "bytes": list(w.encode()),
                            "top_logprobs": [{"token": w, "logprob": tl[0], "bytes": list(w.encode())},
                                             {"token": words[(r + p + 5) % 10], "logprob": tl[1],
                                              "bytes": list(words[(r + p + 5) % 10].encode())}]})
        f.write(json.dumps({
            "id": f"chatcmpl-{r}abc", "object": "chat.completion", "created": 1700000000 + r,
            "model": "gpt-4o-mini", "choices": [{"index": 0, "message": {"role": "assistant",
            "content": "".join(c["token"] for c in content)}, "logprobs": {"content": content, "refusal": None},
            "finish_reason": "length"}], "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}}) + "\n")

with open(os.path.join(HERE, "openai_completions.jsonl"), "w") as f:
    for r in range(2):
        toks = [words[(r * 3 + p) % 10] for p in range(5)]
        lps = [None] + [toplist(1)[0] for _ in range(4)]  # echo=True: the first token has no logprob
        tops = [None] + [{toks[p]: lps[p], words[(p + 5) % 10]: round(lps[p] - 1.5, 6)} for p in range(1, 5)]
        f.write(json.dumps({
            "id": f"cmpl-{r}xyz", "object": "text_completion", "created": 1700000000, "model": "davinci-002",
            "choices": [{"text": "".join(toks), "index": 0, "finish_reason": "length", "logprobs": {
                "tokens": toks, "token_logprobs": lps, "top_logprobs": tops,
                "text_offset": list(np.cumsum([0] + [len(t) for t in toks[:-1]]).tolist())}}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}}) + "\n")

with open(os.path.join(HERE, "vllm.jsonl"), "w") as f:
    # vllm.RequestOutput serialised field by field: prompt_logprobs[0] is None; each entry maps
    # token id -> Logprob(logprob, rank, decoded_token); the sampled token is always present.
    for r in range(2):
        pids = [int(x) for x in g.integers(0, 1000, 4)]
        oids = [int(x) for x in g.integers(0, 1000, 3)]

        def entry(tid):
            v = toplist(2)
            alt = (tid + 17) % 1000
            return {str(tid): {"logprob": v[1], "rank": 2, "decoded_token": f"w{tid}"},
                    str(alt): {"logprob": v[0], "rank": 1, "decoded_token": f"w{alt}"}}
        f.write(json.dumps({
            "request_id": str(r), "prompt": "p%d" % r, "prompt_token_ids": pids,
            "prompt_logprobs": [None] + [entry(t) for t in pids[1:]],
            "outputs": [{"index": 0, "text": "x", "token_ids": oids, "cumulative_logprob": -3.0,
                         "logprobs": [entry(t) for t in oids], "finish_reason": "length", "stop_reason": None}],
            "finished": True}) + "\n")

with open(os.path.join(HERE, "sglang.jsonl"), "w") as f:
    # /generate with return_logprob=True, top_logprobs_num=2, return_text_in_logprobs=True:
    # entries are [logprob, token_id, text]; the first input token's logprob is null.
    for r in range(2):
        iids = [int(x) for x in g.integers(0, 1000, 4)]
        oids = [int(x) for x in g.integers(0, 1000, 3)]
        inp = [[None, iids[0], f"w{iids[0]}"]] + [[toplist(1)[0], t, f"w{t}"] for t in iids[1:]]
        out = [[toplist(1)[0], t, f"w{t}"] for t in oids]
        otop = [[[e[0], e[1], e[2]], [round(e[0] - 1.0, 6), (e[1] + 1) % 1000, "alt"]] for e in out]
        f.write(json.dumps({"text": "xyz", "meta_info": {
            "id": f"{r}f00ba4", "finish_reason": {"type": "length", "length": 3}, "prompt_tokens": 4,
            "completion_tokens": 3, "cached_tokens": 0, "input_token_logprobs": inp,
            "output_token_logprobs": out, "input_top_logprobs": [None] * 4, "output_top_logprobs": otop}}) + "\n")
print("samples written to", HERE)

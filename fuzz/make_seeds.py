"""Writes the seed corpora of the fuzz targets (fuzz/targets.list) that are not hand-written:
tests/corpus/{npy_sidecar,llama_ckpt,llama_tok,gpt2_encoder,gpt2_vocab,compare_outputs,caches}.
Run from the source root: .venv/bin/python fuzz/make_seeds.py [PARITY-BINARY]. Deterministic;
compare_inputs and moe_side need the parity binary (`parity gen`, `parity model upcycle`). manifest
seeds are tests/data/manifest."""
import io, os, shutil, struct, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = os.path.join(ROOT, "tests", "corpus")


def put(sub, name, data):
    d = os.path.join(C, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy(a, version=None):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, a, version=version)
    else:
        np.save(b, a)
    return b.getvalue()


# npy sidecars of fuzz_lp_npy_sidecar's fixed [2, 3] dump: first byte even = mask, odd = tokens
put("npy_sidecar", "mask_u1", b"\0" + npy(np.array([[1, 1, 0], [1, 0, 0]], np.uint8)))
put("npy_sidecar", "mask_bool", b"\0" + npy(np.array([[True, False, True], [True, True, False]])))
put("npy_sidecar", "mask_f4_fortran", b"\0" + npy(np.asfortranarray(np.array([[1, 0, 1], [0, 1, 1]], np.float32))))
put("npy_sidecar", "mask_i8_v2", b"\0" + npy(np.ones((2, 3), np.int64), version=(2, 0)))
put("npy_sidecar", "mask_wrong_shape", b"\0" + npy(np.ones((3, 2), np.uint8)))
put("npy_sidecar", "tokens_i4", b"\1" + npy(np.array([[5, 6, 7], [8, 9, 10]], np.int32)))
put("npy_sidecar", "tokens_i8", b"\1" + npy(np.array([[5, -6, 7], [2**40, 9, 10]], np.int64)))
put("npy_sidecar", "tokens_float", b"\1" + npy(np.zeros((2, 3), np.float32)))


# llama2.c checkpoints: header (dim, hidden, layers, heads, kv_heads, +-vocab, seq) + weights
def ckpt(D, F, L, H, KV, V, S, shared=True, seed=0):
    hs = D // H
    n = V * D + L * D + L * D * D + 2 * L * hs * KV * D + L * D * D + L * D + 3 * L * F * D + D + S * hs
    if not shared:
        n += V * D
    w = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 0.1
    return struct.pack("<7i", D, F, L, H, KV, V if shared else -V, S) + w.tobytes()


put("llama_ckpt", "tiny_shared", ckpt(8, 16, 1, 2, 2, 12, 4))
put("llama_ckpt", "tiny_gqa_sep", ckpt(8, 16, 2, 4, 2, 10, 3, shared=False, seed=1))
put("llama_ckpt", "header_only", struct.pack("<7i", 8, 16, 1, 2, 2, 12, 4))


# llama2.c tokenizers: first two bytes = vocab - 3 (little endian), then the file
def tok(pieces, scores, max_len=None):
    ml = max_len if max_len is not None else max(len(p) for p in pieces)
    b = struct.pack("<i", ml)
    for p, s in zip(pieces, scores):
        b += struct.pack("<fi", s, len(p)) + p
    return struct.pack("<H", len(pieces) - 3) + b


base = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % i for i in range(256)]
extra = [b" ", b"e", b"t", b"h", b"th", b"the", b" the", b"\xc3\xa9", b"on", b"ce"]
put("llama_tok", "bytes_and_merges", tok(base + extra, [0.0] * 259 + [-float(i) for i in range(len(extra))]))
put("llama_tok", "minimal", tok(base[:3], [0.0, 0.0, 0.0]))
with open(os.path.join(ROOT, "data", "tok512.bin"), "rb") as f:
    put("llama_tok", "tok512", struct.pack("<H", 512 - 3) + f.read())


# GPT-2: the fixed files of fuzz/fuzz_gpt2.h and variants
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_bytes import b2u  # noqa: E402

import json
m = b2u()
enc = {m[b]: b for b in range(256)}
enc.update({"\u0120t": 256, "he": 257, "\u0120the": 258})
put("gpt2_encoder", "small", json.dumps(enc, ensure_ascii=False).encode())
enc2 = dict(enc)
enc2["\u0120t"] = 3  # duplicate id
put("gpt2_encoder", "dup_id", json.dumps(enc2, ensure_ascii=False).encode())
put("gpt2_encoder", "escaped", json.dumps(enc, ensure_ascii=True).encode())
put("gpt2_vocab", "small", "#version: 0.2\n\u0120 t\nh e\n\u0120t he\n".encode())
put("gpt2_vocab", "no_version", "\u0120 t\nh e\n".encode())
put("gpt2_vocab", "unknown_pair", "#version: 0.2\nx y z\n\u0120 t\n".encode())

# compare outputs for fuzz_compare.h's case (rmsnorm_fwd unit@4x8): y [4, 8]
from safetensors.numpy import save
put("compare_outputs", "y_f32", save({"y": np.ones((4, 8), np.float32)}))
put("compare_outputs", "y_f64", save({"y": np.zeros((4, 8), np.float64)}))
put("compare_outputs", "y_wrong_shape", save({"y": np.ones((8, 4), np.float32)}))
put("compare_outputs", "y_bf16", save({"y": np.zeros((4, 8), np.uint16)}).replace(b'"U16"', b'"BF16"'))

if len(sys.argv) > 1:
    d = os.path.join(C, "compare_inputs")
    os.makedirs(d, exist_ok=True)
    for op, wl, dt in [("rmsnorm_fwd", "unit@4x8x1", "bf16"), ("log_softmax", "small-v@3x1x16", "f32"),
                       ("embedding_fwd", "uniform@4x8x16", "bf16")]:
        out = os.path.join(d, f"{op}_{dt}")
        r = subprocess.run([sys.argv[1], "gen", op, "--workload", wl, "--dtype", dt, "--out", out + ".safetensors"])
        if r.returncode == 0:
            os.replace(out + ".safetensors", out)
        else:
            print(f"parity gen {op} --workload {wl} failed", file=sys.stderr)

# MoE side files for fuzz_moe_side's dense shape (dim 8, hidden 16, 1 layer, 2 heads): upcycled
# from a dense model of that shape with seq_len 256 (the upcycle calibrates on 200-token
# sequences) and a 10-piece llama2.c tokenizer (vocab 10); 4 experts top-2, shared part 0 and 8.
if len(sys.argv) > 1:
    with tempfile.TemporaryDirectory() as t:
        with open(os.path.join(t, "dense.bin"), "wb") as f:
            f.write(ckpt(8, 16, 1, 2, 2, 10, 256, seed=2))
        pieces = [b"<unk>", b"<s>", b"</s>", b"a", b"b", b"c", b" ", b"ab", b"ba", b"cc"]
        with open(os.path.join(t, "tok.bin"), "wb") as f:
            f.write(struct.pack("<i", 5) + b"".join(struct.pack("<fi", -float(i), len(p)) + p for i, p in enumerate(pieces)))
        for shared in (0, 8):
            out = os.path.join(t, "moe.bin")
            r = subprocess.run([sys.argv[1], "model", "upcycle", os.path.join(t, "dense.bin"), "--tokenizer",
                                os.path.join(t, "tok.bin"), "--out", out, "--experts", "4", "--topk", "2",
                                "--shared", str(shared)])
            if r.returncode == 0:
                put("moe_side", f"e4k2_shared{shared}", open(out, "rb").read())
            else:
                print(f"parity model upcycle --shared {shared} failed", file=sys.stderr)


# fuzz_caches: first byte even = a noise-floor entry for the target's fixed key (the exact text
# check_cache.c writes: magic, key, C99 hex float, FNV-1a 64 of those lines), odd = a ceilings
# file as bench_ceil.c writes it; plus a damaged copy of each.
FUZZ_KEY = b"parity 0.1.0 build fuzz; op gemm; workload fuzz; seed 1; threads 0; floor fp32_seq/2/1/0"


def fnv1a(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


for name, q in (("floor_half", b"0x1p-1"), ("floor_small", b"0x1.4483d9c55bb78p-5")):
    body = b"parity floor cache 1\nkey " + FUZZ_KEY + b"\nq " + q + b"\n"
    put("caches", name, b"\0" + body + b"sum %016x\n" % fnv1a(body))
put("caches", "floor_bad_sum", b"\0parity floor cache 1\nkey " + FUZZ_KEY + b"\nq 0x1p-1\nsum 0000000000000000\n")
ceil = (b"parity-ceilings 1\n# Fuzz CPU, 2 cores, 2 threads\nllc_bytes 33554432\narray_bytes 268435456\n"
        b"copy_gbs 11.5\ntriad_gbs 12.25\ncopy_spread 0.01\ntriad_spread 0.02\n"
        b"peak_gflops_f32 150\npeak_gflops_f64 75\nseconds 2.5\n")
put("caches", "ceilings", b"\1" + ceil)
put("caches", "regress_ceilings_huge", b"\1" + ceil.replace(b"llc_bytes 33554432", b"llc_bytes 1e300"))

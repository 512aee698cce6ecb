"""Writes the hostile-file suite: one file per malformed case for every reader parity has
(tests/hostile/<reader>/<case>) and tests/hostile/cases.tsv, which tests/cli_hostile.sh runs:
every case must exit 3 with a message matching the expected pattern (and naming the file), and
none may crash. Deterministic; run from the source root: .venv/bin/python tests/hostile/make_hostile.py
Columns of cases.tsv: file, command (bash; $P parity, $H the case file, $S the source root, $D an
empty folder that is $PARITY_DATA, $T scratch), expected message (grep -E)."""
import copy, json, os, struct, sys
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H = os.path.join(ROOT, "tests", "hostile")
rows = []


def case(reader, name, data, cmd, expect):
    d = os.path.join(H, reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    rows.append((f"{reader}/{name}", cmd, expect))


def jl(*objs):
    return "".join(json.dumps(o) + "\n" for o in objs)


# ---- logprob JSONL, parity's schema (counterpart: tests/data/logprobs/a.jsonl) ----------------
LPA = 'logprobs "$H" "$S/tests/data/logprobs/a.jsonl"'
good = {"id": "r0", "token_ids": [1, 2, 3], "logprobs": [-0.5, -1.25, -2.0]}


def mod(**kw):
    o = copy.deepcopy(good)
    o.update(kw)
    return o


J = "jsonl"
case(J, "empty.jsonl", "", LPA, "empty dump: no sequences")
case(J, "blank_lines.jsonl", "\n  \n\t\n", LPA, "empty dump: no sequences")
case(J, "invalid_json.jsonl", '{"id": "r0", "token_ids": [1, 2\n', LPA, r"\.jsonl:1: not a JSON object")
case(J, "nan_literal.jsonl", '{"id": "r0", "token_ids": [1], "logprobs": [NaN]}\n', LPA, r":1: not a JSON object")
case(J, "infinity_literal.jsonl", '{"id": "r0", "token_ids": [1], "logprobs": [-Infinity]}\n', LPA, r":1: not a JSON object")
case(J, "overflow_inf.jsonl", '{"id": "r0", "token_ids": [1, 2], "logprobs": [-0.5, 1e999]}\n', LPA,
     r":1: field 'logprobs'\[1\]: expected a number")
case(J, "positive.jsonl", jl(good, mod(id="r1", logprobs=[-0.5, 0.5, -1.0])), LPA,
     r":2: field 'logprobs'\[1\] is \+0\.5, positive beyond rounding")
case(J, "positive_top.jsonl", jl(mod(top_ids=[[1, 2], [2, 3], [3, 4]],
                                     top_logprobs=[[-0.5, -1], [-1.25, 0.25], [-2, -3]])), LPA,
     r":1: field 'top_logprobs'\[1\]\[1\] is \+0\.25, positive beyond rounding")
case(J, "probabilities.jsonl", jl(mod(logprobs=[0.61, 0.29, 0.1])), LPA, r"field 'logprobs'\[0\] is \+0\.61")
case(J, "lengths.jsonl", jl(mod(token_ids=[1, 2])), LPA, r":1: field 'token_ids': expected an array of 3 ids")
case(J, "id_not_integer.jsonl", jl(mod(token_ids=[1, 2.5, 3])), LPA, r"field 'token_ids'\[1\]: expected an integer")
case(J, "logprobs_not_array.jsonl", jl(mod(logprobs="-0.5")), LPA, r"field 'logprobs': expected an array")
case(J, "logprob_text.jsonl", jl(mod(logprobs=[-0.5, "x", -1])), LPA, r"field 'logprobs'\[1\]: expected a number")
case(J, "no_ids.jsonl", jl({"id": "r0", "logprobs": [-1.0]}), LPA, r"record needs 'token_ids'")
case(J, "bad_phase.jsonl", jl(mod(phase="both")), LPA, r"field 'phase'\[0\]: expected \"prefill\" or \"decode\"")
case(J, "top_ids_alone.jsonl", jl(mod(top_ids=[[1], [2], [3]])), LPA, r"'top_ids' and 'top_logprobs' must be given together")
case(J, "not_object.jsonl", "[1, 2, 3]\n", LPA, r":1: not a JSON object")
case(J, "truncated_line.jsonl", json.dumps(good)[:-9], LPA, r":1: not a JSON object")
case(J, "no_common_id.jsonl", jl(mod(id="zz0"), mod(id="zz1")), LPA, r"no sequence in common")
case(J, "all_null.jsonl", jl(*[mod(id=f"r{i}", logprobs=[None, None, None], token_ids=[1, 2, 3]) for i in range(6)]),
     'logprobs "$H" "$H"', r"nothing to compare: no token .* has a logprob on both sides")

# ---- engine shapes (counterparts: the samples of the same shape) ------------------------------
def sample(name):
    with open(os.path.join(ROOT, "tests", "data", "logprobs", name)) as f:
        return [json.loads(l) for l in f if l.strip()]


chat = sample("openai_chat.jsonl")
c = copy.deepcopy(chat[0]); c["choices"][0]["logprobs"]["content"][1]["logprob"] = 0.75
case("openai_chat", "positive.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/openai_chat.jsonl"',
     r":1: choices\[0\]\.logprobs\.content\[1\]\.logprob is \+0\.75, positive beyond rounding")
c = copy.deepcopy(chat[0]); c["choices"][0]["logprobs"]["content"][0]["token"] = 7
case("openai_chat", "token_not_string.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/openai_chat.jsonl"',
     r"content\[0\]\.token: expected a string")
c = copy.deepcopy(chat[0]); del c["choices"][0]["logprobs"]["content"]
c["choices"][0]["logprobs"]["konten"] = []
case("openai_chat", "no_content.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/openai_chat.jsonl" --format openai-chat',
     r"choices\[0\]\.logprobs\.content': expected an array")
co = sample("openai_completions.jsonl")
c = copy.deepcopy(co[0]); c["choices"][0]["logprobs"]["token_logprobs"][2] = 3.5
case("openai_completions", "positive.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/openai_completions.jsonl"',
     r"choices\[0\]\.logprobs\.token_logprobs\[2\] is \+3\.5")
c = copy.deepcopy(co[0]); c["choices"][0]["logprobs"]["tokens"].pop()
case("openai_completions", "lengths.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/openai_completions.jsonl"',
     r"expected arrays 'tokens' and 'token_logprobs' of equal length")
vl = sample("vllm.jsonl")
c = copy.deepcopy(vl[0]); tid = str(c["prompt_token_ids"][1]); c["prompt_logprobs"][1][tid]["logprob"] = 0.125
case("vllm", "positive.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/vllm.jsonl"',
     r"prompt_logprobs\[1\] is \+0\.125, positive")
c = copy.deepcopy(vl[0]); c["prompt_token_ids"].append(5)
case("vllm", "lengths.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/vllm.jsonl"',
     r"'prompt_logprobs' needs 'prompt_token_ids' of the same length")
c = copy.deepcopy(vl[0]); del c["prompt_logprobs"][1][tid]
case("vllm", "no_entry.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/vllm.jsonl"',
     r"no \{\"logprob\": number\} entry for the token id")
sg = sample("sglang.jsonl")
c = copy.deepcopy(sg[0]); c["meta_info"]["output_token_logprobs"][1][0] = 0.5
case("sglang", "positive.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/sglang.jsonl"',
     r"meta_info\.output_token_logprobs\[1\]\[0\] is \+0\.5")
c = copy.deepcopy(sg[0]); c["meta_info"]["input_token_logprobs"][2] = [-1.0]
case("sglang", "short_entry.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/sglang.jsonl"',
     r"input_token_logprobs\[2\]: expected \[logprob\|null, token_id, text\|null\]")
c = copy.deepcopy(sg[0]); c["meta_info"] = "x"
case("sglang", "meta_not_object.jsonl", jl(c), 'logprobs "$H" "$S/tests/data/logprobs/sglang.jsonl" --format sglang',
     r"field 'meta_info': expected an object")


# ---- npy (counterpart: tests/data/logprobs/b.npy) -----------------------------------------------
def npy(a, **kw):
    import io
    b = io.BytesIO()
    np.lib.format.write_array(b, a, **kw)
    return b.getvalue()


LPN = 'logprobs "$H" "$S/tests/data/logprobs/b.npy"'
base = -np.abs(np.random.default_rng(1).standard_normal((4, 12))).astype(np.float32)
ok = npy(base)
case("npy", "bad_magic.npy", b"\x93NUMPX" + ok[6:], LPN, r"offset 0: not a \.npy file")
case("npy", "version9.npy", ok[:6] + b"\x09" + ok[7:], LPN, r"offset 6: npy format version 9")
case("npy", "header_len_past_end.npy", ok[:8] + b"\xff\xff" + ok[10:64], LPN, r"offset 8: header length 65535 but only")
case("npy", "big_endian.npy", npy(base.astype(">f4")), LPN, r"descr '>f4' is not supported")
case("npy", "int_logprobs.npy", npy(np.zeros((4, 12), np.int32)), LPN, r"logprobs must be a 1-D or 2-D .* float array, got 2-D int")
case("npy", "three_dims.npy", npy(np.zeros((2, 2, 3), np.float32)), LPN, r"must be a 1-D or 2-D")
case("npy", "truncated.npy", ok[:-10], LPN, r"shape declares 192 data bytes but the file has 182")
case("npy", "fortran_maybe.npy", ok.replace(b"'fortran_order': False", b"'fortran_order': Maybe"), LPN,
     r"fortran_order must be True or False")
case("npy", "no_shape.npy", ok.replace(b"'shape'", b"'shap_'"), LPN, r"no 'shape' tuple")
x = base.copy(); x[2, 7] = np.nan
case("npy", "nan.npy", npy(x), LPN, r"offset [0-9]+: logprob of sequence 2, position 7 is NaN")
x = base.copy(); x[1, 3] = np.inf
case("npy", "plus_inf.npy", npy(x), LPN, r"logprob of sequence 1, position 3 is \+inf")
x = base.copy(); x[3, 11] = 0.01
case("npy", "positive.npy", npy(x), LPN, r"logprob of sequence 3, position 11 is \+0\.00999999978, positive beyond rounding")
x = base.astype(np.float64); x[0, 0] = 2.0
case("npy", "positive_f64_fortran.npy", npy(np.asfortranarray(x)), LPN, r"logprob of sequence 0, position 0 is \+2, positive")
case("npy", "zero_rows.npy", npy(np.zeros((0, 12), np.float32)), LPN, r"empty dump: no sequences")
case("npy", "zero_positions.npy", npy(np.zeros((4, 0), np.float32)), 'logprobs "$H" "$H"', r"nothing to compare")

# npy sidecars: the case file is X.npy (valid), the hostile part X.mask.npy / X.tokens.npy
for nm, suffix, arr, exp in [
        ("mask_shape", "mask", npy(np.ones((12, 4), np.uint8)), r"\.mask\.npy: header: shape does not match"),
        ("mask_bad_magic", "mask", b"NOTNUMPY" + npy(np.ones((4, 12), np.uint8))[8:], r"\.mask\.npy: offset 0: not a \.npy file"),
        ("mask_empty", "mask", b"", r"\.mask\.npy: empty or unreadable"),
        ("tokens_float", "tokens", npy(np.zeros((4, 12), np.float32)), r"tokens sidecar must hold integers"),
        ("tokens_truncated", "tokens", npy(np.zeros((4, 12), np.int32))[:-4], r"\.tokens\.npy: offset [0-9]+: shape declares")]:
    case("npy_sidecar", f"{nm}.npy", ok, LPN, exp)
    with open(os.path.join(H, "npy_sidecar", f"{nm}.{suffix}.npy"), "wb") as f:
        f.write(arr)


# ---- safetensors logprob dumps (counterpart: tests/data/logprobs/a.safetensors) ----------------
def st(tensors, meta=None, raw_header=None, trunc=0):
    hdr, off, blob = {}, 0, b""
    if meta:
        hdr["__metadata__"] = meta
    for k, (dt, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        hdr[k] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blob += b
    h = raw_header if raw_header is not None else json.dumps(hdr).encode()
    out = struct.pack("<Q", len(h)) + h + blob
    return out[:len(out) - trunc] if trunc else out


LPS = 'logprobs "$H" "$S/tests/data/logprobs/a.safetensors"'
ids = np.arange(48, dtype=np.int32).reshape(4, 12)
S_ = "safetensors"
case(S_, "header_len_absurd.safetensors", struct.pack("<Q", 1 << 60) + b"{}", LPS, r"offset 0: header length [0-9]+ exceeds the 100 MB limit")
case(S_, "header_not_json.safetensors", st({}, raw_header=b"{not json"), LPS, r"header is not valid JSON")
case(S_, "truncated.safetensors", st({"logprobs": ("F32", base)}, trunc=8), LPS, r"data_offsets end 192 is past the byte buffer")
case(S_, "offsets_past_end.safetensors",
     st({}, raw_header=json.dumps({"logprobs": {"dtype": "F32", "shape": [4, 12], "data_offsets": [0, 192]}}).encode()),
     LPS, r"tensor 'logprobs': data_offsets end 192 is past the byte buffer")
case(S_, "no_logprobs.safetensors", st({"scores": ("F32", base)}), LPS, r"no tensor named 'logprobs'")
case(S_, "int_logprobs.safetensors", st({"logprobs": ("I32", ids)}), LPS, r"expected a 1-D or 2-D float tensor, got 2-D I32")
case(S_, "ids_shape.safetensors", st({"logprobs": ("F32", base), "token_ids": ("I32", ids[:, :6])}), LPS,
     r"tensor 'token_ids': shape must equal that of 'logprobs'")
case(S_, "top_alone.safetensors", st({"logprobs": ("F32", base), "top_ids": ("I32", ids.reshape(4, 12, 1))}), LPS,
     r"top_ids \(integer\) and top_logprobs \(float\) must both be present")
x = base.copy(); x[1, 1] = np.nan
case(S_, "nan.safetensors", st({"logprobs": ("F32", x), "token_ids": ("I32", ids)}), LPS,
     r"tensor 'logprobs': logprob of sequence 1, position 1 is NaN")
x = base.copy(); x[2, 4] = 0.5
case(S_, "positive.safetensors", st({"log_probs": ("F32", x), "token_ids": ("I32", ids)}), LPS,
     r"tensor 'log_probs': logprob of sequence 2, position 4 is \+0\.5, positive beyond rounding")
tl = -np.abs(np.random.default_rng(2).standard_normal((4, 12, 2))).astype(np.float32); tl[0, 5, 1] = 1.5
case(S_, "positive_top.safetensors", st({"logprobs": ("F32", base), "top_ids": ("I32", np.ones((4, 12, 2), np.int32)),
                                         "top_logprobs": ("F32", tl)}), LPS,
     r"tensor 'top_logprobs': top logprob of sequence 0, position 5 is \+1\.5")
case(S_, "modality_range.safetensors", st({"logprobs": ("F32", base), "modality": ("I32", np.full((4, 12), 1000, np.int32))},
                                          meta={"modality_names": "text,image"}), LPS, r"modality value out of range")
case(S_, "zero_rows.safetensors", st({"logprobs": ("F32", np.zeros((0, 12), np.float32))}), LPS, r"empty dump: no sequences")
case(S_, "all_masked.safetensors", st({"logprobs": ("F32", base), "mask": ("U8", np.zeros((4, 12), np.uint8))}),
     'logprobs "$H" "$H"', r"nothing to compare")

# ---- compare: inputs (from `parity gen`) and outputs -------------------------------------------
with open(os.path.join(ROOT, "tests", "corpus", "compare_inputs", "rmsnorm_fwd_bf16"), "rb") as f:
    gen = f.read()
n = struct.unpack("<Q", gen[:8])[0]
ghdr = json.loads(gen[8:8 + n])
gblob = gen[8 + n:]


def restamp(h, blob=gblob):
    b = json.dumps(h).encode()
    return struct.pack("<Q", len(b)) + b + blob


CI = 'compare rmsnorm_fwd "$H" "$S/tests/corpus/compare_outputs/y_f32"'
case("compare_inputs", "not_safetensors", b"hello world, not a tensor file", CI, r"offset 0: header length")
h = copy.deepcopy(ghdr); del h["__metadata__"]["parity.seed"]
case("compare_inputs", "no_seed", restamp(h), CI, r"__metadata__: expected parity\.op, parity\.workload, parity\.seed")
h = copy.deepcopy(ghdr); h["__metadata__"]["parity.workload"] = "nosuch"
case("compare_inputs", "unknown_workload", restamp(h), CI, r"not known to this parity")
h = copy.deepcopy(ghdr); h["__metadata__"]["parity.op"] = "gemm"
case("compare_inputs", "other_op", restamp(h), CI, r"op 'gemm' .* not known to this parity")
blob = bytearray(gblob); blob[3] ^= 0x40
case("compare_inputs", "bytes_modified", restamp(ghdr, bytes(blob)), CI, r"tensor 'x': expected .* bytes that")
case("compare_inputs", "truncated", gen[:-16], CI, r"past the byte buffer")
CO = 'compare rmsnorm_fwd "$S/tests/corpus/compare_inputs/rmsnorm_fwd_bf16" "$H"'
yo = np.ones((4, 8), np.float32)
case("compare_outputs", "no_y", st({"z": ("F32", yo)}), CO, r"no tensor 'y'")
case("compare_outputs", "wrong_shape", st({"y": ("F32", yo.reshape(8, 4))}), CO, r"tensor 'y': shape does not fit the op: expected \[4,8\]")
case("compare_outputs", "int_dtype", st({"y": ("I32", yo.astype(np.int32))}), CO, r"tensor 'y': dtype I32, expected")
case("compare_outputs", "truncated", st({"y": ("F32", yo)}, trunc=4), CO, r"past the byte buffer")
case("compare_outputs", "empty", b"", CO, r"file has 0 bytes")


# ---- llama2.c checkpoints and tokenizers -----------------------------------------------------
MR = 'model run "$H" --tokenizer "$S/data/tok512.bin" -n 2'
hdr = struct.pack("<7i", 8, 16, 1, 2, 2, 12, 4)
case("llama_ckpt", "short_header", hdr[:20], MR, r"header: expected 28 bytes")
case("llama_ckpt", "negative_dim", struct.pack("<7i", -8, 16, 1, 2, 2, 12, 4), MR, r"header field dim = -8")
case("llama_ckpt", "heads_not_dividing", struct.pack("<7i", 9, 16, 1, 2, 2, 12, 4) + b"\0" * 64, MR, r"expected dim divisible by n_heads")
case("llama_ckpt", "odd_head_size", struct.pack("<7i", 6, 16, 1, 2, 2, 12, 4) + b"\0" * 64, MR, r"expected an even head size")
case("llama_ckpt", "size_mismatch", hdr + b"\0" * 100, MR, r"file size 128 bytes, but the header")
# (found by fuzz_llama_ckpt: negating vocab_size INT32_MIN, the "separate classifier" sign, overflowed)
case("llama_ckpt", "vocab_int_min", struct.pack("<7i", 8, 16, 1, 2, 2, -2**31, 4) + b"\0" * 64, MR,
     r"header field vocab_size = -2147483648")
case("llama_ckpt", "text_file", b"Once upon a time there was a checkpoint.\n", MR, r"header field")

# ---- MoE side files, against the shipped stories260K (data/stories260K_moe.bin: "PMOE", 7 int32
# version L D F E K n_shared, float32 scale, then per layer F int32 unit ids and E (D + 1) floats)
MM = 'model run --moe-file "$H" -n 2'
moe = open(os.path.join(ROOT, "data", "stories260K_moe.bin"), "rb").read()
mh = struct.unpack("<7i", moe[4:32])
F0, R0 = 36, 36 + 4 * mh[3]  # layer 0's unit ids, its router
case("moe_side", "bad_magic", b"PMOX" + moe[4:], MM, r"not a parity MoE side file \(magic PMOE\)")
case("moe_side", "wrong_layers", moe[:8] + struct.pack("<i", mh[1] + 1) + moe[12:], MM, r"does not fit the model \(L 5, D 64")
case("moe_side", "truncated", moe[:R0 + 10], MM, r"truncated at layer 0")
case("moe_side", "not_a_permutation", moe[:F0] + moe[F0 + 4:F0 + 8] + moe[F0 + 4:], MM, r"layer 0: the unit partition is not a permutation")
case("moe_side", "nan_router", moe[:R0] + struct.pack("<f", float("nan")) + moe[R0 + 4:], MM, r"layer 0: non-finite router")
case("moe_side", "trailing_bytes", moe + b"\0", MM, r"trailing bytes after the last layer")
case("moe_side", "empty", b"", MM, r"not a parity MoE side file")
MT = 'model run "$S/data/stories260K.bin" --tokenizer "$H" -n 2'
with open(os.path.join(ROOT, "data", "tok512.bin"), "rb") as f:
    tok = f.read()
case("llama_tok", "truncated", tok[:100], MT, r"token 7 of 512: truncated")
case("llama_tok", "trailing_bytes", tok + b"\0\0\0\0", MT, r"4 bytes after token 511")
ml = struct.unpack("<i", tok[:4])[0]
# the first entry: score (f32), len (i32), bytes
bad = bytearray(tok); bad[8:12] = struct.pack("<i", ml + 5)
case("llama_tok", "len_over_max", bytes(bad), MT, r"token 0: len 12, expected 0\.\.7 \(max_token_length\)")
bad = bytearray(tok); bad[8:12] = struct.pack("<i", -3)
case("llama_tok", "negative_len", bytes(bad), MT, r"token 0: len -3, expected 0\.\.7")
bad = bytearray(tok); bad[4:8] = struct.pack("<f", float("nan"))
case("llama_tok", "nan_score", bytes(bad), MT, r"token 0: score is not finite")
case("llama_tok", "empty", b"", MT, r"file has 0 bytes, expected at least 4")


# ---- GPT-2 encoder.json and vocab.bpe (found through $PARITY_DATA) ----------------------------
sys.path.insert(0, os.path.join(ROOT, "fuzz"))
from gpt2_bytes import b2u  # noqa: E402

m = b2u()
enc = {m[b]: b for b in range(256)}
GE = ('ln -s "$H" "$D/gpt2_encoder.json" && ln -s "$S/data/gpt2_vocab.bpe" "$D/gpt2_vocab.bpe" && '
      'PARITY_DATA="$D" $P gen embedding_fwd --workload text@16x8x50257 --out "$T/x.safetensors"')
case("gpt2_encoder", "invalid_json", b'{"a": 0,', GE, r"gpt2_encoder\.json: invalid JSON near byte")
case("gpt2_encoder", "not_object", b"[1, 2, 3]", GE, r"top level: expected an object")
case("gpt2_encoder", "too_few", json.dumps({m[b]: b for b in range(100)}).encode(), GE, r"100 tokens, expected at least 256")
e = dict(enc); e["zz"] = 3
case("gpt2_encoder", "dup_id", json.dumps(e).encode(), GE, r"id 3 already used")
e = dict(enc); e[m[65]] = 65.5
case("gpt2_encoder", "id_not_integer", json.dumps(e).encode(), GE, r"expected an integer id")
e = {m[b]: b for b in range(256) if b != 10}; e["xx"] = 10
case("gpt2_encoder", "missing_byte", json.dumps(e).encode(), GE, r"no token for byte 0x0A")
e = dict(enc); e["\u4e2d"] = 256
case("gpt2_encoder", "not_bytes_to_unicode", json.dumps(e, ensure_ascii=False).encode(), GE, r"is not in GPT-2's bytes_to_unicode map")
e = dict(enc); e[""] = 256
case("gpt2_encoder", "empty_token", json.dumps(e).encode(), GE, r"empty string")
GV = ('ln -s "$S/data/gpt2_encoder.json" "$D/gpt2_encoder.json" && ln -s "$H" "$D/gpt2_vocab.bpe" && '
      'PARITY_DATA="$D" $P gen embedding_fwd --workload text@16x8x50257 --out "$T/x.safetensors"')
case("gpt2_vocab", "one_token_line", "#version: 0.2\n\u0120 t\nhe\n".encode(), GV, r"gpt2_vocab\.bpe.*line 3")
case("gpt2_vocab", "unknown_token", "#version: 0.2\n\u0120 t\nqqqq zzzz\n".encode(), GV, r"gpt2_vocab\.bpe.*line 3")
case("gpt2_vocab", "three_tokens", "#version: 0.2\n\u0120 t h\n".encode(), GV, r"gpt2_vocab\.bpe.*line 2")

# ---- manifests -----------------------------------------------------------------------------------
MD = 'manifest diff "$H" "$S/tests/data/manifest/train_tp8.json"'
case("manifest", "invalid_json.json", b'{"schema": "parity.manifest/1",', MD, r"not valid JSON")
case("manifest", "wrong_schema.json", b'{"schema": 3}', MD, r"schema: expected \"parity\.manifest/1\"")
case("manifest", "not_object.json", b'["parity.manifest/1"]', MD, r"expected a JSON object")
case("manifest", "tp_text.json", b'{"schema": "parity.manifest/1", "parallel": {"tp": "eight"}}', MD, r"parallel\.tp: expected a positive integer")
case("manifest", "empty.json", b"", MD, r"not valid JSON")
case("manifest", "dup_section.json", b'{"schema": "parity.manifest/1", "parallel": {"tp": 4}, "parallel": {"tp": 8}}', MD,
     r"parallel: given twice")  # (found by fuzz_manifest: the diff and the lookup read different sections)
case("manifest", "dup_key.json", b'{"schema": "parity.manifest/1", "parallel": {"tp": 4, "tp": 8}}', MD,
     r"parallel\.tp: given twice")

with open(os.path.join(H, "cases.tsv"), "w") as f:
    f.write("# file\tcommand\texpected message (generated by make_hostile.py; see there)\n")
    for r in rows:
        f.write("\t".join(r) + "\n")
print(len(rows), "cases")

#!/usr/bin/env python3
"""Throughput of `parity logprobs` against a numpy script computing the same overall metrics
(|dlogprob| and |dprob| max/mean/p50/p99/p99.9, k1/k2/k3, chi2, importance-ratio stats,
Pearson, per-sequence log-ppl difference) on the same files, in the same run. Prints MB/s of
input (both dumps counted) and the CPU time (user + sys) per GB of input of both, the ratios,
and parity's peak resident set (ru_maxrss). Wall-clock figures on a shared machine are noisy;
the CPU seconds per GB are the steadier measure of work. Each figure is the best of --runs runs
(default 3), parity's and numpy's alternating, so both see the same drift of a shared machine.

usage: bench/bench_logprobs.py [--parity build/parity] [--seqs 2048] [--positions 2048]
                               [--jsonl-seqs 600] [--chat-seqs 100] [--shape-seqs 100]
                               [--threads N] [--runs 3]
                               [--keep DIR]
                               [--big-gb G [--big-dir DIR]]
--big-gb G: instead, the memory bound: write two safetensors dumps of G GB each (fp32 logprobs
and int32 token ids, a 64 MiB block of synthetic data repeated; B = A + noise), run parity on
them once, print wall time, CPU time and the peak resident set of that one process (/usr/bin/time's
%M, the maximum resident set size of /usr/bin/time -v), then delete them. Needs 2G GB of free disk.
Synthetic data: float32 logprobs of a softmax over N(0, 3) logits-like values, with B = A plus
N(0, 1e-3) noise; token ids 0..50k. npy and safetensors hold [seqs, positions]; "jsonl" holds
parity's own schema with token ids and logprobs per record; "safetensors-train" the layout a
trainer dumps (examples/logprobs/dump_torch.py): int64 ids, a u8 mask (the first position and
right padding) and an int32 phase, compared over the masked tokens; "jsonl-chat" the OpenAI chat
completions shape servers return (token, logprob and top-5 top_logprobs per token), for which
numpy's script extracts the logprobs with json.loads; "jsonl-compl", "jsonl-vllm" and
"jsonl-sglang" the OpenAI completions, vLLM offline (prompt logprobs) and SGLang
(meta_info.input_token_logprobs) shapes, each with five top logprobs per token (the first
position of the last two has none and is not compared). JSON numbers are spelled as engines and
examples/logprobs/dump_torch.py spell them: the float32 value widened to a Python float and
printed by repr (16-17 digits, -0.4887298047542572), not a short %.7g.
"""
import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_st(path, lp, ids, extra=(), idt=("I32", "<i4")):
    hdr, off, blobs = {}, 0, []
    for k, dt, a in (("logprobs", "F32", lp.astype("<f4")), ("token_ids", idt[0], ids.astype(idt[1]))) + tuple(extra):
        b = a.tobytes()
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def write_jsonl(path, lp, ids):
    with open(path, "w") as f:
        for s in range(lp.shape[0]):
            f.write('{"id":"r%d","token_ids":[%s],"logprobs":[%s]}\n' % (
                s, ",".join(map(str, ids[s].tolist())), ",".join(map(repr, lp[s].tolist()))))


def write_chat(path, lp, ids, k=5):
    """OpenAI chat completions shape, one response per line: choices[0].logprobs.content[] with
    token, logprob and top_logprobs (k alternatives), the shape servers return."""
    with open(path, "w") as f:
        for s in range(lp.shape[0]):
            content = []
            for p in range(lp.shape[1]):
                t = int(ids[s, p])
                v = float(lp[s, p])
                content.append({"token": "t%d" % t, "logprob": v,
                                "top_logprobs": [{"token": "t%d" % ((t + j) % 50000),
                                                  "logprob": float(np.float32(v - 0.5 * j))} for j in range(k)]})
            f.write(json.dumps({"id": "chatcmpl-%d" % s, "object": "chat.completion",
                                "choices": [{"index": 0, "logprobs": {"content": content}}]}) + "\n")


def write_compl(path, lp, ids, k=5):
    """OpenAI completions shape (echo of a prompt): choices[0].logprobs with tokens,
    token_logprobs and top_logprobs ({token: logprob}, k entries)."""
    with open(path, "w") as f:
        for s in range(lp.shape[0]):
            t = ids[s].tolist()
            v = lp[s].tolist()
            top = [{"t%d" % ((t[p] + j) % 50000): float(np.float32(v[p] - 0.5 * j)) for j in range(k)}
                   for p in range(len(t))]
            f.write(json.dumps({"id": "cmpl-%d" % s, "object": "text_completion",
                                "choices": [{"text": "", "index": 0, "finish_reason": "length",
                                             "logprobs": {"tokens": ["t%d" % x for x in t], "token_logprobs": v,
                                                          "top_logprobs": top, "text_offset": list(range(len(t)))}}]})
                    + "\n")


def write_vllm(path, lp, ids, k=5):
    """vLLM offline output with prompt logprobs: prompt_token_ids and prompt_logprobs, a
    {token id: {logprob, rank, decoded_token}} dict per position (k entries, the first position
    null)."""
    with open(path, "w") as f:
        for s in range(lp.shape[0]):
            t = ids[s].tolist()
            v = lp[s].tolist()
            pl = [None] + [{str((t[p] + j) % 50000): {"logprob": v[p] if j == 0 else float(np.float32(v[p] - 0.5 * j)),
                                                       "rank": j + 1, "decoded_token": "w%d" % ((t[p] + j) % 50000)}
                            for j in range(k)} for p in range(1, len(t))]
            f.write(json.dumps({"request_id": str(s), "prompt": "p", "prompt_token_ids": t, "prompt_logprobs": pl,
                                "outputs": []}) + "\n")


def write_sglang(path, lp, ids, k=5):
    """SGLang with return_logprob and top_logprobs_num: meta_info.input_token_logprobs as
    [logprob, token id, text] (the first logprob null) and input_top_logprobs (k per position)."""
    with open(path, "w") as f:
        for s in range(lp.shape[0]):
            t = ids[s].tolist()
            v = lp[s].tolist()
            inp = [[None, t[0], "w%d" % t[0]]] + [[v[p], t[p], "w%d" % t[p]] for p in range(1, len(t))]
            top = [None] + [[[v[p] if j == 0 else float(np.float32(v[p] - 0.5 * j)), (t[p] + j) % 50000, None]
                             for j in range(k)] for p in range(1, len(t))]
            f.write(json.dumps({"text": "", "meta_info": {"id": "r%d" % s, "input_token_logprobs": inp,
                                                          "output_token_logprobs": [], "input_top_logprobs": top,
                                                          "output_top_logprobs": []}}) + "\n")


def numpy_metrics(a, b):
    """The same overall metrics, in float64 with numpy (the peer)."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = b - a
    ad = np.abs(d)
    lr = a - b
    r = np.exp(lr)
    dp = np.abs(np.exp(b) - np.exp(a))
    out = [ad.max(), ad.mean(), *np.quantile(ad, [0.5, 0.99, 0.999]), dp.max(), dp.mean(),
           *np.quantile(dp, [0.5, 0.99, 0.999]), (-lr).mean(), (lr * lr / 2).mean(), (np.expm1(lr) - lr).mean(),
           ((r - 1) ** 2).mean(), r.mean(), r.min(), r.max(), r.std(), r.sum() ** 2 / (r.size * (r * r).sum()),
           np.corrcoef(np.exp(a), np.exp(b))[0, 1]]
    return out


def numpy_topk(ia, la, ib, lb):
    """What parity computes from top-k lists ([tokens, k] ids and logprobs of A and B): top-1
    agreement, top-k overlap |A n B| / k, and the truncated KL(B_S || A_S) over the ids in both
    lists plus one tail bucket (mean and max)."""
    k = ia.shape[1]
    m = ia[:, :, None] == ib[:, None, :]  # A's j-th id is B's q-th
    has = m.any(axis=2)
    top1 = (ia[:, 0] == ib[:, 0]).mean()
    overlap = (has.sum(axis=1) / k).mean()
    lb_at = np.take_along_axis(lb, m.argmax(axis=2), axis=1)
    pa = np.where(has, np.exp(la), 0.0)
    pb = np.where(has, np.exp(lb_at), 0.0)
    terms = np.where(has, pb * (lb_at - la), 0.0).sum(axis=1)
    # tail masses (0 when the listed mass reaches 1); B's tail against none of A's: infinite,
    # counted apart from the mean as parity counts it
    ta, tb = np.maximum(1.0 - pa.sum(axis=1), 0.0), np.maximum(1.0 - pb.sum(axis=1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(tb > 0, np.where(ta > 0, tb * (np.log(tb) - np.log(ta)), np.inf), 0.0)
    tkl = terms + tail
    return top1, overlap, tkl[np.isfinite(tkl)].mean(), tkl.max()


def numpy_run(kind, pa, pb, shape):
    t = time.perf_counter()
    if kind == "npy":
        a, b = np.load(pa), np.load(pb)
    elif kind in ("safetensors", "safetensors-train"):
        def load(p, name="logprobs", dt="<f4"):
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                h = json.loads(f.read(n))
                buf = f.read()
            o = h[name]["data_offsets"]
            return np.frombuffer(buf[o[0]:o[1]], dtype=dt).reshape(h[name]["shape"])
        a, b = load(pa), load(pb)
        if kind == "safetensors-train":  # the masked tokens only
            m = load(pa, "mask", "u1").astype(bool)
            numpy_metrics(a[m], b[m])
            d = np.where(m, b.astype(np.float64) - a.astype(np.float64), 0.0)
            (-(d.sum(axis=1) / m.sum(axis=1))).max()
            return time.perf_counter() - t
    elif kind != "jsonl":
        # the engine shapes carry top-k: its metrics too, as parity computes them. Token texts are
        # interned to ids (parity hashes them); vLLM's entries are ordered by rank.
        names = {}

        def tid(t):
            return names.setdefault(t, len(names))

        def load(p):
            lps, ids, tls = [], [], []
            for line in open(p):
                r = json.loads(line)
                if kind == "jsonl-chat":
                    toks = r["choices"][0]["logprobs"]["content"]
                    lps.append([t["logprob"] for t in toks])
                    ids.append([[tid(e["token"]) for e in t["top_logprobs"]] for t in toks])
                    tls.append([[e["logprob"] for e in t["top_logprobs"]] for t in toks])
                elif kind == "jsonl-compl":
                    lo = r["choices"][0]["logprobs"]
                    lps.append(lo["token_logprobs"])
                    ids.append([[tid(k) for k in d] for d in lo["top_logprobs"]])
                    tls.append([list(d.values()) for d in lo["top_logprobs"]])
                elif kind == "jsonl-vllm":
                    pl = r["prompt_logprobs"][1:]
                    lps.append([d[str(t)]["logprob"] for t, d in zip(r["prompt_token_ids"][1:], pl)])
                    srt = [sorted(d.items(), key=lambda kv: kv[1]["rank"]) for d in pl]
                    ids.append([[int(k) for k, _ in e] for e in srt])
                    tls.append([[v["logprob"] for _, v in e] for e in srt])
                else:  # jsonl-sglang
                    mi = r["meta_info"]
                    lps.append([e[0] for e in mi["input_token_logprobs"][1:]])
                    ids.append([[e[1] for e in t] for t in mi["input_top_logprobs"][1:]])
                    tls.append([[e[0] for e in t] for t in mi["input_top_logprobs"][1:]])
            k = len(ids[0][0])
            return (np.array(lps, dtype=np.float64), np.array(ids, dtype=np.int64).reshape(-1, k),
                    np.array(tls, dtype=np.float64).reshape(-1, k))
        (a, ia, la), (b, ib, lb) = load(pa), load(pb)
        numpy_topk(ia, la, ib, lb)
    else:
        def load(p):
            rows = [json.loads(line) for line in open(p)]
            return np.array([r["logprobs"] for r in rows], dtype=np.float64)
        a, b = load(pa), load(pb)
    numpy_metrics(a, b)
    seq = -(b.astype(np.float64) - a.astype(np.float64)).mean(axis=1)  # per-sequence dlogppl
    seq.max()
    return time.perf_counter() - t


def parity_run(parity, pa, pb, threads):
    """(wall s, CPU s = user + sys, peak RSS MiB) of one parity process."""
    args = [parity, "logprobs", pa, pb, "--worst", "10", "--json", pb + ".report.json"]
    if threads:
        args += ["--threads", str(threads)]
    # Through /usr/bin/time when present: a child forked from this Python process inherits its
    # resident pages (the arrays above) and ru_maxrss keeps that high-water mark across exec.
    timer = os.path.exists("/usr/bin/time")
    fd, tf = tempfile.mkstemp(suffix=".time")
    os.close(fd)
    if timer:
        args = ["/usr/bin/time", "-o", tf, "-f", "%M"] + args
    t = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    err = p.stderr.read().decode()
    rc = os.waitstatus_to_exitcode(status)
    rss = ru.ru_maxrss / 1024
    if timer:
        with open(tf) as f:
            rss = int(f.read().split()[-1]) / 1024
    os.remove(tf)
    if rc not in (0, 1):
        sys.exit(f"parity failed ({rc}): {err}")
    return dt, ru.ru_utime + ru.ru_stime, rss


def big_run(o):
    """Peak memory on two G GB dumps (see the module docstring)."""
    d = o.big_dir or tempfile.mkdtemp(prefix="parity_big_lp_")
    os.makedirs(d, exist_ok=True)
    need = 2 * o.big_gb * 1e9 * 1.05
    free = os.statvfs(d).f_bavail * os.statvfs(d).f_frsize
    if free < need:
        sys.exit(f"--big-gb {o.big_gb}: {free / 1e9:.1f} GB free in {d}, need {need / 1e9:.1f}")
    rng = np.random.default_rng(2)
    P = 4096
    blk_rows = 2048  # 2048 x 4096 tokens x 8 bytes = 64 MiB per block
    rows = int(o.big_gb * 1e9 // (P * 8)) // blk_rows * blk_rows
    lp = np.minimum(-np.abs(rng.normal(0, 3, size=(blk_rows, P))), 0).astype("<f4")
    lpb = np.minimum(lp + rng.normal(0, 1e-3, size=lp.shape), 0).astype("<f4")
    ids = rng.integers(0, 50000, size=(blk_rows, P)).astype("<i4")
    paths = []
    t = time.perf_counter()
    for name, x in (("a", lp), ("b", lpb)):
        hdr = {"logprobs": {"dtype": "F32", "shape": [rows, P], "data_offsets": [0, rows * P * 4]},
               "token_ids": {"dtype": "I32", "shape": [rows, P], "data_offsets": [rows * P * 4, rows * P * 8]}}
        h = json.dumps(hdr).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        path = os.path.join(d, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for arr in (x, ids):
                b = arr.tobytes()
                for _ in range(rows // blk_rows):
                    f.write(b)
        paths.append(path)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"wrote 2 x {os.path.getsize(paths[0]) / 1e9:.2f} GB ({rows} x {P} tokens each) in "
          f"{time.perf_counter() - t:.0f} s")
    try:
        wall, cpu, rss = parity_run(o.parity, paths[0], paths[1], o.threads)
        print(f"parity logprobs on {size / 1e9:.2f} GB of input: wall {wall:.1f} s ({size / 1e6 / wall:.0f} MB/s), "
              f"CPU {cpu:.1f} s ({cpu / (size / 1e9):.2f} s/GB), peak RSS {rss:.0f} MiB")
    finally:
        for p in paths + [paths[1] + ".report.json"]:
            if os.path.exists(p):
                os.remove(p)
        if not o.big_dir:
            os.rmdir(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parity", default=os.path.join(os.path.dirname(__file__), "..", "build", "parity"))
    ap.add_argument("--seqs", type=int, default=2048)
    ap.add_argument("--positions", type=int, default=2048)
    ap.add_argument("--jsonl-seqs", type=int, default=600)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chat-seqs", type=int, default=100)
    ap.add_argument("--shape-seqs", type=int, default=100)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--big-gb", type=float, default=0)
    ap.add_argument("--big-dir", default=None)
    o = ap.parse_args()
    if o.big_gb:
        big_run(o)
        return
    rng = np.random.default_rng(1)
    S, P = o.seqs, o.positions
    lp = np.minimum(-np.abs(rng.normal(0, 3, size=(S, P))), 0).astype(np.float32)
    lpb = np.minimum(lp + rng.normal(0, 1e-3, size=lp.shape), 0).astype(np.float32)
    ids = rng.integers(0, 50000, size=(S, P)).astype(np.int32)
    d = o.keep or tempfile.mkdtemp(prefix="parity_bench_lp_")
    os.makedirs(d, exist_ok=True)
    files = {}
    np.save(os.path.join(d, "a.npy"), lp)
    np.save(os.path.join(d, "b.npy"), lpb)
    files["npy"] = (os.path.join(d, "a.npy"), os.path.join(d, "b.npy"))
    write_st(os.path.join(d, "a.safetensors"), lp, ids)
    write_st(os.path.join(d, "b.safetensors"), lpb, ids)
    files["safetensors"] = (os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors"))
    # a trainer's dump (examples/logprobs/dump_torch.py's layout): int64 ids, a u8 mask (the first
    # position, which has no logprob, and right padding) and an int32 phase (a 256-token prompt)
    lens = rng.integers(P // 2, P + 1, size=S)
    mask = (np.arange(P)[None, :] < lens[:, None]).astype(np.uint8)
    mask[:, 0] = 0
    phase = np.full((S, P), 2, np.int32)
    phase[:, :256] = 1
    extra = (("mask", "U8", mask), ("phase", "I32", phase))
    write_st(os.path.join(d, "a.train.safetensors"), lp, ids, extra, ("I64", "<i8"))
    write_st(os.path.join(d, "b.train.safetensors"), lpb, ids, extra, ("I64", "<i8"))
    files["safetensors-train"] = (os.path.join(d, "a.train.safetensors"), os.path.join(d, "b.train.safetensors"))
    J = o.jsonl_seqs
    write_jsonl(os.path.join(d, "a.jsonl"), lp[:J], ids[:J])
    write_jsonl(os.path.join(d, "b.jsonl"), lpb[:J], ids[:J])
    files["jsonl"] = (os.path.join(d, "a.jsonl"), os.path.join(d, "b.jsonl"))
    C = o.chat_seqs
    write_chat(os.path.join(d, "a.chat.jsonl"), lp[:C], ids[:C])
    write_chat(os.path.join(d, "b.chat.jsonl"), lpb[:C], ids[:C])
    files["jsonl-chat"] = (os.path.join(d, "a.chat.jsonl"), os.path.join(d, "b.chat.jsonl"))
    E = o.shape_seqs
    for kind, writer in (("compl", write_compl), ("vllm", write_vllm), ("sglang", write_sglang)):
        writer(os.path.join(d, "a.%s.jsonl" % kind), lp[:E], ids[:E])
        writer(os.path.join(d, "b.%s.jsonl" % kind), lpb[:E], ids[:E])
        files["jsonl-" + kind] = (os.path.join(d, "a.%s.jsonl" % kind), os.path.join(d, "b.%s.jsonl" % kind))
    print(f"parity logprobs vs numpy, same files, same run ({os.cpu_count()} CPUs, threads "
          f"{o.threads or 'all'}; best of {o.runs} alternating runs each); MB/s counts both input files; "
          f"CPU = user + sys seconds per GB of input")
    print(f"{'format':17} {'MB':>7} {'tokens':>9} {'parity s':>9} {'MB/s':>7} {'CPU s/GB':>9} {'numpy s':>8} "
          f"{'MB/s':>6} {'CPU s/GB':>9} {'ratio':>6} {'CPU ratio':>9}")
    peak = 0.0
    for kind, (pa, pb) in files.items():
        mb = (os.path.getsize(pa) + os.path.getsize(pb)) / 1e6
        ntok = {"jsonl": J * P, "jsonl-chat": C * P, "jsonl-compl": E * P, "jsonl-vllm": E * (P - 1),
                "jsonl-sglang": E * (P - 1), "safetensors-train": int(mask.sum())}.get(kind, S * P)
        # best of --runs for both, alternating, so that both see the same drift of a shared machine
        runs, nruns = [], []
        for _ in range(o.runs):
            runs.append(parity_run(o.parity, pa, pb, o.threads))
            c0 = time.process_time()
            w = numpy_run(kind, pa, pb, lp.shape)
            nruns.append((w, time.process_time() - c0))
        tp, cp = min(r[0] for r in runs), min(r[1] for r in runs)
        peak = max(peak, max(r[2] for r in runs))
        tn, cn = min(r[0] for r in nruns), min(r[1] for r in nruns)
        gb = mb / 1e3
        print(f"{kind:17} {mb:7.1f} {ntok:9d} {tp:9.3f} {mb / tp:7.1f} {cp / gb:9.2f} {tn:8.3f} {mb / tn:6.1f} "
              f"{cn / gb:9.2f} {tn / tp:5.1f}x {cn / cp:8.1f}x")
    print(f"peak RSS of parity (/usr/bin/time %M): {peak:.0f} MiB (inputs up to "
          f"{max(os.path.getsize(f[0]) for f in files.values()) / 1e6:.0f} MB each)")
    if not o.keep:
        for pa, pb in files.values():
            for p in (pa, pb, pb + ".report.json"):
                if os.path.exists(p):
                    os.remove(p)
        os.rmdir(d)


if __name__ == "__main__":
    main()

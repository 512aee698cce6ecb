#!/usr/bin/env python3
"""Throughput of `parity logprobs` against a numpy script computing the same overall metrics
(|dlogprob| and |dprob| max/mean/p50/p99/p99.9, k1/k2/k3, chi2, importance-ratio stats,
Pearson, per-sequence log-ppl difference) on the same files, in the same run. Prints MB/s of
input (both dumps counted), the ratio, and parity's peak resident set (ru_maxrss).

usage: bench/bench_logprobs.py [--parity build/parity] [--seqs 2048] [--positions 2048]
                               [--jsonl-seqs 1000] [--threads N] [--keep DIR]
Synthetic data: float32 logprobs of a softmax over N(0, 3) logits-like values, with B = A plus
N(0, 1e-3) noise; token ids 0..50k. npy and safetensors hold [seqs, positions]; JSONL holds
parity's own schema with token ids and logprobs per record.
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


def write_st(path, lp, ids):
    hdr, off, blobs = {}, 0, []
    for k, dt, a in (("logprobs", "F32", lp.astype("<f4")), ("token_ids", "I32", ids.astype("<i4"))):
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
                s, ",".join(map(str, ids[s].tolist())), ",".join("%.7g" % v for v in lp[s].tolist())))


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


def numpy_run(kind, pa, pb, shape):
    t = time.perf_counter()
    if kind == "npy":
        a, b = np.load(pa), np.load(pb)
    elif kind == "safetensors":
        def load(p):
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                h = json.loads(f.read(n))
                buf = f.read()
            o = h["logprobs"]["data_offsets"]
            return np.frombuffer(buf[o[0]:o[1]], dtype="<f4").reshape(h["logprobs"]["shape"])
        a, b = load(pa), load(pb)
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
    args = [parity, "logprobs", pa, pb, "--worst", "10", "--json", pb + ".report.json"]
    if threads:
        args += ["--threads", str(threads)]
    t = time.perf_counter()
    p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode not in (0, 1):
        sys.exit(f"parity failed ({p.returncode}): {p.stderr}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parity", default=os.path.join(os.path.dirname(__file__), "..", "build", "parity"))
    ap.add_argument("--seqs", type=int, default=2048)
    ap.add_argument("--positions", type=int, default=2048)
    ap.add_argument("--jsonl-seqs", type=int, default=600)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--keep", default=None)
    o = ap.parse_args()
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
    J = o.jsonl_seqs
    write_jsonl(os.path.join(d, "a.jsonl"), lp[:J], ids[:J])
    write_jsonl(os.path.join(d, "b.jsonl"), lpb[:J], ids[:J])
    files["jsonl"] = (os.path.join(d, "a.jsonl"), os.path.join(d, "b.jsonl"))
    print(f"parity logprobs vs numpy, same files, same run ({os.cpu_count()} CPUs, threads "
          f"{o.threads or 'all'}); MB/s counts both input files")
    print(f"{'format':12} {'MB':>8} {'tokens':>10} {'parity s':>9} {'parity MB/s':>12} {'numpy s':>9} "
          f"{'numpy MB/s':>11} {'ratio':>7}")
    for kind, (pa, pb) in files.items():
        mb = (os.path.getsize(pa) + os.path.getsize(pb)) / 1e6
        ntok = (J if kind == "jsonl" else S) * P
        tp = min(parity_run(o.parity, pa, pb, o.threads) for _ in range(2))
        tn = numpy_run(kind, pa, pb, lp.shape)
        print(f"{kind:12} {mb:8.1f} {ntok:10d} {tp:9.3f} {mb / tp:12.1f} {tn:9.3f} {mb / tn:11.1f} {tn / tp:6.1f}x")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS of the largest parity child: {rss:.0f} MiB (inputs up to "
          f"{max(os.path.getsize(f[0]) for f in files.values()) / 1e6:.0f} MB each)")
    if not o.keep:
        for pa, pb in files.values():
            for p in (pa, pb, pb + ".report.json"):
                if os.path.exists(p):
                    os.remove(p)
        os.rmdir(d)


if __name__ == "__main__":
    main()

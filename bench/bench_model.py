#!/usr/bin/env python3
"""bench_model: tokens per second of `parity model run` on stories260K, fp64 reference path vs the
bf16 serving path, and a peer measured in the same run: a numpy implementation of the same
forward (fp32, KV cache, run.c's semantics, written here from the format description). The numpy
peer also checks itself: its greedy text must equal llama2.c's expected output.
usage: bench/bench_model.py [--parity build/parity] [--data data] [-n 200] [--reps 3]"""
import argparse
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np


def parity_run(binary, path, n, data):
    """Wall-clock seconds and the tok/s parity reports for one `parity model run`."""
    env = dict(os.environ, PARITY_DATA=data)
    t0 = time.perf_counter()
    p = subprocess.run([binary, "model", "run", "-n", str(n), "--path", path], env=env,
                       capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    m = re.search(r"([0-9.]+) positions in ([0-9.]+) s", p.stderr)
    return wall, float(m.group(1)) / float(m.group(2)), p.stdout


class NumpyLlama:
    """Float32 llama2.c forward with a KV cache (one token per call)."""

    def __init__(self, path):
        raw = open(path, "rb").read()
        dim, hid, nl, nh, nkv, vocab, seq = struct.unpack("<7i", raw[:28])
        shared = vocab > 0
        vocab = abs(vocab)
        w = np.frombuffer(raw, dtype="<f4", offset=28)
        hs = dim // nh
        kvd = hs * nkv
        o = 0

        def take(*shape):
            nonlocal o
            k = int(np.prod(shape))
            a = w[o:o + k].reshape(shape)
            o += k
            return a
        self.emb = take(vocab, dim)
        self.rms_att = take(nl, dim)
        self.wq, self.wk, self.wv = take(nl, dim, dim), take(nl, kvd, dim), take(nl, kvd, dim)
        self.wo = take(nl, dim, dim)
        self.rms_ffn = take(nl, dim)
        self.w1, self.w2, self.w3 = take(nl, hid, dim), take(nl, dim, hid), take(nl, hid, dim)
        self.rms_final = take(dim)
        o += seq * hs
        self.wcls = self.emb if shared else take(vocab, dim)
        self.dim, self.nl, self.nh, self.nkv, self.hs, self.kvd, self.seq = dim, nl, nh, nkv, hs, kvd, seq
        self.kc = np.zeros((nl, seq, kvd), np.float32)
        self.vc = np.zeros((nl, seq, kvd), np.float32)
        i = np.arange(0, dim, 2) % hs
        self.freq = (1.0 / np.power(np.float32(10000.0), i.astype(np.float32) / np.float32(hs))).astype(np.float32)

    @staticmethod
    def rmsnorm(x, w):
        ss = np.float32(np.dot(x, x) / x.size + np.float32(1e-5))
        return (w * (x / np.sqrt(ss))).astype(np.float32)

    def rope(self, v, pos, n):
        val = np.float32(pos) * self.freq[: n // 2]
        c, s = np.cos(val), np.sin(val)
        v0, v1 = v[0::2].copy(), v[1::2].copy()
        v[0::2] = v0 * c - v1 * s
        v[1::2] = v0 * s + v1 * c

    def forward(self, token, pos):
        x = self.emb[token].copy()
        hs, rep = self.hs, self.nh // self.nkv
        for l in range(self.nl):
            xb = self.rmsnorm(x, self.rms_att[l])
            q = self.wq[l] @ xb
            k = self.wk[l] @ xb
            v = self.wv[l] @ xb
            self.rope(q, pos, self.dim)
            self.rope(k, pos, self.kvd)
            self.kc[l, pos], self.vc[l, pos] = k, v
            K = self.kc[l, : pos + 1].reshape(pos + 1, self.nkv, hs)
            V = self.vc[l, : pos + 1].reshape(pos + 1, self.nkv, hs)
            qh = q.reshape(self.nh, hs)
            att = np.einsum("hd,thd->ht", qh, np.repeat(K, rep, axis=1)) / np.float32(np.sqrt(hs))
            att = np.exp(att - att.max(axis=1, keepdims=True))
            att /= att.sum(axis=1, keepdims=True)
            out = np.einsum("ht,thd->hd", att, np.repeat(V, rep, axis=1)).reshape(-1)
            x = x + self.wo[l] @ out.astype(np.float32)
            xb = self.rmsnorm(x, self.rms_ffn[l])
            h1 = self.w1[l] @ xb
            h = (h1 / (1 + np.exp(-h1))) * (self.w3[l] @ xb)
            x = x + self.w2[l] @ h.astype(np.float32)
        return self.wcls @ self.rmsnorm(x, self.rms_final)


def decode_table(tok_path, vocab):
    raw = open(tok_path, "rb").read()
    o, pieces = 4, []
    for _ in range(vocab):
        _, ln = struct.unpack("<fi", raw[o:o + 8])
        pieces.append(raw[o + 8:o + 8 + ln])
        o += 8 + ln
    return pieces


def numpy_generate(model, pieces, n):
    token, out = 1, b""
    for pos in range(n):
        nxt = int(np.argmax(model.forward(token, pos)))
        if nxt == 1:
            break
        p = pieces[nxt]
        if token == 1 and p.startswith(b" "):
            p = p[1:]
        m = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
        if m:
            p = bytes([int(m.group(1), 16)])
        if not (len(p) == 1 and not (chr(p[0]).isprintable() or chr(p[0]).isspace())):
            out += p
        token = nxt
    return out.decode("utf-8", "replace")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parity", default=os.path.join(here, "..", "build", "parity"))
    ap.add_argument("--data", default=os.environ.get("PARITY_DATA", os.path.join(here, "..", "data")))
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    expected = open(os.path.join(a.data, "stories260K_expected_t0_n200.txt")).read()
    rows = []
    for path in ("ref", "fp32", "bf16", "bf16+kvcache+tp4:ring:bf16"):
        best = None
        for _ in range(a.reps):
            wall, tps, text = parity_run(a.parity, path, a.n, a.data)
            best = tps if best is None else max(best, tps)
        rows.append((f"parity model run --path {path}", best))
    model = NumpyLlama(os.path.join(a.data, "stories260K.bin"))
    pieces = decode_table(os.path.join(a.data, "tok512.bin"), 512)
    best, text = None, ""
    for _ in range(a.reps):
        model.kc[:] = 0
        model.vc[:] = 0
        t0 = time.perf_counter()
        text = numpy_generate(model, pieces, a.n)
        dt = time.perf_counter() - t0
        best = a.n / dt if best is None else max(best, a.n / dt)
    rows.append(("numpy fp32 peer (KV cache)", best))
    ref = rows[0][1]
    print(f"stories260K, {a.n} positions, greedy, best of {a.reps}; numpy {np.__version__}")
    print(f"{'implementation':52s} {'tok/s':>10s} {'vs ref':>8s}")
    for name, tps in rows:
        print(f"{name:52s} {tps:10.1f} {tps / ref:8.2f}")
    print(f"bf16 / ref ratio: {rows[2][1] / ref:.2f}; numpy peer / ref: {rows[-1][1] / ref:.2f}")
    if a.n == 200:
        print("numpy peer greedy text equals llama2.c's expected output:", text == expected)


if __name__ == "__main__":
    sys.exit(main())

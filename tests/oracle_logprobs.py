#!/usr/bin/env python3
"""Oracle for `parity logprobs`: runs the CLI on the sample pair with injected drift
(tests/data/logprobs/{a,b,a2}.jsonl) and recomputes every reported metric of the overall object
and of each slice independently with numpy (np.longdouble for the cancellation-prone k3, chi2
and tail masses) from the raw JSON, to 1e-12 relative. Also checks that the safetensors and npy
copies of A read identically to the JSONL. Exit 77 (skip) without numpy."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed; the logprobs oracle needs it")
    sys.exit(77)

P = os.environ.get("PARITY")
SRC = os.environ.get("PARITY_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if not P:
    print("SKIP: $PARITY is not set")
    sys.exit(77)
D = os.path.join(SRC, "tests", "data", "logprobs")
REL = 1e-12
fails = []
nchecks = [0]


def close(name, got, want):
    nchecks[0] += 1
    if got is None or want is None or (isinstance(want, float) and np.isnan(want)):
        ok = (got is None) == (want is None or (isinstance(want, float) and np.isnan(want)))
    else:
        ok = abs(got - want) <= REL * max(abs(got), abs(want)) + 1e-300
    if not ok:
        fails.append(f"{name}: parity {got!r}, numpy {want!r}")


def load(path):
    return {r["id"]: r for r in map(json.loads, open(path))}


def run(*args):
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, "r.json")
        p = subprocess.run([P, "logprobs", *args, "--json", out, "--threads", "2"], capture_output=True, text=True)
        if p.returncode not in (0, 1):
            print(p.stdout, p.stderr)
            sys.exit(1)
        return json.load(open(out)), p.returncode


def quant(x, q):
    return float(np.quantile(np.asarray(x, dtype=np.float64), q)) if len(x) else 0.0


def metrics(toks, seqs):
    """toks: list of (a, b, top_ids_a, top_ids_b, top_lp_a, top_lp_b); seqs: list of token lists."""
    a = np.array([t[0] for t in toks], dtype=np.float64)
    b = np.array([t[1] for t in toks], dtype=np.float64)
    al, bl = a.astype(np.longdouble), b.astype(np.longdouble)
    d = b - a
    lr = al - bl
    r = np.exp(lr)
    out = {
        "n_tokens": float(len(a)),
        "max_abs_dlogprob": float(np.max(np.abs(d))),
        "mean_abs_dlogprob": float(np.mean(np.abs(d).astype(np.longdouble))),
        "p50_abs_dlogprob": quant(np.abs(d), 0.5),
        "p99_abs_dlogprob": quant(np.abs(d), 0.99),
        "p999_abs_dlogprob": quant(np.abs(d), 0.999),
        "k1": float(np.mean(-lr)),
        "k2": float(np.mean(lr * lr / 2)),
        "k3": float(np.mean((r - 1) - lr)),
        "chi2_mean": float(np.mean((r - 1) ** 2)),
        "iw_mean": float(np.mean(r)),
        "iw_max": float(np.max(r)),
        "iw_min": float(np.min(r)),
        "iw_ess": float(np.sum(r) ** 2 / (len(r) * np.sum(r * r))),
        "pearson_p": float(np.corrcoef(np.exp(a), np.exp(b))[0, 1]),
    }
    dp = np.abs(np.exp(bl) - np.exp(al))
    out["max_abs_dprob"] = float(np.max(dp))
    out["mean_abs_dprob"] = float(np.mean(dp))
    out["p99_abs_dprob"] = quant(dp.astype(np.float64), 0.99)
    # top-k: top-1 agreement, overlap, truncated KL over the ids in both lists
    t1, ov, tkl, mag = [], [], [], []
    for t in toks:
        ia, ib, la, lb = t[2], t[3], t[4], t[5]
        if not ia or not ib:
            continue
        t1.append(float(ia[0] == ib[0]))
        ov.append(len(set(ia) & set(ib)) / max(len(ia), len(ib)))
        S = [(la[ia.index(i)], lb[j]) for j, i in enumerate(ib) if i in ia]
        xa = np.array([s[0] for s in S], dtype=np.longdouble)
        xb = np.array([s[1] for s in S], dtype=np.longdouble)
        ta, tb = 1 - np.sum(np.exp(xa)), 1 - np.sum(np.exp(xb))
        v = np.sum(np.exp(xb) * (xb - xa))
        if tb > 0:
            v += tb * (np.log(tb) - np.log(ta))
        tkl.append(float(v))
        # the magnitude of the terms that cancel: the C side works in double, so its error is
        # about u times this, not u times the (tiny) result
        mag.append(float(np.sum(np.exp(xb) * np.abs(xb - xa)) + abs(tb) * (abs(np.log(tb)) + abs(np.log(ta)))))
    if t1:
        out["top1_agree"] = float(np.mean(t1))
        out["topk_overlap_mean"] = float(np.mean(ov))
        out["tkl_mean"] = float(np.mean(np.array(tkl, dtype=np.longdouble)))
        out["_tkl_scale"] = float(np.mean(mag))
    if seqs is not None:
        dl = [float(-np.mean(np.array([t[1] - t[0] for t in s], dtype=np.longdouble))) for s in seqs if s]
        out["n_seq"] = float(len(seqs))
        out["dlogppl_mean"] = float(np.mean(np.array(dl, dtype=np.longdouble)))
        out["dlogppl_max_abs"] = float(np.max(np.abs(dl)))
        out["ppl_ratio_max"] = float(np.max(np.exp(np.array(dl, dtype=np.longdouble))))
        out["chi2_seq_mean"] = float(np.mean([(np.exp(np.sum(np.array([t[0] - t[1] for t in s], dtype=np.longdouble))) - 1) ** 2
                                              for s in seqs if s]))
    return out


def check_slice(tag, js, want, loose=()):
    for k, v in want.items():
        tol_name = f"{tag}.{k}"
        got = js.get(k)
        if k == "_tkl_scale":
            continue
        if k == "tkl_mean":  # a cancelling sum: 1e-12 relative to the magnitude of its terms
            nchecks[0] += 1
            if abs(got - v) > REL * want["_tkl_scale"]:
                fails.append(f"{tol_name}: parity {got!r}, numpy {v!r}, term scale {want['_tkl_scale']!r}")
            continue
        if k in loose:  # quantities summed in a different order: a few ulps
            nchecks[0] += 1
            if abs(got - v) > 1e-9 * max(abs(v), 1e-300):
                fails.append(f"{tol_name}: parity {got!r}, numpy {v!r}")
        else:
            close(tol_name, got, v)


A, B = load(os.path.join(D, "a.jsonl")), load(os.path.join(D, "b.jsonl"))
rep, rc = run(os.path.join(D, "a.jsonl"), os.path.join(D, "b.jsonl"), "--slice-by", "domain")
if rc != 1:
    fails.append(f"exit code {rc}, want 1 (drift injected)")

# Gather aligned tokens with their slice tags, stopping each request at its first id divergence.
slices, seqs, fields = {}, [], {}
for rid, ra in A.items():
    rb = B[rid]
    n = min(len(ra["token_ids"]), len(rb["token_ids"]))
    lim = next((i for i in range(n) if ra["token_ids"][i] != rb["token_ids"][i]), n)
    seq = []
    for i in range(lim):
        t = (ra["logprobs"][i], rb["logprobs"][i], ra["top_ids"][i], rb["top_ids"][i], ra["top_logprobs"][i],
             rb["top_logprobs"][i])
        seq.append(t)
        ph = "phase=prefill" if i < ra["prefill_len"] else "phase=decode"
        lo = 0 if i < 16 else 1 << (i.bit_length() - 1)
        pos = "pos=0-15" if i < 16 else f"pos={lo}-{2 * lo - 1}"
        for s in ("overall", ph, pos, "modality=" + ra["modality"][i]):
            slices.setdefault(s, []).append(t)
    seqs.append(seq)
    fields.setdefault("domain=" + ra["domain"], []).append(seq)

loose = ()  # every value must agree to 1e-12 relative (tkl_mean: relative to its terms, see above)
check_slice("overall", rep["overall"], metrics(slices["overall"], seqs), loose)
byname = {s["name"]: s for s in rep["slices"]}
for name, toks in slices.items():
    if name == "overall":
        continue
    if name not in byname:
        fails.append(f"slice {name} missing from the report")
        continue
    check_slice(name, byname[name], metrics(toks, None), loose)
for name, sq in fields.items():
    toks = [t for s in sq for t in s]
    if name not in byname:
        fails.append(f"slice {name} missing from the report")
        continue
    check_slice(name, byname[name], metrics(toks, sq), loose)


def hist_expected(toks):
    """The documented signed histogram of delta = b - a: 4 bins per decade over [1e-9, 10), bin of
    |delta| from the lower edge L of its quantile-sketch bin (7 fraction bits), zero for 0 and NaN."""
    neg, pos, zero = [0] * 40, [0] * 40, 0
    for t in toks:
        d = float(t[1]) - float(t[0])
        if d == 0 or d != d:
            zero += 1
            continue
        x = abs(d)
        if x < 2.0 ** -64:
            b = 0
        elif x >= 2.0 ** 64:
            b = 39
        else:
            m, e = np.frexp(x)
            L = np.floor(m * 256) / 256 * 2.0 ** int(e)
            b = min(max(int(np.floor((np.log10(L) + 9) * 4)), 0), 39)
        (pos if d > 0 else neg)[b] += 1
    return neg, pos, zero


for name, toks in list(slices.items()) + [(n, [t for s in sq for t in s]) for n, sq in fields.items()]:
    js = rep["overall"] if name == "overall" else byname.get(name)
    if js is None:
        continue
    nchecks[0] += 1
    neg, pos, zero = hist_expected(toks)
    h = js["hist_dlogprob"]
    if h["negative"] != neg or h["positive"] != pos or h["zero"] != zero:
        fails.append(f"{name}: histogram {h['negative']}/{h['positive']}/{h['zero']}, numpy {neg}/{pos}/{zero}")

if rep["counts"]["n_diverged"] != 1 or rep["divergences"][0]["id"] != "r3" or rep["divergences"][0]["position"] != 7:
    fails.append(f"divergence: want r3 at position 7, got {rep['divergences']}")
if byname["modality=image"]["verdict"] != "alarm" or byname["modality=text"]["verdict"] == "alarm":
    fails.append("verdicts: image should be in alarm, text not")

# The same data through the binary readers: safetensors and npy copies of A against a.jsonl.
for other in ("a.safetensors", "a.npy"):
    r2, rc2 = run(os.path.join(D, other), os.path.join(D, "a.jsonl"))
    o = r2["overall"]
    if rc2 != 0 or o["n_tokens"] != 190 or o["max_abs_dlogprob"] != 0 or r2["counts"]["n_diverged"] != 0:
        fails.append(f"{other} vs a.jsonl: want 190 identical tokens and exit 0, got exit {rc2}, {o['n_tokens']} "
                     f"tokens, max |d| {o['max_abs_dlogprob']}, diverged {r2['counts']['n_diverged']}")

# A measured floor: every x_floor is the metric over the floor's metric.
r3, _ = run(os.path.join(D, "a.jsonl"), os.path.join(D, "b.jsonl"), "--floor", os.path.join(D, "a2.jsonl"))
A2 = load(os.path.join(D, "a2.jsonl"))
ft = [(A[k]["logprobs"][i], A2[k]["logprobs"][i], [], [], [], []) for k in A for i in range(len(A[k]["logprobs"]))]
fm = metrics(ft, None)
close("floor.k3", r3["overall"]["floor"]["k3"], fm["k3"])
close("x_floor.k3", r3["overall"]["x_floor"]["k3"], r3["overall"]["k3"] / fm["k3"])
close("floor.max", r3["overall"]["floor"]["max_abs_dlogprob"], fm["max_abs_dlogprob"])


# Results do not depend on the thread count: dumps large enough for the pairs to be compared in
# parallel (over 65536 tokens in a batch) with every slice kind and top-k, the JSON report
# byte-identical with 1, 2 and 3 threads.
def write_st(path, tensors, meta=None):
    import struct
    hdr, off, blobs = {}, 0, []
    if meta:
        hdr["__metadata__"] = meta
    for k, (dt, a) in tensors.items():
        b = a.tobytes()
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def thread_check(tag, pa, pb, *extra):
    """The report is byte-identical whatever the thread count and whichever SIMD copy of the
    hot loops runs (PARITY_SIMD lowers the instruction set: AVX-512, AVX2, baseline SSE2)."""
    outs = []
    runs = ((1, None), (2, None), (3, None), (2, "avx2"), (1, "sse2"))
    for th, simd in runs:
        out = os.path.join(td, f"{tag}{th}{simd}.json")
        env = dict(os.environ)
        env.pop("PARITY_SIMD", None)
        if simd:
            env["PARITY_SIMD"] = simd
        p = subprocess.run([P, "logprobs", pa, pb, *extra, "--threads", str(th), "--json", out],
                           capture_output=True, text=True, env=env)
        if p.returncode not in (0, 1):
            print(p.stdout, p.stderr)
            sys.exit(1)
        outs.append((open(out, "rb").read(), p.stdout.replace(out, ""), p.returncode))
    nchecks[0] += 1
    if json.loads(outs[0][0])["counts"]["n_tokens_compared"] < 65536:
        fails.append(f"threads {tag}: fewer tokens than intended")
    for (th, simd), o in zip(runs[1:], outs[1:]):
        if o != outs[0]:
            fails.append(f"threads {tag}: the report with --threads {th}{' PARITY_SIMD=' + simd if simd else ''} "
                         "differs from --threads 1")


with tempfile.TemporaryDirectory() as td:
    rng = np.random.default_rng(5)
    S, T, K = 300, 400, 4
    lp = np.minimum(-np.abs(rng.normal(0, 3, (S, T))), 0)
    ids = rng.integers(0, 1000, (S, T))
    tids = rng.integers(0, 1000, (S, T, K))
    tlp = -np.abs(rng.normal(0, 2, (S, T, K)))
    mask = (rng.random((S, T)) > 0.02).astype(np.int8)
    mod = (np.arange(T)[None, :] // 50 % 3 + np.zeros((S, 1), int)).astype(np.int32)
    ph = np.where(np.arange(T)[None, :] < 100, 1, 2) + np.zeros((S, 1), int)
    for name, noise in (("ta", 0.0), ("tb", 1e-3)):
        x = lp + rng.normal(0, noise, lp.shape) if noise else lp
        x = np.minimum(x, 0)
        x[0, 5] = -np.inf
        tx = np.minimum(tlp + noise, 0)  # shifted top logprobs stay logprobs (<= 0: parity refuses more)
        write_st(os.path.join(td, name + ".safetensors"),
                 {"logprobs": ("F32", x.astype("<f4")), "token_ids": ("I32", ids.astype("<i4")),
                  "mask": ("I8", mask), "modality": ("I32", mod), "phase": ("I32", ph.astype("<i4")),
                  "top_ids": ("I32", tids.astype("<i4")), "top_logprobs": ("F32", tx.astype("<f4"))},
                 {"modality_names": "text,image,audio"})
        with open(os.path.join(td, name + ".jsonl"), "w") as f:
            for s in range(S):
                f.write(json.dumps({"id": f"q{s}", "domain": ["math", "code", "chat"][s % 3],
                                    "token_ids": ids[s].tolist(),
                                    "logprobs": [v if v > -np.inf else "-inf" for v in x[s].tolist()],
                                    "top_ids": tids[s].tolist(), "top_logprobs": tx[s].tolist(),
                                    "modality": ["text", "image"][s % 2], "prefill_len": 100}) + "\n")
    thread_check("st", os.path.join(td, "ta.safetensors"), os.path.join(td, "tb.safetensors"), "--worst", "30")
    # dense dumps (the in-place path): no mask, modality, phase or top-k; with -inf on one and on
    # both sides, |log r| > 30 (the scalar path) and exact ties (zero delta); 1000 rows of 700
    # are three batches of the direct path (each applied while the next is compared)
    da = np.minimum(-np.abs(rng.normal(0, 3, (1000, 700))), 0)
    db = np.minimum(da + rng.normal(0, 1e-3, da.shape), 0)
    db[::7, 3] = da[::7, 3]
    da[1, 10] = db[1, 10] = -np.inf
    da[2, 20] = -np.inf
    db[3, 30] = da[3, 30] - 40
    np.save(os.path.join(td, "da.npy"), da.astype("<f4"))
    np.save(os.path.join(td, "db.npy"), db.astype("<f4"))
    thread_check("npy", os.path.join(td, "da.npy"), os.path.join(td, "db.npy"))
    # Two plain dense dumps take the direct path (rows read and compared in one thread); with an
    # all-ones float mask (which the fast rows do not read) the same data takes the general one
    # (sequence batches, pairing map, a dtype switch per element): the numbers must be the
    # same, byte for byte.
    for name, x in (("da", da), ("db", db)):
        write_st(os.path.join(td, name + "m.safetensors"),
                 {"logprobs": ("F32", x.astype("<f4")), "mask": ("F32", np.ones(x.shape, np.float32))})
    reps = []
    for sfx in (".npy", "m.safetensors"):
        out = os.path.join(td, "path" + sfx + ".json")
        subprocess.run([P, "logprobs", os.path.join(td, "da" + sfx), os.path.join(td, "db" + sfx), "--json", out,
                        "--worst", "20"], capture_output=True)
        r = json.load(open(out))
        reps.append({k: r[k] for k in ("overall", "slices", "worst_tokens", "counts") if k in r})
    nchecks[0] += 1
    for rr in reps:
        rr["counts"] = {k: v for k, v in rr["counts"].items() if not k.startswith("bytes")}
    if json.dumps(reps[0], sort_keys=True) != json.dumps(reps[1], sort_keys=True):
        fails.append("direct path (plain npy) and general path (masked safetensors) give different reports")
    # A trainer's dump: padding masks (prefix, holes, NaN and inf under the mask), a phase, int64
    # ids with one divergence. The fast rows read integer masks and phases (u8/i32, i16/i8) and
    # take the direct path; a float mask sends the same data through the general loop; npy's
    # mask sidecar likewise in C order (fast) and Fortran order (general). Byte-identical
    # reports, and across thread counts and SIMD copies.
    ma, mb = da.copy(), db.copy()
    S2, P2 = ma.shape
    ids2 = rng.integers(0, 50000, (S2, P2))
    idb2 = ids2.copy()
    idb2[9, 50] += 1
    lens = rng.integers(P2 // 2, P2 + 1, S2)
    mk = (np.arange(P2)[None, :] < lens[:, None]).astype(np.uint8)
    mk[::5, 7] = 0
    mk[:, 0] = 0
    ma[3, 0], mb[4, 0] = np.nan, np.inf
    ph = np.full((S2, P2), 2, np.int32)
    ph[:, :256] = 1
    ph[::3, 300] = 0
    reps = []
    variants = (("f", "U8", np.uint8, "I32", np.int32, "I64", "<i8"), ("h", "I16", "<i2", "I8", np.int8, "I32", "<i4"),
                ("i", "I64", "<i8", "I16", "<i2", "I64", "<i8"), ("b", "BOOL", np.bool_, "U8", np.uint8, "I32", "<i4"),
                ("g", "F32", "<f4", "I32", np.int32, "I64", "<i8"))
    for tag, mdt, mcast, pdt, pcast, idt, icast in variants:
        for name, x, ii in (("ma", ma, ids2), ("mb", mb, idb2)):
            write_st(os.path.join(td, f"{name}{tag}.safetensors"),
                     {"logprobs": ("F32", x.astype("<f4")), "token_ids": (idt, ii.astype(icast)),
                      "mask": (mdt, mk.astype(mcast)), "phase": (pdt, ph.astype(pcast))})
        pa, pb = os.path.join(td, f"ma{tag}.safetensors"), os.path.join(td, f"mb{tag}.safetensors")
        if tag == "f":
            thread_check("masked", pa, pb, "--worst", "20")
        out = os.path.join(td, f"mask{tag}.json")
        subprocess.run([P, "logprobs", pa, pb, "--json", out, "--worst", "20"], capture_output=True)
        r = json.load(open(out))
        reps.append({k: r[k] for k in ("overall", "slices", "worst_tokens", "divergences", "counts")})
    for order in ("C", "F"):
        for name, x in (("ma", ma), ("mb", mb)):
            np.save(os.path.join(td, f"{name}{order}.npy"), np.asarray(x.astype("<f4"), order=order))
            np.save(os.path.join(td, f"{name}{order}.mask.npy"), mk.astype(np.int8))
        out = os.path.join(td, f"npymask{order}.json")
        subprocess.run([P, "logprobs", os.path.join(td, f"ma{order}.npy"), os.path.join(td, f"mb{order}.npy"),
                        "--json", out, "--worst", "20"], capture_output=True)
        r = json.load(open(out))
        reps.append({k: r[k] for k in ("overall", "slices", "worst_tokens", "divergences", "counts")})
    for rr in reps:
        rr["counts"] = {k: v for k, v in rr["counts"].items() if not k.startswith("bytes")}
    nchecks[0] += 1
    if reps[0]["counts"]["n_tokens_compared"] < 100000 or not reps[0]["divergences"]:
        fails.append("masked dumps: fewer tokens than intended, or the divergence was not found")
    for k, (tag, mdt, _, pdt, _, idt, _) in enumerate(variants):
        if json.dumps(reps[k], sort_keys=True) != json.dumps(reps[0], sort_keys=True):
            fails.append(f"masked safetensors: {mdt} mask, {pdt} phase, {idt} ids give another report than "
                         "U8, I32, I64" + (" (the general rows)" if tag == "g" else ""))
    nv = len(variants)
    if json.dumps(reps[nv], sort_keys=True) != json.dumps(reps[nv + 1], sort_keys=True):
        fails.append("masked npy: Fortran order (general rows) and C order (fast rows) give different reports")
    thread_check("jsonl", os.path.join(td, "ta.jsonl"), os.path.join(td, "tb.jsonl"), "--slice-by", "domain",
                 "--floor", os.path.join(td, "ta.jsonl"))

if fails:
    print(f"FAIL: {len(fails)} of {nchecks[0]} checks")
    for f in fails[:40]:
        print("  " + f)
    sys.exit(1)
print(f"ok: {nchecks[0]} checks of parity logprobs against numpy agree to {REL:g} relative")

#!/usr/bin/env python3
"""Oracle for the metrics module: libparity (through ctypes, $PARITY_LIB) against an
independent numpy computation on random data, to 1e-12 relative. The numpy side uses
np.longdouble for the cancellation-prone quantities (k3, chi2, |dprob|, tail masses) so that it
is a different computation, not a transcription of the C code. Exit 77 (skip) without numpy.
"""
import ctypes
import math
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed; the metrics oracle needs it")
    sys.exit(77)

SEED = 12345
REL = 1e-12
failures = []
nchecks = [0]


def reexec_with_sanitizer_runtime(path):
    """A libparity built with -fsanitize=address,undefined can only be dlopen()ed by a process
    whose first libraries are the sanitizer runtimes: re-run this script once with them in
    LD_PRELOAD (leak checking off: the interpreter itself is not leak-clean)."""
    if os.environ.get("PARITY_ORACLE_REEXEC"):
        return
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    except OSError:
        return
    runtimes = []
    for line in out.splitlines():
        if ("libasan" in line or "libubsan" in line) and "=>" in line:
            runtimes.append(line.split("=>")[1].split()[0])
    if not runtimes:
        return
    runtimes.sort(key=lambda p: "libasan" not in p)  # ASan must come first
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(runtimes + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    env["ASAN_OPTIONS"] = "detect_leaks=0" + (":" + env["ASAN_OPTIONS"] if env.get("ASAN_OPTIONS") else "")
    env["PARITY_ORACLE_REEXEC"] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def load_lib():
    path = os.environ.get("PARITY_LIB")
    if not path:
        here = os.path.dirname(os.path.abspath(__file__))
        cand = os.path.join(here, "..", "build", "libparity.so")
        path = cand if os.path.exists(cand) else None
    if not path:
        print("SKIP: PARITY_LIB is not set and build/libparity.so does not exist")
        sys.exit(77)
    reexec_with_sanitizer_runtime(path)
    lib = ctypes.CDLL(path)
    dp = ctypes.POINTER(ctypes.c_double)
    lib.parity_metrics_err_eval.argtypes = [dp, dp, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                            ctypes.c_double, dp, ctypes.c_size_t]
    lib.parity_metrics_err_eval.restype = ctypes.c_int
    lib.parity_metrics_err_field_name.argtypes = [ctypes.c_size_t]
    lib.parity_metrics_err_field_name.restype = ctypes.c_char_p
    i32p = ctypes.POINTER(ctypes.c_int32)
    u64p = ctypes.POINTER(ctypes.c_uint64)
    lib.parity_metrics_dist_eval.argtypes = [dp, dp, ctypes.c_size_t, u64p, ctypes.c_size_t,
                                             i32p, i32p, dp, dp, ctypes.c_size_t, ctypes.c_size_t,
                                             ctypes.c_double, ctypes.c_double, dp, ctypes.c_size_t]
    lib.parity_metrics_dist_eval.restype = ctypes.c_int
    lib.parity_metrics_dist_field_name.argtypes = [ctypes.c_size_t]
    lib.parity_metrics_dist_field_name.restype = ctypes.c_char_p
    return lib


def field_names(fn):
    names = []
    while True:
        s = fn(len(names))
        if s is None:
            return names
        names.append(s.decode())


def ptr(a, ctype=ctypes.c_double):
    return None if a is None else a.ctypes.data_as(ctypes.POINTER(ctype))


def check(what, got, want, rel=REL):
    nchecks[0] += 1
    want = float(want)
    if math.isnan(want):
        ok = math.isnan(got)
    elif math.isinf(want) or want == 0.0:
        ok = got == want
    else:
        ok = abs(got - want) <= rel * abs(want)
    if not ok:
        failures.append(f"{what}: lib {got!r} numpy {want!r} (rel tol {rel}, seed {SEED})")


def err_eval(lib, y, r, prec, emin, rel_floor):
    names = field_names(lib.parity_metrics_err_field_name)
    out = np.zeros(len(names))
    y = np.ascontiguousarray(y, dtype=np.float64)
    r = np.ascontiguousarray(r, dtype=np.float64)
    st = lib.parity_metrics_err_eval(ptr(y), ptr(r), len(y), prec, emin, rel_floor, ptr(out), len(out))
    if st != 0:
        raise SystemExit(f"parity_metrics_err_eval returned status {st}")
    return dict(zip(names, out))


def fsum(x):
    return math.fsum(np.asarray(x, dtype=np.float64).tolist())


def check_err(lib, rng):
    n = 5000
    r = rng.standard_normal(n) * np.exp(3 * rng.standard_normal(n))
    y = r * (1 + 1e-3 * rng.standard_normal(n)) + 1e-6 * rng.standard_normal(n)
    r[:7] = 0.0
    y[3] = 0.0  # exact zero against zero
    prec, emin, floor = 8, -126, 1e-3  # bf16
    got = err_eval(lib, y, r, prec, emin, floor)
    d = np.abs(y - r)
    rel = d / np.maximum(np.abs(r), floor)
    e = np.frexp(np.abs(r))[1] - 1
    e = np.where(r == 0, emin, np.maximum(e, emin))
    ulp = np.ldexp(1.0, (e - prec + 1).astype(np.int64))
    uerr = d / ulp
    check("err.n", got["n"], n)
    check("err.n_finite", got["n_finite"], n)
    check("err.max_abs", got["max_abs"], d.max())
    check("err.argmax_abs", got["argmax_abs"], int(np.argmax(d)))
    check("err.max_rel", got["max_rel"], rel.max())
    check("err.argmax_rel", got["argmax_rel"], int(np.argmax(rel)))
    check("err.max_ulp", got["max_ulp"], uerr.max())
    check("err.argmax_ulp", got["argmax_ulp"], int(np.argmax(uerr)))
    check("err.mean_abs", got["mean_abs"], fsum(d) / n)
    check("err.nmse", got["nmse"], fsum(d * d) / fsum(r * r))
    check("err.rmse", got["rmse"], math.sqrt(fsum(d * d) / n))
    check("err.first_mismatch", got["first_mismatch"], -1)

    # Non-finite pairs: counted, never folded into the finite metrics.
    y2, r2 = y.copy(), r.copy()
    y2[[10, 20]] = np.nan
    r2[30] = np.nan
    y2[40], r2[40] = np.inf, np.inf      # match
    y2[50], r2[50] = -np.inf, np.inf     # mismatch
    y2[60] = np.inf                      # mismatch against finite
    got = err_eval(lib, y2, r2, prec, emin, floor)
    fin = np.isfinite(y2) & np.isfinite(r2)
    check("err2.n_finite", got["n_finite"], int(fin.sum()))
    check("err2.n_nan_y", got["n_nan_y"], 2)
    check("err2.n_nan_r", got["n_nan_r"], 1)
    check("err2.n_inf_match", got["n_inf_match"], 1)
    check("err2.n_inf_mismatch", got["n_inf_mismatch"], 2)
    check("err2.n_mismatch", got["n_mismatch"], 5)
    check("err2.first_mismatch", got["first_mismatch"], 10)
    dd = np.abs(y2[fin] - r2[fin])
    check("err2.rmse", got["rmse"], math.sqrt(fsum(dd * dd) / fin.sum()))
    check("err2.max_abs", got["max_abs"], dd.max())


def dist_eval(lib, a, b, seq_lens, ids_a, ids_b, tka, tkb, ntok, k, lo, hi):
    names = field_names(lib.parity_metrics_dist_field_name)
    out = np.zeros(len(names))
    sl = None if seq_lens is None else np.ascontiguousarray(seq_lens, dtype=np.uint64)
    st = lib.parity_metrics_dist_eval(
        ptr(a), ptr(b), len(a), ptr(sl, ctypes.c_uint64), 0 if sl is None else len(sl),
        ptr(ids_a, ctypes.c_int32), ptr(ids_b, ctypes.c_int32), ptr(tka), ptr(tkb), ntok, k,
        lo, hi, ptr(out), len(out))
    if st != 0:
        raise SystemExit(f"parity_metrics_dist_eval returned status {st}")
    return dict(zip(names, out))


def check_dist(lib, rng, n, tag, quantile_rel):
    L = np.longdouble
    a = -np.abs(rng.standard_normal(n) * 2.0) - 1e-3
    b = a + 0.05 * rng.standard_normal(n) * np.exp(rng.standard_normal(n))
    b = np.where(b > 0, -b, b)
    seq_lens = []
    left = n
    while left:
        m = min(left, int(rng.integers(1, 200)))
        seq_lens.append(m)
        left -= m
    k, ntok = 5, 1000
    ids_a = rng.integers(0, 10, size=(ntok, k)).astype(np.int32)
    ids_b = rng.integers(0, 10, size=(ntok, k)).astype(np.int32)
    tka = -2.5 - 2.0 * rng.random((ntok, k))
    tkb = tka + 0.2 * rng.standard_normal((ntok, k))
    lo, hi = 0.8, 1.25
    got = dist_eval(lib, a, b, seq_lens, ids_a.ravel(), ids_b.ravel(), tka.ravel(), tkb.ravel(),
                    ntok, k, lo, hi)

    x = (a - b)                       # log r
    xl = x.astype(L)
    k3 = np.expm1(xl) - xl
    w = np.exp(x)
    adp = np.abs(np.exp(b.astype(L)) - np.exp(a.astype(L))).astype(np.float64)
    chi2 = np.expm1(xl) ** 2
    check(f"{tag}.n_tok", got["n_tok"], n)
    check(f"{tag}.n_finite", got["n_finite"], n)
    check(f"{tag}.k1_mean", got["k1_mean"], fsum(b - a) / n)
    check(f"{tag}.dlogprob_mean", got["dlogprob_mean"], fsum(b - a) / n)
    check(f"{tag}.k2_mean", got["k2_mean"], fsum(x * x / 2) / n)
    check(f"{tag}.k3_mean", got["k3_mean"], fsum(k3.astype(np.float64)) / n)
    check(f"{tag}.k3_max", got["k3_max"], float(k3.max()))
    check(f"{tag}.abs_dlogprob_max", got["abs_dlogprob_max"], np.abs(b - a).max())
    check(f"{tag}.abs_dlogprob_mean", got["abs_dlogprob_mean"], fsum(np.abs(b - a)) / n)
    check(f"{tag}.abs_dprob_max", got["abs_dprob_max"], adp.max())
    check(f"{tag}.abs_dprob_mean", got["abs_dprob_mean"], fsum(adp) / n)
    for p, key in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999")):
        # numpy's default method is 'linear' (Hyndman & Fan type 7).
        check(f"{tag}.abs_dlogprob_{key}", got[f"abs_dlogprob_{key}"],
              np.quantile(np.abs(b - a), p), quantile_rel)
        check(f"{tag}.abs_dprob_{key}", got[f"abs_dprob_{key}"], np.quantile(adp, p), quantile_rel)
    check(f"{tag}.chi2_mean", got["chi2_mean"], fsum(chi2.astype(np.float64)) / n)
    check(f"{tag}.chi2_max", got["chi2_max"], float(chi2.max()))
    check(f"{tag}.iw_mean", got["iw_mean"], fsum(w) / n)
    check(f"{tag}.iw_min", got["iw_min"], w.min())
    check(f"{tag}.iw_max", got["iw_max"], w.max())
    check(f"{tag}.iw_std", got["iw_std"], np.std(w.astype(L)))
    check(f"{tag}.iw_ess", got["iw_ess"], fsum(w) ** 2 / fsum(w * w) / n)  # Kish
    check(f"{tag}.iw_frac_low", got["iw_frac_low"], (w < lo).mean())
    check(f"{tag}.iw_frac_high", got["iw_frac_high"], (w > hi).mean())
    check(f"{tag}.iw_frac_out", got["iw_frac_out"], ((w < lo) | (w > hi)).mean())
    check(f"{tag}.pearson_p", got["pearson_p"], np.corrcoef(np.exp(a), np.exp(b))[0, 1])

    # Sequences: dlogppl = logppl_B - logppl_A = mean(a - b); ppl ratio ppl_B / ppl_A.
    d_l, ratio, c2 = [], [], []
    off = 0
    for m in seq_lens:
        s = x[off:off + m]
        off += m
        d_l.append(fsum(s) / m)
        ratio.append(math.exp(d_l[-1]))
        c2.append(math.expm1(fsum(s)) ** 2)
    ns = len(seq_lens)
    check(f"{tag}.n_seq", got["n_seq"], ns)
    check(f"{tag}.dlogppl_mean", got["dlogppl_mean"], math.fsum(d_l) / ns)
    check(f"{tag}.dlogppl_max_abs", got["dlogppl_max_abs"], max(abs(v) for v in d_l))
    check(f"{tag}.ppl_ratio_mean", got["ppl_ratio_mean"], math.fsum(ratio) / ns)
    check(f"{tag}.ppl_ratio_min", got["ppl_ratio_min"], min(ratio))
    check(f"{tag}.ppl_ratio_max", got["ppl_ratio_max"], max(ratio))
    check(f"{tag}.chi2_seq_mean", got["chi2_seq_mean"], math.fsum(c2) / ns)

    # Top-k: agreement of the first ids; overlap = |set(A) & set(B)| / k (negatives excluded).
    top1 = np.mean(ids_a[:, 0] == ids_b[:, 0])
    ov = [len(set(ids_a[t].tolist()) & set(ids_b[t].tolist())) / k for t in range(ntok)]
    check(f"{tag}.n_topk", got["n_topk"], ntok)
    check(f"{tag}.top1_agree", got["top1_agree"], top1)
    check(f"{tag}.topk_overlap_mean", got["topk_overlap_mean"], math.fsum(ov) / ntok)
    # Truncated KL(B || A) over the k ids plus the tail bucket.
    pa, pb = np.exp(tka.astype(L)), np.exp(tkb.astype(L))
    ta, tb = 1 - pa.sum(axis=1), 1 - pb.sum(axis=1)
    tkl = (pb * (tkb.astype(L) - tka.astype(L))).sum(axis=1) + tb * np.log(tb / ta)
    check(f"{tag}.n_tkl", got["n_tkl"], ntok)
    check(f"{tag}.tkl_mean", got["tkl_mean"], fsum(tkl.astype(np.float64)) / ntok)
    check(f"{tag}.tkl_max", got["tkl_max"], float(tkl.max()))


def main():
    lib = load_lib()
    rng = np.random.default_rng(SEED)
    check_err(lib, rng)
    # n <= 4096: the exact quantile path must agree with numpy to 1e-12 (in fact bit for bit).
    check_dist(lib, rng, 3000, "dist_small", REL)
    # n > 4096: histogram quantiles within the documented 2^-8 relative bound (plus rounding).
    check_dist(lib, rng, 50000, "dist_large", 2.0 ** -8 + 1e-14)
    if failures:
        for f in failures:
            print("FAIL", f)
        print(f"{len(failures)} metrics oracle check(s) failed (seed {SEED})")
        return 1
    print(f"metrics oracle: all {nchecks[0]} checks agree with numpy (seed {SEED})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

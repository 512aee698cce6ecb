"""Bulk conversion throughput: parity's fp32->bf16 and fp32->e4m3fn beside ml_dtypes astype,
torch .to(torch.bfloat16) and numpy fp32->fp16 astype, measured in the same run on the same
256 MiB of fp32 input (GB/s of input bytes, best of --repeat runs, one thread each: parity's
loops are single-threaded; torch is pinned with torch.set_num_threads(1) unless --torch-threads).

usage: python bench/bench_format.py [--mib 256] [--repeat 5] [--lib build/libparity.so]
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None
try:
    import torch
except Exception:
    torch = None


def find_lib(arg):
    here = os.path.dirname(os.path.abspath(__file__))
    for c in [arg, os.environ.get("PARITY_LIB"),
              os.path.join(os.environ.get("PARITY_BUILD", ""), "libparity.so"),
              os.path.join(here, "..", "build", "libparity.so")]:
        if c and os.path.exists(c):
            return c
    sys.exit("bench_format: libparity.so not found: build first or pass --lib")


def best_of(fn, repeat):
    fn()  # warm up: page in the output buffers
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--torch-threads", type=int, default=1)
    a = ap.parse_args()

    lib = ctypes.CDLL(find_lib(a.lib))
    for fn in (lib.parity_fp32_to_bf16, lib.parity_fp32_to_e4m3fn, lib.parity_fp32_to_fp16):
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        fn.restype = None

    n = a.mib * (1 << 20) // 4
    rng = np.random.default_rng(0)
    # Gradient/activation-like values: normal scaled over a few decades, some outliers.
    x = (rng.standard_normal(n, dtype=np.float32) *
         np.float32(2.0) ** rng.integers(-8, 8, size=n).astype(np.float32))
    nbytes = x.nbytes
    out16 = np.empty(n, dtype=np.uint16)
    out8 = np.empty(n, dtype=np.uint8)
    results = []  # (label, seconds)

    def ours(fn, out):
        return lambda: fn(x.ctypes.data, out.ctypes.data, n)

    results.append(("parity fp32->bf16", best_of(ours(lib.parity_fp32_to_bf16, out16), a.repeat)))
    if ml_dtypes is not None:
        results.append(("ml_dtypes astype(bfloat16)",
                        best_of(lambda: x.astype(ml_dtypes.bfloat16), a.repeat)))
        ref = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        assert np.array_equal(ref, out16), "parity bf16 differs from ml_dtypes"
    if torch is not None:
        torch.set_num_threads(a.torch_threads)
        tx = torch.from_numpy(x)
        results.append((f"torch .to(bfloat16) [{a.torch_threads} thread]",
                        best_of(lambda: tx.to(torch.bfloat16), a.repeat)))
    results.append(("parity fp32->e4m3fn", best_of(ours(lib.parity_fp32_to_e4m3fn, out8), a.repeat)))
    if ml_dtypes is not None:
        results.append(("ml_dtypes astype(float8_e4m3fn)",
                        best_of(lambda: x.astype(ml_dtypes.float8_e4m3fn), a.repeat)))
        ref = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        assert np.array_equal(ref, out8), "parity e4m3fn differs from ml_dtypes"
    results.append(("parity fp32->fp16", best_of(ours(lib.parity_fp32_to_fp16, out16), a.repeat)))
    results.append(("numpy astype(float16)", best_of(lambda: x.astype(np.float16), a.repeat)))

    print(f"bench_format: {a.mib} MiB fp32 input ({n} values), best of {a.repeat}, "
          f"numpy {np.__version__}, ml_dtypes {getattr(ml_dtypes, '__version__', 'missing')}, "
          f"torch {getattr(torch, '__version__', 'missing')}")
    print(f"{'conversion':<36} {'GB/s':>8}  {'ms':>8}")
    t = dict(results)
    for label, s in results:
        print(f"{label:<36} {nbytes / s / 1e9:8.2f}  {s * 1e3:8.1f}")

    def ratio(a_, b_):
        if a_ in t and b_ in t:
            print(f"  {a_} / {b_}: {t[b_] / t[a_]:.2f}x")

    print("speedups (time of the peer / time of parity):")
    ratio("parity fp32->bf16", "ml_dtypes astype(bfloat16)")
    tk = [k for k in t if k.startswith("torch")]
    if tk:
        ratio("parity fp32->bf16", tk[0])
    ratio("parity fp32->e4m3fn", "ml_dtypes astype(float8_e4m3fn)")
    ratio("parity fp32->fp16", "numpy astype(float16)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

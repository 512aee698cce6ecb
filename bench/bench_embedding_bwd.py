#!/usr/bin/env python3
"""Bench: parity's fp64 embedding-backward reference (parity_ref_embedding_bwd, the code `parity
check` builds its reference with) beside numpy (np.add.at, a bincount-per-column version) and
torch CPU index_add_, all in fp64 on the same inputs, in the same run; then the wall time of a
full default `parity check` of one kernel on the fused op at the production-like shape.

usage: bench_embedding_bwd.py [--n 65536] [--d 2048] [--v 50257] [--reps 3] [--no-check]
env:   PARITY_LIB (libparity.so), PARITY (the CLI); default: build/ next to this script.
"""
import argparse
import ctypes as C
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("PARITY_LIB", os.path.join(HERE, "..", "build", "libparity.so"))
CLI = os.environ.get("PARITY", os.path.join(HERE, "..", "build", "parity"))


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int32), ("ndim", C.c_int32),
                ("shape", C.c_int64 * 8), ("strides", C.c_int64 * 8), ("name", C.c_char_p)]


def best(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--v", type=int, default=50257)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-check", action="store_true")
    a = ap.parse_args()
    lib = C.CDLL(LIB)
    lib.parity_ref_embedding_bwd.restype = C.c_int
    lib.parity_ref_embedding_bwd.argtypes = [C.POINTER(Tensor), C.c_void_p, C.c_void_p,
                                             C.c_void_p, C.c_void_p, C.c_int]
    rng = np.random.default_rng(0)
    # Zipf(1.1)-skewed ids over V, like real text: the frequent rows get thousands of hits.
    ranks = rng.zipf(1.1, size=4 * a.n)
    ids = (ranks[ranks <= a.v][: a.n] - 1).astype(np.int32)
    dy = rng.standard_normal((a.n, a.d), dtype=np.float32) * 1e-3
    t = Tensor(dy.ctypes.data, 1, 2, (C.c_int64 * 8)(a.n, a.d), (C.c_int64 * 8)(a.d, 1), b"dY")
    out = np.zeros((a.v, a.d))

    def ours():
        out.fill(0)
        assert lib.parity_ref_embedding_bwd(C.byref(t), ids.ctypes.data, None,
                                            out.ctypes.data, None, 0) == 0

    dy64 = dy.astype(np.float64)
    ref = np.zeros((a.v, a.d))

    def add_at():
        ref.fill(0)
        np.add.at(ref, ids, dy64)

    def bincount():
        for j in range(a.d):
            ref[:, j] = np.bincount(ids, weights=dy64[:, j], minlength=a.v)

    results = [("parity_ref_embedding_bwd (fp64, 2 threads)", best(ours, a.reps))]
    results.append(("numpy np.add.at (fp64)", best(add_at, 1)))
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
    results.append(("numpy bincount per column (fp64)", best(bincount, 1)))
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
    try:
        import torch
        torch.set_num_threads(2)
        ti = torch.from_numpy(ids.astype(np.int64))
        td = torch.from_numpy(dy64)
        tout = torch.zeros((a.v, a.d), dtype=torch.float64)

        def torch_ia():
            tout.zero_()
            tout.index_add_(0, ti, td)

        results.append(("torch CPU index_add_ (fp64, 2 threads)", best(torch_ia, a.reps)))
        np.testing.assert_allclose(out, tout.numpy(), rtol=1e-12, atol=1e-15)
    except ImportError:
        print("(torch not importable: its row is skipped)")
    ours_t = results[0][1]
    gb = (a.n * a.d * 4 + a.n * 4 + a.v * a.d * 8) / 1e9
    print(f"embedding backward reference, N={a.n} D={a.d} V={a.v}, Zipf(1.1) ids, max hits {np.bincount(ids).max()}")
    for name, s in results:
        ratio = "" if s is ours_t else f"  parity is {s / ours_t:.1f}x faster"
        print(f"  {name:44s} {s * 1e3:9.1f} ms  {gb / s:6.2f} GB/s{ratio}")
    if not a.no_check:
        t0 = time.perf_counter()
        r = subprocess.run([CLI, "check", "embedding_rmsnorm_bwd", "--kernel", "builtin:fp32_seq",
                            "--workload", "prod", "-q"], stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        print(f"full default `parity check embedding_rmsnorm_bwd --kernel builtin:fp32_seq "
              f"--workload prod`: {wall:.1f} s wall (exit {r.returncode})")


if __name__ == "__main__":
    sys.exit(main())

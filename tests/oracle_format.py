"""Oracle cross-check of parity's format conversions against ml_dtypes, numpy and torch.

Over a million inputs per format (random fp32 bit patterns; random doubles including exact tie
points, near-ties a few double ulps away, values that are ties only after rounding to fp32,
subnormals of every format, double subnormals, huge values and non-finite ones) our
parity_format_encode (via ctypes on $PARITY_LIB) must give the same bit pattern as the oracle;
NaN only has to meet NaN. Exit 0 pass, 1 mismatch, 77 skipped (numpy/ml_dtypes missing).

Double rounding in the oracles (checked below and printed): ml_dtypes' astype from float64 goes
through float32 (float64 -> float32 -> target, two roundings), and so does torch 1.13's
float64 -> bfloat16; numpy's float64 -> float16 rounds once. So for double inputs the oracle is
ml_dtypes applied to x rounded to fp32 *to odd*: rounding to odd at 24 bits followed by
nearest-even at p <= 22 bits equals one nearest-even rounding (Boldo & Melquiond, "Emulation of
FMA and correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008; needs
p + 2 <= 24, true for all formats here, and fp32's exponent range covers theirs with >= 2 bits
to spare at the subnormal end). For fp32 inputs ml_dtypes and torch are used directly."""
import ctypes
import os
import sys
import warnings

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:
    # A build folder configured before the project's .venv existed caches the system python:
    # retry once with $PARITY_SRC/.venv/bin/python, then skip visibly (exit 77).
    venv = os.path.join(os.environ.get("PARITY_SRC", ""), ".venv", "bin", "python")
    if os.environ.get("PARITY_SRC") and os.path.exists(venv) and \
            os.path.abspath(venv) != os.path.abspath(sys.executable) and \
            not os.environ.get("PARITY_ORACLE_REEXEC"):
        os.environ["PARITY_ORACLE_REEXEC"] = "1"
        os.execv(venv, [venv] + sys.argv)
    print(f"SKIP: oracle_format needs numpy and ml_dtypes ({e})")
    sys.exit(77)

try:
    import torch
except Exception:  # torch is optional: its bf16 check is skipped with a message
    torch = None

# NaN/inf inputs are deliberate: numpy's cast warnings about them are noise here.
warnings.filterwarnings("ignore", category=RuntimeWarning)
SEED = 20240501
N = 1 << 20


def find_lib():
    cands = [os.environ.get("PARITY_LIB", "")]
    b = os.environ.get("PARITY_BUILD")
    if b:
        cands.append(os.path.join(b, "libparity.so"))
    for c in cands:
        if c and os.path.exists(c):
            return c
    print("SKIP: oracle_format: libparity.so not found (set PARITY_LIB)")
    sys.exit(77)


class RoundOpts(ctypes.Structure):
    _fields_ = [("rounding", ctypes.c_int), ("saturate_finite", ctypes.c_int),
                ("saturate_inf", ctypes.c_int)]


def preload_asan_if_needed(path):
    """A sanitizer build's libparity.so needs the ASan runtime loaded first: re-run this script
    with it preloaded (leak checks off: the interpreter itself 'leaks'), or skip visibly."""
    with open(path, "rb") as fh:
        if b"libasan.so" not in fh.read():
            return
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return
    import ctypes.util
    rt = ctypes.util.find_library("asan")
    if not rt:
        print("SKIP: oracle_format: libparity.so is an ASan build and libasan was not found")
        sys.exit(77)
    env = dict(os.environ, LD_PRELOAD=rt, ASAN_OPTIONS="detect_leaks=0:" +
               os.environ.get("ASAN_OPTIONS", ""))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


LIB_PATH = find_lib()
preload_asan_if_needed(LIB_PATH)
lib = ctypes.CDLL(LIB_PATH)
lib.parity_format_get.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
lib.parity_format_get.restype = ctypes.c_int
lib.parity_format_encode_array.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
lib.parity_format_encode_array.restype = None
lib.parity_fp32_to_bf16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
lib.parity_fp32_to_e4m3fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
lib.parity_fp32_to_fp16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def get_format(name):
    buf = ctypes.create_string_buffer(512)  # opaque: larger than parity_format_t
    if lib.parity_format_get(name.encode(), buf, None) != 0:
        raise SystemExit(f"parity_format_get({name}) failed")
    return buf


def ours(fmt, x, sat=False):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty(len(x), dtype=np.uint32)
    opts = RoundOpts(0, int(sat), int(sat))
    lib.parity_format_encode_array(fmt, x.ctypes.data, len(x), ctypes.byref(opts), None,
                                   out.ctypes.data)
    return out


def rto32(x):
    """float64 -> float32 rounded to odd: truncate, and set the last bit if inexact."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & np.isfinite(x)
    u = f.view(np.uint32).copy()
    over = inexact & (np.abs(back) > np.abs(x))  # includes overflow to inf: inf - 1 = FLT_MAX
    u[over] -= 1
    u[inexact] |= 1
    return u.view(np.float32)


UINT = {1: np.uint8, 2: np.uint16}
FORMATS = [  # name, numpy dtype of the oracle, total bits, max finite
    ("bf16", ml_dtypes.bfloat16),
    ("fp16", np.float16),
    ("e4m3fn", ml_dtypes.float8_e4m3fn),
    ("e5m2", ml_dtypes.float8_e5m2),
]


def codes_of(arr):
    return arr.view(UINT[arr.dtype.itemsize]).astype(np.uint32)


def cast(x, dt):
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dt)


def compare(label, got, ref_arr, x, failures):
    ref = codes_of(ref_arr)
    ref_nan = np.isnan(ref_arr.astype(np.float32))
    got_nan = np.isnan(decode_codes(label.split()[0], got))
    bad = np.where(ref_nan | got_nan, ref_nan != got_nan, got != ref)
    nbad = int(bad.sum())
    print(f"  {label:<44} {len(x):>9} values, {nbad} mismatches")
    if nbad:
        failures.append(label)
        for i in np.nonzero(bad)[0][:8]:
            xb = np.float64(x[i]).view(np.uint64)
            print(f"    x={float(x[i])!r} (double 0x{int(xb):016x}): ours 0x{int(got[i]):x} "
                  f"oracle 0x{int(ref[i]):x}")


_decode_tables = {}


def decode_codes(name, codes):
    dt = dict(FORMATS)[name]
    if name not in _decode_tables:
        size = np.dtype(dt).itemsize
        _decode_tables[name] = np.arange(1 << (8 * size), dtype=np.uint64).astype(
            UINT[size]).view(dt).astype(np.float64)
    return _decode_tables[name][codes]


def double_inputs(rng, dt):
    """Random doubles aimed at the format dt: ties, near-ties, subnormals, huge values."""
    size = np.dtype(dt).itemsize
    allc = np.arange(1 << (8 * size), dtype=np.uint64).astype(UINT[size])
    vals = allc.view(dt).astype(np.float64)
    fin = np.isfinite(vals) & (vals >= 0)
    pos = np.sort(vals[fin])
    k = N // 4
    i = rng.integers(0, len(pos) - 1, size=k)
    lo, hi = pos[i], pos[i + 1]
    mid = (lo + hi) / 2
    bits = mid.view(np.int64)
    step = rng.integers(-3, 4, size=k)  # exact tie and a few double ulps either side
    near = (bits + step).view(np.float64)
    rel = mid * (1 + rng.choice([-1, 1], size=k) * np.ldexp(1.0, -rng.integers(25, 50, size=k)))
    # ^ ties after rounding to fp32 but not as doubles: where double rounding bites
    at = pos[rng.integers(0, len(pos), size=k // 4)]
    wide = np.ldexp(rng.random(k), rng.integers(-160, 160, size=k))  # all scales
    tiny = np.ldexp(rng.random(k // 8), rng.integers(-1074, -1000, size=k // 8))
    top = pos[-1]
    edge = np.concatenate([top * (1 + np.ldexp(1.0, -np.arange(1, 30))), [np.inf, -np.inf, np.nan,
                          0.0, -0.0, 1e300, -1e300, 5e-324]])
    x = np.concatenate([near, rel, at, wide, tiny, edge])
    sign = rng.choice([-1.0, 1.0], size=len(x))
    return x * sign


def main():
    rng = np.random.default_rng(SEED)
    print(f"oracle_format: seed {SEED}, numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, "
          f"torch {torch.__version__ if torch else 'not importable (bf16 torch check skipped)'}")
    failures = []
    fp32 = rng.integers(0, 1 << 32, size=N, dtype=np.uint64).astype(np.uint32).view(np.float32)
    total = 0
    for name, dt in FORMATS:
        fmt = get_format(name)
        print(f"{name}:")
        # 1. fp32 bit patterns: one rounding in the oracle.
        x32 = fp32.astype(np.float64)
        compare(f"{name} fp32 patterns vs astype", ours(fmt, x32), cast(fp32, dt), x32, failures)
        # 2. doubles: oracle = astype(round-to-odd fp32).
        xd = double_inputs(rng, dt)
        got = ours(fmt, xd)
        compare(f"{name} doubles vs astype(rto32)", got, cast(rto32(xd), dt), xd, failures)
        total += len(x32) + len(xd)
        # 3. saturation: ours(saturate) == oracle(clip(x)) for finite x; inf -> +-max.
        top = float(np.max(decode_codes(name, np.arange(1 << (8 * np.dtype(dt).itemsize),
                                                        dtype=np.uint32))[
            np.isfinite(decode_codes(name, np.arange(1 << (8 * np.dtype(dt).itemsize),
                                                     dtype=np.uint32)))]))
        with np.errstate(invalid="ignore"):
            xc = np.where(np.isnan(xd), xd, np.clip(xd, -top, top))
        compare(f"{name} saturated vs astype(clip(x))", ours(fmt, xd, sat=True),
                cast(rto32(xc), dt), xd, failures)
        # 4. direct float64 astype: where does the oracle double-round?
        direct = cast(xd, dt)
        if dt is np.float16:
            compare(f"{name} doubles vs numpy astype (one rounding)", got, direct, xd, failures)
        else:
            dcodes = codes_of(direct)
            both_nan = np.isnan(direct.astype(np.float32)) & np.isnan(decode_codes(name, got))
            diff = (dcodes != got) & ~both_nan
            exact32 = xd.astype(np.float32).astype(np.float64) == xd
            print(f"  {name} doubles vs ml_dtypes astype(float64) directly: {int(diff.sum())} "
                  f"differ, all at inputs not representable in fp32: {bool(not np.any(diff & exact32))}"
                  " (ml_dtypes double-rounds via fp32)")
            if np.any(diff & exact32):
                failures.append(f"{name} direct astype differs at an fp32-exact input")
            if diff.any():
                i = int(np.nonzero(diff)[0][0])
                print(f"    e.g. x={float(xd[i])!r}: ours 0x{int(got[i]):x}, "
                      f"astype(float64) 0x{int(dcodes[i]):x}")
    # 5. fast bulk paths on the fp32 patterns.
    for name, fn, dt in [("bf16", lib.parity_fp32_to_bf16, ml_dtypes.bfloat16),
                         ("fp16", lib.parity_fp32_to_fp16, np.float16),
                         ("e4m3fn", lib.parity_fp32_to_e4m3fn, ml_dtypes.float8_e4m3fn)]:
        out = np.empty(N, dtype=UINT[np.dtype(dt).itemsize])
        fn(fp32.ctypes.data, out.ctypes.data, N)
        compare(f"{name} fast fp32 path vs astype", out.astype(np.uint32), cast(fp32, dt),
                fp32.astype(np.float64), failures)
    # 6. torch's bf16 rounding (c10 round_to_nearest_even) on fp32 inputs.
    if torch is not None:
        fmt = get_format("bf16")
        t = torch.from_numpy(fp32.copy()).to(torch.bfloat16).view(torch.int16).numpy()
        tb = t.view(np.uint16)
        ref = tb.view(ml_dtypes.bfloat16)
        compare("bf16 fp32 patterns vs torch .to(bfloat16)", ours(fmt, fp32.astype(np.float64)),
                ref, fp32.astype(np.float64), failures)
        xd = double_inputs(rng, ml_dtypes.bfloat16)
        td = torch.from_numpy(xd).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        got = ours(fmt, xd)
        tdd = td.view(ml_dtypes.bfloat16)
        diff = (td.astype(np.uint32) != got) & ~(np.isnan(tdd.astype(np.float32)) &
                                                 np.isnan(decode_codes("bf16", got)))
        exact32 = xd.astype(np.float32).astype(np.float64) == xd
        print(f"  bf16 doubles vs torch float64 .to(bfloat16): {int(diff.sum())} differ, all at "
              f"fp32-inexact inputs: {bool(not np.any(diff & exact32))} (torch double-rounds via fp32)")
        if np.any(diff & exact32):
            failures.append("torch bf16 differs at an fp32-exact input")
    else:
        print("  torch not importable: torch bf16 check skipped")
    print(f"checked {total} values against the one-rounding oracles")
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("oracle_format: all conversions agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""parity.round_to against ml_dtypes on every bf16, e4m3fn and e5m2 code, each code's midpoint to
its neighbour (the ties) and a point either side of it."""
import numpy as np
import pytest

import parity

ml = pytest.importorskip("ml_dtypes")


@np.errstate(invalid="ignore", over="ignore")
def _probe(codes_dtype, fmt_dtype):
    codes = np.arange(np.iinfo(codes_dtype).max + 1, dtype=np.uint64).astype(codes_dtype)
    vals = codes.view(fmt_dtype).astype(np.float64)
    fin = np.sort(np.unique(vals[np.isfinite(vals)]))
    mid = (fin[:-1] + fin[1:]) / 2
    off = np.diff(fin) / 8
    beyond = np.array([fin[-1] * 1.01, fin[-1] * 2, -fin[-1] * 1.5, np.inf, -np.inf, np.nan, 0.0, -0.0])
    return np.concatenate([vals, mid, mid + off, mid - off, beyond])


def _same(a, b):
    return np.all((a == b) | (np.isnan(a) & np.isnan(b)))


@pytest.mark.parametrize("fmt,codes,mdt", [("bf16", np.uint16, ml.bfloat16),
                                           ("e4m3fn", np.uint8, ml.float8_e4m3fn),
                                           ("e5m2", np.uint8, ml.float8_e5m2)])
@np.errstate(invalid="ignore", over="ignore")  # NaN codes and overflowing probes are meant
def test_round_equals_ml_dtypes(fmt, codes, mdt):
    x = _probe(codes, mdt)
    want = x.astype(mdt).astype(np.float64)  # ml_dtypes rounds from float64 directly
    got = parity.round_to(x, fmt).astype(np.float64)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), "first mismatches: x=%r parity=%r ml_dtypes=%r" % (x[bad][:4], got[bad][:4], want[bad][:4])
    # Signs of zeros and the codes themselves.
    assert np.array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))
    bits = parity.round_to(x, fmt, bits=True)
    mbits = x.astype(mdt).view(codes).astype(np.uint32)
    fin = ~np.isnan(want)
    assert np.array_equal(bits[fin], mbits[fin])


def test_round_modes():
    assert parity.round_to(1 + 2 ** -8, "bf16") == 1.0  # a tie: to even
    assert parity.round_to(1 + 3 * 2 ** -8, "bf16") == 1 + 2 ** -6
    assert parity.round_to(-1.999, "bf16", mode="toward_zero") == -(2 - 2 ** -7)
    assert parity.round_to(1000.0, "e4m3fn", saturate=True) == 448.0
    assert np.isnan(parity.round_to(1000.0, "e4m3fn"))
    x = np.full(20000, 1 + 2 ** -9)  # a quarter of the way from 1 to the next bf16
    s = parity.round_to(x, "bf16", mode="stochastic", seed=7)
    assert set(np.unique(s)) <= {1.0, 1 + 2 ** -7}
    frac = np.mean(s > 1)
    assert abs(frac - 0.25) < 4 * np.sqrt(0.25 * 0.75 / x.size)  # 4 sigma
    assert parity.round_to(0.1, "custom:m=3,e=4") == 0.1015625
    with pytest.raises(ValueError):
        parity.round_to(1.0, "bf17")

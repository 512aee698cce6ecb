/* format: CPFloat-style tests built in integer bit space. Every code of bf16, fp16, e4m3fn and
 * e5m2 is decoded and re-encoded; every code's neighbours (source-format ulps, tie points) must
 * round to the code worked out from the code index alone; overflow edges, signed zero, NaN-ness,
 * custom formats, stochastic rounding statistics, encode2 tie breaking, emulated accumulation,
 * reference sums, and the fast bulk paths against the exact path. Failures print raw bits.
 * PARITY_LONG=1 adds the sweep over all 2^32 fp32 patterns (tests/long_format.sh). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/format.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static int n_fail;

/* Record a failure, print the first few with raw bits, keep going so one run shows a pattern. */
#define EXPECT_CODE(fmt, what, x, got, want)                                                      \
    do {                                                                                          \
        uint32_t g_ = (got), w_ = (want);                                                         \
        if (g_ != w_) {                                                                           \
            if (n_fail++ < 20) {                                                                  \
                double x_ = (x);                                                                  \
                uint64_t xb_;                                                                     \
                memcpy(&xb_, &x_, 8);                                                             \
                print_error("%s %s: x=%a (double 0x%016llx): got 0x%x want 0x%x (line %d)\n",    \
                            (fmt)->name, what, x_, (unsigned long long)xb_, g_, w_, __LINE__);   \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static void end_check(void)
{
    int n = n_fail;
    n_fail = 0;
    if (n) fail_msg("%d mismatches (first 20 printed above)", n);
}

static parity_format_t fmt(const char *name)
{
    parity_format_t f;
    parity_diag_t d;
    if (parity_format_get(name, &f, &d) != PARITY_OK) fail_msg("format %s: %s", name, d.msg);
    return f;
}

static parity_round_opts_t opts(parity_rounding_t r, int sat_finite, int sat_inf)
{
    parity_round_opts_t o = {r, sat_finite, sat_inf};
    return o;
}

static uint32_t enc(const parity_format_t *f, double x, parity_rounding_t r)
{
    parity_round_opts_t o = opts(r, 0, 0);
    return parity_format_encode(f, x, &o, NULL);
}

static uint32_t enc2(const parity_format_t *f, double hi, double lo, parity_rounding_t r)
{
    parity_round_opts_t o = opts(r, 0, 0);
    return parity_format_encode2(f, hi, lo, &o, NULL);
}

static uint32_t sbit(const parity_format_t *f) { return (uint32_t)1 << (f->total_bits - 1); }
static uint32_t maxfin_code(const parity_format_t *f)
{
    return f->naninf == PARITY_NANINF_FN ? sbit(f) - 2
                                         : ((((uint32_t)1 << f->exp_bits) - 1) << f->mant_bits) - 1;
}
static int is_nan_code(const parity_format_t *f, uint32_t c) { return isnan(parity_format_decode(f, c)); }

static float fu(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint32_t uf(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static const char *const SMALL[] = {"bf16", "fp16", "e4m3fn", "e5m2"};

/* ---- constants -------------------------------------------------------------------------- */

static void constants(void **state)
{
    (void)state;
    struct {
        const char *name;
        int t, w, bias, emin, emax, bits;
        double maxf, minn, mins, u;
    } want[] = {
        {"fp32", 23, 8, 127, -126, 127, 32, FLT_MAX, FLT_MIN, 0x1p-149, 0x1p-24},
        {"tf32", 10, 8, 127, -126, 127, 19, 0x1.ffcp127, 0x1p-126, 0x1p-136, 0x1p-11},
        {"bf16", 7, 8, 127, -126, 127, 16, 0x1.fep127, 0x1p-126, 0x1p-133, 0x1p-8},
        {"fp16", 10, 5, 15, -14, 15, 16, 65504, 0x1p-14, 0x1p-24, 0x1p-11},
        {"e4m3fn", 3, 4, 7, -6, 8, 8, 448, 0x1p-6, 0x1p-9, 0x1p-4},
        {"e5m2", 2, 5, 15, -14, 15, 8, 57344, 0x1p-14, 0x1p-16, 0x1p-3},
        {"custom:m=4,e=3", 4, 3, 3, -2, 3, 8, 15.5, 0.25, 0x1p-6, 0x1p-5},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        parity_format_t f = fmt(want[i].name);
        assert_string_equal(f.name, want[i].name);
        assert_int_equal(f.mant_bits, want[i].t);
        assert_int_equal(f.exp_bits, want[i].w);
        assert_int_equal(f.bias, want[i].bias);
        assert_int_equal(f.emin, want[i].emin);
        assert_int_equal(f.emax, want[i].emax);
        assert_int_equal(f.total_bits, want[i].bits);
        assert_true(f.max_finite == want[i].maxf);
        assert_true(f.min_normal == want[i].minn);
        assert_true(f.min_subnormal == want[i].mins);
        assert_true(f.unit_roundoff == want[i].u);
        assert_true(parity_format_decode(&f, maxfin_code(&f)) == want[i].maxf);
        assert_true(parity_format_decode(&f, 1) == want[i].mins);
    }
    parity_format_t f;
    parity_diag_t d;
    assert_int_equal(parity_format_get("fp8", &f, &d), PARITY_E_NOTFOUND);
    assert_int_equal(parity_format_get("custom:m=0,e=5", &f, &d), PARITY_E_INVALID);
    assert_int_equal(parity_format_get("custom:m=24,e=8", &f, &d), PARITY_E_INVALID);
    assert_int_equal(parity_format_get("custom:m=10", &f, &d), PARITY_E_INVALID);
    assert_int_equal(parity_format_get("custom:m=10,e=9", &f, &d), PARITY_E_INVALID);
    assert_int_equal(parity_format_get("custom:m=10,e=5x", &f, &d), PARITY_E_INVALID);
    assert_non_null(strstr(d.msg, "field e"));
    assert_int_equal(parity_format_custom(0, 5, &f), PARITY_E_INVALID);
    /* The name survives a copy of the struct (it must not point into the original). */
    parity_format_t a = fmt("custom:m=10,e=5"), b = a;
    memset(&a, 0xff, sizeof a);
    assert_string_equal(b.name, "custom:m=10,e=5");
}

/* ---- every code decoded and re-encoded ---------------------------------------------------- */

static void roundtrip_all_codes(const char *name)
{
    parity_format_t f = fmt(name);
    const parity_rounding_t modes[] = {PARITY_ROUND_NEAREST_EVEN, PARITY_ROUND_TOWARD_ZERO,
                                       PARITY_ROUND_STOCHASTIC};
    parity_rng_t rng;
    parity_rng_seed(&rng, 1, 0);
    uint32_t ncodes = (uint32_t)1 << f.total_bits;
    for (uint32_t c = 0; c < ncodes; c++) {
        double v = parity_format_decode(&f, c);
        for (int m = 0; m < 3; m++) {
            parity_round_opts_t o = opts(modes[m], 0, 0);
            uint32_t got = parity_format_encode(&f, v, &o, &rng);
            if (isnan(v)) {
                /* NaN-ness and sign are preserved; the payload is canonicalized. */
                EXPECT_CODE(&f, "NaN stays NaN", v, (uint32_t)is_nan_code(&f, got), 1u);
                EXPECT_CODE(&f, "NaN sign", v, got & sbit(&f), c & sbit(&f));
            } else {
                EXPECT_CODE(&f, "decode/encode roundtrip", v, got, c);
            }
        }
    }
    end_check();
}

static void roundtrip_small_formats(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) roundtrip_all_codes(SMALL[i]);
    roundtrip_all_codes("tf32");
    roundtrip_all_codes("custom:m=4,e=3");
    roundtrip_all_codes("custom:m=1,e=2");
}

/* ---- neighbours of every code --------------------------------------------------------------
 * For each finite code c >= 0 whose successor c+1 is finite, lo = decode(c), hi = decode(c+1),
 * mid = (lo + hi)/2 (exact in double and in fp32: these formats have <= 11 bits and mid needs
 * one more). The expected code comes from the index alone: nearest-even picks c below mid,
 * c+1 above, the even one of (c, c+1) at mid; toward-zero always picks c inside [lo, hi). The
 * inputs are lo, mid, hi and their neighbours one ulp away in the source format (double, and
 * fp32 through the fp32 value widened exactly), for both signs (codes gain the sign bit). */

typedef struct {
    double x;
    uint32_t rne, rtz;
} probe_t;

static void neighbours(const char *name)
{
    parity_format_t f = fmt(name);
    const uint32_t maxc = maxfin_code(&f);
    for (uint32_t c = 0; c < maxc; c++) {
        double lo = parity_format_decode(&f, c), hi = parity_format_decode(&f, c + 1);
        double mid = (lo + hi) / 2;
        uint32_t even = (c & 1) ? c + 1 : c;
        float lof = (float)lo, midf = (float)mid, hif = (float)hi;
        probe_t p[] = {
            {lo, c, c},
            {nextafter(lo, INFINITY), c, c},
            {nextafterf(lof, INFINITY), c, c},
            {mid, even, c},
            {nextafter(mid, 0), c, c},
            {nextafter(mid, INFINITY), c + 1, c},
            {nextafterf(midf, 0), c, c},
            {nextafterf(midf, INFINITY), c + 1, c},
            {nextafter(hi, 0), c + 1, c},
            {nextafterf(hif, 0), c + 1, c},
        };
        for (size_t k = 0; k < sizeof p / sizeof p[0]; k++) {
            for (int s = 0; s < 2; s++) {
                double x = s ? -p[k].x : p[k].x;
                uint32_t sg = s ? sbit(&f) : 0;
                EXPECT_CODE(&f, "nearest-even", x, enc(&f, x, PARITY_ROUND_NEAREST_EVEN), sg | p[k].rne);
                EXPECT_CODE(&f, "toward-zero", x, enc(&f, x, PARITY_ROUND_TOWARD_ZERO), sg | p[k].rtz);
            }
        }
        /* Just below lo: nearest stays at c, toward zero drops to c - 1. */
        if (c > 0) {
            double xs[2] = {nextafter(lo, 0), nextafterf(lof, 0)};
            for (int k = 0; k < 2; k++) {
                EXPECT_CODE(&f, "below code, RNE", xs[k], enc(&f, xs[k], PARITY_ROUND_NEAREST_EVEN), c);
                EXPECT_CODE(&f, "below code, RTZ", xs[k], enc(&f, xs[k], PARITY_ROUND_TOWARD_ZERO), c - 1);
                EXPECT_CODE(&f, "below code, RTZ neg", -xs[k],
                            enc(&f, -xs[k], PARITY_ROUND_TOWARD_ZERO), sbit(&f) | (c - 1));
            }
        }
    }
    end_check();
}

static void neighbours_small_formats(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) neighbours(SMALL[i]);
    neighbours("custom:m=4,e=3");
}

static void neighbours_tf32(void **state)
{
    (void)state;
    neighbours("tf32");
}

/* ---- subnormals, signed zero, NaN -------------------------------------------------------- */

static void subnormals_zero_nan(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        parity_format_t f = fmt(SMALL[i]);
        double ms = f.min_subnormal;
        EXPECT_CODE(&f, "half min subnormal ties to 0", ms / 2, enc(&f, ms / 2, PARITY_ROUND_NEAREST_EVEN), 0);
        EXPECT_CODE(&f, "above half min subnormal", ms / 2,
                    enc(&f, nextafter(ms / 2, 1), PARITY_ROUND_NEAREST_EVEN), 1);
        EXPECT_CODE(&f, "1.5 min subnormal ties to 2", ms * 1.5, enc(&f, ms * 1.5, PARITY_ROUND_NEAREST_EVEN), 2);
        EXPECT_CODE(&f, "tiny negative -> -0", -ms / 4, enc(&f, -ms / 4, PARITY_ROUND_NEAREST_EVEN), sbit(&f));
        EXPECT_CODE(&f, "-min_double", -0x1p-1074, enc(&f, -0x1p-1074, PARITY_ROUND_TOWARD_ZERO), sbit(&f));
        EXPECT_CODE(&f, "+0", 0.0, enc(&f, 0.0, PARITY_ROUND_NEAREST_EVEN), 0);
        EXPECT_CODE(&f, "-0", -0.0, enc(&f, -0.0, PARITY_ROUND_NEAREST_EVEN), sbit(&f));
        assert_true(signbit(parity_format_decode(&f, sbit(&f))));
        /* Largest subnormal rounds up into the smallest normal across the boundary. */
        double top = f.min_normal - ms / 2;
        EXPECT_CODE(&f, "tie at subnormal/normal edge", top, enc(&f, top, PARITY_ROUND_NEAREST_EVEN),
                    (uint32_t)1 << f.mant_bits);
        uint32_t qnan = enc(&f, NAN, PARITY_ROUND_NEAREST_EVEN);
        EXPECT_CODE(&f, "NaN is NaN", NAN, (uint32_t)is_nan_code(&f, qnan), 1);
        EXPECT_CODE(&f, "-NaN has sign", -NAN, enc(&f, -NAN, PARITY_ROUND_NEAREST_EVEN) & sbit(&f), sbit(&f));
        parity_round_opts_t sat = opts(PARITY_ROUND_NEAREST_EVEN, 1, 1);
        EXPECT_CODE(&f, "NaN stays NaN under saturation", NAN,
                    (uint32_t)is_nan_code(&f, parity_format_encode(&f, NAN, &sat, NULL)), 1);
    }
    parity_format_t b = fmt("bf16"), h = fmt("fp16"), e4 = fmt("e4m3fn"), e5 = fmt("e5m2");
    EXPECT_CODE(&b, "canonical NaN", NAN, enc(&b, NAN, 0), 0x7fc0);
    EXPECT_CODE(&h, "canonical NaN", NAN, enc(&h, NAN, 0), 0x7e00);
    EXPECT_CODE(&e4, "canonical NaN", NAN, enc(&e4, NAN, 0), 0x7f);
    EXPECT_CODE(&e5, "canonical NaN", NAN, enc(&e5, NAN, 0), 0x7e);
    /* Doubles far below every format's range, including double subnormals. */
    EXPECT_CODE(&b, "2^-134 ties to 0", 0x1p-134, enc(&b, 0x1p-134, 0), 0);
    EXPECT_CODE(&b, "2^-134+ -> min sub", 0x1.0000000000001p-134, enc(&b, 0x1.0000000000001p-134, 0), 1);
    EXPECT_CODE(&b, "2^-1074", 0x1p-1074, enc(&b, 0x1p-1074, 0), 0);
    end_check();
}

/* ---- overflow edges ------------------------------------------------------------------------ */

static void overflow_edges(void **state)
{
    (void)state;
    const parity_round_opts_t rne = opts(PARITY_ROUND_NEAREST_EVEN, 0, 0);
    const parity_round_opts_t satf = opts(PARITY_ROUND_NEAREST_EVEN, 1, 0);
    const parity_round_opts_t sati = opts(PARITY_ROUND_NEAREST_EVEN, 1, 1);
    const parity_round_opts_t rtz = opts(PARITY_ROUND_TOWARD_ZERO, 0, 0);
    struct {
        const char *fmt;
        double x;
        uint32_t dflt, sat_finite, sat_all, toward_zero;
    } cases[] = {
        /* e4m3fn: 448 is the max; 464 is the midpoint to the missing 480 and ties to the even
         * 448 (0x7e, fraction 110); anything above overflows: NaN, or 448 when saturating. */
        {"e4m3fn", 448, 0x7e, 0x7e, 0x7e, 0x7e},
        {"e4m3fn", 464, 0x7e, 0x7e, 0x7e, 0x7e},
        {"e4m3fn", 464.0001, 0x7f, 0x7e, 0x7e, 0x7e},
        {"e4m3fn", 480, 0x7f, 0x7e, 0x7e, 0x7e},
        {"e4m3fn", 1e30, 0x7f, 0x7e, 0x7e, 0x7e},
        {"e4m3fn", INFINITY, 0x7f, 0x7f, 0x7e, 0x7f},
        {"e4m3fn", -INFINITY, 0xff, 0xff, 0xfe, 0xff},
        {"e4m3fn", -480, 0xff, 0xfe, 0xfe, 0xfe},
        /* e5m2: max 57344; 61440 is the midpoint to 2^16 and ties to the even one, inf (0x7c). */
        {"e5m2", 57344, 0x7b, 0x7b, 0x7b, 0x7b},
        {"e5m2", 61439.99, 0x7b, 0x7b, 0x7b, 0x7b},
        {"e5m2", 61440, 0x7c, 0x7b, 0x7b, 0x7b},
        {"e5m2", INFINITY, 0x7c, 0x7c, 0x7b, 0x7c},
        {"e5m2", -1e300, 0xfc, 0xfb, 0xfb, 0xfb},
        {"fp16", 65504, 0x7bff, 0x7bff, 0x7bff, 0x7bff},
        {"fp16", 65519.99, 0x7bff, 0x7bff, 0x7bff, 0x7bff},
        {"fp16", 65520, 0x7c00, 0x7bff, 0x7bff, 0x7bff},
        {"fp16", -INFINITY, 0xfc00, 0xfc00, 0xfbff, 0xfc00},
        {"bf16", 0x1.fep127, 0x7f7f, 0x7f7f, 0x7f7f, 0x7f7f},
        {"bf16", 0x1.ffp127, 0x7f80, 0x7f7f, 0x7f7f, 0x7f7f},
        {"bf16", 0x1.fefffffffffffp127, 0x7f7f, 0x7f7f, 0x7f7f, 0x7f7f},
        {"bf16", 1e300, 0x7f80, 0x7f7f, 0x7f7f, 0x7f7f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parity_format_t f = fmt(cases[i].fmt);
        double x = cases[i].x;
        EXPECT_CODE(&f, "overflow default", x, parity_format_encode(&f, x, &rne, NULL), cases[i].dflt);
        EXPECT_CODE(&f, "overflow saturate_finite", x, parity_format_encode(&f, x, &satf, NULL),
                    cases[i].sat_finite);
        EXPECT_CODE(&f, "overflow saturate both", x, parity_format_encode(&f, x, &sati, NULL),
                    cases[i].sat_all);
        EXPECT_CODE(&f, "overflow toward zero", x, parity_format_encode(&f, x, &rtz, NULL),
                    cases[i].toward_zero);
    }
    /* Defaults are "no saturation" for every format (docs/formats.md). */
    for (size_t i = 0; i < 4; i++) {
        parity_format_t f = fmt(SMALL[i]);
        parity_round_opts_t o = parity_format_default_opts(&f);
        assert_int_equal(o.rounding, PARITY_ROUND_NEAREST_EVEN);
        assert_int_equal(o.saturate_finite, 0);
        assert_int_equal(o.saturate_inf, 0);
    }
    end_check();
}

/* ---- custom formats equal the named ones ---------------------------------------------------- */

static void custom_equals_named(void **state)
{
    (void)state;
    const char *pairs[][2] = {{"custom:m=10,e=5", "fp16"},
                              {"custom:m=7,e=8", "bf16"},
                              {"custom:m=2,e=5", "e5m2"},
                              {"custom:m=10,e=8", "tf32"},
                              {"custom:m=23,e=8", "fp32"}};
    parity_rng_t rng;
    parity_rng_seed(&rng, 2, 0);
    for (size_t i = 0; i < 5; i++) {
        parity_format_t c = fmt(pairs[i][0]), n = fmt(pairs[i][1]);
        assert_int_equal(c.kind, PARITY_FMT_CUSTOM);
        assert_true(c.max_finite == n.max_finite && c.min_subnormal == n.min_subnormal);
        for (int k = 0; k < 200000; k++) {
            /* Random doubles over the whole range of the format and beyond. */
            uint64_t r = parity_rng_u64(&rng);
            double x = ldexp((double)(r >> 11), (int)(r & 0x3ff) % 300 - 200 - 53);
            if (r & 0x400) x = -x;
            EXPECT_CODE(&c, pairs[i][1], x, enc(&c, x, PARITY_ROUND_NEAREST_EVEN),
                        enc(&n, x, PARITY_ROUND_NEAREST_EVEN));
            uint32_t code = (uint32_t)(r >> 7) & (((uint32_t)1 << (n.total_bits - 1)) * 2 - 1);
            double dc = parity_format_decode(&c, code), dn = parity_format_decode(&n, code);
            EXPECT_CODE(&c, "decode", dc, (uint32_t)(dc == dn || (isnan(dc) && isnan(dn))), 1);
        }
    }
    end_check();
}

/* ---- stochastic rounding -------------------------------------------------------------------
 * x lies between neighbours lo < hi with p = (x - lo)/(hi - lo). Each of N trials rounds up
 * independently with probability p (for a correct implementation), so the count K of round-ups
 * is Binomial(N, p). Hoeffding's inequality gives, for any p,
 *     P(|K/N - p| >= eps) <= 2 exp(-2 N eps^2);
 * with N = 100000 and a false-alarm probability delta = 1e-9 per check,
 *     eps = sqrt(ln(2/delta) / (2N)) = sqrt(21.42 / 200000) = 0.01035.
 * The seed is fixed, so the test is deterministic; the bound says a correct implementation
 * fails for at most a 1e-9 fraction of seeds, while a wrong probability (e.g. a bias of 1%% of a
 * spacing from a truncated uniform, or p replaced by 1/2) is caught. */

static void stochastic_rounding(void **state)
{
    (void)state;
    const int N = 100000;
    const double eps = sqrt(log(2 / 1e-9) / (2.0 * N));
    struct {
        const char *fmt;
        double lo, hi, p;
    } cases[] = {
        {"bf16", 1.0, 1.0 + 0x1p-7, 0.3},
        {"bf16", 1.0, 1.0 + 0x1p-7, 0.5},
        {"bf16", 1.0, 1.0 + 0x1p-7, 1.0 / 1024},
        {"bf16", 0x1p-133, 0x1p-132, 0.75}, /* subnormal */
        {"fp16", 2048, 2050, 0.9},
        {"e4m3fn", 416, 448, 0.6},
        {"e4m3fn", 0.0, 0x1p-9, 0.25},
        {"e5m2", -0.875, -0.75, 0.1}, /* negative: "up" = away from zero, p of the magnitude */
    };
    parity_rng_t rng, rng2;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parity_format_t f = fmt(cases[i].fmt);
        parity_round_opts_t o = opts(PARITY_ROUND_STOCHASTIC, 0, 0);
        double x = cases[i].lo + cases[i].p * (cases[i].hi - cases[i].lo);
        double p = (x - cases[i].lo) / (cases[i].hi - cases[i].lo); /* exact */
        uint32_t clo = enc(&f, cases[i].lo, 0), chi = enc(&f, cases[i].hi, 0);
        parity_rng_seed(&rng, 1234, i);
        parity_rng_seed(&rng2, 1234, i);
        long up = 0;
        for (int k = 0; k < N; k++) {
            uint32_t c = parity_format_encode(&f, x, &o, &rng);
            if (c != clo && c != chi)
                fail_msg("%s SR x=%a: got 0x%x, not a neighbour 0x%x/0x%x", f.name, x, c, clo, chi);
            up += (c == chi);
            /* Reproducible: the same seed gives the same sequence. */
            if (parity_format_encode(&f, x, &o, &rng2) != c) fail_msg("SR not reproducible");
        }
        double freq = (double)up / N;
        if (fabs(freq - p) >= eps)
            fail_msg("%s SR x=%a: round-up frequency %.5f, expected %.5f +- %.5f (seed 1234, stream %zu)",
                     f.name, x, freq, p, eps, i);
    }
    /* Exact values never move; a lo far below the spacing almost never rounds up (p ~ 2^-53). */
    parity_format_t b = fmt("bf16");
    parity_round_opts_t o = opts(PARITY_ROUND_STOCHASTIC, 0, 0);
    parity_rng_seed(&rng, 5, 0);
    for (int k = 0; k < 10000; k++) {
        assert_int_equal(parity_format_encode(&b, 1.5, &o, &rng), 0x3fc0);
        assert_int_equal(parity_format_encode2(&b, 1.0, 0x1p-70, &o, &rng), 0x3f80);
        assert_int_equal(parity_format_encode2(&b, 1.0 + 0x1p-7, -0x1p-70, &o, &rng), 0x3f81);
    }
}

/* ---- encode2: the low word breaks ties and decides toward-zero ------------------------------ */

static void encode2_ties(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        parity_format_t f = fmt(SMALL[i]);
        const uint32_t maxc = maxfin_code(&f);
        for (uint32_t c = 0; c < maxc; c++) {
            double lo = parity_format_decode(&f, c), hi = parity_format_decode(&f, c + 1);
            double mid = (lo + hi) / 2, tiny = ldexp(mid, -60);
            uint32_t even = (c & 1) ? c + 1 : c;
            EXPECT_CODE(&f, "tie, lo=0", mid, enc2(&f, mid, 0, 0), even);
            EXPECT_CODE(&f, "tie, lo>0", mid, enc2(&f, mid, tiny, 0), c + 1);
            EXPECT_CODE(&f, "tie, lo<0", mid, enc2(&f, mid, -tiny, 0), c);
            EXPECT_CODE(&f, "-tie, lo<0", -mid, enc2(&f, -mid, -tiny, 0), sbit(&f) | (c + 1));
            EXPECT_CODE(&f, "-tie, lo>0", -mid, enc2(&f, -mid, tiny, 0), sbit(&f) | c);
            if (c == 0) continue;
            double t2 = ldexp(lo, -60);
            EXPECT_CODE(&f, "RTZ hi exact, lo<0", lo, enc2(&f, lo, -t2, PARITY_ROUND_TOWARD_ZERO), c - 1);
            EXPECT_CODE(&f, "RTZ hi exact, lo>0", lo, enc2(&f, lo, t2, PARITY_ROUND_TOWARD_ZERO), c);
            EXPECT_CODE(&f, "RNE hi exact, lo<0", lo, enc2(&f, lo, -t2, 0), c);
            EXPECT_CODE(&f, "RTZ -hi exact, lo>0", -lo, enc2(&f, -lo, t2, PARITY_ROUND_TOWARD_ZERO),
                        sbit(&f) | (c - 1));
        }
    }
    parity_format_t b = fmt("bf16");
    EXPECT_CODE(&b, "1 - tiny RTZ", 1.0, enc2(&b, 1.0, -0x1p-80, PARITY_ROUND_TOWARD_ZERO), 0x3f7f);
    EXPECT_CODE(&b, "1 - tiny RNE", 1.0, enc2(&b, 1.0, -0x1p-80, 0), 0x3f80);
    /* An unnormalized pair is renormalized first: hi + lo with |lo| > ulp(hi). */
    EXPECT_CODE(&b, "unnormalized", 1.0, enc2(&b, 1.0, 0x1p-7, 0), 0x3f81);
    end_check();
}

/* ---- emulated accumulation ------------------------------------------------------------------ */

static void accumulation(void **state)
{
    (void)state;
    parity_format_t b = fmt("bf16"), s = fmt("fp32");
    parity_round_opts_t o = parity_format_default_opts(&b);
    double x[257];
    x[0] = 1.0;
    for (int i = 1; i < 257; i++) x[i] = 0x1p-9;
    /* Sequential: 1 + 2^-9 is a quarter ulp of bf16 at 1 (ulp 2^-7): every add rounds back. */
    assert_true(parity_format_sum(&b, x, 257, PARITY_SUM_SEQUENTIAL, 0, &o, NULL) == 1.0);
    /* Pairwise (left half = floor(n/2)): the spine is 1 (+2^-9 -> 1, +2^-8 ties to even 1,
     * +2^-7, +2^-6, +2^-5, +2^-4, +2^-3, exact, giving 1 + 31 * 2^-7), then + the right half
     * 129 * 2^-9 (exact: each subtree of equal terms sums exactly) = 1 + 63.25 * 2^-7, which
     * rounds to 1 + 63 * 2^-7 = 1.4921875; the exact sum is 1.5. */
    assert_true(parity_format_sum(&b, x, 257, PARITY_SUM_PAIRWISE, 0, &o, NULL) == 1.4921875);
    /* Blocked by 16: block 0 = 1 + 15 terms -> 1; 15 blocks of 16 terms = 2^-5 each, exact
     * (1 + 60 * 2^-7); the last block is a lone 2^-9, a quarter ulp, lost: 1.46875. */
    assert_true(parity_format_sum(&b, x, 257, PARITY_SUM_BLOCKED, 16, &o, NULL) == 1.46875);
    /* Small terms first: they sum exactly to 0.5, then 1.5. */
    double y[257];
    for (int i = 0; i < 256; i++) y[i] = 0x1p-9;
    y[256] = 1.0;
    assert_true(parity_format_sum(&b, y, 257, PARITY_SUM_SEQUENTIAL, 0, &o, NULL) == 1.5);
    assert_true(parity_format_sum(&b, y, 0, PARITY_SUM_PAIRWISE, 0, &o, NULL) == 0.0);

    /* Exact-then-rounded-once: 1 + 2^-24 is an fp32 tie (double sum exact), + 2^-80 lifts it
     * above the tie; naive double addition would lose the 2^-80 and round to even (1.0). */
    parity_round_opts_t os = parity_format_default_opts(&s);
    assert_true(parity_format_add(&s, 1.0 + 0x1p-24, 0x1p-80, &os, NULL) == 1.0 + 0x1p-23);
    assert_true(parity_format_add(&s, 1.0 + 0x1p-24, -0x1p-80, &os, NULL) == 1.0);
    assert_true(parity_format_add(&s, 1.0 + 0x1p-24, 0.0, &os, NULL) == 1.0);
    assert_true(parity_format_add(&b, 1.0 + 0x1p-8, 0x1p-70, &o, NULL) == 1.0 + 0x1p-7);
    /* Non-finite terms give the IEEE result. */
    assert_true(isinf(parity_format_add(&b, INFINITY, 1.0, &o, NULL)));
    assert_true(isnan(parity_format_add(&b, INFINITY, -INFINITY, &o, NULL)));
    /* Toward zero accumulates downward in magnitude. */
    parity_round_opts_t z = opts(PARITY_ROUND_TOWARD_ZERO, 0, 0);
    assert_true(parity_format_add(&b, 1.0, -0x1p-60, &z, NULL) == 1.0 - 0x1p-8);
}

/* ---- reference sums in double ---------------------------------------------------------------- */

__extension__ typedef __int128 i128;

static void reference_sums(void **state)
{
    (void)state;
    double a[] = {1e100, 1.0, -1e100};
    assert_true(parity_sum_exact(a, 3) == 1.0);
    assert_true(parity_sum_neumaier(a, 3) == 1.0);
    /* Neumaier handles a large term arriving after a small running sum (Kahan gives 0). */
    double b[] = {1.0, 1e100, 1.0, -1e100};
    assert_true(parity_sum_neumaier(b, 4) == 2.0);
    assert_true(parity_sum_exact(b, 4) == 2.0);
    /* Ten doubles 0.1 sum exactly to 1 + 5.55e-17, which rounds to 1.0 (naive: 0.9999...). */
    double c[10];
    for (int i = 0; i < 10; i++) c[i] = 0.1;
    assert_true(parity_sum_neumaier(c, 10) == 1.0);
    assert_true(parity_sum_exact(c, 10) == 1.0);
    /* Half-way cases of the final rounding (fsum's correction step). */
    double t1[] = {1.0, 0x1p-53};                  /* tie -> even 1.0 */
    double t2[] = {1.0 + 0x1p-52, 0x1p-53};        /* tie -> even 1 + 2^-51 */
    double t3[] = {1.0, 0x1p-53, 0x1p-105};        /* above tie */
    double t4[] = {1.0, 0x1p-53, -0x1p-105};       /* below tie */
    double t5[] = {0x1p-105, 1.0, 0x1p-53};        /* order does not matter */
    assert_true(parity_sum_exact(t1, 2) == 1.0);
    assert_true(parity_sum_exact(t2, 2) == 1.0 + 0x1p-51);
    assert_true(parity_sum_exact(t3, 3) == 1.0 + 0x1p-52);
    assert_true(parity_sum_exact(t4, 3) == 1.0);
    assert_true(parity_sum_exact(t5, 3) == 1.0 + 0x1p-52);
    /* Intermediate overflow is handled; a true overflow is inf; non-finite terms are IEEE. */
    double o1[] = {1e308, 1e308, 1.0, -1e308, -1e308};
    assert_true(parity_sum_exact(o1, 5) == 1.0);
    double o2[] = {DBL_MAX, DBL_MAX};
    assert_true(isinf(parity_sum_exact(o2, 2)));
    double o3[] = {INFINITY, 1.0}, o4[] = {INFINITY, -INFINITY};
    assert_true(isinf(parity_sum_exact(o3, 2)));
    assert_true(isnan(parity_sum_exact(o4, 2)));
    assert_true(parity_sum_exact(NULL, 0) == 0.0);

    /* Random cancellation-heavy sums against an exact 128-bit fixed-point accumulation: terms
     * m 2^e with |m| < 2^40, e in [-30, 30) are multiples of 2^-30 below 2^70, so 1000 of them
     * sum exactly in an i128 scaled by 2^30; GCC's i128 -> double conversion rounds to nearest
     * even, and the final scaling by 2^-30 is exact. */
    parity_rng_t rng;
    parity_rng_seed(&rng, 99, 0);
    double x[1000];
    for (int trial = 0; trial < 200; trial++) {
        i128 acc = 0;
        for (int i = 0; i < 1000; i++) {
            uint64_t r = parity_rng_u64(&rng);
            int64_t m = (int64_t)(r >> 24) - ((int64_t)1 << 39);
            int e = (int)(parity_rng_u64(&rng) % 60) - 30;
            x[i] = ldexp((double)m, e);
            acc += (i128)m * ((i128)1 << (e + 30));
        }
        double want = ldexp((double)acc, -30);
        double got = parity_sum_exact(x, 1000);
        if (got != want) fail_msg("exact sum trial %d (seed 99): got %a want %a", trial, got, want);
        /* Neumaier's error bound: |s - S| <= u |S| + 2 (n u)^2 sum|x| roughly; check loosely. */
        double sabs = 0;
        for (int i = 0; i < 1000; i++) sabs += fabs(x[i]);
        assert_true(fabs(parity_sum_neumaier(x, 1000) - want) <= 0x1p-53 * fabs(want) + 1e-24 * sabs);
    }
}

/* ---- ulp ----------------------------------------------------------------------------------- */

static void ulp_values(void **state)
{
    (void)state;
    parity_format_t b = fmt("bf16"), e = fmt("e4m3fn");
    assert_true(parity_format_ulp(&b, 1.0) == 0x1p-7);
    assert_true(parity_format_ulp(&b, -1.99) == 0x1p-7);
    assert_true(parity_format_ulp(&b, 0.0) == 0x1p-133);
    assert_true(parity_format_ulp(&b, 1e-45) == 0x1p-133);
    assert_true(parity_format_ulp(&e, 448) == 32);
    assert_true(isnan(parity_format_ulp(&e, INFINITY)));
    assert_true(isnan(parity_format_ulp(&e, NAN)));
}

/* ---- fast bulk paths against the exact path ------------------------------------------------ */

/* Check fp32 patterns in[0..n) through the three fast encoders against parity_format_encode. */
static void check_fast_block(const uint32_t *in, size_t n, uint16_t *ob, uint16_t *oh, uint8_t *oe)
{
    static parity_format_t b, h, e;
    static int init;
    if (!init) {
        b = fmt("bf16");
        h = fmt("fp16");
        e = fmt("e4m3fn");
        init = 1;
    }
    static float xf[1 << 16];
    memcpy(xf, in, n * sizeof *in);
    parity_fp32_to_bf16(xf, ob, n);
    parity_fp32_to_fp16(xf, oh, n);
    parity_fp32_to_e4m3fn(xf, oe, n);
    for (size_t i = 0; i < n; i++) {
        double x = fu(in[i]);
        EXPECT_CODE(&b, "fast fp32->bf16", x, ob[i], enc(&b, x, 0));
        EXPECT_CODE(&h, "fast fp32->fp16", x, oh[i], enc(&h, x, 0));
        EXPECT_CODE(&e, "fast fp32->e4m3fn", x, oe[i], enc(&e, x, 0));
        if (n_fail > 20) return;
    }
}

static void fast_paths(void **state)
{
    (void)state;
    enum { B = 1 << 16 };
    uint32_t *in = malloc(B * sizeof *in);
    uint16_t *ob = malloc(B * sizeof *ob), *oh = malloc(B * sizeof *oh);
    uint8_t *oe = malloc(B);
    assert_non_null(in);
    assert_non_null(ob);
    assert_non_null(oh);
    assert_non_null(oe);
    /* Structured: every sign/exponent, every combination of the top 6 fraction bits (where the
     * e4m3fn and fp16-subnormal rounding points lie), and 64 low-17-bit patterns: every 2^k,
     * 2^k - 1, 2^k + 1 (the bf16 / fp16 rounding points and their sticky bits). */
    uint32_t low[64];
    int nl = 0;
    low[nl++] = 0;
    low[nl++] = 0x1ffff;
    for (int k = 0; k < 17 && nl < 62; k++) {
        low[nl++] = (uint32_t)1 << k;
        low[nl++] = ((uint32_t)1 << k) - 1 + ((uint32_t)1 << k); /* 2^(k+1) - 1 */
        if (k > 1) low[nl++] = ((uint32_t)1 << k) + 1;
    }
    while (nl < 64) low[nl++] = 0x15555;
    size_t fill = 0;
    for (uint32_t se = 0; se < 512; se++)
        for (uint32_t top = 0; top < 64; top++)
            for (int l = 0; l < 64; l++) {
                in[fill++] = (se << 23) | (top << 17) | low[l];
                if (fill == B) {
                    check_fast_block(in, fill, ob, oh, oe);
                    fill = 0;
                }
            }
    /* Random patterns (seed 3). */
    parity_rng_t rng;
    parity_rng_seed(&rng, 3, 0);
    for (int blk = 0; blk < 64; blk++) {
        for (size_t i = 0; i < B; i++) in[i] = (uint32_t)parity_rng_u64(&rng);
        check_fast_block(in, B, ob, oh, oe);
    }
    /* Every fp32 pattern when asked (tests/long_format.sh): about 2^32 * 3 exact encodes. */
    const char *lng = getenv("PARITY_LONG");
    if (lng && *lng == '1') {
        for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += B) {
            for (size_t i = 0; i < B; i++) in[i] = (uint32_t)(base + i);
            check_fast_block(in, B, ob, oh, oe);
            if (n_fail) break;
        }
    }
    /* Decoders: every code against the exact decode (NaN: both NaN; zeros: same sign). */
    parity_format_t b = fmt("bf16"), h = fmt("fp16"), e = fmt("e4m3fn");
    float *of = malloc(B * sizeof *of);
    uint16_t *codes = malloc(B * sizeof *codes);
    uint8_t codes8[256];
    assert_non_null(of);
    assert_non_null(codes);
    for (uint32_t c = 0; c < B; c++) codes[c] = (uint16_t)c;
    for (uint32_t c = 0; c < 256; c++) codes8[c] = (uint8_t)c;
    for (int which = 0; which < 3; which++) {
        const parity_format_t *f = which == 0 ? &b : which == 1 ? &h : &e;
        uint32_t nc = which == 2 ? 256 : B;
        if (which == 0) parity_bf16_to_fp32(codes, of, nc);
        if (which == 1) parity_fp16_to_fp32(codes, of, nc);
        if (which == 2) parity_e4m3fn_to_fp32(codes8, of, nc);
        for (uint32_t c = 0; c < nc; c++) {
            double want = parity_format_decode(f, c), got = of[c];
            int ok = isnan(want) ? isnan(got) : (got == want && signbit(got) == signbit(want));
            EXPECT_CODE(f, "fast decode", want, ok ? c : uf(of[c]), c);
        }
    }
    /* Scalar forms. */
    for (uint32_t c = 0; c < B; c++) {
        float v = parity_bf16_to_fp32_1((uint16_t)c);
        if (isnan(v)) continue;
        EXPECT_CODE(&b, "scalar roundtrip", v, parity_fp32_to_bf16_1(v), c);
    }
    assert_true(parity_round_bf16(1.0f + 0x1p-8f) == 1.0f);
    assert_true(parity_round_bf16(1.0f + 0x1.8p-8f) == 1.0f + 0x1p-7f);
    free(in);
    free(ob);
    free(oh);
    free(oe);
    free(of);
    free(codes);
    end_check();
}

/* parity_format_decimal: reads back bit for bit, in the shortest of %.15g/%.16g/%.17g that
 * does (so never longer than needed among those), over doubles of every binade. */
static void decimal_text(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(parity_format_decimal(0.1, b), "0.1");
    assert_string_equal(parity_format_decimal(5.0, b), "5");
    assert_string_equal(parity_format_decimal(-0.0, b), "-0");
    assert_string_equal(parity_format_decimal(1099511627776.0, b), "1099511627776");
    assert_string_equal(parity_format_decimal(NAN, b), "nan");
    assert_string_equal(parity_format_decimal(-INFINITY, b), "-inf");
    assert_string_equal(parity_format_decimal(1.0 / 3.0, b), "0.3333333333333333");
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t u = s & 0x7fefffffffffffffull; /* finite, any exponent */
        if (i & 1) u |= 0x8000000000000000ull;
        double x;
        memcpy(&x, &u, sizeof x);
        parity_format_decimal(x, b);
        double y = strtod(b, NULL);
        if (memcmp(&x, &y, sizeof x) != 0) fail_msg("%a printed as %s reads back as %a", x, b, y);
        char c[32];
        snprintf(c, sizeof c, "%.15g", x);
        if (strtod(c, NULL) == x && strcmp(b, c) != 0) fail_msg("%a: %s, but %s reads back too", x, b, c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constants),
        cmocka_unit_test(roundtrip_small_formats),
        cmocka_unit_test(neighbours_small_formats),
        cmocka_unit_test(neighbours_tf32),
        cmocka_unit_test(subnormals_zero_nan),
        cmocka_unit_test(overflow_edges),
        cmocka_unit_test(custom_equals_named),
        cmocka_unit_test(stochastic_rounding),
        cmocka_unit_test(encode2_ties),
        cmocka_unit_test(accumulation),
        cmocka_unit_test(reference_sums),
        cmocka_unit_test(ulp_values),
        cmocka_unit_test(fast_paths),
        cmocka_unit_test(decimal_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

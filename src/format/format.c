/* Number formats: the exact (slow, general) encode/decode/round for every format parity knows,
 * emulated accumulation in a format, and compensated / exact summation in double.
 * Deliberately not here: the vectorized bulk fp32 conversions (src/format/format_bulk.c), which must
 * agree bit for bit with parity_format_encode and are tested against it. */
#include "parity/format.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Format descriptions
 * ------------------------------------------------------------------------------------------- */

/* Static names for every legal custom format, so that parity_format_t.name stays valid when the
 * struct is copied by value (a pointer into its own name_buf would dangle in the copy). */
#define CN(T, W) "custom:m=" #T ",e=" #W
#define CROW(T) {NULL, NULL, CN(T, 2), CN(T, 3), CN(T, 4), CN(T, 5), CN(T, 6), CN(T, 7), CN(T, 8)}
static const char *const CUSTOM_NAMES[24][9] = {
    {NULL},   CROW(1),  CROW(2),  CROW(3),  CROW(4),  CROW(5),  CROW(6),  CROW(7),
    CROW(8),  CROW(9),  CROW(10), CROW(11), CROW(12), CROW(13), CROW(14), CROW(15),
    CROW(16), CROW(17), CROW(18), CROW(19), CROW(20), CROW(21), CROW(22), CROW(23)};
#undef CROW
#undef CN

/* Fill the derived fields from kind, mant_bits, exp_bits and naninf. */
static void derive(parity_format_t *f)
{
    int t = f->mant_bits, w = f->exp_bits;
    f->bias = (1 << (w - 1)) - 1;
    f->emin = 1 - f->bias;
    f->total_bits = 1 + w + t;
    if (f->naninf == PARITY_NANINF_IEEE) {
        /* The all-ones exponent is reserved for inf/NaN: largest finite is (2 - 2^-t) 2^emax. */
        f->emax = f->bias;
        f->max_finite = ldexp(2.0 - ldexp(1.0, -t), f->emax);
    } else {
        /* FN (OCP E4M3): the all-ones exponent holds normal numbers except S.1..1.1..1 (NaN), so
         * emax = bias + 1 and the largest mantissa there is 1..10: (2 - 2^(1-t)) 2^emax. */
        f->emax = f->bias + 1;
        f->max_finite = ldexp(2.0 - ldexp(1.0, 1 - t), f->emax);
    }
    f->min_normal = ldexp(1.0, f->emin);
    f->min_subnormal = ldexp(1.0, f->emin - t);
    f->unit_roundoff = ldexp(1.0, -(t + 1));
}

static void set_name(parity_format_t *f, const char *name)
{
    f->name = name;
    size_t n = strlen(name);
    if (n >= sizeof f->name_buf) n = sizeof f->name_buf - 1;
    memcpy(f->name_buf, name, n);
    f->name_buf[n] = '\0';
}

parity_status_t parity_format_custom(int mant_bits, int exp_bits, parity_format_t *out)
{
    if (!out || mant_bits < 1 || mant_bits > 23 || exp_bits < 2 || exp_bits > 8)
        return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    out->kind = PARITY_FMT_CUSTOM;
    out->mant_bits = mant_bits;
    out->exp_bits = exp_bits;
    out->naninf = PARITY_NANINF_IEEE;
    derive(out);
    set_name(out, CUSTOM_NAMES[mant_bits][exp_bits]);
    return PARITY_OK;
}

static const struct {
    const char *name;
    parity_format_kind_t kind;
    int t, w;
    parity_naninf_t naninf;
} BUILTIN[] = {
    {"fp32", PARITY_FMT_FP32, 23, 8, PARITY_NANINF_IEEE},
    {"tf32", PARITY_FMT_TF32, 10, 8, PARITY_NANINF_IEEE},
    {"bf16", PARITY_FMT_BF16, 7, 8, PARITY_NANINF_IEEE},
    {"fp16", PARITY_FMT_FP16, 10, 5, PARITY_NANINF_IEEE},
    {"e4m3fn", PARITY_FMT_E4M3FN, 3, 4, PARITY_NANINF_FN},
    {"e5m2", PARITY_FMT_E5M2, 2, 5, PARITY_NANINF_IEEE},
};

/* Parse a decimal integer field of a custom spec; returns -1 when it is not one. */
static int parse_small(const char *s, const char **end)
{
    int v = 0, nd = 0;
    while (*s >= '0' && *s <= '9' && nd < 4) v = v * 10 + (*s++ - '0'), nd++;
    *end = s;
    return nd ? v : -1;
}

parity_status_t parity_format_get(const char *name, parity_format_t *out, parity_diag_t *diag)
{
    if (!name || !out) return parity_diag_set(diag, PARITY_E_INVALID, "format: NULL argument");
    for (size_t i = 0; i < sizeof BUILTIN / sizeof BUILTIN[0]; i++) {
        if (strcmp(name, BUILTIN[i].name) != 0) continue;
        memset(out, 0, sizeof *out);
        out->kind = BUILTIN[i].kind;
        out->mant_bits = BUILTIN[i].t;
        out->exp_bits = BUILTIN[i].w;
        out->naninf = BUILTIN[i].naninf;
        derive(out);
        set_name(out, BUILTIN[i].name);
        return PARITY_OK;
    }
    if (strncmp(name, "custom:", 7) != 0)
        return parity_diag_set(diag, PARITY_E_NOTFOUND,
                               "format '%s': unknown; expected fp32, tf32, bf16, fp16, e4m3fn, "
                               "e5m2 or custom:m=T,e=W", name);
    const char *p = name + 7, *end;
    if (strncmp(p, "m=", 2) != 0)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "format '%s': expected 'm=' (fraction bits) after 'custom:'", name);
    int t = parse_small(p + 2, &end);
    if (t < 1 || t > 23)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "format '%s': field m: expected fraction bits 1..23", name);
    if (strncmp(end, ",e=", 3) != 0)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "format '%s': expected ',e=' (exponent bits) after m=%d", name, t);
    int w = parse_small(end + 3, &end);
    if (w < 2 || w > 8 || *end != '\0')
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "format '%s': field e: expected exponent bits 2..8", name);
    return parity_format_custom(t, w, out);
}

parity_round_opts_t parity_format_default_opts(const parity_format_t *f)
{
    /* Every default is "no saturation": IEEE overflow to inf for formats with inf (PyTorch,
     * ml_dtypes, numpy), overflow to NaN for e4m3fn (ml_dtypes astype, PyTorch .to()). */
    (void)f;
    parity_round_opts_t o = {PARITY_ROUND_NEAREST_EVEN, 0, 0};
    return o;
}

/* ---------------------------------------------------------------------------------------------
 * Encode / decode
 * ------------------------------------------------------------------------------------------- */

static uint32_t sign_bit(const parity_format_t *f) { return (uint32_t)1 << (f->total_bits - 1); }

/* Magnitude codes of the special values. */
static uint32_t code_inf(const parity_format_t *f)
{
    return (((uint32_t)1 << f->exp_bits) - 1) << f->mant_bits;
}
static uint32_t code_nan(const parity_format_t *f)
{
    /* IEEE: quiet NaN = all-ones exponent with the top fraction bit set (0x7fc0 for bf16, 0x7e00
     * for fp16, 0x7e for e5m2). FN: the only NaN, all ones (0x7f for e4m3fn). */
    if (f->naninf == PARITY_NANINF_FN) return sign_bit(f) - 1;
    return code_inf(f) | ((uint32_t)1 << (f->mant_bits - 1));
}
static uint32_t code_maxfin(const parity_format_t *f)
{
    return f->naninf == PARITY_NANINF_FN ? sign_bit(f) - 2 : code_inf(f) - 1;
}
/* What an overflowing magnitude becomes when not saturated: inf, or NaN where there is no inf. */
static uint32_t code_overflow(const parity_format_t *f)
{
    return f->naninf == PARITY_NANINF_FN ? code_nan(f) : code_inf(f);
}

/* The core: the magnitude code of the exact real a + b (a > 0 a double, b a double with
 * |b| <= ulp(a)/2, i.e. (a, b) a normalized double-double) rounded per mode; u is a uniform
 * [0,1) draw for stochastic rounding.
 *
 * Why this is correctly rounded with no double rounding: let ee = max(exponent of a+b, emin)
 * and q = 2^(ee - t) the target quantum there. s = a / q is exact (scaling by a power of two,
 * and s >= 2^-1074 * 2^(t - emin) cannot underflow), so a + b = q (n + f + bs) with n = floor(s)
 * an integer, f = s - n exact in [0, 1) and bs = b / q. f is a multiple of g = ulp(a)/q and
 * |bs| <= g/2, so the real remainder r = f + bs satisfies: r > 1/2 iff f > 1/2 (f >= 1/2 + g
 * gives r >= 1/2 + g/2), r < 1/2 iff f < 1/2, and at f == 1/2 the sign of bs breaks the tie.
 * Likewise f > 0 implies 0 < r < 1, and f == 0 leaves r = bs in (-1, 1): just below n when
 * bs < 0. bs itself may underflow to 0 in the scaling (ee - t > 0 and b subnormal); we only use
 * its sign in that case, taken from b. The result n' in {n - 1, n, n + 1} is a count of quanta
 * at exponent ee, and the code is ((ee - emin) << t) + n': a carry out of the fraction
 * (n' = 2^(t+1)) lands exactly on the next binade's code, and ee == emin with n' < 2^t is the
 * subnormal encoding. */
static uint64_t encode_mag(const parity_format_t *f, double a, double b, parity_rounding_t mode,
                           double u)
{
    const int t = f->mant_bits;
    int ex;
    (void)frexp(a, &ex); /* a = m 2^ex, m in [1/2, 1): the binade exponent of a is ex - 1 */
    int e = ex - 1;
    /* a a power of two and b < 0: a + b lies in the binade below, whose quantum is half. */
    if (b < 0 && ldexp(1.0, e) == a) e -= 1;
    int ee = e < f->emin ? f->emin : e;
    if (ee > f->emax + 1) return (uint64_t)1 << 40; /* far beyond the range: an overflow */
    double s = ldexp(a, t - ee);
    double n = floor(s);
    double fr = s - n;
    double bs = ldexp(b, t - ee);
    int bsign = (b > 0) - (b < 0);
    uint64_t m = (uint64_t)n;

    switch (mode) {
    case PARITY_ROUND_TOWARD_ZERO:
        if (fr == 0 && bsign < 0) m -= 1;
        break;
    case PARITY_ROUND_STOCHASTIC: {
        /* The down neighbour is m (or m - 1 when f == 0 and b < 0); the probability of rounding
         * up is the remainder r rounded to double, compared with a 53-bit uniform u: the
         * probability is exact to within 2^-53. */
        double r = fr + bs;
        if (fr == 0 && bsign < 0) {
            m -= 1;
            r = 1.0 + bs;
        }
        if (u < r) m += 1;
        break;
    }
    case PARITY_ROUND_NEAREST_EVEN:
    default:
        if (fr > 0.5 || (fr == 0.5 && bsign > 0) || (fr == 0.5 && bsign == 0 && (m & 1)))
            m += 1;
        /* fr == 0 with b < 0: r is just below n, so nearest is n itself: nothing to do. */
        break;
    }
    return ((uint64_t)(ee - f->emin) << t) + m;
}

uint32_t parity_format_encode2(const parity_format_t *f, double hi, double lo,
                               const parity_round_opts_t *opts, parity_rng_t *rng)
{
    parity_round_opts_t dflt;
    if (!opts) {
        dflt = parity_format_default_opts(f);
        opts = &dflt;
    }
    /* Renormalize with 2Sum so that |lo| <= ulp(hi)/2 holds whatever the caller passed
     * (Knuth's TwoSum is exact unless hi + lo overflows, which the non-finite path handles). */
    double s = hi + lo;
    if (lo == 0) {
        /* Already normalized; skipping the sum keeps the sign of a zero hi (-0 + 0 is +0). */
    } else if (isfinite(s)) {
        double bp = s - hi, ap = s - bp;
        lo = (hi - ap) + (lo - bp);
        hi = s;
    } else if (!isnan(hi) && !isinf(hi)) {
        hi = s; /* lo was inf/NaN, or the sum overflowed double: the IEEE sum */
        lo = 0;
    }
    uint32_t sign = signbit(hi) ? sign_bit(f) : 0;
    if (isnan(hi)) return sign | code_nan(f);
    if (isinf(hi)) return sign | (opts->saturate_inf ? code_maxfin(f) : code_overflow(f));
    if (hi == 0) return sign; /* then lo == 0 too: signed zero */
    /* One draw per finite nonzero input under stochastic rounding, so sequences depend only
     * on the inputs; a NULL rng falls back to nearest-even (the library never aborts). */
    parity_rounding_t mode = opts->rounding;
    double u = 0;
    if (mode == PARITY_ROUND_STOCHASTIC) {
        if (rng) u = parity_rng_uniform(rng);
        else mode = PARITY_ROUND_NEAREST_EVEN;
    }
    double a = fabs(hi), b = sign ? -lo : lo;
    uint64_t mag = encode_mag(f, a, b, mode, u);
    uint64_t limit = f->naninf == PARITY_NANINF_FN ? code_nan(f) : code_inf(f);
    if (mag >= limit) {
        /* IEEE 754 7.4: under round-toward-zero an overflow gives the largest finite number;
         * under nearest and stochastic the saturation policy decides. */
        if (mode == PARITY_ROUND_TOWARD_ZERO || opts->saturate_finite)
            return sign | code_maxfin(f);
        return sign | code_overflow(f);
    }
    return sign | (uint32_t)mag;
}

uint32_t parity_format_encode(const parity_format_t *f, double x, const parity_round_opts_t *opts,
                              parity_rng_t *rng)
{
    return parity_format_encode2(f, x, 0.0, opts, rng);
}

double parity_format_decode(const parity_format_t *f, uint32_t bits)
{
    const int t = f->mant_bits;
    uint32_t mask = f->total_bits >= 32 ? 0xffffffffu : ((uint32_t)1 << f->total_bits) - 1;
    bits &= mask;
    double sgn = (bits & sign_bit(f)) ? -1.0 : 1.0;
    uint32_t mag = bits & (sign_bit(f) - 1);
    uint32_t E = mag >> t, M = mag & (((uint32_t)1 << t) - 1);
    if (f->naninf == PARITY_NANINF_FN) {
        if (mag == code_nan(f)) return copysign(NAN, sgn);
    } else if (E == ((uint32_t)1 << f->exp_bits) - 1) {
        return M ? copysign(NAN, sgn) : sgn * INFINITY;
    }
    if (E == 0) return sgn * ldexp((double)M, f->emin - t);
    return sgn * ldexp((double)(M | ((uint32_t)1 << t)), (int)E - f->bias - t);
}

double parity_format_round2(const parity_format_t *f, double hi, double lo,
                            const parity_round_opts_t *opts, parity_rng_t *rng)
{
    return parity_format_decode(f, parity_format_encode2(f, hi, lo, opts, rng));
}

double parity_format_round(const parity_format_t *f, double x, const parity_round_opts_t *opts,
                           parity_rng_t *rng)
{
    return parity_format_round2(f, x, 0.0, opts, rng);
}

double parity_format_ulp(const parity_format_t *f, double x)
{
    if (!isfinite(x)) return NAN;
    if (x == 0) return f->min_subnormal;
    int ex;
    (void)frexp(x, &ex);
    int e = ex - 1;
    if (e < f->emin) e = f->emin;
    return ldexp(1.0, e - f->mant_bits);
}

void parity_format_encode_array(const parity_format_t *f, const double *x, size_t n,
                                const parity_round_opts_t *opts, parity_rng_t *rng, uint32_t *out)
{
    for (size_t i = 0; i < n; i++) out[i] = parity_format_encode(f, x[i], opts, rng);
}

void parity_format_decode_array(const parity_format_t *f, const uint32_t *bits, size_t n,
                                double *out)
{
    for (size_t i = 0; i < n; i++) out[i] = parity_format_decode(f, bits[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Emulated accumulation
 * ------------------------------------------------------------------------------------------- */

double parity_format_add(const parity_format_t *f, double a, double b,
                         const parity_round_opts_t *opts, parity_rng_t *rng)
{
    /* 2Sum (Knuth, TAOCP 4.2.2): s + e == a + b exactly when s is finite, and
     * |e| <= ulp(s)/2, so encode2(s, e) rounds the exact sum once. */
    double s = a + b;
    if (!isfinite(s)) return parity_format_round(f, s, opts, rng);
    double bp = s - a, ap = s - bp;
    double e = (a - ap) + (b - bp);
    return parity_format_round2(f, s, e, opts, rng);
}

static double seq_sum(const parity_format_t *f, const double *x, size_t n,
                      const parity_round_opts_t *opts, parity_rng_t *rng)
{
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc = parity_format_add(f, acc, x[i], opts, rng);
    return acc;
}

/* Leaves of one term are fl(0 + x) = fl(x), so n == 1 agrees with the sequential order. */
static double pair_sum(const parity_format_t *f, const double *x, size_t n,
                       const parity_round_opts_t *opts, parity_rng_t *rng)
{
    if (n == 0) return 0.0;
    if (n == 1) return parity_format_add(f, 0.0, x[0], opts, rng);
    size_t h = n / 2;
    double l = pair_sum(f, x, h, opts, rng);
    double r = pair_sum(f, x + h, n - h, opts, rng);
    return parity_format_add(f, l, r, opts, rng);
}

double parity_format_sum(const parity_format_t *f, const double *x, size_t n,
                         parity_sum_order_t order, size_t block, const parity_round_opts_t *opts,
                         parity_rng_t *rng)
{
    if (!f || (!x && n)) return NAN;
    switch (order) {
    case PARITY_SUM_PAIRWISE:
        return pair_sum(f, x, n, opts, rng);
    case PARITY_SUM_BLOCKED: {
        if (block == 0 || block >= n) return seq_sum(f, x, n, opts, rng);
        double acc = 0.0;
        for (size_t i = 0; i < n; i += block) {
            size_t len = n - i < block ? n - i : block;
            acc = parity_format_add(f, acc, seq_sum(f, x + i, len, opts, rng), opts, rng);
        }
        return acc;
    }
    case PARITY_SUM_SEQUENTIAL:
    default:
        return seq_sum(f, x, n, opts, rng);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reference summation in double
 * ------------------------------------------------------------------------------------------- */

double parity_sum_neumaier(const double *x, size_t n)
{
    /* Neumaier (1974): like Kahan, but the compensation takes the error of whichever operand is
     * smaller, so a large term following a small running sum is handled too. */
    double s = 0.0, c = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = s + x[i];
        if (fabs(s) >= fabs(x[i])) c += (s - t) + x[i];
        else c += (x[i] - t) + s;
        s = t;
    }
    return s + c;
}

/* Shewchuk (1997) "Adaptive precision floating-point arithmetic": keep a list of non-overlapping
 * partials whose exact sum is the exact sum so far; each new term is swept through the list with
 * 2Sum. The final rounding follows CPython's math.fsum: add partials from the top until a
 * rounding error appears, then correct a half-way case using the sign of the next partial.
 * Returns 0 with *overflow set when a partial overflows double. */
static double fsum_core(const double *x, size_t n, double scale, int *overflow)
{
    size_t cap = 32, np = 0;
    double stack_p[32];
    double *p = stack_p;
    *overflow = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i] * scale;
        size_t k = 0;
        for (size_t j = 0; j < np; j++) {
            double y = p[j];
            if (fabs(v) < fabs(y)) {
                double tmp = v;
                v = y;
                y = tmp;
            }
            double hi = v + y;
            double lo = y - (hi - v);
            if (lo != 0.0) p[k++] = lo;
            v = hi;
        }
        if (!isfinite(v)) {
            *overflow = 1;
            if (p != stack_p) free(p);
            return 0.0;
        }
        if (k == cap) {
            /* The partials are non-overlapping, so there are at most ~2098/53 + 2 of them in
             * theory; this growth path exists only for safety. */
            double *np2 = malloc(2 * cap * sizeof *np2);
            if (!np2) {
                *overflow = 1;
                if (p != stack_p) free(p);
                return 0.0;
            }
            memcpy(np2, p, k * sizeof *np2);
            if (p != stack_p) free(p);
            p = np2;
            cap *= 2;
        }
        p[k++] = v;
        np = k;
    }
    double hi = 0.0;
    if (np > 0) {
        size_t j = np;
        hi = p[--j];
        double lo = 0.0;
        while (j > 0) {
            double xx = hi, y = p[--j];
            hi = xx + y;
            double yr = hi - xx;
            lo = y - yr;
            if (lo != 0.0) break;
        }
        /* Half-way case: the rest of the partials decide which way the tie goes. */
        if (j > 0 && ((lo < 0.0 && p[j - 1] < 0.0) || (lo > 0.0 && p[j - 1] > 0.0))) {
            double y = lo * 2.0;
            double xx = hi + y;
            double yr = xx - hi;
            if (y == yr) hi = xx;
        }
    }
    if (p != stack_p) free(p);
    return hi;
}

double parity_sum_exact(const double *x, size_t n)
{
    double naive = 0.0;
    int special = 0;
    for (size_t i = 0; i < n; i++) {
        naive += x[i];
        special |= !isfinite(x[i]);
    }
    if (special) return naive;
    int ovf;
    double r = fsum_core(x, n, 1.0, &ovf);
    if (!ovf) return r;
    /* An intermediate partial overflowed: redo on x * 2^-64 (exact for |x| >= 2^-958; smaller
     * terms can lose bits, which only matters if the final sum is tiny, which it cannot be when
     * the huge terms leave a residue) and scale back; the result may honestly overflow. */
    r = fsum_core(x, n, 0x1p-64, &ovf);
    return ovf ? naive : r * 0x1p64;
}

char *parity_format_decimal(double x, char *buf)
{
    if (isnan(x)) return strcpy(buf, "nan");
    if (isinf(x)) return strcpy(buf, x > 0 ? "inf" : "-inf");
    if (x == 0) return strcpy(buf, signbit(x) ? "-0" : "0");
    if (fabs(x) < 2147483647.0 && x == (double)(int)x) {
        snprintf(buf, 32, "%d", (int)x);
        return buf;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break; /* %.17g always does */
    }
    return buf;
}

/* The per-token hot loops of the distribution metrics, written for SIMD (GCC/Clang vector
 * extensions, four doubles per vector; on plain x86-64 the compiler lowers each to two SSE2
 * operations): exp and expm1 by range reduction and a polynomial (no libm call, branch-free,
 * error bound below and tested in tests/test_metrics_vexp.c), the per-token record of a block of
 * pairs, the block statistics (compensated sums in four lanes, extrema, the importance-weight
 * and Pearson co-moments) and the quantile-sketch inserts of a block. Not here: the accumulator
 * itself and its stream-order merges (metrics_dist.c). */
#include "src/metrics/metrics_impl.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "parity/metrics.h"

/* Vectors pass only between static inline functions of this file, never across an ABI. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* Four doubles per vector whatever the machine, so that the lanes (and with them the order of
 * the block sums) and hence the results are the same everywhere. The hot functions are compiled
 * three times and one copy is chosen at the first call (DISPATCH below): AVX-512 (F + VL: the
 * same 4-lane vectors, but 32 registers instead of 16, so the block statistics keep their
 * accumulators in registers), AVX2 (one instruction per vector) and plain x86-64 (two SSE2
 * instructions per vector). No contraction (-ffp-contract=off): a fused multiply-add only
 * where the code asks for one (fmav below), and an FMA is correctly rounded wherever it runs
 * (the FMA unit of the AVX copies; glibc's fma(), exact in software where the CPU has none,
 * in the baseline copy), so the three give the same bits, which tests/oracle_logprobs.py
 * checks by forcing each with PARITY_SIMD=avx512|avx2|sse2. */
#define VL 4
/* helpers taking or returning vectors are always inlined: a call between an AVX2 copy and a
 * plain function would pass vectors in different registers */
#define INL static inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PARITY_NO_TARGET_CLONES)
#define MULTI 1
#endif

#ifdef MULTI
/* 2: AVX-512 F+VL (with FMA), 1: AVX2 + FMA, 0: baseline x86-64; PARITY_SIMD=avx512|avx2|sse2 lowers it (for
 * tests; asking for more than the CPU has gives what it has) */
static int simd_level;
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void simd_init(void)
{
    __builtin_cpu_init();
    int fma = __builtin_cpu_supports("fma");
    int l = fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 2
            : fma && __builtin_cpu_supports("avx2")                                        ? 1
                                                                                           : 0;
    const char *e = getenv("PARITY_SIMD");
    if (e) {
        int want = !strcmp(e, "avx512") ? 2 : !strcmp(e, "avx2") ? 1 : !strcmp(e, "sse2") ? 0 : l;
        if (want < l) l = want;
    }
    simd_level = l;
}

static int simd(void)
{
    pthread_once(&simd_once, simd_init);
    return simd_level;
}

/* name(params) calls name_impl(args), inlined into a copy per instruction set */
#define DISPATCH(ret, name, params, args)                                                            \
    __attribute__((target("avx512f,avx512vl,avx2,fma"))) static ret name##_512 params                   \
    {                                                                                                \
        return name##_impl args;                                                                     \
    }                                                                                                \
    __attribute__((target("avx2,fma"))) static ret name##_avx2 params { return name##_impl args; }      \
    static ret name##_sse2 params { return name##_impl args; }                                       \
    ret name params                                                                                  \
    {                                                                                                \
        int l = simd();                                                                              \
        return l == 2 ? name##_512 args : l == 1 ? name##_avx2 args : name##_sse2 args;              \
    }
/* the same for functions returning void */
#define DISPATCH_V(name, params, args)                                                               \
    __attribute__((target("avx512f,avx512vl,avx2,fma"))) static void name##_512 params { name##_impl args; } \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params { name##_impl args; }            \
    static void name##_sse2 params { name##_impl args; }                                             \
    void name params                                                                                 \
    {                                                                                                \
        int l = simd();                                                                              \
        if (l == 2) name##_512 args;                                                                 \
        else if (l == 1) name##_avx2 args;                                                           \
        else name##_sse2 args;                                                                       \
    }
#else
#define DISPATCH(ret, name, params, args)                                                            \
    ret name params { return name##_impl args; }
#define DISPATCH_V(name, params, args)                                                               \
    void name params { name##_impl args; }
#endif

typedef double vd __attribute__((vector_size(VL * 8)));
typedef int64_t vi __attribute__((vector_size(VL * 8)));
typedef uint64_t vu __attribute__((vector_size(VL * 8)));

INL vd ld(const double *p)
{
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}

INL void st(double *p, vd v) { memcpy(p, &v, sizeof v); }

INL vd splat(double x) { return (vd){0} + x; }

/* mask ? x : y, mask lanes all ones or all zeros (a vector comparison's result) */
INL vd sel(vi mask, vd x, vd y)
{
    return (vd)(((vu)mask & (vu)x) | (~(vu)mask & (vu)y));
}

/* a * b + c rounded once, lane by lane: the compiler makes one vector FMA of the four in the
 * AVX copies and calls glibc's correctly rounded fma() per lane in the baseline one */
INL vd fmav(vd a, vd b, vd c)
{
    return (vd){__builtin_fma(a[0], b[0], c[0]), __builtin_fma(a[1], b[1], c[1]), __builtin_fma(a[2], b[2], c[2]),
                __builtin_fma(a[3], b[3], c[3])};
}

INL vd vabs(vd x) { return (vd)((vu)x & (~0ull >> 1)); }
/* lane sum, pairwise in a fixed order */
INL double hsum(vd v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}
/* A comparison's result (lanes all ones or all zeros) narrowed to one byte per lane, 0xff
 * where set, as a 32-bit word: one narrowing (vpmovqb with AVX-512, a shuffle otherwise) instead
 * of a lane-by-lane extraction. */
typedef uint8_t vb __attribute__((vector_size(VL)));
INL uint32_t lane_bytes(vi m)
{
    vb b = __builtin_convertvector(m, vb);
    uint32_t u;
    memcpy(&u, &b, sizeof u);
    return u;
}
INL int all_lanes(vi m) { return lane_bytes(m) == 0xffffffffu; }
INL int any_lane(vi m) { return lane_bytes(m) != 0; }

INL vd vmin(vd a, vd b) { return sel(b < a, b, a); }
INL vd vmax(vd a, vd b) { return sel(b > a, b, a); }

/* ---- exp and expm1 ---------------------------------------------------------------------------
 * Range reduction x = k ln2 + r with k = round(x / ln2), |r| <= ln2/2 (+ a rounding of x/ln2),
 * r carried as r_hi + r_lo: ln2 = LN2_HI + LN2_LO with LN2_HI's low 21 bits zero (fdlibm's
 * split), so k * LN2_HI is exact for |k| < 2^21 and x - k LN2_HI is exact (Sterbenz: the two are
 * within a factor 2 when k != 0); r_hi = that minus k LN2_LO rounded, r_lo its rounding error
 * (Fast2Sum). Then e^r - 1 = r + r^2 q(r), q(r) = sum_{n=2}^{14} r^(n-2) / n! by Horner: the
 * first omitted term r^15/15! is below 2^-70 relative to r for |r| <= 0.35, the terms of q
 * shrink by |r|/3 or faster, and the correction r^2 q is at most 0.18 |r|, so its few-ulp
 * rounding error costs at most about 0.5 ulp of the result, plus the final addition's 0.5 ulp:
 *   em1(r) = r_hi + (r_lo + r_hi^2 q(r_hi))          ~ 1 ulp
 *   e^x    = 2^k (1 + em1(r))                         ~ 1 ulp (exact scaling, see vexp)
 *   e^x - 1 = (2^k - 1) + 2^k em1(r)                  (2^k - 1 exact for |k| <= 53)
 * In the last one the two terms have the same sign except when k and r have opposite signs,
 * where |2^k em1(r)| <= 1.42 |result| (k = 1, r = -ln2/2), so the bound is 0.5 + 1.42 x 1 ulp.
 * Measured maxima against long double over dense samples: tests/test_metrics_vexp.c and
 * docs/logprob-metrics.md. */

#define LOG2E 0x1.71547652b82fep0
#define LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000 */
#define LN2_LO 1.90821492927058770002e-10 /* 0x3dea39ef35793c76 */
#define SHIFTER 0x1.8p52                  /* y + SHIFTER rounds y to an integer held in the low bits */

/* k and em1(r) = e^r - 1 for x within [-1100, 1100] (the caller clamps). */
INL vd reduce_em1(vd x, vi *k_out)
{
    vd y = fmav(x, splat(LOG2E), splat(SHIFTER));
    vi k = (vi)((vu)y - (vu)splat(SHIFTER));
    vd kd = y - splat(SHIFTER);
    vd hi = fmav(-kd, splat(LN2_HI), x); /* exact either way; one operation */
    vd lo = kd * splat(LN2_LO);
    vd r = hi - lo;
    vd rl = (hi - r) - lo;
    /* Horner, written out (a loop over the table keeps q in memory at -O2) */
    vd q = fmav(r, splat(metrics_inv_fact2[12]), splat(metrics_inv_fact2[11]));
    q = fmav(r, q, splat(metrics_inv_fact2[10]));
    q = fmav(r, q, splat(metrics_inv_fact2[9]));
    q = fmav(r, q, splat(metrics_inv_fact2[8]));
    q = fmav(r, q, splat(metrics_inv_fact2[7]));
    q = fmav(r, q, splat(metrics_inv_fact2[6]));
    q = fmav(r, q, splat(metrics_inv_fact2[5]));
    q = fmav(r, q, splat(metrics_inv_fact2[4]));
    q = fmav(r, q, splat(metrics_inv_fact2[3]));
    q = fmav(r, q, splat(metrics_inv_fact2[2]));
    q = fmav(r, q, splat(metrics_inv_fact2[1]));
    q = fmav(r, q, splat(metrics_inv_fact2[0]));
    *k_out = k;
    return r + fmav(r * r, q, rl);
}

/* 2^k as a double for -1022 <= k <= 1023 */
INL vd pow2(vi k) { return (vd)(((vu)k + 1023) << 52); }

/* e^x for every double x but NaN: the scaling 2^k is applied as 2^(k/2) 2^(k - k/2), both
 * normal, so the first product is exact and the second rounds once, into the subnormals or to
 * 0 or inf as the true value does. */
INL vd vexp(vd x)
{
    vi k;
    if (all_lanes(vabs(x) <= splat(700.0))) {
        /* the usual case (logprobs): |k| <= 1010, so 2^k is normal and so is the result; one
         * exact scaling gives the same bits as the two below */
        vd em1 = reduce_em1(x, &k);
        return (splat(1.0) + em1) * pow2(k);
    }
    x = vmax(vmin(x, splat(1100.0)), splat(-1100.0));
    vd em1 = reduce_em1(x, &k);
    vi k1 = k >> 1;
    return ((splat(1.0) + em1) * pow2(k1)) * pow2(k - k1);
}

/* e^x - 1 and e^x for |x| <= 40 (clamped; the callers use the values for |x| <= 30). A lane
 * with |x| <= 2^-7 (typical log-ratios of two faithful dumps) needs no reduction (k = 0) and
 * only q's first seven terms: the first omitted one, x^9/9!, is below 2^-74 |x|. The short
 * form is taken lane by lane, so a lane's result does not depend on its neighbours, and the
 * long one is computed only when some lane needs it. */
INL vd vexpm1(vd x, vd *ex)
{
    vi small = vabs(x) <= splat(0x1p-7);
    vd q = fmav(x, splat(metrics_inv_fact2[6]), splat(metrics_inv_fact2[5]));
    q = fmav(x, q, splat(metrics_inv_fact2[4]));
    q = fmav(x, q, splat(metrics_inv_fact2[3]));
    q = fmav(x, q, splat(metrics_inv_fact2[2]));
    q = fmav(x, q, splat(metrics_inv_fact2[1]));
    q = fmav(x, q, splat(metrics_inv_fact2[0]));
    vd em1 = fmav(x * x, q, x);
    vd e = splat(1.0) + em1;
    if (!all_lanes(small)) {
        vd xc = vmax(vmin(x, splat(40.0)), splat(-40.0));
        vi k;
        vd r = reduce_em1(xc, &k);
        vd p2 = pow2(k);
        e = sel(small, e, (splat(1.0) + r) * p2);
        em1 = sel(small, em1, fmav(p2, r, p2 - splat(1.0)));
    }
    *ex = e;
    return em1;
}

void metrics_vexp(const double *x, size_t n, double *out)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) st(out + i, vexp(ld(x + i)));
    if (i < n) {
        double t[VL] = {0};
        memcpy(t, x + i, (n - i) * sizeof *t);
        vd r = vexp(ld(t));
        memcpy(out + i, &r, (n - i) * sizeof *t);
    }
}

void metrics_vexpm1(const double *x, size_t n, double *out, double *ex)
{
    size_t i = 0;
    vd e;
    for (; i + VL <= n; i += VL) {
        st(out + i, vexpm1(ld(x + i), &e));
        if (ex) st(ex + i, e);
    }
    if (i < n) {
        double t[VL] = {0};
        memcpy(t, x + i, (n - i) * sizeof *t);
        vd r = vexpm1(ld(t), &e);
        memcpy(out + i, &r, (n - i) * sizeof *t);
        if (ex) memcpy(ex + i, &e, (n - i) * sizeof *t);
    }
}

/* ---- per-token records ----------------------------------------------------------------------
 * What prep_one (metrics_record.c) computes for a fast pair, four pairs at a time; the pairs that
 * are not fast (non-finite, |log r| > 30, an overflowed probability) are then redone one by one
 * by metrics_prep_slow. k3 = e^x - 1 - x by the Taylor series for |x| <= 1/2, with the number
 * of terms metrics_record.c derives, chosen by the largest |x| of the four lanes (more terms than
 * a lane needs only shrink its truncation error). */


INL vd k3_vec(vd x, vd rm1)
{
    vd ax = vabs(x);
    /* each lane with the number of terms its own |x| needs (as parity_metrics_k3): the 7-term
     * sum, and the 10- and 16-term ones only when a lane of the vector needs them */
    vd s7 = splat(metrics_inv_fact2[6]);
    vd s = s7;
    vi big = ax > splat(0x1p-7);
    if (any_lane(big)) {
        vd s10 = splat(metrics_inv_fact2[9]), s16 = splat(metrics_inv_fact2[15]);
        for (int i = 14; i >= 9; i--) s16 = fmav(x, s16, splat(metrics_inv_fact2[i]));
        s10 = sel(ax > splat(0x1p-4), s16, s10);
        s10 = fmav(x, s10, splat(metrics_inv_fact2[8]));
        s10 = fmav(x, s10, splat(metrics_inv_fact2[7]));
        s10 = fmav(x, s10, splat(metrics_inv_fact2[6]));
        s = sel(big, s10, s7);
    }
    s = fmav(x, s, splat(metrics_inv_fact2[5]));
    s = fmav(x, s, splat(metrics_inv_fact2[4]));
    s = fmav(x, s, splat(metrics_inv_fact2[3]));
    s = fmav(x, s, splat(metrics_inv_fact2[2]));
    s = fmav(x, s, splat(metrics_inv_fact2[1]));
    s = fmav(x, s, splat(metrics_inv_fact2[0]));
    return sel(ax <= splat(0.5), x * x * s, rm1 - x);
}

INL vi vfinite(vd x) { return vabs(x) <= splat(0x1.fffffffffffffp1023); }

/* Records of four pairs into index i..i+3; returns the lanes that are fast: both finite,
 * |log r| <= 30, both probabilities finite (the others are redone by the caller). */
INL vi prep4(const metrics_soa_t *o, size_t i, vd a, vd b)
{
    vd lr = a - b, w;
    vd pa = vexp(a);
    vd rm1 = vexpm1(lr, &w);
    /* p_B = p_A / r as p_A (1/r) (one division instead of a third exponential; 1/r serves
     * |dp| too): within 1 + 1.5 + 1/2 ulps while p_A is normal; a lane whose p_A is below
     * 2^-1000 (subnormal or 0, where the product would lose relative accuracy) takes e^b
     * itself, lane by lane */
    vd rinv = splat(1.0) / w;
    vd pb = pa * rinv;
    vi tiny = pa < splat(0x1p-1000);
    if (any_lane(tiny)) pb = sel(tiny, vexp(b), pb);
    st(o->lr + i, lr);
    st(o->pa + i, pa);
    st(o->pb + i, pb);
    st(o->rm1 + i, rm1);
    st(o->w + i, w);
    st(o->k3 + i, k3_vec(lr, rm1));
    /* |p_B - p_A| = e^max |expm1(min - max)|: p_A (r - 1) / r for a > b, p_B (1 - r)
     * otherwise (the larger probability times a factor <= 1: no loss when the smaller one is
     * subnormal) */
    st(o->adp + i, sel(lr > splat(0.0), pa * (rm1 * rinv), pb * -rm1));
    return vfinite(a) & vfinite(b) & (vabs(lr) <= splat(30.0)) & vfinite(pa) & vfinite(pb);
}

INL void metrics_prep_soa_impl(const double *a, const double *b, size_t n, const metrics_soa_t *o)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vi f = prep4(o, i, ld(a + i), ld(b + i));
        /* the fast flags as one 4-byte store (byte stores read back as a word would stall) */
        uint32_t fb = lane_bytes(f);
        uint32_t f01 = fb & 0x01010101u;
        memcpy(o->fast + i, &f01, VL);
        memset(o->cls + i, 0, VL); /* PAIR_FINITE; the slow path writes its own */
        if (fb != 0xffffffffu)
            for (int l = 0; l < VL; l++)
                if (!f[l]) metrics_prep_slow(a[i + l], b[i + l], o, i + l);
    }
    if (i < n) {
        /* the last partial vector through a scratch record of four */
        double ta[VL] = {0}, tb[VL] = {0}, s[7][VL];
        memcpy(ta, a + i, (n - i) * sizeof *ta);
        memcpy(tb, b + i, (n - i) * sizeof *tb);
        metrics_soa_t t = {s[0], s[1], s[2], s[3], s[4], s[5], s[6], NULL, NULL};
        vi f = prep4(&t, 0, ld(ta), ld(tb));
        size_t r = (n - i) * sizeof(double);
        memcpy(o->lr + i, s[0], r);
        memcpy(o->k3 + i, s[1], r);
        memcpy(o->rm1 + i, s[2], r);
        memcpy(o->w + i, s[3], r);
        memcpy(o->adp + i, s[4], r);
        memcpy(o->pa + i, s[5], r);
        memcpy(o->pb + i, s[6], r);
        for (size_t l = 0; i + l < n; l++) {
            o->fast[i + l] = (uint8_t)(f[l] & 1);
            o->cls[i + l] = 0;
            if (!f[l]) metrics_prep_slow(a[i + l], b[i + l], o, i + l);
        }
    }
}

/* ---- block statistics ---------------------------------------------------------------------- */

/* Knuth's TwoSum: s + e == a + b exactly, branch-free (vectorises, unlike Neumaier's compare). */
INL void two_sum(vd *s, vd *c, vd x)
{
    vd t = *s + x;
    vd z = t - *s;
    *c += (*s - (t - z)) + (x - z);
    *s = t;
}

INL void two_sum1(double *s, double *c, double x)
{
    double t = *s + x;
    double z = t - *s;
    *c += (*s - (t - z)) + (x - z);
    *s = t;
}

/* Quantile-sketch inserts of one block (values finite; with absval their magnitudes, else
 * values >= 0): the exact buffer takes what fits while the sketch is exact (as one insert at a
 * time would), then the bins; with h, the signed histogram of -x too (absval only). */
INL void qs_add_block(struct parity_qsketch *q, const double *x, size_t m, int absval, double mn,
                         double mx, const metrics_shist_t *h)
{
    if (m == 0) return;
    mn = mn + 0.0;
    mx = mx + 0.0;
    if (q->n == 0 || mn < q->min) q->min = mn;
    if (q->n == 0 || mx > q->max) q->max = mx;
    if (q->n_exact == q->n && q->n_exact < PARITY_QSKETCH_EXACT_MAX) {
        size_t take = PARITY_QSKETCH_EXACT_MAX - q->n_exact;
        if (take > m) take = m;
        for (size_t i = 0; i < take; i++) q->exact[q->n_exact + i] = (absval ? fabs(x[i]) : x[i]) + 0.0;
        q->n_exact += take;
        q->sorted = 0;
    }
    q->n += m;
    uint64_t *bins = q->bins;
    const uint64_t off = (uint64_t)QS_EXP_LO << QS_BITS;
    if (mn >= 0x1p-64 && mx < 0x1p64) {
        /* all in the binned range: the bin is the top 11 + 7 bits less the offset of 2^-64 */
        if (h) {
            /* signed bins (metrics_shist_t); delta = -x > 0 exactly when x's sign bit is set
             * (x != 0 here) */
            uint64_t *sb = h->sb;
            for (size_t i = 0; i < m; i++) {
                uint64_t u;
                memcpy(&u, &x[i], sizeof u);
                sb[(u >> 63) * QS_NBINS + (((u << 1) >> (53 - QS_BITS)) - off)]++;
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                uint64_t u;
                memcpy(&u, &x[i], sizeof u);
                bins[((u & (~0ull >> 1)) >> (52 - QS_BITS)) - off]++;
            }
        }
        return;
    }
    uint64_t nz = 0, nu = 0, no = 0;
    for (size_t i = 0; i < m; i++) {
        uint64_t u0, u;
        memcpy(&u0, &x[i], sizeof u0);
        u = u0 & (~0ull >> 1); /* |x|; also -0 -> +0 */
        uint64_t e = u >> 52;
        int zero = u == 0, under = !zero && e < QS_EXP_LO, over = e >= QS_EXP_LO + QS_BINADES;
        nz += (uint64_t)zero;
        nu += (uint64_t)under;
        no += (uint64_t)over;
        int reg = !(zero | under | over);
        uint64_t idx = ((e - QS_EXP_LO) << QS_BITS) | ((u >> (52 - QS_BITS)) & ((1u << QS_BITS) - 1));
        bins[reg ? idx : 0] += (uint64_t)reg;
        if (h) {
            size_t nb = h->nb, b = zero ? 2 * nb : (u0 >> 63) * nb + (under ? 0 : over ? nb - 1 : h->map[idx]);
            h->cnt[(i & 3) * (2 * nb + 1) + b]++;
        }
    }
    q->n_zero += nz;
    q->n_under += nu;
    q->n_over += no;
}

INL void metrics_dist_block_stats_soa_impl(const metrics_soa_t *t, size_t i0, size_t m, double lo, double hi,
                                          struct parity_qsketch *q_dlp, struct parity_qsketch *q_dp,
                                          const metrics_shist_t *h, const double *A, double unit,
                                          metrics_blk_t *out)
{
    const double *LR = t->lr + i0, *K3 = t->k3 + i0, *RM1 = t->rm1 + i0, *W = t->w + i0,
                 *ADP = t->adp + i0, *PA = t->pa + i0, *PB = t->pb + i0;
    vd s[S_N], c[S_N];
    for (int k = 0; k < S_N; k++) s[k] = c[k] = splat(0.0);
    vd mk3 = splat(K3[0]), mdl = splat(fabs(LR[0])), mdp = splat(ADP[0]),
        mchi = splat(RM1[0] * RM1[0]), wmin = splat(W[0]), wmax = splat(W[0]), spa = splat(0.0),
        spb = splat(0.0), mndl = splat(fabs(LR[0])), mndp = splat(ADP[0]);
    vi nlo = {0}, nhi = {0};
    const vd vlo = splat(lo), vhi = splat(hi);
    size_t i = 0;
    for (; i + VL <= m; i += VL) {
        vd lr = ld(LR + i), k3 = ld(K3 + i), rm1 = ld(RM1 + i), w = ld(W + i), adp = ld(ADP + i);
        vd adl = vabs(lr), chi2 = rm1 * rm1;
        /* k1 has terms of both signs and can cancel: compensated. The others are sums of
         * non-negative terms, where a plain sum of at most 64 terms per lane is within
         * 63u of the exact sum relative to the sum itself (no cancellation; see
         * docs/logprob-metrics.md "Sums") */
        two_sum(&s[S_K1], &c[S_K1], -lr);
        s[S_K2] = fmav(splat(0.5) * lr, lr, s[S_K2]);
        s[S_K3] += k3;
        s[S_ADL] += adl;
        s[S_ADP] += adp;
        s[S_CHI2] += chi2;
        s[S_W] += w;
        s[S_W2] = fmav(w, w, s[S_W2]);
        mk3 = vmax(mk3, k3);
        mdl = vmax(mdl, adl);
        mndl = vmin(mndl, adl);
        mdp = vmax(mdp, adp);
        mndp = vmin(mndp, adp);
        mchi = vmax(mchi, chi2);
        wmin = vmin(wmin, w);
        wmax = vmax(wmax, w);
        nlo -= w < vlo;
        nhi -= w > vhi;
        spa += ld(PA + i);
        spb += ld(PB + i);
    }
    /* the tail: token i + l into lane l */
    double S[S_N][VL], C[S_N][VL];
    for (int k = 0; k < S_N; k++) {
        memcpy(S[k], &s[k], sizeof S[k]);
        memcpy(C[k], &c[k], sizeof C[k]);
    }
    double tmk3 = mk3[0], tmdl = mdl[0], tmdp = mdp[0], tmchi = mchi[0], twmin = wmin[0],
           twmax = wmax[0], tmndl = mndl[0], tmndp = mndp[0], tspa = 0.0, tspb = 0.0;
    uint64_t tlo = 0, thi = 0;
    for (size_t l = 0; i + l < m; l++) {
        size_t j = i + l;
        double lr = LR[j], k3 = K3[j], rm1 = RM1[j], w = W[j], adp = ADP[j], adl = fabs(lr),
               chi2 = rm1 * rm1;
        two_sum1(&S[S_K1][l], &C[S_K1][l], -lr);
        S[S_K2][l] = __builtin_fma(0.5 * lr, lr, S[S_K2][l]);
        S[S_K3][l] += k3;
        S[S_ADL][l] += adl;
        S[S_ADP][l] += adp;
        S[S_CHI2][l] += chi2;
        S[S_W][l] += w;
        S[S_W2][l] = __builtin_fma(w, w, S[S_W2][l]);
        tmk3 = k3 > tmk3 ? k3 : tmk3;
        tmdl = adl > tmdl ? adl : tmdl;
        tmndl = adl < tmndl ? adl : tmndl;
        tmdp = adp > tmdp ? adp : tmdp;
        tmndp = adp < tmndp ? adp : tmndp;
        tmchi = chi2 > tmchi ? chi2 : tmchi;
        twmin = w < twmin ? w : twmin;
        twmax = w > twmax ? w : twmax;
        tlo += w < lo;
        thi += w > hi;
        tspa += PA[j];
        tspb += PB[j];
    }
    /* lanes combined in lane order: TwoSum of the sums, their errors and the lanes'
     * compensations into one compensation (the pair (s, c) is the block's compensated sum) */
    for (int k = 0; k < S_N; k++) {
        double ss = S[k][0], cc = C[k][0];
        for (int l = 1; l < VL; l++) {
            two_sum1(&ss, &cc, S[k][l]);
            cc += C[k][l];
        }
        out->s[k] = ss;
        out->c[k] = cc;
    }
    for (int l = 1; l < VL; l++) {
        tmk3 = mk3[l] > tmk3 ? mk3[l] : tmk3;
        tmdl = mdl[l] > tmdl ? mdl[l] : tmdl;
        tmndl = mndl[l] < tmndl ? mndl[l] : tmndl;
        tmdp = mdp[l] > tmdp ? mdp[l] : tmdp;
        tmndp = mndp[l] < tmndp ? mndp[l] : tmndp;
        tmchi = mchi[l] > tmchi ? mchi[l] : tmchi;
        twmin = wmin[l] < twmin ? wmin[l] : twmin;
        twmax = wmax[l] > twmax ? wmax[l] : twmax;
    }
    double pa_s = hsum(spa) + tspa;
    double pb_s = hsum(spb) + tspb;
    for (int l = 0; l < VL; l++) {
        tlo += (uint64_t)nlo[l];
        thi += (uint64_t)nhi[l];
    }
    double md = (double)m, mw = (out->s[S_W] + out->c[S_W]) / md, mx = pa_s / md, my = pb_s / md;
    /* second pass over the block (in cache): squared deviations about the block means */
    vd vmw = splat(mw), vmx = splat(mx), vmy = splat(my);
    vd m2w = splat(0.0), m2x = splat(0.0), m2y = splat(0.0), cxy = splat(0.0);
    /* with A: the analytic floor's m = unit (|a| + 1) in the same pass (a is finite in a fast
     * pair); plain lane sums, the terms are non-negative */
    vd fs = splat(0.0), fs2 = splat(0.0), fmx = splat(0.0);
    const vd vu1 = splat(unit), one = splat(1.0);
    for (i = 0; i + VL <= m; i += VL) {
        vd dw = ld(W + i) - vmw, dx = ld(PA + i) - vmx, dy = ld(PB + i) - vmy;
        m2w = fmav(dw, dw, m2w);
        m2x = fmav(dx, dx, m2x);
        m2y = fmav(dy, dy, m2y);
        cxy = fmav(dx, dy, cxy);
        if (A) { /* the same for every iteration: the compiler hoists it out of the loop */
            vd fm = vu1 * (vabs(ld(A + i)) + one);
            fs += fm;
            fs2 = fmav(fm, fm, fs2);
            fmx = vmax(fmx, fm);
        }
    }
    double tw = 0.0, tx = 0.0, ty = 0.0, txy = 0.0, tfs = 0.0, tfs2 = 0.0, tfmx = 0.0;
    for (; i < m; i++) {
        double dw = W[i] - mw, dx = PA[i] - mx, dy = PB[i] - my;
        tw = __builtin_fma(dw, dw, tw);
        tx = __builtin_fma(dx, dx, tx);
        ty = __builtin_fma(dy, dy, ty);
        txy = __builtin_fma(dx, dy, txy);
        if (A) {
            double fm = unit * (fabs(A[i]) + 1.0);
            tfs += fm;
            tfs2 = __builtin_fma(fm, fm, tfs2);
            tfmx = fm > tfmx ? fm : tfmx;
        }
    }
    for (int l = 0; l < VL; l++) tfmx = fmx[l] > tfmx ? fmx[l] : tfmx;
    out->fs = hsum(fs) + tfs;
    out->fs2 = hsum(fs2) + tfs2;
    out->fmx = tfmx;
    out->m = m;
    out->mk3 = tmk3;
    out->mdl = tmdl;
    out->mdp = tmdp;
    out->mchi = tmchi;
    out->wmin = twmin;
    out->wmax = twmax;
    out->nlo = tlo;
    out->nhi = thi;
    out->mw = mw;
    out->mx = mx;
    out->my = my;
    out->m2w = hsum(m2w) + tw;
    out->m2x = hsum(m2x) + tx;
    out->m2y = hsum(m2y) + ty;
    out->cxy = hsum(cxy) + txy;
    qs_add_block(q_dlp, LR, m, 1, tmndl, tmdl, h);
    qs_add_block(q_dp, ADP, m, 0, tmndp, tmdp, NULL);
}

/* ---- the exported entry points, one copy per instruction set (see DISPATCH) ---------------- */

DISPATCH_V(metrics_prep_soa, (const double *a, const double *b, size_t n, const metrics_soa_t *o), (a, b, n, o))
DISPATCH_V(metrics_dist_block_stats_soa,
           (const metrics_soa_t *t, size_t i0, size_t m, double lo, double hi, struct parity_qsketch *q_dlp,
            struct parity_qsketch *q_dp, const metrics_shist_t *h, const double *A, double unit,
            metrics_blk_t *out),
           (t, i0, m, lo, hi, q_dlp, q_dp, h, A, unit, out))

/* metrics_vexp / metrics_vexpm1 (src/metrics/metrics_vec.c), the SIMD exp and expm1 behind the per-token
 * logprob records: error in ulps against long double expl/expm1l (64-bit or wider significand,
 * so the reference's own error is below 2^-11 ulp of a double) over dense samples of the domain
 * the records use: exp over every double that does not overflow or underflow to 0 (logprobs),
 * including the subnormal results, the underflow and overflow edges; expm1 over |x| <= 30
 * (log-ratios; the blocked path takes |log r| <= 30), densest near 0 where expm1 - x cancels
 * and at the range-reduction boundaries ((k + 1/2) ln2) and the short/long switch (2^-7).
 * The bounds asserted are the ones docs/logprob-metrics.md states. Also: lane independence
 * (a value's result does not depend on its neighbours in a vector) and the per-token records
 * against the scalar definitions. Fixed seed, printed in failures. */
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

#include "src/metrics/metrics_impl.h"
#include "parity/metrics.h"
#include "parity/rng.h"

#define SEED 20261130u

/* Stated bounds (docs/logprob-metrics.md): normal results, in ulps of the double result. */
#define EXP_ULP 1.0
#define EXPM1_ULP 2.0
/* Subnormal results of exp are rounded once from a value within EXP_ULP ulps of a normal
 * number's precision: at most 0.5 + 2^-52 ulps of the subnormal spacing, asserted as 1. */
#define EXP_SUB_ULP 1.0

static double next_up(double x) { return nextafter(x, INFINITY); }

/* |got - ref| in ulps of the double nearest ref (2^-1074 in the subnormal range). */
static double ulps(double got, long double ref)
{
    double r = (double)ref;
    if (r == 0.0 && got == 0.0) return 0.0;
    int e;
    frexp(r == 0.0 ? DBL_MIN : r, &e);
    double u = ldexp(1.0, (e - 53) < -1074 ? -1074 : e - 53);
    return (double)(fabsl((long double)got - ref) / (long double)u);
}

typedef struct {
    double max_err, worst_x;
    size_t n;
} stat_t;

static void check(stat_t *st, const double *x, const double *got, const long double *ref, size_t n, double bound,
                  const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double e = ulps(got[i], ref[i]);
        if (!(e <= bound))
            fail_msg("%s(%a = %.17g) = %a, want %.21Lg: %.3f ulp > %.1f (seed %u)", what, x[i], x[i], got[i], ref[i], e,
                     bound, SEED);
        if (e > st->max_err) {
            st->max_err = e;
            st->worst_x = x[i];
        }
    }
    st->n += n;
}

#define CHUNK 4096

static void run_exp(stat_t *st, const double *x, size_t n, double bound_normal)
{
    double got[CHUNK];
    long double ref[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        metrics_vexp(x + i0, m, got);
        for (size_t i = 0; i < m; i++) ref[i] = expl((long double)x[i0 + i]);
        for (size_t i = 0; i < m; i++) {
            if (ref[i] > (long double)DBL_MAX) {
                /* overflow: inf (or DBL_MAX within half an ulp of it) */
                if (got[i] != INFINITY && got[i] != DBL_MAX) fail_msg("exp(%a) = %a, want inf (seed %u)", x[i0 + i], got[i], SEED);
                continue;
            }
            double r = (double)ref[i];
            double b = (r != 0.0 && fabs(r) < DBL_MIN) ? EXP_SUB_ULP : bound_normal;
            check(st, x + i0 + i, got + i, ref + i, 1, b, "exp");
        }
    }
}

static void run_expm1(stat_t *st, stat_t *st_e, const double *x, size_t n)
{
    double got[CHUNK], ex[CHUNK];
    long double ref[CHUNK], refe[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        metrics_vexpm1(x + i0, m, got, ex);
        for (size_t i = 0; i < m; i++) {
            ref[i] = expm1l((long double)x[i0 + i]);
            refe[i] = expl((long double)x[i0 + i]);
        }
        check(st, x + i0, got, ref, m, EXPM1_ULP, "expm1");
        check(st_e, x + i0, ex, refe, m, EXP_ULP, "exp (from expm1)");
    }
}

static void skip_without_long_double(void)
{
    if (LDBL_MANT_DIG < 64) {
        print_message("long double has %d bits: no reference finer than a double, skipped\n", LDBL_MANT_DIG);
        skip();
    }
}

static void test_exp_domain(void **state)
{
    (void)state;
    skip_without_long_double();
    size_t cap = 1 << 22, n = 0;
    double *x = malloc(cap * sizeof *x);
    assert_non_null(x);
    parity_rng_t rng;
    parity_rng_seed(&rng, SEED, 0);
    /* uniform over [-746, 710] (logprobs: everything from 0 or 1 down to total underflow) */
    for (size_t i = 0; i < 1500000; i++) x[n++] = -746.0 + 1456.0 * parity_rng_uniform(&rng);
    /* the typical logprob range, denser */
    for (size_t i = 0; i < 1000000; i++) x[n++] = -40.0 * parity_rng_uniform(&rng);
    /* subnormal results: x in [-745.2, -708.3] */
    for (size_t i = 0; i < 300000; i++) x[n++] = -745.2 + 36.9 * parity_rng_uniform(&rng);
    /* reduction boundaries (k + 1/2) ln2 for every k of the domain, +- 0..15 ulps */
    for (int k = -1076; k <= 1023; k++) {
        double b = ((double)k + 0.5) * 0.6931471805599453;
        for (int j = -15; j <= 15 && n < cap; j++) x[n++] = b + j * ldexp(fabs(b) > 0 ? fabs(b) : 1, -52);
    }
    /* tiny |x| (exp = 1 + x) */
    for (int e = -1074; e <= -1; e++) {
        x[n++] = ldexp(1.0, e);
        x[n++] = -ldexp(1.0, e);
    }
    stat_t st = {0, 0, 0};
    run_exp(&st, x, n, EXP_ULP);
    print_message("exp: %zu samples, max error %.3f ulp at x = %.17g\n", st.n, st.max_err, st.worst_x);
    free(x);
}

static void test_exp_edges(void **state)
{
    (void)state;
    /* overflow: the largest x with a finite e^x is 709.782712893384 (log DBL_MAX) */
    double xmax = 709.782712893384, x[8], y[8];
    x[0] = xmax;
    x[1] = next_up(xmax);
    x[2] = 710.0;
    x[3] = INFINITY;
    x[4] = -INFINITY;
    x[5] = -745.2; /* below log(2^-1075): 0 */
    x[6] = -745.13; /* e^x > 2^-1075: the smallest subnormal */
    x[7] = 0.0;
    metrics_vexp(x, 8, y);
    assert_true(isfinite(y[0]) && y[0] > 1.79e308);
    assert_true(y[1] == INFINITY);
    assert_true(y[2] == INFINITY);
    assert_true(y[3] == INFINITY);
    assert_true(y[4] == 0.0);
    assert_true(y[5] == 0.0);
    assert_true(y[6] == ldexp(1.0, -1074));
    assert_true(y[7] == 1.0);
}

static void test_expm1_domain(void **state)
{
    (void)state;
    skip_without_long_double();
    size_t cap = 1 << 22, n = 0;
    double *x = malloc(cap * sizeof *x);
    assert_non_null(x);
    parity_rng_t rng;
    parity_rng_seed(&rng, SEED, 1);
    /* uniform over the blocked path's domain */
    for (size_t i = 0; i < 1000000; i++) x[n++] = -30.0 + 60.0 * parity_rng_uniform(&rng);
    /* log-uniform |x| from 2^-1074 to 1, both signs: the cancellation region of expm1 and
     * of the records' k3 = expm1(x) - x */
    for (size_t i = 0; i < 1000000; i++) {
        double m = ldexp(1.0 + parity_rng_uniform(&rng), -(int)(1 + parity_rng_uniform(&rng) * 1074));
        x[n++] = (i & 1) ? m : -m;
    }
    /* |x| in [2^-9, 1]: the short/long switch at 2^-7 and k = 0, +-1 */
    for (size_t i = 0; i < 500000; i++) x[n++] = (2.0 * parity_rng_uniform(&rng) - 1.0);
    for (int j = -64; j <= 64; j++) {
        x[n++] = 0x1p-7 + j * 0x1p-60;
        x[n++] = -(0x1p-7 + j * 0x1p-60);
    }
    for (int k = -45; k <= 44; k++) {
        double b = ((double)k + 0.5) * 0.6931471805599453;
        for (int j = -64; j <= 64; j++) x[n++] = b + j * ldexp(fabs(b), -52);
    }
    stat_t st = {0, 0, 0}, st_e = {0, 0, 0};
    run_expm1(&st, &st_e, x, n);
    print_message("expm1: %zu samples, max error %.3f ulp at x = %.17g; its e^x: %.3f ulp at %.17g\n", st.n, st.max_err,
                  st.worst_x, st_e.max_err, st_e.worst_x);
    free(x);
}

/* A value's result does not depend on the lanes next to it (the short and long forms are chosen
 * lane by lane): each x alone (replicated) and mixed with large and small neighbours. */
static void test_lane_independence(void **state)
{
    (void)state;
    const double xs[] = {1e-300, -3e-5, 0x1p-7, -0x1p-7, 0.0078125001, 0.3, -0.35, 2.5, -29.0, 1e-3, -1e-3, 30.0};
    const size_t nx = sizeof xs / sizeof xs[0];
    for (size_t i = 0; i < nx; i++) {
        double alone[4] = {xs[i], xs[i], xs[i], xs[i]}, ra[4], ea[4];
        metrics_vexpm1(alone, 4, ra, ea);
        for (size_t j = 0; j < nx; j++)
            for (int lane = 0; lane < 4; lane++) {
                double mix[4] = {xs[j], xs[j], xs[j], xs[j]}, rm[4], em[4];
                mix[lane] = xs[i];
                metrics_vexpm1(mix, 4, rm, em);
                if (memcmp(&rm[lane], &ra[0], sizeof(double)) || memcmp(&em[lane], &ea[0], sizeof(double)))
                    fail_msg("expm1(%a) in lane %d next to %a: %a / %a, alone %a / %a", xs[i], lane, xs[j], rm[lane],
                             em[lane], ra[0], ea[0]);
                metrics_vexp(mix, 4, rm);
                double e1;
                metrics_vexp(&xs[i], 1, &e1);
                assert_memory_equal(&rm[lane], &e1, sizeof(double));
            }
    }
}

/* Records of fast pairs: k3 is the scalar series bit for bit (|x| <= 1/2), w and r - 1 within
 * the bounds, |dp| and the classification of non-finite and far-apart pairs as the scalar
 * definitions (those pairs take the scalar path). */
static void test_records(void **state)
{
    (void)state;
    enum { N = 20000 };
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    parity_dist_tok_t *t = malloc(N * sizeof *t);
    assert_true(a && b && t);
    parity_rng_t rng;
    parity_rng_seed(&rng, SEED, 2);
    for (size_t i = 0; i < N; i++) {
        a[i] = -20.0 * parity_rng_uniform(&rng);
        double d = ldexp(parity_rng_uniform(&rng) - 0.5, -(int)(parity_rng_uniform(&rng) * 30));
        b[i] = a[i] + d;
    }
    /* probabilities near and below the normal range: p_A normal with p_B subnormal, p_A
     * below 2^-1000 (p_B by its own exponential), p_A = 0 with p_B > 0 */
    for (size_t i = 10; i < 400; i++) {
        a[i] = -690.0 - 60.0 * parity_rng_uniform(&rng);
        b[i] = a[i] + 29.0 * (2.0 * parity_rng_uniform(&rng) - 1.0);
    }
    a[400] = -746.0, b[400] = -720.0;
    a[5] = -INFINITY;
    b[6] = NAN;
    a[7] = -1.0, b[7] = -40.0; /* |log r| > 30: scalar path */
    a[8] = b[8] = -INFINITY;
    parity_metrics_dist_prep(a, b, N, t);
    assert_int_equal(t[5].cls, PARITY_DIST_PAIR_INF_MISMATCH);
    assert_int_equal(t[6].cls, PARITY_DIST_PAIR_INVALID);
    assert_int_equal(t[8].cls, PARITY_DIST_PAIR_ZERO_MATCH);
    assert_int_equal(t[7].cls, PARITY_DIST_PAIR_FINITE);
    assert_int_equal(t[7].fast, 0);
    assert_true(t[7].w == exp(39.0));
    for (size_t i = 0; i < N; i++) {
        if (i >= 5 && i <= 8) continue;
        assert_int_equal(t[i].fast, 1);
        double x = a[i] - b[i];
        assert_true(t[i].lr == x);
        if (fabs(x) <= 0.5) {
            double k3 = parity_metrics_k3(x);
            if (memcmp(&k3, &t[i].k3, sizeof k3)) fail_msg("k3(%a) = %a, scalar %a", x, t[i].k3, k3);
        }
        if (ulps(t[i].rm1, expm1l((long double)x)) > EXPM1_ULP) fail_msg("r - 1 at %a", x);
        if (ulps(t[i].w, expl((long double)x)) > EXP_ULP) fail_msg("r at %a", x);
        if (ulps(t[i].pa, expl((long double)a[i])) > EXP_ULP) fail_msg("p_A at %a", a[i]);
        /* p_B = p_A (1/r): 1 + 1.5 + 1/2 ulps (or e^b itself when p_A < 2^-1000) */
        if (ulps(t[i].pb, expl((long double)b[i])) > 3.0)
            fail_msg("p_B at %a (a = %a): %a vs %.21Lg", b[i], a[i], t[i].pb, expl((long double)b[i]));
        long double hi = a[i] > b[i] ? a[i] : b[i], lo = a[i] > b[i] ? b[i] : a[i];
        long double dp = expl(hi) * -expm1l(lo - hi); /* no cancellation in the reference */
        /* |dp| = p_A (r - 1)(1/r) for a > b: 1 + 2 + 1.5 + 2 x 1/2 ulps; p_B (1 - r)
         * otherwise: 3 + 2 + 1/2 */
        if (ulps(t[i].adp, dp) > 5.5) fail_msg("|dp| at %a, %a: %a vs %.21Lg", a[i], b[i], t[i].adp, dp);
    }
    free(a);
    free(b);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_domain),        cmocka_unit_test(test_exp_edges),
        cmocka_unit_test(test_expm1_domain),      cmocka_unit_test(test_lane_independence),
        cmocka_unit_test(test_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

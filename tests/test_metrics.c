/* metrics: error and distribution metrics against values worked out by hand (derivations in the
 * comments), non-finite classification, merge == single pass, and the quantile sketch's error
 * bound on 10^6 values. Seeds are fixed and printed in every failure message. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/metrics.h"
#include "parity/rng.h"

#define SEED 20240601u

/* |got - want| <= rel * |want| (or both the same non-finite value). */
static void close_(double got, double want, double rel, const char *what, int line)
{
    int ok;
    if (isnan(want))
        ok = isnan(got);
    else if (isinf(want))
        ok = got == want;
    else
        ok = fabs(got - want) <= rel * fabs(want);
    if (!ok) fail_msg("line %d: %s: got %.17g want %.17g (rel tol %g, seed %u)", line, what, got, want, rel, SEED);
}
#define CLOSE(got, want, rel) close_((got), (want), (rel), #got, __LINE__)
#define EXACT(got, want) close_((got), (want), 0.0, #got, __LINE__)

/* ------------------------------------------------------------------------------------------ */
/* error metrics                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void err_hand_values(void **state)
{
    (void)state;
    parity_err_stats_t st;
    parity_err_result_t res;
    /* NMSE of y = [1, 2] against r = [1, 1]: sum (y-r)^2 = 0 + 1 = 1, sum r^2 = 2, so 1/2. */
    double y1[] = {1, 2}, r1[] = {1, 1};
    assert_int_equal(parity_metrics_err_init(&st, NULL), PARITY_OK);
    assert_int_equal(parity_metrics_err_add_array(&st, y1, r1, 2), PARITY_OK);
    parity_metrics_err_result(&st, &res);
    EXACT(res.nmse, 0.5);
    EXACT(res.max_abs, 1.0);
    assert_int_equal(res.argmax_abs, 1);
    EXACT(res.max_rel, 1.0); /* |2 - 1| / |1| */
    EXACT(res.mean_abs, 0.5);
    EXACT(res.rmse, sqrt(0.5)); /* sqrt((0 + 1) / 2) */

    /* RMSE of errors [3, 4]: sqrt((9 + 16) / 2) = sqrt(12.5) = 3.5355..., not ggml's
     * sqrt(25) / 2 = 2.5. The reference is 0, so NMSE is x/0 = +inf and, with rel_floor 0, so
     * is the relative error. */
    double y2[] = {3, 4}, r2[] = {0, 0};
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add_array(&st, y2, r2, 2);
    parity_metrics_err_result(&st, &res);
    EXACT(res.rmse, sqrt(12.5));
    EXACT(res.max_abs, 4.0);
    EXACT(res.mean_abs, 3.5);
    EXACT(res.nmse, INFINITY);
    EXACT(res.max_rel, INFINITY);
    assert_int_equal(res.argmax_rel, 0); /* first of the tied infinities */

    /* With rel_floor 2 the denominators are max(0, 2) = 2: relative errors 1.5 and 2. */
    parity_err_opts_t o = parity_metrics_err_default_opts();
    o.rel_floor = 2.0;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_OK);
    parity_metrics_err_add_array(&st, y2, r2, 2);
    parity_metrics_err_result(&st, &res);
    EXACT(res.max_rel, 2.0);
    assert_int_equal(res.argmax_rel, 1);
}

static void err_rel_and_ulp_helpers(void **state)
{
    (void)state;
    EXACT(parity_metrics_rel_err(0.0, 0.0, 0.0), 0.0);         /* 0/0: a match */
    EXACT(parity_metrics_rel_err(1e-300, 0.0, 0.0), INFINITY); /* x/0 */
    EXACT(parity_metrics_rel_err(1.0, 0.0, 0.5), 2.0);         /* floor used */
    EXACT(parity_metrics_rel_err(-3.0, -2.0, 0.0), 0.5);
    /* bf16: p = 8, emin = -126. ulp(1) = 2^(0 - 8 + 1) = 2^-7; ulp(3) = 2^(1 - 7) = 2^-6;
     * 2 and the largest double below 2 sit in different binades. */
    EXACT(parity_metrics_ulp(1.0, 8, -126), 0x1p-7);
    EXACT(parity_metrics_ulp(-1.0, 8, -126), 0x1p-7);
    EXACT(parity_metrics_ulp(3.0, 8, -126), 0x1p-6);
    EXACT(parity_metrics_ulp(2.0, 8, -126), 0x1p-6);
    EXACT(parity_metrics_ulp(nextafter(2.0, 0.0), 8, -126), 0x1p-7);
    /* Below the smallest normal the spacing stays 2^(emin - p + 1) = 2^-133, also at 0. */
    EXACT(parity_metrics_ulp(0x1p-130, 8, -126), 0x1p-133);
    EXACT(parity_metrics_ulp(0.0, 8, -126), 0x1p-133);
    /* fp64 itself: ulp(1) = 2^-52, at 0 the smallest subnormal 2^-1074. */
    EXACT(parity_metrics_ulp(1.0, 53, -1022), DBL_EPSILON);
    EXACT(parity_metrics_ulp(0.0, 53, -1022), 0x1p-1074);
    assert_true(isnan(parity_metrics_ulp(INFINITY, 8, -126)));
    assert_true(isnan(parity_metrics_ulp(1.0, 0, -126)));

    /* ULP errors through the accumulator: y = 1 + 3*2^-7 against r = 1 is 3 bf16 ulps; y = 3.5
     * against r = 3 is 0.5 / 2^-6 = 32 ulps, the max (index 1). */
    parity_err_opts_t o = parity_metrics_err_default_opts();
    o.prec = 8;
    o.emin = -126;
    parity_err_stats_t st;
    parity_err_result_t res;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_OK);
    parity_metrics_err_add(&st, 1.0 + 3 * 0x1p-7, 1.0);
    parity_metrics_err_add(&st, 3.5, 3.0);
    parity_metrics_err_result(&st, &res);
    EXACT(res.max_ulp, 32.0);
    assert_int_equal(res.argmax_ulp, 1);
}

static double half_ulp_fn(const void *ctx, double r)
{
    (void)r;
    return *(const double *)ctx;
}

static void err_ulp_callback_and_bad_opts(void **state)
{
    (void)state;
    static const double ulp = 0.25;
    parity_err_opts_t o = parity_metrics_err_default_opts();
    o.ulp_fn = half_ulp_fn;
    o.ulp_ctx = &ulp;
    parity_err_stats_t st;
    parity_err_result_t res;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_OK);
    parity_metrics_err_add(&st, 1.5, 1.0); /* 0.5 / 0.25 = 2 ulps */
    parity_metrics_err_result(&st, &res);
    EXACT(res.max_ulp, 2.0);

    o = parity_metrics_err_default_opts();
    o.prec = -1;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_E_INVALID);
    o.prec = 60; /* 2^(-1022 - 59) underflows */
    o.emin = -1022;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_E_INVALID);
    o = parity_metrics_err_default_opts();
    o.rel_floor = NAN;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_E_INVALID);
    o.rel_floor = -1;
    assert_int_equal(parity_metrics_err_init(&st, &o), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_err_init(NULL, NULL), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_err_add_array(&st, NULL, NULL, 1), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_err_add_array(&st, NULL, NULL, 0), PARITY_OK);
}

static void err_empty_and_equal(void **state)
{
    (void)state;
    parity_err_stats_t st;
    parity_err_result_t res;
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_result(&st, &res);
    assert_int_equal(res.n, 0);
    EXACT(res.max_abs, 0);
    EXACT(res.rmse, 0);
    EXACT(res.nmse, 0);
    assert_true(res.argmax_abs == UINT64_MAX && res.first_mismatch == UINT64_MAX);

    /* All equal, including zeros: every error 0, NMSE 0/x = 0; the argmax is the first pair. */
    double v[] = {0.0, 1.0, -2.0, 0.0};
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add_array(&st, v, v, 4);
    parity_metrics_err_result(&st, &res);
    assert_int_equal(res.n_finite, 4);
    EXACT(res.max_abs, 0);
    EXACT(res.max_rel, 0);
    EXACT(res.nmse, 0);
    assert_int_equal(res.argmax_abs, 0);
    /* All-zero reference and candidate: 0/0 taken as 0. */
    double z[] = {0.0, -0.0};
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add_array(&st, z, z, 2);
    parity_metrics_err_result(&st, &res);
    EXACT(res.nmse, 0);
}

static void err_nonfinite(void **state)
{
    (void)state;
    parity_err_stats_t st;
    parity_err_result_t res;
    /* pair 0 finite; 1 NaN in y; 2 NaN in r; 3 NaN in both. */
    double y[] = {1.0, NAN, 3.0, NAN}, r[] = {1.5, 2.0, NAN, NAN};
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add_array(&st, y, r, 4);
    parity_metrics_err_result(&st, &res);
    assert_int_equal(res.n, 4);
    assert_int_equal(res.n_finite, 1);
    assert_int_equal(res.n_nan_y, 2);
    assert_int_equal(res.n_nan_r, 2);
    assert_int_equal(res.n_mismatch, 3);
    assert_int_equal(res.first_mismatch, 1);
    EXACT(res.max_abs, 0.5);

    /* 0: +inf vs +inf match; 1: -inf vs +inf; 2: +inf vs finite; 3: finite vs -inf;
     * 4: -inf vs -inf match; 5: finite. */
    double yi[] = {INFINITY, -INFINITY, INFINITY, 1.0, -INFINITY, 2.0};
    double ri[] = {INFINITY, INFINITY, 1.0, -INFINITY, -INFINITY, 2.0};
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add_array(&st, yi, ri, 6);
    parity_metrics_err_result(&st, &res);
    assert_int_equal(res.n_inf_match, 2);
    assert_int_equal(res.n_inf_mismatch, 3);
    assert_int_equal(res.n_mismatch, 3);
    assert_int_equal(res.first_mismatch, 1);
    assert_int_equal(res.n_finite, 1);
    EXACT(res.max_abs, 0);
    /* Finite values whose difference overflows are finite pairs with an infinite error. */
    parity_metrics_err_init(&st, NULL);
    parity_metrics_err_add(&st, DBL_MAX, -DBL_MAX);
    parity_metrics_err_result(&st, &res);
    assert_int_equal(res.n_finite, 1);
    EXACT(res.max_abs, INFINITY);
}

/* Random pairs with NaN/inf sprinkled in; a split into chunks merged in order must reproduce
 * the single pass: counts, maxima and their indices exactly, sums to a few ulps. */
static void fill_pairs(parity_rng_t *g, double *y, double *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r[i] = parity_rng_normal(g) * exp(4 * parity_rng_normal(g));
        y[i] = r[i] * (1 + 1e-3 * parity_rng_normal(g));
        uint64_t c = parity_rng_below(g, 200);
        if (c == 0) y[i] = NAN;
        if (c == 1) r[i] = NAN;
        if (c == 2) y[i] = INFINITY;
        if (c == 3) y[i] = r[i] = -INFINITY;
        if (c == 4) r[i] = 0.0;
    }
}

static void err_merge_equals_single_pass(void **state)
{
    (void)state;
    enum { N = 20000 };
    double *y = malloc(N * sizeof *y), *r = malloc(N * sizeof *r);
    assert_non_null(y);
    assert_non_null(r);
    parity_rng_t g;
    parity_rng_seed(&g, SEED, 1);
    fill_pairs(&g, y, r, N);
    parity_err_opts_t o = parity_metrics_err_default_opts();
    o.prec = 11;
    o.emin = -14;
    o.rel_floor = 1e-6;
    parity_err_stats_t one, parts[4], merged;
    parity_metrics_err_init(&one, &o);
    parity_metrics_err_add_array(&one, y, r, N);
    size_t cut[5] = {0, 1, 7777, 7777, N}; /* includes an empty chunk */
    parity_metrics_err_init(&merged, &o);
    for (int k = 0; k < 4; k++) {
        parity_metrics_err_init(&parts[k], &o);
        parity_metrics_err_add_array(&parts[k], y + cut[k], r + cut[k], cut[k + 1] - cut[k]);
        assert_int_equal(parity_metrics_err_merge(&merged, &parts[k]), PARITY_OK);
    }
    parity_err_result_t a, b;
    parity_metrics_err_result(&one, &a);
    parity_metrics_err_result(&merged, &b);
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.n_finite, b.n_finite);
    assert_int_equal(a.n_nan_y, b.n_nan_y);
    assert_int_equal(a.n_nan_r, b.n_nan_r);
    assert_int_equal(a.n_inf_match, b.n_inf_match);
    assert_int_equal(a.n_inf_mismatch, b.n_inf_mismatch);
    assert_int_equal(a.first_mismatch, b.first_mismatch);
    assert_true(a.n_nan_y > 0 && a.n_inf_match > 0 && a.n_inf_mismatch > 0);
    EXACT(b.max_abs, a.max_abs);
    EXACT(b.max_rel, a.max_rel);
    EXACT(b.max_ulp, a.max_ulp);
    assert_int_equal(a.argmax_abs, b.argmax_abs);
    assert_int_equal(a.argmax_rel, b.argmax_rel);
    assert_int_equal(a.argmax_ulp, b.argmax_ulp);
    CLOSE(b.mean_abs, a.mean_abs, 1e-14);
    CLOSE(b.nmse, a.nmse, 1e-14);
    CLOSE(b.rmse, a.rmse, 1e-14);
    /* The f32 entry point sees the same values when they are floats already. */
    parity_err_stats_t f;
    float yf[3] = {1.5f, 2.0f, -0.25f};
    double yd[3] = {1.5, 2.0, -0.25}, rd[3] = {1.0, 2.0, 0.0};
    parity_metrics_err_init(&f, NULL);
    parity_metrics_err_add_array_f32(&f, yf, rd, 3);
    parity_metrics_err_init(&one, NULL);
    parity_metrics_err_add_array(&one, yd, rd, 3);
    parity_metrics_err_result(&f, &a);
    parity_metrics_err_result(&one, &b);
    EXACT(a.rmse, b.rmse);
    /* Different options cannot merge. */
    parity_metrics_err_init(&one, NULL);
    assert_int_equal(parity_metrics_err_merge(&one, &merged), PARITY_E_INVALID);
    free(y);
    free(r);
}

static void err_eval_fields(void **state)
{
    (void)state;
    double y[] = {3, 4, NAN}, r[] = {0, 0, 1};
    double out[PARITY_METRICS_ERR_NFIELDS + 1];
    out[PARITY_METRICS_ERR_NFIELDS] = 12345.0;
    assert_int_equal(parity_metrics_err_eval(y, r, 3, 0, 0, 0.0, out, PARITY_METRICS_ERR_NFIELDS + 1),
                     PARITY_OK);
    EXACT(out[PARITY_METRICS_ERR_N], 3);
    EXACT(out[PARITY_METRICS_ERR_N_NAN_Y], 1);
    EXACT(out[PARITY_METRICS_ERR_FIRST_MISMATCH], 2);
    EXACT(out[PARITY_METRICS_ERR_RMSE], sqrt(12.5));
    EXACT(out[PARITY_METRICS_ERR_ARGMAX_ULP], -1); /* ULP metric off */
    EXACT(out[PARITY_METRICS_ERR_NFIELDS], 12345.0); /* nothing written past the fields */
    assert_string_equal(parity_metrics_err_field_name(PARITY_METRICS_ERR_RMSE), "rmse");
    assert_string_equal(parity_metrics_err_field_name(0), "n");
    assert_null(parity_metrics_err_field_name(PARITY_METRICS_ERR_NFIELDS));
    assert_int_equal(parity_metrics_err_eval(y, r, 3, 0, 0, 0.0, NULL, 0), PARITY_OK);
    assert_int_equal(parity_metrics_err_eval(y, r, 3, 0, 0, -1.0, out, 4), PARITY_E_INVALID);
}

/* 3 x 2 matrix in a stride-3 buffer (the third column is padding that must be ignored):
 * row 0 errors (0.5, 0), row 1 errors (0, 0.25) against larger values, row 2 a NaN. */
static void err_rows_worst(void **state)
{
    (void)state;
    double y[] = {1.5, 2.0, 99.0, 10.0, 8.25, 99.0, NAN, 1.0, 99.0};
    double r[] = {1.0, 2.0, -99.0, 10.0, 8.0, -99.0, 1.0, 1.0, -99.0};
    parity_err_result_t per[3];
    parity_err_stats_t tot;
    size_t w;
    assert_int_equal(parity_metrics_err_rows(y, r, 2, 2, 3, NULL, PARITY_ERR_KEY_ABS, per, &tot, &w),
                     PARITY_OK);
    assert_int_equal(w, 0); /* max abs 0.5 > 0.25 */
    EXACT(per[1].max_abs, 0.25);
    EXACT(per[1].max_rel, 0.25 / 8.0);
    assert_int_equal(tot.n, 4);
    assert_int_equal(tot.argmax_abs, 0);
    assert_int_equal(parity_metrics_err_rows(y, r, 3, 2, 3, NULL, PARITY_ERR_KEY_REL, per, &tot, &w),
                     PARITY_OK);
    assert_int_equal(w, 2); /* the NaN row outranks every finite error */
    assert_int_equal(tot.first_mismatch, 4); /* flat index row 2 * 2 cols + col 0 */
    assert_int_equal(parity_metrics_err_rows(y, r, 0, 2, 3, NULL, PARITY_ERR_KEY_REL, NULL, NULL, &w),
                     PARITY_OK);
    assert_true(w == SIZE_MAX);
    assert_int_equal(parity_metrics_err_rows(y, r, 3, 4, 3, NULL, PARITY_ERR_KEY_REL, NULL, NULL, &w),
                     PARITY_E_INVALID);
}

/* csum: 1 + 1e100 - 1e100 + ... loses the 1 naively; Neumaier keeps it. */
static void csum_compensates(void **state)
{
    (void)state;
    parity_csum_t s = {0, 0}, t = {0, 0};
    parity_metrics_csum_add(&s, 1.0);
    parity_metrics_csum_add(&s, 1e100);
    parity_metrics_csum_add(&s, 1.0);
    parity_metrics_csum_add(&s, -1e100);
    EXACT(parity_metrics_csum_value(&s), 2.0);
    parity_metrics_csum_add(&t, 1e100);
    parity_metrics_csum_add(&t, 1.0);
    parity_metrics_csum_merge(&s, &t); /* 2 + 1e100 + 1 */
    parity_csum_t u = {0, 0};
    parity_metrics_csum_add(&u, -1e100);
    parity_metrics_csum_merge(&s, &u);
    EXACT(parity_metrics_csum_value(&s), 3.0);
    parity_metrics_csum_add(&s, INFINITY);
    EXACT(parity_metrics_csum_value(&s), INFINITY);
}

/* ------------------------------------------------------------------------------------------ */
/* quantiles                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void quantile_exact_small(void **state)
{
    (void)state;
    /* numpy.quantile([1, 2, 3, 4], p): h = 3p; p = 0.5 -> 2 + 0.5 = 2.5; p = 0.25 -> h = 0.75,
     * 1 + 0.75 = 1.75; p = 0.999 -> h = 2.997, 4 - 1 * (1 - 0.997) (numpy's g >= 0.5 form). */
    double x[] = {1, 2, 3, 4};
    EXACT(parity_metrics_quantile_sorted(x, 4, 0.5), 2.5);
    EXACT(parity_metrics_quantile_sorted(x, 4, 0.25), 1.75);
    EXACT(parity_metrics_quantile_sorted(x, 4, 0.999), 4.0 - 1.0 * (1.0 - (3.0 * 0.999 - 2.0)));
    EXACT(parity_metrics_quantile_sorted(x, 4, 0.0), 1.0);
    EXACT(parity_metrics_quantile_sorted(x, 4, 1.0), 4.0);
    EXACT(parity_metrics_quantile_sorted(x, 0, 0.5), 0.0);

    parity_qsketch_t *q;
    assert_int_equal(parity_metrics_qsketch_new(&q), PARITY_OK);
    double v;
    assert_int_equal(parity_metrics_qsketch_quantile(q, 0.5, &v), PARITY_OK);
    EXACT(v, 0.0); /* empty */
    static const double in[] = {4, 1, 3, 2};
    for (int i = 0; i < 4; i++) assert_int_equal(parity_metrics_qsketch_add(q, in[i]), PARITY_OK);
    assert_int_equal(parity_metrics_qsketch_add(q, -1.0), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_qsketch_add(q, NAN), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_qsketch_add(q, INFINITY), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_qsketch_count(q), 4);
    assert_true(parity_metrics_qsketch_is_exact(q));
    parity_metrics_qsketch_quantile(q, 0.25, &v);
    EXACT(v, 1.75);
    assert_int_equal(parity_metrics_qsketch_quantile(q, 1.5, &v), PARITY_E_INVALID);
    assert_int_equal(parity_metrics_qsketch_quantile(q, NAN, &v), PARITY_E_INVALID);
    /* Adding after a query keeps working (the buffer is re-sorted lazily). */
    parity_metrics_qsketch_add(q, 0.0);
    parity_metrics_qsketch_quantile(q, 0.5, &v);
    EXACT(v, 2.0);
    parity_metrics_qsketch_free(q);
    parity_metrics_qsketch_free(NULL);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 10^6 values spread over about 40 binades (lognormal), plus zeros and values outside
 * [2^-64, 2^64); the sketch's quantiles must be within 2^-8 relative of numpy's 'linear'
 * quantile of the sorted data (plus 4 ulps for the lerp's own rounding), and a 4-way merge must
 * answer exactly as the single pass. */
static void quantile_stream_bound(void **state)
{
    (void)state;
    enum { N = 1000000 };
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    parity_rng_t g;
    parity_rng_seed(&g, SEED, 2);
    parity_qsketch_t *one, *part[4], *merged;
    assert_int_equal(parity_metrics_qsketch_new(&one), PARITY_OK);
    assert_int_equal(parity_metrics_qsketch_new(&merged), PARITY_OK);
    for (int k = 0; k < 4; k++) assert_int_equal(parity_metrics_qsketch_new(&part[k]), PARITY_OK);
    for (size_t i = 0; i < N; i++) {
        uint64_t c = parity_rng_below(&g, 1000);
        x[i] = c == 0 ? 0.0 : exp(-10.0 + 6.0 * parity_rng_normal(&g));
        if (c == 1) x[i] = 1e-25; /* below 2^-64 */
        if (c == 2) x[i] = 1e25;  /* above 2^64 */
        assert_int_equal(parity_metrics_qsketch_add(one, x[i]), PARITY_OK);
        parity_metrics_qsketch_add(part[(i * 4) / N], x[i]);
    }
    for (int k = 0; k < 4; k++) parity_metrics_qsketch_merge(merged, part[k]);
    assert_false(parity_metrics_qsketch_is_exact(one));
    qsort(x, N, sizeof *x, cmp_d);
    static const double ps[] = {0.0, 1e-4, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.995, 0.998, 0.999, 0.9999, 1.0};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double want = parity_metrics_quantile_sorted(x, N, ps[i]), got, got2;
        parity_metrics_qsketch_quantile(one, ps[i], &got);
        parity_metrics_qsketch_quantile(merged, ps[i], &got2);
        EXACT(got2, got);
        double tol = want < 0x1p-64 ? 0x1p-64 : (want >= 0x1p64 ? 0.0 : PARITY_QSKETCH_REL_ERR * want + 4 * DBL_EPSILON * want);
        if (!(fabs(got - want) <= tol))
            fail_msg("p=%g: sketch %.17g exact %.17g (tol %g, seed %u)", ps[i], got, want, tol, SEED);
    }
    parity_metrics_qsketch_free(one);
    parity_metrics_qsketch_free(merged);
    for (int k = 0; k < 4; k++) parity_metrics_qsketch_free(part[k]);
    free(x);
}

static void quantile_merge_exactness(void **state)
{
    (void)state;
    parity_qsketch_t *a, *b, *c;
    parity_metrics_qsketch_new(&a);
    parity_metrics_qsketch_new(&b);
    parity_metrics_qsketch_new(&c);
    for (int i = 0; i < 2000; i++) parity_metrics_qsketch_add(a, i);
    for (int i = 2000; i < 4000; i++) parity_metrics_qsketch_add(b, i);
    parity_metrics_qsketch_merge(a, b);
    assert_true(parity_metrics_qsketch_is_exact(a)); /* 4000 <= 4096 */
    double v;
    parity_metrics_qsketch_quantile(a, 0.5, &v);
    EXACT(v, 1999.5);
    parity_metrics_qsketch_merge(a, b); /* 6000 > 4096: histogram from now on */
    assert_false(parity_metrics_qsketch_is_exact(a));
    assert_int_equal(parity_metrics_qsketch_count(a), 6000);
    parity_metrics_qsketch_quantile(a, 1.0, &v);
    EXACT(v, 3999.0); /* max is exact */
    parity_metrics_qsketch_quantile(a, 0.0, &v);
    EXACT(v, 0.0);
    /* Merging an empty sketch changes nothing. */
    parity_metrics_qsketch_merge(c, a);
    parity_metrics_qsketch_quantile(c, 0.5, &v);
    double w;
    parity_metrics_qsketch_quantile(a, 0.5, &w);
    EXACT(v, w);
    assert_int_equal(parity_metrics_qsketch_merge(NULL, a), PARITY_E_INVALID);
    parity_metrics_qsketch_free(a);
    parity_metrics_qsketch_free(b);
    parity_metrics_qsketch_free(c);
}

/* ------------------------------------------------------------------------------------------ */
/* distribution metrics                                                                       */
/* ------------------------------------------------------------------------------------------ */

#define LN2 0.69314718055994530942

static void dist_hand_values(void **state)
{
    (void)state;
    /* One token with p_A = 1/2, p_B = 1/4: a = -ln 2, b = -2 ln 2, log r = a - b = ln 2, r = 2.
     *   k1 = -ln 2; k2 = (ln 2)^2 / 2 = 0.24022650695910072;
     *   k3 = (2 - 1) - ln 2 = 0.30685281944005469; chi2 = (2 - 1)^2 = 1;
     *   |dlogprob| = ln 2, |dprob| = 1/4, weight 2 (inside the closed [0.5, 2]). */
    double a[] = {-LN2}, b[] = {-2 * LN2};
    parity_dist_t *d;
    assert_int_equal(parity_metrics_dist_new(NULL, &d), PARITY_OK);
    assert_int_equal(parity_metrics_dist_add_tokens(d, a, b, 1), PARITY_OK);
    parity_dist_summary_t s;
    assert_int_equal(parity_metrics_dist_summary(d, &s), PARITY_OK);
    CLOSE(s.k1_mean, -LN2, 1e-15);
    CLOSE(s.k2_mean, 0.24022650695910072, 1e-15);
    CLOSE(s.k3_mean, 0.30685281944005469, 1e-15);
    CLOSE(s.chi2_mean, 1.0, 1e-15);
    CLOSE(s.abs_dlogprob_max, LN2, 1e-15);
    CLOSE(s.abs_dlogprob_p50, LN2, 1e-15);
    CLOSE(s.abs_dprob_max, 0.25, 1e-15);
    CLOSE(s.iw_mean, 2.0, 1e-15);
    EXACT(s.iw_frac_out, 0.0);
    EXACT(s.iw_std, 0.0);
    EXACT(s.iw_ess, 1.0);
    assert_true(isnan(s.pearson_p)); /* one point: zero variance */
    parity_metrics_dist_free(d);

    /* k3 directly, also where the naive expm1(x) - x cancels: e^x - 1 - x at x = 1e-8 is
     * x^2/2 + x^3/6 + ... = 5.0000000166666667e-17; at x = -1e-3 it is
     * 5e-7 - 1.6666667e-10 + 4.1666667e-14 - 8.3e-18 ... = 4.998333749916681e-7 (series to 1e-25). */
    CLOSE(parity_metrics_k3(LN2), 0.30685281944005469, 1e-15);
    CLOSE(parity_metrics_k3(1e-8), 5.0000000166666667e-17, 1e-15);
    CLOSE(parity_metrics_k3(-1e-3), 4.998333749916681e-7, 1e-15);
    EXACT(parity_metrics_k3(0.0), 0.0);
    /* The two branches meet at |x| = 1/2: e^0.5 - 1.5 = 0.14872127070012815,
     * e^-0.5 - 0.5 = 0.10653065971263342. */
    CLOSE(parity_metrics_k3(0.5), 0.14872127070012815, 2e-15);
    CLOSE(parity_metrics_k3(nextafter(0.5, 1)), 0.14872127070012815, 2e-15);
    CLOSE(parity_metrics_k3(-0.5), 0.10653065971263342, 2e-15);
    CLOSE(parity_metrics_k3(nextafter(-0.5, -1)), 0.10653065971263342, 2e-15);
    EXACT(parity_metrics_k3(-INFINITY), INFINITY);
}

static void dist_importance_weights(void **state)
{
    (void)state;
    /* Weights [1, 1, 2] (log r = 0, 0, ln 2): Kish ESS = (1+1+2)^2 / (1+1+4) = 16/6, over
     * n = 3: 16/6/3 = 0.888...; mean 4/3; std (ddof 0) sqrt(mean w^2 - mean^2)
     * = sqrt(2 - 16/9) = sqrt(2)/3. With iw_high = 1.5 one of three is above. */
    double a[] = {-LN2, -LN2, 0.0}, b[] = {-LN2, -LN2, -LN2};
    parity_dist_opts_t o = {0.5, 1.5};
    parity_dist_t *d;
    assert_int_equal(parity_metrics_dist_new(&o, &d), PARITY_OK);
    parity_metrics_dist_add_tokens(d, a, b, 3);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    CLOSE(s.iw_ess, 16.0 / 6.0 / 3.0, 1e-15);
    CLOSE(s.iw_mean, 4.0 / 3.0, 1e-15);
    CLOSE(s.iw_std, sqrt(2.0) / 3.0, 1e-15);
    EXACT(s.iw_min, 1.0);
    CLOSE(s.iw_max, 2.0, 1e-15);
    CLOSE(s.iw_frac_high, 1.0 / 3.0, 1e-15);
    EXACT(s.iw_frac_low, 0.0);
    CLOSE(s.iw_frac_out, 1.0 / 3.0, 1e-15);
    /* exact |dlogprob| quantiles of {0, 0, ln 2}: p50 = 0; p99: h = 1.98, g = 0.98 ->
     * ln2 - ln2 * (1 - 0.98) */
    CLOSE(s.abs_dlogprob_p50, 0.0, 0);
    CLOSE(s.abs_dlogprob_p99, LN2 * 0.98, 1e-14);
    double v;
    assert_int_equal(parity_metrics_dist_quantile(d, PARITY_DIST_ABS_DPROB, 1.0, &v), PARITY_OK);
    CLOSE(v, 0.5, 1e-15); /* |1 - 1/2| */
    assert_int_equal(parity_metrics_dist_quantile(d, (parity_dist_qty_t)7, 0.5, &v), PARITY_E_INVALID);
    parity_metrics_dist_free(d);
    parity_dist_opts_t bad = {2.0, 1.0};
    assert_int_equal(parity_metrics_dist_new(&bad, &d), PARITY_E_INVALID);
    assert_null(d);
}

static void dist_empty_equal_nonfinite(void **state)
{
    (void)state;
    parity_dist_t *d;
    parity_dist_summary_t s;
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tok, 0);
    EXACT(s.k3_mean, 0);
    EXACT(s.abs_dlogprob_p99, 0);
    EXACT(s.iw_ess, 0);
    assert_true(isnan(s.pearson_p));

    /* Identical varying logprobs: every divergence 0, weights all 1, Pearson 1. */
    double a[] = {-0.1, -1.0, -3.0, -0.5};
    parity_metrics_dist_add_seq(d, a, a, 4);
    parity_metrics_dist_summary(d, &s);
    EXACT(s.k1_mean, 0);
    EXACT(s.k3_mean, 0);
    EXACT(s.chi2_max, 0);
    EXACT(s.abs_dprob_p999, 0);
    EXACT(s.iw_ess, 1.0);
    EXACT(s.iw_frac_out, 0.0);
    CLOSE(s.pearson_p, 1.0, 1e-15);
    EXACT(s.dlogppl_mean, 0);
    EXACT(s.ppl_ratio_min, 1.0);
    parity_metrics_dist_free(d);

    /* 0 finite; 1 NaN (invalid); 2 +inf (invalid); 3 both -inf (zero match); 4 -inf vs
     * finite (mismatch). The sequence has finite pairs and non-finite ones. */
    double x[] = {-1.0, NAN, -1.0, -INFINITY, -INFINITY};
    double y[] = {-2.0, -1.0, INFINITY, -INFINITY, -0.5};
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_add_seq(d, x, y, 5);
    parity_metrics_dist_add_seq(d, x + 1, y + 1, 4); /* no finite pair: empty */
    parity_metrics_dist_add_seq(d, NULL, NULL, 0);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tok, 9);
    assert_int_equal(s.n_finite, 1);
    assert_int_equal(s.n_invalid, 4);
    assert_int_equal(s.n_zero_match, 2);
    assert_int_equal(s.n_inf_mismatch, 2);
    assert_int_equal(s.n_seq, 3);
    assert_int_equal(s.n_seq_empty, 2);
    assert_int_equal(s.n_seq_nonfinite, 2);
    EXACT(s.dlogppl_mean, 1.0); /* only sequence 0's finite pair: log r = -1 - -2 = 1 */
    parity_metrics_dist_free(d);
    parity_metrics_dist_free(NULL);
}

static void dist_sequences(void **state)
{
    (void)state;
    /* Two tokens with p_A = 1/2, p_B = 1/4: ppl_A = 2, ppl_B = 4, logppl_B - logppl_A = ln 2,
     * ppl ratio 2, product of weights 4, so chi2_seq = (4 - 1)^2 = 9. */
    double a[] = {-LN2, -LN2}, b[] = {-2 * LN2, -2 * LN2};
    parity_seq_metrics_t m;
    assert_int_equal(parity_metrics_seq(a, b, 2, &m), PARITY_OK);
    CLOSE(m.logppl_a, LN2, 1e-15);
    CLOSE(m.logppl_b, 2 * LN2, 1e-15);
    CLOSE(m.dlogppl, LN2, 1e-15);
    CLOSE(m.ppl_ratio, 2.0, 1e-15);
    CLOSE(m.chi2_seq, 9.0, 1e-14);
    CLOSE(m.k1_mean, -LN2, 1e-15);
    CLOSE(m.k3_mean, 1 - LN2, 1e-15);
    /* A second sequence, identical: ratio 1. Means over 2 sequences, min 1, max 2. */
    parity_dist_t *d;
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_add_seq(d, a, b, 2);
    parity_metrics_dist_add_seq(d, a, a, 2);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    CLOSE(s.ppl_ratio_mean, 1.5, 1e-15);
    EXACT(s.ppl_ratio_min, 1.0);
    CLOSE(s.ppl_ratio_max, 2.0, 1e-15);
    CLOSE(s.dlogppl_mean, LN2 / 2, 1e-15);
    CLOSE(s.dlogppl_max_abs, LN2, 1e-15);
    CLOSE(s.chi2_seq_mean, 4.5, 1e-14);
    parity_metrics_dist_free(d);
    assert_int_equal(parity_metrics_seq(NULL, b, 2, &m), PARITY_E_INVALID);
}

static void dist_topk(void **state)
{
    (void)state;
    /* token 0: A [1 2 3], B [1 3 4]: top-1 agrees, overlap {1, 3} = 2/3.
     * token 1: A [5 6 7], B [6 5 -1]: top-1 differs, overlap {5, 6} = 2/3.
     * token 2: A [9 9 8], B [9 8 7]: duplicates count once, {9, 8} = 2/3; top-1 agrees.
     * token 3: A [-1 -1 -1], B [-1 -1 -1]: padding never matches: 0. */
    int32_t ia[] = {1, 2, 3, 5, 6, 7, 9, 9, 8, -1, -1, -1};
    int32_t ib[] = {1, 3, 4, 6, 5, -1, 9, 8, 7, -1, -1, -1};
    parity_dist_t *d;
    parity_metrics_dist_new(NULL, &d);
    assert_int_equal(parity_metrics_dist_add_topk(d, ia, ib, 4, 3), PARITY_OK);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_topk, 4);
    EXACT(s.top1_agree, 0.5);
    CLOSE(s.topk_overlap_mean, 0.5, 1e-15); /* (2/3 * 3 + 0) / 4 */
    assert_int_equal(parity_metrics_dist_add_topk(d, ia, ib, 1, 0), PARITY_E_INVALID);

    /* Truncated KL, k = 1: p_B = 1/2, p_A = 1/4 on the id; tails 1/2 and 3/4:
     * 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3) = 0.14384103622589045. */
    double la[] = {-2 * LN2}, lb[] = {-LN2};
    CLOSE(parity_metrics_topk_kl(la, lb, 1), 0.14384103622589045, 1e-15);
    /* S = the whole support (3 ids, masses summing to 1): the tail is empty and the value is
     * the full KL(B || A) = sum p_B ln(p_B / p_A), p_B = (1/2, 1/4, 1/4), p_A = (1/4, 1/4, 1/2):
     * 1/2 ln 2 + 0 + 1/4 ln(1/2) = 1/4 ln 2. */
    double fa[] = {-2 * LN2, -2 * LN2, -LN2}, fb[] = {-LN2, -2 * LN2, -2 * LN2};
    CLOSE(parity_metrics_topk_kl(fa, fb, 3), LN2 / 4, 1e-14);
    /* A has all its mass on S (tail 0) while B has tail mass: +inf. NaN input: NaN. */
    double za[] = {0.0}, zb[] = {-LN2}, na[] = {NAN};
    EXACT(parity_metrics_topk_kl(za, zb, 1), INFINITY);
    assert_true(isnan(parity_metrics_topk_kl(na, zb, 1)));
    /* p_B = 0 on an id contributes 0 even where p_A = 0 too. */
    double ma[] = {-INFINITY, -LN2}, mb[] = {-INFINITY, -LN2};
    EXACT(parity_metrics_topk_kl(ma, mb, 2), 0.0);

    double tka[] = {-2 * LN2, 0.0, NAN}, tkb[] = {-LN2, -LN2, -LN2};
    assert_int_equal(parity_metrics_dist_add_topk_kl(d, tka, tkb, 3, 1), PARITY_OK);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tkl, 1);
    assert_int_equal(s.n_tkl_inf, 1);
    assert_int_equal(s.n_tkl_invalid, 1);
    CLOSE(s.tkl_mean, 0.14384103622589045, 1e-15);
    EXACT(s.tkl_max, INFINITY);
    EXACT(parity_metrics_topk_overlap(ia, ib, 0), 0.0);
    parity_metrics_dist_free(d);
}

/* Random logprob pairs in sequences, split across accumulators and merged in order: counts,
 * extrema and quantiles must equal the single pass exactly, sums agree to a few ulps. */
static void dist_merge_equals_single_pass(void **state)
{
    (void)state;
    enum { N = 30000, K = 4 };
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *ta = malloc(N * K * sizeof *ta), *tb = malloc(N * K * sizeof *tb);
    int32_t *ia = malloc(N * K * sizeof *ia), *ib = malloc(N * K * sizeof *ib);
    assert_true(a && b && ta && tb && ia && ib);
    parity_rng_t g;
    parity_rng_seed(&g, SEED, 3);
    for (size_t i = 0; i < N; i++) {
        a[i] = -fabs(2.0 * parity_rng_normal(&g));
        b[i] = a[i] + 0.05 * parity_rng_normal(&g);
        if (b[i] > 0) b[i] = -b[i];
        if (parity_rng_below(&g, 1000) == 0) b[i] = NAN;
        for (size_t j = 0; j < K; j++) {
            ta[i * K + j] = -2.0 - 3.0 * parity_rng_uniform(&g);
            tb[i * K + j] = ta[i * K + j] + 0.1 * parity_rng_normal(&g);
            ia[i * K + j] = (int32_t)parity_rng_below(&g, 8);
            ib[i * K + j] = (int32_t)parity_rng_below(&g, 8);
        }
    }
    /* Sequences of lengths 1..100 in a fixed pattern. */
    parity_dist_t *one, *merged, *part;
    parity_metrics_dist_new(NULL, &one);
    parity_metrics_dist_new(NULL, &merged);
    size_t off = 0, len = 1, cut = N / 3, pstart = 0;
    parity_metrics_dist_new(NULL, &part);
    while (off < N) {
        size_t l = len < N - off ? len : N - off;
        parity_metrics_dist_add_seq(one, a + off, b + off, l);
        parity_metrics_dist_add_seq(part, a + off, b + off, l);
        off += l;
        len = len % 100 + 7;
        if (off >= cut || off == N) {
            parity_metrics_dist_add_topk(part, ia + pstart * K, ib + pstart * K, off - pstart, K);
            parity_metrics_dist_add_topk_kl(part, ta + pstart * K, tb + pstart * K, off - pstart, K);
            assert_int_equal(parity_metrics_dist_merge(merged, part), PARITY_OK);
            parity_metrics_dist_free(part);
            parity_metrics_dist_new(NULL, &part);
            pstart = off;
            cut += N / 3;
        }
    }
    parity_metrics_dist_free(part);
    parity_metrics_dist_add_topk(one, ia, ib, N, K);
    parity_metrics_dist_add_topk_kl(one, ta, tb, N, K);
    parity_dist_summary_t s1, s2;
    parity_metrics_dist_summary(one, &s1);
    parity_metrics_dist_summary(merged, &s2);
    assert_true(s1.n_invalid > 0 && s1.n_seq > 100);
    /* Counts, extrema and histogram quantiles exact; compensated sums and moments 1e-13. */
    assert_false(s1.n_finite <= PARITY_QSKETCH_EXACT_MAX); /* the histogram path is exercised */
    assert_int_equal(s1.n_tok, s2.n_tok);
    assert_int_equal(s1.n_finite, s2.n_finite);
    assert_int_equal(s1.n_invalid, s2.n_invalid);
    assert_int_equal(s1.n_seq, s2.n_seq);
    assert_int_equal(s1.n_seq_nonfinite, s2.n_seq_nonfinite);
    assert_int_equal(s1.n_topk, s2.n_topk);
    assert_int_equal(s1.n_tkl, s2.n_tkl);
    EXACT(s2.k3_max, s1.k3_max);
    EXACT(s2.abs_dlogprob_max, s1.abs_dlogprob_max);
    EXACT(s2.abs_dprob_max, s1.abs_dprob_max);
    EXACT(s2.chi2_max, s1.chi2_max);
    EXACT(s2.iw_min, s1.iw_min);
    EXACT(s2.iw_max, s1.iw_max);
    EXACT(s2.abs_dlogprob_p50, s1.abs_dlogprob_p50);
    EXACT(s2.abs_dlogprob_p99, s1.abs_dlogprob_p99);
    EXACT(s2.abs_dlogprob_p999, s1.abs_dlogprob_p999);
    EXACT(s2.abs_dprob_p999, s1.abs_dprob_p999);
    EXACT(s2.dlogppl_max_abs, s1.dlogppl_max_abs);
    EXACT(s2.ppl_ratio_min, s1.ppl_ratio_min);
    EXACT(s2.ppl_ratio_max, s1.ppl_ratio_max);
    EXACT(s2.tkl_max, s1.tkl_max);
    EXACT(s2.top1_agree, s1.top1_agree);
    EXACT(s2.iw_frac_out, s1.iw_frac_out);
    CLOSE(s2.k1_mean, s1.k1_mean, 1e-13);
    CLOSE(s2.k2_mean, s1.k2_mean, 1e-13);
    CLOSE(s2.k3_mean, s1.k3_mean, 1e-13);
    CLOSE(s2.abs_dprob_mean, s1.abs_dprob_mean, 1e-13);
    CLOSE(s2.chi2_mean, s1.chi2_mean, 1e-13);
    CLOSE(s2.iw_mean, s1.iw_mean, 1e-13);
    CLOSE(s2.iw_std, s1.iw_std, 1e-13);
    CLOSE(s2.iw_ess, s1.iw_ess, 1e-13);
    CLOSE(s2.pearson_p, s1.pearson_p, 1e-13);
    CLOSE(s2.dlogppl_mean, s1.dlogppl_mean, 1e-13);
    CLOSE(s2.ppl_ratio_mean, s1.ppl_ratio_mean, 1e-13);
    CLOSE(s2.chi2_seq_mean, s1.chi2_seq_mean, 1e-13);
    CLOSE(s2.topk_overlap_mean, s1.topk_overlap_mean, 1e-13);
    CLOSE(s2.tkl_mean, s1.tkl_mean, 1e-13);
    /* k3 >= 0 always; the sample means of k1 and k3 estimate the same KL(B || A). */
    assert_true(s1.k3_mean > 0 && s1.k1_mean > -1e-2);
    parity_dist_opts_t o = {0.25, 4.0};
    parity_dist_t *other;
    parity_metrics_dist_new(&o, &other);
    assert_int_equal(parity_metrics_dist_merge(one, other), PARITY_E_INVALID);
    parity_metrics_dist_free(other);
    parity_metrics_dist_free(one);
    parity_metrics_dist_free(merged);
    free(a);
    free(b);
    free(ta);
    free(tb);
    free(ia);
    free(ib);
}

static void dist_eval_fields(void **state)
{
    (void)state;
    double a[] = {-LN2, -LN2}, b[] = {-2 * LN2, -2 * LN2};
    uint64_t lens[] = {1, 1}, bad[] = {1, 2};
    int32_t ia[] = {1, 2}, ib[] = {1, 3};
    double out[PARITY_METRICS_DIST_NFIELDS];
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, lens, 2, ia, ib, NULL, NULL, 1, 2, 0.5, 2.0,
                                              out, PARITY_METRICS_DIST_NFIELDS),
                     PARITY_OK);
    size_t ik3 = 0, iseq = 0, iov = 0;
    for (size_t i = 0; i < PARITY_METRICS_DIST_NFIELDS; i++) {
        const char *nm = parity_metrics_dist_field_name(i);
        if (!strcmp(nm, "k3_mean")) ik3 = i;
        if (!strcmp(nm, "n_seq")) iseq = i;
        if (!strcmp(nm, "topk_overlap_mean")) iov = i;
    }
    assert_null(parity_metrics_dist_field_name(PARITY_METRICS_DIST_NFIELDS));
    CLOSE(out[ik3], 1 - LN2, 1e-15);
    EXACT(out[iseq], 2);
    EXACT(out[iov], 0.5);
    EXACT(out[0], 2); /* n_tok */
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, bad, 2, NULL, NULL, NULL, NULL, 0, 0, 0.5,
                                              2.0, out, 4),
                     PARITY_E_INVALID);
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 3.0,
                                              2.0, out, 4),
                     PARITY_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(err_hand_values),
        cmocka_unit_test(err_rel_and_ulp_helpers),
        cmocka_unit_test(err_ulp_callback_and_bad_opts),
        cmocka_unit_test(err_empty_and_equal),
        cmocka_unit_test(err_nonfinite),
        cmocka_unit_test(err_merge_equals_single_pass),
        cmocka_unit_test(err_eval_fields),
        cmocka_unit_test(err_rows_worst),
        cmocka_unit_test(csum_compensates),
        cmocka_unit_test(quantile_exact_small),
        cmocka_unit_test(quantile_stream_bound),
        cmocka_unit_test(quantile_merge_exactness),
        cmocka_unit_test(dist_hand_values),
        cmocka_unit_test(dist_importance_weights),
        cmocka_unit_test(dist_empty_equal_nonfinite),
        cmocka_unit_test(dist_sequences),
        cmocka_unit_test(dist_topk),
        cmocka_unit_test(dist_merge_equals_single_pass),
        cmocka_unit_test(dist_eval_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

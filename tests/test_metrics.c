/* metrics: error metrics against values worked out by hand (derivations in the comments),
 * non-finite classification, merge == single pass, and the quantile sketch's error bound on 10^6
 * values (the distribution metrics: test_metrics_dist.c). Seeds are fixed and printed in every
 * failure message. */
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

#include "test_metrics_close.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Error metrics between a candidate y and an fp64 reference r: max abs, max rel, ULPs of a
 * target format, mean abs, NMSE and RMSE, accumulated over a stream and mergeable, with every
 * non-finite pair classified and counted (never skipped silently). Definitions: docs/metrics.md.
 * Not here: distribution metrics (metrics_dist.c), quantiles (metrics_quantile.c), tolerances. */
#include "src/metrics/metrics_impl.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parity/metrics.h"

void parity_metrics_csum_add(parity_csum_t *s, double x)
{
    if (s) metrics_csum_add(s, x);
}

void metrics_csum_partials(const double *x, size_t n, parity_csum_t *l0, parity_csum_t *l1)
{
    *l0 = (parity_csum_t){0, 0};
    *l1 = (parity_csum_t){0, 0};
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        metrics_csum_add(l0, x[i]);
        metrics_csum_add(l1, x[i + 1]);
    }
    if (i < n) metrics_csum_add(l0, x[i]);
}

void parity_metrics_csum_add_array(parity_csum_t *s, const double *x, size_t n)
{
    if (!s || !x) return;
    /* Two interleaved compensated sums (even and odd terms) break the latency chain of one; each
     * is merged like parity_metrics_csum_merge. A non-finite total is the IEEE sum of the terms
     * in that association. */
    parity_csum_t l0, l1;
    metrics_csum_partials(x, n, &l0, &l1);
    metrics_csum_merge(s, &l0);
    metrics_csum_merge(s, &l1);
}

void parity_metrics_csum_merge(parity_csum_t *a, const parity_csum_t *b)
{
    if (a && b) metrics_csum_merge(a, b);
}

double parity_metrics_csum_value(const parity_csum_t *s)
{
    return s ? metrics_csum_value(s) : 0.0;
}

parity_err_opts_t parity_metrics_err_default_opts(void)
{
    parity_err_opts_t o;
    memset(&o, 0, sizeof o);
    return o;
}

/* ulp(r) = 2^(max(floor(log2|r|), emin) - p + 1). frexp gives |r| = m 2^e with m in [0.5, 1),
 * so floor(log2|r|) = e - 1 exactly (also for subnormal doubles); no log2() rounding near
 * powers of two. r == 0 takes the subnormal spacing 2^(emin - p + 1), the ulp of the format's
 * smallest values. */
double parity_metrics_ulp(double r, int prec, int emin)
{
    if (!isfinite(r) || prec < 1) return NAN;
    int e = emin;
    if (r != 0.0) {
        int fe;
        (void)frexp(fabs(r), &fe);
        if (fe - 1 > emin) e = fe - 1;
    }
    return ldexp(1.0, e - prec + 1);
}

/* |y - r| / max(|r|, floor). 0/0 (exact zero reference, exact zero candidate, floor 0) is a
 * perfect match: 0. A non-zero error against a zero denominator is +inf, so a candidate that
 * produces garbage where the reference is exactly 0 is visible instead of skipped. */
double parity_metrics_rel_err(double y, double r, double rel_floor)
{
    double d = fabs(y - r);
    double den = fabs(r);
    if (rel_floor > den) den = rel_floor;
    if (den == 0.0) return d == 0.0 ? 0.0 : (isnan(d) ? d : INFINITY);
    return d / den;
}

static int opts_valid(const parity_err_opts_t *o)
{
    if (o->prec < 0 || o->prec > 113) return 0;
    /* The smallest ulp, 2^(emin - prec + 1), must be a non-zero double. */
    if (o->ulp_fn == NULL && o->prec > 0 && (long)o->emin - o->prec + 1 < -1074) return 0;
    if (!(o->rel_floor >= 0.0) || !isfinite(o->rel_floor)) return 0;
    return 1;
}

static void err_zero(parity_err_stats_t *st, const parity_err_opts_t *o)
{
    memset(st, 0, sizeof *st);
    st->opts = *o;
    st->first_mismatch = UINT64_MAX;
    st->argmax_abs = st->argmax_rel = st->argmax_ulp = UINT64_MAX;
}

parity_status_t parity_metrics_err_init(parity_err_stats_t *st, const parity_err_opts_t *opts)
{
    if (!st) return PARITY_E_INVALID;
    parity_err_opts_t def = parity_metrics_err_default_opts();
    if (!opts) opts = &def;
    if (!opts_valid(opts)) {
        err_zero(st, &def);
        return PARITY_E_INVALID;
    }
    err_zero(st, opts);
    return PARITY_OK;
}

static double err_ulp_of(const parity_err_opts_t *o, double r)
{
    if (o->ulp_fn) return o->ulp_fn(o->ulp_ctx, r);
    return parity_metrics_ulp(r, o->prec, o->emin);
}

void parity_metrics_err_add(parity_err_stats_t *st, double y, double r)
{
    if (!st) return;
    uint64_t i = st->n++;
    int ny = isnan(y) != 0, nr = isnan(r) != 0;
    if (ny || nr) {
        st->n_nan_y += (uint64_t)ny;
        st->n_nan_r += (uint64_t)nr;
        if (st->first_mismatch == UINT64_MAX) st->first_mismatch = i;
        return;
    }
    if (isinf(y) || isinf(r)) {
        /* Same-signed infinities compare equal; inf vs finite or -inf vs +inf do not. */
        if (y == r) {
            st->n_inf_match++;
        } else {
            st->n_inf_mismatch++;
            if (st->first_mismatch == UINT64_MAX) st->first_mismatch = i;
        }
        return;
    }
    st->n_finite++;
    /* y - r of two finite doubles is finite or +-inf (overflow), never NaN, so every value
     * below is a number and the comparisons are well defined. The first finite pair always
     * sets the argmax (ties later keep the earliest index, which merge reproduces). */
    double d = fabs(y - r);
    int first = st->argmax_abs == UINT64_MAX;
    if (first || d > st->max_abs) {
        st->max_abs = d;
        st->argmax_abs = i;
    }
    double rel = parity_metrics_rel_err(y, r, st->opts.rel_floor);
    if (first || rel > st->max_rel) {
        st->max_rel = rel;
        st->argmax_rel = i;
    }
    if (st->opts.ulp_fn || st->opts.prec > 0) {
        double u = err_ulp_of(&st->opts, r);
        double e = (u > 0.0 && isfinite(u)) ? d / u : INFINITY;
        if (st->argmax_ulp == UINT64_MAX || e > st->max_ulp) {
            st->max_ulp = e;
            st->argmax_ulp = i;
        }
    }
    metrics_csum_add(&st->sum_abs, d);
    metrics_csum_add(&st->sum_sq_err, d * d);
    metrics_csum_add(&st->sum_sq_ref, r * r);
}

parity_status_t parity_metrics_err_add_array(parity_err_stats_t *st, const double *y,
                                             const double *r, size_t n)
{
    if (!st || (n > 0 && (!y || !r))) return PARITY_E_INVALID;
    for (size_t i = 0; i < n; i++) parity_metrics_err_add(st, y[i], r[i]);
    return PARITY_OK;
}

parity_status_t parity_metrics_err_add_array_f32(parity_err_stats_t *st, const float *y,
                                                 const double *r, size_t n)
{
    if (!st || (n > 0 && (!y || !r))) return PARITY_E_INVALID;
    for (size_t i = 0; i < n; i++) parity_metrics_err_add(st, (double)y[i], r[i]);
    return PARITY_OK;
}

static int opts_equal(const parity_err_opts_t *a, const parity_err_opts_t *b)
{
    return a->prec == b->prec && a->emin == b->emin && a->ulp_fn == b->ulp_fn &&
           a->ulp_ctx == b->ulp_ctx && a->rel_floor == b->rel_floor;
}

/* Take b's maximum when it is strictly larger, or when a has none: the same choice a single
 * pass makes, since b's elements come after a's. */
static void merge_max(double *am, uint64_t *ai, double bm, uint64_t bi, uint64_t off)
{
    if (bi == UINT64_MAX) return;
    if (*ai == UINT64_MAX || bm > *am) {
        *am = bm;
        *ai = bi + off;
    }
}

parity_status_t parity_metrics_err_merge(parity_err_stats_t *a, const parity_err_stats_t *b)
{
    if (!a || !b || !opts_equal(&a->opts, &b->opts)) return PARITY_E_INVALID;
    uint64_t off = a->n;
    if (a->first_mismatch == UINT64_MAX && b->first_mismatch != UINT64_MAX)
        a->first_mismatch = b->first_mismatch + off;
    merge_max(&a->max_abs, &a->argmax_abs, b->max_abs, b->argmax_abs, off);
    merge_max(&a->max_rel, &a->argmax_rel, b->max_rel, b->argmax_rel, off);
    merge_max(&a->max_ulp, &a->argmax_ulp, b->max_ulp, b->argmax_ulp, off);
    a->n += b->n;
    a->n_finite += b->n_finite;
    a->n_nan_y += b->n_nan_y;
    a->n_nan_r += b->n_nan_r;
    a->n_inf_match += b->n_inf_match;
    a->n_inf_mismatch += b->n_inf_mismatch;
    metrics_csum_merge(&a->sum_abs, &b->sum_abs);
    metrics_csum_merge(&a->sum_sq_err, &b->sum_sq_err);
    metrics_csum_merge(&a->sum_sq_ref, &b->sum_sq_ref);
    return PARITY_OK;
}

void parity_metrics_err_result(const parity_err_stats_t *st, parity_err_result_t *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->first_mismatch = out->argmax_abs = out->argmax_rel = out->argmax_ulp = UINT64_MAX;
    if (!st) return;
    out->n = st->n;
    out->n_finite = st->n_finite;
    out->n_nan_y = st->n_nan_y;
    out->n_nan_r = st->n_nan_r;
    out->n_inf_match = st->n_inf_match;
    out->n_inf_mismatch = st->n_inf_mismatch;
    out->n_mismatch = st->n - st->n_finite - st->n_inf_match;
    out->first_mismatch = st->first_mismatch;
    out->max_abs = st->max_abs;
    out->argmax_abs = st->argmax_abs;
    out->max_rel = st->max_rel;
    out->argmax_rel = st->argmax_rel;
    out->max_ulp = st->max_ulp;
    out->argmax_ulp = st->argmax_ulp;
    if (st->n_finite == 0) return;
    double nf = (double)st->n_finite;
    double se = metrics_csum_value(&st->sum_sq_err);
    double sr = metrics_csum_value(&st->sum_sq_ref);
    out->mean_abs = metrics_csum_value(&st->sum_abs) / nf;
    /* NMSE = sum (y-r)^2 / sum r^2 (ggml's test-backend-ops definition). An all-zero reference
     * gives 0/0 when the candidate is also all zero (a match: 0) and x/0 otherwise (+inf). */
    if (sr == 0.0)
        out->nmse = se == 0.0 ? 0.0 : INFINITY;
    else
        out->nmse = se / sr;
    /* RMSE = sqrt(mean of squares): the division by n is inside the root (ggml once computed
     * sqrt(sum)/n, which is RMSE / sqrt(n)). */
    out->rmse = sqrt(se / nf);
}

static double key_value(const parity_err_result_t *r, parity_err_key_t key)
{
    switch (key) {
    case PARITY_ERR_KEY_REL: return r->max_rel;
    case PARITY_ERR_KEY_ULP: return r->max_ulp;
    case PARITY_ERR_KEY_NMSE: return r->nmse;
    case PARITY_ERR_KEY_ABS: break;
    }
    return r->max_abs;
}

parity_status_t parity_metrics_err_rows(const double *y, const double *r, size_t rows, size_t cols,
                                        size_t ld, const parity_err_opts_t *opts,
                                        parity_err_key_t key, parity_err_result_t *per_row,
                                        parity_err_stats_t *total, size_t *worst_row)
{
    if ((rows > 0 && cols > 0 && (!y || !r)) || ld < cols || (unsigned)key > PARITY_ERR_KEY_NMSE)
        return PARITY_E_INVALID;
    parity_err_stats_t row;
    parity_status_t s = parity_metrics_err_init(&row, opts);
    if (s != PARITY_OK) return s;
    if (total) parity_metrics_err_init(total, opts);
    size_t worst = SIZE_MAX;
    int worst_bad = 0;
    double worst_v = 0.0;
    for (size_t i = 0; i < rows; i++) {
        parity_metrics_err_init(&row, opts);
        if (cols > 0) parity_metrics_err_add_array(&row, y + i * ld, r + i * ld, cols);
        parity_err_result_t res;
        parity_metrics_err_result(&row, &res);
        if (per_row) per_row[i] = res;
        if (total) (void)parity_metrics_err_merge(total, &row);
        /* Rank (has a mismatch, key value) lexicographically; strict > keeps the first row. */
        int bad = res.n_mismatch > 0;
        double v = key_value(&res, key);
        if (worst == SIZE_MAX || (bad && !worst_bad) || (bad == worst_bad && v > worst_v)) {
            worst = i;
            worst_bad = bad;
            worst_v = v;
        }
    }
    if (worst_row) *worst_row = worst;
    return PARITY_OK;
}

static const char *const err_field_names[] = {
    "n",          "n_finite",   "n_nan_y",       "n_nan_r",  "n_inf_match", "n_inf_mismatch",
    "n_mismatch", "first_mismatch", "max_abs",   "argmax_abs", "max_rel",   "argmax_rel",
    "max_ulp",    "argmax_ulp", "mean_abs",      "nmse",     "rmse",
};
_Static_assert(sizeof err_field_names / sizeof err_field_names[0] == PARITY_METRICS_ERR_NFIELDS,
               "one name per error field");

const char *parity_metrics_err_field_name(size_t i)
{
    return i < PARITY_METRICS_ERR_NFIELDS ? err_field_names[i] : NULL;
}

/* Indices travel as doubles (exact below 2^53); "none" is -1 so Python can test < 0. */
static double idx_d(uint64_t i) { return i == UINT64_MAX ? -1.0 : (double)i; }

parity_status_t parity_metrics_err_eval(const double *y, const double *r, size_t n, int prec,
                                        int emin, double rel_floor, double *out, size_t out_len)
{
    if (out_len > 0 && !out) return PARITY_E_INVALID;
    parity_err_opts_t o = parity_metrics_err_default_opts();
    o.prec = prec;
    o.emin = emin;
    o.rel_floor = rel_floor;
    parity_err_stats_t st;
    parity_status_t s = parity_metrics_err_init(&st, &o);
    if (s != PARITY_OK) return s;
    s = parity_metrics_err_add_array(&st, y, r, n);
    if (s != PARITY_OK) return s;
    parity_err_result_t res;
    parity_metrics_err_result(&st, &res);
    double v[PARITY_METRICS_ERR_NFIELDS];
    v[PARITY_METRICS_ERR_N] = (double)res.n;
    v[PARITY_METRICS_ERR_N_FINITE] = (double)res.n_finite;
    v[PARITY_METRICS_ERR_N_NAN_Y] = (double)res.n_nan_y;
    v[PARITY_METRICS_ERR_N_NAN_R] = (double)res.n_nan_r;
    v[PARITY_METRICS_ERR_N_INF_MATCH] = (double)res.n_inf_match;
    v[PARITY_METRICS_ERR_N_INF_MISMATCH] = (double)res.n_inf_mismatch;
    v[PARITY_METRICS_ERR_N_MISMATCH] = (double)res.n_mismatch;
    v[PARITY_METRICS_ERR_FIRST_MISMATCH] = idx_d(res.first_mismatch);
    v[PARITY_METRICS_ERR_MAX_ABS] = res.max_abs;
    v[PARITY_METRICS_ERR_ARGMAX_ABS] = idx_d(res.argmax_abs);
    v[PARITY_METRICS_ERR_MAX_REL] = res.max_rel;
    v[PARITY_METRICS_ERR_ARGMAX_REL] = idx_d(res.argmax_rel);
    v[PARITY_METRICS_ERR_MAX_ULP] = res.max_ulp;
    v[PARITY_METRICS_ERR_ARGMAX_ULP] = idx_d(res.argmax_ulp);
    v[PARITY_METRICS_ERR_MEAN_ABS] = res.mean_abs;
    v[PARITY_METRICS_ERR_NMSE] = res.nmse;
    v[PARITY_METRICS_ERR_RMSE] = res.rmse;
    size_t m = out_len < PARITY_METRICS_ERR_NFIELDS ? out_len : PARITY_METRICS_ERR_NFIELDS;
    if (m > 0) memcpy(out, v, m * sizeof v[0]);
    return PARITY_OK;
}

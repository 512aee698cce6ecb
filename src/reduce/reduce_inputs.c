/* Inputs of the all-reduce simulators (rank-local partials built from K terms per element, so
 * 8-rank and 4-rank setups reduce the same logical tensor), the drift between two results, and
 * split-K GEMM emulation. Not here: the reduction orders themselves (reduce.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/metrics.h"
#include "parity/reduce.h"
#include "parity/rng.h"
#include "parity/workload.h"

static const char *const WL_NAMES[] = {"partial", "normal", "gradscale", "outlier", "intprobe"};

parity_status_t parity_reduce_workload_parse(const char *name, parity_reduce_workload_t *out)
{
    if (!name || !out) return PARITY_E_INVALID;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, WL_NAMES[i]) == 0) {
            *out = (parity_reduce_workload_t)i;
            return PARITY_OK;
        }
    return PARITY_E_NOTFOUND;
}

const char *parity_reduce_workload_name(parity_reduce_workload_t w)
{
    return (unsigned)w < 5 ? WL_NAMES[w] : "?";
}

/* Streams of the workload generator used here (fixed: changing them changes every report). */
enum { ST_X = 0x5244, ST_W, ST_NORMAL, ST_GRAD, ST_OUTLIER, ST_INT, ST_PICK };

/* Shared state of one generation: the activation vector of the partial workload (bf16). */
typedef struct {
    parity_reduce_workload_t w;
    uint64_t seed;
    size_t k;
    double *x; /* (K) partial only */
} gen_t;

static parity_status_t gen_init(gen_t *g, parity_reduce_workload_t w, uint64_t seed, size_t k)
{
    g->w = w;
    g->seed = seed;
    g->k = k;
    g->x = NULL;
    if (w != PARITY_REDUCE_W_PARTIAL) return PARITY_OK;
    g->x = malloc(k * sizeof *g->x);
    if (!g->x) return PARITY_E_NOMEM;
    /* Activations with outlier channels: 1% of the K channels x8 (LLM.int8()-style outliers). */
    int outl = (int)(k / 100);
    parity_workload_values(PARITY_VALS_OUTLIER, 1.0, outl, 8.0, seed, ST_X, 0, 1, (int64_t)k, g->x);
    for (size_t j = 0; j < k; j++) g->x[j] = (double)parity_round_bf16((float)g->x[j]);
    return PARITY_OK;
}

/* The K terms of element i. */
static void gen_terms(const gen_t *g, size_t i, double *t)
{
    int64_t K = (int64_t)g->k, r = (int64_t)i;
    switch (g->w) {
    case PARITY_REDUCE_W_PARTIAL:
        parity_workload_values(PARITY_VALS_NORMAL, 1.0 / sqrt((double)g->k), 0, 0, g->seed, ST_W,
                               r, r + 1, K, t);
        /* bf16 x bf16 is exact in fp32 (8 + 8 significand bits), as on tensor cores. */
        for (size_t j = 0; j < g->k; j++) t[j] = (double)parity_round_bf16((float)t[j]) * g->x[j];
        break;
    case PARITY_REDUCE_W_NORMAL:
        parity_workload_values(PARITY_VALS_NORMAL, 1.0, 0, 0, g->seed, ST_NORMAL, r, r + 1, K, t);
        break;
    case PARITY_REDUCE_W_GRADSCALE:
        parity_workload_values(PARITY_VALS_GRADSCALE, 1.0, 0, 0, g->seed, ST_GRAD, r, r + 1, K, t);
        break;
    case PARITY_REDUCE_W_OUTLIER: {
        parity_workload_values(PARITY_VALS_NORMAL, 1.0, 0, 0, g->seed, ST_OUTLIER, r, r + 1, K, t);
        parity_rng_t rng;
        parity_rng_seed(&rng, g->seed ^ (uint64_t)i * 0x9e3779b97f4a7c15ull, ST_PICK);
        if (parity_rng_below(&rng, 100) == 0)
            for (size_t j = 0; j < g->k; j++) t[j] *= 100.0;
        break;
    }
    case PARITY_REDUCE_W_INTPROBE:
        parity_workload_values(PARITY_VALS_INTPROBE, 1.0, 0, 0, g->seed, ST_INT, r, r + 1, K, t);
        break;
    }
}

parity_status_t parity_reduce_inputs(parity_reduce_workload_t w, uint64_t seed, size_t n, size_t k,
                                     int ranks, parity_reduce_dtype_t hop, double *part, double *ref)
{
    if ((unsigned)w > PARITY_REDUCE_W_INTPROBE || ranks < 1 || ranks > PARITY_REDUCE_MAX_RANKS ||
        k < (size_t)ranks || (unsigned)hop > PARITY_REDUCE_FP16 || (n > 0 && !part))
        return PARITY_E_INVALID;
    gen_t g;
    parity_status_t st = gen_init(&g, w, seed, k);
    if (st) return st;
    double *t = malloc(k * sizeof *t);
    if (!t) {
        free(g.x);
        return PARITY_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        gen_terms(&g, i, t);
        for (int r = 0; r < ranks; r++) {
            size_t k0 = k * (size_t)r / (size_t)ranks, k1 = k * (size_t)(r + 1) / (size_t)ranks;
            /* The rank's local GEMM: in-order fp32 accumulation, then stored in the hop format. */
            float acc = 0.0f;
            for (size_t j = k0; j < k1; j++) acc = (float)((double)acc + t[j]);
            part[(size_t)r * n + i] = parity_reduce_round(hop, acc);
        }
        if (ref) ref[i] = parity_sum_exact(t, k);
    }
    free(t);
    free(g.x);
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

parity_status_t parity_reduce_drift(const double *a, const double *b, size_t n,
                                    parity_reduce_dtype_t ulp_fmt, parity_reduce_drift_t *out)
{
    if (!out || (n > 0 && (!a || !b))) return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n == 0) return PARITY_OK;
    double *u = malloc(n * sizeof *u);
    if (!u) return PARITY_E_NOMEM;
    /* Precision and smallest normal exponent of the ulp format (fp64 results in fp32 ulps). */
    int prec = 24, emin = -126;
    if (ulp_fmt == PARITY_REDUCE_BF16) prec = 8;
    if (ulp_fmt == PARITY_REDUCE_FP16) prec = 11, emin = -14;
    parity_csum_t sq = {0, 0}, sqe = {0, 0}, srel = {0, 0}, sulp = {0, 0};
    for (size_t i = 0; i < n; i++) parity_metrics_csum_add(&sq, b[i] * b[i]);
    double ssq = parity_metrics_csum_value(&sq);
    out->rel_floor = 1e-3 * sqrt(ssq / (double)n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        int same = a[i] == b[i] || (isnan(a[i]) && isnan(b[i]));
        if (!same) out->n_differ++;
        if (same) d = 0;
        /* ulps at max(|b|, rel_floor): an element that cancels to (nearly) 0 is measured in
         * ulps of the tensor's scale, not of its own tiny value. */
        double mag = fmax(fabs(b[i]), out->rel_floor);
        double ulp = isfinite(b[i]) ? parity_metrics_ulp(mag > 0 ? mag : 1.0, prec, emin) : NAN;
        u[i] = same ? 0 : (isfinite(d) && isfinite(ulp) ? d / ulp : INFINITY);
        double rel = parity_metrics_rel_err(a[i], b[i], out->rel_floor);
        if (same) rel = 0;
        if (d > out->max_abs || isnan(d)) out->max_abs = d;
        if (rel > out->max_rel || isnan(rel)) out->max_rel = rel;
        parity_metrics_csum_add(&srel, rel);
        parity_metrics_csum_add(&sulp, u[i]);
        parity_metrics_csum_add(&sqe, d * d);
        double v = u[i];
        int h = v == 0 ? 0 : v <= 1 ? 1 : v <= 2 ? 2 : v <= 4 ? 3 : v <= 8 ? 4 : 5;
        out->ulp_hist[h]++;
    }
    out->frac_differ = (double)out->n_differ / (double)n;
    out->mean_rel = parity_metrics_csum_value(&srel) / (double)n;
    out->mean_ulp = parity_metrics_csum_value(&sulp) / (double)n;
    double e = parity_metrics_csum_value(&sqe);
    out->nmse = ssq > 0 ? e / ssq : (e > 0 ? INFINITY : 0);
    qsort(u, n, sizeof *u, cmp_double);
    out->max_ulp = u[n - 1];
    out->p50_ulp = parity_metrics_quantile_sorted(u, n, 0.5);
    out->p90_ulp = parity_metrics_quantile_sorted(u, n, 0.9);
    out->p99_ulp = parity_metrics_quantile_sorted(u, n, 0.99);
    free(u);
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */

void parity_reduce_splitk_bounds(size_t k, int splits, int s, size_t *k0, size_t *k1)
{
    size_t S = (size_t)splits;
    *k0 = k * (size_t)s / S;
    *k1 = k * (size_t)(s + 1) / S;
}

double parity_reduce_splitk_combine(const double *p, int splits, parity_reduce_dtype_t partial,
                                    parity_reduce_dtype_t combine, parity_reduce_dtype_t outfmt)
{
    /* Each operand is in a format of at most 24 bits, so the double sum rounded once to the
     * combine format is the correctly rounded sum (as in hop_add, reduce.c). */
    double total = 0;
    for (int s = 0; s < splits; s++) {
        double q = parity_reduce_round(partial, p[s]);
        total = s == 0 ? parity_reduce_round(combine, q) : parity_reduce_round(combine, total + q);
    }
    return parity_reduce_round(outfmt, total);
}

parity_status_t parity_reduce_splitk(uint64_t seed, size_t n, size_t k, int splits,
                                     parity_reduce_dtype_t partial, parity_reduce_dtype_t outfmt,
                                     double *out, double *ref)
{
    if (splits < 1 || (size_t)splits > k || (n > 0 && !out) ||
        (partial != PARITY_REDUCE_FP32 && partial != PARITY_REDUCE_BF16 && partial != PARITY_REDUCE_FP16) ||
        (unsigned)outfmt > PARITY_REDUCE_FP16)
        return PARITY_E_INVALID;
    gen_t g;
    parity_status_t st = gen_init(&g, PARITY_REDUCE_W_PARTIAL, seed, k);
    if (st) return st;
    double *t = malloc(k * sizeof *t);
    if (!t) {
        free(g.x);
        return PARITY_E_NOMEM;
    }
    int S = splits;
    double *p = malloc((size_t)S * sizeof *p);
    if (!p) {
        free(t);
        free(g.x);
        return PARITY_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        gen_terms(&g, i, t);
        for (int s = 0; s < S; s++) {
            size_t k0, k1;
            parity_reduce_splitk_bounds(k, S, s, &k0, &k1);
            float acc = 0.0f;
            for (size_t j = k0; j < k1; j++) acc = (float)((double)acc + t[j]);
            p[s] = acc;
        }
        out[i] = parity_reduce_splitk_combine(p, S, partial, PARITY_REDUCE_FP32, outfmt);
        if (ref) ref[i] = parity_sum_exact(t, k);
    }
    free(p);
    free(t);
    free(g.x);
    return PARITY_OK;
}

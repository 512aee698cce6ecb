/* Internal to the metrics module (metrics.c, metrics_quantile.c, metrics_record.c, metrics_vec.c,
 * metrics_dist.c, metrics_topk.c, metrics_dist_summary.c): the inline compensated-sum step shared
 * by the accumulators, the quantile sketch's and the distribution accumulator's layouts, the
 * class of a pair. Units, bottom up: metrics_quantile.c and metrics_record.c call no other;
 * metrics_vec.c calls metrics_record.c; metrics_dist.c calls those three; metrics_topk.c none;
 * metrics_dist_summary.c calls metrics_dist.c, metrics_topk.c, metrics_quantile.c. Private to
 * the metrics module (and white-box tests): what the logprob comparison uses is
 * src/metrics/metrics_internal.h, which this header includes. Not a public header. */
#ifndef PARITY_METRICS_IMPL_H
#define PARITY_METRICS_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parity/metrics.h"
#include "src/metrics/metrics_internal.h"

/* 1/(n+2)! for n = 0..15 (1/2! .. 1/17!): the coefficients of q(x) = (e^x - 1 - x) / x^2 =
 * sum_n x^n / (n+2)!, which the k3 series (metrics_record.c) and the SIMD expm1 and k3
 * (metrics_vec.c) evaluate by Horner. Each entry is the quotient rounded once (the factorials
 * are exact in binary64 up to 18!). Static so that each file's loops see constants. */
static const double metrics_inv_fact2[16] __attribute__((unused)) = {
    1.0 / 2,
    1.0 / 6,
    1.0 / 24,
    1.0 / 120,
    1.0 / 720,
    1.0 / 5040,
    1.0 / 40320,
    1.0 / 362880,
    1.0 / 3628800,
    1.0 / 39916800,
    1.0 / 479001600,
    1.0 / 6227020800.0,
    1.0 / 87178291200.0,
    1.0 / 1307674368000.0,
    1.0 / 20922789888000.0,
    1.0 / 355687428096000.0,
};

/* parity_metrics_csum_add_array's two partial sums (even and odd terms) of x[0..n), which it
 * then merges into the running sum, l0 first. */
void metrics_csum_partials(const double *x, size_t n, parity_csum_t *l0, parity_csum_t *l1);

/* The quantile sketch (its binning, QS_*, is in metrics_internal.h). */
struct parity_qsketch {
    uint64_t n;       /* values added */
    uint64_t n_zero;  /* exactly 0 */
    uint64_t n_under; /* (0, 2^-64) */
    uint64_t n_over;  /* [2^64, inf) */
    double min, max;  /* exact, valid when n > 0 */
    size_t n_exact;   /* values kept in exact[]; the sketch is exact while n_exact == n */
    int sorted;       /* exact[0..n_exact) is sorted */
    double exact[PARITY_QSKETCH_EXACT_MAX];
    uint64_t bins[QS_NBINS];
};

/* The class of a pair (a, b) of logprobs (parity_dist_tok_t.cls). */
enum { PAIR_FINITE, PAIR_INVALID, PAIR_ZERO_MATCH, PAIR_INF_MISMATCH };

/* Logprobs are <= 0 in exact arithmetic; small positive values are rounding noise and are
 * accepted. +inf (probability e^inf) and NaN are invalid; -inf is probability 0. */
static inline int metrics_classify(double a, double b)
{
    if (isnan(a) || isnan(b) || a == INFINITY || b == INFINITY) return PAIR_INVALID;
    if (a == -INFINITY && b == -INFINITY) return PAIR_ZERO_MATCH;
    if (a == -INFINITY || b == -INFINITY) return PAIR_INF_MISMATCH;
    return PAIR_FINITE;
}

/* The distribution accumulator (parity_dist_t): filled and merged by metrics_dist.c and
 * metrics_topk.c, read by metrics_dist_summary.c. */
/* Welford's running mean and sum of squared deviations, merged with Chan, Golub & LeVeque's
 * pairwise update (1979): stable where sum x^2 - n mean^2 would cancel. */
typedef struct {
    double n, mean, m2;
} welford_t;

/* The same for two variables with their co-moment, for Pearson's r. */
typedef struct {
    double n, mx, my, m2x, m2y, cxy;
} comoment_t;

struct parity_dist {
    parity_dist_opts_t opts;
    /* tokens */
    uint64_t n_tok, n_finite, n_invalid, n_inf_mismatch, n_zero_match;
    parity_csum_t k1, k2, k3, abs_dlp, abs_dp, chi2;
    double k3_max, abs_dlp_max, abs_dp_max, chi2_max;
    /* importance weights r = exp(a - b) */
    parity_csum_t iw_sum, iw_sum2;
    welford_t iw;
    double iw_min, iw_max;
    uint64_t iw_n_low, iw_n_high;
    comoment_t pearson;
    /* sequences */
    uint64_t n_seq, n_seq_empty, n_seq_nonfinite;
    parity_csum_t dlogppl, ppl_ratio, chi2_seq;
    double dlogppl_max_abs, ppl_ratio_min, ppl_ratio_max;
    /* top-k */
    uint64_t n_topk, n_top1;
    parity_csum_t overlap;
    uint64_t n_tkl, n_tkl_invalid, n_tkl_inf;
    parity_csum_t tkl;
    double tkl_max;
    struct parity_qsketch q_dlp, q_dp;
};

/* Add x to the sketch; x must be finite and >= 0 (the caller checks; -0 counts as 0). The
 * body of parity_metrics_qsketch_add, inlined into the distribution accumulator's loops. */
static inline void metrics_qs_add(struct parity_qsketch *q, double x)
{
    x = x + 0.0; /* -0 -> +0 so the bit tricks below never see a sign bit */
    if (q->n == 0 || x < q->min) q->min = x;
    if (q->n == 0 || x > q->max) q->max = x;
    if (q->n_exact == q->n && q->n_exact < PARITY_QSKETCH_EXACT_MAX) {
        q->exact[q->n_exact++] = x;
        q->sorted = 0;
    }
    q->n++;
    if (x == 0.0) {
        q->n_zero++;
    } else if (x < 0x1p-64) {
        q->n_under++;
    } else if (x >= 0x1p64) {
        q->n_over++;
    } else {
        /* bin = (biased exponent - QS_EXP_LO) * 128 + top 7 fraction bits */
        uint64_t u;
        memcpy(&u, &x, sizeof u);
        uint64_t e = u >> 52, m = (u >> (52 - QS_BITS)) & ((1u << QS_BITS) - 1);
        q->bins[((e - QS_EXP_LO) << QS_BITS) | m]++;
    }
}

/* The record of one pair by the scalar (libm) definitions, into index i (metrics_record.c). */
void metrics_prep_slow(double a, double b, const metrics_soa_t *o, size_t i);
/* e^x (any x but NaN) and e^x - 1 (|x| <= 40; e^x into ex when not NULL) over arrays, by the
 * SIMD code the records use; error bounds in metrics_vec.c and docs/logprob-metrics.md. */
void metrics_vexp(const double *x, size_t n, double *out);
void metrics_vexpm1(const double *x, size_t n, double *out, double *ex);

/* Empty the sketch (no allocation). */
void parity_metrics_qs_reset(struct parity_qsketch *q);

#endif

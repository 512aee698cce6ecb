/* Internal to the metrics module (metrics.c, metrics_quantile.c, metrics_record.c, metrics_vec.c,
 * metrics_dist.c, metrics_topk.c, metrics_dist_summary.c): the inline compensated-sum step shared
 * by the accumulators, the quantile sketch's and the distribution accumulator's layouts, the
 * class of a pair. Units, bottom up: metrics_quantile.c and metrics_record.c call no other;
 * metrics_vec.c calls metrics_record.c; metrics_dist.c calls those three; metrics_topk.c none;
 * metrics_dist_summary.c calls metrics_dist.c, metrics_topk.c, metrics_quantile.c. Not a public
 * header. */
#ifndef PARITY_METRICS_IMPL_H
#define PARITY_METRICS_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parity/metrics.h"

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

/* Neumaier's variant of Kahan summation: t = s + x rounds; the exact rounding error is
 * (s - t) + x when |s| >= |x| and (x - t) + s otherwise (Fast2Sum with the larger operand
 * first, exact by Dekker's lemma), and is collected in comp. The error of sum + comp is about
 * 2u|S| + O(n u^2) sum|x_i| (Higham, Accuracy and Stability, 2nd ed., sec. 4.3). Once the sum
 * is non-finite comp would turn into NaN (inf - inf); we stop updating it so the value is the
 * IEEE naive result. */
static inline void metrics_csum_add(parity_csum_t *s, double x)
{
    double t = s->sum + x;
    if (isfinite(t)) {
        if (fabs(s->sum) >= fabs(x))
            s->comp += (s->sum - t) + x;
        else
            s->comp += (x - t) + s->sum;
    }
    s->sum = t;
}

static inline double metrics_csum_value(const parity_csum_t *s)
{
    return isfinite(s->sum) ? s->sum + s->comp : s->sum;
}

static inline void metrics_csum_merge(parity_csum_t *a, const parity_csum_t *b)
{
    metrics_csum_add(a, b->sum);
    if (isfinite(a->sum)) a->comp += b->comp;
}

/* parity_metrics_csum_add_array's two partial sums (even and odd terms) of x[0..n), which it
 * then merges into the running sum, l0 first. */
void metrics_csum_partials(const double *x, size_t n, parity_csum_t *l0, parity_csum_t *l1);

/* The quantile sketch's layout, shared so that the distribution accumulator can embed its two
 * sketches in one allocation. Histogram bin of a positive x in [2^-64, 2^64): the biased
 * exponent and the top 7 fraction bits of its binary64 encoding, i.e. 128 equal-width bins
 * per binade (docs/metrics.md derives the 2^-8 relative error bound). */
#define QS_BITS 7
#define QS_EXP_LO (1023 - 64) /* biased exponent of 2^-64 */
#define QS_BINADES 128        /* 2^-64 .. 2^64 */
#define QS_NBINS (QS_BINADES << QS_BITS)

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

/* The distribution accumulator split for callers that compute in parallel and must give the
 * same bits whatever the number of threads (logprob_compare.c): everything whose result
 * depends on the order of operations (compensated sums, Welford and co-moment merges) is
 * "applied" in stream order, while the parts whose final state does not depend on the order
 * (quantile sketches: counts, min, max and the exact buffer, which is sorted before use) are
 * fed from any thread into sketches merged at the end. Applying the parts in stream order
 * gives bit for bit what parity_metrics_dist_add_prepped / _add_seq_stats /
 * _add_topk / _add_topk_kl give (they are implemented with these functions). */
/* Index of each compensated sum in metrics_blk_t. */
enum { S_K1, S_K2, S_K3, S_ADL, S_ADP, S_CHI2, S_W, S_W2, S_N };

typedef struct {
    double s[8], c[8]; /* compensated partial sums: k1, k2, k3, |dlp|, |dp|, chi2, w, w^2 */
    double mk3, mdl, mdp, mchi, wmin, wmax;
    uint64_t nlo, nhi;
    size_t m;
    double mw, mx, my, m2w, m2x, m2y, cxy;
    double fs, fs2, fmx; /* with the A logprobs: the analytic floor's sum of m = unit (|a| + 1),
                          * of m^2 (plain sums of non-negative terms) and max m */
} metrics_blk_t;

/* Per-token records as separate arrays (structure of arrays, for SIMD): the fields of
 * parity_dist_tok_t, index i in each. cls and fast as there. */
typedef struct {
    double *lr, *k3, *rm1, *w, *adp, *pa, *pb;
    uint8_t *cls, *fast;
} metrics_soa_t;

/* The records of the pairs (a[i], b[i]), i < n, into o's arrays at 0..n) (metrics_vec.c): the
 * fast pairs by the SIMD exp/expm1, the others by metrics_prep_slow. */
void metrics_prep_soa(const double *a, const double *b, size_t n, const metrics_soa_t *o);
/* The record of one pair by the scalar (libm) definitions, into index i (metrics_record.c). */
void metrics_prep_slow(double a, double b, const metrics_soa_t *o, size_t i);
/* Record i as a parity_dist_tok_t. */
void metrics_soa_get(const metrics_soa_t *s, size_t i, parity_dist_tok_t *t);
/* e^x (any x but NaN) and e^x - 1 (|x| <= 40; e^x into ex when not NULL) over arrays, by the
 * SIMD code the records use; error bounds in metrics_vec.c and docs/logprob-metrics.md. */
void metrics_vexp(const double *x, size_t n, double *out);
void metrics_vexpm1(const double *x, size_t n, double *out, double *ex);

/* A signed histogram of delta = -log r fed by the |log r| sketch inserts, bins that are unions
 * of the sketch's bins (the logprob report's histogram, logprob_compare.c): a value in the
 * sketch's binned range goes to bin map[its sketch bin], below it to bin 0, above it to bin
 * nb - 1; counts in cnt[lane * (2 nb + 1) + s * nb + bin] with s = 1 when delta > 0 and
 * lane = the token's index in the block mod 4 (four interleaved tables: consecutive tokens
 * often share a bin, and one table would chain each increment on the previous store), zeros
 * at cnt[lane * (2 nb + 1) + 2 nb].
 * A block whose values are all in the binned range counts each value once, in the signed
 * sketch bins sb[s * QS_NBINS + sketch bin] (s = its sign bit, 1 when delta > 0), instead of
 * in the sketch's bins and in cnt (one increment instead of two and the map lookup);
 * metrics_shist_fold moves them into both before the sketch is read. */
typedef struct {
    const uint8_t *map; /* QS_NBINS entries */
    size_t nb;
    uint64_t *cnt;      /* 4 (2 nb + 1) counts */
    uint64_t *sb;       /* 2 QS_NBINS signed sketch bins, zero after each fold */
} metrics_shist_t;

/* The signed sketch bins into q's bins (which must be the sketch the blocks were inserted
 * into: its [min, max] covers them) and into cnt (lane 0); sb is left zero. */
void metrics_shist_fold(struct parity_qsketch *q, const metrics_shist_t *h);

/* Block of records i0..i0+m (1 <= m <= 256), all with fast = 1: stats into out, |dlp| and |dp|
 * into the sketches, delta into h when not NULL, and when a is not NULL the floor sums of the
 * block's A logprobs a[0..m) with the given unit (metrics_vec.c). */
void metrics_dist_block_stats_soa(const metrics_soa_t *t, size_t i0, size_t m, double iw_low,
                                  double iw_high, struct parity_qsketch *q_dlp,
                                  struct parity_qsketch *q_dp, const metrics_shist_t *h,
                                  const double *a, double unit, metrics_blk_t *out);
void metrics_dist_block_apply(parity_dist_t *d, const metrics_blk_t *b);
/* A token not taken by the blocked path: its ordered part and its sketch part. */
void metrics_dist_token_ordered(parity_dist_t *d, const parity_dist_tok_t *t);
void metrics_dist_token_sketch(struct parity_qsketch *q_dlp, struct parity_qsketch *q_dp,
                               const parity_dist_tok_t *t);
/* A sequence: the compensated sum of log r over its finite pairs (count in *nf), then its entry. */
double metrics_dist_seq_lr(const parity_dist_tok_t *t, size_t n, uint64_t *nf);
void metrics_dist_seq_enter(parity_dist_t *d, size_t n, uint64_t nf, double lrs);
/* One token of parity_metrics_dist_add_topk (top-1 agreement, overlap) / _add_topk_kl (value). */
void metrics_dist_topk_one(parity_dist_t *d, int top1, double overlap);
void metrics_dist_tkl_one(parity_dist_t *d, double v);
/* The accumulator's own sketches (to merge sketches filled elsewhere into it). */
void metrics_dist_sketches(parity_dist_t *d, struct parity_qsketch **q_dlp,
                           struct parity_qsketch **q_dp);

/* Empty the sketch (no allocation). */
void parity_metrics_qs_reset(struct parity_qsketch *q);

#endif

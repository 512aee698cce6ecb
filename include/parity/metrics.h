/* Metrics: error metrics between a candidate and an fp64 reference (max abs, max rel, ULPs,
 * NMSE, RMSE, with explicit non-finite accounting) and distribution metrics for aligned logprob
 * pairs (KL estimators k1/k2/k3, chi-square, importance-ratio statistics, ESS, quantiles, top-k
 * agreement, truncated KL). Every accumulator is streaming and mergeable, with memory bounded
 * independently of n. Definitions, sources and conventions: docs/metrics.md.
 * Deliberately not here: tolerances and verdicts (verify.h), reading dumps (logprob.h). */
#ifndef PARITY_METRICS_H
#define PARITY_METRICS_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/metrics.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Compensated summation (Neumaier), mergeable.                                               */
/* ------------------------------------------------------------------------------------------ */

/* A running sum kept as sum + comp, where comp collects the rounding errors of each addition
 * (Neumaier 1974). Zero-initialise ({0, 0}) to start. Once sum is non-finite the compensation
 * is no longer updated and the value is the IEEE result of the naive sum (inf, or NaN). */
typedef struct {
    double sum;
    double comp;
} parity_csum_t;

void parity_metrics_csum_add(parity_csum_t *s, double x);
/* a += b (the sum of a's terms followed by b's terms). */
void parity_metrics_csum_merge(parity_csum_t *a, const parity_csum_t *b);
double parity_metrics_csum_value(const parity_csum_t *s);
/* s += x[0] + ... + x[n-1] (compensated, in that order up to rounding: the terms may be
 * gathered in a few partial compensated sums that are then merged). NULL s or x: no-op. */
void parity_metrics_csum_add_array(parity_csum_t *s, const double *x, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Error metrics: candidate y against reference r.                                            */
/* ------------------------------------------------------------------------------------------ */

/* ulp of a target format at the reference value r. ctx is the caller's (for example a
 * parity_format_t with a wrapper around parity_format_ulp). Must return a positive finite
 * value for every finite r; anything else makes that pair's ULP error +inf. */
typedef double (*parity_ulp_fn)(const void *ctx, double r);

typedef struct {
    /* ULP error: when ulp_fn is non-NULL it gives ulp(r); otherwise, when prec > 0,
     * ulp(r) = 2^(max(floor(log2|r|), emin) - prec + 1) (prec counts the implicit bit:
     * bf16 8, fp16 11, fp32 24, e4m3 4; emin is the smallest normal exponent: bf16 -126,
     * fp16 -14, e4m3 -6). prec == 0 and ulp_fn == NULL turn the ULP metric off (max_ulp 0). */
    int prec;
    int emin;
    parity_ulp_fn ulp_fn;
    const void *ulp_ctx;
    /* Relative error denominator: max(|r|, rel_floor), rel_floor >= 0. With rel_floor == 0 a
     * pair with r == 0 has relative error 0 when y == 0 and +inf otherwise (never skipped). */
    double rel_floor;
} parity_err_opts_t;

/* ULP metric off, rel_floor 0. */
parity_err_opts_t parity_metrics_err_default_opts(void);

/* Streaming accumulator; caller-owned, fixed size, no allocation. A pair (y, r) falls in
 * exactly one class: finite (both finite: enters every error metric), inf match (both infinite
 * with the same sign: error 0, counted, not in the finite sums) or mismatch (a NaN on either
 * side, an infinity against a finite value or against the opposite infinity). Indices are
 * positions in the stream (the order of add calls, a merged b continuing after a). */
typedef struct {
    parity_err_opts_t opts;
    uint64_t n;              /* pairs seen */
    uint64_t n_finite;       /* both finite */
    uint64_t n_nan_y;        /* y is NaN (whatever r is) */
    uint64_t n_nan_r;        /* r is NaN (whatever y is) */
    uint64_t n_inf_match;    /* both inf, same sign */
    uint64_t n_inf_mismatch; /* no NaN, at least one inf, not an inf match */
    uint64_t first_mismatch; /* index of the first mismatch; UINT64_MAX when none */
    double max_abs;          /* over finite pairs; ties keep the first index */
    uint64_t argmax_abs;
    double max_rel;
    uint64_t argmax_rel;
    double max_ulp;
    uint64_t argmax_ulp;
    parity_csum_t sum_abs;    /* sum |y - r| */
    parity_csum_t sum_sq_err; /* sum (y - r)^2 */
    parity_csum_t sum_sq_ref; /* sum r^2 */
} parity_err_stats_t;

/* opts NULL means parity_metrics_err_default_opts(). Returns PARITY_E_INVALID for st NULL,
 * prec outside 0..113, emin - prec + 1 < -1074 (the ulp would underflow in double), or
 * rel_floor negative or not finite; st is then left zeroed with default opts. */
parity_status_t parity_metrics_err_init(parity_err_stats_t *st, const parity_err_opts_t *opts);
/* Add one pair. st must be initialised (NULL is ignored). */
void parity_metrics_err_add(parity_err_stats_t *st, double y, double r);
/* Add n pairs; PARITY_E_INVALID when st is NULL or (n > 0 and y or r is NULL). */
parity_status_t parity_metrics_err_add_array(parity_err_stats_t *st, const double *y,
                                             const double *r, size_t n);
/* Same with a float candidate (each y[i] converted exactly to double). */
parity_status_t parity_metrics_err_add_array_f32(parity_err_stats_t *st, const float *y,
                                                 const double *r, size_t n);
/* a = a followed by b. Counts and maxima (with their indices) equal a single pass exactly;
 * the compensated sums agree to about one rounding of the final value. PARITY_E_INVALID when
 * a or b is NULL or their opts differ. */
parity_status_t parity_metrics_err_merge(parity_err_stats_t *a, const parity_err_stats_t *b);

typedef struct {
    uint64_t n, n_finite, n_nan_y, n_nan_r, n_inf_match, n_inf_mismatch;
    uint64_t n_mismatch;     /* pairs in the mismatch class (n - n_finite - n_inf_match) */
    uint64_t first_mismatch; /* UINT64_MAX when none */
    double max_abs, max_rel, max_ulp;
    uint64_t argmax_abs, argmax_rel, argmax_ulp; /* UINT64_MAX when no finite pair */
    double mean_abs;         /* sum |y - r| / n_finite */
    double nmse;             /* sum (y-r)^2 / sum r^2; 0/0 -> 0, x/0 -> +inf */
    double rmse;             /* sqrt(sum (y-r)^2 / n_finite) */
} parity_err_result_t;

/* Over zero finite pairs every error value is 0 (the counts say why). */
void parity_metrics_err_result(const parity_err_stats_t *st, parity_err_result_t *out);

/* Per-row errors of a row-major rows x cols matrix with row stride ld >= cols (a GEMM output,
 * an embedding gradient), judged row by row as verify does. Fills per_row[0..rows) when non-NULL;
 * when total is non-NULL it is initialised with opts and receives every element, with indices
 * row * cols + col (stream order). *worst_row (when non-NULL) is the first row with the largest
 * key value, a row with any mismatch ranking above every finite value; SIZE_MAX when rows == 0.
 * PARITY_E_INVALID for NULL y/r with rows*cols > 0, ld < cols, or invalid opts. */
typedef enum {
    PARITY_ERR_KEY_ABS = 0,  /* max_abs */
    PARITY_ERR_KEY_REL = 1,  /* max_rel */
    PARITY_ERR_KEY_ULP = 2,  /* max_ulp */
    PARITY_ERR_KEY_NMSE = 3  /* nmse */
} parity_err_key_t;
parity_status_t parity_metrics_err_rows(const double *y, const double *r, size_t rows, size_t cols,
                                        size_t ld, const parity_err_opts_t *opts,
                                        parity_err_key_t key, parity_err_result_t *per_row,
                                        parity_err_stats_t *total, size_t *worst_row);

/* Single-value helpers (the same definitions the accumulator uses). */
/* 2^(max(floor(log2|r|), emin) - prec + 1); NaN for non-finite r or prec < 1. */
double parity_metrics_ulp(double r, int prec, int emin);
/* |y - r| / max(|r|, rel_floor), with 0/0 -> 0 and x/0 -> +inf. */
double parity_metrics_rel_err(double y, double r, double rel_floor);

/* ctypes-friendly evaluation: one pass over (y, r) with the given prec/emin (prec 0: no ULP)
 * and rel_floor, writing min(out_len, PARITY_METRICS_ERR_NFIELDS) doubles into out, indexed by
 * the enum below (counts and indices as doubles; UINT64_MAX becomes -1). Fields are only ever
 * appended. parity_metrics_err_field_name(i) names field i ("max_abs", ...), NULL past the end. */
enum {
    PARITY_METRICS_ERR_N = 0,
    PARITY_METRICS_ERR_N_FINITE,
    PARITY_METRICS_ERR_N_NAN_Y,
    PARITY_METRICS_ERR_N_NAN_R,
    PARITY_METRICS_ERR_N_INF_MATCH,
    PARITY_METRICS_ERR_N_INF_MISMATCH,
    PARITY_METRICS_ERR_N_MISMATCH,
    PARITY_METRICS_ERR_FIRST_MISMATCH,
    PARITY_METRICS_ERR_MAX_ABS,
    PARITY_METRICS_ERR_ARGMAX_ABS,
    PARITY_METRICS_ERR_MAX_REL,
    PARITY_METRICS_ERR_ARGMAX_REL,
    PARITY_METRICS_ERR_MAX_ULP,
    PARITY_METRICS_ERR_ARGMAX_ULP,
    PARITY_METRICS_ERR_MEAN_ABS,
    PARITY_METRICS_ERR_NMSE,
    PARITY_METRICS_ERR_RMSE,
    PARITY_METRICS_ERR_NFIELDS
};
parity_status_t parity_metrics_err_eval(const double *y, const double *r, size_t n, int prec,
                                        int emin, double rel_floor, double *out, size_t out_len);
const char *parity_metrics_err_field_name(size_t i);

/* ------------------------------------------------------------------------------------------ */
/* Quantile sketch for non-negative values.                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Exact while at most PARITY_QSKETCH_EXACT_MAX values have been added (numpy's default
 * 'linear' rule, Hyndman & Fan type 7); beyond that a fixed histogram of 128 bins per binade
 * over [2^-64, 2^64) plus bins for 0, (0, 2^-64) and [2^64, max]. Every histogram quantile is
 * within relative PARITY_QSKETCH_REL_ERR (2^-8) of the exact type-7 quantile when the order
 * statistics involved are 0 or lie in [2^-64, 2^64); below 2^-64 the error is < 2^-64 absolute.
 * Rank 0 and rank n-1 are always exact (min and max are kept). Memory: about 160 KiB. */
#define PARITY_QSKETCH_EXACT_MAX 4096
#define PARITY_QSKETCH_REL_ERR 0.00390625

typedef struct parity_qsketch parity_qsketch_t;

/* Allocates; free with parity_metrics_qsketch_free. PARITY_E_INVALID for out NULL,
 * PARITY_E_NOMEM. */
parity_status_t parity_metrics_qsketch_new(parity_qsketch_t **out);
void parity_metrics_qsketch_free(parity_qsketch_t *q); /* NULL is a no-op */
/* x must be finite and >= 0 (-0 counts as 0); otherwise PARITY_E_INVALID and x is not added. */
parity_status_t parity_metrics_qsketch_add(parity_qsketch_t *q, double x);
/* a = a followed by b (b unchanged). PARITY_E_INVALID on NULL. */
parity_status_t parity_metrics_qsketch_merge(parity_qsketch_t *a, const parity_qsketch_t *b);
/* The p-quantile, p in [0, 1]. Not const: the exact buffer is sorted lazily. Empty sketch:
 * *out = 0 and PARITY_OK. PARITY_E_INVALID for NULLs or p outside [0, 1] (or NaN). */
parity_status_t parity_metrics_qsketch_quantile(parity_qsketch_t *q, double p, double *out);
uint64_t parity_metrics_qsketch_count(const parity_qsketch_t *q);
/* 1 while the exact path answers (count <= PARITY_QSKETCH_EXACT_MAX), else 0. */
int parity_metrics_qsketch_is_exact(const parity_qsketch_t *q);
/* numpy.quantile(x, p) (method 'linear') of a sorted array, exactly as numpy computes it;
 * 0 for n == 0. */
double parity_metrics_quantile_sorted(const double *sorted, size_t n, double p);

/* ------------------------------------------------------------------------------------------ */
/* Distribution metrics for aligned logprob pairs.                                            */
/* ------------------------------------------------------------------------------------------ */

/* Conventions (docs/metrics.md): for each token, a = logprob under A (e.g. the trainer),
 * b = logprob under B (e.g. the inference server, which sampled the tokens).
 *   delta = b - a,  log r = a - b,  r = p_A / p_B (the importance weight of a B-sample).
 *   k1 = -log r, k2 = (log r)^2 / 2, k3 = (r - 1) - log r: with tokens sampled from B each has
 *   expectation KL(B || A) (k1, k3 unbiased; k2 a second-order approximation), Schulman 2020.
 *   chi2 per token = (r - 1)^2, unbiased for chi^2(A || B) = sum_x (p_A - p_B)^2 / p_B.
 * A pair is finite when both are finite (logprobs > 0 are accepted as rounding noise); both
 * -inf counts as a zero-probability match; one -inf against a finite value is an inf mismatch;
 * NaN or +inf on either side is invalid. Only finite pairs enter the token statistics. */

typedef struct {
    double iw_low;  /* importance weights outside [iw_low, iw_high] are counted; default 0.5 */
    double iw_high; /* default 2 */
} parity_dist_opts_t;

parity_dist_opts_t parity_metrics_dist_default_opts(void);

typedef struct parity_dist parity_dist_t;

/* Allocates (about 330 KiB); free with parity_metrics_dist_free. opts NULL means defaults.
 * PARITY_E_INVALID for out NULL or not 0 <= iw_low <= iw_high (finite); PARITY_E_NOMEM. */
parity_status_t parity_metrics_dist_new(const parity_dist_opts_t *opts, parity_dist_t **out);
void parity_metrics_dist_free(parity_dist_t *d); /* NULL is a no-op */
/* Token statistics only (no sequence boundary). PARITY_E_INVALID for NULLs with n > 0. */
parity_status_t parity_metrics_dist_add_tokens(parity_dist_t *d, const double *lp_a,
                                               const double *lp_b, size_t n);
/* One whole sequence: its tokens enter the token statistics and the sequence enters the
 * per-sequence statistics (see parity_metrics_seq), computed over its finite pairs. A sequence
 * without any finite pair (n == 0 included) is counted as empty and left out of the sequence
 * means; one with some non-finite pair is also counted in n_seq_nonfinite. */
parity_status_t parity_metrics_dist_add_seq(parity_dist_t *d, const double *lp_a,
                                            const double *lp_b, size_t n);
/* Top-k id lists of ntok tokens, row-major (ids_a[t*k + i]); ids < 0 are padding that never
 * match. Top-1 agreement: ids_a[t*k] == ids_b[t*k] (both >= 0). Overlap: the number of distinct
 * non-negative ids of A's list present in B's list, over k. O(k^2) per token. k >= 1. */
parity_status_t parity_metrics_dist_add_topk(parity_dist_t *d, const int32_t *ids_a,
                                             const int32_t *ids_b, size_t ntok, size_t k);
/* Truncated KL over a set S of k ids per token (row-major, lp_a[t*k+i] and lp_b[t*k+i] are
 * the logprobs of the same id under A and B; typically S is B's top-k): see
 * parity_metrics_topk_kl. k >= 1. */
parity_status_t parity_metrics_dist_add_topk_kl(parity_dist_t *d, const double *lp_a,
                                                const double *lp_b, size_t ntok, size_t k);
/* a = a followed by b. PARITY_E_INVALID for NULLs or different opts. */
parity_status_t parity_metrics_dist_merge(parity_dist_t *a, const parity_dist_t *b);

typedef enum {
    PARITY_DIST_ABS_DLOGPROB = 0, /* |b - a| */
    PARITY_DIST_ABS_DPROB = 1     /* |exp(b) - exp(a)| */
} parity_dist_qty_t;

/* The p-quantile of a quantity over finite pairs (exact up to 4096 pairs, else within 2^-8
 * relative; see the quantile sketch). Not const: sorts lazily. */
parity_status_t parity_metrics_dist_quantile(parity_dist_t *d, parity_dist_qty_t which, double p,
                                             double *out);

typedef struct {
    /* tokens */
    uint64_t n_tok, n_finite, n_invalid, n_inf_mismatch, n_zero_match;
    double k1_mean, k2_mean, k3_mean, k3_max;
    double dlogprob_mean;                /* signed mean of delta = b - a (equals k1_mean) */
    double abs_dlogprob_max, abs_dlogprob_mean;
    double abs_dlogprob_p50, abs_dlogprob_p99, abs_dlogprob_p999;
    double abs_dprob_max, abs_dprob_mean;
    double abs_dprob_p50, abs_dprob_p99, abs_dprob_p999;
    double chi2_mean, chi2_max;          /* per token (r - 1)^2 */
    double iw_mean, iw_min, iw_max, iw_std; /* r = exp(a - b); std with ddof 0 */
    double iw_ess;                       /* (sum r)^2 / (n * sum r^2), in (0, 1] */
    double iw_frac_low, iw_frac_high, iw_frac_out; /* r < iw_low, r > iw_high, either */
    double pearson_p;                    /* Pearson r of (exp a, exp b); NaN if a variance is 0 */
    /* sequences (add_seq) */
    uint64_t n_seq, n_seq_empty, n_seq_nonfinite; /* nonfinite: had a non-finite pair */
    double dlogppl_mean, dlogppl_max_abs; /* per seq logppl_B - logppl_A = -mean(delta) */
    double ppl_ratio_mean, ppl_ratio_min, ppl_ratio_max; /* ppl_B / ppl_A = exp(dlogppl) */
    double chi2_seq_mean;                /* (prod r - 1)^2 per sequence */
    /* top-k */
    uint64_t n_topk;
    double top1_agree, topk_overlap_mean;
    uint64_t n_tkl, n_tkl_invalid, n_tkl_inf;
    double tkl_mean, tkl_max;            /* over finite values; tkl_max is +inf if n_tkl_inf */
} parity_dist_summary_t;

/* Means over zero items are 0; Pearson is NaN when undefined. Not const (quantiles). */
parity_status_t parity_metrics_dist_summary(parity_dist_t *d, parity_dist_summary_t *out);

/* Per-token and per-sequence helpers (the definitions the accumulator uses). */
/* k3 = (r - 1) - log r from log r = a - b, accurate for small |log r| (series; a naive
 * expm1(x) - x loses about log2(1/|x|) bits). */
double parity_metrics_k3(double log_r);

typedef struct {
    uint64_t n, n_finite;       /* tokens; finite pairs (only these enter the values) */
    double logppl_a, logppl_b;  /* -mean(a), -mean(b) */
    double dlogppl;             /* logppl_B - logppl_A */
    double ppl_ratio;           /* exp(dlogppl) = ppl_B / ppl_A */
    double log_ratio_sum;       /* sum (a - b) = log prod r */
    double chi2_seq;            /* (exp(log_ratio_sum) - 1)^2 */
    double k1_mean, k3_mean;
} parity_seq_metrics_t;

/* PARITY_E_INVALID for out NULL or NULL arrays with n > 0. */
parity_status_t parity_metrics_seq(const double *lp_a, const double *lp_b, size_t n,
                                   parity_seq_metrics_t *out);
/* KL(B_S || A_S) over the k ids of S plus one tail bucket: with p = exp(lp),
 * t_X = max(0, 1 - sum_S p_X) computed as -expm1(logsumexp(lp_X)),
 *   sum_{i in S} p_B,i (lp_b,i - lp_a,i) + t_B (log t_B - log t_A),
 * with 0 log(0/x) = 0 and x log(x/0) = +inf. A lower bound on the full KL(B || A) (data
 * processing). NaN if any input is NaN or +inf. */
double parity_metrics_topk_kl(const double *lp_a, const double *lp_b, size_t k);
/* |distinct non-negative ids of a found in b| / k; 0 for k == 0. */
double parity_metrics_topk_overlap(const int32_t *ids_a, const int32_t *ids_b, size_t k);

/* Precomputed per-token records. A token that enters several accumulators (the slices of a
 * logprob report: overall, phase, position bucket, modality, ...) has its per-token quantities
 * computed once by parity_metrics_dist_prep and then added to each accumulator with
 * parity_metrics_dist_add_prepped / _add_seq_prepped, which give the same statistics as
 * parity_metrics_dist_add_tokens / _add_seq on the same pairs (those two are implemented this
 * way). Values agree with the single-token definitions above to a few ulps (docs/metrics.md). */
enum {
    PARITY_DIST_PAIR_FINITE = 0,      /* both finite: enters the token statistics */
    PARITY_DIST_PAIR_INVALID = 1,     /* NaN or +inf on either side */
    PARITY_DIST_PAIR_ZERO_MATCH = 2,  /* both -inf */
    PARITY_DIST_PAIR_INF_MISMATCH = 3 /* one -inf against a finite value */
};

typedef struct {
    double lr;    /* log r = a - b (delta = -lr) */
    double k3;    /* parity_metrics_k3(lr) */
    double rm1;   /* r - 1 = expm1(lr) */
    double w;     /* r = exp(lr) */
    double adp;   /* |exp(b) - exp(a)| */
    double pa, pb; /* exp(a), exp(b) */
    uint32_t cls;  /* PARITY_DIST_PAIR_*; the values above are 0 unless FINITE */
    uint32_t fast; /* internal: 1 when finite with |lr| <= 30 and finite pa, pb (blocked path) */
} parity_dist_tok_t;

/* Fill out[0..n) from the pairs (lp_a[i], lp_b[i]). No-op for n == 0; the arrays must not be
 * NULL otherwise. */
void parity_metrics_dist_prep(const double *lp_a, const double *lp_b, size_t n,
                              parity_dist_tok_t *out);
/* Same as parity_metrics_dist_add_tokens / _add_seq on the pairs the records were prepared
 * from. PARITY_E_INVALID for d NULL or t NULL with n > 0. */
parity_status_t parity_metrics_dist_add_prepped(parity_dist_t *d, const parity_dist_tok_t *t,
                                                size_t n);
parity_status_t parity_metrics_dist_add_seq_prepped(parity_dist_t *d, const parity_dist_tok_t *t,
                                                    size_t n);
/* Only the per-sequence statistics of that sequence (n_seq, dlogppl, ppl ratio, chi2_seq...):
 * for a caller whose tokens reach d's token statistics another way (a merge of accumulators
 * that partition them). */
parity_status_t parity_metrics_dist_add_seq_stats(parity_dist_t *d, const parity_dist_tok_t *t,
                                                  size_t n);

/* ctypes-friendly: a fresh accumulator with (iw_low, iw_high) fed with the n pairs, split into
 * nseq sequences of lengths seq_lens (summing to n; seq_lens NULL with nseq 0: tokens only),
 * then, when ntok_topk > 0, the top-k ids (ids_a/ids_b, may be NULL to skip) and top-k logprobs
 * (tk_lp_a/tk_lp_b, may be NULL to skip) of ntok_topk tokens with k each. Writes
 * min(out_len, PARITY_METRICS_DIST_NFIELDS) doubles in the order of
 * parity_metrics_dist_field_name(i) (the summary's fields in order; counts as doubles). */
parity_status_t parity_metrics_dist_eval(const double *lp_a, const double *lp_b, size_t n,
                                         const uint64_t *seq_lens, size_t nseq,
                                         const int32_t *ids_a, const int32_t *ids_b,
                                         const double *tk_lp_a, const double *tk_lp_b,
                                         size_t ntok_topk, size_t k, double iw_low,
                                         double iw_high, double *out, size_t out_len);
#define PARITY_METRICS_DIST_NFIELDS 48
const char *parity_metrics_dist_field_name(size_t i);

#ifdef __cplusplus
}
#endif
#endif

/* The metrics module's interface to the logprob comparison (src/logprob/): the compensated-sum
 * step, the quantile sketch's binning, and the distribution accumulator split into blocks so that
 * a comparison computed in parallel gives the same bits for any number of threads. logprob
 * includes this header, never the module's private src/metrics/metrics_impl.h
 * (tests/cli_layers.sh checks). Not a public header: libparity.so does not export these names. */
#ifndef PARITY_METRICS_INTERNAL_H
#define PARITY_METRICS_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "parity/metrics.h"

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

/* The quantile sketch's layout, shared so that the distribution accumulator can embed its two
 * sketches in one allocation. Histogram bin of a positive x in [2^-64, 2^64): the biased
 * exponent and the top 7 fraction bits of its binary64 encoding, i.e. 128 equal-width bins
 * per binade (docs/metrics.md derives the 2^-8 relative error bound). */
#define QS_BITS 7
#define QS_EXP_LO (1023 - 64) /* biased exponent of 2^-64 */
#define QS_BINADES 128        /* 2^-64 .. 2^64 */
#define QS_NBINS (QS_BINADES << QS_BITS)

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
/* Record i as a parity_dist_tok_t. */
void metrics_soa_get(const metrics_soa_t *s, size_t i, parity_dist_tok_t *t);

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

#endif

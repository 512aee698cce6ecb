/* Distribution metrics for aligned logprob pairs (A = e.g. trainer, B = e.g. the server that
 * sampled the tokens): KL estimators k1/k2/k3 (Schulman 2020), chi-square, importance-ratio
 * statistics with Kish's ESS, |dlogprob| and |dprob| quantiles, Pearson r of probabilities,
 * per-sequence perplexity differences. One streaming, mergeable accumulator with memory
 * independent of n (struct parity_dist, metrics_impl.h): here it is created, fed token by token,
 * block by block and sequence by sequence, and merged. The top-k metrics: metrics_topk.c; the
 * summary, quantiles and the ctypes field table: metrics_dist_summary.c. Not here: reading or
 * aligning dumps. */
#include "src/metrics/metrics_impl.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/metrics.h"

/* Welford's update and Chan, Golub & LeVeque's merge (welford_t, metrics_impl.h). */
static void welford_add(welford_t *w, double x)
{
    w->n += 1.0;
    double d = x - w->mean;
    w->mean += d / w->n;
    w->m2 += d * (x - w->mean);
}

static void welford_merge(welford_t *a, const welford_t *b)
{
    if (b->n == 0) return;
    if (a->n == 0) {
        *a = *b;
        return;
    }
    double n = a->n + b->n, d = b->mean - a->mean;
    a->mean += d * (b->n / n);
    a->m2 += b->m2 + d * d * (a->n * b->n / n);
    a->n = n;
}

/* The same for the co-moment (comoment_t). */
static void comoment_add(comoment_t *c, double x, double y)
{
    c->n += 1.0;
    double dx = x - c->mx, dy = y - c->my;
    c->mx += dx / c->n;
    c->my += dy / c->n;
    c->m2x += dx * (x - c->mx);
    c->m2y += dy * (y - c->my);
    c->cxy += dx * (y - c->my);
}

static void comoment_merge(comoment_t *a, const comoment_t *b)
{
    if (b->n == 0) return;
    if (a->n == 0) {
        *a = *b;
        return;
    }
    double n = a->n + b->n, dx = b->mx - a->mx, dy = b->my - a->my, f = a->n * b->n / n;
    a->mx += dx * (b->n / n);
    a->my += dy * (b->n / n);
    a->m2x += b->m2x + dx * dx * f;
    a->m2y += b->m2y + dy * dy * f;
    a->cxy += b->cxy + dx * dy * f;
    a->n = n;
}

parity_dist_opts_t parity_metrics_dist_default_opts(void)
{
    parity_dist_opts_t o = {0.5, 2.0};
    return o;
}

parity_status_t parity_metrics_dist_new(const parity_dist_opts_t *opts, parity_dist_t **out)
{
    if (!out) return PARITY_E_INVALID;
    *out = NULL;
    parity_dist_opts_t o = opts ? *opts : parity_metrics_dist_default_opts();
    if (!(o.iw_low >= 0.0 && o.iw_low <= o.iw_high) || !isfinite(o.iw_high))
        return PARITY_E_INVALID;
    parity_dist_t *d = calloc(1, sizeof *d);
    if (!d) return PARITY_E_NOMEM;
    d->opts = o;
    /* calloc's memory is zero, which is parity_metrics_qs_reset's state but for the flag: not
     * writing the 2 x 160 KiB again leaves the sketches' untouched bins unmapped (a slice's
     * values fill a few KiB of them; the memset was a page fault per 4 KiB, per slice and
     * thread) */
    d->q_dlp.sorted = d->q_dp.sorted = 1;
    *out = d;
    return PARITY_OK;
}

void parity_metrics_dist_free(parity_dist_t *d) { free(d); }

#define DIST_BLOCK 256

static void upd_max(double *m, double v, uint64_t nprev)
{
    if (nprev == 0 || v > *m) *m = v;
}

/* Through the SIMD records (metrics_vec.c), a block at a time, so that the public path and the
 * comparison of dumps give the same bits. */
void parity_metrics_dist_prep(const double *lp_a, const double *lp_b, size_t n,
                              parity_dist_tok_t *out)
{
    if (!lp_a || !lp_b || !out) return;
    double x[7][DIST_BLOCK];
    uint8_t cls[DIST_BLOCK], fast[DIST_BLOCK];
    metrics_soa_t s = {x[0], x[1], x[2], x[3], x[4], x[5], x[6], cls, fast};
    for (size_t i0 = 0; i0 < n; i0 += DIST_BLOCK) {
        size_t m = n - i0 < DIST_BLOCK ? n - i0 : DIST_BLOCK;
        metrics_prep_soa(lp_a + i0, lp_b + i0, m, &s);
        for (size_t i = 0; i < m; i++) metrics_soa_get(&s, i, &out[i0 + i]);
    }
}

/* dist_token without the quantile sketches (their content does not depend on the order). */
void metrics_dist_token_ordered(parity_dist_t *d, const parity_dist_tok_t *t)
{
    d->n_tok++;
    switch (t->cls) {
    case PAIR_INVALID: d->n_invalid++; return;
    case PAIR_ZERO_MATCH: d->n_zero_match++; return;
    case PAIR_INF_MISMATCH: d->n_inf_mismatch++; return;
    default: break;
    }
    uint64_t nprev = d->n_finite++;
    double lr = t->lr, delta = -lr, k3 = t->k3, rm1 = t->rm1, w = t->w, adp = t->adp;
    double chi2 = rm1 * rm1;
    metrics_csum_add(&d->k1, delta);
    metrics_csum_add(&d->k2, 0.5 * lr * lr);
    metrics_csum_add(&d->k3, k3);
    metrics_csum_add(&d->abs_dlp, fabs(delta));
    metrics_csum_add(&d->abs_dp, adp);
    metrics_csum_add(&d->chi2, chi2);
    upd_max(&d->k3_max, k3, nprev);
    upd_max(&d->abs_dlp_max, fabs(delta), nprev);
    upd_max(&d->abs_dp_max, adp, nprev);
    upd_max(&d->chi2_max, chi2, nprev);
    metrics_csum_add(&d->iw_sum, w);
    metrics_csum_add(&d->iw_sum2, w * w);
    welford_add(&d->iw, w);
    if (nprev == 0 || w < d->iw_min) d->iw_min = w;
    upd_max(&d->iw_max, w, nprev);
    d->iw_n_low += w < d->opts.iw_low;
    d->iw_n_high += w > d->opts.iw_high;
    comoment_add(&d->pearson, t->pa, t->pb);
}

void metrics_dist_token_sketch(struct parity_qsketch *q_dlp, struct parity_qsketch *q_dp,
                               const parity_dist_tok_t *t)
{
    if (t->cls != PAIR_FINITE) return;
    /* The sketches take finite values >= 0 only; an overflowed |delta| (both logprobs finite
     * but ~1e308 apart) cannot be placed and is visible through abs_dlogprob_max = inf. */
    (void)parity_metrics_qsketch_add(q_dlp, fabs(-t->lr));
    (void)parity_metrics_qsketch_add(q_dp, t->adp);
}

/* One token, in stream order, with the non-finite conventions of every accumulator (used for
 * the tokens the blocked path does not take). */
static void dist_token(parity_dist_t *d, const parity_dist_tok_t *t)
{
    metrics_dist_token_ordered(d, t);
    metrics_dist_token_sketch(&d->q_dlp, &d->q_dp, t);
}

void metrics_dist_block_apply(parity_dist_t *d, const metrics_blk_t *b)
{
    uint64_t nprev = d->n_finite;
    double md = (double)b->m;
    d->n_tok += b->m;
    d->n_finite += b->m;
    parity_csum_t *dst[S_N] = {&d->k1, &d->k2, &d->k3, &d->abs_dlp,
                               &d->abs_dp, &d->chi2, &d->iw_sum, &d->iw_sum2};
    for (int k = 0; k < S_N; k++) {
        parity_csum_t x = {b->s[k], b->c[k]};
        metrics_csum_merge(dst[k], &x);
    }
    upd_max(&d->k3_max, b->mk3, nprev);
    upd_max(&d->abs_dlp_max, b->mdl, nprev);
    upd_max(&d->abs_dp_max, b->mdp, nprev);
    upd_max(&d->chi2_max, b->mchi, nprev);
    if (nprev == 0 || b->wmin < d->iw_min) d->iw_min = b->wmin;
    upd_max(&d->iw_max, b->wmax, nprev);
    d->iw_n_low += b->nlo;
    d->iw_n_high += b->nhi;
    welford_t wb = {md, b->mw, b->m2w};
    welford_merge(&d->iw, &wb);
    comoment_t cb = {md, b->mx, b->my, b->m2x, b->m2y, b->cxy};
    comoment_merge(&d->pearson, &cb);
}

/* m >= 1 tokens, all with fast = 1, in one go: compensated partial sums of the block merged
 * into the running ones (parity_metrics_csum_merge semantics), block extrema, and the
 * importance-weight variance and the Pearson co-moments by two passes over the block (mean,
 * then squared deviations; the block is in cache) merged with Chan et al.'s update, the same
 * update parity_metrics_dist_merge uses. Split in two (metrics_impl.h) so that a caller can
 * compute blocks in parallel and apply them in stream order. */
static void dist_block(parity_dist_t *d, const parity_dist_tok_t *t, size_t m)
{
    double x[7][DIST_BLOCK];
    metrics_soa_t s = {x[0], x[1], x[2], x[3], x[4], x[5], x[6], NULL, NULL};
    for (size_t i = 0; i < m; i++) {
        s.lr[i] = t[i].lr;
        s.k3[i] = t[i].k3;
        s.rm1[i] = t[i].rm1;
        s.w[i] = t[i].w;
        s.adp[i] = t[i].adp;
        s.pa[i] = t[i].pa;
        s.pb[i] = t[i].pb;
    }
    metrics_blk_t b;
    metrics_dist_block_stats_soa(&s, 0, m, d->opts.iw_low, d->opts.iw_high, &d->q_dlp, &d->q_dp, NULL, NULL, 0.0, &b);
    metrics_dist_block_apply(d, &b);
}

parity_status_t parity_metrics_dist_add_prepped(parity_dist_t *d, const parity_dist_tok_t *t,
                                                size_t n)
{
    if (!d || (n > 0 && !t)) return PARITY_E_INVALID;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && j - i < DIST_BLOCK && t[j].fast) j++;
        if (j > i) {
            dist_block(d, t + i, j - i);
            i = j;
        } else {
            dist_token(d, &t[i]);
            i++;
        }
    }
    return PARITY_OK;
}

parity_status_t parity_metrics_dist_add_tokens(parity_dist_t *d, const double *lp_a,
                                               const double *lp_b, size_t n)
{
    if (!d || (n > 0 && (!lp_a || !lp_b))) return PARITY_E_INVALID;
    parity_dist_tok_t buf[DIST_BLOCK];
    for (size_t i = 0; i < n; i += DIST_BLOCK) {
        size_t m = n - i < DIST_BLOCK ? n - i : DIST_BLOCK;
        parity_metrics_dist_prep(lp_a + i, lp_b + i, m, buf);
        (void)parity_metrics_dist_add_prepped(d, buf, m);
    }
    return PARITY_OK;
}

parity_status_t parity_metrics_seq(const double *lp_a, const double *lp_b, size_t n,
                                   parity_seq_metrics_t *out)
{
    if (!out || (n > 0 && (!lp_a || !lp_b))) return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    out->n = n;
    out->ppl_ratio = 1.0;
    parity_csum_t sa = {0, 0}, sb = {0, 0}, slr = {0, 0}, sk3 = {0, 0};
    uint64_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        double a = lp_a[i], b = lp_b[i];
        if (metrics_classify(a, b) != PAIR_FINITE) continue;
        nf++;
        metrics_csum_add(&sa, a);
        metrics_csum_add(&sb, b);
        metrics_csum_add(&slr, a - b);
        metrics_csum_add(&sk3, parity_metrics_k3(a - b));
    }
    out->n_finite = nf;
    if (nf == 0) return PARITY_OK;
    double nd = (double)nf, lrs = metrics_csum_value(&slr);
    out->logppl_a = -metrics_csum_value(&sa) / nd;
    out->logppl_b = -metrics_csum_value(&sb) / nd;
    /* logppl_B - logppl_A = mean(a) - mean(b) = mean(log r): taken from the sum of the
     * differences, not the difference of two large means. */
    out->dlogppl = lrs / nd;
    out->ppl_ratio = exp(out->dlogppl);
    out->log_ratio_sum = lrs;
    double e = expm1(lrs); /* prod r - 1 */
    out->chi2_seq = e * e;
    out->k1_mean = -lrs / nd;
    out->k3_mean = metrics_csum_value(&sk3) / nd;
    return PARITY_OK;
}

/* A sequence's entry into the per-sequence statistics, from its token count n, its number of
 * finite pairs nf and the compensated sum lrs of their log r (parity_metrics_seq's values). */
void metrics_dist_seq_enter(parity_dist_t *d, size_t n, uint64_t nf, double lrs)
{
    d->n_seq++;
    if (nf < n) d->n_seq_nonfinite++;
    if (nf == 0) {
        d->n_seq_empty++;
        return;
    }
    double nd = (double)nf, dlogppl = lrs / nd, ppl_ratio = exp(dlogppl);
    double e = expm1(lrs); /* prod r - 1 */
    uint64_t nprev = d->n_seq - d->n_seq_empty - 1; /* sequences already in the means */
    metrics_csum_add(&d->dlogppl, dlogppl);
    metrics_csum_add(&d->ppl_ratio, ppl_ratio);
    metrics_csum_add(&d->chi2_seq, e * e);
    upd_max(&d->dlogppl_max_abs, fabs(dlogppl), nprev);
    upd_max(&d->ppl_ratio_max, ppl_ratio, nprev);
    if (nprev == 0 || ppl_ratio < d->ppl_ratio_min) d->ppl_ratio_min = ppl_ratio;
}

parity_status_t parity_metrics_dist_add_seq(parity_dist_t *d, const double *lp_a,
                                            const double *lp_b, size_t n)
{
    parity_seq_metrics_t s;
    if (!d) return PARITY_E_INVALID;
    parity_status_t st = parity_metrics_seq(lp_a, lp_b, n, &s);
    if (st != PARITY_OK) return st;
    (void)parity_metrics_dist_add_tokens(d, lp_a, lp_b, n);
    metrics_dist_seq_enter(d, n, s.n_finite, s.log_ratio_sum);
    return PARITY_OK;
}

parity_status_t parity_metrics_dist_add_seq_prepped(parity_dist_t *d, const parity_dist_tok_t *t,
                                                    size_t n)
{
    if (!d || (n > 0 && !t)) return PARITY_E_INVALID;
    (void)parity_metrics_dist_add_prepped(d, t, n);
    return parity_metrics_dist_add_seq_stats(d, t, n);
}

parity_status_t parity_metrics_dist_add_seq_stats(parity_dist_t *d, const parity_dist_tok_t *t,
                                                  size_t n)
{
    if (!d || (n > 0 && !t)) return PARITY_E_INVALID;
    uint64_t nf;
    double slr = metrics_dist_seq_lr(t, n, &nf);
    metrics_dist_seq_enter(d, n, nf, slr);
    return PARITY_OK;
}

double metrics_dist_seq_lr(const parity_dist_tok_t *t, size_t n, uint64_t *nf_out)
{
    parity_csum_t slr = {0, 0};
    uint64_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].cls != PAIR_FINITE) continue;
        nf++;
        metrics_csum_add(&slr, t[i].lr);
    }
    *nf_out = nf;
    return metrics_csum_value(&slr);
}

void metrics_dist_sketches(parity_dist_t *d, struct parity_qsketch **q_dlp, struct parity_qsketch **q_dp)
{
    *q_dlp = &d->q_dlp;
    *q_dp = &d->q_dp;
}

static void merge_max(double *a, uint64_t na, double b, uint64_t nb)
{
    if (nb == 0) return;
    if (na == 0 || b > *a) *a = b;
}

static void merge_min(double *a, uint64_t na, double b, uint64_t nb)
{
    if (nb == 0) return;
    if (na == 0 || b < *a) *a = b;
}

parity_status_t parity_metrics_dist_merge(parity_dist_t *a, const parity_dist_t *b)
{
    if (!a || !b || a->opts.iw_low != b->opts.iw_low || a->opts.iw_high != b->opts.iw_high)
        return PARITY_E_INVALID;
    uint64_t na = a->n_finite, nb = b->n_finite;
    a->n_tok += b->n_tok;
    a->n_finite += b->n_finite;
    a->n_invalid += b->n_invalid;
    a->n_inf_mismatch += b->n_inf_mismatch;
    a->n_zero_match += b->n_zero_match;
    metrics_csum_merge(&a->k1, &b->k1);
    metrics_csum_merge(&a->k2, &b->k2);
    metrics_csum_merge(&a->k3, &b->k3);
    metrics_csum_merge(&a->abs_dlp, &b->abs_dlp);
    metrics_csum_merge(&a->abs_dp, &b->abs_dp);
    metrics_csum_merge(&a->chi2, &b->chi2);
    merge_max(&a->k3_max, na, b->k3_max, nb);
    merge_max(&a->abs_dlp_max, na, b->abs_dlp_max, nb);
    merge_max(&a->abs_dp_max, na, b->abs_dp_max, nb);
    merge_max(&a->chi2_max, na, b->chi2_max, nb);
    metrics_csum_merge(&a->iw_sum, &b->iw_sum);
    metrics_csum_merge(&a->iw_sum2, &b->iw_sum2);
    welford_merge(&a->iw, &b->iw);
    merge_min(&a->iw_min, na, b->iw_min, nb);
    merge_max(&a->iw_max, na, b->iw_max, nb);
    a->iw_n_low += b->iw_n_low;
    a->iw_n_high += b->iw_n_high;
    comoment_merge(&a->pearson, &b->pearson);

    uint64_t sa = a->n_seq - a->n_seq_empty, sb = b->n_seq - b->n_seq_empty;
    a->n_seq += b->n_seq;
    a->n_seq_empty += b->n_seq_empty;
    a->n_seq_nonfinite += b->n_seq_nonfinite;
    metrics_csum_merge(&a->dlogppl, &b->dlogppl);
    metrics_csum_merge(&a->ppl_ratio, &b->ppl_ratio);
    metrics_csum_merge(&a->chi2_seq, &b->chi2_seq);
    merge_max(&a->dlogppl_max_abs, sa, b->dlogppl_max_abs, sb);
    merge_max(&a->ppl_ratio_max, sa, b->ppl_ratio_max, sb);
    merge_min(&a->ppl_ratio_min, sa, b->ppl_ratio_min, sb);

    a->n_topk += b->n_topk;
    a->n_top1 += b->n_top1;
    metrics_csum_merge(&a->overlap, &b->overlap);
    merge_max(&a->tkl_max, a->n_tkl + a->n_tkl_inf, b->tkl_max, b->n_tkl + b->n_tkl_inf);
    a->n_tkl += b->n_tkl;
    a->n_tkl_invalid += b->n_tkl_invalid;
    a->n_tkl_inf += b->n_tkl_inf;
    metrics_csum_merge(&a->tkl, &b->tkl);

    (void)parity_metrics_qsketch_merge(&a->q_dlp, &b->q_dlp);
    (void)parity_metrics_qsketch_merge(&a->q_dp, &b->q_dp);
    return PARITY_OK;
}

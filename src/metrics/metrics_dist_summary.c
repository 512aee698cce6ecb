/* Reading the distribution accumulator (metrics_dist.c): its quantiles, its summary (means,
 * maxima, Kish's ESS, Pearson's r, the per-sequence and top-k figures), the field table of the
 * summary for the ctypes interface, and the one-call evaluation of arrays behind it. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/metrics/metrics_impl.h"
#include "parity/metrics.h"

parity_status_t parity_metrics_dist_quantile(parity_dist_t *d, parity_dist_qty_t which, double p,
                                             double *out)
{
    if (!d) return PARITY_E_INVALID;
    switch (which) {
    case PARITY_DIST_ABS_DLOGPROB: return parity_metrics_qsketch_quantile(&d->q_dlp, p, out);
    case PARITY_DIST_ABS_DPROB: return parity_metrics_qsketch_quantile(&d->q_dp, p, out);
    }
    return PARITY_E_INVALID;
}

static double mean_of(const parity_csum_t *s, uint64_t n)
{
    return n ? metrics_csum_value(s) / (double)n : 0.0;
}

parity_status_t parity_metrics_dist_summary(parity_dist_t *d, parity_dist_summary_t *out)
{
    if (!d || !out) return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    uint64_t n = d->n_finite;
    out->n_tok = d->n_tok;
    out->n_finite = n;
    out->n_invalid = d->n_invalid;
    out->n_inf_mismatch = d->n_inf_mismatch;
    out->n_zero_match = d->n_zero_match;
    out->k1_mean = mean_of(&d->k1, n);
    out->k2_mean = mean_of(&d->k2, n);
    out->k3_mean = mean_of(&d->k3, n);
    out->dlogprob_mean = out->k1_mean;
    out->abs_dlogprob_mean = mean_of(&d->abs_dlp, n);
    out->abs_dprob_mean = mean_of(&d->abs_dp, n);
    out->chi2_mean = mean_of(&d->chi2, n);
    out->iw_mean = mean_of(&d->iw_sum, n);
    out->pearson_p = NAN;
    if (n > 0) {
        out->k3_max = d->k3_max;
        out->abs_dlogprob_max = d->abs_dlp_max;
        out->abs_dprob_max = d->abs_dp_max;
        out->chi2_max = d->chi2_max;
        out->iw_min = d->iw_min;
        out->iw_max = d->iw_max;
        out->iw_std = sqrt(d->iw.m2 / d->iw.n);
        /* Kish's effective sample size (sum w)^2 / sum w^2, divided by n: 1 for equal
         * weights, 1/n when one weight dominates. */
        double s1 = metrics_csum_value(&d->iw_sum), s2 = metrics_csum_value(&d->iw_sum2);
        out->iw_ess = s2 > 0.0 ? (s1 / (double)n) * (s1 / s2) : 0.0;
        out->iw_frac_low = (double)d->iw_n_low / (double)n;
        out->iw_frac_high = (double)d->iw_n_high / (double)n;
        out->iw_frac_out = (double)(d->iw_n_low + d->iw_n_high) / (double)n;
        const comoment_t *c = &d->pearson;
        if (c->m2x > 0.0 && c->m2y > 0.0) out->pearson_p = c->cxy / sqrt(c->m2x * c->m2y);
    }
    static const double qs[3] = {0.5, 0.99, 0.999};
    double *qa[3] = {&out->abs_dlogprob_p50, &out->abs_dlogprob_p99, &out->abs_dlogprob_p999};
    double *qb[3] = {&out->abs_dprob_p50, &out->abs_dprob_p99, &out->abs_dprob_p999};
    for (int i = 0; i < 3; i++) {
        (void)parity_metrics_qsketch_quantile(&d->q_dlp, qs[i], qa[i]);
        (void)parity_metrics_qsketch_quantile(&d->q_dp, qs[i], qb[i]);
    }
    uint64_t ns = d->n_seq - d->n_seq_empty;
    out->n_seq = d->n_seq;
    out->n_seq_empty = d->n_seq_empty;
    out->n_seq_nonfinite = d->n_seq_nonfinite;
    out->dlogppl_mean = mean_of(&d->dlogppl, ns);
    out->ppl_ratio_mean = mean_of(&d->ppl_ratio, ns);
    out->chi2_seq_mean = mean_of(&d->chi2_seq, ns);
    if (ns > 0) {
        out->dlogppl_max_abs = d->dlogppl_max_abs;
        out->ppl_ratio_min = d->ppl_ratio_min;
        out->ppl_ratio_max = d->ppl_ratio_max;
    }
    out->n_topk = d->n_topk;
    out->top1_agree = d->n_topk ? (double)d->n_top1 / (double)d->n_topk : 0.0;
    out->topk_overlap_mean = mean_of(&d->overlap, d->n_topk);
    out->n_tkl = d->n_tkl;
    out->n_tkl_invalid = d->n_tkl_invalid;
    out->n_tkl_inf = d->n_tkl_inf;
    out->tkl_mean = mean_of(&d->tkl, d->n_tkl);
    out->tkl_max = (d->n_tkl || d->n_tkl_inf) ? d->tkl_max : 0.0;
    return PARITY_OK;
}

/* Field table for the ctypes interface: names in summary order, each a double or a count. */
#define FD(f) {#f, offsetof(parity_dist_summary_t, f), 0}
#define FU(f) {#f, offsetof(parity_dist_summary_t, f), 1}
static const struct {
    const char *name;
    size_t off;
    int is_count;
} dist_fields[] = {
    FU(n_tok), FU(n_finite), FU(n_invalid), FU(n_inf_mismatch), FU(n_zero_match),
    FD(k1_mean), FD(k2_mean), FD(k3_mean), FD(k3_max), FD(dlogprob_mean),
    FD(abs_dlogprob_max), FD(abs_dlogprob_mean), FD(abs_dlogprob_p50), FD(abs_dlogprob_p99),
    FD(abs_dlogprob_p999), FD(abs_dprob_max), FD(abs_dprob_mean), FD(abs_dprob_p50),
    FD(abs_dprob_p99), FD(abs_dprob_p999), FD(chi2_mean), FD(chi2_max), FD(iw_mean),
    FD(iw_min), FD(iw_max), FD(iw_std), FD(iw_ess), FD(iw_frac_low), FD(iw_frac_high),
    FD(iw_frac_out), FD(pearson_p), FU(n_seq), FU(n_seq_empty), FU(n_seq_nonfinite),
    FD(dlogppl_mean), FD(dlogppl_max_abs), FD(ppl_ratio_mean), FD(ppl_ratio_min),
    FD(ppl_ratio_max), FD(chi2_seq_mean), FU(n_topk), FD(top1_agree), FD(topk_overlap_mean),
    FU(n_tkl), FU(n_tkl_invalid), FU(n_tkl_inf), FD(tkl_mean), FD(tkl_max),
};
_Static_assert(sizeof dist_fields / sizeof dist_fields[0] == PARITY_METRICS_DIST_NFIELDS,
               "one entry per summary field");

const char *parity_metrics_dist_field_name(size_t i)
{
    return i < PARITY_METRICS_DIST_NFIELDS ? dist_fields[i].name : NULL;
}

parity_status_t parity_metrics_dist_eval(const double *lp_a, const double *lp_b, size_t n,
                                         const uint64_t *seq_lens, size_t nseq,
                                         const int32_t *ids_a, const int32_t *ids_b,
                                         const double *tk_lp_a, const double *tk_lp_b,
                                         size_t ntok_topk, size_t k, double iw_low,
                                         double iw_high, double *out, size_t out_len)
{
    if ((out_len > 0 && !out) || (n > 0 && (!lp_a || !lp_b)) || (nseq > 0 && !seq_lens))
        return PARITY_E_INVALID;
    if (nseq > 0) {
        uint64_t tot = 0;
        for (size_t s = 0; s < nseq; s++) {
            if (seq_lens[s] > n - tot) return PARITY_E_INVALID;
            tot += seq_lens[s];
        }
        if (tot != n) return PARITY_E_INVALID;
    }
    if (ntok_topk > 0 && k == 0) return PARITY_E_INVALID;
    parity_dist_opts_t o = {iw_low, iw_high};
    parity_dist_t *d;
    parity_status_t st = parity_metrics_dist_new(&o, &d);
    if (st != PARITY_OK) return st;
    if (nseq > 0) {
        size_t off = 0;
        for (size_t s = 0; s < nseq; s++) {
            (void)parity_metrics_dist_add_seq(d, lp_a + off, lp_b + off, (size_t)seq_lens[s]);
            off += (size_t)seq_lens[s];
        }
    } else {
        (void)parity_metrics_dist_add_tokens(d, lp_a, lp_b, n);
    }
    if (ntok_topk > 0 && ids_a && ids_b) (void)parity_metrics_dist_add_topk(d, ids_a, ids_b, ntok_topk, k);
    if (ntok_topk > 0 && tk_lp_a && tk_lp_b)
        (void)parity_metrics_dist_add_topk_kl(d, tk_lp_a, tk_lp_b, ntok_topk, k);
    parity_dist_summary_t sum;
    (void)parity_metrics_dist_summary(d, &sum);
    parity_metrics_dist_free(d);
    size_t m = out_len < PARITY_METRICS_DIST_NFIELDS ? out_len : PARITY_METRICS_DIST_NFIELDS;
    for (size_t i = 0; i < m; i++) {
        const char *p = (const char *)&sum + dist_fields[i].off;
        if (dist_fields[i].is_count) {
            uint64_t u;
            memcpy(&u, p, sizeof u);
            out[i] = (double)u;
        } else {
            memcpy(&out[i], p, sizeof out[i]);
        }
    }
    return PARITY_OK;
}

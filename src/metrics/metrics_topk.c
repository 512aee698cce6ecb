/* The top-k metrics of aligned logprob pairs: the overlap of two top-k id lists, top-1
 * agreement, and the truncated KL over the ids both lists hold (with a tail bucket), per token
 * and into the distribution accumulator (metrics_dist.c). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/metrics/metrics_impl.h"
#include "parity/metrics.h"

double parity_metrics_topk_overlap(const int32_t *ids_a, const int32_t *ids_b, size_t k)
{
    if (k == 0 || !ids_a || !ids_b) return 0.0;
    size_t cnt = 0;
    for (size_t i = 0; i < k; i++) {
        int32_t id = ids_a[i];
        if (id < 0) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = ids_a[j] == id;
        if (seen) continue;
        for (size_t j = 0; j < k; j++) {
            if (ids_b[j] == id) {
                cnt++;
                break;
            }
        }
    }
    return (double)cnt / (double)k;
}

parity_status_t parity_metrics_dist_add_topk(parity_dist_t *d, const int32_t *ids_a,
                                             const int32_t *ids_b, size_t ntok, size_t k)
{
    if (!d || k == 0 || (ntok > 0 && (!ids_a || !ids_b))) return PARITY_E_INVALID;
    for (size_t t = 0; t < ntok; t++) {
        const int32_t *a = ids_a + t * k, *b = ids_b + t * k;
        metrics_dist_topk_one(d, a[0] >= 0 && a[0] == b[0], parity_metrics_topk_overlap(a, b, k));
    }
    return PARITY_OK;
}

void metrics_dist_topk_one(parity_dist_t *d, int top1, double overlap)
{
    d->n_topk++;
    d->n_top1 += top1 != 0;
    metrics_csum_add(&d->overlap, overlap);
}

void metrics_dist_tkl_one(parity_dist_t *d, double v)
{
    if (isnan(v)) {
        d->n_tkl_invalid++;
        return;
    }
    if (isinf(v)) {
        d->n_tkl_inf++;
        d->tkl_max = INFINITY;
        return;
    }
    if (d->n_tkl == 0 && d->n_tkl_inf == 0)
        d->tkl_max = v;
    else if (v > d->tkl_max)
        d->tkl_max = v;
    d->n_tkl++;
    metrics_csum_add(&d->tkl, v);
}

/* log sum exp(x_i) as m + log1p(sum_{i != argmax} e^(x_i - m)): the log1p keeps the tail mass
 * -expm1(lse) accurate when one id holds almost all of the probability (lse near 0). */
static double logsumexp(const double *x, size_t k)
{
    size_t im = 0;
    for (size_t i = 1; i < k; i++)
        if (x[i] > x[im]) im = i;
    double m = x[im];
    if (m == -INFINITY) return -INFINITY;
    parity_csum_t s = {0, 0};
    for (size_t i = 0; i < k; i++)
        if (i != im) metrics_csum_add(&s, exp(x[i] - m));
    return m + log1p(metrics_csum_value(&s));
}

/* Truncated KL(B_S || A_S): both distributions coarsened to the k ids of S and one tail
 * bucket holding the rest of the vocabulary. The tail mass 1 - sum_S p is -expm1(lse), which
 * has no cancellation; a mass that sums past 1 by rounding (lse > 0) is a tail of 0. By the
 * data-processing inequality (coarsening is a Markov map) the result is <= KL(B || A). */
double parity_metrics_topk_kl(const double *lp_a, const double *lp_b, size_t k)
{
    if (k == 0) return 0.0;
    if (!lp_a || !lp_b) return NAN;
    for (size_t i = 0; i < k; i++)
        if (isnan(lp_a[i]) || isnan(lp_b[i]) || lp_a[i] == INFINITY || lp_b[i] == INFINITY)
            return NAN;
    double la = logsumexp(lp_a, k), lb = logsumexp(lp_b, k);
    double ta = la >= 0.0 ? 0.0 : -expm1(la), tb = lb >= 0.0 ? 0.0 : -expm1(lb);
    parity_csum_t s = {0, 0};
    for (size_t i = 0; i < k; i++) {
        if (lp_b[i] == -INFINITY) continue; /* 0 log(0 / x) = 0 */
        if (lp_a[i] == -INFINITY) return INFINITY;
        metrics_csum_add(&s, exp(lp_b[i]) * (lp_b[i] - lp_a[i]));
    }
    if (tb > 0.0) {
        if (ta == 0.0) return INFINITY;
        metrics_csum_add(&s, tb * (log(tb) - log(ta)));
    }
    return metrics_csum_value(&s);
}

parity_status_t parity_metrics_dist_add_topk_kl(parity_dist_t *d, const double *lp_a,
                                                const double *lp_b, size_t ntok, size_t k)
{
    if (!d || k == 0 || (ntok > 0 && (!lp_a || !lp_b))) return PARITY_E_INVALID;
    for (size_t t = 0; t < ntok; t++) metrics_dist_tkl_one(d, parity_metrics_topk_kl(lp_a + t * k, lp_b + t * k, k));
    return PARITY_OK;
}

/* The per-token record of an aligned pair of logprobs (parity_dist_tok_t) by the scalar (libm)
 * definitions: log r, the probabilities, r - 1, r, k3 without cancellation, |dprob|. The
 * SIMD records (metrics_vec.c) compute the same for fast pairs four at a time and call this
 * unit for the others; the accumulator (metrics_dist.c) and the comparison of dumps read the
 * records through metrics_soa_get. A unit of its own so that metrics_vec.c and metrics_dist.c
 * do not call each other. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/metrics/metrics_impl.h"
#include "parity/metrics.h"

/* k3 = (r - 1) - log r = e^x - 1 - x with x = log r. Near x = 0 the naive expm1(x) - x loses
 * about log2(2/|x|) bits to cancellation (1e-13 relative at x = 1e-3, 1e-8 at x = 1e-8), and
 * logprob differences between two faithful implementations are exactly that small. So for
 * |x| <= 1/2 we sum the Taylor series sum_{n>=2} x^n / n! by Horner, with as many terms as |x|
 * needs: the first omitted term x^(N+1)/(N+1)! relative to the leading x^2/2 is
 * 2 |x|^(N-1) / (N+1)!, which is
 *   N = 8  for |x| <= 2^-7:  2 * 2^-49 / 9!  < 2^-66,
 *   N = 11 for |x| <= 2^-4:  2 * 2^-40 / 12! < 2^-67,
 *   N = 17 for |x| <= 1/2:   2 * 2^-16 / 18! < 2^-67,
 * and the terms shrink by at least |x|/3 <= 1/6 each, so the rounding error stays a few ulps.
 * (Typical logprob differences are ~1e-3: 7 coefficients instead of 16, the cost of k3 in a
 * report.) Beyond 1/2 the cancellation costs at most about 2.2 bits (at x = -1/2:
 * 0.5 - 0.393 = 0.107). */

/* x^2 (1/2 + x/6 + ... + x^(N-2)/N!) with the first nc coefficients (N = nc + 1). */
static inline double k3_series(double x, int nc)
{
    double s = metrics_inv_fact2[nc - 1];
    for (int i = nc - 2; i >= 0; i--) s = fma(x, s, metrics_inv_fact2[i]); /* as metrics_vec.c */
    return x * x * s;
}

/* k3 from x = log r and rm1 = expm1(x) (the caller has it), x finite. */
static inline double k3_of(double x, double rm1)
{
    double ax = fabs(x);
    if (ax <= 0x1p-7) return k3_series(x, 7);
    if (ax <= 0x1p-4) return k3_series(x, 10);
    if (ax <= 0.5) return k3_series(x, 16);
    return rm1 - x;
}

double parity_metrics_k3(double x)
{
    if (isnan(x)) return x;
    if (x == -INFINITY) return INFINITY;
    if (fabs(x) <= 0.5) return k3_of(x, 0.0);
    return expm1(x) - x;
}

/* One pair's per-token quantities. The blocked path (fast = 1: finite pair, |log r| <= 30,
 * finite probabilities) derives r from expm1 when |log r| < 1/2 (1 + expm1(x) is within about
 * 1.5 ulp of exp(x) there, since the result is >= 0.6) and |p_B - p_A| from
 * -expm1(-x) = expm1(x) / e^x, saving three exponentials per token. Everything else takes the
 * single-token definitions verbatim. */
static void prep_one(double a, double b, parity_dist_tok_t *t)
{
    memset(t, 0, sizeof *t);
    t->cls = (uint32_t)metrics_classify(a, b);
    if (t->cls != PAIR_FINITE) return;
    double lr = a - b; /* log r; exact when a and b are within a factor 2 (Sterbenz) */
    t->lr = lr;
    t->pa = exp(a);
    t->pb = exp(b);
    if (fabs(lr) <= 30.0 && isfinite(t->pa) && isfinite(t->pb)) {
        double rm1 = expm1(lr); /* r - 1 without cancellation */
        double w = fabs(lr) < 0.5 ? 1.0 + rm1 : exp(lr);
        t->rm1 = rm1;
        t->w = w;
        t->k3 = k3_of(lr, rm1);
        /* |p_B - p_A| = e^max |expm1(min - max)|: for a > b that is p_A (1 - e^-x) = p_A rm1 / r,
         * for a <= b it is p_B (-expm1(x)) exactly as below. */
        t->adp = lr > 0.0 ? t->pa * (rm1 / w) : t->pb * -rm1;
        t->fast = 1;
        return;
    }
    t->k3 = parity_metrics_k3(lr);
    t->rm1 = expm1(lr);
    t->w = exp(lr);
    /* |p_B - p_A| = e^max |expm1(min - max)|: no cancellation, no overflow. */
    double hi = a > b ? a : b, lo = a > b ? b : a;
    t->adp = exp(hi) * -expm1(lo - hi);
}

void metrics_prep_slow(double a, double b, const metrics_soa_t *o, size_t i)
{
    parity_dist_tok_t t;
    prep_one(a, b, &t);
    t.fast = 0; /* the blocked path takes only what metrics_prep_soa computed */
    o->lr[i] = t.lr;
    o->k3[i] = t.k3;
    o->rm1[i] = t.rm1;
    o->w[i] = t.w;
    o->adp[i] = t.adp;
    o->pa[i] = t.pa;
    o->pb[i] = t.pb;
    o->cls[i] = (uint8_t)t.cls;
    o->fast[i] = 0;
}

void metrics_soa_get(const metrics_soa_t *s, size_t i, parity_dist_tok_t *t)
{
    t->lr = s->lr[i];
    t->k3 = s->k3[i];
    t->rm1 = s->rm1[i];
    t->w = s->w[i];
    t->adp = s->adp[i];
    t->pa = s->pa[i];
    t->pb = s->pb[i];
    t->cls = s->cls[i];
    t->fast = s->fast[i];
}

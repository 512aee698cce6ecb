/* Quantiles of non-negative values over a stream with fixed memory: exact (numpy's 'linear'
 * rule) while at most PARITY_QSKETCH_EXACT_MAX values were seen, then a log-scale histogram
 * with a proven 2^-8 relative error bound. Mergeable. Not here: signed values, weights. */
#include "src/metrics/metrics_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/metrics.h"

void parity_metrics_qs_reset(struct parity_qsketch *q)
{
    memset(q, 0, sizeof *q);
    q->sorted = 1;
}

parity_status_t parity_metrics_qsketch_new(parity_qsketch_t **out)
{
    if (!out) return PARITY_E_INVALID;
    *out = malloc(sizeof **out);
    if (!*out) return PARITY_E_NOMEM;
    parity_metrics_qs_reset(*out);
    return PARITY_OK;
}

void parity_metrics_qsketch_free(parity_qsketch_t *q) { free(q); }

static double bitsd(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Lower edge of bin i; qs_edge(i + 1) is its upper edge (for the last bin that is 2^64). */
static double qs_edge(size_t i)
{
    uint64_t e = (uint64_t)(i >> QS_BITS) + QS_EXP_LO;
    uint64_t m = (uint64_t)(i & ((1u << QS_BITS) - 1));
    return bitsd((e << 52) | (m << (52 - QS_BITS)));
}

parity_status_t parity_metrics_qsketch_add(parity_qsketch_t *q, double x)
{
    if (!q || !(x >= 0.0) || !isfinite(x)) return PARITY_E_INVALID;
    metrics_qs_add(q, x);
    return PARITY_OK;
}

/* The bins that can be non-zero: those of [min, max] (values outside the binned range have
 * their own counters). Loops over the bins stop there, so that the untouched pages of a sketch
 * (most of its 128 KiB) are never mapped. */
static void qs_bin_range(const parity_qsketch_t *q, size_t *lo, size_t *hi)
{
    *lo = 0;
    *hi = 0;
    if (q->n == 0) return;
    double mn = q->min < 0x1p-64 ? 0x1p-64 : q->min, mx = q->max >= 0x1p64 ? 0x1.fffffffffffffp63 : q->max;
    if (!(mx >= mn)) return;
    uint64_t u, v;
    memcpy(&u, &mn, sizeof u);
    memcpy(&v, &mx, sizeof v);
    *lo = (size_t)((u >> (52 - QS_BITS)) - ((uint64_t)QS_EXP_LO << QS_BITS));
    *hi = (size_t)((v >> (52 - QS_BITS)) - ((uint64_t)QS_EXP_LO << QS_BITS)) + 1;
}

void metrics_shist_fold(struct parity_qsketch *q, const metrics_shist_t *h)
{
    size_t lo, hi;
    qs_bin_range(q, &lo, &hi);
    uint64_t *pos = h->sb, *neg = h->sb + QS_NBINS;
    for (size_t i = lo; i < hi; i++) {
        if (!(pos[i] | neg[i])) continue;
        q->bins[i] += pos[i] + neg[i];
        h->cnt[h->map[i]] += pos[i];
        h->cnt[h->nb + h->map[i]] += neg[i];
        pos[i] = neg[i] = 0;
    }
}

parity_status_t parity_metrics_qsketch_merge(parity_qsketch_t *a, const parity_qsketch_t *b)
{
    if (!a || !b) return PARITY_E_INVALID;
    if (b->n == 0) return PARITY_OK;
    if (a->n == 0 || b->min < a->min) a->min = b->min;
    if (a->n == 0 || b->max > a->max) a->max = b->max;
    /* Exact buffers concatenate while the union still fits; otherwise a stops being exact
     * (n_exact < n from then on), exactly as a single pass would. */
    if (a->n_exact == a->n && b->n_exact == b->n && a->n + b->n <= PARITY_QSKETCH_EXACT_MAX) {
        memcpy(a->exact + a->n_exact, b->exact, b->n_exact * sizeof b->exact[0]);
        a->n_exact += b->n_exact;
        a->sorted = 0;
    }
    a->n += b->n;
    a->n_zero += b->n_zero;
    a->n_under += b->n_under;
    a->n_over += b->n_over;
    size_t lo, hi;
    qs_bin_range(b, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->bins[i] += b->bins[i];
    return PARITY_OK;
}

uint64_t parity_metrics_qsketch_count(const parity_qsketch_t *q) { return q ? q->n : 0; }

int parity_metrics_qsketch_is_exact(const parity_qsketch_t *q)
{
    return q && q->n_exact == q->n;
}

/* numpy 1.24 np.quantile(method='linear'), Hyndman & Fan (1996) type 7: virtual index
 * h = (n - 1) p, j = floor(h), g = h - j, and numpy's _lerp, which evaluates
 * a + (b - a) g for g < 0.5 and b - (b - a)(1 - g) for g >= 0.5 (so that g = 1 gives b exactly);
 * indices at or past n - 1 give the last value. We copy the rounding steps to agree bit for
 * bit, not only to 1e-12. */
static double lerp_np(double a, double b, double g)
{
    double d = b - a;
    return g >= 0.5 ? b - d * (1.0 - g) : a + d * g;
}

double parity_metrics_quantile_sorted(const double *x, size_t n, double p)
{
    if (n == 0 || !x) return 0.0;
    double h = (double)(n - 1) * p;
    if (h >= (double)(n - 1)) return x[n - 1];
    if (h <= 0.0) return x[0];
    double jf = floor(h);
    size_t j = (size_t)jf;
    return lerp_np(x[j], x[j + 1], h - jf);
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* The value standing for the order statistic of 0-based rank k in the histogram: its bin's
 * midpoint (within half a bin width, i.e. 2^-8 relative, of every value in the bin), clamped
 * to [min, max] (which only moves it closer to values that are known to lie in that range).
 * Ranks 0 and n-1 are min and max exactly. */
static double qs_rank_value(const parity_qsketch_t *q, uint64_t k)
{
    if (k == 0) return q->min;
    if (k + 1 >= q->n) return q->max;
    double v;
    if (k < q->n_zero) return 0.0;
    k -= q->n_zero;
    if (k < q->n_under) {
        v = 0x1p-65; /* values in (0, 2^-64): absolute error < 2^-65 */
    } else {
        k -= q->n_under;
        v = q->max; /* the overflow bin [2^64, max] is represented by max */
        size_t lo, hi;
        qs_bin_range(q, &lo, &hi);
        for (size_t i = lo; i < hi; i++) {
            if (k < q->bins[i]) {
                v = 0.5 * (qs_edge(i) + qs_edge(i + 1));
                break;
            }
            k -= q->bins[i];
        }
    }
    if (v < q->min) v = q->min;
    if (v > q->max) v = q->max;
    return v;
}

parity_status_t parity_metrics_qsketch_quantile(parity_qsketch_t *q, double p, double *out)
{
    if (!q || !out || !(p >= 0.0 && p <= 1.0)) return PARITY_E_INVALID;
    *out = 0.0;
    if (q->n == 0) return PARITY_OK;
    if (q->n_exact == q->n) {
        if (!q->sorted) {
            qsort(q->exact, q->n_exact, sizeof q->exact[0], cmp_double);
            q->sorted = 1;
        }
        *out = parity_metrics_quantile_sorted(q->exact, q->n_exact, p);
        return PARITY_OK;
    }
    /* Same interpolation as the exact path, on the ranks' representatives. With true order
     * statistics a <= b and representatives a', b' within 2^-8 relative of them, the estimate
     * (1-g) a' + g b' differs from (1-g) a + g b by at most 2^-8 ((1-g) a + g b): the bound
     * carries over to the interpolated quantile (plus the lerp's own few roundings). */
    double h = (double)(q->n - 1) * p;
    if (h >= (double)(q->n - 1)) {
        *out = q->max;
        return PARITY_OK;
    }
    double jf = floor(h);
    uint64_t j = (uint64_t)jf;
    *out = lerp_np(qs_rank_value(q, j), qs_rank_value(q, j + 1), h - jf);
    return PARITY_OK;
}

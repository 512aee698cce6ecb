/* parity_format_sum's results, fast: the sums behind every op family's diagnosis emulation
 * (src/format/format_fast.h says why and how). */
#include "src/format/format_fast.h"

#include <stdlib.h>

/* The sum of x[0..n) with parity_format_sum's orders: sequential, or PARITY_SUM_PAIRWISE
 * (halves of n/2, leaves fl(0 + x)). */
static double fast_pair(const parity_fastfmt_t *F, const double *x, int64_t n)
{
    if (n == 0) return 0;
    if (n == 1) return parity_fast_add(F, 0, x[0]);
    int64_t h = n / 2;
    double l = fast_pair(F, x, h);
    return parity_fast_add(F, l, fast_pair(F, x + h, n - h));
}

double parity_format_sum_fast(const parity_format_t *f, const double *x, int64_t n,
                            parity_sum_order_t order)
{
    parity_fastfmt_t F = parity_fastfmt(f);
    if (order == PARITY_SUM_PAIRWISE) return fast_pair(&F, x, n);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc = parity_fast_add(&F, acc, x[i]);
    return acc;
}

/* n sums side by side: out[c] = parity_format_sum_fast of column c of x (k, n) row-major, the
 * same results, with the n independent chains overlapped (for the ops whose emulation sums
 * many channels over the same terms: attention's P·V, ops/attention/attention.c). */
static void pair_cols_x(const parity_fastfmt_t *F, const double *x, int64_t k0, int64_t len, int64_t n,
                        double *out, double *scratch)
{
    if (len == 1) {
        for (int64_t c = 0; c < n; c++) out[c] = parity_fast_add(F, 0, x[k0 * n + c]);
        return;
    }
    int64_t h = len / 2;
    double *right = scratch;
    pair_cols_x(F, x, k0, h, n, out, scratch + n);
    pair_cols_x(F, x, k0 + h, len - h, n, right, scratch + n);
    for (int64_t c = 0; c < n; c++) out[c] = parity_fast_add(F, out[c], right[c]);
}

parity_status_t parity_format_sum_fast_cols(const parity_format_t *f, const double *x, int64_t k,
                                          int64_t n, parity_sum_order_t order, double *out)
{
    parity_fastfmt_t F = parity_fastfmt(f);
    if (order != PARITY_SUM_PAIRWISE || k == 0) {
        for (int64_t c = 0; c < n; c++) out[c] = 0;
        for (int64_t t = 0; t < k; t++)
            for (int64_t c = 0; c < n; c++) out[c] = parity_fast_add(&F, out[c], x[t * n + c]);
        return PARITY_OK;
    }
    int levels = 2; /* recursion depth ceil(log2 k) + 1, one scratch row of n per level */
    while (((int64_t)1 << (levels - 2)) < k) levels++;
    double *scratch = malloc((size_t)levels * (size_t)(n > 0 ? n : 1) * sizeof *scratch);
    if (!scratch) return PARITY_E_NOMEM;
    pair_cols_x(&F, x, 0, k, n, out, scratch);
    free(scratch);
    return PARITY_OK;
}


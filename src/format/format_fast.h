/* Internal: parity_format_sum's results, fast (src/format/format_fast.c). parity_format_sum
 * rounds every addition through the general encoder (about 60-110 ns an addition on this machine),
 * which for the diagnosis rows of a long reduction (64 rows x N x K x 6 emulations, hundreds of
 * millions of additions) would take minutes. parity_fast_add gives the same results
 * (tests/test_gemm.c and tests/test_diagnosis.c check it against parity_format_sum) for
 * round-to-nearest-even in the normal range and falls back to parity_format_add everywhere else.
 * The emulations of every op family (ops/<family>/) use it. */
#ifndef PARITY_FORMAT_FAST_H
#define PARITY_FORMAT_FAST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parity/format.h"
#include "parity/status.h"

typedef struct {
    const parity_format_t *f;
    parity_round_opts_t o;
    int shift; /* 53 - precision: the double bits the format drops */
} parity_fastfmt_t;

static inline double parity_fast_add(const parity_fastfmt_t *F, double a, double b)
{
    double s = a + b;
    double as = fabs(s);
    if (!(as >= F->f->min_normal) || !(as < F->f->max_finite))
        return parity_format_add(F->f, a, b, &F->o, NULL);
    /* 2Sum: s + e == a + b exactly. Rounding s to p bits gives the correctly rounded a + b except
     * when s is a midpoint of the p-bit grid (a midpoint is a double, so s + e cannot cross one
     * unless s is on it); then e's sign decides, and e == 0 is a true tie (to even). */
    double bp = s - a, ap = s - bp, e = (a - ap) + (b - bp);
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    uint64_t mask = (1ull << F->shift) - 1, half = 1ull << (F->shift - 1), low = u & mask;
    uint64_t hi = u & ~mask;
    uint64_t tie_up = e != 0 ? (uint64_t)((e > 0) == (s > 0)) : (hi >> F->shift) & 1u;
    uint64_t up = (uint64_t)(low > half) | ((uint64_t)(low == half) & tie_up);
    hi += up << F->shift; /* a carry moves into the exponent: the next binade */
    double r;
    memcpy(&r, &hi, sizeof r);
    if (!(fabs(r) <= F->f->max_finite)) return parity_format_add(F->f, a, b, &F->o, NULL);
    return r;
}

static inline parity_fastfmt_t parity_fastfmt(const parity_format_t *f)
{
    parity_fastfmt_t F = {f, parity_format_default_opts(f), 53 - (f->mant_bits + 1)};
    F.o.rounding = PARITY_ROUND_NEAREST_EVEN;
    return F;
}

/* The sum of x[0..n) in format f with parity_format_sum's orders: sequential, or
 * PARITY_SUM_PAIRWISE (halves of n/2, leaves fl(0 + x)). */
double parity_format_sum_fast(const parity_format_t *f, const double *x, int64_t n, parity_sum_order_t order);
/* n sums side by side: out[c] = parity_format_sum_fast of column c of x (k, n) row-major. */
parity_status_t parity_format_sum_fast_cols(const parity_format_t *f, const double *x, int64_t k,
                                            int64_t n, parity_sum_order_t order, double *out);

#endif

/* The comparison helpers of the metrics tests (test_metrics.c, test_metrics_dist.c): a value
 * within a relative tolerance of the one worked out by hand (or the same non-finite value), the
 * line, the expression and the seed in the failure message. Include after <cmocka.h>. */
#ifndef PARITY_TEST_METRICS_CLOSE_H
#define PARITY_TEST_METRICS_CLOSE_H

#include <math.h>

#define SEED 20240601u

/* |got - want| <= rel * |want| (or both the same non-finite value). */
static void close_(double got, double want, double rel, const char *what, int line)
{
    int ok;
    if (isnan(want))
        ok = isnan(got);
    else if (isinf(want))
        ok = got == want;
    else
        ok = fabs(got - want) <= rel * fabs(want);
    if (!ok) fail_msg("line %d: %s: got %.17g want %.17g (rel tol %g, seed %u)", line, what, got, want, rel, SEED);
}
#define CLOSE(got, want, rel) close_((got), (want), (rel), #got, __LINE__)
#define EXACT(got, want) close_((got), (want), 0.0, #got, __LINE__)

#endif

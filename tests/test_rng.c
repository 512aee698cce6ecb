/* rng: reproducibility, stream independence and the moments of the generated distributions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/rng.h"
#include "parity/workload.h"

/* The generated normals (src/op/workload.c: the ziggurat, its state in registers, a fast path and a
 * slow one) against the method one draw at a time as the paper describes it (Marsaglia and Tsang
 * 2000: 256 strips of area v, x_1 = r), its tables built here from the published constants, on
 * the same per-row stream, bit for bit: rows of every length from 1 to 70 and of 2049, plain and
 * gradient-scale (a magnitude drawn first), and enough rows that the tail and the wedge (with its
 * rejections) are taken. The stream of row i is ((100 + stream) << 40) ^ i, as documented there. */
#define ZR 3.6541528853610088
#define ZV 0.00492867323399
static double zx[257], zf[257];
static long slow_tail, slow_wedge, wedge_rejected;

static void tables(void)
{
    zx[0] = ZV / exp(-0.5 * ZR * ZR);
    zx[1] = ZR;
    zf[0] = 0;
    zf[1] = exp(-0.5 * ZR * ZR);
    for (int i = 2; i < 256; i++) {
        zx[i] = sqrt(-2.0 * log(ZV / zx[i - 1] + zf[i - 1]));
        zf[i] = exp(-0.5 * zx[i] * zx[i]);
    }
    zx[256] = 0;
    zf[256] = 1;
}

static double zig_one(parity_rng_t *r)
{
    for (;;) {
        uint64_t u = parity_rng_u64(r);
        int i = (int)(u & 255);
        double s = (u >> 8) & 1 ? -1.0 : 1.0;
        double x = (double)(u >> 11) * 0x1.0p-53 * zx[i];
        if (x < zx[i + 1]) return s * x;
        if (i == 0) {
            slow_tail++;
            double a, b;
            do {
                a = -log(1.0 - parity_rng_uniform(r)) / ZR;
                b = -log(1.0 - parity_rng_uniform(r));
            } while (2.0 * b < a * a);
            return s * (ZR + a);
        }
        slow_wedge++;
        if (zf[i] + parity_rng_uniform(r) * (zf[i + 1] - zf[i]) < exp(-0.5 * x * x)) return s * x;
        wedge_rejected++;
    }
}

static void zig_row(uint64_t seed, uint64_t stream, int64_t i, int64_t n, double scale, int grad,
                    double *o)
{
    parity_rng_t r;
    parity_rng_seed(&r, seed, ((100 + stream) << 40) ^ (uint64_t)i);
    if (grad) scale *= pow(10.0, -3.0 - 3.0 * parity_rng_uniform(&r));
    for (int64_t j = 0; j < n; j++) o[j] = zig_one(&r) * scale;
}

static void bulk_normals_are_the_ziggurat(void **state)
{
    (void)state;
    tables();
    slow_tail = slow_wedge = wedge_rejected = 0;
    enum { ROWS = 48 };
    static double got[ROWS * 2049], want[2049];
    int64_t lens[71];
    for (int k = 0; k < 70; k++) lens[k] = k + 1;
    lens[70] = 2049;
    for (int grad = 0; grad < 2; grad++)
        for (int k = 0; k < 71; k++) {
            const int64_t n = lens[k], rows = n == 2049 ? ROWS : 3;
            parity_workload_values(grad ? PARITY_VALS_GRADSCALE : PARITY_VALS_NORMAL, 1.5, 0, 0, 7,
                                   2, 5, 5 + rows, n, got);
            for (int64_t i = 5; i < 5 + rows; i++) {
                zig_row(7, 2, i, n, 1.5, grad, want);
                for (int64_t j = 0; j < n; j++)
                    if (memcmp(&got[(i - 5) * n + j], &want[j], sizeof want[j]) != 0)
                        fail_msg("grad %d, row %lld of %lld values, element %lld: %a vs %a", grad,
                                 (long long)i, (long long)n, (long long)j, got[(i - 5) * n + j], want[j]);
            }
        }
    /* ~200k draws: the tail ~ 200k/256 * 0.03, the wedge ~1.5% of them, a third rejected */
    assert_true(slow_tail >= 5);
    assert_true(slow_wedge >= 100);
    assert_true(wedge_rejected >= 10);
}

/* The samples against the standard normal: the Kolmogorov-Smirnov distance of 2^20 of them to
 * Phi (the 0.1% critical value is 1.95 / sqrt(n) = 0.0019; wrong tables, a strip used twice or a
 * lost wedge each move it further), the fraction beyond the tail's start r (2 Q(r) = 2.58e-4),
 * the mean excess over r there (E[Z - r | Z > r] = phi(r) / Q(r) - r = 0.246 for a true normal
 * tail; 0 if the tail were cut at r, 1/r = 0.274 for an untruncated exponential), and the signs
 * (fair, and the same mean magnitude on both sides), each within 5 standard errors. */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bulk_normals_follow_the_normal_law(void **state)
{
    (void)state;
    const int64_t rows = 256, cols = 4096, n = rows * cols;
    double *z = malloc((size_t)n * sizeof *z);
    assert_non_null(z);
    parity_workload_values(PARITY_VALS_NORMAL, 1.0, 0, 0, 11, 3, 0, rows, cols, z);
    long pos = 0, beyond = 0;
    double sum_pos = 0, sum_neg = 0, excess = 0, excess2 = 0;
    for (int64_t e = 0; e < n; e++) {
        if (z[e] > 0) {
            pos++;
            sum_pos += z[e];
        } else {
            sum_neg -= z[e];
        }
        if (fabs(z[e]) > ZR) {
            beyond++;
            excess += fabs(z[e]) - ZR;
            excess2 += (fabs(z[e]) - ZR) * (fabs(z[e]) - ZR);
        }
    }
    qsort(z, (size_t)n, sizeof *z, cmp_d);
    double dmax = 0;
    for (int64_t e = 0; e < n; e++) {
        double F = 0.5 * erfc(-z[e] / sqrt(2.0));
        double d = fmax(fabs(F - (double)e / (double)n), fabs(F - (double)(e + 1) / (double)n));
        if (d > dmax) dmax = d;
    }
    free(z);
    assert_true(dmax < 1.95 / sqrt((double)n));
    double p = erfc(ZR / sqrt(2.0)); /* both tails */
    assert_true(fabs((double)beyond - p * (double)n) < 5 * sqrt(p * (double)n));
    double m = excess / (double)beyond, sd = sqrt(excess2 / (double)beyond - m * m);
    double phi = exp(-0.5 * ZR * ZR) / sqrt(2.0 * M_PI), q = 0.5 * erfc(ZR / sqrt(2.0));
    assert_true(fabs(m - (phi / q - ZR)) < 5 * sd / sqrt((double)beyond));
    assert_true(fabs((double)pos / (double)n - 0.5) < 5 * 0.5 / sqrt((double)n));
    /* E|Z| = sqrt(2/pi), sd(|Z|) = sqrt(1 - 2/pi), over each half */
    double se = sqrt(1.0 - 2.0 / M_PI) / sqrt(0.5 * (double)n);
    assert_true(fabs(sum_pos / (double)pos - sqrt(2.0 / M_PI)) < 5 * se);
    assert_true(fabs(sum_neg / (double)(n - pos) - sqrt(2.0 / M_PI)) < 5 * se);
}

static void same_seed_same_sequence(void **state)
{
    (void)state;
    parity_rng_t a, b, c;
    parity_rng_seed(&a, 42, 0);
    parity_rng_seed(&b, 42, 0);
    parity_rng_seed(&c, 42, 1);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = parity_rng_u64(&a), y = parity_rng_u64(&b), z = parity_rng_u64(&c);
        assert_int_equal(x, y);
        differ += (x != z);
    }
    assert_true(differ > 990);
}

static void uniform_and_normal_moments(void **state)
{
    (void)state;
    parity_rng_t r;
    parity_rng_seed(&r, 7, 3);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    for (int i = 0; i < n; i++) {
        double u = parity_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        su += u;
        double z = parity_rng_normal(&r);
        sn += z;
        sn2 += z * z;
    }
    /* Means within 5 standard errors: sd(U)=1/sqrt(12), sd(Z)=1, sd(Z^2)=sqrt(2). */
    assert_true(fabs(su / n - 0.5) < 5 * sqrt(1.0 / 12 / n));
    assert_true(fabs(sn / n) < 5 / sqrt((double)n));
    assert_true(fabs(sn2 / n - 1.0) < 5 * sqrt(2.0 / n));
}

static void below_is_in_range_and_covers(void **state)
{
    (void)state;
    parity_rng_t r;
    parity_rng_seed(&r, 1, 0);
    int seen[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = parity_rng_below(&r, 7);
        assert_true(v < 7);
        seen[v]++;
    }
    for (int i = 0; i < 7; i++) assert_true(seen[i] > 800 && seen[i] < 1200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_same_sequence),
        cmocka_unit_test(uniform_and_normal_moments),
        cmocka_unit_test(below_is_in_range_and_covers),
        cmocka_unit_test(bulk_normals_are_the_ziggurat),
        cmocka_unit_test(bulk_normals_follow_the_normal_law),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* rng: reproducibility, stream independence and the moments of the generated distributions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "parity/rng.h"
#include "parity/workload.h"

/* The generated normals (src/op/workload.c draws them in batches) against Marsaglia's polar
 * method one pair at a time on the same per-row stream, bit for bit: rows of every length from 1
 * to 70 and one of 2049, plain and gradient-scale (a magnitude drawn first). The stream of row i
 * is ((100 + stream) << 40) ^ i, as documented there. */
static void polar_row(uint64_t seed, uint64_t stream, int64_t i, int64_t n, double scale, int grad,
                      double *o)
{
    parity_rng_t r;
    parity_rng_seed(&r, seed, ((100 + stream) << 40) ^ (uint64_t)i);
    if (grad) scale *= pow(10.0, -3.0 - 3.0 * parity_rng_uniform(&r));
    for (int64_t j = 0; j < n; j += 2) {
        double u, v, s;
        do {
            u = 2.0 * parity_rng_uniform(&r) - 1.0;
            v = 2.0 * parity_rng_uniform(&r) - 1.0;
            s = u * u + v * v;
        } while (s >= 1.0 || s == 0.0);
        double f = sqrt(-2.0 * log(s) / s) * scale;
        o[j] = u * f;
        if (j + 1 < n) o[j + 1] = v * f;
    }
}

static void batched_normals_are_the_polar_method(void **state)
{
    (void)state;
    double got[3 * 2049], want[2049];
    int64_t lens[71];
    for (int k = 0; k < 70; k++) lens[k] = k + 1;
    lens[70] = 2049;
    for (int grad = 0; grad < 2; grad++)
        for (int k = 0; k < 71; k++) {
            const int64_t n = lens[k];
            parity_workload_values(grad ? PARITY_VALS_GRADSCALE : PARITY_VALS_NORMAL, 1.5, 0, 0, 7,
                                   2, 5, 8, n, got);
            for (int64_t i = 5; i < 8; i++) {
                polar_row(7, 2, i, n, 1.5, grad, want);
                for (int64_t j = 0; j < n; j++)
                    if (memcmp(&got[(i - 5) * n + j], &want[j], sizeof want[j]) != 0)
                        fail_msg("grad %d, row %lld of %lld values, element %lld: %a vs %a", grad,
                                 (long long)i, (long long)n, (long long)j, got[(i - 5) * n + j], want[j]);
            }
        }
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
        cmocka_unit_test(batched_normals_are_the_polar_method),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

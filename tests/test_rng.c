/* rng: reproducibility, stream independence and the moments of the generated distributions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "parity/rng.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

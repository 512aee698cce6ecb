/* reduce: the per-element orders of each all-reduce algorithm, worked out by hand on fp32 values
 * where the order shows (2^24 + 1 rounds back to 2^24), per-hop rounding, spec parsing, the
 * same-order rule, inputs and the drift metric. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/reduce.h"

#define T24 16777216.0

static double run(const char *spec, const double *p, size_t i, size_t n)
{
    parity_reduce_spec_t s;
    assert_int_equal(parity_reduce_spec_parse(spec, &s, NULL), PARITY_OK);
    return parity_reduce_allreduce1(&s, p, i, n);
}

/* p = (2^24, 1, 1, -2^24) on ranks 0..3:
 *   oneshot 0,1,2,3: 2^24+1 -> 2^24, +1 -> 2^24, -2^24 -> 0
 *   linear 3,2,1,0: -2^24+1 (exact), +1 = -2^24+2, +2^24 = 2
 *   rd / tree: (2^24+1 -> 2^24) + (1-2^24) = 1
 *   NCCL ring, element in chunk c starts at rank c+1; Open MPI ring, block b starts at rank b. */
static void orders_by_hand(void **state)
{
    (void)state;
    const double p[4] = {T24, 1, 1, -T24};
    assert_true(run("oneshot:4", p, 0, 4) == 0);
    assert_true(run("linear:4", p, 0, 4) == 2);
    assert_true(run("ompi:1:4", p, 0, 4) == 2);
    assert_true(run("rd:4", p, 0, 4) == 1);
    assert_true(run("tree:4", p, 0, 4) == 1);
    assert_true(run("rabenseifner:4", p, 0, 4) == 1);
    /* NCCL ring: element 0 is chunk 0, starts at rank 1: 1+1, -2^24, +2^24 = 2; element 3 is
     * chunk 3, starts at rank 0: 0. */
    assert_true(run("ring:4", p, 0, 4) == 2);
    assert_true(run("ring:4", p, 3, 4) == 0);
    /* Open MPI ring: element 0 is block 0, starts at rank 0: 0; element 1 starts at rank 1: 2. */
    assert_true(run("mpi_ring:4", p, 0, 4) == 0);
    assert_true(run("mpi_ring:4", p, 1, 4) == 2);
    /* Open MPI ring block layout: n = 6, R = 4: blocks of 2, 2, 1, 1 (the first n % R larger):
     * element 5 is in block 3, starting at rank 3: -2^24 + 2^24 = 0, +1, +1 = 2. */
    assert_true(run("mpi_ring:4", p, 5, 6) == 2);
    assert_true(run("mpi_ring:4", p, 4, 6) == 2); /* block 2: 1 - 2^24 + 2^24 + 1 = 2 */
    assert_true(run("mpi_ring:4", p, 1, 6) == 0); /* block 0 */
    /* Fallbacks: ring with n < R runs rd; Rabenseifner with n < p' runs linear. */
    assert_true(run("mpi_ring:4", p, 0, 3) == 1);
    assert_true(run("rabenseifner:4", p, 0, 3) == 2);
    /* Two channels over n = 8: element 4 is the first element of channel 1, chunk 0 -> rank 1. */
    assert_true(run("ring:4:ch2", p, 4, 8) == 2);
    assert_true(run("ring:4:ch2", p, 3, 8) == 0);
}

/* Recursive doubling with R = 6: p' = 4, ranks (0,1) and (2,3) pre-add, then
 * ((x0+x1) + (x2+x3)) + (x4 + x5). */
static void rd_non_power_of_two(void **state)
{
    (void)state;
    const double p[6] = {T24, 1, 1, -T24, 1, 1};
    /* (2^24+1 -> 2^24) + (1 - 2^24) = 1; then + (1 + 1) = 3 */
    assert_true(run("rd:6", p, 0, 6) == 3);
    assert_true(run("rabenseifner:6", p, 0, 6) == 3);
    assert_true(run("oneshot:6", p, 0, 6) == 2);
}

/* bf16 hops: (1 + 2^-8) ties to even 1 at each hop, while one-shot keeps fp32 until the end. */
static void hop_rounding(void **state)
{
    (void)state;
    const double p[3] = {1, 0x1p-8, 0x1p-8};
    assert_true(run("tree:3:bf16", p, 0, 1) == 1);
    assert_true(run("oneshot:3:bf16", p, 0, 1) == 1 + 0x1p-7);
    assert_true(run("tree:3:fp32", p, 0, 1) == 1 + 0x1p-7);
    /* acc=bf16 rounds the one-shot accumulator at every addition too. */
    assert_true(run("oneshot:3:bf16:acc=bf16", p, 0, 1) == 1);
    assert_true(run("tree:3:fp64", p, 0, 1) == 1 + 0x1p-7);
}

static void spec_parse_and_print(void **state)
{
    (void)state;
    const char *ok[] = {"ring:8:bf16", "ring:8:bf16:acc=bf16:ch2", "oneshot:4:fp32", "rd:6:fp64",
                        "linear:3:fp16", "mpi_ring:8:fp32", "rabenseifner:5:fp32"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        parity_reduce_spec_t s;
        char buf[64];
        assert_int_equal(parity_reduce_spec_parse(ok[i], &s, NULL), PARITY_OK);
        parity_reduce_spec_str(&s, buf, sizeof buf);
        assert_string_equal(buf, ok[i]);
    }
    const char *bad[] = {"", "ring", "ring:0", "ring:65", "warp:4", "ring:4:bf17", "tree:4:ch2",
                         "ompi:2:4", "ompi:7:4", "ring:4:fp32:fp32:x", "ring:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parity_reduce_spec_t s;
        parity_diag_t d = {{0}};
        assert_int_equal(parity_reduce_spec_parse(bad[i], &s, &d), PARITY_E_INVALID);
        assert_true(strlen(d.msg) > 0);
    }
}

static parity_reduce_spec_t S(const char *t)
{
    parity_reduce_spec_t s;
    parity_reduce_spec_parse(t, &s, NULL);
    return s;
}

static void same_order_rule(void **state)
{
    (void)state;
    parity_reduce_spec_t a = S("rd:6"), b = S("rabenseifner:6"), c = S("ring:8"), d = S("ring:4");
    assert_true(parity_reduce_same_order(&a, &b, 100));
    assert_false(parity_reduce_same_order(&a, &b, 3)); /* Rabenseifner falls back to linear */
    assert_false(parity_reduce_same_order(&c, &d, 100));
    parity_reduce_spec_t e = S("ring:2"), f = S("oneshot:2");
    assert_true(parity_reduce_same_order(&e, &f, 100));
    parity_reduce_spec_t g = S("mpi_ring:8"), h = S("ompi:5:8");
    assert_true(parity_reduce_same_order(&g, &h, 100));
}

/* Small-integer terms: every order is exact, so every algorithm returns the exact sum. */
static void intprobe_is_exact_everywhere(void **state)
{
    (void)state;
    size_t n = 200, k = 64;
    double *part = malloc(8 * n * sizeof *part), *ref = malloc(n * sizeof *ref);
    double *out = malloc(n * sizeof *out);
    assert_non_null(part);
    assert_non_null(ref);
    assert_non_null(out);
    const char *specs[] = {"ring:8:bf16", "tree:8", "rd:8", "oneshot:8", "linear:8", "mpi_ring:8",
                           "rabenseifner:8"};
    assert_int_equal(parity_reduce_inputs(PARITY_REDUCE_W_INTPROBE, 3, n, k, 8, PARITY_REDUCE_FP32, part,
                                          ref), PARITY_OK);
    for (size_t j = 0; j < sizeof specs / sizeof specs[0]; j++) {
        parity_reduce_spec_t s = S(specs[j]);
        s.hop = PARITY_REDUCE_FP32;
        assert_int_equal(parity_reduce_allreduce(&s, part, n, out), PARITY_OK);
        for (size_t i = 0; i < n; i++) assert_true(out[i] == ref[i]);
    }
    /* The same logical tensor on 4 ranks has the same exact sum. */
    double *ref4 = malloc(n * sizeof *ref4);
    assert_non_null(ref4);
    assert_int_equal(parity_reduce_inputs(PARITY_REDUCE_W_PARTIAL, 3, n, 128, 8, PARITY_REDUCE_BF16, part,
                                          ref), PARITY_OK);
    assert_int_equal(parity_reduce_inputs(PARITY_REDUCE_W_PARTIAL, 3, n, 128, 4, PARITY_REDUCE_BF16, part,
                                          ref4), PARITY_OK);
    assert_memory_equal(ref, ref4, n * sizeof *ref);
    assert_int_equal(parity_reduce_inputs(PARITY_REDUCE_W_PARTIAL, 3, n, 2, 4, PARITY_REDUCE_BF16, part,
                                          ref4), PARITY_E_INVALID); /* K < R */
    free(part);
    free(ref);
    free(ref4);
    free(out);
}

/* Drift by hand: one of two elements off by one fp32 ulp. */
static void drift_by_hand(void **state)
{
    (void)state;
    const double a[2] = {1, 1}, b[2] = {1, 1 + 0x1p-23};
    parity_reduce_drift_t d;
    assert_int_equal(parity_reduce_drift(a, b, 2, PARITY_REDUCE_FP32, &d), PARITY_OK);
    assert_int_equal(d.n_differ, 1);
    assert_true(d.frac_differ == 0.5);
    assert_true(d.max_ulp == 1);
    assert_int_equal(d.ulp_hist[0], 1);
    assert_int_equal(d.ulp_hist[1], 1);
    assert_true(d.max_abs == 0x1p-23);
    assert_int_equal(parity_reduce_drift(a, NULL, 2, PARITY_REDUCE_FP32, &d), PARITY_E_INVALID);
}

/* Split-K: one split with fp32 partials, many splits with bf16 partials; both close to exact. */
static void splitk_bounds(void **state)
{
    (void)state;
    size_t n = 64, k = 512;
    double o1[64], o8[64], ref[64];
    assert_int_equal(parity_reduce_splitk(5, n, k, 1, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, o1, ref),
                     PARITY_OK);
    assert_int_equal(parity_reduce_splitk(5, n, k, 8, PARITY_REDUCE_BF16, PARITY_REDUCE_FP32, o8, NULL),
                     PARITY_OK);
    int differ = 0;
    for (size_t i = 0; i < n; i++) {
        differ += o1[i] != o8[i];
        /* fp32 sequential over K terms: |err| <= K u sum|t|; here sum|t| <= ~K/sqrt(K) * 8. */
        assert_true(fabs(o1[i] - ref[i]) < 1e-3);
    }
    assert_true(differ > (int)n / 2); /* bf16 partials lose bits on most elements */
    assert_int_equal(parity_reduce_splitk(5, n, k, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, o1, NULL),
                     PARITY_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(orders_by_hand),       cmocka_unit_test(rd_non_power_of_two),
        cmocka_unit_test(hop_rounding),         cmocka_unit_test(spec_parse_and_print),
        cmocka_unit_test(same_order_rule),      cmocka_unit_test(intprobe_is_exact_everywhere),
        cmocka_unit_test(drift_by_hand),        cmocka_unit_test(splitk_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

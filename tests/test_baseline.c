/* baseline: each rule of src/verify/baseline.c on outputs whose error is known exactly (the reference
 * rounded to fp32, then scaled by 1 + 2^-10 or 1 + 2^-20), with the verdict each rule's
 * constants imply worked out by hand below; and the input schemes (seeds, derived workloads). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "parity/baseline.h"

/* gemm at the assert_close shape (64 x 256 x 64, K = 256), fp32 inputs and outputs. */
static parity_case_t *gemm_case(int b)
{
    const parity_op_t *op = parity_op_find("gemm");
    assert_non_null(op);
    const parity_workload_t *wl;
    uint64_t seed;
    assert_int_equal(parity_baseline_workload(op, b, &wl, &seed), PARITY_OK);
    parity_case_t *c = NULL;
    parity_diag_t diag = {{0}};
    assert_int_equal(parity_case_build(op, wl, seed, PARITY_DT_F32, &c, &diag), PARITY_OK);
    return c;
}

/* Output 0 of c as fp32: the reference rounded, times (1 + rel). */
static parity_tensor_t *scaled_output(const parity_case_t *c, double rel)
{
    parity_tensor_t *t = parity_tensor_new("C", PARITY_DT_F32, c->out_ndim[0], c->out_shape[0]);
    assert_non_null(t);
    const parity_ref_output_t *R = &c->ref[0];
    float *y = t->view.data;
    for (int64_t e = 0; e < R->rows * R->cols; e++) y[e] = (float)(R->ref[e] * (1 + rel));
    return t;
}

static int caught(int b, double rel)
{
    parity_case_t *c = gemm_case(b);
    parity_tensor_t *t = scaled_output(c, rel);
    parity_baseline_result_t br;
    assert_int_equal(parity_baseline_judge(b, c, &t, &br), PARITY_OK);
    assert_int_equal(br.ran, 1);
    assert_string_equal(br.name, parity_baseline_name(b));
    int k = br.caught;
    parity_tensor_free(t);
    parity_case_free(c);
    return k;
}

/* Relative error 2^-10 ~ 9.8e-4:
 *   sol-execbench, kernelbench: 9.8e-4 |r| < 1e-2 + 1e-2 |r|            -> pass
 *   assert_close fp32: rtol 1.3e-6 + atol 1e-5 << 9.8e-4 |r| for |r| > 0.02 -> caught
 *   ck: rtol = max(2^-24 * 256, 2^-24) = 2^-16 ~ 1.5e-5; the element at max r fails -> caught
 *   hipdnn: gamma_2K = 512 * 2^-23 ~ 6.1e-5 of S; |r| ~ S/16 for randn (|sum| ~ sqrt(K) of
 *           the sum of |terms| ~ K * 0.64): 9.8e-4 |r| > 6.1e-5 S on the largest |r| -> caught
 *   flashinfer: 1e-2 max|r| + 1e-2 |r| > 9.8e-4 |r|                       -> pass
 *   flash-attn: y_pt = fp32 sequential sum, max error ~ K u |r| ~ 1e-5 |r|; 2x that + 1e-5
 *               < 9.8e-4 max|r| (max|r| ~ 40)                             -> caught
 * Relative error 2^-20 ~ 9.5e-7 (below fp32's own accumulation error at K = 256 for most
 * rules): sol, kernelbench, assert_close (1.3e-6 rtol), ck (1.5e-5), hipdnn, flashinfer pass. */
static void rules_by_hand(void **state)
{
    (void)state;
    const double big = ldexp(1, -10), small = ldexp(1, -20);
    assert_false(caught(PARITY_BASE_SOL_EXECBENCH, big));
    assert_false(caught(PARITY_BASE_KERNELBENCH, big));
    assert_true(caught(PARITY_BASE_ASSERT_CLOSE, big));
    assert_true(caught(PARITY_BASE_CK, big));
    assert_true(caught(PARITY_BASE_HIPDNN, big));
    assert_false(caught(PARITY_BASE_FLASHINFER, big));
    assert_true(caught(PARITY_BASE_FLASH_ATTN, big));
    assert_false(caught(PARITY_BASE_SOL_EXECBENCH, small));
    assert_false(caught(PARITY_BASE_KERNELBENCH, small));
    assert_false(caught(PARITY_BASE_ASSERT_CLOSE, small));
    assert_false(caught(PARITY_BASE_CK, small));
    assert_false(caught(PARITY_BASE_HIPDNN, small));
    assert_false(caught(PARITY_BASE_FLASHINFER, small));
}

/* A NaN never passes any rule. */
static void nan_fails_every_rule(void **state)
{
    (void)state;
    for (int b = 0; b < PARITY_N_BASELINES; b++) {
        parity_case_t *c = gemm_case(b);
        parity_tensor_t *t = scaled_output(c, 0);
        ((float *)t->view.data)[3] = NAN;
        parity_baseline_result_t br;
        assert_int_equal(parity_baseline_judge(b, c, &t, &br), PARITY_OK);
        /* sol-execbench tolerates up to 1% of elements wrong, by design: one NaN passes it. */
        if (b == PARITY_BASE_SOL_EXECBENCH) assert_false(br.caught);
        else assert_true(br.caught);
        assert_true(br.pass_fraction < 1);
        parity_tensor_free(t);
        parity_case_free(c);
    }
}

/* Names, seeds and the derived input schemes. */
static void schemes(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("gemm");
    for (int b = 0; b < PARITY_N_BASELINES; b++)
        assert_int_equal(parity_baseline_find(parity_baseline_name(b)), b);
    assert_int_equal(parity_baseline_find("nope"), -1);
    assert_null(parity_baseline_name(PARITY_N_BASELINES));
    const parity_workload_t *w, *w2;
    uint64_t seed;
    assert_int_equal(parity_baseline_workload(op, PARITY_BASE_SOL_EXECBENCH, &w, &seed), PARITY_OK);
    assert_true(seed == 200 && w == &op->baseline_workloads[0]);
    assert_int_equal(parity_baseline_workload(op, PARITY_BASE_CK, &w, &seed), PARITY_OK);
    {   /* CK's integers in every value scheme of the op's family (gemm: A and B) */
        char d[512];
        parity_workload_describe(op->wl_family, w, 0, d, sizeof d);
        assert_non_null(strstr(d, "a=int[-4,4]*"));
        assert_non_null(strstr(d, "b=int[-4,4]*"));
    }
    assert_int_equal(parity_baseline_workload(op, PARITY_BASE_CK, &w2, &seed), PARITY_OK);
    assert_ptr_equal(w, w2); /* stable: the check's worker cache keys cases on it */
    assert_int_equal(w->n, op->baseline_workloads[PARITY_BASE_ASSERT_CLOSE].n);
    assert_int_equal(parity_baseline_workload(op, PARITY_N_BASELINES, &w, &seed), PARITY_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rules_by_hand),
        cmocka_unit_test(nan_fails_every_rule),
        cmocka_unit_test(schemes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

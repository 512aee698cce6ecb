/* verify: the error-model bounds against hand-worked values, and the judgement of synthetic
 * outputs (a value just inside / just outside its tolerance, NaN, infinities, zero rows). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/op.h"
#include "parity/verify.h"
#include "src/verify/verify_impl.h"

static void gamma_hand_values(void **state)
{
    (void)state;
    /* gamma_n(u) = n u / (1 - n u): n = 4, u = 2^-24 -> 4u / (1 - 4u). */
    double u = 0x1p-24;
    assert_true(parity_gamma(4, u) == 4 * u / (1 - 4 * u));
    assert_true(parity_gamma(0, u) == 0);
    assert_true(isinf(parity_gamma(1 << 24, u)));
    /* Probabilistic: exp(lambda sqrt(n) u + n u^2/(1-u)) - 1; n = 100, lambda = 3:
     * about 30 u (1 + 15 u) + 100 u^2 ~ 30u to first order. */
    double gp = parity_gamma_prob(100, u, 3);
    assert_true(fabs(gp / (30 * u) - 1) < 1e-5);
    /* It grows like sqrt(n), the worst case like n. */
    assert_true(parity_gamma_prob(10000, u, 3) < parity_gamma(10000, u) / 30);
    /* lambda = sqrt(2 ln(2 n M / alpha)): n = 1, M = 1, alpha = 2/e^2 -> sqrt(2 * 2) = 2. */
    assert_true(fabs(parity_lambda(1, 1, 2 * exp(-2.0)) - 2) < 1e-12);
}

/* A dense 1 x 4 output, fp32 accumulator, k = 8 terms, s_acc = 1 per element. */
static void make_ref(parity_ref_output_t *R)
{
    assert_int_equal(parity_ref_output_alloc(R, "y", "row", 1, 4, 0, 0, 0), PARITY_OK);
    R->k[0] = 8;
    for (int j = 0; j < 4; j++) {
        R->ref[j] = 0.5;
        R->s_acc[j] = 1.0;
    }
}

static void free_ref(parity_ref_output_t *R)
{
    free(R->ref);
    free(R->s_acc);
    free(R->k);
}

static void judge_inside_outside(void **state)
{
    (void)state;
    parity_ref_output_t R;
    make_ref(&R);
    float y[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    parity_abi_tensor_t v = {y, PARITY_DT_F32, 2, {1, 4}, {4, 1}, "y"};
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q == 0);
    assert_int_equal(res.rows_failed, 0);

    /* The tolerance of these elements: gamma~_7(u, lambda) * 1 + 8 * 2^-149 with lambda from
     * n = 8, M = 4. An error of half of it passes, twice it fails. */
    double lambda = parity_lambda(8, 4, 1e-6);
    double tol = parity_gamma_prob(7, 0x1p-24, lambda) + 8 * 0x1p-149;
    y[1] = (float)(0.5 + 0.5 * tol);
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q <= 1);
    y[1] = (float)(0.5 + 2 * tol);
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q > 1);
    assert_int_equal(res.rows_failed, 1);
    assert_int_equal(res.worst.col, 1);
    free_ref(&R);
}

/* Operand roundings (op.h s_op, u_op): the verdict adds min(Hoeffding's lambda u_op s_op,
 * u_op s_acc), the worst case u_op s_acc. With u_op = 2^-8 and s_op = 1/20 (Hoeffding the
 * smaller), an error of 0.9 of the widened tolerance passes, 1.1 of it fails, and the same 0.9
 * fails without the term; with s_op = 1/4 (one dominant term) the worst case caps it. */
static void operand_rounding_term(void **state)
{
    (void)state;
    parity_ref_output_t R;
    make_ref(&R);
    R.s_op = calloc(4, sizeof *R.s_op);
    assert_non_null(R.s_op);
    R.u_op = 0x1p-8;
    for (int j = 0; j < 4; j++) R.s_op[j] = 0.05;
    double lambda = parity_lambda(8, 4, 1e-6);
    assert_true(lambda * 0.05 < 1 && lambda * 0.25 > 1); /* the two regimes below */
    double base = parity_gamma_prob(7, 0x1p-24, lambda) + 8 * 0x1p-149;
    double tol = base + lambda * 0x1p-8 * 0.05;
    double tp, td;
    parity_tolerance(&R, 0, 2, 0x1p-24, 0x1p-149, 0, 0, lambda, &tp, &td);
    assert_true(fabs(tp - tol) <= 1e-15 * tol);
    assert_true(fabs(td - (parity_gamma(7, 0x1p-24) + 8 * 0x1p-149 + 0x1p-8 * 1.0)) <= 1e-15);
    R.s_op[3] = 0.25;
    parity_tolerance(&R, 0, 3, 0x1p-24, 0x1p-149, 0, 0, lambda, &tp, &td);
    assert_true(fabs(tp - (base + 0x1p-8 * 1.0)) <= 1e-15);
    R.s_op[3] = 0.05;
    float y[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    parity_abi_tensor_t v = {y, PARITY_DT_F32, 2, {1, 4}, {4, 1}, "y"};
    parity_wl_result_t res;
    y[2] = (float)(0.5 + 0.9 * tol);
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q <= 1);
    y[2] = (float)(0.5 + 1.1 * tol);
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q > 1);
    free(R.s_op);
    R.s_op = NULL;
    y[2] = (float)(0.5 + 0.9 * tol);
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q > 1);
    free_ref(&R);
}

static void judge_nonfinite(void **state)
{
    (void)state;
    parity_ref_output_t R;
    make_ref(&R);
    float y[4] = {0.5f, NAN, 0.5f, 0.5f};
    parity_abi_tensor_t v = {y, PARITY_DT_F32, 2, {1, 4}, {4, 1}, "y"};
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_int_equal(res.nan_count, 1);
    assert_true(isinf(res.max_q));
    /* An infinity must meet an infinity of the same sign. */
    y[1] = INFINITY;
    R.ref[1] = INFINITY;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q == 0);
    y[1] = -INFINITY;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(isinf(res.max_q));
    free_ref(&R);
}

static void judge_sparse_zero_rows(void **state)
{
    (void)state;
    /* 3 rows, row 1 has no terms: it must be exactly zero. */
    parity_ref_output_t R;
    assert_int_equal(parity_ref_output_alloc(&R, "dE", "token", 3, 2, 1, 2, 0), PARITY_OK);
    R.slot[0] = 0; R.slot[1] = -1; R.slot[2] = 1;
    R.k[0] = R.k[1] = 1;
    R.ref[0] = 1; R.ref[1] = 2; R.ref[2] = 3; R.ref[3] = 4;
    for (int i = 0; i < 4; i++) R.s_acc[i] = fabs(R.ref[i]);
    float y[6] = {1, 2, 0, 0, 3, 4};
    parity_abi_tensor_t v = {y, PARITY_DT_F32, 2, {3, 2}, {2, 1}, "dE"};
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q == 0);
    y[3] = 1e-30f; /* any non-zero in a row without terms fails */
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(isinf(res.max_q));
    assert_int_equal(res.worst.row, 1);
    free(R.slot);
    free_ref(&R);
}

static void bf16_output_gets_its_rounding(void **state)
{
    (void)state;
    /* A single term (k = 1) stored in bf16: the error of one bf16 rounding (<= 2^-8 relative)
     * must pass, two bf16 ulps must fail. */
    parity_ref_output_t R;
    assert_int_equal(parity_ref_output_alloc(&R, "y", "row", 1, 1, 0, 0, 0), PARITY_OK);
    R.k[0] = 1;
    R.ref[0] = 1.0 + 0x1p-8 * 0.99; /* rounds to 1.0 in bf16 */
    R.s_acc[0] = R.ref[0];
    uint16_t y = 0x3f80; /* 1.0 */
    parity_abi_tensor_t v = {&y, PARITY_DT_BF16, 1, {1}, {1}, "y"};
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q <= 1);
    y = 0x3f82; /* 1 + 2^-6: two bf16 ulps above 1 */
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &v, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q > 1);
    free_ref(&R);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gamma_hand_values),
        cmocka_unit_test(judge_inside_outside),
        cmocka_unit_test(operand_rounding_term),
        cmocka_unit_test(judge_nonfinite),
        cmocka_unit_test(judge_sparse_zero_rows),
        cmocka_unit_test(bf16_output_gets_its_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

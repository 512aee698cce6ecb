/* verify, symmetric reduction class (op.h s_sym, docs/error-model.md): constructed sums of
 * k = 65,536 terms judged with and without the sharpened accumulation bound, and which reference
 * builders record s_sym for which workloads. Fixed seeds; every assertion can fail: removing the
 * sharpening makes the 16-bit accumulator pass, applying it to one-signed terms makes a faithful
 * fp32 sum fail. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/op.h"
#include "parity/rng.h"
#include "parity/verify.h"
#include "parity/workload.h"
#include "src/verify/verify_impl.h"

enum { K = 65536, J = 64 }; /* J elements, each a sum of K terms */

/* x rounded to m significant bits, nearest-even (x = f 2^e, f in [0.5, 1)). */
static double round_bits(double x, int m)
{
    if (x == 0 || !isfinite(x)) return x;
    int e;
    double f = frexp(x, &e);
    return ldexp(nearbyint(ldexp(f, m)), e - m);
}

/* Sums of terms x[0..K) into every representation the tests judge. */
typedef struct {
    double ref, s_abs, s_sq;
    float seq32, pair32;
    double seq_m; /* sequential accumulator of `m` significant bits (fp32's exponent range) */
} sums_t;

static float pair_f32(const float *x, int64_t n)
{
    if (n == 1) return x[0];
    int64_t h = n / 2;
    return pair_f32(x, h) + pair_f32(x + h, n - h);
}

static void sum_terms(const float *x, int m, sums_t *s)
{
    long double r = 0;
    double a = 0, q = 0, sm = 0;
    float f = 0;
    for (int64_t t = 0; t < K; t++) {
        r += x[t];
        a += fabs((double)x[t]);
        q += (double)x[t] * x[t];
        f += x[t];
        sm = round_bits(sm + x[t], m);
    }
    s->ref = (double)r; /* 64-bit significand: its error is far below every tolerance here */
    s->s_abs = a;
    s->s_sq = sqrt(q);
    s->seq32 = f;
    s->pair32 = pair_f32(x, K);
    s->seq_m = sm;
}

/* A 1 x J output of K-term sums; `sym` gives it s_sym. */
static void make_ref(parity_ref_output_t *R, const sums_t *s, int sym)
{
    assert_int_equal(parity_ref_output_alloc(R, "y", "row", 1, J, 0, 0, 0), PARITY_OK);
    R->k[0] = K;
    if (sym) {
        R->s_sym = calloc(J, sizeof *R->s_sym);
        assert_non_null(R->s_sym);
    }
    for (int j = 0; j < J; j++) {
        R->ref[j] = s[j].ref;
        R->s_acc[j] = s[j].s_abs;
        if (sym) R->s_sym[j] = s[j].s_sq;
    }
}

static void free_ref(parity_ref_output_t *R)
{
    free(R->ref);
    free(R->s_acc);
    free(R->k);
    free(R->s_sym);
}

/* max err/tol of output y (J floats) against R. */
static double judge(const parity_ref_output_t *R, float *y, int64_t *sym_elements)
{
    parity_abi_tensor_t v = {y, PARITY_DT_F32, 2, {1, J}, {J, 1}, "y"};
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(R, &v, PARITY_DT_F32, 0, &res, NULL);
    if (sym_elements) *sym_elements = res.sym_elements;
    return res.max_q;
}

/* J sums of K terms drawn by `draw` (seed 7), accumulator mutant of m bits. */
static sums_t *build(double (*draw)(parity_rng_t *), int m)
{
    sums_t *s = calloc(J, sizeof *s);
    float *x = malloc(K * sizeof *x);
    assert_non_null(s);
    assert_non_null(x);
    for (int j = 0; j < J; j++) {
        parity_rng_t rng;
        parity_rng_seed(&rng, 7, (uint64_t)j);
        for (int64_t t = 0; t < K; t++) x[t] = (float)draw(&rng);
        sum_terms(x, m, &s[j]);
    }
    free(x);
    return s;
}

static double draw_normal(parity_rng_t *r) { return parity_rng_normal(r); }
static double draw_u01(parity_rng_t *r) { return parity_rng_uniform(r); }

/* Symmetric terms (N(0,1), fair independent signs), K = 65,536: faithful fp32 sequential and
 * pairwise sums pass the sharpened bound with a wide margin; a 16-bit sequential accumulator
 * fails it and passes the general bound (whose sqrt(K) ||x||_1 is ~ sqrt(K)/lambda = 33x
 * looser here). 16 and not 18 bits: an m-bit sequential accumulator's largest error over J
 * sums is about 0.43 2^-m K/sqrt(2) sqrt(2 ln J) against lambda^2 2^-24 K, so m <= ~17.5 is
 * what this bound can flag at K = 65,536 (docs/error-model.md, "What it cannot reach"). */
static void symmetric_sum_sharpened(void **state)
{
    (void)state;
    sums_t *s = build(draw_normal, 16);
    parity_ref_output_t Rs, Rg;
    make_ref(&Rs, s, 1);
    make_ref(&Rg, s, 0);
    float y[J];
    int64_t n_sym = 0;
    for (int j = 0; j < J; j++) y[j] = s[j].seq32;
    double q_seq = judge(&Rs, y, &n_sym);
    assert_true(q_seq < 0.1);
    assert_int_equal(n_sym, J); /* the sharpened bound judged every element */
    for (int j = 0; j < J; j++) y[j] = s[j].pair32;
    assert_true(judge(&Rs, y, NULL) < 0.1);
    for (int j = 0; j < J; j++) y[j] = (float)s[j].seq_m;
    double q_sym = judge(&Rs, y, NULL), q_gen = judge(&Rg, y, &n_sym);
    print_message("fp32 sequential err/tol %.3g; 16-bit sequential: %.3g (symmetric class), "
                  "%.3g (general)\n", q_seq, q_sym, q_gen);
    assert_true(q_sym > 1.5);  /* caught under the symmetric class */
    assert_true(q_gen < 0.5);  /* missed by the general bound */
    assert_int_equal(n_sym, 0);
    /* The sharpened tolerance is the formula of docs/error-model.md. */
    double lambda = parity_lambda(K, J, 1e-6), u = 0x1p-24, tp, td, tg;
    parity_tolerance(&Rs, 0, 5, u, 0x1p-149, 0, 0, lambda, &tp, &td);
    double want = lambda * u * sqrt(K - 1.0) * (lambda * s[5].s_sq + parity_gamma(K - 1, u) * s[5].s_abs) +
                  K * 0x1p-149;
    assert_true(fabs(tp - want) <= 1e-12 * want);
    parity_tolerance(&Rg, 0, 5, u, 0x1p-149, 0, 0, lambda, &tg, &td);
    assert_true(tp < tg / 20); /* ~ 0.8 sqrt(K) / lambda = 26x sharper */
    free_ref(&Rs);
    free_ref(&Rg);
    free(s);
}

/* One-signed terms (U[0,1)) are not symmetric, and the class must not be applied to them: a
 * faithful fp32 sequential sum exceeds the sharpened tolerance (its partial sums grow like t/2,
 * not like sqrt(t)) and passes the general one, the bound their builders keep. */
static void asymmetric_terms_keep_general_bound(void **state)
{
    (void)state;
    sums_t *s = build(draw_u01, 16);
    parity_ref_output_t Rs, Rg;
    make_ref(&Rs, s, 1);
    make_ref(&Rg, s, 0);
    float y[J];
    for (int j = 0; j < J; j++) y[j] = s[j].seq32;
    double q_sym = judge(&Rs, y, NULL), q_gen = judge(&Rg, y, NULL);
    print_message("U[0,1) terms, fp32 sequential err/tol %.3g (symmetric class wrongly applied), "
                  "%.3g (general)\n", q_sym, q_gen);
    assert_true(q_sym > 1);
    assert_true(q_gen < 0.5);
    free_ref(&Rs);
    free_ref(&Rg);
    free(s);
}

/* The builders: s_sym where a generator makes the terms symmetric, NULL otherwise (the
 * KernelBench scheme's torch.rand operands). gemm's s_sym is sqrt(sum (a b)^2). */
static void builders_record_s_sym(void **state)
{
    (void)state;
    assert_true(parity_vals_symmetric(PARITY_VALS_NORMAL) && parity_vals_symmetric(PARITY_VALS_SPARSE_POW2));
    assert_false(parity_vals_symmetric(PARITY_VALS_UNIFORM01) || parity_vals_symmetric(PARITY_VALS_ONES));
    const parity_op_t *op = parity_op_find("gemm");
    assert_non_null(op);
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, "odd-k1000@8x1000x4", &wl), PARITY_OK);
    parity_case_t *c;
    parity_diag_t diag;
    assert_int_equal(parity_case_build(op, &wl, 3, PARITY_DT_BF16, &c, &diag), PARITY_OK);
    assert_non_null(c->ref[0].s_sym);
    const parity_abi_tensor_t *A = &c->inputs[0]->view, *B = &c->inputs[1]->view;
    double q = 0;
    for (int64_t t = 0; t < 1000; t++) {
        double p = parity_tensor_get(A, 1 * 1000 + t) * parity_tensor_get(B, t * 4 + 2);
        q += p * p;
    }
    assert_true(fabs(c->ref[0].s_sym[1 * 4 + 2] - sqrt(q)) <= 1e-12 * sqrt(q));
    parity_case_free(c);
    /* The operands come from independent streams: with X and dY both N(0,1)*64, the diagonal
     * dW[k,k] = sum_i X[i,k] dY[i,k] is a sum of symmetric terms, far from one-signed (|ref| =
     * s_acc when X's row i was dY's row i, as before the streams were fixed). */
    const parity_op_t *bwd = parity_op_find("gemm_bwd");
    assert_non_null(bwd);
    assert_int_equal(parity_op_workload(bwd, "x64", &wl), PARITY_OK);
    assert_int_equal(parity_case_build(bwd, &wl, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    const parity_ref_output_t *dW = &c->ref[1], *dX = &c->ref[0];
    double rw = 0, rx = 0; /* mean |ref| / s_acc over the first 32 diagonal elements: 1 for
                              one-signed terms; about 0.03 (dW, 2053 terms) and 0.18 (dX, 48)
                              for symmetric ones */
    for (int64_t k = 0; k < 32; k++) {
        rw += fabs(dW->ref[k * dW->cols + k]) / dW->s_acc[k * dW->cols + k] / 32;
        rx += fabs(dX->ref[k * dX->cols + k]) / dX->s_acc[k * dX->cols + k] / 32;
    }
    print_message("gemm_bwd x64 diagonal: mean |ref|/s_acc %.3g (dW), %.3g (dX)\n", rw, rx);
    assert_true(rw < 0.1 && rx < 0.4);
    parity_case_free(c);
    /* KernelBench's inputs: U[0,1) x U[0,1) products are positive: the general bound. */
    assert_int_equal(parity_case_build(op, &op->baseline_workloads[1], 3, PARITY_DT_BF16, &c, &diag),
                     PARITY_OK);
    assert_null(c->ref[0].s_sym);
    parity_case_free(c);
    /* The fused op: dE and dgamma symmetric with randn dy; neither with torch.rand inputs. */
    op = parity_op_find("embedding_rmsnorm_bwd");
    assert_non_null(op);
    assert_int_equal(parity_op_workload(op, "gamma@512x64x256", &wl), PARITY_OK);
    assert_int_equal(parity_case_build(op, &wl, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    assert_non_null(c->ref[0].s_sym);
    assert_non_null(c->ref[1].s_sym);
    for (int64_t e = 0; e < c->ref[1].n_slots; e++) /* sqrt(sum x^2) <= sum |x| */
        assert_true(c->ref[1].s_sym[e] > 0 && c->ref[1].s_sym[e] <= c->ref[1].s_acc[e] * (1 + 1e-12));
    parity_case_free(c);
    parity_workload_t kb = op->baseline_workloads[1];
    kb.n = 256; /* a smaller shape of the same scheme */
    assert_int_equal(parity_case_build(op, &kb, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    assert_null(c->ref[0].s_sym);
    assert_null(c->ref[1].s_sym);
    parity_case_free(c);
    /* rmsnorm_bwd: dgamma only (dx is one term per element). */
    op = parity_op_find("rmsnorm_bwd");
    assert_non_null(op);
    assert_int_equal(parity_op_workload(op, "unit@256x64", &wl), PARITY_OK);
    assert_int_equal(parity_case_build(op, &wl, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    assert_null(c->ref[0].s_sym);
    assert_non_null(c->ref[1].s_sym);
    parity_case_free(c);
    kb = op->baseline_workloads[1];
    kb.n = 64;
    assert_int_equal(parity_case_build(op, &kb, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    assert_null(c->ref[1].s_sym);
    parity_case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(symmetric_sum_sharpened),
        cmocka_unit_test(asymmetric_terms_keep_general_bound),
        cmocka_unit_test(builders_record_s_sym),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

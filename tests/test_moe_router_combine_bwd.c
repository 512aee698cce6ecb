/* moe_router_combine_bwd: the fp64 reference against hand-worked tokens (E = 2, 3; k = 1, 2;
 * D = 1, 2; both renorm settings), against central finite differences of the forward's fp64
 * reference (parity_ref_mrc_row) on random tokens without near-ties, the error-model data of
 * built cases (selection identical to the forward's, unselected gradients exactly 0 where the
 * math says so), and every catalog kernel judged on small cases against its expected verdict.
 * Seeds are fixed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/rng.h"
#include "parity/verify.h"
#include "ops/ops_impl.h"
#include "src/verify/verify_impl.h"
#include "catalog_util.h"

#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void two_experts_by_hand(void **state)
{
    (void)state;
    /* E = 2, k = 1, D = 1: logits [0, ln 3], p = [1/4, 3/4], expert 1 selected. y = [3, 5],
     * dout = 2: g_1 = 10. Renormalised: w = 1, d_logits = [0, 1·(10 − 10)] = 0, d_expert_out =
     * [0, 2]. Raw: w = 3/4, G = 7.5, d_logits = [1/4·(0 − 7.5), 3/4·(10 − 7.5)] = [−1.875,
     * 1.875], d_expert_out = [0, 1.5]. */
    double x[2] = {0, log(3.0)}, y[2] = {3, 5}, dout[1] = {2}, w[1], q[2], g[2], dl[2], de[1];
    int32_t sel[1];
    parity_ref_mrc_bwd_row(x, y, dout, 2, 1, 1, 1, sel, w, q, g, dl, de);
    assert_int_equal(sel[0], 1);
    assert_true(w[0] == 1.0 && de[0] == 2.0);
    assert_true(dl[0] == 0.0 && dl[1] == 0.0);
    assert_true(q[0] == 0.0 && g[1] == 10.0);
    parity_ref_mrc_bwd_row(x, y, dout, 2, 1, 1, 0, sel, w, q, g, dl, de);
    CLOSE(w[0], 0.75, 1e-15);
    CLOSE(de[0], 1.5, 1e-15);
    CLOSE(dl[0], -1.875, 1e-14);
    CLOSE(dl[1], 1.875, 1e-14);
    CLOSE(q[0], 0.25, 1e-15);
}

static void three_experts_by_hand(void **state)
{
    (void)state;
    /* E = 3, k = 2, D = 2: logits ln[1, 2, 3], experts 2, 1 selected. dout = [1, −1];
     * y_0 = [1, 1], y_1 = [2, 0], y_2 = [0, 3]: g_1 = 2, g_2 = −3.
     * Renormalised: w = [3/5, 2/5], G = −9/5 + 4/5 = −1, d_logits = [0, 2/5·3, 3/5·(−2)]
     * = [0, 6/5, −6/5]; d_expert_out = w·dout.
     * Raw: p = [1/6, 1/3, 1/2], G = −3/2 + 2/3 = −5/6, d_logits = [1/6·5/6, 1/3·17/6,
     * 1/2·(−13/6)] = [5/36, 17/18, −13/12] (sums to 0, as every softmax gradient). */
    double x[3] = {0, log(2.0), log(3.0)}, y[6] = {1, 1, 2, 0, 0, 3}, dout[2] = {1, -1};
    double w[2], q[3], g[3], dl[3], de[4];
    int32_t sel[2];
    parity_ref_mrc_bwd_row(x, y, dout, 3, 2, 2, 1, sel, w, q, g, dl, de);
    assert_true(sel[0] == 2 && sel[1] == 1);
    assert_true(g[1] == 2.0 && g[2] == -3.0 && g[0] == 0.0);
    assert_true(dl[0] == 0.0);
    CLOSE(dl[1], 1.2, 1e-14);
    CLOSE(dl[2], -1.2, 1e-14);
    CLOSE(de[0], 0.6, 1e-15);
    CLOSE(de[1], -0.6, 1e-15);
    CLOSE(de[2], 0.4, 1e-15);
    CLOSE(de[3], -0.4, 1e-15);
    parity_ref_mrc_bwd_row(x, y, dout, 3, 2, 2, 0, sel, w, q, g, dl, de);
    CLOSE(dl[0], 5.0 / 36, 1e-14);
    CLOSE(dl[1], 17.0 / 18, 1e-14);
    CLOSE(dl[2], -13.0 / 12, 1e-14);
    CLOSE(de[0], 0.5, 1e-15);
    CLOSE(de[3], -1.0 / 3, 1e-15);
}

/* L(x, y) = dout·out(x, y) with the forward's reference; central differences in every logit
 * and every expert output element against the backward's reference. Tokens whose k-th and
 * (k+1)-th logits are closer than 1e-3 are skipped (the step 1e-5 must not change the
 * selection). */
static double loss(const double *x, const double *y, const double *dout, int64_t e, int64_t d,
                   int k, int renorm)
{
    int32_t sel[8];
    double w[8], out[8];
    parity_ref_mrc_row(x, y, e, d, k, renorm, sel, w, NULL, out, NULL);
    double l = 0;
    for (int64_t c = 0; c < d; c++) l += dout[c] * out[c];
    return l;
}

static void finite_differences(void **state)
{
    (void)state;
    enum { E = 6, D = 4 };
    parity_rng_t rng;
    parity_rng_seed(&rng, 7, 0);
    int tested = 0;
    for (int t = 0; t < 40; t++) {
        int k = 1 + t % 3, renorm = (t / 3) % 2;
        double x[E], y[E * D], dout[D], w[8], q[E], g[E], dl[E], de[8 * D];
        int32_t sel[8], sel2[8];
        for (int j = 0; j < E; j++) x[j] = parity_rng_normal(&rng) * 1.5;
        for (int j = 0; j < E * D; j++) y[j] = parity_rng_normal(&rng);
        for (int c = 0; c < D; c++) dout[c] = parity_rng_normal(&rng);
        parity_ref_mrc_bwd_row(x, y, dout, E, D, k, renorm, sel, w, q, g, dl, de);
        /* the (k+1)-th largest logit: top-(k+1) through the forward's row */
        double w2[8];
        parity_ref_mrc_row(x, NULL, E, 0, k + 1, 1, sel2, w2, NULL, NULL, NULL);
        if (x[sel2[k - 1]] - x[sel2[k]] < 1e-3) continue;
        const double h = 1e-5;
        for (int j = 0; j < E; j++) {
            double s = x[j];
            x[j] = s + h;
            double lp = loss(x, y, dout, E, D, k, renorm);
            x[j] = s - h;
            double lm = loss(x, y, dout, E, D, k, renorm);
            x[j] = s;
            CLOSE((lp - lm) / (2 * h), dl[j], 1e-7);
        }
        for (int j = 0; j < E; j++) {
            int r = -1;
            for (int q2 = 0; q2 < k; q2++)
                if (sel[q2] == j) r = q2;
            for (int c = 0; c < D; c++) {
                double s = y[j * D + c];
                y[j * D + c] = s + h;
                double lp = loss(x, y, dout, E, D, k, renorm);
                y[j * D + c] = s - h;
                double lm = loss(x, y, dout, E, D, k, renorm);
                y[j * D + c] = s;
                double fd = (lp - lm) / (2 * h);
                if (r < 0) assert_true(fabs(fd) == 0.0); /* unselected: no path at all */
                else CLOSE(fd, de[r * D + c], 1e-8);
            }
        }
        tested++;
    }
    assert_true(tested >= 25);
}

static parity_case_t *build(const char *op_name, const char *wl_name, parity_dtype_t dt,
                            parity_workload_t *wl, uint64_t seed)
{
    return cu_build_case(op_name, wl_name, dt, seed, wl);
}

/* Built cases: the inputs are the forward's (same logits and expert outputs), the reference is
 * the row function's, unselected d_expert_out rows are exactly 0 with no terms, d_logits rows sum
 * to 0, and renormalised unselected logits have an exactly-0 gradient while raw ones do not. */
static void case_data(void **state)
{
    (void)state;
    const char *names[2] = {"bf16-ties@32x4x128", "skewed@32x4x64"};
    const int ks[2] = {8, 6}, renorms[2] = {1, 0};
    for (int n = 0; n < 2; n++) {
        parity_workload_t wl, wf;
        parity_case_t *c = build("moe_router_combine_bwd", names[n], PARITY_DT_BF16, &wl, 3);
        parity_case_t *f = build("moe_router_combine", names[n], PARITY_DT_BF16, &wf, 3);
        const parity_ref_output_t *DE = &c->ref[0], *DL = &c->ref[1];
        int64_t e = DL->cols, d = DE->cols;
        assert_true(c->attr_values[0] == ks[n] && c->attr_values[1] == renorms[n]);
        assert_int_equal(DE->m_up, 2);
        for (int a = 0; a < 2; a++)
            for (int64_t j = 0; j < parity_tensor_numel(&c->inputs[a]->view); j++)
                assert_true(parity_tensor_get(&c->inputs[a]->view, j) ==
                            parity_tensor_get(&f->inputs[a]->view, j));
        double x[128], y[128 * 4], dout[4], w[8], q[128], g[128], dl[128], de[8 * 4];
        int32_t sel[8];
        int unsel_nonzero = 0;
        for (int64_t i = 0; i < 32; i++) {
            for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(&c->inputs[0]->view, i * e + j);
            for (int64_t j = 0; j < e * d; j++) y[j] = parity_tensor_get(&c->inputs[1]->view, i * e * d + j);
            for (int64_t j = 0; j < d; j++) dout[j] = parity_tensor_get(&c->inputs[2]->view, i * d + j);
            assert_true(fabs(dout[0]) < 0.1); /* gradient scale */
            parity_ref_mrc_bwd_row(x, y, dout, e, d, ks[n], renorms[n], sel, w, q, g, dl, de);
            int64_t nn = renorms[n] ? ks[n] : e;
            assert_int_equal(DL->k[i], nn > d ? nn : d);
            double sum = 0, sabs = 0;
            for (int64_t j = 0; j < e; j++) {
                int r = -1;
                for (int q2 = 0; q2 < ks[n]; q2++)
                    if (sel[q2] == (int32_t)j) r = q2;
                assert_true(DL->ref[i * e + j] == dl[j]);
                /* the gates of the forward are nonzero exactly at the selected experts */
                assert_true((f->ref[1].ref[i * e + j] != 0) == (r >= 0));
                sum += dl[j];
                sabs += fabs(dl[j]);
                if (r < 0) {
                    if (renorms[n]) assert_true(dl[j] == 0 && DL->s_acc[i * e + j] == 0);
                    else unsel_nonzero += dl[j] != 0;
                } else {
                    assert_true(DL->s_acc[i * e + j] > 0);
                }
                for (int64_t col = 0; col < d; col++) {
                    int64_t at = (i * e + j) * d + col;
                    if (r < 0) assert_true(DE->ref[at] == 0 && DE->s_acc[at] == 0 && DE->s_up[at] == 0);
                    else {
                        assert_true(DE->ref[at] == de[r * d + col]);
                        CLOSE(DE->s_acc[at], fabs(de[r * d + col]), 0);
                        assert_true(DE->s_up[at] >= 13 * DE->s_acc[at]);
                    }
                }
            }
            CLOSE(sum, 0, 1e-12 * (sabs + 1e-300));
        }
        if (!renorms[n]) assert_true(unsel_nonzero > 32 * (e - ks[n]) / 2);
        parity_case_free(c);
        parity_case_free(f);
    }
}

static void catalog_verdicts(void **state)
{
    (void)state;
    const char *wls[2] = {"bf16-ties@64x32x128", "e256-top8@32x32x256"};
    parity_case_t *cb[2], *cf[2];
    parity_workload_t wl[2][2];
    for (int w = 0; w < 2; w++) {
        cb[w] = build("moe_router_combine_bwd", wls[w], PARITY_DT_BF16, &wl[w][0], 1);
        cf[w] = build("moe_router_combine_bwd", wls[w], PARITY_DT_F32, &wl[w][1], 1);
    }
    cu_check_catalog("moe_router_combine_bwd", cb, cf, 2, 8);
    for (int w = 0; w < 2; w++) {
        parity_case_free(cb[w]);
        parity_case_free(cf[w]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_experts_by_hand),
        cmocka_unit_test(three_experts_by_hand),
        cmocka_unit_test(finite_differences),
        cmocka_unit_test(case_data),
        cmocka_unit_test(catalog_verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* moe_router_combine: the fp64 reference against hand-worked tokens (renormalised and raw
 * weights, an exact tie decided by the lower id, k = 1), the selection margin against every pair
 * of adjacent bf16 logits, the error-model data of built cases, and every catalog kernel judged
 * on small cases against its expected verdict. Seeds are fixed (1). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/format.h"
#include "parity/kernel.h"
#include "parity/moe.h"
#include "parity/op.h"
#include "parity/verify.h"
#include "ops/ops_impl.h"
#include "src/verify/verify_impl.h"
#include "catalog_util.h"

#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

/* Expert e's output is [e + 1, -(e + 1) / 2]: every selection gives a different out. */
static void expert_rows(int e, double *y)
{
    for (int j = 0; j < e; j++) {
        y[2 * j] = j + 1;
        y[2 * j + 1] = -(j + 1) / 2.0;
    }
}

static void renorm_and_raw_by_hand(void **state)
{
    (void)state;
    /* logits ln[1, 2, 3, 4]: probabilities [.1, .2, .3, .4]. Top-2 = experts 3, 2.
     * Renormalised: w = [4/7, 3/7]; out = 4/7 [4, -2] + 3/7 [3, -1.5] = [25/7, -12.5/7].
     * Raw: w = [.4, .3]; out = [.4*4 + .3*3, -(.4*2 + .3*1.5)] = [2.5, -1.25]. */
    double x[4] = {0, log(2.0), log(3.0), log(4.0)}, y[8], w[2], g[4], out[2], cond[2];
    int32_t sel[2];
    expert_rows(4, y);
    parity_ref_mrc_row(x, y, 4, 2, 2, 1, sel, w, g, out, cond);
    assert_int_equal(sel[0], 3);
    assert_int_equal(sel[1], 2);
    CLOSE(w[0], 4.0 / 7, 1e-15);
    CLOSE(w[1], 3.0 / 7, 1e-15);
    CLOSE(out[0], 25.0 / 7, 1e-14);
    CLOSE(out[1], -12.5 / 7, 1e-14);
    assert_true(g[0] == 0 && g[1] == 0);
    CLOSE(g[2], 3.0 / 7, 1e-15);
    /* The condition: at least |x_j - m| plus the 12 roundings. */
    assert_true(cond[0] >= 12 && cond[1] >= log(4.0 / 3.0) + 12);
    parity_ref_mrc_row(x, y, 4, 2, 2, 0, sel, w, g, out, cond);
    CLOSE(w[0], 0.4, 1e-15);
    CLOSE(w[1], 0.3, 1e-15);
    CLOSE(out[0], 2.5, 1e-14);
    CLOSE(out[1], -1.25, 1e-14);
    CLOSE(g[3] + g[2], 0.7, 1e-15);
}

static void tie_goes_to_lower_id(void **state)
{
    (void)state;
    /* logits [1, 2, 0, 2]: experts 1 and 3 tie for the top. k = 1 picks expert 1 (lower id).
     * Renormalised k = 1: w = 1, out = y[1] = [2, -1]. Raw: w = e^2 / (e + 2e^2 + 1). */
    double x[4] = {1, 2, 0, 2}, y[8], w[2], g[4], out[2];
    int32_t sel[2];
    expert_rows(4, y);
    parity_ref_mrc_row(x, y, 4, 2, 1, 1, sel, w, g, out, NULL);
    assert_int_equal(sel[0], 1);
    assert_true(w[0] == 1.0);
    assert_true(out[0] == 2.0 && out[1] == -1.0);
    assert_true(g[1] == 1.0 && g[3] == 0.0);
    parity_ref_mrc_row(x, y, 4, 2, 1, 0, sel, w, g, out, NULL);
    double e1 = exp(1.0), e2 = exp(2.0);
    assert_int_equal(sel[0], 1);
    CLOSE(w[0], e2 / (e1 + 2 * e2 + 1), 1e-15);
    CLOSE(out[0], 2 * e2 / (e1 + 2 * e2 + 1), 1e-14);
    /* k = 2 selects both tied experts; k = 3 adds expert 0. */
    parity_ref_mrc_row(x, y, 4, 2, 2, 1, sel, w, g, out, NULL);
    assert_true(sel[0] == 1 && sel[1] == 3);
    CLOSE(w[0], 0.5, 1e-15);
    CLOSE(out[0], 0.5 * 2 + 0.5 * 4, 1e-14);
}

/* The margin the builder uses never separates two distinct adjacent bf16 logits of magnitude
 * 2^-7 .. 16 with a max up to 16 and E up to 256, and fp32 softmax keeps their strict order:
 * for such logits, no row is ever snapped and selection on logits is what every faithful fp32
 * kernel selects. Exhaustive over bf16 values. */
static void bf16_logits_keep_order_in_fp32(void **state)
{
    (void)state;
    double x[256];
    const double maxes[3] = {0.0, 4.0, 16.0};
    long pairs = 0;
    for (uint32_t b = 0x3c00; b <= 0x4180; b++) { /* bf16 bits 2^-7 .. 16, positive */
        for (int sgn = 0; sgn < 2; sgn++) {
            double a = parity_bf16_to_fp32_1((uint16_t)(b | (sgn ? 0x8000u : 0)));
            double lo = parity_bf16_to_fp32_1((uint16_t)((sgn ? b + 1 : b - 1) | (sgn ? 0x8000u : 0)));
            if (lo > a) { double t = lo; lo = a; a = t; }
            for (int mi = 0; mi < 3; mi++) {
                double m = maxes[mi];
                if (a > m) continue;
                for (int j = 0; j < 256; j++) x[j] = -16.0;
                x[0] = m;
                x[1] = a;
                x[2] = lo;
                assert_true(a - lo > parity_mrc_margin(x, 256, a));
                float ea = (float)exp((float)(a - m)), el = (float)exp((float)(lo - m));
                assert_true(ea > el);
                float fa = expf((float)(a - m)), fl = expf((float)(lo - m));
                assert_true(fa > fl);
                pairs++;
            }
        }
    }
    assert_true(pairs > 3000);
}

static parity_case_t *build(const char *wl_name, parity_dtype_t dt, parity_workload_t *wl)
{
    return cu_build_case("moe_router_combine", wl_name, dt, 1, wl);
}

static void case_data(void **state)
{
    (void)state;
    const char *names[2] = {"mixtral@32x8x8", "skewed@32x8x64"};
    const int ks[2] = {2, 6}, renorms[2] = {1, 0};
    for (int n = 0; n < 2; n++) {
        parity_workload_t wl;
        parity_case_t *c = build(names[n], PARITY_DT_BF16, &wl);
        const parity_ref_output_t *O = &c->ref[0], *G = &c->ref[1];
        int64_t e = G->cols, d = O->cols;
        assert_int_equal(c->n_attrs, 2);
        assert_true(c->attr_values[0] == ks[n] && c->attr_values[1] == renorms[n]);
        assert_int_equal(O->m_up, 2);
        assert_int_equal(G->m_up, 2);
        double x[64], y[64 * 8], w[8], g[64], out[8], cond[8];
        int32_t sel[8];
        for (int64_t i = 0; i < 32; i++) {
            int64_t kk = renorms[n] ? ks[n] : e;
            assert_int_equal(G->k[i], kk);
            assert_int_equal(O->k[i], kk);
            for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(&c->inputs[0]->view, i * e + j);
            for (int64_t j = 0; j < e * d; j++) y[j] = parity_tensor_get(&c->inputs[1]->view, i * e * d + j);
            parity_ref_mrc_row(x, y, e, d, ks[n], renorms[n], sel, w, g, out, cond);
            double sum = 0;
            int nz = 0;
            for (int64_t j = 0; j < e; j++) {
                assert_true(G->ref[i * e + j] == g[j]);
                assert_true(G->s_acc[i * e + j] == g[j]); /* the sum's relative error scales w */
                nz += g[j] != 0;
                if (g[j] == 0) assert_true(G->s_up[i * e + j] == 0); /* must be exactly 0 */
                sum += g[j];
            }
            assert_int_equal(nz, ks[n]);
            if (renorms[n]) CLOSE(sum, 1, 1e-14);
            else assert_true(sum < 1);
            for (int64_t col = 0; col < d; col++) {
                double sa = 0;
                for (int q = 0; q < ks[n]; q++) sa += fabs(w[q] * y[sel[q] * d + col]);
                assert_true(O->ref[i * d + col] == out[col]);
                CLOSE(O->s_acc[i * d + col], 2 * sa, 1e-15 * sa);
                assert_true(O->s_up[i * d + col] >= 13 * sa); /* (A + 1) >= 13 per term */
            }
        }
        parity_case_free(c);
    }
}

/* bf16-ties forces an exact boundary tie into 5% of tokens; the builder counts them. */
static void ties_are_present(void **state)
{
    (void)state;
    parity_workload_t wl;
    parity_case_t *c = build("bf16-ties@1024x4x128", PARITY_DT_BF16, &wl);
    const parity_mrc_stats_t *s = c->priv;
    assert_non_null(s);
    assert_true(s->tied_rows >= 30);     /* about 51 forced, plus natural bf16 ties */
    assert_int_equal(s->snapped_rows, 0); /* bf16 logits at |t| ~ 0.7: never ambiguous */
    parity_case_free(c);
}

/* Every catalog kernel on small cases of two workloads (ties + renormalised; many experts with
 * raw probabilities): faithful ones within tolerance on both, each mutant over it on at least
 * one, as the catalog expects. */
static void catalog_verdicts(void **state)
{
    (void)state;
    const char *wls[2] = {"bf16-ties@256x16x128", "e256-top8@128x16x256"};
    parity_case_t *cb[2], *cf[2];
    parity_workload_t wl[2][2];
    for (int w = 0; w < 2; w++) {
        cb[w] = build(wls[w], PARITY_DT_BF16, &wl[w][0]);
        cf[w] = build(wls[w], PARITY_DT_F32, &wl[w][1]);
    }
    cu_check_catalog("moe_router_combine", cb, cf, 2, 8);
    for (int w = 0; w < 2; w++) {
        parity_case_free(cb[w]);
        parity_case_free(cf[w]);
    }
}

/* A kernel call without the k attribute, or with k > E, is refused rather than guessed. */
static void bad_shapes_refused(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("moe_router_combine");
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, "e256-top8@4x4x4", &wl), PARITY_OK);
    wl.name = wl.label;
    parity_case_t *c = NULL;
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    assert_int_equal(parity_case_build(op, &wl, 1, PARITY_DT_BF16, &c, &diag), PARITY_E_INVALID);
    assert_null(c);
    assert_non_null(strstr(diag.msg, "k (8)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renorm_and_raw_by_hand),
        cmocka_unit_test(tie_goes_to_lower_id),
        cmocka_unit_test(bf16_logits_keep_order_in_fp32),
        cmocka_unit_test(case_data),
        cmocka_unit_test(ties_are_present),
        cmocka_unit_test(catalog_verdicts),
        cmocka_unit_test(bad_shapes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

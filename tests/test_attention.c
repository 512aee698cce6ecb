/* attention_fwd / attention_bwd: the fp64 forward reference against hand-worked cases (T = 1:
 * O = V; T = 2 by hand; softcap by hand), the causal mask and error-model data of built cases
 * against an independent naive recomputation; the backward reference against T = 1 by hand and
 * central differences of the forward reference; every catalog kernel of both ops judged on a
 * small softcap case against its expected verdict. Seeds are fixed (1). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"
#include "ops/ops_impl.h"
#include "src/verify/verify_impl.h"
#include "catalog_util.h"

#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void one_key_gives_v(void **state)
{
    (void)state;
    /* T = 1 (or the first causal row): p = [1], O = v, LSE = the score itself. */
    double q[3] = {1, -2, 0.5}, K[3] = {0.25, 1, 4}, V[3] = {7, -3, 0.125};
    double o[3], sacc[3], sup[3], lse, lsup, work[5];
    parity_ref_attention_row(q, K, V, 1, 3, 0.5, 0, o, &lse, sacc, sup, &lsup, work);
    for (int c = 0; c < 3; c++) {
        assert_true(o[c] == V[c]);
        assert_true(sacc[c] == 2 * fabs(V[c])); /* Σ p|v| + |O| */
    }
    CLOSE(lse, 0.5 * (0.25 - 2 + 2), 1e-15);
}

static void two_keys_by_hand(void **state)
{
    (void)state;
    /* scale 0.5, q = [2, 0], keys [1, 1] and [3, -1]: scores 0.5*[2, 6] = [1, 3];
     * p = [1/(1+e^2), e^2/(1+e^2)] = [0.11920292202211755, 0.8807970779778824];
     * V = [[1, 10], [5, -2]]: O = [p0 + 5 p1, 10 p0 - 2 p1]; LSE = log(e + e^3) = 3.1269280110429727. */
    double q[2] = {2, 0}, K[4] = {1, 1, 3, -1}, V[4] = {1, 10, 5, -2};
    double o[2], sacc[2], sup[2], lse, lsup, work[10];
    double p0 = 0.11920292202211755, p1 = 0.8807970779778824;
    parity_ref_attention_row(q, K, V, 2, 2, 0.5, 0, o, &lse, sacc, sup, &lsup, work);
    CLOSE(o[0], p0 + 5 * p1, 1e-15);
    CLOSE(o[1], 10 * p0 - 2 * p1, 1e-14);
    CLOSE(lse, 3.1269280110429727, 1e-15);
    CLOSE(sacc[0], p0 * 1 + p1 * 5 + fabs(o[0]), 1e-14);
    CLOSE(sacc[1], p0 * 10 + p1 * 2 + fabs(o[1]), 1e-14);
    /* s_up: the score conditions a = 0.5*[2, 6] = [1, 3] weight |v_j - O| at least. */
    assert_true(sup[0] >= p0 * 1 * fabs(1 - o[0]) + p1 * 3 * fabs(5 - o[0]) + 2 * sacc[0]);
    assert_true(lsup >= p0 * 1 + p1 * 3 + fabs(lse));
    /* Only the first key (k = 1, what a causal mask leaves the first query): O = v_0. */
    parity_ref_attention_row(q, K, V, 1, 2, 0.5, 0, o, &lse, sacc, sup, &lsup, work);
    assert_true(o[0] == 1 && o[1] == 10);
    CLOSE(lse, 1, 1e-15);
}

static void softcap_by_hand(void **state)
{
    (void)state;
    /* scale 1, softcap c = 1, q = [1], keys [0] and [2]: raw scores [0, 2], capped [0, tanh 2] =
     * [0, 0.9640275800758169]; V = [[0], [1]]: O = p1 = 1/(1 + e^-tanh2) = 0.7239274686640463,
     * LSE = log(1 + e^tanh2) = 1.2870916530939804. Without the cap: O = 1/(1 + e^-2) = 0.881. */
    double q[1] = {1}, K[2] = {0, 2}, V[2] = {0, 1};
    double o[1], sacc[1], sup[1], lse, lsup, work[10];
    parity_ref_attention_row(q, K, V, 2, 1, 1.0, 1.0, o, &lse, sacc, sup, &lsup, work);
    CLOSE(o[0], 0.7239274686640463, 1e-15);
    CLOSE(lse, 1.2870916530939804, 1e-15);
    parity_ref_attention_row(q, K, V, 2, 1, 1.0, 0, o, &lse, sacc, sup, &lsup, work);
    CLOSE(o[0], 1 / (1 + exp(-2.0)), 1e-15);
}

static parity_case_t *build_op(const char *op_name, const char *wl_name, parity_dtype_t dt,
                               parity_workload_t *wl)
{
    return cu_build_case(op_name, wl_name, dt, 1, wl);
}

static parity_case_t *build(const char *wl_name, parity_dtype_t dt, parity_workload_t *wl)
{
    return build_op("attention_fwd", wl_name, dt, wl);
}

static double attr(const parity_case_t *c, const char *name)
{
    for (int a = 0; a < c->n_attrs; a++)
        if (strcmp(c->attr_names[a], name) == 0) return c->attr_values[a];
    fail_msg("attribute %s missing", name);
    return 0;
}

/* A built case against a naive recomputation from the stored inputs: the mask (k = i + 1 causal,
 * T otherwise), the softcap, O and LSE, and the error-model data's invariants. */
static void check_case(const char *wl_name, int causal, double softcap)
{
    parity_workload_t wl;
    parity_case_t *c = build(wl_name, PARITY_DT_BF16, &wl);
    int64_t H = c->inputs[0]->view.shape[0], T = c->inputs[0]->view.shape[1];
    int64_t dh = c->inputs[0]->view.shape[2];
    assert_true(attr(c, "causal") == causal);
    assert_true(attr(c, "softcap") == softcap);
    double scale = attr(c, "scale");
    CLOSE(scale, 1 / sqrt((double)dh), 1e-16);
    const parity_ref_output_t *O = &c->ref[0], *L = &c->ref[1];
    assert_int_equal(O->rows, H * T);
    assert_int_equal(O->cols, dh);
    assert_int_equal(L->cols, 1);
    assert_int_equal(O->m_up, dh + 2);
    assert_true(O->u_op == 0x1p-8 && O->s_op != NULL && L->s_op == NULL);
    /* The per-key split (docs/ops/attention.md): continuous Q and K, b_up = 2. */
    assert_non_null(O->s_up2);
    assert_true(O->b_up == 2 && L->s_up2 == NULL);
    double *s = malloc((size_t)T * sizeof *s), *a = malloc((size_t)T * sizeof *a);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < T; i++) {
            int64_t r = h * T + i, k = causal ? i + 1 : T;
            assert_int_equal(O->k[r], k);
            assert_int_equal(L->k[r], k);
            double m = -INFINITY, S = 0;
            for (int64_t j = 0; j < k; j++) {
                double d = 0;
                for (int64_t e = 0; e < dh; e++)
                    d += parity_tensor_get(&c->inputs[0]->view, r * dh + e) *
                         parity_tensor_get(&c->inputs[1]->view, (h * T + j) * dh + e);
                s[j] = softcap > 0 ? softcap * tanh(d * scale / softcap) : d * scale;
                a[j] = 0;
                for (int64_t e = 0; e < dh; e++)
                    a[j] += fabs(parity_tensor_get(&c->inputs[0]->view, r * dh + e) *
                                 parity_tensor_get(&c->inputs[1]->view, (h * T + j) * dh + e));
                a[j] *= scale;
                assert_true(a[j] <= 1.0 / ((double)(dh + 2) * (dh + 2) * 0x1p-24));
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < k; j++) S += exp(s[j] - m);
            CLOSE(L->ref[r], m + log(S), 1e-12 * (1 + fabs(m)));
            assert_true(L->s_acc[r] == 1.0 && L->s_up[r] >= fabs(L->ref[r]));
            for (int64_t e = 0; e < dh; e++) {
                double o = 0, sa = 0, s2 = 0;
                for (int64_t j = 0; j < k; j++) {
                    double v = parity_tensor_get(&c->inputs[2]->view, (h * T + j) * dh + e);
                    o += exp(s[j] - m) / S * v;
                    sa += exp(s[j] - m) / S * fabs(v);
                    s2 += (exp(s[j] - m) / S * v) * (exp(s[j] - m) / S * v);
                }
                CLOSE(O->ref[r * dh + e], o, 1e-12 * (1 + sa));
                CLOSE(O->s_acc[r * dh + e], sa + fabs(o), 1e-12 * (1 + sa));
                /* bf16 contract: P~ may be rounded to bf16 before P~V; s_op = sqrt(Σ (p_j v_j)^2). */
                CLOSE(O->s_op[r * dh + e], sqrt(s2), 1e-12 * (1 + sa));
                /* s_up2 = sqrt(Σ (p_j |v_j - O| a_j)^2): the score roundings' random part
                 * (|v_j - O| cancels where one key dominates: compared on the scale of
                 * p_j (|v_j| + |O|) a_j). */
                double q2 = 0, qs2 = 0;
                for (int64_t j = 0; j < k; j++) {
                    double v = parity_tensor_get(&c->inputs[2]->view, (h * T + j) * dh + e);
                    double p = exp(s[j] - m) / S, x = p * fabs(v - o) * a[j];
                    double y = p * (fabs(v) + fabs(o)) * a[j];
                    q2 += x * x;
                    qs2 += y * y;
                }
                CLOSE(O->s_up2[r * dh + e], sqrt(q2), 1e-12 * sqrt(qs2));
                assert_true(O->s_up2[r * dh + e] <= O->s_up[r * dh + e]);
                assert_true(O->s_up[r * dh + e] >= 2 * O->s_acc[r * dh + e]);
            }
        }
    free(s);
    free(a);
    parity_case_free(c);
}

/* Where the split does not apply: sparse exact Q/K (no s_up2 at all), and rows with a key whose
 * score condition is beyond what exp's second-order charge covers (x64: a_j ~ 4096 times the
 * unit-scale one; s_up2 infinite, so the verdict keeps the folded term there). */
static void split_not_applied(void **state)
{
    (void)state;
    parity_workload_t wl;
    parity_case_t *c = build("exact@40x16x1", PARITY_DT_BF16, &wl);
    assert_null(c->ref[0].s_up2);
    parity_case_free(c);
    c = build("x64@40x64x1", PARITY_DT_BF16, &wl);
    assert_non_null(c->ref[0].s_up2);
    int64_t inf = 0, n = c->ref[0].rows * c->ref[0].cols;
    for (int64_t e = 0; e < n; e++) inf += isinf(c->ref[0].s_up2[e]);
    assert_true(inf > 0);
    parity_case_free(c);
}

static void causal_case_data(void **state)
{
    (void)state;
    check_case("long-causal@70x16x2", 1, 0);
}

/* fp32 inputs: no operand rounding in the contract (P~ stays fp32). */
static void fp32_inputs_have_no_operand_rounding(void **state)
{
    (void)state;
    parity_workload_t wl;
    parity_case_t *c = build("odd-t1031@37x8x2", PARITY_DT_F32, &wl);
    assert_null(c->ref[0].s_op);
    assert_true(c->ref[0].u_op == 0);
    parity_case_free(c);
}

static void full_softcap_case_data(void **state)
{
    (void)state;
    check_case("odd-t1031@37x8x2", 0, 0);
    check_case("softcap@40x32x1", 1, 50);
}

/* Raw scores on the softcap workload exceed the cap (so the cap changes the result). */
static void softcap_workload_exceeds_cap(void **state)
{
    (void)state;
    parity_workload_t wl;
    parity_case_t *c = build("softcap@128x256x1", PARITY_DT_BF16, &wl);
    /* LSE >= the largest capped score; with raw peaks of 70-80 the capped maximum is
     * 50 tanh(70/50) > 44, while uncapped it would be > 65. */
    int above = 0;
    for (int64_t r = 0; r < 128; r++) above += c->ref[1].ref[r] > 44;
    assert_true(above > 100);
    parity_case_free(c);
}

/* Each catalog kernel of op_name on a small softcap case (causal, T = 192 or 128, so rows have
 * up to three key blocks of 64): the verdict from the judged outputs must be the catalog's
 * expectation. */
static void verdicts_of(const char *op_name, const char *wl_name, int min_kernels, const char *only)
{
    parity_workload_t wl;
    parity_case_t *c = build_op(op_name, wl_name, PARITY_DT_BF16, &wl);
    int seen = 0;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op_name) != 0) continue;
        /* only: judge that kernel alone. Otherwise all but acc_bf16 (a bf16 output accumulator),
         * which only departs on long rows of many key blocks: long_rows_catch_acc_bf16. */
        if (only ? strcmp(k->name, only) != 0 : strcmp(k->name, "acc_bf16") == 0) continue;
        double q = cu_judge_kernel(k, c);
        if ((q <= 1) != (strcmp(k->expected, "faithful") == 0))
            fail_msg("%s %s: err/tol %g, expected %s (seed 1)", op_name, k->name, q, k->expected);
        seen++;
    }
    assert_true(seen >= min_kernels);
    parity_case_free(c);
}

static void catalog_verdicts(void **state)
{
    (void)state;
    verdicts_of("attention_fwd", "softcap@192x64x1", 8, NULL);
}

/* acc_bf16 on rows of up to 16 key blocks with outlier channels: unfaithful (2.25, seed 1). */
static void long_rows_catch_acc_bf16(void **state)
{
    (void)state;
    verdicts_of("attention_fwd", "outlier-channels@1024x128x1", 1, "acc_bf16");
}

static void bwd_catalog_verdicts(void **state)
{
    (void)state;
    verdicts_of("attention_bwd", "softcap@128x64x1", 6, NULL);
}

/* Backward, T = 1: P = 1 and D = dO.O = dO.v = dP, so dS = 0: dQ = dK = 0 and dV = dO. */
static void bwd_one_key(void **state)
{
    (void)state;
    double q[2] = {1, -2}, k[2] = {0.5, 3}, v[2] = {4, -1}, o[2] = {4, -1}, go[2] = {0.25, 2};
    double lse = 0.7 * (0.5 - 6), dq[2], dk[2], dv[2];
    parity_ref_attention_bwd(q, k, v, o, go, &lse, 1, 1, 2, 0.7, 0, 1, dq, dk, dv);
    for (int c = 0; c < 2; c++) {
        assert_true(dq[c] == 0 && dk[c] == 0);
        assert_true(dv[c] == go[c]);
    }
}

/* L = Σ dO.O as a function of Q, K, V through the fp64 forward reference. */
static double loss_of(const double *Q, const double *K, const double *V, const double *dO, int64_t T,
                      int64_t dh, double scale, double cap, int causal, double *O, double *LSE)
{
    double work[5 * 8], sacc[4], sup[4], lsup, L = 0;
    for (int64_t i = 0; i < T; i++) {
        parity_ref_attention_row(Q + i * dh, K, V, causal ? i + 1 : T, dh, scale, cap, O + i * dh,
                                 LSE + i, sacc, sup, &lsup, work);
        for (int64_t c = 0; c < dh; c++) L += dO[i * dh + c] * O[i * dh + c];
    }
    return L;
}

/* The backward reference against central differences of the forward reference, on T = 3, Dh = 2
 * with and without a mask and a softcap (c = 1.5 on scores up to about 3: tanh bends them). */
static void bwd_finite_differences(void **state)
{
    (void)state;
    const int64_t T = 3, dh = 2, n = T * dh;
    double Q[6] = {1.2, -0.7, 0.3, 2.1, -1.5, 0.8}, K[6] = {0.9, 1.1, -2.0, 0.4, 1.3, -0.6};
    double V[6] = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5}, dO[6] = {1.0, -0.5, 0.3, 0.8, -1.2, 0.6};
    for (int variant = 0; variant < 4; variant++) {
        int causal = variant & 1;
        double cap = variant & 2 ? 1.5 : 0, scale = 0.9;
        double O[6], LSE[3], dQ[6], dK[6], dV[6];
        loss_of(Q, K, V, dO, T, dh, scale, cap, causal, O, LSE);
        parity_ref_attention_bwd(Q, K, V, O, dO, LSE, 1, T, dh, scale, cap, causal, dQ, dK, dV);
        double *X[3] = {Q, K, V}, *G[3] = {dQ, dK, dV};
        for (int a = 0; a < 3; a++)
            for (int64_t e = 0; e < n; e++) {
                double x0 = X[a][e], h = 1e-6, O2[6], L2[3];
                X[a][e] = x0 + h;
                double lp = loss_of(Q, K, V, dO, T, dh, scale, cap, causal, O2, L2);
                X[a][e] = x0 - h;
                double lm = loss_of(Q, K, V, dO, T, dh, scale, cap, causal, O2, L2);
                X[a][e] = x0;
                double fd = (lp - lm) / (2 * h);
                if (fabs(fd - G[a][e]) > 1e-8 * (1 + fabs(fd)))
                    fail_msg("variant %d input %d elem %lld: reference %.12g, central difference %.12g",
                             variant, a, (long long)e, G[a][e], fd);
            }
    }
}

/* A built backward case: k per row (dQ: attended keys; dK, dV: queries attending the key), the
 * reference equal to parity_ref_attention_bwd on the stored inputs, s_acc >= |ref|. */
static void bwd_case_data(void **state)
{
    (void)state;
    parity_workload_t wl;
    parity_case_t *c = build_op("attention_bwd", "softcap@24x16x2", PARITY_DT_BF16, &wl);
    const int64_t H = 2, T = 24, dh = 16, n = H * T * dh;
    assert_true(c->inputs[5]->view.dtype == PARITY_DT_F32); /* LSE stays fp32 */
    double *in[6], *g[3];
    for (int a = 0; a < 6; a++) {
        int64_t m = a == 5 ? H * T : n;
        in[a] = malloc((size_t)m * sizeof(double));
        for (int64_t e = 0; e < m; e++) in[a][e] = parity_tensor_get(&c->inputs[a]->view, e);
    }
    for (int o = 0; o < 3; o++) g[o] = malloc((size_t)n * sizeof(double));
    parity_ref_attention_bwd(in[0], in[1], in[2], in[3], in[4], in[5], H, T, dh, attr(c, "scale"), 50, 1,
                             g[0], g[1], g[2]);
    for (int o = 0; o < 3; o++) {
        const parity_ref_output_t *R = &c->ref[o];
        assert_int_equal(R->m_up, dh + 2);
        for (int64_t r = 0; r < H * T; r++) {
            assert_int_equal(R->k[r], o == 0 ? r % T + 1 : T - r % T);
            for (int64_t e = 0; e < dh; e++) {
                double ref = R->ref[r * dh + e];
                CLOSE(ref, g[o][r * dh + e], 1e-12 * (1 + R->s_acc[r * dh + e]));
                assert_true(R->s_acc[r * dh + e] >= fabs(ref) * (1 - 1e-12));
                assert_true(R->s_up[r * dh + e] >= R->s_acc[r * dh + e] * (1 - 1e-12));
            }
        }
    }
    for (int a = 0; a < 6; a++) free(in[a]);
    for (int o = 0; o < 3; o++) free(g[o]);
    parity_case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_key_gives_v),
        cmocka_unit_test(two_keys_by_hand),
        cmocka_unit_test(softcap_by_hand),
        cmocka_unit_test(causal_case_data),
        cmocka_unit_test(full_softcap_case_data),
        cmocka_unit_test(split_not_applied),
        cmocka_unit_test(fp32_inputs_have_no_operand_rounding),
        cmocka_unit_test(softcap_workload_exceeds_cap),
        cmocka_unit_test(catalog_verdicts),
        cmocka_unit_test(long_rows_catch_acc_bf16),
        cmocka_unit_test(bwd_one_key),
        cmocka_unit_test(bwd_finite_differences),
        cmocka_unit_test(bwd_case_data),
        cmocka_unit_test(bwd_catalog_verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

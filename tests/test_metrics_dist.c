/* metrics: the distribution metrics of aligned logprob pairs (KL estimators, importance weights,
 * sequences, top-k, merge == single pass, the ctypes field table) against values worked out by
 * hand (derivations in the comments). Split from test_metrics.c (error metrics, quantiles).
 * Seeds are fixed and printed in every failure message. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/metrics.h"
#include "parity/rng.h"

#include "test_metrics_close.h"

/* ------------------------------------------------------------------------------------------ */
/* distribution metrics                                                                       */
/* ------------------------------------------------------------------------------------------ */

#define LN2 0.69314718055994530942

static void dist_hand_values(void **state)
{
    (void)state;
    /* One token with p_A = 1/2, p_B = 1/4: a = -ln 2, b = -2 ln 2, log r = a - b = ln 2, r = 2.
     *   k1 = -ln 2; k2 = (ln 2)^2 / 2 = 0.24022650695910072;
     *   k3 = (2 - 1) - ln 2 = 0.30685281944005469; chi2 = (2 - 1)^2 = 1;
     *   |dlogprob| = ln 2, |dprob| = 1/4, weight 2 (inside the closed [0.5, 2]). */
    double a[] = {-LN2}, b[] = {-2 * LN2};
    parity_dist_t *d;
    assert_int_equal(parity_metrics_dist_new(NULL, &d), PARITY_OK);
    assert_int_equal(parity_metrics_dist_add_tokens(d, a, b, 1), PARITY_OK);
    parity_dist_summary_t s;
    assert_int_equal(parity_metrics_dist_summary(d, &s), PARITY_OK);
    CLOSE(s.k1_mean, -LN2, 1e-15);
    CLOSE(s.k2_mean, 0.24022650695910072, 1e-15);
    CLOSE(s.k3_mean, 0.30685281944005469, 1e-15);
    CLOSE(s.chi2_mean, 1.0, 1e-15);
    CLOSE(s.abs_dlogprob_max, LN2, 1e-15);
    CLOSE(s.abs_dlogprob_p50, LN2, 1e-15);
    CLOSE(s.abs_dprob_max, 0.25, 1e-15);
    CLOSE(s.iw_mean, 2.0, 1e-15);
    EXACT(s.iw_frac_out, 0.0);
    EXACT(s.iw_std, 0.0);
    EXACT(s.iw_ess, 1.0);
    assert_true(isnan(s.pearson_p)); /* one point: zero variance */
    parity_metrics_dist_free(d);

    /* k3 directly, also where the naive expm1(x) - x cancels: e^x - 1 - x at x = 1e-8 is
     * x^2/2 + x^3/6 + ... = 5.0000000166666667e-17; at x = -1e-3 it is
     * 5e-7 - 1.6666667e-10 + 4.1666667e-14 - 8.3e-18 ... = 4.998333749916681e-7 (series to 1e-25). */
    CLOSE(parity_metrics_k3(LN2), 0.30685281944005469, 1e-15);
    CLOSE(parity_metrics_k3(1e-8), 5.0000000166666667e-17, 1e-15);
    CLOSE(parity_metrics_k3(-1e-3), 4.998333749916681e-7, 1e-15);
    EXACT(parity_metrics_k3(0.0), 0.0);
    /* The two branches meet at |x| = 1/2: e^0.5 - 1.5 = 0.14872127070012815,
     * e^-0.5 - 0.5 = 0.10653065971263342. */
    CLOSE(parity_metrics_k3(0.5), 0.14872127070012815, 2e-15);
    CLOSE(parity_metrics_k3(nextafter(0.5, 1)), 0.14872127070012815, 2e-15);
    CLOSE(parity_metrics_k3(-0.5), 0.10653065971263342, 2e-15);
    CLOSE(parity_metrics_k3(nextafter(-0.5, -1)), 0.10653065971263342, 2e-15);
    EXACT(parity_metrics_k3(-INFINITY), INFINITY);
}

static void dist_importance_weights(void **state)
{
    (void)state;
    /* Weights [1, 1, 2] (log r = 0, 0, ln 2): Kish ESS = (1+1+2)^2 / (1+1+4) = 16/6, over
     * n = 3: 16/6/3 = 0.888...; mean 4/3; std (ddof 0) sqrt(mean w^2 - mean^2)
     * = sqrt(2 - 16/9) = sqrt(2)/3. With iw_high = 1.5 one of three is above. */
    double a[] = {-LN2, -LN2, 0.0}, b[] = {-LN2, -LN2, -LN2};
    parity_dist_opts_t o = {0.5, 1.5};
    parity_dist_t *d;
    assert_int_equal(parity_metrics_dist_new(&o, &d), PARITY_OK);
    parity_metrics_dist_add_tokens(d, a, b, 3);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    CLOSE(s.iw_ess, 16.0 / 6.0 / 3.0, 1e-15);
    CLOSE(s.iw_mean, 4.0 / 3.0, 1e-15);
    CLOSE(s.iw_std, sqrt(2.0) / 3.0, 1e-15);
    EXACT(s.iw_min, 1.0);
    CLOSE(s.iw_max, 2.0, 1e-15);
    CLOSE(s.iw_frac_high, 1.0 / 3.0, 1e-15);
    EXACT(s.iw_frac_low, 0.0);
    CLOSE(s.iw_frac_out, 1.0 / 3.0, 1e-15);
    /* exact |dlogprob| quantiles of {0, 0, ln 2}: p50 = 0; p99: h = 1.98, g = 0.98 ->
     * ln2 - ln2 * (1 - 0.98) */
    CLOSE(s.abs_dlogprob_p50, 0.0, 0);
    CLOSE(s.abs_dlogprob_p99, LN2 * 0.98, 1e-14);
    double v;
    assert_int_equal(parity_metrics_dist_quantile(d, PARITY_DIST_ABS_DPROB, 1.0, &v), PARITY_OK);
    CLOSE(v, 0.5, 1e-15); /* |1 - 1/2| */
    assert_int_equal(parity_metrics_dist_quantile(d, (parity_dist_qty_t)7, 0.5, &v), PARITY_E_INVALID);
    parity_metrics_dist_free(d);
    parity_dist_opts_t bad = {2.0, 1.0};
    assert_int_equal(parity_metrics_dist_new(&bad, &d), PARITY_E_INVALID);
    assert_null(d);
}

static void dist_empty_equal_nonfinite(void **state)
{
    (void)state;
    parity_dist_t *d;
    parity_dist_summary_t s;
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tok, 0);
    EXACT(s.k3_mean, 0);
    EXACT(s.abs_dlogprob_p99, 0);
    EXACT(s.iw_ess, 0);
    assert_true(isnan(s.pearson_p));

    /* Identical varying logprobs: every divergence 0, weights all 1, Pearson 1. */
    double a[] = {-0.1, -1.0, -3.0, -0.5};
    parity_metrics_dist_add_seq(d, a, a, 4);
    parity_metrics_dist_summary(d, &s);
    EXACT(s.k1_mean, 0);
    EXACT(s.k3_mean, 0);
    EXACT(s.chi2_max, 0);
    EXACT(s.abs_dprob_p999, 0);
    EXACT(s.iw_ess, 1.0);
    EXACT(s.iw_frac_out, 0.0);
    CLOSE(s.pearson_p, 1.0, 1e-15);
    EXACT(s.dlogppl_mean, 0);
    EXACT(s.ppl_ratio_min, 1.0);
    parity_metrics_dist_free(d);

    /* 0 finite; 1 NaN (invalid); 2 +inf (invalid); 3 both -inf (zero match); 4 -inf vs
     * finite (mismatch). The sequence has finite pairs and non-finite ones. */
    double x[] = {-1.0, NAN, -1.0, -INFINITY, -INFINITY};
    double y[] = {-2.0, -1.0, INFINITY, -INFINITY, -0.5};
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_add_seq(d, x, y, 5);
    parity_metrics_dist_add_seq(d, x + 1, y + 1, 4); /* no finite pair: empty */
    parity_metrics_dist_add_seq(d, NULL, NULL, 0);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tok, 9);
    assert_int_equal(s.n_finite, 1);
    assert_int_equal(s.n_invalid, 4);
    assert_int_equal(s.n_zero_match, 2);
    assert_int_equal(s.n_inf_mismatch, 2);
    assert_int_equal(s.n_seq, 3);
    assert_int_equal(s.n_seq_empty, 2);
    assert_int_equal(s.n_seq_nonfinite, 2);
    EXACT(s.dlogppl_mean, 1.0); /* only sequence 0's finite pair: log r = -1 - -2 = 1 */
    parity_metrics_dist_free(d);
    parity_metrics_dist_free(NULL);
}

static void dist_sequences(void **state)
{
    (void)state;
    /* Two tokens with p_A = 1/2, p_B = 1/4: ppl_A = 2, ppl_B = 4, logppl_B - logppl_A = ln 2,
     * ppl ratio 2, product of weights 4, so chi2_seq = (4 - 1)^2 = 9. */
    double a[] = {-LN2, -LN2}, b[] = {-2 * LN2, -2 * LN2};
    parity_seq_metrics_t m;
    assert_int_equal(parity_metrics_seq(a, b, 2, &m), PARITY_OK);
    CLOSE(m.logppl_a, LN2, 1e-15);
    CLOSE(m.logppl_b, 2 * LN2, 1e-15);
    CLOSE(m.dlogppl, LN2, 1e-15);
    CLOSE(m.ppl_ratio, 2.0, 1e-15);
    CLOSE(m.chi2_seq, 9.0, 1e-14);
    CLOSE(m.k1_mean, -LN2, 1e-15);
    CLOSE(m.k3_mean, 1 - LN2, 1e-15);
    /* A second sequence, identical: ratio 1. Means over 2 sequences, min 1, max 2. */
    parity_dist_t *d;
    parity_metrics_dist_new(NULL, &d);
    parity_metrics_dist_add_seq(d, a, b, 2);
    parity_metrics_dist_add_seq(d, a, a, 2);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    CLOSE(s.ppl_ratio_mean, 1.5, 1e-15);
    EXACT(s.ppl_ratio_min, 1.0);
    CLOSE(s.ppl_ratio_max, 2.0, 1e-15);
    CLOSE(s.dlogppl_mean, LN2 / 2, 1e-15);
    CLOSE(s.dlogppl_max_abs, LN2, 1e-15);
    CLOSE(s.chi2_seq_mean, 4.5, 1e-14);
    parity_metrics_dist_free(d);
    assert_int_equal(parity_metrics_seq(NULL, b, 2, &m), PARITY_E_INVALID);
}

static void dist_topk(void **state)
{
    (void)state;
    /* token 0: A [1 2 3], B [1 3 4]: top-1 agrees, overlap {1, 3} = 2/3.
     * token 1: A [5 6 7], B [6 5 -1]: top-1 differs, overlap {5, 6} = 2/3.
     * token 2: A [9 9 8], B [9 8 7]: duplicates count once, {9, 8} = 2/3; top-1 agrees.
     * token 3: A [-1 -1 -1], B [-1 -1 -1]: padding never matches: 0. */
    int32_t ia[] = {1, 2, 3, 5, 6, 7, 9, 9, 8, -1, -1, -1};
    int32_t ib[] = {1, 3, 4, 6, 5, -1, 9, 8, 7, -1, -1, -1};
    parity_dist_t *d;
    parity_metrics_dist_new(NULL, &d);
    assert_int_equal(parity_metrics_dist_add_topk(d, ia, ib, 4, 3), PARITY_OK);
    parity_dist_summary_t s;
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_topk, 4);
    EXACT(s.top1_agree, 0.5);
    CLOSE(s.topk_overlap_mean, 0.5, 1e-15); /* (2/3 * 3 + 0) / 4 */
    assert_int_equal(parity_metrics_dist_add_topk(d, ia, ib, 1, 0), PARITY_E_INVALID);

    /* Truncated KL, k = 1: p_B = 1/2, p_A = 1/4 on the id; tails 1/2 and 3/4:
     * 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3) = 0.14384103622589045. */
    double la[] = {-2 * LN2}, lb[] = {-LN2};
    CLOSE(parity_metrics_topk_kl(la, lb, 1), 0.14384103622589045, 1e-15);
    /* S = the whole support (3 ids, masses summing to 1): the tail is empty and the value is
     * the full KL(B || A) = sum p_B ln(p_B / p_A), p_B = (1/2, 1/4, 1/4), p_A = (1/4, 1/4, 1/2):
     * 1/2 ln 2 + 0 + 1/4 ln(1/2) = 1/4 ln 2. */
    double fa[] = {-2 * LN2, -2 * LN2, -LN2}, fb[] = {-LN2, -2 * LN2, -2 * LN2};
    CLOSE(parity_metrics_topk_kl(fa, fb, 3), LN2 / 4, 1e-14);
    /* A has all its mass on S (tail 0) while B has tail mass: +inf. NaN input: NaN. */
    double za[] = {0.0}, zb[] = {-LN2}, na[] = {NAN};
    EXACT(parity_metrics_topk_kl(za, zb, 1), INFINITY);
    assert_true(isnan(parity_metrics_topk_kl(na, zb, 1)));
    /* p_B = 0 on an id contributes 0 even where p_A = 0 too. */
    double ma[] = {-INFINITY, -LN2}, mb[] = {-INFINITY, -LN2};
    EXACT(parity_metrics_topk_kl(ma, mb, 2), 0.0);

    double tka[] = {-2 * LN2, 0.0, NAN}, tkb[] = {-LN2, -LN2, -LN2};
    assert_int_equal(parity_metrics_dist_add_topk_kl(d, tka, tkb, 3, 1), PARITY_OK);
    parity_metrics_dist_summary(d, &s);
    assert_int_equal(s.n_tkl, 1);
    assert_int_equal(s.n_tkl_inf, 1);
    assert_int_equal(s.n_tkl_invalid, 1);
    CLOSE(s.tkl_mean, 0.14384103622589045, 1e-15);
    EXACT(s.tkl_max, INFINITY);
    EXACT(parity_metrics_topk_overlap(ia, ib, 0), 0.0);
    parity_metrics_dist_free(d);
}

/* Random logprob pairs in sequences, split across accumulators and merged in order: counts,
 * extrema and quantiles must equal the single pass exactly, sums agree to a few ulps. */
static void dist_merge_equals_single_pass(void **state)
{
    (void)state;
    enum { N = 30000, K = 4 };
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *ta = malloc(N * K * sizeof *ta), *tb = malloc(N * K * sizeof *tb);
    int32_t *ia = malloc(N * K * sizeof *ia), *ib = malloc(N * K * sizeof *ib);
    assert_true(a && b && ta && tb && ia && ib);
    parity_rng_t g;
    parity_rng_seed(&g, SEED, 3);
    for (size_t i = 0; i < N; i++) {
        a[i] = -fabs(2.0 * parity_rng_normal(&g));
        b[i] = a[i] + 0.05 * parity_rng_normal(&g);
        if (b[i] > 0) b[i] = -b[i];
        if (parity_rng_below(&g, 1000) == 0) b[i] = NAN;
        for (size_t j = 0; j < K; j++) {
            ta[i * K + j] = -2.0 - 3.0 * parity_rng_uniform(&g);
            tb[i * K + j] = ta[i * K + j] + 0.1 * parity_rng_normal(&g);
            ia[i * K + j] = (int32_t)parity_rng_below(&g, 8);
            ib[i * K + j] = (int32_t)parity_rng_below(&g, 8);
        }
    }
    /* Sequences of lengths 1..100 in a fixed pattern. */
    parity_dist_t *one, *merged, *part;
    parity_metrics_dist_new(NULL, &one);
    parity_metrics_dist_new(NULL, &merged);
    size_t off = 0, len = 1, cut = N / 3, pstart = 0;
    parity_metrics_dist_new(NULL, &part);
    while (off < N) {
        size_t l = len < N - off ? len : N - off;
        parity_metrics_dist_add_seq(one, a + off, b + off, l);
        parity_metrics_dist_add_seq(part, a + off, b + off, l);
        off += l;
        len = len % 100 + 7;
        if (off >= cut || off == N) {
            parity_metrics_dist_add_topk(part, ia + pstart * K, ib + pstart * K, off - pstart, K);
            parity_metrics_dist_add_topk_kl(part, ta + pstart * K, tb + pstart * K, off - pstart, K);
            assert_int_equal(parity_metrics_dist_merge(merged, part), PARITY_OK);
            parity_metrics_dist_free(part);
            parity_metrics_dist_new(NULL, &part);
            pstart = off;
            cut += N / 3;
        }
    }
    parity_metrics_dist_free(part);
    parity_metrics_dist_add_topk(one, ia, ib, N, K);
    parity_metrics_dist_add_topk_kl(one, ta, tb, N, K);
    parity_dist_summary_t s1, s2;
    parity_metrics_dist_summary(one, &s1);
    parity_metrics_dist_summary(merged, &s2);
    assert_true(s1.n_invalid > 0 && s1.n_seq > 100);
    /* Counts, extrema and histogram quantiles exact; compensated sums and moments 1e-13. */
    assert_false(s1.n_finite <= PARITY_QSKETCH_EXACT_MAX); /* the histogram path is exercised */
    assert_int_equal(s1.n_tok, s2.n_tok);
    assert_int_equal(s1.n_finite, s2.n_finite);
    assert_int_equal(s1.n_invalid, s2.n_invalid);
    assert_int_equal(s1.n_seq, s2.n_seq);
    assert_int_equal(s1.n_seq_nonfinite, s2.n_seq_nonfinite);
    assert_int_equal(s1.n_topk, s2.n_topk);
    assert_int_equal(s1.n_tkl, s2.n_tkl);
    EXACT(s2.k3_max, s1.k3_max);
    EXACT(s2.abs_dlogprob_max, s1.abs_dlogprob_max);
    EXACT(s2.abs_dprob_max, s1.abs_dprob_max);
    EXACT(s2.chi2_max, s1.chi2_max);
    EXACT(s2.iw_min, s1.iw_min);
    EXACT(s2.iw_max, s1.iw_max);
    EXACT(s2.abs_dlogprob_p50, s1.abs_dlogprob_p50);
    EXACT(s2.abs_dlogprob_p99, s1.abs_dlogprob_p99);
    EXACT(s2.abs_dlogprob_p999, s1.abs_dlogprob_p999);
    EXACT(s2.abs_dprob_p999, s1.abs_dprob_p999);
    EXACT(s2.dlogppl_max_abs, s1.dlogppl_max_abs);
    EXACT(s2.ppl_ratio_min, s1.ppl_ratio_min);
    EXACT(s2.ppl_ratio_max, s1.ppl_ratio_max);
    EXACT(s2.tkl_max, s1.tkl_max);
    EXACT(s2.top1_agree, s1.top1_agree);
    EXACT(s2.iw_frac_out, s1.iw_frac_out);
    CLOSE(s2.k1_mean, s1.k1_mean, 1e-13);
    CLOSE(s2.k2_mean, s1.k2_mean, 1e-13);
    CLOSE(s2.k3_mean, s1.k3_mean, 1e-13);
    CLOSE(s2.abs_dprob_mean, s1.abs_dprob_mean, 1e-13);
    CLOSE(s2.chi2_mean, s1.chi2_mean, 1e-13);
    CLOSE(s2.iw_mean, s1.iw_mean, 1e-13);
    CLOSE(s2.iw_std, s1.iw_std, 1e-13);
    CLOSE(s2.iw_ess, s1.iw_ess, 1e-13);
    CLOSE(s2.pearson_p, s1.pearson_p, 1e-13);
    CLOSE(s2.dlogppl_mean, s1.dlogppl_mean, 1e-13);
    CLOSE(s2.ppl_ratio_mean, s1.ppl_ratio_mean, 1e-13);
    CLOSE(s2.chi2_seq_mean, s1.chi2_seq_mean, 1e-13);
    CLOSE(s2.topk_overlap_mean, s1.topk_overlap_mean, 1e-13);
    CLOSE(s2.tkl_mean, s1.tkl_mean, 1e-13);
    /* k3 >= 0 always; the sample means of k1 and k3 estimate the same KL(B || A). */
    assert_true(s1.k3_mean > 0 && s1.k1_mean > -1e-2);
    parity_dist_opts_t o = {0.25, 4.0};
    parity_dist_t *other;
    parity_metrics_dist_new(&o, &other);
    assert_int_equal(parity_metrics_dist_merge(one, other), PARITY_E_INVALID);
    parity_metrics_dist_free(other);
    parity_metrics_dist_free(one);
    parity_metrics_dist_free(merged);
    free(a);
    free(b);
    free(ta);
    free(tb);
    free(ia);
    free(ib);
}

static void dist_eval_fields(void **state)
{
    (void)state;
    double a[] = {-LN2, -LN2}, b[] = {-2 * LN2, -2 * LN2};
    uint64_t lens[] = {1, 1}, bad[] = {1, 2};
    int32_t ia[] = {1, 2}, ib[] = {1, 3};
    double out[PARITY_METRICS_DIST_NFIELDS];
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, lens, 2, ia, ib, NULL, NULL, 1, 2, 0.5, 2.0,
                                              out, PARITY_METRICS_DIST_NFIELDS),
                     PARITY_OK);
    size_t ik3 = 0, iseq = 0, iov = 0;
    for (size_t i = 0; i < PARITY_METRICS_DIST_NFIELDS; i++) {
        const char *nm = parity_metrics_dist_field_name(i);
        if (!strcmp(nm, "k3_mean")) ik3 = i;
        if (!strcmp(nm, "n_seq")) iseq = i;
        if (!strcmp(nm, "topk_overlap_mean")) iov = i;
    }
    assert_null(parity_metrics_dist_field_name(PARITY_METRICS_DIST_NFIELDS));
    CLOSE(out[ik3], 1 - LN2, 1e-15);
    EXACT(out[iseq], 2);
    EXACT(out[iov], 0.5);
    EXACT(out[0], 2); /* n_tok */
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, bad, 2, NULL, NULL, NULL, NULL, 0, 0, 0.5,
                                              2.0, out, 4),
                     PARITY_E_INVALID);
    assert_int_equal(parity_metrics_dist_eval(a, b, 2, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 3.0,
                                              2.0, out, 4),
                     PARITY_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dist_hand_values),
        cmocka_unit_test(dist_importance_weights),
        cmocka_unit_test(dist_empty_equal_nonfinite),
        cmocka_unit_test(dist_sequences),
        cmocka_unit_test(dist_topk),
        cmocka_unit_test(dist_merge_equals_single_pass),
        cmocka_unit_test(dist_eval_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

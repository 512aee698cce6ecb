/* moe: routing and combine worked out by hand (exact ties and the tie rule, bf16 summation order
 * with the bits, bf16 vs fp32 softmax values), the fast rounding paths against the format module,
 * spec parsing, and whole runs: identical specs are bit-identical, perturbation 0 flips nothing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/format.h"
#include "parity/moe.h"
#include "parity/rng.h"

static parity_moe_spec_t spec(const char *text)
{
    parity_moe_spec_t s;
    parity_diag_t d;
    if (parity_moe_spec_parse(text, NULL, &s, &d)) fail_msg("spec '%s': %s", text, d.msg);
    return s;
}

static uint16_t bits(double x) { return parity_fp32_to_bf16_1((float)x); }

static uint32_t bits32(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Two experts with equal logits: equal probabilities 0.5; K = 1 picks expert 0 under lowid and
 * expert 1 under highid. Four equal experts, K = 2: lowid (0, 1), highid (3, 2); renormalised
 * weights 0.25 / 0.5 = 0.5 each. */
static void exact_ties(void **state)
{
    (void)state;
    const double l2[2] = {0.5, 0.5};
    int32_t id[2];
    double w[2];
    parity_moe_spec_t lo = spec("topk=lowid,weights=fp32"), hi = spec("topk=highid,weights=fp32");
    parity_moe_route(&lo, l2, 2, 1, id, w);
    assert_int_equal(id[0], 0);
    assert_true(w[0] == 1.0); /* renorm: 0.5 / 0.5 */
    parity_moe_route(&hi, l2, 2, 1, id, w);
    assert_int_equal(id[0], 1);
    const double l4[4] = {0, 0, 0, 0};
    parity_moe_route(&lo, l4, 4, 2, id, w);
    assert_int_equal(id[0], 0);
    assert_int_equal(id[1], 1);
    assert_true(w[0] == 0.5 && w[1] == 0.5);
    parity_moe_route(&hi, l4, 4, 2, id, w);
    assert_int_equal(id[0], 3);
    assert_int_equal(id[1], 2);
    /* Without renormalisation the weights are the probabilities. */
    parity_moe_spec_t raw = spec("renorm=0,weights=fp32");
    parity_moe_route(&raw, l4, 4, 2, id, w);
    assert_true(w[0] == 0.25 && w[1] == 0.25);
    /* Slot order is descending probability: 3 > 2 > 1. */
    const double p[4] = {0.1, 0.2, 0.4, 0.3};
    int32_t ids[3];
    parity_moe_topk(p, 4, 3, PARITY_MOE_TIE_LOWID, ids);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 1);
}

/* Slot order vs expert-id order in a bf16 buffer. Slots (2, 0, 1) with weight 1, D = 1, outputs
 * y_2 = 256, y_0 = 1, y_1 = 1. bf16 has 8 significant bits: ulp(256) = 2.
 *   slot order, bf16buf:   256 + 1 = 257 -> 256 (tie, even), + 1 -> 256          = 0x4380
 *   expert order, bf16buf: 1 + 1 = 2, 2 + 256 = 258 (exact)                       = 0x4381
 *   any order in fp32 (bf16prod, fp32acc, fp32fma): 258, rounded once             = 0x4381
 * With a shared expert s = 1:
 *   before, slot order:   1 + 256 = 257 -> 256, +1 -> 256, +1 -> 256              = 0x4380
 *   before, expert order: 1 + 1 + 1 = 3, + 256 = 259 -> 260 (tie, even: 0x4382)  = 0x4382
 *   after, expert order:  258, + 1 = 259 -> 260                                   = 0x4382
 *   after, slot order:    256, + 1 = 257 -> 256                                   = 0x4380 */
static void slot_vs_expert_order(void **state)
{
    (void)state;
    const int32_t ids[3] = {2, 0, 1};
    const double w[3] = {1, 1, 1}, y[3] = {256, 1, 1}, s[1] = {1};
    struct {
        const char *spec;
        uint16_t want;
    } cases[] = {
        {"order=slot,combine=bf16buf,shared=none", 0x4380},
        {"order=expert,combine=bf16buf,shared=none", 0x4381},
        {"order=slot,combine=bf16prod,shared=none", 0x4381},
        {"order=slot,combine=fp32acc,shared=none", 0x4381},
        {"order=slot,combine=fp32fma,shared=none", 0x4381},
        {"order=expert,combine=fp32acc,shared=none", 0x4381},
        {"order=slot,combine=bf16buf,shared=before", 0x4380},
        {"order=expert,combine=bf16buf,shared=before", 0x4382},
        {"order=expert,combine=bf16buf,shared=after", 0x4382},
        {"order=slot,combine=bf16buf,shared=after", 0x4380},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parity_moe_spec_t sp = spec(cases[i].spec);
        double out;
        parity_moe_combine(&sp, ids, w, 3, y, s, 1, &out);
        if (bits(out) != cases[i].want)
            fail_msg("%s: got %g (0x%04x), want 0x%04x", cases[i].spec, out, bits(out),
                     cases[i].want);
    }
    /* The weight multiply: each bf16(w * y) vs exact products in fp32. w = 1 + 2^-8 (an fp32
     * weight), y = 1, three slots. bf16 ulp at 1 is 2^-7, so bf16(w) = 1 (a tie, to even):
     *   bf16buf:  1 + 1 + 1 = 3                                                   = 0x4040
     *   fp32fma:  3 + 3 * 2^-8 = 3.01171875 exact in fp32; bf16 ulp at 3 is 2^-6, 0.75 ulp
     *             above 3 -> 3.015625                                             = 0x4041 */
    const int32_t id3[3] = {0, 1, 2};
    const double w3[3] = {1 + 1.0 / 256, 1 + 1.0 / 256, 1 + 1.0 / 256}, y3[3] = {1, 1, 1};
    parity_moe_spec_t a = spec("combine=bf16buf,shared=none"), b = spec("combine=fp32fma,shared=none");
    double oa, ob;
    parity_moe_combine(&a, id3, w3, 3, y3, NULL, 1, &oa);
    parity_moe_combine(&b, id3, w3, 3, y3, NULL, 1, &ob);
    assert_int_equal(bits(oa), 0x4040);
    assert_int_equal(bits(ob), 0x4041);
}

/* Softmax of logits (0, 1 + 2^-8).
 * fp32: m = 1.00390625, e0 = fp32(exp(-1.00390625)), s = fp32(e0 + 1), p = fp32(e / s):
 *   p = (0x3e894e1e, 0x3f3b58f1) = (0.268174112, 0.731825888) (numpy float32, same steps).
 * bf16: the logit 1 + 2^-8 rounds to 1 (a tie, to even), so p = bf16(softmax(0, 1)):
 *   0.268941 -> 0.26953125 (138 * 2^-9), 0.731059 -> 0.73046875 (187 * 2^-8).
 * torch 1.13 on CPU gives (0.26953125, 0.73046875) for the bf16 tensor; for fp32 it gives
 * 0.268174082 for p0 (1 ulp from ours: its exp/sum differ; docs/moe.md). */
static void softmax_bf16_vs_fp32(void **state)
{
    (void)state;
    const double l[2] = {0, 1 + 1.0 / 256};
    double p[2];
    parity_moe_softmax(PARITY_MOE_SOFTMAX_FP32, l, 2, p);
    assert_int_equal(bits32(p[0]), 0x3e894e1eu);
    assert_int_equal(bits32(p[1]), 0x3f3b58f1u);
    parity_moe_softmax(PARITY_MOE_SOFTMAX_BF16, l, 2, p);
    assert_true(p[0] == 0.26953125);
    assert_true(p[1] == 0.73046875);
    /* Routing flips with the softmax format: logits (1, 1 + 2^-8). fp32 picks expert 1; in bf16
     * both logits are 1, an exact tie, and the tie rule decides. */
    const double l2[2] = {1, 1 + 1.0 / 256};
    int32_t id;
    double w;
    parity_moe_spec_t f32 = spec("softmax=fp32"), b16 = spec("softmax=bf16"),
                      b16h = spec("softmax=bf16,topk=highid");
    parity_moe_route(&f32, l2, 2, 1, &id, &w);
    assert_int_equal(id, 1);
    parity_moe_route(&b16, l2, 2, 1, &id, &w);
    assert_int_equal(id, 0);
    parity_moe_route(&b16h, l2, 2, 1, &id, &w);
    assert_int_equal(id, 1);
}

/* The module's fast rounding and additions against parity_format_add on the format module, on
 * random bf16/fp32 operands with exponent gaps up to 60 (the 2Sum fallback) and near ties. */
static void fast_paths_match_format(void **state)
{
    (void)state;
    parity_format_t bf, f32;
    parity_format_get("bf16", &bf, NULL);
    parity_format_get("fp32", &f32, NULL);
    parity_rng_t r;
    parity_rng_seed(&r, 7, 0);
    const char *specs[] = {"order=slot,combine=bf16buf,shared=none",
                           "order=slot,combine=fp32fma,shared=none",
                           "order=slot,combine=fp32acc,shared=before"};
    for (int it = 0; it < 20000; it++) {
        double y[3], w[3], s[1];
        for (int j = 0; j < 3; j++) {
            double mag = ldexp(1.0, (int)parity_rng_below(&r, 60) - 30);
            y[j] = parity_format_round(&bf, parity_rng_normal(&r) * mag, NULL, NULL);
            w[j] = parity_format_round(&f32, parity_rng_uniform(&r), NULL, NULL);
        }
        s[0] = parity_format_round(&bf, parity_rng_normal(&r), NULL, NULL);
        const int32_t ids[3] = {0, 1, 2};
        for (int c = 0; c < 3; c++) {
            parity_moe_spec_t sp = spec(specs[c]);
            double got, want = c == 2 ? s[0] : 0.0;
            parity_moe_combine(&sp, ids, w, 3, y, s, 1, &got);
            for (int j = 0; j < 3; j++) {
                double prod = w[j] * y[j];
                if (c == 0) want = parity_format_add(&bf, want, parity_format_round(&bf, prod, NULL, NULL), NULL, NULL);
                else if (c == 1) want = parity_format_add(&f32, want, prod, NULL, NULL);
                else want = parity_format_add(&f32, want, parity_format_round(&f32, prod, NULL, NULL), NULL, NULL);
            }
            if (c) want = parity_format_round(&bf, want, NULL, NULL);
            if (!(got == want))
                fail_msg("case %d (%s): got %a want %a (y %a %a %a, w %a %a %a)", it, specs[c], got,
                         want, y[0], y[1], y[2], w[0], w[1], w[2]);
        }
    }
}

static void spec_parse(void **state)
{
    (void)state;
    parity_moe_spec_t s, d = parity_moe_spec_default(), t;
    char buf[200];
    parity_moe_spec_str(&d, buf, sizeof buf);
    assert_string_equal(buf, "softmax=fp32,topk=lowid,renorm=1,weights=bf16,order=expert,"
                             "combine=bf16buf,shared=after");
    assert_int_equal(parity_moe_spec_parse("", NULL, &s, NULL), PARITY_OK);
    assert_true(parity_moe_spec_equal(&s, &d));
    assert_int_equal(parity_moe_spec_parse("softmax=bf16,order=slot,combine=fp32acc,shared=before,renorm=no",
                                           NULL, &s, NULL), PARITY_OK);
    parity_moe_spec_str(&s, buf, sizeof buf);
    assert_int_equal(parity_moe_spec_parse(buf, NULL, &t, NULL), PARITY_OK);
    assert_true(parity_moe_spec_equal(&s, &t));
    assert_int_equal(s.renorm, 0);
    /* Over a base: --b applies on top of --a. */
    assert_int_equal(parity_moe_spec_parse("topk=highid", &s, &t, NULL), PARITY_OK);
    assert_int_equal(t.softmax, PARITY_MOE_SOFTMAX_BF16);
    assert_int_equal(t.tie, PARITY_MOE_TIE_HIGHID);
    parity_diag_t dg;
    const char *bad[] = {"softmax=fp16", "bogus=1", "order", "order=slot,order=expert", "order=slot,",
                         "combine=", "=slot"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dg.msg[0] = 0;
        if (parity_moe_spec_parse(bad[i], NULL, &s, &dg) != PARITY_E_INVALID)
            fail_msg("'%s' should be rejected", bad[i]);
        assert_true(dg.msg[0] != 0);
    }
    assert_int_equal(parity_moe_spec_parse("softmax=fp16", NULL, &s, &dg), PARITY_E_INVALID);
    assert_non_null(strstr(dg.msg, "softmax=fp32|bf16"));
}

static parity_moe_config_t small(void)
{
    parity_moe_config_t c = parity_moe_config_default();
    c.t = 96, c.e = 16, c.k = 4, c.d = 48, c.seed = 3;
    return c;
}

/* The same spec twice: the same bits and routing. A different order: some elements differ but
 * the routing does not. */
static void runs_identical_and_not(void **state)
{
    (void)state;
    parity_moe_config_t c = small();
    size_t nd = c.t * c.d, nk = c.t * c.k;
    double *a = malloc(nd * sizeof *a), *b = malloc(nd * sizeof *b), *ex = malloc(nd * sizeof *ex);
    int32_t *ia = malloc(nk * sizeof *ia), *ib = malloc(nk * sizeof *ib), *ie = malloc(nk * sizeof *ie);
    assert_non_null(a), assert_non_null(b), assert_non_null(ex);
    assert_non_null(ia), assert_non_null(ib), assert_non_null(ie);
    parity_moe_spec_t s = spec("softmax=bf16,order=slot,combine=bf16buf,shared=before");
    assert_int_equal(parity_moe_run(&c, &s, a, ia, ex, ie), PARITY_OK);
    assert_int_equal(parity_moe_run(&c, &s, b, ib, NULL, NULL), PARITY_OK);
    assert_memory_equal(a, b, nd * sizeof *a);
    assert_memory_equal(ia, ib, nk * sizeof *ia);
    assert_int_equal(parity_moe_set_differ(ia, ib, c.t, c.k), 0);
    parity_moe_spec_t o = spec("softmax=bf16,order=expert,combine=bf16buf,shared=before");
    assert_int_equal(parity_moe_run(&c, &o, b, ib, NULL, NULL), PARITY_OK);
    assert_int_equal(parity_moe_set_differ(ia, ib, c.t, c.k), 0);
    size_t nd_differ = 0;
    for (size_t i = 0; i < nd; i++) nd_differ += a[i] != b[i];
    assert_true(nd_differ > 0);
    /* Every output is a bf16 value; so is the reference. */
    for (size_t i = 0; i < nd; i++) {
        assert_true((double)parity_round_bf16((float)a[i]) == a[i]);
        assert_true((double)parity_round_bf16((float)ex[i]) == ex[i]);
    }
    free(a), free(b), free(ex), free(ia), free(ib), free(ie);
}

/* Perturbation 0 flips nothing; a large one flips many; ties at the boundary make lowid and highid
 * disagree on every tied token (fp32 softmax: equal logits give equal probabilities). */
static void flips(void **state)
{
    (void)state;
    parity_moe_config_t c = small();
    parity_moe_spec_t s = parity_moe_spec_default();
    double f;
    assert_int_equal(parity_moe_flip_frac(&c, &s, 0.0, &f), PARITY_OK);
    assert_true(f == 0.0);
    assert_int_equal(parity_moe_flip_frac(&c, &s, 1.0, &f), PARITY_OK);
    assert_true(f > 0.3);
    assert_int_equal(parity_moe_flip_frac(&c, &s, -1.0, &f), PARITY_E_INVALID);
    c.ties = 1.0;
    size_t nk = c.t * c.k;
    int32_t *ia = malloc(nk * sizeof *ia), *ib = malloc(nk * sizeof *ib);
    assert_non_null(ia), assert_non_null(ib);
    parity_moe_spec_t hi = spec("topk=highid");
    assert_int_equal(parity_moe_run(&c, &s, NULL, ia, NULL, NULL), PARITY_OK);
    assert_int_equal(parity_moe_run(&c, &hi, NULL, ib, NULL, NULL), PARITY_OK);
    assert_int_equal(parity_moe_set_differ(ia, ib, c.t, c.k), c.t);
    c.ties = 0.0;
    assert_int_equal(parity_moe_run(&c, &s, NULL, ia, NULL, NULL), PARITY_OK);
    assert_int_equal(parity_moe_run(&c, &hi, NULL, ib, NULL, NULL), PARITY_OK);
    assert_int_equal(parity_moe_set_differ(ia, ib, c.t, c.k), 0);
    free(ia), free(ib);
    /* Bad configs are rejected with a message. */
    parity_diag_t d;
    c.k = 17;
    assert_int_equal(parity_moe_config_check(&c, &d), PARITY_E_INVALID);
    assert_non_null(strstr(d.msg, "top-k"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_ties),
        cmocka_unit_test(slot_vs_expert_order),
        cmocka_unit_test(softmax_bf16_vs_fp32),
        cmocka_unit_test(fast_paths_match_format),
        cmocka_unit_test(spec_parse),
        cmocka_unit_test(runs_identical_and_not),
        cmocka_unit_test(flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

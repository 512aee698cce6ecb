/* logprob_rl: the RL effects of a trainer/rollout mismatch against values worked out by hand
 * (k3 with either side as the policy, the importance-weighted k3, PPO clip fractions, truncated
 * importance weights, per modality), pairing (requests by id in any order, tokens up to the
 * first token-id divergence, one-sided requests ignored), options, and identical dumps giving
 * exactly zero bias and unit weights. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/logprob_rl.h"

/* Four tokens with log r = a - b = ln 2, -ln 2, 0, ln 3 (r = 2, 1/2, 1, 3), b = -2 (every value a logprob, <= 0); the first two
 * tagged image. B lists the requests in the other order, and has a request A lacks; request
 * "d" diverges at its second token. test_mixed_tags reads a batch that mixes tagged and untagged
 * records (the reader's modality renumbering once read the unwritten mod[] of plain sequences). */
static const char *A_JSONL =
    "{\"id\": \"r\", \"token_ids\": [5, 6, 7, 8], \"logprobs\": [-1.3068528194400547, -2.6931471805599454, -2, -0.90138771133189022], \"modality\": [\"image\", \"image\", \"text\", \"text\"]}\n"
    "{\"id\": \"d\", \"token_ids\": [5, 9], \"logprobs\": [-2, -3], \"modality\": \"text\"}\n";
static const char *B_JSONL =
    "{\"id\": \"x\", \"token_ids\": [5], \"logprobs\": [-4], \"modality\": \"text\"}\n"
    "{\"id\": \"d\", \"token_ids\": [5, 10], \"logprobs\": [-2, -2], \"modality\": \"text\"}\n"
    "{\"id\": \"r\", \"token_ids\": [5, 6, 7, 8], \"logprobs\": [-2, -2, -2, -2], \"modality\": \"text\"}\n";

static parity_logprob_rl_result_t *run(const char *a, const char *b, const parity_logprob_rl_opts_t *o)
{
    parity_logprob_read_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.n_threads = 1;
    parity_logprob_reader_t *ra = NULL, *rb = NULL;
    parity_diag_t d;
    assert_int_equal(parity_logprob_open_mem(a, strlen(a), "a.jsonl", &ro, &ra, &d), PARITY_OK);
    assert_int_equal(parity_logprob_open_mem(b, strlen(b), "b.jsonl", &ro, &rb, &d), PARITY_OK);
    parity_logprob_rl_result_t *r = NULL;
    parity_status_t st = parity_logprob_rl_compute(ra, rb, o, &r, &d);
    if (st != PARITY_OK) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(st, PARITY_OK);
    parity_logprob_close(ra);
    parity_logprob_close(rb);
    return r;
}

static const parity_logprob_rl_slice_t *find(const parity_logprob_rl_result_t *r, const char *name)
{
    for (size_t i = 0; i < parity_logprob_rl_nslices(r); i++)
        if (!strcmp(parity_logprob_rl_slice(r, i)->name, name)) return parity_logprob_rl_slice(r, i);
    fail_msg("no slice %s", name);
    return NULL;
}

/* the logprobs in the dumps carry 17 digits: every value below holds to ~1e-15 */
#define NEAR(x, want) assert_true(fabs((x) - (double)(want)) <= 1e-14 * (1 + fabs((double)(want))))

static void test_hand_values(void **state)
{
    (void)state;
    parity_logprob_rl_result_t *r = run(A_JSONL, B_JSONL, NULL);
    const parity_logprob_rl_slice_t *s = find(r, "overall");
    /* request d contributes its first token (r = 1, all zero terms) before diverging: 5 tokens */
    assert_int_equal(s->n_tokens, 5);
    double l2 = log(2), l3 = log(3);
    /* (r - 1) - log r: (1 - l2) + (l2 - 1/2) + 0 + (2 - l3) + 0 */
    NEAR(s->k3_rollout, (2.5 - l3) / 5);
    /* (1/r - 1) + log r: (l2 - 1/2) + (1 - l2) + 0 + (l3 - 2/3) + 0 */
    NEAR(s->k3_trainer, (l3 - 1.0 / 6) / 5);
    /* 1 - r + r log r: (2 l2 - 1) + (1/2 - l2/2) + 0 + (3 l3 - 2) + 0 */
    NEAR(s->k3_trainer_is, (1.5 * l2 + 3 * l3 - 2.5) / 5);
    /* eps 0.2: r = 1/2 low; r = 2 and 3 high */
    NEAR(s->clip_frac_low, 1.0 / 5);
    NEAR(s->clip_frac_high, 2.0 / 5);
    NEAR(s->clip_frac, 3.0 / 5);
    /* cap 2: w = 2, 1/2, 1, 2, 1; only r = 3 exceeds the cap (r = 2 equals it) */
    NEAR(s->tis_mean, 6.5 / 5);
    NEAR(s->tis_max, 2);
    NEAR(s->tis_frac_capped, 1.0 / 5);
    NEAR(s->tis_ess, 6.5 * 6.5 / (5 * (4 + 0.25 + 1 + 4 + 1)));
    NEAR(s->iw_mean, 7.5 / 5);
    /* the image slice: r = 2 and 1/2 */
    const parity_logprob_rl_slice_t *im = find(r, "modality=image");
    assert_int_equal(im->n_tokens, 2);
    NEAR(im->k3_rollout, 0.25);
    NEAR(im->k3_trainer, 0.25);
    NEAR(im->clip_frac, 1);
    const parity_logprob_rl_slice_t *tx = find(r, "modality=text");
    assert_int_equal(tx->n_tokens, 3); /* r's last two and d's first */
    NEAR(tx->k3_rollout, (2 - l3) / 3);
    parity_logprob_rl_result_free(r);
    parity_logprob_rl_result_free(NULL);
}

static void test_options(void **state)
{
    (void)state;
    parity_logprob_rl_opts_t o = parity_logprob_rl_default_opts();
    assert_true(o.clip_eps == 0.2 && o.tis_cap == 2.0);
    o.clip_eps = 0.6, o.tis_cap = 2.5; /* r = 1/2 is inside [0.4, 1.6]; r = 3 capped at 2.5 */
    parity_logprob_rl_result_t *r = run(A_JSONL, B_JSONL, &o);
    const parity_logprob_rl_slice_t *s = find(r, "overall");
    NEAR(s->clip_frac_low, 0);
    NEAR(s->clip_frac_high, 2.0 / 5);
    NEAR(s->tis_mean, 7.0 / 5);
    NEAR(s->tis_max, 2.5);
    parity_logprob_rl_result_free(r);
    parity_logprob_reader_t *ra = NULL, *rb = NULL;
    parity_logprob_read_opts_t ro;
    memset(&ro, 0, sizeof ro);
    assert_int_equal(parity_logprob_open_mem(A_JSONL, strlen(A_JSONL), "a.jsonl", &ro, &ra, NULL), PARITY_OK);
    assert_int_equal(parity_logprob_open_mem(B_JSONL, strlen(B_JSONL), "b.jsonl", &ro, &rb, NULL), PARITY_OK);
    parity_diag_t d;
    o.clip_eps = 1.0;
    assert_int_equal(parity_logprob_rl_compute(ra, rb, &o, &r, &d), PARITY_E_INVALID);
    o.clip_eps = 0.2, o.tis_cap = 0.5;
    assert_int_equal(parity_logprob_rl_compute(ra, rb, &o, &r, &d), PARITY_E_INVALID);
    assert_null(r);
    assert_int_equal(parity_logprob_rl_compute(NULL, rb, NULL, &r, &d), PARITY_E_INVALID);
    parity_logprob_close(ra);
    parity_logprob_close(rb);
}

static void test_identical(void **state)
{
    (void)state;
    parity_logprob_rl_result_t *r = run(A_JSONL, A_JSONL, NULL);
    const parity_logprob_rl_slice_t *s = find(r, "overall");
    assert_int_equal(s->n_tokens, 6);
    assert_true(s->k3_rollout == 0 && s->k3_trainer == 0 && s->k3_trainer_is == 0);
    assert_true(s->clip_frac == 0 && s->tis_frac_capped == 0);
    assert_true(s->tis_mean == 1 && s->tis_max == 1 && s->tis_ess == 1 && s->iw_mean == 1);
    parity_logprob_rl_result_free(r);
}

static void test_mixed_tags(void **state)
{
    (void)state;
    static const char *A =
        "{\"id\": \"r\", \"token_ids\": [5, 6, 7, 8], \"logprobs\": [-1.3068528194400547, -2.6931471805599454, -2, -0.90138771133189022], \"modality\": [\"image\", \"image\", \"text\", \"text\"]}\n"
        "{\"id\": \"d\", \"token_ids\": [5, 9], \"logprobs\": [-2, -3]}\n";
    static const char *B =
        "{\"id\": \"d\", \"token_ids\": [5, 10], \"logprobs\": [-2, -2]}\n"
        "{\"id\": \"r\", \"token_ids\": [5, 6, 7, 8], \"logprobs\": [-2, -2, -2, -2]}\n";
    parity_logprob_rl_result_t *r = run(A, B, NULL);
    assert_int_equal(find(r, "overall")->n_tokens, 5);
    assert_int_equal(find(r, "modality=image")->n_tokens, 2);
    parity_logprob_rl_result_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_mixed_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

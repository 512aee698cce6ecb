/* manifest: validation messages name the field, --set typing, sorted deterministic output, and
 * the ranked diff (TP size and all-reduce above cosmetic differences). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/manifest.h"

static void validation(void **state)
{
    (void)state;
    parity_manifest_t *m = NULL;
    parity_diag_t d;
    assert_int_equal(parity_manifest_parse("{\"schema\": \"parity.manifest/1\"}", "x", &m, &d),
                     PARITY_OK);
    parity_manifest_free(m);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[1]", "expected a JSON object"},
        {"{\"schema\": \"parity.manifest/2\"}", "schema: expected"},
        {"{\"schema\": \"parity.manifest/1\", \"parallel\": {\"tp\": 0}}", "parallel.tp: expected a positive integer"},
        {"{\"schema\": \"parity.manifest/1\", \"parallel\": {\"tp\": 2.5}}", "parallel.tp"},
        {"{\"schema\": \"parity.manifest/1\", \"parallel\": 4}", "parallel: expected an object"},
        {"{\"schema\": \"parity.manifest/1\", \"parallel\": {\"rank_device_map\": [0, -1]}}", "rank_device_map"},
        {"{\"schema\": \"parity.manifest/1\", \"dtypes\": {\"weights\": 16}}", "dtypes.weights: expected a string"},
        {"{\"schema\": \"parity.manifest/1\"", "not valid JSON"},
        {"{\"schema\": \"parity.manifest/1\"} trailing", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = (parity_manifest_t *)1;
        assert_int_equal(parity_manifest_parse(bad[i].text, "f.json", &m, &d), PARITY_E_FORMAT);
        assert_null(m);
        assert_non_null(strstr(d.msg, bad[i].want));
        assert_non_null(strstr(d.msg, "f.json"));
    }
    assert_int_equal(parity_manifest_load("/nonexistent/m.json", &m, &d), PARITY_E_IO);
}

static void set_and_print(void **state)
{
    (void)state;
    parity_manifest_t *m = NULL;
    parity_diag_t d;
    assert_int_equal(parity_manifest_new(&m), PARITY_OK);
    assert_int_equal(parity_manifest_set(m, "parallel.tp", "8", &d), PARITY_OK);
    assert_int_equal(parity_manifest_set(m, "fusion.allreduce_rmsnorm", "true", &d), PARITY_OK);
    assert_int_equal(parity_manifest_set(m, "parallel.rank_device_map", "3,2,1,0", &d), PARITY_OK);
    assert_int_equal(parity_manifest_set(m, "nccl.NCCL_MAX_NCHANNELS", "16", &d), PARITY_OK);
    assert_int_equal(parity_manifest_set(m, "allreduce.algo", "ring", &d), PARITY_OK);
    /* Wrong types are rejected and leave m unchanged. */
    assert_int_equal(parity_manifest_set(m, "parallel.tp", "eight", &d), PARITY_E_FORMAT);
    assert_non_null(strstr(d.msg, "parallel.tp"));
    assert_int_equal(parity_manifest_set(m, "tp", "8", &d), PARITY_E_INVALID);
    assert_int_equal(parity_manifest_set(m, "schema.x", "8", &d), PARITY_E_INVALID);
    char *t = parity_manifest_to_json(m);
    assert_non_null(t);
    /* schema first, then sections sorted; NCCL values stay strings. */
    const char *s = strstr(t, "schema"), *a = strstr(t, "allreduce"), *f = strstr(t, "fusion"),
               *p = strstr(t, "parallel");
    assert_true(s && a && f && p && s < a && a < f && f < p);
    assert_non_null(strstr(t, "\"16\""));
    parity_manifest_t *back = NULL;
    assert_int_equal(parity_manifest_parse(t, "round-trip", &back, &d), PARITY_OK);
    parity_manifest_diff_t *diff = NULL;
    size_t n = 99;
    assert_int_equal(parity_manifest_diff(m, back, &diff, &n), PARITY_OK);
    assert_int_equal(n, 0);
    free(diff);
    free(t);
    parity_manifest_free(back);
    parity_manifest_free(m);
}

static void ranked_diff(void **state)
{
    (void)state;
    parity_manifest_t *a = NULL, *b = NULL;
    parity_diag_t d;
    assert_int_equal(parity_manifest_parse(
        "{\"schema\": \"parity.manifest/1\", \"host\": {\"name\": \"a\"}, \"notes\": {\"x\": 1},"
        " \"parallel\": {\"tp\": 8}, \"allreduce\": {\"algo\": \"ring\"}, \"gpu\": {\"driver\": \"535\"}}",
        "a", &a, &d), PARITY_OK);
    assert_int_equal(parity_manifest_parse(
        "{\"schema\": \"parity.manifest/1\", \"host\": {\"name\": \"b\"}, \"notes\": {\"x\": 2},"
        " \"parallel\": {\"tp\": 4}, \"allreduce\": {\"algo\": \"oneshot\"}, \"gpu\": {\"driver\": \"550\"},"
        " \"fusion\": {\"allreduce_rmsnorm\": true}}",
        "b", &b, &d), PARITY_OK);
    parity_manifest_diff_t *diff = NULL;
    size_t n = 0;
    assert_int_equal(parity_manifest_diff(a, b, &diff, &n), PARITY_OK);
    assert_int_equal(n, 6);
    assert_string_equal(diff[0].key, "parallel.tp");
    assert_string_equal(diff[1].key, "allreduce.algo");
    assert_string_equal(diff[2].key, "fusion.allreduce_rmsnorm");
    assert_string_equal(diff[2].a, "(absent)");
    assert_string_equal(diff[2].b, "true");
    assert_string_equal(diff[3].key, "gpu.driver");
    assert_int_equal(diff[4].score, 0); /* host.name, notes.x: cosmetic, last */
    assert_int_equal(diff[5].score, 0);
    for (size_t i = 1; i < n; i++) assert_true(diff[i - 1].score >= diff[i].score);
    free(diff);
    parity_manifest_free(a);
    parity_manifest_free(b);
    const char *why = NULL;
    assert_true(parity_manifest_rank_key("parallel.tp", &why) >
                parity_manifest_rank_key("host.name", NULL));
    assert_true(parity_manifest_rank_key("nccl.NCCL_ALGO", NULL) >
                parity_manifest_rank_key("nccl.NCCL_DEBUG", NULL));
    assert_int_equal(parity_manifest_rank_key("whatever.x", &why), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(validation), cmocka_unit_test(set_and_print),
                                       cmocka_unit_test(ranked_diff)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

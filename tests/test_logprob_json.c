/* logprob readers on JSON text: the JSONL tree builder against cJSON line by line, numbers exact
 * through reading, comparing and the JSON report, and a replay of every file of the seed corpus
 * (tests/corpus/logprobs) and of truncations of it through the readers (no crash; a status).
 * Split from tests/test_logprob.c (one file each under 800 lines). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "src/logprob/logprob_impl.h"
#include "parity/logprob.h"

/* Read every sequence; any status is fine, a crash or sanitizer report is not. */
static void drain(const unsigned char *buf, size_t n, const char *name)
{
    parity_logprob_reader_t *r = NULL;
    parity_diag_t d;
    parity_logprob_read_opts_t o = {0};
    o.n_threads = 1;
    if (parity_logprob_open_mem(buf, n, name, &o, &r, &d) != PARITY_OK) return;
    parity_logprob_seq_t s[3];
    for (int k = 0; k < 3; k++) parity_logprob_seq_init(&s[k]);
    size_t got;
    while (parity_logprob_next_batch(r, s, 3, &got, &d) == PARITY_OK && got) {
    }
    for (int k = 0; k < 3; k++) parity_logprob_seq_free(&s[k]);
    parity_logprob_close(r);
}

/* Every line of a file through lp_jsonl_tree_check: never a different tree; with strict, 1
 * when every line must be taken by the builder. */
static void tree_file(const char *path, int strict)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *buf = malloc(4 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 4 << 20, f);
    fclose(f);
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (buf + i)) : n - i;
        int r = len ? lp_jsonl_tree_check(buf + i, len) : -1;
        if (r == 1 || (strict && len && r != 0)) {
            print_error("%s at byte %zu: tree check %d\n", path, i, r);
            fail();
        }
        i += len + 1;
    }
    free(buf);
}

static const char *src_dir(char *b, size_t n)
{
    const char *src = getenv("PARITY_SRC");
    if (src) {
        snprintf(b, n, "%s/tests", src);
    } else { /* this source file's folder */
        snprintf(b, n, "%s", __FILE__);
        char *sl = strrchr(b, '/');
        if (sl) *sl = 0;
    }
    return b;
}

/* The JSONL reader's own tree builder (jl_tree) builds cJSON's tree, node for node, for every
 * line it takes, and leaves to cJSON what it does not take exactly as cJSON would. */
static void tree_builder(void **state)
{
    (void)state;
    static const char *const same[] = {
        "{}", "[]", "{\"a\":[]}", "{\"a\":{}}", " { \"a\" : 1 , \"b\" : [ true , false , null ] } ",
        "{\"x\":-0,\"y\":0,\"z\":-0.0,\"w\":1E5,\"v\":1e-5,\"u\":-2.5e+3,\"t\":2147483648,\"s\":-2147483649}",
        "{\"big\":123456789012345678901234567890,\"repr\":[-0.4887298047542572,-2.139599084854126,-5.4930877685546875]}",
        "{\"half\":[4503599627370496.5,-9007199254740993,2251799813685248.25,1e22,1e-22,12345678901234567e-30]}",
        "{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\",\"u\":\"\\u00e9\\u4e2d\\ud83d\\ude00\",\"raw\":\"\xc3\xa9\"}",
        "{\"dup\":1,\"dup\":2,\"\":\"\",\"k\\u00e9y\":[[[[1]]]]}",
        "[1,[2,[3,{\"a\":[4,{\"b\":null}]}]]]", "\"just a string\"", "-1.5", "true",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (lp_jsonl_tree_check(same[i], strlen(same[i])) != 0) {
            print_error("not the same tree (or declined): %s\n", same[i]);
            fail();
        }
    /* left to cJSON (which may accept them: it skips any byte <= 32, a BOM, trailing bytes,
     * reads "01" as 1 and "1e999" as inf) */
    static const char *const declined[] = {
        "{\"a\":01}", "{\"a\":1e999}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":+1}", "{\"a\":\x01 1}",
        "\xef\xbb\xbf{}", "{} x", "{\"a\":\"\\u0000\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"tab\there\"}",
        "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{\"a\":nul}", "{\"a\":tru}", "", "{",
    };
    for (size_t i = 0; i < sizeof declined / sizeof *declined; i++)
        if (lp_jsonl_tree_check(declined[i], strlen(declined[i])) != -1) {
            print_error("taken, but should be left to cJSON: %s\n", declined[i]);
            fail();
        }
    char deep[1200];
    size_t o = 0;
    for (int k = 0; k < 300; k++) deep[o++] = '[';
    for (int k = 0; k < 300; k++) deep[o++] = ']';
    assert_int_equal(lp_jsonl_tree_check(deep, o), -1); /* deeper than 256: cJSON (limit 1000) */
    o = 0;
    for (int k = 0; k < 200; k++) deep[o++] = '[';
    for (int k = 0; k < 200; k++) deep[o++] = ']';
    assert_int_equal(lp_jsonl_tree_check(deep, o), 0);
    /* the sample dumps in every engine shape (written by Python's json) and the seed corpus */
    char d[4096], path[8192];
    static const char *const data[] = {"a.jsonl", "b.jsonl", "a2.jsonl", "openai_chat.jsonl",
                                       "openai_completions.jsonl", "vllm.jsonl", "sglang.jsonl"};
    for (size_t i = 0; i < sizeof data / sizeof *data; i++) {
        snprintf(path, sizeof path, "%s/data/logprobs/%s", src_dir(d, sizeof d), data[i]);
        tree_file(path, 1);
    }
    static const char *const corp[] = {"parity.jsonl", "openai_chat.jsonl", "openai_completions.jsonl", "vllm.jsonl",
                                       "sglang.jsonl", "bad_inf.jsonl", "bad_nan.jsonl", "bad_lengths.jsonl"};
    for (size_t i = 0; i < sizeof corp / sizeof *corp; i++) {
        snprintf(path, sizeof path, "%s/corpus/logprobs/%s", src_dir(d, sizeof d), corp[i]);
        tree_file(path, 0);
    }
}

/* Every number of the JSON report reads back as exactly the double it reports (the sample
 * pair, with drift in image tokens: means, quantiles, importance weights, Pearson, sequences). */
static void json_exact(void **state)
{
    (void)state;
    char d[4096], pa[8192], pb[8192], out[] = "/tmp/parity_test_json_exact_XXXXXX";
    snprintf(pa, sizeof pa, "%s/data/logprobs/a.jsonl", src_dir(d, sizeof d));
    snprintf(pb, sizeof pb, "%s/data/logprobs/b.jsonl", src_dir(d, sizeof d));
    parity_logprob_read_opts_t o = {0};
    parity_logprob_reader_t *ra = NULL, *rb = NULL;
    parity_diag_t dg;
    if (parity_logprob_open(pa, &o, &ra, &dg) != PARITY_OK || parity_logprob_open(pb, &o, &rb, &dg) != PARITY_OK) {
        print_message("no sample pair at %s: %s\n", pa, dg.msg);
        parity_logprob_close(ra);
        skip();
    }
    parity_logprob_cmp_opts_t co = parity_logprob_cmp_default_opts();
    parity_logprob_result_t *res = NULL;
    assert_int_equal(parity_logprob_compare(ra, rb, &co, &res, &dg), PARITY_OK);
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(parity_logprob_report_json(res, out, &dg), PARITY_OK);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    remove(out);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf), *ov = cJSON_GetObjectItemCaseSensitive(root, "overall");
    assert_non_null(ov);
    const parity_dist_summary_t *m = &parity_logprob_result_slice(res, 0)->m;
    const struct {
        const char *k;
        double v;
    } want[] = {{"k1", m->k1_mean},
                {"k2", m->k2_mean},
                {"k3", m->k3_mean},
                {"max_abs_dlogprob", m->abs_dlogprob_max},
                {"mean_abs_dlogprob", m->abs_dlogprob_mean},
                {"p50_abs_dlogprob", m->abs_dlogprob_p50},
                {"p99_abs_dlogprob", m->abs_dlogprob_p99},
                {"mean_abs_dprob", m->abs_dprob_mean},
                {"p50_abs_dprob", m->abs_dprob_p50},
                {"chi2_mean", m->chi2_mean},
                {"iw_min", m->iw_min},
                {"iw_std", m->iw_std},
                {"iw_ess", m->iw_ess},
                {"pearson_p", m->pearson_p},
                {"dlogppl_mean", m->dlogppl_mean},
                {"ppl_ratio_mean", m->ppl_ratio_mean}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(ov, want[i].k);
        assert_true(cJSON_IsNumber(x));
        if (memcmp(&x->valuedouble, &want[i].v, sizeof(double)) != 0) {
            print_error("overall.%s: the file says %.17g, the result is %.17g\n", want[i].k, x->valuedouble, want[i].v);
            fail();
        }
    }
    cJSON_Delete(root);
    parity_logprob_result_free(res);
    parity_logprob_close(ra);
    parity_logprob_close(rb);
}

static void corpus_replay(void **state)
{
    (void)state;
    const char *src = getenv("PARITY_SRC");
    char dir[4096];
    if (src) {
        snprintf(dir, sizeof dir, "%s/tests/corpus/logprobs", src);
    } else { /* next to this source file */
        snprintf(dir, sizeof dir, "%s", __FILE__);
        char *sl = strrchr(dir, '/');
        snprintf(sl ? sl + 1 : dir, sizeof dir - (size_t)(sl ? sl + 1 - dir : 0), "corpus/logprobs");
    }
    DIR *dp = opendir(dir);
    if (!dp) {
        print_message("no corpus at %s\n", dir);
        skip();
    }
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        unsigned char *buf = malloc(1 << 20);
        size_t n = fread(buf, 1, 1 << 20, f);
        fclose(f);
        /* whole file, every truncation point of the first 2 KiB, and a byte-flipped copy */
        drain(buf, n, e->d_name);
        for (size_t cut = 0; cut < n && cut < 2048; cut += 7) {
            unsigned char *c = malloc(cut ? cut : 1);
            memcpy(c, buf, cut);
            drain(c, cut, e->d_name);
            assert_int_not_equal(lp_jsonl_tree_check((const char *)c, cut), 1);
            free(c);
        }
        for (size_t i = 0; i < n && i < 512; i += 13) {
            unsigned char *c = malloc(n);
            memcpy(c, buf, n);
            c[i] ^= 0x5a;
            drain(c, n, e->d_name);
            assert_int_not_equal(lp_jsonl_tree_check((const char *)c, n), 1);
            free(c);
        }
        free(buf);
        files++;
    }
    closedir(dp);
    assert_true(files > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(tree_builder), cmocka_unit_test(json_exact),
                                       cmocka_unit_test(corpus_replay)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

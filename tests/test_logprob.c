/* logprob readers and comparison: each JSON shape read from memory into the expected tokens,
 * null/-inf/NaN handling, divergence detection, the floor's sides. The JSON tree builder, exact
 * numbers through the report and the seed corpus replay are tests/test_logprob_json.c. */
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

static parity_logprob_reader_t *open_str(const char *s, const char *name)
{
    parity_logprob_reader_t *r = NULL;
    parity_diag_t d;
    parity_logprob_read_opts_t o = {0};
    o.n_threads = 1;
    o.slice_field = "domain";
    if (parity_logprob_open_mem(s, strlen(s), name, &o, &r, &d) != PARITY_OK) {
        print_error("%s\n", d.msg);
        fail();
    }
    return r;
}

/* The OpenAI chat fast path against the cJSON path on the same lines: every field of every
 * sequence equal (ids, keys, logprob bits, flags, texts, top-k), for lines with fields in any
 * order, fields to skip (bytes, message, usage, nested objects, escaped strings), token texts with
 * every escape cJSON decodes (surrogate pairs included), top-k lists shorter than the first,
 * custom_id of both types; and lines the fast path must leave to cJSON give the same status. */
static const char *const chat_toks[] = {"the", " cat", "\\n", "\\\"q\\\"", "caf\\u00e9", "\\ud83d\\ude00x",
                                        "\\u0120the", "a\\/b", "\\t\\r\\b\\f", "\\\\", "token_id:42", "\\u4e2d"};

static size_t chat_line(char *b, size_t cap, unsigned seed, int n)
{
    size_t o = 0;
    unsigned x = seed * 2654435761u + 1;
#define RND() (x = x * 1103515245u + 12345u, (x >> 8) & 0xffff)
#define PUT(...) (o += (size_t)snprintf(b + o, cap - o, __VA_ARGS__))
    PUT("{");
    if (seed % 3 == 0) PUT("\"custom_id\":\"req-%u\",", seed);
    if (seed % 3 == 1) PUT("\"custom_id\":%u,\"request_id\":\"r\\u0041%u\",", seed, seed);
    PUT("\"id\":\"chatcmpl-%u\",\"object\":\"chat.completion\",\"created\":1.7e9,\"model\":\"m\",", seed);
    if (seed % 2) PUT("\"usage\":{\"prompt_tokens\":3,\"details\":{\"cached\":[1,2,{\"x\":null}]},\"ok\":true},");
    PUT("\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi \\\"there\\\"\\n\"},"
        "\"logprobs\":{\"refusal\":null,\"content\":[");
    int K = 1 + (int)(seed % 5);
    for (int t = 0; t < n; t++) {
        const char *tok = chat_toks[RND() % (sizeof chat_toks / sizeof *chat_toks)];
        char lp[40];
        snprintf(lp, sizeof lp, "%.7g", -(double)(RND() % 10000) / 997.0);
        int k = t == 0 ? K : (int)(RND() % (unsigned)(K + 1));
        char top[2048];
        size_t to = 0;
        to += (size_t)snprintf(top + to, sizeof top - to, "[");
        for (int j = 0; j < k; j++)
            to += (size_t)snprintf(top + to, sizeof top - to, "%s{\"bytes\":[1,2],\"token\":\"%s%d\",\"logprob\":%.9g}",
                                   j ? "," : "", chat_toks[(t + j) % 12], j, -0.5 * j - 0.25);
        snprintf(top + to, sizeof top - to, "]");
        switch (RND() % 3) {
        case 0: PUT("%s{\"token\":\"%s\",\"logprob\":%s,\"bytes\":[116,104],\"top_logprobs\":%s}", t ? "," : "", tok, lp, top); break;
        case 1: PUT("%s{\"top_logprobs\":%s,\"logprob\":%s,\"token\":\"%s\"}", t ? "," : "", top, lp, tok); break;
        default: PUT("%s{ \"logprob\" : %s , \"token\" : \"%s\", \"bytes\": null, \"top_logprobs\" : %s }", t ? "," : "", lp, tok, top);
        }
    }
    PUT("]},\"finish_reason\":\"stop\"}%s]}\n", seed % 4 == 0 ? ",{\"index\":1,\"logprobs\":null}" : "");
#undef RND
#undef PUT
    return o;
}

static parity_status_t read_one(const char *line, const char *slice, parity_logprob_seq_t *s, parity_diag_t *d)
{
    parity_logprob_reader_t *r = NULL;
    parity_logprob_read_opts_t ro = {0};
    ro.n_threads = 1;
    ro.slice_field = slice;
    ro.format = PARITY_LOGPROB_OPENAI_CHAT;
    parity_status_t st = parity_logprob_open_mem(line, strlen(line), "c.jsonl", &ro, &r, d);
    size_t got = 0;
    if (!st) st = parity_logprob_next_batch(r, s, 1, &got, d);
    parity_logprob_close(r);
    return st ? st : got == 1 ? PARITY_OK : PARITY_E_FORMAT;
}

static void chat_fast_path(void **state)
{
    (void)state;
    char *line = malloc(1 << 20);
    assert_non_null(line);
    for (unsigned seed = 0; seed < 60; seed++) {
        chat_line(line, 1 << 20, seed, 1 + (int)(seed * 7 % 40));
        parity_logprob_seq_t a, b;
        parity_logprob_seq_init(&a);
        parity_logprob_seq_init(&b);
        parity_diag_t d;
        assert_int_equal(read_one(line, NULL, &a, &d), PARITY_OK);            /* fast path */
        assert_int_equal(read_one(line, "no_such_field", &b, &d), PARITY_OK); /* cJSON path */
        assert_string_equal(a.id, b.id);
        assert_int_equal(a.n, b.n);
        assert_int_equal(a.k, b.k);
        for (size_t i = 0; i < a.n; i++) {
            assert_true(a.key[i] == b.key[i]);
            assert_memory_equal(&a.lp[i], &b.lp[i], sizeof a.lp[i]);
            assert_int_equal(a.flags[i], b.flags[i]);
            assert_string_equal(parity_logprob_seq_text(&a, i), parity_logprob_seq_text(&b, i));
            for (size_t j = 0; j < a.k; j++) {
                assert_int_equal(a.top_id[i * a.k + j], b.top_id[i * b.k + j]);
                assert_memory_equal(&a.top_lp[i * a.k + j], &b.top_lp[i * b.k + j], sizeof(double));
            }
        }
        parity_logprob_seq_free(&a);
        parity_logprob_seq_free(&b);
    }
    /* lines the fast path leaves to cJSON: the same status (and sequence) either way */
    const char *odd[] = {
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":\"-inf\"}]}}]}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"\\ud800\",\"logprob\":-1}]}}]}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":null}]}}]}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1,\"top_logprobs\":[]},"
        "{\"token\":\"b\",\"logprob\":-2,\"top_logprobs\":[{\"token\":\"x\",\"logprob\":-3}]}]}}]}\n",
        "{\"custom_id\":\"c\",\"response\":{\"status_code\":200,\"body\":{\"choices\":[{\"logprobs\":{\"content\":"
        "[{\"token\":\"a\",\"logprob\":-1}]}}]}}}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1}]}}],\"x\":tru}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1,}]}}]}\n",
        "{\"choices\":[{\"logprobs\":{\"content\":[]}}]}\n",
        "{\"custom_id\":5,\"custom_id\":\"x\",\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1}]}}]}\n",
        "{\"request_id\":\"r\\u00e9\",\"choices\":[{\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1}]}}]}\n",
    };
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        parity_logprob_seq_t a, b;
        parity_logprob_seq_init(&a);
        parity_logprob_seq_init(&b);
        parity_diag_t d;
        parity_status_t sa = read_one(odd[i], NULL, &a, &d), sb = read_one(odd[i], "no_such_field", &b, &d);
        if (sa != sb) print_error("line %zu: %d vs %d\n", i, (int)sa, (int)sb);
        assert_int_equal(sa, sb);
        if (!sa) {
            assert_string_equal(a.id, b.id);
            assert_int_equal(a.n, b.n);
            assert_int_equal(a.k, b.k);
            for (size_t t = 0; t < a.n; t++) assert_memory_equal(&a.lp[t], &b.lp[t], sizeof(double));
        }
        parity_logprob_seq_free(&a);
        parity_logprob_seq_free(&b);
    }
    free(line);
}

/* The JSONL fast path's number parser (8 digits at a time) against strtod, bit for bit, over
 * the spellings engines print: %.7g/%.9g/%.17g of random logprobs, %e forms, long digit strings
 * (more than 19 digits), leading zeros in the fraction, exponents, integers, zeros; and the
 * 16-19 digit decimals that its double-double path (fp_exact) decides: float32 values widened
 * to double as Python prints them, decimals exactly halfway between two doubles (integers and
 * .5/.25/.75 fractions, which strtod rounds to even) and within 1% of an ulp of halfway. */
static void numbers(void **state)
{
    (void)state;
    enum { N = 14000 };
    char *nums[N];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
        double v = -u * 30.0 * (double)(1 + (i % 7)) / pow(10.0, (double)(i % 13));
        char b[96];
        unsigned long long h53 = (1ull << 53) + 2 * ((x >> 12) & ((1ull << 51) - 1)) + 1; /* odd: a midpoint */
        unsigned long long h63 = (1ull << 62) + (((x >> 2) & ((1ull << 51) - 1)) << 10) + 512;
        unsigned long long n52 = (1ull << 52) + (x >> 13), n51 = (1ull << 51) + (x >> 14);
        const char *sg = (x >> 1) & 1 ? "-" : "";
        switch (i % 14) {
        case 10: snprintf(b, sizeof b, "%.17g", (double)(float)v); break;
        case 11: snprintf(b, sizeof b, "%s%llu", sg, (x & 1) ? h53 : h63); break;
        case 12:
            snprintf(b, sizeof b, "%s%llu.%s", sg, (x & 1) ? n52 : n51, (x & 1) ? "5" : (x >> 2) & 1 ? "25" : "75");
            break;
        case 13:
            snprintf(b, sizeof b, "%s%llu.%s", sg, n52, (x >> 2) % 3 == 0 ? "49" : (x >> 2) % 3 == 1 ? "51" : "4999");
            break;
        case 0: snprintf(b, sizeof b, "%.7g", v); break;
        case 1: snprintf(b, sizeof b, "%.9g", v); break;
        case 2: snprintf(b, sizeof b, "%.17g", v); break;
        case 3: snprintf(b, sizeof b, "%.3e", v); break;
        case 4: snprintf(b, sizeof b, "%.12f", v); break;
        case 5: snprintf(b, sizeof b, "-0.%020llu%llu", (unsigned long long)(x % 1000), (unsigned long long)x); break;
        case 6: snprintf(b, sizeof b, "-%llu%llu.5", (unsigned long long)x, (unsigned long long)(x >> 3)); break;
        case 7: snprintf(b, sizeof b, "%lld", -(long long)(x % 100000000000ull)); break;
        case 8: snprintf(b, sizeof b, "%.20fE-3", v); break;
        default: snprintf(b, sizeof b, "%s", i % 3 ? "-0.0" : "0"); break;
        }
        nums[i] = strdup(b);
        assert_non_null(nums[i]);
    }
    size_t cap = 64 + (size_t)N * 120;
    char *line = malloc(cap);
    assert_non_null(line);
    size_t o = (size_t)snprintf(line, cap, "{\"id\":\"n\",\"token_ids\":[");
    for (int i = 0; i < N; i++) o += (size_t)snprintf(line + o, cap - o, "%s%d", i ? "," : "", i);
    o += (size_t)snprintf(line + o, cap - o, "],\"logprobs\":[");
    for (int i = 0; i < N; i++) o += (size_t)snprintf(line + o, cap - o, "%s%s", i ? "," : "", nums[i]);
    snprintf(line + o, cap - o, "]}\n");
    /* without --slice-by, so that the fast path reads the line (it marks it plain) */
    parity_logprob_reader_t *r = NULL;
    parity_diag_t d;
    parity_logprob_read_opts_t ro = {0};
    ro.n_threads = 1;
    ro.allow = PARITY_LOGPROB_ALLOW_POSITIVE; /* the conversions of numbers of both signs are under test */
    assert_int_equal(parity_logprob_open_mem(line, strlen(line), "n.jsonl", &ro, &r, &d), PARITY_OK);
    parity_logprob_seq_t s;
    parity_logprob_seq_init(&s);
    size_t got;
    assert_int_equal(parity_logprob_next_batch(r, &s, 1, &got, &d), PARITY_OK);
    assert_int_equal(got, 1);
    assert_int_equal(s.n, N);
    assert_int_equal(s.plain, 1);
    /* a plain sequence's mod[] and text[] are not written: the accessors answer */
    assert_int_equal(parity_logprob_seq_mod(&s, 0), 0);
    assert_null(parity_logprob_seq_text(&s, 0));
    for (int i = 0; i < N; i++) {
        double want = strtod(nums[i], NULL);
        if (memcmp(&s.lp[i], &want, sizeof want) != 0) {
            print_error("%s: parsed %.17g, strtod %.17g\n", nums[i], s.lp[i], want);
            fail();
        }
        assert_int_equal(s.key[i], i);
        free(nums[i]);
    }
    parity_logprob_seq_free(&s);
    parity_logprob_close(r);
    free(line);
}

static void shapes(void **state)
{
    (void)state;
    const char *own = "{\"id\":\"r\",\"domain\":\"math\",\"token_ids\":[5,6,7],\"logprobs\":[null,-0.5,\"-inf\"],"
                      "\"modality\":[\"text\",\"image\",\"text\"],\"prefill_len\":2}\n\n";
    parity_logprob_reader_t *r = open_str(own, "x.jsonl");
    parity_logprob_seq_t s;
    parity_logprob_seq_init(&s);
    size_t got;
    parity_diag_t d;
    assert_int_equal(parity_logprob_next_batch(r, &s, 1, &got, &d), PARITY_OK);
    assert_int_equal(got, 1);
    assert_int_equal(parity_logprob_reader_format(r), PARITY_LOGPROB_JSONL);
    assert_string_equal(s.id, "r");
    assert_string_equal(s.field, "math");
    assert_int_equal(s.n, 3);
    assert_false(s.flags[0] & PARITY_LOGPROB_PRESENT);
    assert_true(s.lp[1] == -0.5 && (s.flags[1] & PARITY_LOGPROB_PREFILL));
    assert_true(s.lp[2] == -INFINITY && (s.flags[2] & PARITY_LOGPROB_DECODE));
    assert_string_equal(parity_logprob_reader_modality(r, s.mod[1]), "image");
    assert_int_equal(parity_logprob_seq_mod(&s, 1), s.mod[1]);
    assert_int_equal(parity_logprob_next_batch(r, &s, 1, &got, &d), PARITY_OK);
    assert_int_equal(got, 0);
    parity_logprob_close(r);

    const char *sgl = "{\"text\":\"a\",\"meta_info\":{\"id\":\"z\",\"input_token_logprobs\":[[null,1,null],"
                      "[-1.5,2,\"b\"]],\"output_token_logprobs\":[[-0.25,3,\"c\"]],\"output_top_logprobs\":"
                      "[[[-0.25,3,\"c\"],[-2,4,\"d\"]]]}}";
    r = open_str(sgl, "s.jsonl");
    assert_int_equal(parity_logprob_next_batch(r, &s, 4, &got, &d), PARITY_OK);
    assert_int_equal(parity_logprob_reader_format(r), PARITY_LOGPROB_SGLANG);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.id, "#0"); /* server ids are random: pair by order */
    assert_true(s.key[2] == 3 && s.lp[2] == -0.25 && (s.flags[2] & PARITY_LOGPROB_DECODE));
    assert_int_equal(s.k, 2);
    assert_true(s.top_id[2 * 2 + 1] == 4 && s.top_lp[2 * 2 + 1] == -2);
    assert_string_equal(parity_logprob_seq_text(&s, 1), "b");
    parity_logprob_close(r);

    const char *chat = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"logprobs\":{\"content\":[{\"token\":\"token_id:9\","
                       "\"logprob\":-0.1,\"top_logprobs\":[]},{\"token\":\"hi\",\"logprob\":-0.2,\"top_logprobs\":[]}]}}]}";
    r = open_str(chat, "c.jsonl");
    assert_int_equal(parity_logprob_next_batch(r, &s, 4, &got, &d), PARITY_OK);
    assert_int_equal(parity_logprob_reader_format(r), PARITY_LOGPROB_OPENAI_CHAT);
    assert_true(s.n == 2 && s.key[0] == 9 && !(s.flags[0] & PARITY_LOGPROB_KEY_TEXT) && (s.flags[1] & PARITY_LOGPROB_KEY_TEXT));
    parity_logprob_close(r);

    const char *vl = "{\"request_id\":\"7\",\"prompt_token_ids\":[1,2],\"prompt_logprobs\":[null,{\"2\":{\"logprob\":"
                     "-3.0,\"rank\":4,\"decoded_token\":\"x\"},\"8\":{\"logprob\":-0.1,\"rank\":1}}],\"outputs\":[{"
                     "\"token_ids\":[3],\"logprobs\":[{\"3\":{\"logprob\":-0.5,\"rank\":1}}]}]}";
    r = open_str(vl, "v.jsonl");
    assert_int_equal(parity_logprob_next_batch(r, &s, 4, &got, &d), PARITY_OK);
    assert_int_equal(parity_logprob_reader_format(r), PARITY_LOGPROB_VLLM);
    assert_string_equal(s.id, "7");
    assert_true(s.n == 3 && s.lp[1] == -3.0 && s.lp[2] == -0.5);
    assert_true(s.top_id[1 * s.k + 0] == 8); /* ordered by rank */
    parity_logprob_close(r);
    parity_logprob_seq_free(&s);
}

static void errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"{\"id\":\"a\",\"token_ids\":[1],\"logprobs\":[-1]}\n{\"id\":\"b\",\"token_ids\":[1,2],\"logprobs\":[-1]}\n",
         "x.jsonl:2: field 'token_ids'"},
        {"{\"id\":\"a\",\"token_ids\":[1],\"logprobs\":[1e999]}\n", "x.jsonl:1: field 'logprobs'[0]"},
        {"{\"id\":\"a\",\"token_ids\":[1.5],\"logprobs\":[-1]}\n", "field 'token_ids'[0]"},
        {"{\"id\":\"a\",\"token_ids\":[1],\"logprobs\":[-1]}\n{broken\n", "x.jsonl:2: not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        parity_logprob_reader_t *r = open_str(bad[i].text, "x.jsonl");
        parity_logprob_seq_t s[4];
        for (int k = 0; k < 4; k++) parity_logprob_seq_init(&s[k]);
        size_t got = 99;
        parity_diag_t d = {{0}};
        parity_status_t st = parity_logprob_next_batch(r, s, 4, &got, &d);
        if (st != PARITY_E_FORMAT || !strstr(d.msg, bad[i].needle)) {
            print_error("case %zu: status %d, '%s', wanted '%s'\n", i, st, d.msg, bad[i].needle);
            fail();
        }
        for (int k = 0; k < 4; k++) parity_logprob_seq_free(&s[k]);
        parity_logprob_close(r);
    }
}

/* A line over the reader's limit ends the batch with its error, but a bad line before it, earlier
 * in the file, is the one reported (as reading one line at a time would); through the
 * comparison, whose two JSONL batches are parsed in one section, A's error comes first and B's
 * is found when A is clean. */
static void overlong(void **state)
{
    (void)state;
    const char *ok = "{\"id\":\"a\",\"token_ids\":[1],\"logprobs\":[-1]}\n";
    const char *brk = "{broken\n";
    char lng[200];
    snprintf(lng, sizeof lng, "{\"id\":\"z\",\"token_ids\":[1],\"logprobs\":[-1],\"pad\":\"%0120d\"}\n", 0);
    char t1[400], t2[400];
    snprintf(t1, sizeof t1, "%s%s%s", ok, brk, lng);
    snprintf(t2, sizeof t2, "%s%s", ok, lng);
    static const struct {
        int which; /* 0: read t1, 1: read t2, 2: compare t2 vs t1, 3: compare ok vs t1 */
        const char *needle;
    } cases[] = {{0, "x.jsonl:2: not a JSON object"},
                 {1, "x.jsonl:2: line of"},
                 {2, "a.jsonl:2: line of"},
                 {3, "b.jsonl:2: not a JSON object"}};
    parity_logprob_read_opts_t o = {0};
    o.n_threads = 2;
    o.max_line = 100;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        parity_diag_t d = {{0}};
        parity_status_t st;
        if (cases[i].which < 2) {
            const char *t = cases[i].which ? t2 : t1;
            parity_logprob_reader_t *r = NULL;
            assert_int_equal(parity_logprob_open_mem(t, strlen(t), "x.jsonl", &o, &r, &d), PARITY_OK);
            parity_logprob_seq_t sq[4];
            for (int k = 0; k < 4; k++) parity_logprob_seq_init(&sq[k]);
            size_t got;
            st = parity_logprob_next_batch(r, sq, 4, &got, &d);
            for (int k = 0; k < 4; k++) parity_logprob_seq_free(&sq[k]);
            parity_logprob_close(r);
        } else {
            const char *ta = cases[i].which == 2 ? t2 : ok;
            parity_logprob_reader_t *ra = NULL, *rb = NULL;
            assert_int_equal(parity_logprob_open_mem(ta, strlen(ta), "a.jsonl", &o, &ra, &d), PARITY_OK);
            assert_int_equal(parity_logprob_open_mem(t1, strlen(t1), "b.jsonl", &o, &rb, &d), PARITY_OK);
            parity_logprob_cmp_opts_t co = parity_logprob_cmp_default_opts();
            co.n_threads = 2;
            parity_logprob_result_t *res = NULL;
            st = parity_logprob_compare(ra, rb, &co, &res, &d);
            parity_logprob_result_free(res);
            parity_logprob_close(ra);
            parity_logprob_close(rb);
        }
        if (st != PARITY_E_FORMAT || !strstr(d.msg, cases[i].needle)) {
            print_error("case %zu: status %d, '%s', wanted '%s'\n", i, st, d.msg, cases[i].needle);
            fail();
        }
    }
}

/* Exact ties at the worst-token cutoff: the list is the first W tied tokens of the stream (pair
 * order, then position) for every thread count, whichever pairs each thread happens to take.
 * 512 pairs of 32 tokens; B differs from A by exactly 0.5 on every third token. */
static void worst_ties(void **state)
{
    (void)state;
    size_t cap = 512 * 400;
    char *a = malloc(cap), *b = malloc(cap);
    assert_non_null(a);
    assert_non_null(b);
    size_t na = 0, nb = 0;
    for (int q = 0; q < 512; q++) {
        na += (size_t)snprintf(a + na, cap - na, "{\"id\":\"s%03d\",\"token_ids\":[", q);
        nb += (size_t)snprintf(b + nb, cap - nb, "{\"id\":\"s%03d\",\"token_ids\":[", q);
        for (int i = 0; i < 32; i++) {
            na += (size_t)snprintf(a + na, cap - na, "%s%d", i ? "," : "", i + 1);
            nb += (size_t)snprintf(b + nb, cap - nb, "%s%d", i ? "," : "", i + 1);
        }
        na += (size_t)snprintf(a + na, cap - na, "],\"logprobs\":[");
        nb += (size_t)snprintf(b + nb, cap - nb, "],\"logprobs\":[");
        for (int i = 0; i < 32; i++) {
            na += (size_t)snprintf(a + na, cap - na, "%s-1", i ? "," : "");
            nb += (size_t)snprintf(b + nb, cap - nb, "%s%s", i ? "," : "", (q + i) % 3 ? "-1" : "-1.5");
        }
        na += (size_t)snprintf(a + na, cap - na, "]}\n");
        nb += (size_t)snprintf(b + nb, cap - nb, "]}\n");
    }
    static const int threads[] = {1, 2, 3, 8};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        parity_logprob_reader_t *ra = open_str(a, "a.jsonl"), *rb = open_str(b, "b.jsonl");
        parity_logprob_cmp_opts_t co = parity_logprob_cmp_default_opts();
        co.n_threads = threads[t];
        parity_logprob_result_t *res = NULL;
        parity_diag_t d;
        assert_int_equal(parity_logprob_compare(ra, rb, &co, &res, &d), PARITY_OK);
        assert_int_equal(parity_logprob_result_nworst(res), 10);
        for (size_t k = 0; k < 10; k++) {
            const parity_logprob_token_t *w = parity_logprob_result_worst(res, k);
            if (strcmp(w->id, "s000") || w->position != 3 * k) {
                print_error("threads %d, worst %zu: %s position %llu, wanted s000 position %zu\n",
                            threads[t], k, w->id, (unsigned long long)w->position, 3 * k);
                fail();
            }
        }
        parity_logprob_result_free(res);
        parity_logprob_close(ra);
        parity_logprob_close(rb);
    }
    free(a);
    free(b);
}

static void divergence(void **state)
{
    (void)state;
    const char *a = "{\"id\":\"q\",\"token_ids\":[1,2,3,4],\"logprobs\":[-1,-2,-3,-4]}\n";
    const char *b = "{\"id\":\"q\",\"token_ids\":[1,2,9,4],\"logprobs\":[-1,-2.5,-3,-4]}\n";
    parity_logprob_reader_t *ra = open_str(a, "a.jsonl"), *rb = open_str(b, "b.jsonl");
    parity_logprob_cmp_opts_t o = parity_logprob_cmp_default_opts();
    o.n_threads = 1;
    parity_logprob_result_t *res = NULL;
    parity_diag_t d;
    assert_int_equal(parity_logprob_compare(ra, rb, &o, &res, &d), PARITY_OK);
    const parity_logprob_counts_t *c = parity_logprob_result_counts(res);
    assert_int_equal(c->n_diverged, 1);
    assert_int_equal(c->n_tokens_compared, 2); /* nothing after position 2 */
    assert_int_equal(parity_logprob_result_div(res, 0)->position, 2);
    assert_true(parity_logprob_result_div(res, 0)->key_b == 9);
    const parity_logprob_slice_t *ov = parity_logprob_result_slice(res, 0);
    assert_string_equal(ov->name, "overall");
    assert_true(ov->m.abs_dlogprob_max == 0.5);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_VERDICT);
    parity_logprob_result_free(res);
    parity_logprob_close(ra);
    parity_logprob_close(rb);
}

/* A JSONL dump of one sequence of n tokens: logprob i = base + (i == j ? spike : step * ((i % 5) - 2)). */
static char *dump_line(int n, double base, double step, int j, double spike)
{
    size_t cap = 64 + (size_t)n * 40;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t l = (size_t)snprintf(b, cap, "{\"id\":\"q\",\"token_ids\":[");
    for (int i = 0; i < n; i++) l += (size_t)snprintf(b + l, cap - l, "%s%d", i ? "," : "", 10 + i);
    l += (size_t)snprintf(b + l, cap - l, "],\"logprobs\":[");
    for (int i = 0; i < n; i++)
        l += (size_t)snprintf(b + l, cap - l, "%s%.17g", i ? "," : "", base + (i == j ? spike : step * ((i % 5) - 2)));
    snprintf(b + l, cap - l, "]}\n");
    return b;
}

static parity_logprob_result_t *cmp_str(const char *x, const char *y)
{
    parity_logprob_reader_t *ra = open_str(x, "x.jsonl"), *rb = open_str(y, "y.jsonl");
    parity_logprob_cmp_opts_t o = parity_logprob_cmp_default_opts();
    o.n_threads = 1;
    o.by_position = 0;
    parity_logprob_result_t *res = NULL;
    parity_diag_t d;
    assert_int_equal(parity_logprob_compare(ra, rb, &o, &res, &d), PARITY_OK);
    parity_logprob_close(ra);
    parity_logprob_close(rb);
    return res;
}

/* Measured floors (docs/logprob-metrics.md, "Noise floor"): which side a file repeats (10x closer
 * in mean |dlogprob|, or undecided), floors of either side and of both (the larger per metric), a
 * side given twice, a floor whose own k3 is above the alarm excusing no k3, and a floor as large
 * as the drift reported as such. */
static void floor_sides(void **state)
{
    (void)state;
    const int n = 40;
    char *A = dump_line(n, -2, 0, -1, 0), *B = dump_line(n, -3, 0, -1, 0); /* drift 1 on every token */
    char *F9 = dump_line(n, -2.1, 0, -1, 0), *F10 = dump_line(n, -2.09, 0, -1, 0), *FB = dump_line(n, -2.91, 0, -1, 0);
    parity_logprob_result_t *af = cmp_str(A, F9), *bf = cmp_str(B, F9);
    assert_int_equal(parity_logprob_floor_side(af, bf), -1); /* 0.1 vs 0.9: 9x apart, not 10 */
    parity_logprob_result_free(af), parity_logprob_result_free(bf);
    af = cmp_str(A, F10), bf = cmp_str(B, F10);
    assert_int_equal(parity_logprob_floor_side(af, bf), PARITY_LOGPROB_SIDE_A); /* 0.09 vs 0.91 */
    parity_logprob_result_free(af), parity_logprob_result_free(bf);
    af = cmp_str(A, FB), bf = cmp_str(B, FB);
    assert_int_equal(parity_logprob_floor_side(af, bf), PARITY_LOGPROB_SIDE_B);
    parity_logprob_result_free(af), parity_logprob_result_free(bf);
    af = cmp_str(A, B), bf = cmp_str(B, B); /* a copy of B: 0 against 1 */
    assert_int_equal(parity_logprob_floor_side(af, bf), PARITY_LOGPROB_SIDE_B);
    parity_logprob_result_free(af), parity_logprob_result_free(bf);
    af = cmp_str(A, A), bf = cmp_str(A, A); /* F = A = B: nothing tells */
    assert_int_equal(parity_logprob_floor_side(af, bf), -1);
    parity_logprob_result_free(af), parity_logprob_result_free(bf);
    free(F9), free(F10), free(FB);

    /* drift: B = A + 0.2 pattern (k3 above 1e-3, max above 5e-2); A2 a small repeat of A; B2 a repeat
     * of B as far from B as B is from A */
    free(A), free(B);
    A = dump_line(n, -2, 0.001, -1, 0), B = dump_line(n, -2, 0.1, -1, 0);
    char *A2 = dump_line(n, -2, 0.0011, -1, 0), *B2 = dump_line(n, -2, -0.1, -1, 0);
    parity_logprob_result_t *res = cmp_str(A, B), *fa = cmp_str(A, A2), *fb = cmp_str(B, B2), *fbo = cmp_str(A, B2);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_VERDICT);
    assert_int_equal(parity_logprob_result_add_floor(res, fa, PARITY_LOGPROB_SIDE_A, NULL, 0), PARITY_OK);
    assert_int_equal(parity_logprob_result_add_floor(res, fa, PARITY_LOGPROB_SIDE_A, NULL, 0), PARITY_E_INVALID);
    assert_int_equal(parity_logprob_result_verdict(res, 0), PARITY_LOGPROB_ALARM);
    assert_int_equal(parity_logprob_result_floor_as_large_as_drift(res), 0);
    const parity_logprob_slice_t *ov = parity_logprob_result_slice(res, 0);
    double k3 = ov->m.k3_mean;
    assert_true(k3 > 1e-3);
    /* B's repeat, about twice as far from B as A is (k3 about 4x the drift's, above the alarm):
     * within 3x its floor, but a floor whose own k3 is above the alarm excuses no k3 */
    assert_int_equal(parity_logprob_result_add_floor(res, fb, PARITY_LOGPROB_SIDE_B, fbo, 0), PARITY_OK);
    assert_true(parity_logprob_result_slice(fb, 0)->m.k3_mean > k3);
    assert_int_equal(parity_logprob_result_verdict(res, 0), PARITY_LOGPROB_ALARM);
    assert_int_equal(parity_logprob_result_floor_as_large_as_drift(res), 1);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_VERDICT);
    parity_logprob_result_free(res);
    /* the same through the library's older call (parity_logprob_result_set_floor: side A) */
    res = cmp_str(A, B);
    assert_int_equal(parity_logprob_result_set_floor(res, fb), PARITY_OK);
    assert_int_equal(parity_logprob_result_verdict(res, 0), PARITY_LOGPROB_ALARM);
    parity_logprob_result_free(res);

    /* max |dlogprob| alone above its alarm (one token off by 0.2, k3 ~5e-4): a repeat of B with
     * another token off by 0.25 excuses it, and the report says the floor is as large as the drift */
    char *C = dump_line(n, -2, 0, -1, 0), *D = dump_line(n, -2, 0, 7, -0.2), *D2 = dump_line(n, -2, 0, 9, -0.25);
    res = cmp_str(C, D);
    parity_logprob_result_t *fd = cmp_str(D, D2);
    assert_true(parity_logprob_result_slice(res, 0)->m.k3_mean < 1e-3);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_VERDICT);
    assert_int_equal(parity_logprob_result_add_floor(res, fd, PARITY_LOGPROB_SIDE_B, NULL, 0), PARITY_OK);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_OK);
    assert_int_equal(parity_logprob_result_floor_as_large_as_drift(res), 1);
    /* with A's floor too (a zero one: C again), the larger per metric: still excused */
    parity_logprob_result_t *fc = cmp_str(C, C);
    assert_int_equal(parity_logprob_result_add_floor(res, fc, PARITY_LOGPROB_SIDE_A, NULL, 0), PARITY_OK);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_OK);
    parity_logprob_result_free(res);
    res = cmp_str(C, D); /* A's zero floor alone excuses nothing */
    assert_int_equal(parity_logprob_result_add_floor(res, fc, PARITY_LOGPROB_SIDE_A, NULL, 0), PARITY_OK);
    assert_int_equal(parity_logprob_result_exit_code(res), PARITY_EXIT_VERDICT);
    assert_int_equal(parity_logprob_result_floor_as_large_as_drift(res), 0);
    parity_logprob_result_free(res);
    parity_logprob_result_free(fc);
    parity_logprob_result_free(fd);
    parity_logprob_result_free(fa), parity_logprob_result_free(fb), parity_logprob_result_free(fbo);
    free(A), free(B), free(A2), free(B2), free(C), free(D), free(D2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(chat_fast_path), cmocka_unit_test(numbers), cmocka_unit_test(shapes), cmocka_unit_test(errors), cmocka_unit_test(overlong), cmocka_unit_test(divergence), cmocka_unit_test(worst_ties), cmocka_unit_test(floor_sides)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

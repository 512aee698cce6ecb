/* model: checkpoint loading (stories260K's header, every malformed-file path, a separate
 * classifier), the path-spec grammar, greedy generation against llama2.c's own expected output
 * (fp64 reference and fp32), and relations between paths that must hold exactly (tp1, splitk1,
 * batch invariance with a fixed split) or within derived bounds (fp64 reorderings). */
#define _POSIX_C_SOURCE 200809L
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

#include "test_files.h"

#include "parity/model.h"
#include "parity/reduce.h"
#include "parity/tokenizer.h"
#include "src/model/model_impl.h"

static char g_tmp[256];
static char g_model[1024], g_tok[1024];
static parity_model_t *g_m;

static int setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/parity_test_model_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    parity_diag_t d;
    if (parity_model_default_files(g_model, sizeof g_model, g_tok, sizeof g_tok, &d) != PARITY_OK) {
        fprintf(stderr, "%s\n", d.msg);
        return -1;
    }
    if (parity_model_load(g_model, &g_m, &d) != PARITY_OK) {
        fprintf(stderr, "cannot load %s: %s\n", g_model, d.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    parity_model_free(g_m);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */

static void test_header(void **state)
{
    (void)state;
    const parity_model_config_t *c = parity_model_config(g_m);
    assert_non_null(c);
    assert_int_equal(c->dim, 64);
    assert_int_equal(c->hidden_dim, 172);
    assert_int_equal(c->n_layers, 5);
    assert_int_equal(c->n_heads, 8);
    assert_int_equal(c->n_kv_heads, 4);
    assert_int_equal(c->vocab_size, 512);
    assert_int_equal(c->seq_len, 512);
    assert_int_equal(c->shared_classifier, 1);
    assert_null(parity_model_config(NULL));
    parity_model_free(NULL);
}

static void expect_load(const char *path, parity_status_t want, const char *needle)
{
    parity_model_t *m = (parity_model_t *)1;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_model_load(path, &m, &d), want);
    assert_null(m);
    if (needle && !strstr(d.msg, needle)) fail_msg("diag '%s' lacks '%s'", d.msg, needle);
}

static void test_malformed(void **state)
{
    (void)state;
    char p[512];
    size_t n;
    char *b = slurp(g_model, &n);
    expect_load(NULL, PARITY_E_INVALID, NULL);
    snprintf(p, sizeof p, "%s/missing.bin", g_tmp);
    expect_load(p, PARITY_E_IO, "missing.bin");
    snprintf(p, sizeof p, "%s/short.bin", g_tmp);
    spit(p, b, 20);
    expect_load(p, PARITY_E_FORMAT, "28 bytes");
    snprintf(p, sizeof p, "%s/trunc.bin", g_tmp);
    spit(p, b, n - 4);
    expect_load(p, PARITY_E_FORMAT, "implies 1056540 bytes");
    snprintf(p, sizeof p, "%s/long.bin", g_tmp);
    char *b2 = malloc(n + 4);
    memcpy(b2, b, n);
    memset(b2 + n, 0, 4);
    spit(p, b2, n + 4);
    expect_load(p, PARITY_E_FORMAT, "file size 1056544");
    /* A negative vocab_size claims a separate classifier the file does not have. */
    int32_t neg = -512;
    memcpy(b2 + 20, &neg, 4);
    snprintf(p, sizeof p, "%s/negvocab.bin", g_tmp);
    spit(p, b2, n);
    expect_load(p, PARITY_E_FORMAT, "separate classifier");
    memcpy(b2, b, n);
    int32_t zero = 0;
    memcpy(b2 + 12, &zero, 4); /* n_heads = 0 */
    snprintf(p, sizeof p, "%s/heads0.bin", g_tmp);
    spit(p, b2, n);
    expect_load(p, PARITY_E_FORMAT, "n_heads");
    memcpy(b2, b, n);
    int32_t three = 3;
    memcpy(b2 + 16, &three, 4); /* n_kv_heads = 3 does not divide 8 */
    snprintf(p, sizeof p, "%s/kv3.bin", g_tmp);
    spit(p, b2, n);
    expect_load(p, PARITY_E_FORMAT, "divisible by n_kv_heads");
    spit(p, "hello, this is text, not a checkpoint", 37);
    expect_load(p, PARITY_E_FORMAT, "header field");
    free(b2);
    free(b);
}

/* A separate classifier equal to the embedding gives the shared model's logits exactly. */
static void test_separate_classifier(void **state)
{
    (void)state;
    size_t n;
    char *b = slurp(g_model, &n);
    size_t emb = 512 * 64 * 4;
    char *b2 = malloc(n + emb);
    memcpy(b2, b, n);
    memcpy(b2 + n, b + 28, emb);
    int32_t neg = -512;
    memcpy(b2 + 20, &neg, 4);
    char p[512];
    snprintf(p, sizeof p, "%s/sep.bin", g_tmp);
    spit(p, b2, n + emb);
    parity_model_t *m2;
    assert_int_equal(parity_model_load(p, &m2, NULL), PARITY_OK);
    assert_int_equal(parity_model_config(m2)->shared_classifier, 0);
    assert_int_equal(parity_model_config(m2)->vocab_size, 512);
    parity_model_path_t path;
    parity_model_path_default(&path);
    parity_model_runner_t *r1, *r2;
    assert_int_equal(parity_model_runner_new(g_m, &path, &r1, NULL), PARITY_OK);
    assert_int_equal(parity_model_runner_new(m2, &path, &r2, NULL), PARITY_OK);
    int32_t toks[4] = {1, 403, 407, 261};
    double *l1 = malloc(4 * 512 * sizeof *l1), *l2 = malloc(4 * 512 * sizeof *l2);
    assert_int_equal(parity_model_forward(r1, toks, 4, l1, NULL), PARITY_OK);
    assert_int_equal(parity_model_forward(r2, toks, 4, l2, NULL), PARITY_OK);
    assert_memory_equal(l1, l2, 4 * 512 * sizeof *l1);
    free(l1), free(l2);
    parity_model_runner_free(r1);
    parity_model_runner_free(r2);
    parity_model_free(m2);
    free(b2), free(b);
}

/* ------------------------------------------------------------------------------------------ */

static void roundtrip(const char *spec, const char *canon)
{
    parity_model_path_t p, q;
    parity_diag_t d = {{0}};
    char buf[128];
    if (parity_model_path_parse(spec, &p, &d) != PARITY_OK) fail_msg("%s: %s", spec, d.msg);
    parity_model_path_str(&p, buf, sizeof buf);
    assert_string_equal(buf, canon);
    assert_int_equal(parity_model_path_parse(buf, &q, NULL), PARITY_OK);
    assert_memory_equal(&p, &q, sizeof p);
}

static void bad_spec(const char *spec, const char *needle)
{
    parity_model_path_t p;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_model_path_parse(spec, &p, &d), PARITY_E_INVALID);
    if (!strstr(d.msg, needle)) fail_msg("%s: diag '%s' lacks '%s'", spec, d.msg, needle);
}

static void test_path_spec(void **state)
{
    (void)state;
    roundtrip("ref", "ref");
    roundtrip("fp64", "ref");
    roundtrip("bf16", "bf16");
    roundtrip("kvcache+bf16", "bf16+kvcache");
    roundtrip("bf16+kvcache+tp4:ring:bf16+splitk2", "bf16+kvcache+splitk2+tp4:ring:bf16");
    roundtrip("tp8:oneshot+fp16+fused", "fp16+fused+tp8:oneshot");
    roundtrip("bf16acc+batch4:packed", "bf16acc+batch4:packed");
    roundtrip("batch2", "ref+batch2:padded");
    parity_model_path_t p;
    assert_int_equal(parity_model_path_parse("bf16+tp4", &p, NULL), PARITY_OK);
    assert_int_equal(p.hop, PARITY_MODEL_BF16); /* hop follows storage */
    assert_int_equal(p.accum, PARITY_MODEL_FP32);
    bad_spec("", "empty");
    bad_spec("bf16+", "empty token");
    bad_spec("bf17", "unknown token 'bf17'");
    bad_spec("bf16+fp16", "repeats");
    bad_spec("splitk0", "splitkS");
    bad_spec("splitk17", "splitkS");
    bad_spec("tp9", "tpR");
    bad_spec("tp4:star", "all-reduce 'star'");
    bad_spec("tp4:ring:fp8", "hop dtype 'fp8'");
    bad_spec("batch0", "batchB");
    bad_spec("batch2:ragged", "batch layout");
    assert_int_equal(parity_model_path_parse(NULL, &p, NULL), PARITY_E_INVALID);
    /* tp3 does not divide 8 heads: refused when bound to the model. */
    parity_model_runner_t *r = (parity_model_runner_t *)1;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_model_path_parse("tp3", &p, NULL), PARITY_OK);
    assert_int_equal(parity_model_runner_new(g_m, &p, &r, &d), PARITY_E_INVALID);
    assert_null(r);
    assert_non_null(strstr(d.msg, "tp3"));
}

/* ------------------------------------------------------------------------------------------ */

/* Greedy text of `spec` from BOS for 200 steps, decoded and filtered as run.c prints it. */
static char *greedy_text(const char *spec)
{
    parity_model_path_t p;
    assert_int_equal(parity_model_path_parse(spec, &p, NULL), PARITY_OK);
    parity_model_runner_t *r;
    assert_int_equal(parity_model_runner_new(g_m, &p, &r, NULL), PARITY_OK);
    parity_llama_tok_t *tok;
    assert_int_equal(parity_llama_tok_load(g_tok, 512, &tok, NULL), PARITY_OK);
    int32_t bos = PARITY_LLAMA_BOS, seq[201];
    size_t n;
    assert_int_equal(parity_model_generate(r, &bos, 1, 200, 0.0, 0, seq, &n), PARITY_OK);
    assert_int_equal(n, 201);
    char *text = malloc(8 * 201 + 1);
    size_t len = 0;
    for (size_t i = 1; i < n; i++) {
        size_t pl;
        const char *piece = parity_llama_tok_decode_piece(tok, seq[i - 1], seq[i], &pl);
        if (pl == 1 && !(piece[0] >= 0x20 || piece[0] == '\n' || piece[0] == '\t')) continue;
        memcpy(text + len, piece, pl);
        len += pl;
    }
    text[len] = '\0';
    parity_llama_tok_free(tok);
    parity_model_runner_free(r);
    return text;
}

static void test_greedy_expected(void **state)
{
    (void)state;
    char p[1100];
    size_t n;
    parity_diag_t d;
    if (parity_data_path("stories260K_expected_t0_n200.txt", p, sizeof p, &d) != PARITY_OK) fail_msg("%s", d.msg);
    char *want = slurp(p, &n);
    const char *specs[] = {"ref", "fp32"};
    for (size_t i = 0; i < 2; i++) {
        char *got = greedy_text(specs[i]);
        if (strcmp(got, want) != 0) fail_msg("path %s: greedy text differs:\n%s", specs[i], got);
        free(got);
    }
    free(want);
}

/* ------------------------------------------------------------------------------------------ */

static const int32_t SEQ[] = {1, 403, 407, 261, 378, 395, 423, 261, 290, 408, 271, 384, 282,
                              272, 348, 301, 345, 286, 307, 259, 303, 345, 376, 353, 289};
#define NSEQ (sizeof SEQ / sizeof SEQ[0])

static double *logits_of(const char *spec, const size_t *companions, size_t ncomp)
{
    parity_model_path_t p;
    parity_diag_t d;
    if (parity_model_path_parse(spec, &p, &d) != PARITY_OK) fail_msg("%s", d.msg);
    parity_model_runner_t *r;
    assert_int_equal(parity_model_runner_new(g_m, &p, &r, NULL), PARITY_OK);
    if (companions) assert_int_equal(parity_model_runner_set_companions(r, companions, ncomp), PARITY_OK);
    double *l = malloc(NSEQ * 512 * sizeof *l);
    assert_int_equal(parity_model_forward(r, SEQ, NSEQ, l, NULL), PARITY_OK);
    parity_model_runner_free(r);
    return l;
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= m)) m = e;
    }
    return m;
}

static void test_path_relations(void **state)
{
    (void)state;
    size_t N = NSEQ * 512;
    double *ref = logits_of("ref", NULL, 0);
    /* Exact identities: one rank, one split part, no reordering. */
    const char *same_as_ref[] = {"ref+tp1", "ref+splitk1"};
    for (size_t i = 0; i < 2; i++) {
        double *l = logits_of(same_as_ref[i], NULL, 0);
        assert_memory_equal(l, ref, N * sizeof *l);
        free(l);
    }
    /* fp64 reorderings (KV-cache decode, split-K, TP all-reduces, fused norm): logits are about
     * 10 in size, sums have at most 172 terms, so reordering moves them by a few hundred ulps of
     * double at most; 1e-11 leaves a wide margin and is still 7 orders below fp32 effects. */
    const char *fp64_orders[] = {"kvcache", "splitk4", "tp4:ring", "tp8:tree", "tp2:oneshot",
                                 "fused", "batch3:packed"};
    for (size_t i = 0; i < sizeof fp64_orders / sizeof *fp64_orders; i++) {
        double *l = logits_of(fp64_orders[i], NULL, 0);
        double e = max_abs_diff(l, ref, N);
        if (!(e < 1e-11)) fail_msg("ref+%s: max |dlogit| %g", fp64_orders[i], e);
        free(l);
    }
    /* fp32 is close to fp64 (24-bit storage); bf16 drifts far more; the bf16-accumulation mutant
     * more than faithful bf16. */
    double *f32 = logits_of("fp32", NULL, 0), *b16 = logits_of("bf16", NULL, 0);
    double *bacc = logits_of("bf16acc", NULL, 0);
    double e32 = max_abs_diff(f32, ref, N), e16 = max_abs_diff(b16, ref, N);
    double eacc = max_abs_diff(bacc, ref, N);
    if (!(e32 > 0 && e32 < 1e-3)) fail_msg("fp32 max |dlogit| %g", e32);
    if (!(e16 > 100 * e32)) fail_msg("bf16 %g not far above fp32 %g", e16, e32);
    if (!(eacc > 2 * e16)) fail_msg("bf16acc %g not above bf16 %g", eacc, e16);
    /* bf16 hops in the all-reduce and KV-cache decode change bf16 results. */
    double *tp = logits_of("bf16+tp4:ring:bf16", NULL, 0);
    double *tpo = logits_of("bf16+tp4:oneshot:bf16", NULL, 0);
    double *kv = logits_of("bf16+kvcache", NULL, 0);
    assert_true(max_abs_diff(tp, b16, N) > 0);
    assert_true(max_abs_diff(tp, tpo, N) > 0);
    assert_true(max_abs_diff(kv, b16, N) > 0);
    /* Batch invariance: with a fixed split the batch composition cannot matter; with the
     * heuristic, a batch whose row count fills the machine picks other splits. The effect is
     * checked in fp32: bf16 x bf16 products have 16 bits, so fp32 sums of a few dozen of them are
     * often exact and split order then changes nothing (docs/model.md). */
    size_t comp[3] = {40, 3, 100};
    double *fixed_alone = logits_of("bf16+splitk1+batch4", NULL, 0);
    double *fixed_batch = logits_of("bf16+splitk1+batch4", comp, 3);
    assert_memory_equal(fixed_alone, fixed_batch, N * sizeof(double));
    assert_memory_equal(fixed_alone, b16, N * sizeof(double));
    double *heur_alone = logits_of("fp32+batch1", NULL, 0);
    double *heur_batch = logits_of("fp32+batch4:padded", comp, 3);
    assert_true(max_abs_diff(heur_alone, heur_batch, N) > 0);
    double *v[] = {ref, f32, b16, bacc, tp, tpo, kv, fixed_alone, fixed_batch, heur_alone, heur_batch};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) free(v[i]);
}

/* Teacher-forced logits equal the logits generation sees at each step (same arithmetic). */
static void test_forward_matches_generate(void **state)
{
    (void)state;
    const char *specs[] = {"bf16", "bf16+kvcache", "bf16+splitk2+tp2:tree"};
    for (size_t s = 0; s < 3; s++) {
        parity_model_path_t p;
        assert_int_equal(parity_model_path_parse(specs[s], &p, NULL), PARITY_OK);
        parity_model_runner_t *r;
        assert_int_equal(parity_model_runner_new(g_m, &p, &r, NULL), PARITY_OK);
        int32_t bos = 1, seq[41];
        size_t n;
        assert_int_equal(parity_model_generate(r, &bos, 1, 40, 0.0, 0, seq, &n), PARITY_OK);
        assert_int_equal(n, 41);
        double *l = malloc(40 * 512 * sizeof *l);
        assert_int_equal(parity_model_forward(r, seq, 40, l, NULL), PARITY_OK);
        for (size_t t = 0; t < 40; t++) {
            int32_t best = 0;
            for (int v = 1; v < 512; v++)
                if (l[t * 512 + v] > l[t * 512 + best]) best = v;
            if (best != seq[t + 1]) fail_msg("%s: position %zu: argmax %d, generated %d", specs[s], t, best, seq[t + 1]);
        }
        free(l);
        parity_model_runner_free(r);
    }
}

static void test_hidden_and_logprob(void **state)
{
    (void)state;
    parity_model_path_t p;
    parity_model_path_default(&p);
    parity_model_runner_t *r;
    assert_int_equal(parity_model_runner_new(g_m, &p, &r, NULL), PARITY_OK);
    size_t n = 5, D = 64, NS = 7;
    double *h = malloc(NS * n * D * sizeof *h), *l = malloc(n * 512 * sizeof *l);
    assert_int_equal(parity_model_forward(r, SEQ, n, l, h), PARITY_OK);
    /* Slice 0 is the embedding row of each token, exactly. */
    size_t len;
    char *b = slurp(g_model, &len);
    for (size_t t = 0; t < n; t++)
        for (size_t j = 0; j < D; j++) {
            float w;
            memcpy(&w, b + 28 + 4 * ((size_t)SEQ[t] * D + j), 4);
            assert_true(h[t * D + j] == (double)w);
        }
    free(b);
    /* Logprobs of a row sum to 1 in probability. */
    double s = 0;
    for (int v = 0; v < 512; v++) s += exp(parity_model_logprob(l, 512, v));
    assert_true(fabs(s - 1) < 1e-12);
    /* Invalid calls. */
    int32_t bad[2] = {1, 512};
    assert_int_equal(parity_model_forward(r, bad, 2, l, NULL), PARITY_E_INVALID);
    assert_int_equal(parity_model_forward(r, SEQ, 0, l, NULL), PARITY_E_INVALID);
    assert_int_equal(parity_model_forward(NULL, SEQ, 1, l, NULL), PARITY_E_INVALID);
    int32_t *big = calloc(513, sizeof *big);
    assert_int_equal(parity_model_forward(r, big, 513, NULL, NULL), PARITY_E_INVALID);
    free(big);
    int32_t out[8];
    size_t no;
    assert_int_equal(parity_model_generate(r, SEQ, 0, 4, 0, 0, out, &no), PARITY_E_INVALID);
    assert_int_equal(parity_model_generate(r, SEQ, 6, 4, 0, 0, out, &no), PARITY_E_INVALID);
    /* Sampling is reproducible from the seed. */
    int32_t a[21], c[21], bos = 1;
    size_t na, nc;
    assert_int_equal(parity_model_generate(r, &bos, 1, 20, 1.0, 7, a, &na), PARITY_OK);
    assert_int_equal(parity_model_generate(r, &bos, 1, 20, 1.0, 7, c, &nc), PARITY_OK);
    assert_int_equal(na, nc);
    assert_memory_equal(a, c, na * sizeof *a);
    free(h), free(l);
    parity_model_runner_free(r);
    parity_model_runner_free(NULL);
}

/* One definition of each reduction order: a row-parallel GEMM of the model under tpR:ALGO:HOP
 * gives, bit for bit, what `parity allreduce ALGO:R:HOP` (the reduce module, through its spec
 * parser and its vector entry point) gives on the same rank partials: each rank's slice of K
 * summed in order in fp32 and rounded to the hop dtype, all-reduced, then stored in bf16. */
static void test_tp_allreduce_is_reduce_module(void **state)
{
    (void)state;
    enum { N = 64, K = 172 }; /* w2's shape in stories260K: D x F */
    static double W[N * K], x[K], out[N], part[8 * N], want[N];
    uint64_t z = 12345;
    for (int i = 0; i < N * K + K; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
        double v = parity_reduce_round(PARITY_REDUCE_BF16, u);
        if (i < N * K) W[i] = v;
        else x[i - N * K] = v;
    }
    static const char *const algos[3] = {"ring", "tree", "oneshot"};
    static const char *const hops[2] = {"bf16", "fp32"};
    static const int ranks[3] = {2, 4, 8};
    int differ_from_tp1 = 0;
    for (int a = 0; a < 3; a++)
        for (int h = 0; h < 2; h++)
            for (int ri = 0; ri < 3; ri++) {
                int R = ranks[ri];
                char spec[64], arspec[64];
                snprintf(spec, sizeof spec, "bf16+tp%d:%s:%s", R, algos[a], hops[h]);
                snprintf(arspec, sizeof arspec, "%s:%d:%s", algos[a], R, hops[h]);
                parity_model_path_t p;
                assert_int_equal(parity_model_path_parse(spec, &p, NULL), PARITY_OK);
                parity_model_runner_t *r;
                assert_int_equal(parity_model_runner_new(g_m, &p, &r, NULL), PARITY_OK);
                model_gemm(r, out, W, x, N, K, 1, 1);
                parity_model_runner_free(r);
                parity_reduce_spec_t ar;
                assert_int_equal(parity_reduce_spec_parse(arspec, &ar, NULL), PARITY_OK);
                parity_reduce_dtype_t hop = h == 0 ? PARITY_REDUCE_BF16 : PARITY_REDUCE_FP32;
                for (int k = 0; k < R; k++) {
                    int k0 = K * k / R, k1 = K * (k + 1) / R;
                    for (int i = 0; i < N; i++) {
                        float acc = 0;
                        for (int t = k0; t < k1; t++) acc += (float)(W[i * K + t] * x[t]);
                        part[k * N + i] = parity_reduce_round(hop, acc);
                    }
                }
                assert_int_equal(parity_reduce_allreduce(&ar, part, N, want), PARITY_OK);
                for (int i = 0; i < N; i++) {
                    double w = parity_reduce_round(PARITY_REDUCE_BF16, want[i]);
                    if (memcmp(&w, &out[i], sizeof w) != 0)
                        fail_msg("%s vs parity allreduce %s: element %d: %a vs %a", spec, arspec, i,
                                 out[i], w);
                    float acc = 0;
                    for (int t = 0; t < K; t++) acc += (float)(W[i * K + t] * x[t]);
                    differ_from_tp1 += parity_reduce_round(PARITY_REDUCE_BF16, acc) != w;
                }
            }
    /* The orders matter on these data (the test would pass vacuously if every order agreed). */
    assert_true(differ_from_tp1 > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_separate_classifier),
        cmocka_unit_test(test_path_spec),
        cmocka_unit_test(test_greedy_expected),
        cmocka_unit_test(test_path_relations),
        cmocka_unit_test(test_forward_matches_generate),
        cmocka_unit_test(test_hidden_and_logprob),
        cmocka_unit_test(test_tp_allreduce_is_reduce_module),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

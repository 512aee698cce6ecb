/* tokenizer: GPT-2 BPE against ids from an independent implementation (tiktoken) and from
 * encoder.json by hand, whole-file counts and round trips on tinyshakespeare, the llama2.c
 * tokenizer against karpathy/llama2.c run.c's own output, and every malformed-input path. */
#define _POSIX_C_SOURCE 200809L
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

#include "parity/tokenizer.h"
#include "src/tokenizer/tokenizer_gpt2_stages.h"

static char g_tmp[256]; /* a fresh temporary folder for malformed files */

/* Paths are built into caller-owned buffers so several can be held at once. */
typedef struct {
    char s[1024];
} path_t;

static const char *data_path(path_t *p, const char *name)
{
    parity_diag_t d;
    if (parity_data_path(name, p->s, sizeof p->s, &d) != PARITY_OK) fail_msg("%s", d.msg);
    return p->s;
}

static const char *tmp_path(path_t *p, const char *name)
{
    snprintf(p->s, sizeof p->s, "%s/%s", g_tmp, name);
    return p->s;
}

/* A path whose buffer is a compound literal: it lives until the end of the enclosing block. */
#define DATA(name) data_path(&(path_t){{0}}, name)
#define TMP(name) tmp_path(&(path_t){{0}}, name)

static parity_gpt2_t *g_gpt2;
static parity_llama_tok_t *g_llama;

static int setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/parity_test_tokenizer_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    parity_diag_t d = {{0}};
    if (parity_gpt2_load_default(&g_gpt2, &d) != PARITY_OK) {
        fprintf(stderr, "gpt2 load: %s\n", d.msg);
        return -1;
    }
    if (parity_llama_tok_load(DATA("tok512.bin"), 512, &g_llama, &d) != PARITY_OK) {
        fprintf(stderr, "tok512 load: %s\n", d.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    parity_gpt2_free(g_gpt2);
    parity_llama_tok_free(g_llama);
    /* Only files this test wrote. */
    const char *names[] = {"enc.json", "vocab.bpe", "tok.bin"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unlink(TMP(names[i]));
    rmdir(g_tmp);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* GPT-2                                                                                       */

static void expect_gpt2(const char *text, const int32_t *want, size_t n_want)
{
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(parity_gpt2_encode(g_gpt2, text, strlen(text), &ids, &n), PARITY_OK);
    if (n != n_want) fprintf(stderr, "text \"%s\": %zu ids, expected %zu\n", text, n, n_want);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != want[i]) fprintf(stderr, "text \"%s\": id %zu\n", text, i);
        assert_int_equal(ids[i], want[i]);
    }
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(parity_gpt2_decode(g_gpt2, ids, n, &back, &blen), PARITY_OK);
    assert_int_equal(blen, strlen(text));
    assert_memory_equal(back, text, blen);
    free(back);
    free(ids);
}

#define EXPECT_GPT2(text, ...)                                                                   \
    do {                                                                                         \
        static const int32_t want_[] = {__VA_ARGS__};                                            \
        expect_gpt2(text, want_, sizeof want_ / sizeof *want_);                                  \
    } while (0)

/* Expected ids come from tiktoken 0.14.0's Encoding built from these same two files with GPT-2's
 * pattern (encode_ordinary); the first case was also read off encoder.json by hand: "First"=5962,
 * "ĠCitizen"=22307, ":"=25, "Ċ"=198, "Before"=8421, "Ġwe"=356, "Ġproceed"=5120. */
static void gpt2_known_ids(void **state)
{
    (void)state;
    EXPECT_GPT2("First Citizen:\nBefore we proceed", 5962, 22307, 25, 198, 8421, 356, 5120);
    /* unicode letters, a space before digits, a contraction, runs of whitespace before text:
     * "\s+(?!\S)" leaves the last space to join " x", and "  \n\n " splits as "  "+"\n\n"+" x" */
    EXPECT_GPT2("h\xc3\xa9llo w\xc3\xb6rld 123 don't  \n\n x", 71, 2634, 18798, 266, 30570, 335,
                17031, 836, 470, 220, 220, 628, 2124);
    /* multiple spaces inside and trailing whitespace */
    EXPECT_GPT2("Hello  world   ", 15496, 220, 995, 220, 220, 220);
    EXPECT_GPT2("I'll we've they're 2024 12345678", 40, 1183, 356, 1053, 484, 821, 48609, 17031,
                2231, 30924);
    EXPECT_GPT2("  \n\n\n", 220, 220, 628, 198);
    /* NBSP is whitespace, CJK letters, an emoji (not a letter: punctuation branch) */
    EXPECT_GPT2("a\xc2\xa0" "b \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 !!!", 64, 1849, 65, 220,
                40792, 23877, 229, 30325, 222, 220, 10185);
    /* special tokens are plain text here */
    EXPECT_GPT2("<|endoftext|>", 27, 91, 437, 1659, 5239, 91, 29);
    /* U+2028 is White_Space but U+180E is not (tiktoken; PCRE2's own \s would disagree) */
    EXPECT_GPT2("\xe2\x80\xa8\xe1\xa0\x8e're're", 447, 101, 157, 254, 236, 6, 260, 821);
}

static void gpt2_token_strings(void **state)
{
    (void)state;
    assert_int_equal(parity_gpt2_vocab_size(g_gpt2), PARITY_GPT2_VOCAB_SIZE);
    size_t n = 99;
    const char *s = parity_gpt2_token_str(g_gpt2, 220, &n);
    assert_int_equal(n, 1);
    assert_memory_equal(s, " ", 1);
    s = parity_gpt2_token_str(g_gpt2, 198, &n);
    assert_memory_equal(s, "\n", n);
    s = parity_gpt2_token_str(g_gpt2, 22307, &n);
    assert_int_equal(n, 8);
    assert_memory_equal(s, " Citizen", 8);
    s = parity_gpt2_token_str(g_gpt2, PARITY_GPT2_EOT, &n);
    assert_int_equal(n, 13);
    assert_memory_equal(s, "<|endoftext|>", 13);
    /* Ā (U+0100) is byte 0x00 in bytes_to_unicode: id 188 is the first non-printable byte. */
    s = parity_gpt2_token_str(g_gpt2, 188, &n);
    assert_int_equal(n, 1);
    assert_int_equal(s[0], 0);
    assert_null(parity_gpt2_token_str(g_gpt2, -1, &n));
    assert_int_equal(n, 0);
    assert_null(parity_gpt2_token_str(g_gpt2, PARITY_GPT2_VOCAB_SIZE, NULL));
    assert_null(parity_gpt2_token_str(NULL, 0, NULL));

    int32_t bad[] = {5962, 50257};
    char *txt = (char *)1;
    size_t len = 7;
    assert_int_equal(parity_gpt2_decode(g_gpt2, bad, 2, &txt, &len), PARITY_E_INVALID);
    assert_null(txt);
    assert_int_equal(len, 0);
}

static int cmp_int(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* data/README.md: 338025 tokens (nanoGPT's 301,966 train + 36,059 val), 11706 distinct, the top
 * token ("\n", 39996 times) 11.8%. */
static void gpt2_tinyshakespeare(void **state)
{
    (void)state;
    size_t len;
    char *text = slurp(DATA("tinyshakespeare.txt"), &len);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(parity_gpt2_encode(g_gpt2, text, len, &ids, &n), PARITY_OK);
    assert_int_equal(n, 338025);
    static const int32_t head[] = {5962, 22307, 25, 198, 8421, 356, 5120};
    assert_memory_equal(ids, head, sizeof head);

    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(parity_gpt2_decode(g_gpt2, ids, n, &back, &blen), PARITY_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    assert_int_equal(back[blen], '\0');
    free(back);

    int32_t *sorted = malloc(n * sizeof *sorted);
    assert_non_null(sorted);
    memcpy(sorted, ids, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_int);
    size_t distinct = 0, best = 0, run = 0;
    int32_t best_id = -1;
    for (size_t i = 0; i < n; i++) {
        run = (i && sorted[i] == sorted[i - 1]) ? run + 1 : 1;
        distinct += run == 1;
        if (run > best) {
            best = run;
            best_id = sorted[i];
        }
    }
    assert_int_equal(distinct, 11706);
    assert_int_equal(best_id, 198);
    assert_int_equal(best, 39996);
    assert_true((double)best / (double)n > 0.1175 && (double)best / (double)n < 0.1185);
    free(sorted);

    /* The convenience loader gives the same stream. */
    int32_t *ids2 = NULL;
    size_t n2 = 0;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_text_tokens_gpt2(DATA("tinyshakespeare.txt"), &ids2, &n2, &d),
                     PARITY_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(ids2, ids, n * sizeof *ids);
    free(ids2);
    assert_int_equal(parity_text_tokens_gpt2(TMP("missing.txt"), &ids2, &n2, &d),
                     PARITY_E_IO);
    assert_non_null(strstr(d.msg, "missing.txt"));
    assert_null(ids2);
    free(ids);
    free(text);
}

/* Any bytes at all, including NUL and invalid UTF-8, must survive encode -> decode. The seed is
 * fixed; a failure prints the case number. */
static void gpt2_roundtrip_arbitrary_bytes(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    unsigned char buf[300];
    static const char *pieces[] = {" ", "'s", "\xc3", "\xa9", "\xff", "\n", "9", "ab", "\xe2\x80",
                                   "\0", "\xf0\x9f\x98\x80", "  ", "!"};
    for (int c = 0; c < 400; c++) {
        size_t len = 0;
        while (len < sizeof buf - 8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (x % 23 == 0) break;
            if (x % 3 == 0) {
                buf[len++] = (unsigned char)(x >> 24);
            } else {
                const char *p = pieces[(x >> 8) % (sizeof pieces / sizeof *pieces)];
                size_t k = *p ? strlen(p) : 1;
                memcpy(buf + len, p, k);
                len += k;
            }
        }
        int32_t *ids = NULL;
        size_t n = 0;
        assert_int_equal(parity_gpt2_encode(g_gpt2, (const char *)buf, len, &ids, &n), PARITY_OK);
        char *back = NULL;
        size_t blen = 0;
        assert_int_equal(parity_gpt2_decode(g_gpt2, ids, n, &back, &blen), PARITY_OK);
        if (blen != len || memcmp(back, buf, len) != 0) fprintf(stderr, "case %d differs\n", c);
        assert_int_equal(blen, len);
        assert_memory_equal(back, buf, len);
        free(back);
        free(ids);
    }
    /* empty text: no ids, NULL array */
    int32_t *ids = (int32_t *)1;
    size_t n = 5;
    assert_int_equal(parity_gpt2_encode(g_gpt2, NULL, 0, &ids, &n), PARITY_OK);
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_int_equal(parity_gpt2_encode(g_gpt2, NULL, 3, &ids, &n), PARITY_E_INVALID);
    assert_int_equal(parity_gpt2_encode(NULL, "a", 1, &ids, &n), PARITY_E_INVALID);
}

/* Loads with diag and checks status plus that the message names the file and mentions what. */
static void expect_gpt2_error(const char *enc, const char *bpe, parity_status_t want,
                              const char *file_part, const char *what)
{
    parity_gpt2_t *t = (parity_gpt2_t *)1;
    parity_diag_t d = {{0}};
    parity_status_t st = parity_gpt2_load(enc, bpe, &t, &d);
    if (st != want || !strstr(d.msg, file_part) || !strstr(d.msg, what))
        fprintf(stderr, "got status %d, diag \"%s\"; expected %d mentioning \"%s\", \"%s\"\n",
                (int)st, d.msg, (int)want, file_part, what);
    assert_int_equal(st, want);
    assert_null(t);
    assert_non_null(strstr(d.msg, file_part));
    assert_non_null(strstr(d.msg, what));
}

/* Writes the real encoder.json with the first occurrence of `from` replaced by `to`. */
static void write_encoder_with(const char *from, const char *to)
{
    size_t len;
    char *s = slurp(DATA("gpt2_encoder.json"), &len);
    char *at = strstr(s, from);
    assert_non_null(at);
    FILE *f = fopen(TMP("enc.json"), "wb");
    assert_non_null(f);
    fwrite(s, 1, (size_t)(at - s), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
    free(s);
}

static void gpt2_bad_files(void **state)
{
    (void)state;
    const char *enc = DATA("gpt2_encoder.json"), *bpe = DATA("gpt2_vocab.bpe");
    const char *tenc = TMP("enc.json"), *tbpe = TMP("vocab.bpe");

    expect_gpt2_error(TMP("missing.json"), bpe, PARITY_E_IO, "missing.json", "cannot open");
    expect_gpt2_error(enc, TMP("missing.json"), PARITY_E_IO, "missing.json", "cannot open");

    /* encoder.json */
    size_t len;
    char *s = slurp(enc, &len);
    spit(tenc, s, 5000); /* truncated */
    free(s);
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "enc.json", "invalid JSON");
    spit(tenc, "[1, 2]", 6);
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "enc.json", "expected an object");
    spit(tenc, "{\"!\": 0}", 8);
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "enc.json", "at least 256");
    write_encoder_with("\"!\": 0", "\"!\": 0.5");
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "token #0 \"!\"", "expected an integer id");
    write_encoder_with("\"!\": 0", "\"!\": \"zero\"");
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "token #0", "expected an integer id");
    write_encoder_with("\"\\\"\": 1", "\"\\\"\": 0");
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "id 0 already used", "expected each id once");
    write_encoder_with("\"!\": 0", "\"\\u4e2d\": 0"); /* U+4E2D is not a byte-level character */
    expect_gpt2_error(tenc, bpe, PARITY_E_FORMAT, "token id 0", "U+4E2D");

    /* vocab.bpe, against the real encoder. A small valid file loads and is used. */
    const char ok[] = "#version: 0.2\n\xc4\xa0 t\n";
    spit(tbpe, ok, sizeof ok - 1);
    parity_gpt2_t *t = NULL;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_gpt2_load(enc, tbpe, &t, &d), PARITY_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(parity_gpt2_encode(t, " the", 4, &ids, &n), PARITY_OK);
    assert_int_equal(n, 3); /* "Ġt" (256) + "h" + "e": only the one merge exists */
    assert_int_equal(ids[0], 256);
    free(ids);
    parity_gpt2_free(t);

    const char one_token[] = "#version: 0.2\n\xc4\xa0 t\nhe\n";
    spit(tbpe, one_token, sizeof one_token - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "vocab.bpe: line 3", "two tokens");
    const char two_spaces[] = "#version: 0.2\nh  e\n";
    spit(tbpe, two_spaces, sizeof two_spaces - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "vocab.bpe: line 2", "separated by one space");
    const char unknown[] = "#version: 0.2\nqqqqqqqqqqqqqqqq e\n";
    spit(tbpe, unknown, sizeof unknown - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "line 2", "left token \"qqqqqqqqqqqqqqqq\"");
    const char not_merged[] = "#version: 0.2\nx q\n"; /* "xq" is not a GPT-2 token */
    spit(tbpe, not_merged, sizeof not_merged - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "line 2", "merged token is not in the encoder");
    const char dup[] = "#version: 0.2\nh e\n\xc4\xa0 t\nh e\n";
    spit(tbpe, dup, sizeof dup - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "line 4", "duplicate merge");
    const char blank[] = "#version: 0.2\nh e\n\n\xc4\xa0 t\n";
    spit(tbpe, blank, sizeof blank - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "line 3", "empty");
    const char bad_char[] = "#version: 0.2\n\xe4\xb8\xad e\n";
    spit(tbpe, bad_char, sizeof bad_char - 1);
    expect_gpt2_error(enc, tbpe, PARITY_E_FORMAT, "line 2", "not in the encoder");

    parity_gpt2_t *out = (parity_gpt2_t *)1;
    assert_int_equal(parity_gpt2_load(NULL, bpe, &out, NULL), PARITY_E_INVALID);
    assert_null(out);
    parity_gpt2_free(NULL);
}

/* parity_gpt2_load in two stages (one encoder, many vocab files: the fuzz target of vocab.bpe):
 * the tokenizer from the real pair encodes tinyshakespeare to the very ids of parity_gpt2_load's;
 * a bad vocab file gets parity_gpt2_load's status and message and leaves the encoder usable. */
static void gpt2_two_stages(void **state)
{
    (void)state;
    const char *enc = DATA("gpt2_encoder.json"), *bpe = DATA("gpt2_vocab.bpe");
    const char *tbpe = TMP("vocab.bpe");
    parity_gpt2_encoder_t *e = NULL;
    parity_diag_t d = {{0}}, d2 = {{0}};
    assert_int_equal(parity_gpt2_encoder_load(enc, &e, &d), PARITY_OK);

    size_t len;
    char *text = slurp(DATA("tinyshakespeare.txt"), &len);
    int32_t *want = NULL, *got = NULL;
    size_t nw = 0, ng = 0;
    assert_int_equal(parity_gpt2_encode(g_gpt2, text, len, &want, &nw), PARITY_OK);
    for (int round = 0; round < 2; round++) { /* the second after a failed load */
        parity_gpt2_t *t = NULL;
        assert_int_equal(parity_gpt2_load_with(e, bpe, &t, &d), PARITY_OK);
        assert_int_equal(parity_gpt2_vocab_size(t), parity_gpt2_vocab_size(g_gpt2));
        assert_int_equal(parity_gpt2_encode(t, text, len, &got, &ng), PARITY_OK);
        assert_int_equal(ng, nw);
        assert_memory_equal(got, want, nw * sizeof *want);
        free(got);
        parity_gpt2_free(t);

        const char dup[] = "#version: 0.2\nh e\n\xc4\xa0 t\nh e\n";
        spit(tbpe, dup, sizeof dup - 1);
        parity_gpt2_t *t1 = (parity_gpt2_t *)1, *t2 = (parity_gpt2_t *)1;
        parity_status_t s1 = parity_gpt2_load(enc, tbpe, &t1, &d);
        parity_status_t s2 = parity_gpt2_load_with(e, tbpe, &t2, &d2);
        assert_int_equal(s1, PARITY_E_FORMAT);
        assert_int_equal(s2, s1);
        assert_string_equal(d2.msg, d.msg);
        assert_null(t1);
        assert_null(t2);
    }
    free(want);
    free(text);

    /* An encoder error is parity_gpt2_load's too. */
    parity_gpt2_encoder_t *bad = (parity_gpt2_encoder_t *)1;
    spit(TMP("enc.json"), "[1, 2]", 6);
    assert_int_equal(parity_gpt2_encoder_load(TMP("enc.json"), &bad, &d), PARITY_E_FORMAT);
    assert_null(bad);
    assert_non_null(strstr(d.msg, "expected an object"));
    parity_gpt2_t *none = (parity_gpt2_t *)1;
    assert_int_equal(parity_gpt2_load_with(NULL, bpe, &none, &d), PARITY_E_INVALID);
    assert_null(none);
    parity_gpt2_encoder_free(e);
    parity_gpt2_encoder_free(NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* llama2.c tokenizer                                                                          */

static void expect_llama(const char *text, const int32_t *want, size_t n_want)
{
    int32_t *ids = NULL;
    size_t n = 0;
    size_t len = strlen(text);
    assert_int_equal(parity_llama_tok_encode(g_llama, text, len, 1, 0, &ids, &n), PARITY_OK);
    if (n != n_want) fprintf(stderr, "text \"%s\": %zu ids, expected %zu\n", text, n, n_want);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != want[i]) fprintf(stderr, "text \"%s\": id %zu\n", text, i);
        assert_int_equal(ids[i], want[i]);
    }
    /* after BOS the dummy-prefix space is dropped: the text comes back byte for byte */
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(parity_llama_tok_decode(g_llama, ids + 1, n - 1, PARITY_LLAMA_BOS, &back,
                                             &blen), PARITY_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
}

#define EXPECT_LLAMA(text, ...)                                                                  \
    do {                                                                                         \
        static const int32_t want_[] = {__VA_ARGS__};                                            \
        expect_llama(text, want_, sizeof want_ / sizeof *want_);                                 \
    } while (0)

/* Expected ids are what karpathy/llama2.c run.c's encode(t, text, bos=1, eos=0) printed for
 * tok512.bin (run.c built outside this repository; 43001 lines of tinyshakespeare and random
 * unicode also matched it exactly). */
static void llama_known_ids(void **state)
{
    (void)state;
    EXPECT_LLAMA("Once upon a time, there was a little girl named Lily.", 1, 403, 407, 261, 378,
                 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426);
    /* é and ö are pieces; 中文 and the emoji are not: byte fallback ids (byte + 3) */
    EXPECT_LLAMA("h\xc3\xa9llo w\xc3\xb6rld \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80!", 1, 270,
                 485, 306, 414, 263, 198, 185, 420, 341, 410, 231, 187, 176, 233, 153, 138, 410,
                 243, 162, 155, 131, 443);
    EXPECT_LLAMA("  two  spaces\t", 1, 410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 12);
    EXPECT_LLAMA("First Citizen:", 1, 410, 453, 315, 356, 410, 457, 275, 417, 451, 302, 467);

    /* empty text: no dummy prefix; bos/eos only */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(parity_llama_tok_encode(g_llama, "", 0, 1, 1, &ids, &n), PARITY_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], PARITY_LLAMA_BOS);
    assert_int_equal(ids[1], PARITY_LLAMA_EOS);
    free(ids);
    assert_int_equal(parity_llama_tok_encode(g_llama, NULL, 0, 0, 0, &ids, &n), PARITY_OK);
    assert_int_equal(n, 0);
    assert_null(ids);
    assert_int_equal(parity_llama_tok_encode(g_llama, NULL, 1, 0, 0, &ids, &n), PARITY_E_INVALID);
}

static void llama_pieces_and_decode(void **state)
{
    (void)state;
    assert_int_equal(parity_llama_tok_vocab_size(g_llama), 512);
    size_t n;
    float sc = 1.0f;
    const char *p = parity_llama_tok_piece(g_llama, 259, &n, &sc);
    assert_int_equal(n, 2);
    assert_memory_equal(p, " t", 2);
    assert_true(sc == 0.0f);
    p = parity_llama_tok_piece(g_llama, 260, &n, &sc);
    assert_memory_equal(p, "he", 2);
    assert_true(sc == -1.0f);
    p = parity_llama_tok_piece(g_llama, PARITY_LLAMA_BOS, &n, NULL);
    assert_int_equal(n, 5);
    assert_memory_equal(p, "\n<s>\n", 5);
    assert_null(parity_llama_tok_piece(g_llama, 512, &n, NULL));
    assert_int_equal(n, 0);

    /* a leading space is dropped only after BOS */
    p = parity_llama_tok_decode_piece(g_llama, PARITY_LLAMA_BOS, 259, &n);
    assert_int_equal(n, 1);
    assert_memory_equal(p, "t", 1);
    p = parity_llama_tok_decode_piece(g_llama, 260, 259, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(p, " t", 2);
    /* byte pieces: <0x0A> (id 13) is a newline, <0x00> (id 3) one NUL byte */
    p = parity_llama_tok_decode_piece(g_llama, 5, 13, &n);
    assert_int_equal(n, 1);
    assert_int_equal(p[0], '\n');
    p = parity_llama_tok_decode_piece(g_llama, 5, 3, &n);
    assert_int_equal(n, 1);
    assert_int_equal(p[0], '\0');
    assert_null(parity_llama_tok_decode_piece(g_llama, 5, -1, &n));
    assert_null(parity_llama_tok_decode_piece(g_llama, 5, 512, NULL));

    /* without BOS the dummy prefix stays */
    int32_t *ids = NULL;
    size_t k = 0;
    assert_int_equal(parity_llama_tok_encode(g_llama, "a cat", 5, 0, 1, &ids, &k), PARITY_OK);
    assert_int_equal(ids[k - 1], PARITY_LLAMA_EOS);
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(parity_llama_tok_decode(g_llama, ids, k - 1, -1, &txt, &len), PARITY_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(txt, " a cat", 6);
    free(txt);
    free(ids);
    int32_t bad = 999;
    assert_int_equal(parity_llama_tok_decode(g_llama, &bad, 1, -1, &txt, &len), PARITY_E_INVALID);
    assert_null(txt);
}

/* data/README.md: tok512 per line gives 666455 tokens, 212 distinct. */
static void llama_tinyshakespeare_lines(void **state)
{
    (void)state;
    int32_t *ids = NULL;
    size_t n = 0;
    parity_diag_t d = {{0}};
    assert_int_equal(parity_text_tokens_llama(DATA("tinyshakespeare.txt"),
                                              DATA("tok512.bin"), 512, &ids, &n, &d),
                     PARITY_OK);
    assert_int_equal(n, 666455);
    int seen[512] = {0};
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(ids[i] >= 0 && ids[i] < 512);
        distinct += seen[ids[i]]++ == 0;
    }
    assert_int_equal(distinct, 212);
    free(ids);
}

static void expect_llama_error(const char *path, int32_t vocab, parity_status_t want,
                               const char *what)
{
    parity_llama_tok_t *t = (parity_llama_tok_t *)1;
    parity_diag_t d = {{0}};
    parity_status_t st = parity_llama_tok_load(path, vocab, &t, &d);
    if (st != want || !strstr(d.msg, what))
        fprintf(stderr, "got status %d, diag \"%s\"; expected %d mentioning \"%s\"\n", (int)st,
                d.msg, (int)want, what);
    assert_int_equal(st, want);
    assert_null(t);
    assert_non_null(strstr(d.msg, what));
    assert_non_null(strstr(d.msg, strrchr(path, '/') + 1)); /* names the file */
}

static void llama_bad_files(void **state)
{
    (void)state;
    const char *real = DATA("tok512.bin"), *tmp = TMP("tok.bin");
    expect_llama_error(TMP("missing.bin"), 512, PARITY_E_IO, "cannot open");
    /* the file holds exactly 512 entries: asking for more is truncation, fewer leaves bytes */
    expect_llama_error(real, 513, PARITY_E_FORMAT, "token 512 of 513: truncated");
    expect_llama_error(real, 500, PARITY_E_FORMAT, "bytes after token 499");
    expect_llama_error(real, 2, PARITY_E_INVALID, "at least 3");

    size_t len;
    unsigned char *b = (unsigned char *)slurp(real, &len);
    spit(tmp, b, 2);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "header");
    /* Entries 0..2 take 8+5, 8+5, 8+6 bytes and each byte piece "<0xHH>" 8+6, so token 214
     * starts at byte 4 + 40 + 211 * 14 = 2998: cut inside its header, then inside its piece. */
    spit(tmp, b, 3000);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "token 214 of 512: truncated at byte 2998");
    spit(tmp, b, 3009);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "token 214 of 512: truncated: piece needs 6");
    /* a length beyond max_token_length (token 0's len field is at byte 8) */
    b[8] = 99;
    spit(tmp, b, len);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "token 0: len 99, expected 0..7");
    b[8] = 5;
    b[4] = b[5] = 0;
    b[6] = 0xc0;
    b[7] = 0x7f; /* score = NaN */
    spit(tmp, b, len);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "token 0: score is not finite");
    b[7] = 0;
    b[0] = 0; /* max_token_length 0 */
    spit(tmp, b, len);
    expect_llama_error(tmp, 512, PARITY_E_FORMAT, "max_token_length 0");
    free(b);

    parity_llama_tok_t *out = (parity_llama_tok_t *)1;
    assert_int_equal(parity_llama_tok_load(NULL, 512, &out, NULL), PARITY_E_INVALID);
    assert_null(out);
    parity_llama_tok_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_known_ids),
        cmocka_unit_test(gpt2_token_strings),
        cmocka_unit_test(gpt2_tinyshakespeare),
        cmocka_unit_test(gpt2_roundtrip_arbitrary_bytes),
        cmocka_unit_test(gpt2_bad_files),
        cmocka_unit_test(gpt2_two_stages),
        cmocka_unit_test(llama_known_ids),
        cmocka_unit_test(llama_pieces_and_decode),
        cmocka_unit_test(llama_tinyshakespeare_lines),
        cmocka_unit_test(llama_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

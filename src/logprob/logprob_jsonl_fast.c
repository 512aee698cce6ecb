/* The JSONL reader's fast paths: the two shapes that are most of the input (parity's own schema
 * and the OpenAI chat response) read straight from the line's bytes into the record, with the
 * strict scanner (logprob_json_scan.h) and no cJSON tree. Each fills the record exactly as the
 * cJSON path (logprob_jsonl_schema.c) would, or declines the line, which the cJSON path then
 * reads and reports on; tests/test_logprob.c holds the two paths to the same results. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_json_scan.h"
#include "src/logprob/logprob_jsonl_impl.h"

/* --- parity's own schema ----------------------------------------------------------------- */

/* Records of the form {"id": "...", "token_ids": [ints], "logprobs": [numbers or null]} (keys in
 * any order, "id" optional) are by far the most common input and building a cJSON tree for them
 * costs a malloc per number. lp_jsonl_fast_parity parses exactly that shape in strict JSON and
 * returns 1 with s filled as parse_parity (logprob_jsonl_schema.c) would fill it; on anything
 * else (other keys, duplicates, escapes, "-inf" strings, non-integer ids, numbers it cannot
 * convert exactly, any syntax error) it returns 0 and the caller takes the cJSON path, which
 * also produces every error message. */

/* The sequence's id: the n bytes at id, or "#ordinal" when id is NULL (as parse_line). */
static int fp_set_id(parity_logprob_seq_t *s, const char *id, size_t n, uint64_t ordinal)
{
    char ob[32], *tmp = NULL;
    const char *sid = ob;
    if (id) {
        if (!(tmp = malloc(n + 1))) return 0;
        memcpy(tmp, id, n);
        tmp[n] = 0;
        sid = tmp;
    } else {
        snprintf(ob, sizeof ob, "#%llu", (unsigned long long)ordinal);
    }
    int ok = lp_seq_set_str(&s->id, sid) == PARITY_OK;
    free(tmp);
    return ok;
}

int lp_jsonl_fast_parity(parity_logprob_reader_t *r, const char *line, size_t len, parity_logprob_seq_t *s, uint64_t ordinal)
{
    fp_cur_t c = {line, line + len};
    const char *id = NULL;
    size_t idn = 0, nids = 0, nlp = 0;
    int have_id = 0, have_ids = 0, have_lp = 0;
    fp_ws(&c);
    if (c.p >= c.e || *c.p++ != '{') return 0;
    fp_ws(&c);
    if (c.p < c.e && *c.p == '}') return 0; /* no logprobs: the slow path reports it */
    for (;;) {
        const char *k;
        size_t kn;
        fp_ws(&c);
        if (!lp_json_str(&c, &k, &kn)) return 0;
        fp_ws(&c);
        if (c.p >= c.e || *c.p++ != ':') return 0;
        fp_ws(&c);
        if (kn == 2 && !memcmp(k, "id", 2)) {
            if (have_id++ || !lp_json_str(&c, &id, &idn)) return 0;
        } else if ((kn == 9 && !memcmp(k, "token_ids", 9)) || (kn == 8 && !memcmp(k, "logprobs", 8))) {
            int isid = kn == 9;
            if (isid ? have_ids++ : have_lp++) return 0;
            if (c.p >= c.e || *c.p++ != '[') return 0;
            size_t n = 0;
            fp_ws(&c);
            if (c.p < c.e && *c.p == ']') {
                c.p++;
            } else {
                for (;;) {
                    fp_ws(&c);
                    if (n >= s->cap && lp_seq_reserve(s, s->cap * 2 > n + 1 ? s->cap * 2 : n + 1, 0)) return 0;
                    double v;
                    int is_int;
                    int64_t iv;
                    if (!isid && c.e - c.p >= 4 && !memcmp(c.p, "null", 4)) {
                        c.p += 4;
                        s->lp[n] = 0;
                        s->flags[n] = 0;
                    } else {
                        if (!fp_num(&c, &v, &is_int, &iv)) return 0;
                        if (isid) {
                            if (!is_int) return 0;
                            s->key[n] = iv;
                        } else {
                            s->lp[n] = v;
                            s->flags[n] = PARITY_LOGPROB_PRESENT;
                        }
                    }
                    n++;
                    fp_ws(&c);
                    if (c.p >= c.e) return 0;
                    if (*c.p == ',') {
                        c.p++;
                        continue;
                    }
                    if (*c.p++ != ']') return 0;
                    break;
                }
            }
            if (isid) nids = n;
            else nlp = n;
        } else {
            return 0;
        }
        fp_ws(&c);
        if (c.p >= c.e) return 0;
        if (*c.p == ',') {
            c.p++;
            continue;
        }
        if (*c.p++ != '}') return 0;
        break;
    }
    fp_ws(&c);
    if (c.p != c.e || !have_lp || !have_ids || nids != nlp) return 0;
    s->n = nlp;
    /* no modality or text; when no logprob is null every token has the same flags: a plain
     * sequence, whose mod[] and text[] are not written */
    uint8_t fand = PARITY_LOGPROB_PRESENT;
    for (size_t i = 0; i < nlp; i++) fand &= s->flags[i];
    s->plain = nlp > 0 && fand;
    if (!s->plain)
        for (size_t i = 0; i < nlp; i++) {
            s->mod[i] = 0;
            s->text[i] = UINT32_MAX;
        }
    return fp_set_id(s, !r->ordinal_ids && have_id ? id : NULL, idn, ordinal);
}

/* --- the OpenAI chat shape ---------------------------------------------------------------- */

/* The same idea as lp_jsonl_fast_parity for what servers return: {..., "choices": [{...,
 * "logprobs": {"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}...], ...}...]}}...]}
 * with fields in any order and any others (bytes, message, usage...) skipped. It fills s as
 * parse_chat (and parse_line's id, logprob_jsonl.c) would, or returns 0 and the caller takes the cJSON path,
 * which also gives every error message: on anything it does not take exactly as cJSON would
 * (a logprob that is not a finite number, a duplicate key it reads, a batch wrapper, a string
 * escape it does not decode the way cJSON does, more top entries than the first token had,
 * nesting deeper than 256, any syntax error). The skipping is strict JSON, so nothing cJSON
 * rejects is accepted here. */

typedef struct {
    /* scratch kept from line to line */
    fc_buf_t txt, ttxt;  /* the token's text, a top entry's text */
    int32_t top_id[4096];
    double top_lp[4096];
    /* the line's state, from here on cleared for each line */
    parity_logprob_seq_t *s;
    size_t ntop, K;
    int have_K;
    /* the token being read */
    int have_tok, have_lp, have_top;
    double lp;
    /* a top entry being read */
    int e_tok, e_lp;
    double e_v;
    /* the root and the first choice */
    int seen_choices, seen_logprobs, seen_content, seen_custom, seen_request, have_custom, have_request;
    const char *custom_id, *request_id;
    size_t custom_n, request_n;
} fc_t;

/* The "token" (a string, into txt) and "logprob" (a number, into *v) members of a token or a
 * top entry, each at most once: 1 read, 0 give up, -1 another key. */
static int fc_tok_lp(const char *k, size_t kn, fp_cur_t *c, int *seen_tok, fc_buf_t *txt, int *seen_lp, double *v)
{
    if (FC_KEY(k, kn, "token")) return !(*seen_tok)++ && lp_json_string(c, txt);
    if (FC_KEY(k, kn, "logprob")) {
        int is_int;
        int64_t iv;
        return !(*seen_lp)++ && fp_num(c, v, &is_int, &iv);
    }
    return -1;
}

static int fc_top_entry(void *ctx, const char *k, size_t kn, fp_cur_t *c)
{
    fc_t *f = ctx;
    return fc_tok_lp(k, kn, c, &f->e_tok, &f->ttxt, &f->e_lp, &f->e_v);
}

static int fc_token(void *ctx, const char *k, size_t kn, fp_cur_t *c)
{
    fc_t *f = ctx;
    int r = fc_tok_lp(k, kn, c, &f->have_tok, &f->txt, &f->have_lp, &f->lp);
    if (r >= 0) return r;
    if (FC_KEY(k, kn, "top_logprobs")) {
        if (f->have_top++) return 0;
        fp_ws(c);
        if (c->p < c->e && *c->p == 'n') return -1; /* null: no top entries (cJSON: not an array) */
        int o = fc_open(c, '[', ']');
        if (o) return o > 0;
        for (;;) {
            f->e_tok = f->e_lp = 0;
            if (!lp_json_object(c, fc_top_entry, f) || !f->e_tok || !f->e_lp) return 0;
            if (f->ntop >= 4096) return 0;
            f->top_id[f->ntop] = jl_text_top_id(f->ttxt.b);
            f->top_lp[f->ntop] = f->e_v;
            f->ntop++;
            int nx = fc_next(c, ']');
            if (nx <= 0) return nx == 0;
        }
    }
    return -1;
}

static int fc_content(fc_t *f, fp_cur_t *c)
{
    parity_logprob_seq_t *s = f->s;
    int o = fc_open(c, '[', ']');
    if (o) return o > 0;
    for (;;) {
        f->have_tok = f->have_lp = f->have_top = 0;
        f->ntop = 0;
        if (!lp_json_object(c, fc_token, f) || !f->have_tok || !f->have_lp) return 0;
        if (!f->have_K) { /* the first token's top count is K; a later token with more: cJSON */
            f->K = f->ntop;
            f->have_K = 1;
        }
        if (f->ntop > f->K) return 0;
        if (s->n >= s->cap || !s->k != !f->K) {
            size_t want = s->cap > s->n ? s->cap : (s->cap ? 2 * s->cap : 256);
            if (lp_seq_reserve(s, want, f->K)) return 0;
        }
        uint8_t fl = PARITY_LOGPROB_DECODE;
        int64_t key = jl_text_key(f->txt.b, &fl);
        jl_push(s, key, f->lp, 1, fl, 0, f->txt.b);
        for (size_t j = 0; j < f->ntop; j++) {
            s->top_id[(s->n - 1) * f->K + j] = f->top_id[j];
            s->top_lp[(s->n - 1) * f->K + j] = f->top_lp[j];
        }
        int nx = fc_next(c, ']');
        if (nx <= 0) return nx == 0;
    }
}

static int fc_logprobs(void *ctx, const char *k, size_t kn, fp_cur_t *c)
{
    fc_t *f = ctx;
    if (FC_KEY(k, kn, "content")) return !f->seen_content++ && fc_content(f, c);
    return -1;
}

static int fc_choice(void *ctx, const char *k, size_t kn, fp_cur_t *c)
{
    fc_t *f = ctx;
    if (FC_KEY(k, kn, "logprobs")) return !f->seen_logprobs++ && lp_json_object(c, fc_logprobs, f);
    return -1;
}

static int fc_root(void *ctx, const char *k, size_t kn, fp_cur_t *c)
{
    fc_t *f = ctx;
    if (FC_KEY(k, kn, "response")) return 0; /* an OpenAI Batch line: unwrap() in cJSON */
    if (FC_KEY(k, kn, "custom_id") || FC_KEY(k, kn, "request_id")) {
        int cu = kn == 9;
        const char *b;
        size_t n;
        if (cu ? f->seen_custom++ : f->seen_request++) return 0; /* cJSON would take the first */
        fp_ws(c);
        if (c->p < c->e && *c->p != '"') return -1; /* not a string: not an id */
        if (!lp_json_str(c, &b, &n)) return 0;
        if (cu) f->custom_id = b, f->custom_n = n, f->have_custom = 1;
        else f->request_id = b, f->request_n = n, f->have_request = 1;
        return 1;
    }
    if (FC_KEY(k, kn, "choices")) {
        if (f->seen_choices++ || fc_open(c, '[', ']') != 0) return 0; /* none: cJSON reports it */
        if (!lp_json_object(c, fc_choice, f)) return 0;
        for (;;) { /* the other choices: skipped */
            int nx = fc_next(c, ']');
            if (nx <= 0) return nx == 0;
            if (!lp_json_skip(c, 2)) return 0;
        }
    }
    return -1;
}

static _Thread_local fc_t *fc_tls;

/* A thread's scratch is freed when it exits (pool workers live until the process ends; a thread
 * started outside the pool does not). */
static pthread_key_t fc_key;
static pthread_once_t fc_key_once = PTHREAD_ONCE_INIT;

static void fc_tls_free(void *unused)
{
    (void)unused;
    if (fc_tls) {
        free(fc_tls->txt.b);
        free(fc_tls->ttxt.b);
        free(fc_tls);
        fc_tls = NULL;
    }
}

static void fc_key_init(void) { (void)pthread_key_create(&fc_key, fc_tls_free); }

static fc_t *fc_state(void)
{
    if (!fc_tls && (fc_tls = calloc(1, sizeof *fc_tls))) {
        pthread_once(&fc_key_once, fc_key_init);
        (void)pthread_setspecific(fc_key, (void *)1);
    }
    return fc_tls;
}

int lp_jsonl_fast_chat(parity_logprob_reader_t *r, const char *line, size_t len, parity_logprob_seq_t *s, uint64_t ordinal)
{
    fc_t *f = fc_state();
    if (!f) return 0;
    memset(&f->s, 0, sizeof *f - offsetof(fc_t, s));
    f->s = s;
    fp_cur_t c = {line, line + len};
    if (!lp_json_object(&c, fc_root, f) || !f->seen_content) return 0;
    fp_ws(&c);
    if (c.p != c.e) return 0;
    if (s->n == 0 && lp_seq_reserve(s, 0, 0)) return 0;
    int have = !r->ordinal_ids && (f->have_custom || f->have_request);
    return fp_set_id(s, !have ? NULL : f->have_custom ? f->custom_id : f->request_id,
                     f->have_custom ? f->custom_n : f->request_n, ordinal);
}

/* JSONL logprob dumps, one record (one request) per line, in the shapes engines emit: parity's
 * own schema, OpenAI chat and completions responses (bare or inside an OpenAI Batch output line),
 * vLLM offline RequestOutput, SGLang /generate. Lines are found serially and parsed with cJSON in
 * parallel. Shapes and field names: docs/logprobs.md. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "logprob_impl.h"
#include "parallel.h"

#define BATCH_BYTES ((size_t)2 << 20) /* small enough that the batch buffers stay in cache */

/* cJSON allocates every node and string of a parsed line separately (about fifteen per token of
 * an OpenAI chat line with top-5), and malloc/free were half of the time of those shapes. While
 * a thread parses a line, cJSON's allocations come from that thread's arena instead, and the
 * whole tree is dropped at once by resetting it (jl_arena_reset; no cJSON_Delete walk). Outside
 * a line parse (any other use of cJSON in the process) the hooks are malloc and free; jl_free
 * tells the arena's blocks apart by address. The hooks are installed once, by the first JSONL
 * open (cJSON_InitHooks is process-wide; nothing else in parity sets them). */
typedef struct jl_chunk {
    struct jl_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} jl_chunk_t;

/* A thread's arena and fast-path scratch are freed when it exits (pool workers live until the
 * process ends; a thread started outside the pool does not). */
static pthread_key_t jl_key;
static pthread_once_t jl_key_once = PTHREAD_ONCE_INIT;
static void jl_tls_free(void *unused);
static void jl_key_init(void) { (void)pthread_key_create(&jl_key, jl_tls_free); }
static void jl_tls_register(void)
{
    pthread_once(&jl_key_once, jl_key_init);
    (void)pthread_setspecific(jl_key, (void *)1);
}

static _Thread_local jl_chunk_t *jl_arena; /* newest first */
static _Thread_local int jl_arena_on;

static void *jl_malloc(size_t n)
{
    if (!jl_arena_on) return malloc(n);
    n = (n + 15) & ~(size_t)15;
    jl_chunk_t *c = jl_arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? 2 * c->cap : (size_t)1 << 20;
        while (cap < n) cap *= 2;
        jl_chunk_t *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        if (!c) jl_tls_register();
        nc->next = c;
        nc->cap = cap;
        nc->used = 0;
        jl_arena = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void jl_free(void *p)
{
    if (!p) return;
    for (const jl_chunk_t *c = jl_arena; c; c = c->next)
        if ((const unsigned char *)p >= c->data && (const unsigned char *)p < c->data + c->cap) return;
    free(p);
}

static pthread_once_t jl_hooks_once = PTHREAD_ONCE_INIT;
static void jl_hooks_init(void)
{
    cJSON_Hooks h = {jl_malloc, jl_free};
    cJSON_InitHooks(&h);
}

/* After a line: the tree is gone. One chunk is kept (the newest, the largest) unless it grew
 * past 16 MiB, so that a huge line does not pin its memory. */
static void jl_arena_reset(void)
{
    jl_arena_on = 0;
    jl_chunk_t *c = jl_arena;
    if (!c) return;
    for (jl_chunk_t *o = c->next; o;) {
        jl_chunk_t *nx = o->next;
        free(o);
        o = nx;
    }
    c->next = NULL;
    c->used = 0;
    if (c->cap > ((size_t)16 << 20)) {
        free(c);
        jl_arena = NULL;
    }
}

typedef struct {
    parity_status_t st;
    char msg[320]; /* a field name (~96) and what is wrong with its value (~200) */
} line_err_t;

#define LERR(e, ...) (snprintf((e)->msg, sizeof (e)->msg, __VA_ARGS__), (e)->st = PARITY_E_FORMAT)

/* A logprob: a number (finite or -inf), null (absent), or the strings "-inf"/"-Infinity"
 * (Python's json module cannot write -inf as valid JSON). Returns -1 for anything else. */
static int lp_value(const cJSON *j, double *v, int *present)
{
    *present = 0;
    if (!j || cJSON_IsNull(j)) return 0;
    if (cJSON_IsNumber(j)) {
        *v = j->valuedouble;
        if (isnan(*v) || *v == INFINITY) return -1;
        *present = 1;
        return 0;
    }
    if (cJSON_IsString(j) && (!strcmp(j->valuestring, "-inf") || !strcmp(j->valuestring, "-Infinity"))) {
        *v = -INFINITY;
        *present = 1;
        return 0;
    }
    return -1;
}

static int int_id(const cJSON *j, int64_t *v)
{
    if (!cJSON_IsNumber(j)) return -1;
    double x = j->valuedouble;
    if (!(x >= -9007199254740992.0 && x <= 9007199254740992.0) || x != floor(x)) return -1;
    *v = (int64_t)x;
    return 0;
}

/* Key of a token given as text: "token_id:123" (vLLM's return_tokens_as_token_ids) is the id;
 * anything else is hashed. */
static int64_t text_key(const char *t, uint8_t *fl)
{
    if (!strncmp(t, "token_id:", 9) && t[9] >= '0' && t[9] <= '9') {
        char *e;
        long long v = strtoll(t + 9, &e, 10);
        if (!*e && v >= 0) return v;
    }
    *fl |= PARITY_LP_KEY_TEXT;
    return lp_text_key(t, strlen(t));
}

static int32_t text_top_id(const char *t)
{
    uint8_t fl = 0;
    int64_t k = text_key(t, &fl);
    if (!(fl & PARITY_LP_KEY_TEXT) && k <= INT32_MAX) return (int32_t)k;
    return lp_text_id(t, strlen(t));
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Append one token; top entries are filled by the caller at index (s->n - 1) * s->k. */
static int push(parity_lp_seq_t *s, int64_t key, double lp, int present, uint8_t fl, uint16_t mod,
                const char *text)
{
    size_t i = s->n++;
    s->key[i] = key;
    s->lp[i] = present ? lp : 0;
    s->flags[i] = (uint8_t)(fl | (present ? PARITY_LP_PRESENT : 0));
    s->mod[i] = mod;
    s->text[i] = text ? lp_seq_add_text(s, text, strlen(text)) : UINT32_MAX;
    for (size_t j = 0; j < s->k; j++) {
        s->top_id[i * s->k + j] = -1;
        s->top_lp[i * s->k + j] = NAN;
    }
    return 0;
}

/* --- parity's own schema ----------------------------------------------------------------- */
static int parse_parity(parity_lp_reader_t *r, const cJSON *o, parity_lp_seq_t *s, line_err_t *e)
{
    const cJSON *ids = get(o, "token_ids"), *lps = get(o, "logprobs"), *toks = get(o, "tokens");
    const cJSON *ti = get(o, "top_ids"), *tl = get(o, "top_logprobs");
    const cJSON *mod = get(o, "modality"), *ph = get(o, "phase"), *pl = get(o, "prefill_len");
    if (!cJSON_IsArray(lps)) return LERR(e, "field 'logprobs': expected an array");
    int n = cJSON_GetArraySize(lps);
    if (ids && (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != n))
        return LERR(e, "field 'token_ids': expected an array of %d ids (as many as logprobs)", n);
    if (toks && (!cJSON_IsArray(toks) || cJSON_GetArraySize(toks) != n))
        return LERR(e, "field 'tokens': expected an array of %d strings (as many as logprobs)", n);
    if (!!ti != !!tl) return LERR(e, "fields 'top_ids' and 'top_logprobs' must be given together");
    size_t K = 0;
    if (ti) {
        if (!cJSON_IsArray(ti) || !cJSON_IsArray(tl) || cJSON_GetArraySize(ti) != n || cJSON_GetArraySize(tl) != n)
            return LERR(e, "fields 'top_ids'/'top_logprobs': expected arrays of %d lists", n);
        for (const cJSON *a = ti->child, *b = tl->child; a && b; a = a->next, b = b->next) {
            if (cJSON_IsNull(a) && cJSON_IsNull(b)) continue;
            if (!cJSON_IsArray(a) || !cJSON_IsArray(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
                return LERR(e, "fields 'top_ids'/'top_logprobs': each entry must be two lists of equal length");
            if ((size_t)cJSON_GetArraySize(a) > K) K = (size_t)cJSON_GetArraySize(a);
        }
        if (K > 4096) return LERR(e, "fields 'top_ids': more than 4096 entries per token");
    }
    if (mod && !cJSON_IsString(mod) && !(cJSON_IsArray(mod) && cJSON_GetArraySize(mod) == n))
        return LERR(e, "field 'modality': expected a string or an array of %d strings", n);
    if (ph && !cJSON_IsString(ph) && !(cJSON_IsArray(ph) && cJSON_GetArraySize(ph) == n))
        return LERR(e, "field 'phase': expected \"prefill\"/\"decode\" or an array of %d of them", n);
    int64_t plen = -1;
    if (pl && int_id(pl, &plen)) return LERR(e, "field 'prefill_len': expected an integer");
    if (!ids && !toks) return LERR(e, "record needs 'token_ids' (or at least 'tokens')");
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    uint16_t m1 = cJSON_IsString(mod) ? lp_intern_mod(r, mod->valuestring) : 0;
    const cJSON *jl = lps->child, *jid = ids ? ids->child : NULL, *jt = toks ? toks->child : NULL;
    const cJSON *jm = cJSON_IsArray(mod) ? mod->child : NULL, *jp = cJSON_IsArray(ph) ? ph->child : NULL;
    const cJSON *jti = ti ? ti->child : NULL, *jtl = tl ? tl->child : NULL;
    for (int i = 0; i < n; i++) {
        double v = 0;
        int pres;
        uint8_t fl = 0;
        if (lp_value(jl, &v, &pres))
            return LERR(e, "field 'logprobs'[%d]: expected a number (finite or -inf) or null; NaN/inf/text is "
                           "not a logprob", i);
        int64_t key;
        const char *txt = NULL;
        if (jt) {
            if (!cJSON_IsString(jt)) return LERR(e, "field 'tokens'[%d]: expected a string", i);
            txt = jt->valuestring;
        }
        if (jid) {
            if (int_id(jid, &key)) return LERR(e, "field 'token_ids'[%d]: expected an integer", i);
        } else {
            key = text_key(txt, &fl);
        }
        uint16_t m = m1;
        if (jm) {
            if (!cJSON_IsString(jm) && !cJSON_IsNull(jm)) return LERR(e, "field 'modality'[%d]: expected a string", i);
            m = cJSON_IsString(jm) ? lp_intern_mod(r, jm->valuestring) : 0;
        }
        const char *phs = cJSON_IsString(ph) ? ph->valuestring : jp && cJSON_IsString(jp) ? jp->valuestring : NULL;
        if (phs) {
            if (!strcmp(phs, "prefill")) fl |= PARITY_LP_PREFILL;
            else if (!strcmp(phs, "decode")) fl |= PARITY_LP_DECODE;
            else return LERR(e, "field 'phase'[%d]: expected \"prefill\" or \"decode\", got \"%.40s\"", i, phs);
        } else if (plen >= 0) {
            fl |= i < plen ? PARITY_LP_PREFILL : PARITY_LP_DECODE;
        }
        push(s, key, v, pres, fl, m, txt);
        if (jti && cJSON_IsArray(jti)) {
            size_t j = 0;
            for (const cJSON *a = jti->child, *b = jtl->child; a && b; a = a->next, b = b->next, j++) {
                int64_t id;
                double tv;
                int tp;
                if (int_id(a, &id) || id < -1 || id > INT32_MAX)
                    return LERR(e, "field 'top_ids'[%d][%zu]: expected a token id", i, j);
                if (lp_value(b, &tv, &tp) || !tp)
                    return LERR(e, "field 'top_logprobs'[%d][%zu]: expected a finite number or -inf", i, j);
                s->top_id[(size_t)i * K + j] = (int32_t)id;
                s->top_lp[(size_t)i * K + j] = tv;
            }
        }
        jl = jl->next;
        if (jid) jid = jid->next;
        if (jt) jt = jt->next;
        if (jm) jm = jm->next;
        if (jp) jp = jp->next;
        if (jti) jti = jti->next, jtl = jtl->next;
    }
    return 0;
}

/* --- OpenAI chat: choices[0].logprobs.content[] ------------------------------------------ */
static int parse_chat(parity_lp_reader_t *r, const cJSON *o, parity_lp_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *ch = get(o, "choices");
    if (!cJSON_IsArray(ch) || !ch->child) return LERR(e, "field 'choices': expected a non-empty array");
    const cJSON *lpo = get(ch->child, "logprobs");
    const cJSON *c = lpo ? get(lpo, "content") : NULL;
    if (!cJSON_IsArray(c)) return LERR(e, "field 'choices[0].logprobs.content': expected an array");
    int n = cJSON_GetArraySize(c);
    size_t K = 0;
    for (const cJSON *t = c->child; t; t = t->next) {
        const cJSON *tp = get(t, "top_logprobs");
        if (cJSON_IsArray(tp) && (size_t)cJSON_GetArraySize(tp) > K) K = (size_t)cJSON_GetArraySize(tp);
    }
    if (K > 4096) return LERR(e, "top_logprobs: more than 4096 entries");
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    int i = 0;
    for (const cJSON *t = c->child; t; t = t->next, i++) {
        const cJSON *tk = get(t, "token");
        double v;
        int pres;
        if (!cJSON_IsString(tk)) return LERR(e, "choices[0].logprobs.content[%d].token: expected a string", i);
        if (lp_value(get(t, "logprob"), &v, &pres) || !pres)
            return LERR(e, "choices[0].logprobs.content[%d].logprob: expected a number (finite or -inf)", i);
        uint8_t fl = PARITY_LP_DECODE;
        int64_t key = text_key(tk->valuestring, &fl);
        push(s, key, v, 1, fl, 0, tk->valuestring);
        const cJSON *tp = get(t, "top_logprobs");
        size_t j = 0;
        if (cJSON_IsArray(tp))
            for (const cJSON *x = tp->child; x; x = x->next, j++) {
                const cJSON *xt = get(x, "token");
                double xv;
                int xp;
                if (!cJSON_IsString(xt) || lp_value(get(x, "logprob"), &xv, &xp) || !xp)
                    return LERR(e, "choices[0].logprobs.content[%d].top_logprobs[%zu]: expected {token, logprob}",
                                i, j);
                s->top_id[(size_t)i * K + j] = text_top_id(xt->valuestring);
                s->top_lp[(size_t)i * K + j] = xv;
            }
    }
    return 0;
}

/* --- OpenAI completions: choices[0].logprobs.{tokens, token_logprobs, top_logprobs} ------- */
static int parse_compl(parity_lp_reader_t *r, const cJSON *o, parity_lp_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *ch = get(o, "choices");
    if (!cJSON_IsArray(ch) || !ch->child) return LERR(e, "field 'choices': expected a non-empty array");
    const cJSON *lpo = get(ch->child, "logprobs");
    const cJSON *toks = lpo ? get(lpo, "tokens") : NULL, *tl = lpo ? get(lpo, "token_logprobs") : NULL;
    const cJSON *top = lpo ? get(lpo, "top_logprobs") : NULL;
    if (!cJSON_IsArray(toks) || !cJSON_IsArray(tl) || cJSON_GetArraySize(toks) != cJSON_GetArraySize(tl))
        return LERR(e, "choices[0].logprobs: expected arrays 'tokens' and 'token_logprobs' of equal length");
    int n = cJSON_GetArraySize(toks);
    if (top && !cJSON_IsNull(top) && (!cJSON_IsArray(top) || cJSON_GetArraySize(top) != n))
        return LERR(e, "choices[0].logprobs.top_logprobs: expected an array of %d objects or nulls", n);
    size_t K = 0;
    if (cJSON_IsArray(top))
        for (const cJSON *x = top->child; x; x = x->next)
            if (cJSON_IsObject(x) && (size_t)cJSON_GetArraySize(x) > K) K = (size_t)cJSON_GetArraySize(x);
    if (K > 4096) return LERR(e, "top_logprobs: more than 4096 entries");
    /* With echo, the prompt's tokens come first: usage.prompt_tokens of them when the counts add up. */
    int64_t pt = -1, ct = -1;
    const cJSON *u = get(o, "usage");
    if (u && !int_id(get(u, "prompt_tokens"), &pt) && !int_id(get(u, "completion_tokens"), &ct) && pt + ct != n)
        pt = -1;
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    const cJSON *a = toks->child, *b = tl->child, *x = cJSON_IsArray(top) ? top->child : NULL;
    for (int i = 0; i < n; i++, a = a->next, b = b->next) {
        double v = 0;
        int pres;
        if (!cJSON_IsString(a)) return LERR(e, "choices[0].logprobs.tokens[%d]: expected a string", i);
        if (lp_value(b, &v, &pres))
            return LERR(e, "choices[0].logprobs.token_logprobs[%d]: expected a number (finite or -inf) or null", i);
        uint8_t fl = pt >= 0 ? (i < pt ? PARITY_LP_PREFILL : PARITY_LP_DECODE) : 0;
        int64_t key = text_key(a->valuestring, &fl);
        push(s, key, v, pres, fl, 0, a->valuestring);
        if (x) {
            size_t j = 0;
            if (cJSON_IsObject(x))
                for (const cJSON *y = x->child; y; y = y->next, j++) {
                    double yv;
                    int yp;
                    if (lp_value(y, &yv, &yp) || !yp)
                        return LERR(e, "choices[0].logprobs.top_logprobs[%d]: values must be numbers", i);
                    s->top_id[(size_t)i * K + j] = text_top_id(y->string);
                    s->top_lp[(size_t)i * K + j] = yv;
                }
            x = x->next;
        }
    }
    return 0;
}

/* --- vLLM: token ids plus a list of {id: {logprob, rank, decoded_token}} ----------------- */
static size_t vllm_k(const cJSON *lps)
{
    size_t K = 0;
    if (cJSON_IsArray(lps))
        for (const cJSON *d = lps->child; d; d = d->next)
            if (cJSON_IsObject(d) && (size_t)cJSON_GetArraySize(d) > K) K = (size_t)cJSON_GetArraySize(d);
    return K;
}

static int vllm_part(const cJSON *ids, const cJSON *lps, uint8_t phase, size_t K, parity_lp_seq_t *s,
                     const char *what, line_err_t *e)
{
    int i = 0;
    for (const cJSON *a = ids->child, *d = lps->child; a; a = a->next, d = d->next, i++) {
        int64_t id;
        if (int_id(a, &id)) return LERR(e, "%s token_ids[%d]: expected an integer", what, i);
        if (cJSON_IsNull(d)) { /* the first prompt token has no logprob */
            push(s, id, 0, 0, phase, 0, NULL);
            continue;
        }
        if (!cJSON_IsObject(d)) return LERR(e, "%s logprobs[%d]: expected an object or null", what, i);
        char kb[32];
        if (id >= 0) { /* the decimal key, as "%lld" prints it (snprintf was 3% of the shape) */
            char *q = kb + sizeof kb;
            *--q = 0;
            uint64_t u = (uint64_t)id;
            do *--q = (char)('0' + u % 10);
            while ((u /= 10));
            memmove(kb, q, (size_t)(kb + sizeof kb - q));
        } else {
            snprintf(kb, sizeof kb, "%lld", (long long)id);
        }
        const cJSON *me = get(d, kb);
        double v;
        int pres;
        if (!me || lp_value(get(me, "logprob"), &v, &pres) || !pres)
            return LERR(e, "%s logprobs[%d]: no {\"logprob\": number} entry for the token id %lld", what, i,
                        (long long)id);
        const cJSON *dt = get(me, "decoded_token");
        size_t base = s->n;
        push(s, id, v, 1, phase, 0, cJSON_IsString(dt) ? dt->valuestring : NULL);
        /* top entries ordered by rank (insertion sort over at most K entries) */
        int64_t rk[64];
        size_t j = 0;
        for (const cJSON *x = d->child; x && j < K; x = x->next, j++) {
            char *end;
            long long xid = 0;
            const char *ks = x->string;
            size_t kl = 0;
            while (kl < 10 && ks[kl] >= '0' && ks[kl] <= '9') xid = xid * 10 + (ks[kl++] - '0');
            if (kl == 0 || ks[kl]) xid = strtoll(ks, &end, 10); /* signs, blanks, long keys: as before */
            else end = (char *)ks + kl;
            double xv;
            int xp;
            int64_t rank = INT64_MAX;
            if (*end || xid < 0 || xid > INT32_MAX || lp_value(get(x, "logprob"), &xv, &xp) || !xp)
                return LERR(e, "%s logprobs[%d]: entry \"%.20s\" must be a token id with a numeric logprob", what, i,
                            x->string);
            int_id(get(x, "rank"), &rank);
            size_t pos = j;
            if (K <= 64) {
                while (pos > 0 && rk[pos - 1] > rank) {
                    rk[pos] = rk[pos - 1];
                    s->top_id[base * K + pos] = s->top_id[base * K + pos - 1];
                    s->top_lp[base * K + pos] = s->top_lp[base * K + pos - 1];
                    pos--;
                }
                rk[pos] = rank;
            }
            s->top_id[base * K + pos] = (int32_t)xid;
            s->top_lp[base * K + pos] = xv;
        }
    }
    return 0;
}

static int parse_vllm(parity_lp_reader_t *r, const cJSON *o, parity_lp_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *pids = get(o, "prompt_token_ids"), *plp = get(o, "prompt_logprobs");
    const cJSON *outs = get(o, "outputs"), *out0 = cJSON_IsArray(outs) ? outs->child : NULL;
    const cJSON *oids = out0 ? get(out0, "token_ids") : NULL, *olp = out0 ? get(out0, "logprobs") : NULL;
    int np = 0, no = 0;
    if (cJSON_IsArray(plp)) {
        if (!cJSON_IsArray(pids) || cJSON_GetArraySize(pids) != cJSON_GetArraySize(plp))
            return LERR(e, "'prompt_logprobs' needs 'prompt_token_ids' of the same length");
        np = cJSON_GetArraySize(plp);
    }
    if (cJSON_IsArray(olp)) {
        if (!cJSON_IsArray(oids) || cJSON_GetArraySize(oids) != cJSON_GetArraySize(olp))
            return LERR(e, "outputs[0]: 'logprobs' needs 'token_ids' of the same length");
        no = cJSON_GetArraySize(olp);
    }
    if (!np && !no && !cJSON_IsArray(plp) && !cJSON_IsArray(olp))
        return LERR(e, "vLLM record without 'prompt_logprobs' or 'outputs[0].logprobs'");
    size_t K = vllm_k(plp), K2 = vllm_k(olp);
    if (K2 > K) K = K2;
    if (K > 4096) return LERR(e, "logprobs: more than 4096 entries per token");
    if (lp_seq_reserve(s, (size_t)np + (size_t)no, K)) return e->st = PARITY_E_NOMEM;
    if (np && vllm_part(pids, plp, PARITY_LP_PREFILL, K, s, "prompt", e)) return e->st;
    if (no && vllm_part(oids, olp, PARITY_LP_DECODE, K, s, "outputs[0]", e)) return e->st;
    return 0;
}

/* --- SGLang: meta_info.{input,output}_token_logprobs = [[logprob, id, text], ...] -------- */
static size_t sgl_k(const cJSON *top)
{
    size_t K = 0;
    if (cJSON_IsArray(top))
        for (const cJSON *x = top->child; x; x = x->next)
            if (cJSON_IsArray(x) && (size_t)cJSON_GetArraySize(x) > K) K = (size_t)cJSON_GetArraySize(x);
    return K;
}

static int sgl_entry(const cJSON *x, double *v, int *pres, int64_t *id, const char **txt)
{
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) < 2) return -1;
    if (lp_value(x->child, v, pres)) return -1;
    if (int_id(x->child->next, id)) return -1;
    const cJSON *t = x->child->next->next;
    *txt = t && cJSON_IsString(t) ? t->valuestring : NULL;
    return 0;
}

static int sgl_part(const cJSON *lps, const cJSON *top, uint8_t phase, size_t K, parity_lp_seq_t *s,
                    const char *what, line_err_t *e)
{
    if (!lps) return 0;
    if (!cJSON_IsArray(lps)) return LERR(e, "meta_info.%s_token_logprobs: expected an array", what);
    if (top && !cJSON_IsNull(top) && (!cJSON_IsArray(top) || cJSON_GetArraySize(top) != cJSON_GetArraySize(lps)))
        return LERR(e, "meta_info.%s_top_logprobs: expected one entry per token", what);
    const cJSON *tx = cJSON_IsArray(top) ? top->child : NULL;
    int i = 0;
    for (const cJSON *x = lps->child; x; x = x->next, i++) {
        double v = 0;
        int pres;
        int64_t id;
        const char *txt;
        if (sgl_entry(x, &v, &pres, &id, &txt))
            return LERR(e, "meta_info.%s_token_logprobs[%d]: expected [logprob|null, token_id, text|null]", what, i);
        size_t base = s->n;
        push(s, id, v, pres, phase, 0, txt);
        if (tx) {
            size_t j = 0;
            if (cJSON_IsArray(tx))
                for (const cJSON *y = tx->child; y; y = y->next, j++) {
                    double yv = 0;
                    int yp;
                    int64_t yid;
                    const char *yt;
                    if (sgl_entry(y, &yv, &yp, &yid, &yt) || !yp || yid < 0 || yid > INT32_MAX)
                        return LERR(e, "meta_info.%s_top_logprobs[%d][%zu]: expected [logprob, token_id, text]",
                                    what, i, j);
                    s->top_id[base * K + j] = (int32_t)yid;
                    s->top_lp[base * K + j] = yv;
                }
            tx = tx->next;
        }
    }
    return 0;
}

static int parse_sglang(parity_lp_reader_t *r, const cJSON *o, parity_lp_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *m = get(o, "meta_info");
    if (!cJSON_IsObject(m)) return LERR(e, "field 'meta_info': expected an object");
    const cJSON *il = get(m, "input_token_logprobs"), *ol = get(m, "output_token_logprobs");
    const cJSON *it = get(m, "input_top_logprobs"), *ot = get(m, "output_top_logprobs");
    if (!il && !ol) return LERR(e, "meta_info has no input_token_logprobs/output_token_logprobs (return_logprob)");
    size_t n = (size_t)(cJSON_IsArray(il) ? cJSON_GetArraySize(il) : 0) +
               (size_t)(cJSON_IsArray(ol) ? cJSON_GetArraySize(ol) : 0);
    size_t K = sgl_k(it), K2 = sgl_k(ot);
    if (K2 > K) K = K2;
    if (K > 4096) return LERR(e, "top logprobs: more than 4096 entries");
    if (lp_seq_reserve(s, n, K)) return e->st = PARITY_E_NOMEM;
    if (sgl_part(il, it, PARITY_LP_PREFILL, K, s, "input", e)) return e->st;
    if (sgl_part(ol, ot, PARITY_LP_DECODE, K, s, "output", e)) return e->st;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

static const cJSON *unwrap(const cJSON *o)
{
    /* OpenAI Batch API output line: {"custom_id", "response": {"status_code", "body": {...}}} */
    const cJSON *resp = get(o, "response");
    if (cJSON_IsObject(resp) && cJSON_IsObject(get(resp, "body"))) return get(resp, "body");
    return o;
}

static parity_lp_format_t detect(const cJSON *root)
{
    const cJSON *o = unwrap(root);
    const cJSON *ch = get(o, "choices");
    if (cJSON_IsArray(ch) && ch->child) {
        const cJSON *l = get(ch->child, "logprobs");
        if (l && get(l, "content")) return PARITY_LP_OPENAI_CHAT;
        if (l && get(l, "token_logprobs")) return PARITY_LP_OPENAI_COMPLETIONS;
        if (get(ch->child, "message")) return PARITY_LP_OPENAI_CHAT;
        return PARITY_LP_OPENAI_COMPLETIONS;
    }
    if (cJSON_IsObject(get(o, "meta_info"))) return PARITY_LP_SGLANG;
    if (get(o, "outputs") || get(o, "prompt_logprobs")) return PARITY_LP_VLLM;
    if (get(o, "logprobs")) return PARITY_LP_JSONL;
    return PARITY_LP_AUTO;
}

static const char *id_of(const cJSON *root, parity_lp_format_t f)
{
    static const char *const own[] = {"id", "request_id", "custom_id", NULL};
    static const char *const other[] = {"custom_id", "request_id", NULL};
    for (const char *const *k = f == PARITY_LP_JSONL ? own : other; *k; k++) {
        const cJSON *v = get(root, *k);
        if (cJSON_IsString(v)) return v->valuestring;
    }
    return NULL;
}

/* --- fast path for parity's own schema --------------------------------------------------- */

/* Records of the form {"id": "...", "token_ids": [ints], "logprobs": [numbers or null]} (keys in
 * any order, "id" optional) are by far the most common input and building a cJSON tree for them
 * costs a malloc per number. fast_parity parses exactly that shape in strict JSON and returns 1
 * with s filled as parse_parity would fill it; on anything else (other keys, duplicates, escapes,
 * "-inf" strings, non-integer ids, numbers it cannot convert exactly, any syntax error) it
 * returns 0 and the caller takes the cJSON path, which also produces every error message. */
typedef struct {
    const char *p, *e;
} fp_cur_t;

static inline void fp_ws(fp_cur_t *c)
{
    /* compact JSON has none: one comparison in the common case */
    if (c->p < c->e && (unsigned char)*c->p > ' ') return;
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')) c->p++;
}

/* A string without escapes or control characters: [*b, *b + *n). */
static int fp_str(fp_cur_t *c, const char **b, size_t *n)
{
    if (c->p >= c->e || *c->p != '"') return 0;
    const char *q = ++c->p;
    while (c->p < c->e && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\' || ch < 0x20) return 0;
        c->p++;
    }
    if (c->p >= c->e) return 0;
    *b = q;
    *n = (size_t)(c->p - q);
    c->p++;
    return 1;
}

static const double fp_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* m * 10^q (|q| <= 22, 2^53 <= m < 2^63), correctly rounded, into *v; 0 when it cannot tell
 * (then strtod decides). The decimals engines print for a float32 logprob widened to double
 * (Python's repr: -0.4887298047542572) have 16-17 digits, beyond Clinger's exact case, and
 * strtod on them was 5x the whole parse.
 * m = xh + xl exactly (xh = m rounded, xl = the remainder, |xl| <= 2^10, both doubles), and
 * P = 10^|q| is exact. For q < 0: vh = RN(xh / P), whose remainder r = xh - vh P is exact and
 * computed exactly by an FMA (Boldo & Daumas; no underflow here), so m / P = vh + y with
 * y = (r + xl) / P exactly; vl = RN(RN(r + xl) / P) is y within 2.0001u |y|, and
 * |y| <= |xl| / P + ulp(vh) / 2 <= 2^-52 |m / P|. For q > 0: vh = RN(xh P), e = xh P - vh
 * exactly (FMA), m P = vh + e + xl P, vl = RN(e + RN(xl P)), within 3u 2^-52 |m P|. Either way
 * vh + vl is within delta = 2^-102 |t| of the true value t. s = RN(vh + vl) and its error
 * err = (vh + vl) - s exactly (Fast2Sum, |vh| >= |vl|); s is t correctly rounded unless
 * vh + vl is within delta of a midpoint between s and a neighbour, i.e. unless |err| is
 * within delta of ulp(s)/2 (ulp(s)/4 below a power of two). delta < 2^-48 ulp(s); the
 * margin taken is 2^-40 ulp(s), so strtod is called for about one number in 2^39. The result
 * is in [1e-22, 2^63 1e22]: normal, finite. */
static int fp_exact(uint64_t m, int q, double *v)
{
    double xh = (double)m;
    double xl = (double)(int64_t)(m - (uint64_t)xh);
    double P = fp_pow10[q < 0 ? -q : q], vh, vl;
    if (q < 0) {
        vh = xh / P;
        double r = fma(-vh, P, xh);
        vl = (r + xl) / P;
    } else {
        vh = xh * P;
        vl = fma(xh, P, -vh) + xl * P;
    }
    double sum = vh + vl;
    double err = vl - (sum - vh);
    uint64_t u;
    memcpy(&u, &sum, sizeof u);
    double ulp;
    uint64_t ue = (u & 0x7ff0000000000000ull) - (52ull << 52); /* 2^(exponent - 52) */
    memcpy(&ulp, &ue, sizeof ulp);
    double half = (err < 0 && (u & 0x000fffffffffffffull) == 0) ? 0.25 * ulp : 0.5 * ulp;
    if (half - fabs(err) <= 0x1p-40 * ulp) return 0;
    *v = sum;
    return 1;
}

/* A strict JSON number. Correctly rounded like strtod: when the decimal significand m (all
 * its digits kept) is below 2^53 (exact) and the decimal exponent q satisfies |q| <= 22 (10^|q| is
 * exact in binary64), m * 10^q or m / 10^q is one correctly rounded operation (Clinger 1990,
 * "How to read floating point numbers accurately"); up to 19 digits (m < 2^63) fp_exact
 * decides in double-double; otherwise, or when fp_exact cannot tell, strtod converts the
 * validated token. *is_int: no fraction, no exponent and at most 15 digits (*iv holds it: an
 * id as cJSON would read it; longer integers are left to cJSON as ids, not as values). */
/* Digits eight at a time (SWAR, on a little-endian load of 8 bytes): the number of leading
 * ASCII digits of w, and their value. A byte b is a digit when b - '0' and b + (0x7f - '9')
 * both leave its top bit clear; a borrow out of a non-digit byte only disturbs bytes after the
 * first non-digit, which are not used. The value: the k digits moved to the top bytes (the low
 * bytes become leading zeros), then pairs, quads and the two halves combined by multiplies. */
static inline int swar_ndigits(uint64_t w)
{
    uint64_t x = w - 0x3030303030303030ull, y = w + 0x4646464646464646ull;
    uint64_t bad = (x | y) & 0x8080808080808080ull;
    return bad ? __builtin_ctzll(bad) >> 3 : 8;
}

static inline uint64_t swar_value(uint64_t w, int k)
{
    uint64_t t = (w - 0x3030303030303030ull) << (8 * (8 - k)); /* k >= 1 */
    t = (t * 10 + (t >> 8)) & 0x00ff00ff00ff00ffull;             /* 2-digit groups */
    t = (t * 100 + (t >> 16)) & 0x0000ffff0000ffffull;           /* 4-digit groups */
    return (t * 10000 + (t >> 32)) & 0xffffffffull;                /* 8 digits */
}

/* Digits at p (up to e) appended to m (at most 19 kept, the rest counted in *extra): returns
 * the position after them, *nd the number read. */
static inline const char *fp_digits(const char *p, const char *e, uint64_t *m, int *nd, int *extra)
{
    while (e - p >= 8 && *nd <= 11) { /* 11 + 8 = 19 digits fit in m */
        uint64_t w;
        memcpy(&w, p, 8);
        int k = swar_ndigits(w);
        if (k == 0) return p;
        static const uint64_t pw[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
        *m = *m * pw[k] + swar_value(w, k);
        *nd += k;
        p += k;
        if (k < 8) return p;
    }
    while (p < e && *p >= '0' && *p <= '9') {
        if (*nd < 19) *m = *m * 10 + (uint64_t)(*p - '0');
        else (*extra)++;
        (*nd)++;
        p++;
    }
    return p;
}

static inline __attribute__((always_inline)) int fp_num(fp_cur_t *c, double *v, int *is_int, int64_t *iv)
{
    const char *b = c->p, *p = c->p, *e = c->e;
    int neg = 0;
    if (p < e && *p == '-') neg = 1, p++;
    if (p >= e || *p < '0' || *p > '9') return 0;
    uint64_t m = 0;
    int nd = 0, q = 0;
    if (*p == '0') {
        p++;
    } else {
        int extra = 0;
        p = fp_digits(p, e, &m, &nd, &extra);
        q += extra;
    }
    *is_int = 1;
    if (p < e && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        if (nd == 0)
            while (p < e && *p == '0') { /* leading zeros of 0.000123 do not count as digits */
                q--;
                p++;
            }
        int nd0 = nd, extra = 0;
        p = fp_digits(p, e, &m, &nd, &extra);
        q -= (nd - nd0) - extra; /* each kept fraction digit scales by 1/10 */
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        int x = 0;
        while (p < e && *p >= '0' && *p <= '9') {
            if (x < 100000) x = x * 10 + (*p - '0');
            p++;
        }
        q += eneg ? -x : x;
    }
    c->p = p;
    if (p - b > 63) return 0; /* cJSON reads at most 63 characters of a number */
    if (*is_int) {
        if (nd <= 15) *iv = neg ? -(int64_t)m : (int64_t)m;
        else *is_int = 0; /* not an id the fast path takes (cJSON decides); still a value */
    }
    if (nd <= 19 && q >= -22 && q <= 22) { /* no digit dropped: m 10^q is the value */
        if (m < (1ull << 53)) {
            double d = (double)m; /* exact */
            d = q < 0 ? d / fp_pow10[-q] : d * fp_pow10[q];
            *v = neg ? -d : d;
            return 1;
        }
        double d;
        if (m < (1ull << 63) && fp_exact(m, q, &d)) {
            *v = neg ? -d : d;
            return 1;
        }
    }
    char buf[64];
    size_t len = (size_t)(p - b);
    if (len >= sizeof buf) return 0;
    memcpy(buf, b, len);
    buf[len] = 0;
    char *end;
    *v = strtod(buf, &end);
    return *end == 0 && isfinite(*v);
}

/* The sequence's id: the n bytes at id, or "#ordinal" when id is NULL (as parse_line). */
static int fp_set_id(parity_lp_seq_t *s, const char *id, size_t n, uint64_t ordinal)
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

static int fast_parity(parity_lp_reader_t *r, const char *line, size_t len, parity_lp_seq_t *s, uint64_t ordinal)
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
        if (!fp_str(&c, &k, &kn)) return 0;
        fp_ws(&c);
        if (c.p >= c.e || *c.p++ != ':') return 0;
        fp_ws(&c);
        if (kn == 2 && !memcmp(k, "id", 2)) {
            if (have_id++ || !fp_str(&c, &id, &idn)) return 0;
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
                            s->flags[n] = PARITY_LP_PRESENT;
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
    uint8_t fand = PARITY_LP_PRESENT;
    for (size_t i = 0; i < nlp; i++) fand &= s->flags[i];
    s->plain = nlp > 0 && fand;
    if (!s->plain)
        for (size_t i = 0; i < nlp; i++) {
            s->mod[i] = 0;
            s->text[i] = UINT32_MAX;
        }
    return fp_set_id(s, !r->ordinal_ids && have_id ? id : NULL, idn, ordinal);
}

/* --- fast path for the OpenAI chat shape -------------------------------------------------- */

/* The same idea as fast_parity for what servers return: {..., "choices": [{..., "logprobs":
 * {"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}...], ...}...]}}...]}
 * with fields in any order and any others (bytes, message, usage...) skipped. It fills s as
 * parse_chat (and parse_line's id) would, or returns 0 and the caller takes the cJSON path,
 * which also gives every error message: on anything it does not take exactly as cJSON would
 * (a logprob that is not a finite number, a duplicate key it reads, a batch wrapper, a string
 * escape it does not decode the way cJSON does, more top entries than the first token had,
 * nesting deeper than 256, any syntax error). The skipping is strict JSON, so nothing cJSON
 * rejects is accepted here. */
typedef struct {
    char *b;
    size_t cap;
} fc_buf_t;

static int fc_put(fc_buf_t *o, size_t *n, const char *src, size_t k)
{
    if (*n + k + 1 > o->cap) {
        size_t c = o->cap ? o->cap : 256;
        while (c < *n + k + 1) c *= 2;
        char *q = realloc(o->b, c);
        if (!q) return 0;
        o->b = q;
        o->cap = c;
    }
    memcpy(o->b + *n, src, k);
    *n += k;
    return 1;
}

static int fc_hex4(const char *p, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0') : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                   : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;
        if (d > 15) return 0;
        x = x * 16 + d;
    }
    *v = x;
    return 1;
}

/* A string at c->p: decoded into o (NUL-terminated) when o is not NULL, else only validated.
 * Escapes as cJSON decodes them: the short ones, \uXXXX to UTF-8, a high surrogate followed by
 * \u and a low one to a 4-byte sequence; 0 for a lone surrogate or \u0000 (cJSON fails, or ends
 * the C string there) and for control characters (left to cJSON). */
static int fc_string(fp_cur_t *c, fc_buf_t *o)
{
    if (c->p >= c->e || *c->p != '"') return 0;
    const char *p = c->p + 1, *e = c->e;
    size_t n = 0;
    for (;;) {
        const char *q = p;
        while (q < e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
        if (q >= e || (unsigned char)*q < 0x20) return 0;
        if (o && !fc_put(o, &n, p, (size_t)(q - p))) return 0;
        p = q;
        if (*p == '"') break;
        if (e - p < 2) return 0;
        char es = p[1], out[4];
        size_t k = 1;
        switch (es) {
        case '"': out[0] = '"'; break;
        case '\\': out[0] = '\\'; break;
        case '/': out[0] = '/'; break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u': {
            unsigned u;
            if (e - p < 6 || !fc_hex4(p + 2, &u) || u == 0 || (u >= 0xDC00 && u <= 0xDFFF)) return 0;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned l;
                if (e - p < 12 || p[6] != '\\' || p[7] != 'u' || !fc_hex4(p + 8, &l) || l < 0xDC00 || l > 0xDFFF)
                    return 0;
                u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
                p += 6;
            }
            if (u < 0x80) {
                out[0] = (char)u;
            } else if (u < 0x800) {
                out[0] = (char)(0xC0 | (u >> 6));
                out[1] = (char)(0x80 | (u & 0x3F));
                k = 2;
            } else if (u < 0x10000) {
                out[0] = (char)(0xE0 | (u >> 12));
                out[1] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[2] = (char)(0x80 | (u & 0x3F));
                k = 3;
            } else {
                out[0] = (char)(0xF0 | (u >> 18));
                out[1] = (char)(0x80 | ((u >> 12) & 0x3F));
                out[2] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[3] = (char)(0x80 | (u & 0x3F));
                k = 4;
            }
            p += 4;
            break;
        }
        default: return 0;
        }
        if (o && !fc_put(o, &n, out, k)) return 0;
        p += 2;
    }
    if (o) {
        if (!fc_put(o, &n, "", 0)) return 0;
        o->b[n] = 0;
    }
    c->p = p + 1;
    return 1;
}

/* The opening bracket `open` and, when the next non-blank is `close`, that too: 1 when the
 * container is empty, 0 when members follow, -1 when the bracket is missing. */
static int fc_open(fp_cur_t *c, char open, char close)
{
    fp_ws(c);
    if (c->p >= c->e || *c->p != open) return -1;
    c->p++;
    fp_ws(c);
    if (c->p < c->e && *c->p == close) {
        c->p++;
        return 1;
    }
    return 0;
}

/* After a member or element: 1 at a ',' (consumed: another follows), 0 at `close` (consumed: the
 * container ends), -1 otherwise. */
static int fc_next(fp_cur_t *c, char close)
{
    fp_ws(c);
    if (c->p >= c->e) return -1;
    if (*c->p == ',') {
        c->p++;
        return 1;
    }
    return *c->p++ == close ? 0 : -1;
}

/* Skip one value (strictly valid JSON). */
static int fc_skip(fp_cur_t *c, int depth)
{
    fp_ws(c);
    if (c->p >= c->e || depth > 256) return 0;
    char ch = *c->p;
    if (ch == '"') return fc_string(c, NULL);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        if (fc_open(c, ch, close)) return 1; /* empty (the bracket is there) */
        for (;;) {
            if (ch == '{') {
                fp_ws(c);
                if (!fc_string(c, NULL)) return 0;
                fp_ws(c);
                if (c->p >= c->e || *c->p++ != ':') return 0;
            }
            if (!fc_skip(c, depth + 1)) return 0;
            int nx = fc_next(c, close);
            if (nx <= 0) return nx == 0;
        }
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t k = strlen(lit[i]);
        if ((size_t)(c->e - c->p) >= k && !memcmp(c->p, lit[i], k)) {
            c->p += k;
            return 1;
        }
    }
    double v;
    int is_int;
    int64_t iv;
    /* a number fp_num declines (one that overflows, say) leaves the line to cJSON */
    return fp_num(c, &v, &is_int, &iv);
}

/* The members of an object at c->p: for each key, fn(ctx, key, keylen, c) reads the value
 * (returns 0 to give up) or, when it returns -1, the value is skipped. */
typedef int (*fc_member_fn)(void *ctx, const char *k, size_t kn, fp_cur_t *c);

static int fc_object(fp_cur_t *c, fc_member_fn fn, void *ctx)
{
    int o = fc_open(c, '{', '}');
    if (o) return o > 0;
    for (;;) {
        const char *k;
        size_t kn;
        fp_ws(c);
        if (!fp_str(c, &k, &kn)) return 0; /* keys with escapes: left to cJSON */
        fp_ws(c);
        if (c->p >= c->e || *c->p++ != ':') return 0;
        fp_ws(c);
        int r = fn(ctx, k, kn, c);
        if (r == 0) return 0;
        if (r < 0 && !fc_skip(c, 1)) return 0;
        int nx = fc_next(c, '}');
        if (nx <= 0) return nx == 0;
    }
}

#define FC_KEY(k, kn, lit) ((kn) == sizeof(lit) - 1 && !memcmp((k), (lit), sizeof(lit) - 1))

typedef struct {
    /* scratch kept from line to line */
    fc_buf_t txt, ttxt;  /* the token's text, a top entry's text */
    int32_t top_id[4096];
    double top_lp[4096];
    /* the line's state, from here on cleared for each line */
    parity_lp_seq_t *s;
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
    if (FC_KEY(k, kn, "token")) return !(*seen_tok)++ && fc_string(c, txt);
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
            if (!fc_object(c, fc_top_entry, f) || !f->e_tok || !f->e_lp) return 0;
            if (f->ntop >= 4096) return 0;
            f->top_id[f->ntop] = text_top_id(f->ttxt.b);
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
    parity_lp_seq_t *s = f->s;
    int o = fc_open(c, '[', ']');
    if (o) return o > 0;
    for (;;) {
        f->have_tok = f->have_lp = f->have_top = 0;
        f->ntop = 0;
        if (!fc_object(c, fc_token, f) || !f->have_tok || !f->have_lp) return 0;
        if (!f->have_K) { /* the first token's top count is K; a later token with more: cJSON */
            f->K = f->ntop;
            f->have_K = 1;
        }
        if (f->ntop > f->K) return 0;
        if (s->n >= s->cap || !s->k != !f->K) {
            size_t want = s->cap > s->n ? s->cap : (s->cap ? 2 * s->cap : 256);
            if (lp_seq_reserve(s, want, f->K)) return 0;
        }
        uint8_t fl = PARITY_LP_DECODE;
        int64_t key = text_key(f->txt.b, &fl);
        push(s, key, f->lp, 1, fl, 0, f->txt.b);
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
    if (FC_KEY(k, kn, "logprobs")) return !f->seen_logprobs++ && fc_object(c, fc_logprobs, f);
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
        if (!fp_str(c, &b, &n)) return 0;
        if (cu) f->custom_id = b, f->custom_n = n, f->have_custom = 1;
        else f->request_id = b, f->request_n = n, f->have_request = 1;
        return 1;
    }
    if (FC_KEY(k, kn, "choices")) {
        if (f->seen_choices++ || fc_open(c, '[', ']') != 0) return 0; /* none: cJSON reports it */
        if (!fc_object(c, fc_choice, f)) return 0;
        for (;;) { /* the other choices: skipped */
            int nx = fc_next(c, ']');
            if (nx <= 0) return nx == 0;
            if (!fc_skip(c, 2)) return 0;
        }
    }
    return -1;
}

static _Thread_local fc_t *fc_tls;
static _Thread_local fc_buf_t tb_buf; /* jl_tree's string scratch */

static fc_t *fc_state(void)
{
    if (!fc_tls && (fc_tls = calloc(1, sizeof *fc_tls))) jl_tls_register();
    return fc_tls;
}

static void jl_tls_free(void *unused)
{
    (void)unused;
    for (jl_chunk_t *c = jl_arena; c;) {
        jl_chunk_t *nx = c->next;
        free(c);
        c = nx;
    }
    jl_arena = NULL;
    if (fc_tls) {
        free(fc_tls->txt.b);
        free(fc_tls->ttxt.b);
        free(fc_tls);
        fc_tls = NULL;
    }
    free(tb_buf.b);
    tb_buf.b = NULL;
    tb_buf.cap = 0;
}

static int fast_chat(parity_lp_reader_t *r, const char *line, size_t len, parity_lp_seq_t *s, uint64_t ordinal)
{
    fc_t *f = fc_state();
    if (!f) return 0;
    memset(&f->s, 0, sizeof *f - offsetof(fc_t, s));
    f->s = s;
    fp_cur_t c = {line, line + len};
    if (!fc_object(&c, fc_root, f) || !f->seen_content) return 0;
    fp_ws(&c);
    if (c.p != c.e) return 0;
    if (s->n == 0 && lp_seq_reserve(s, 0, 0)) return 0;
    int have = !r->ordinal_ids && (f->have_custom || f->have_request);
    return fp_set_id(s, !have ? NULL : f->have_custom ? f->custom_id : f->request_id,
                     f->have_custom ? f->custom_n : f->request_n, ordinal);
}

/* --- the cJSON tree of a line, built without cJSON's parser ----------------------------------
 * For the shapes read through cJSON trees (completions, vLLM, SGLang, and any line the fast
 * paths leave), cJSON's parser spent most of its time in strtod (and a localeconv() per
 * number): the 16-17 digit numbers engines print went through glibc's multi-precision path.
 * jl_tree builds the same tree (the same node types, values, keys, strings, child/next/prev
 * links and valueint saturation as cJSON 1.7's parse_value) from the arena, with fp_num for the
 * numbers and fc_string for the strings and keys, in strict JSON; it returns NULL, and
 * cJSON_ParseWithLength decides, on anything it does not take exactly as cJSON would: a number
 * fp_num declines, an escape fc_string leaves to cJSON, blanks other than JSON's four (cJSON
 * skips any byte <= 32), a byte-order mark, nesting deeper than 256, trailing bytes after the
 * value (cJSON ignores them), and every syntax error. lp_jsonl_tree_check compares the two
 * trees (tests/test_logprob.c and the JSONL fuzz target call it). */
static cJSON *tb_new(void)
{
    cJSON *n = jl_malloc(sizeof *n);
    if (n) memset(n, 0, sizeof *n);
    return n;
}

/* the string at c->p, decoded, copied into the arena */
static char *tb_string(fp_cur_t *c)
{
    if (c->p >= c->e || *c->p != '"') return NULL;
    const char *q = c->p + 1;
    while (q < c->e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
    if (q < c->e && *q == '"') { /* no escape: the bytes themselves */
        size_t n = (size_t)(q - (c->p + 1));
        char *o = jl_malloc(n + 1);
        if (!o) return NULL;
        memcpy(o, c->p + 1, n);
        o[n] = 0;
        c->p = q + 1;
        return o;
    }
    if (!fc_string(c, &tb_buf)) return NULL;
    size_t n = strlen(tb_buf.b);
    char *o = jl_malloc(n + 1);
    if (o) memcpy(o, tb_buf.b, n + 1);
    return o;
}

static int tb_value(fp_cur_t *c, cJSON *it, int depth);

/* an array or object at c->p ('[' or '{') into it */
static int tb_container(fp_cur_t *c, cJSON *it, int depth)
{
    char open = *c->p, close = open == '[' ? ']' : '}';
    if (depth > 256) return 0;
    int o = fc_open(c, open, close);
    cJSON *head = NULL, *cur = NULL;
    if (o < 0) return 0;
    if (o == 0)
        for (;;) {
            cJSON *n = tb_new();
            if (!n) return 0;
            if (!head) head = n;
            else {
                cur->next = n;
                n->prev = cur;
            }
            cur = n;
            fp_ws(c);
            if (open == '{') {
                if (!(n->string = tb_string(c))) return 0;
                fp_ws(c);
                if (c->p >= c->e || *c->p++ != ':') return 0;
                fp_ws(c);
            }
            if (!tb_value(c, n, depth)) return 0;
            int nx = fc_next(c, close);
            if (nx < 0) return 0;
            if (nx == 0) break;
        }
    if (head) head->prev = cur;
    it->type = open == '[' ? cJSON_Array : cJSON_Object;
    it->child = head;
    return 1;
}

static int tb_value(fp_cur_t *c, cJSON *it, int depth)
{
    if (c->p >= c->e) return 0;
    char ch = *c->p;
    if (ch == '"') {
        it->type = cJSON_String;
        return (it->valuestring = tb_string(c)) != NULL;
    }
    if (ch == '[' || ch == '{') return tb_container(c, it, depth + 1);
    size_t left = (size_t)(c->e - c->p);
    if (ch == 'n' && left >= 4 && !memcmp(c->p, "null", 4)) {
        it->type = cJSON_NULL;
        c->p += 4;
        return 1;
    }
    if (ch == 't' && left >= 4 && !memcmp(c->p, "true", 4)) {
        it->type = cJSON_True;
        it->valueint = 1;
        c->p += 4;
        return 1;
    }
    if (ch == 'f' && left >= 5 && !memcmp(c->p, "false", 5)) {
        it->type = cJSON_False;
        c->p += 5;
        return 1;
    }
    double v;
    int is_int;
    int64_t iv;
    if (!fp_num(c, &v, &is_int, &iv)) return 0;
    it->type = cJSON_Number;
    it->valuedouble = v;
    it->valueint = v >= INT_MAX ? INT_MAX : v <= (double)INT_MIN ? INT_MIN : (int)v;
    return 1;
}

/* The line's tree (arena memory: jl_arena_on must be set), or NULL: cJSON decides. */
static cJSON *jl_tree(const char *line, size_t len)
{
    fp_cur_t c = {line, line + len};
    cJSON *root = tb_new();
    fp_ws(&c);
    if (!root || !tb_value(&c, root, 0)) return NULL;
    fp_ws(&c);
    return c.p == c.e ? root : NULL;
}

static int tb_same(const cJSON *a, const cJSON *b)
{
    for (; a || b; a = a->next, b = b->next) {
        if (!a || !b || a->type != b->type || a->valueint != b->valueint ||
            memcmp(&a->valuedouble, &b->valuedouble, sizeof a->valuedouble) || !a->string != !b->string ||
            (a->string && strcmp(a->string, b->string)) || !a->valuestring != !b->valuestring ||
            (a->valuestring && strcmp(a->valuestring, b->valuestring)) || !a->child != !b->child)
            return 0;
        if (a->child && (!tb_same(a->child, b->child) || !a->child->prev != !b->child->prev)) return 0;
    }
    return 1;
}

int lp_jsonl_tree_check(const char *line, size_t len)
{
    pthread_once(&jl_hooks_once, jl_hooks_init);
    jl_arena_on = 1;
    cJSON *t = jl_tree(line, len), *ref = t ? cJSON_ParseWithLength(line, len) : NULL;
    int r = !t ? -1 : ref && tb_same(t, ref) ? 0 : 1;
    jl_arena_reset();
    return r;
}

static int parse_line(parity_lp_reader_t *r, const char *line, size_t len, parity_lp_seq_t *s, uint64_t ordinal,
                      line_err_t *e)
{
    lp_seq_reset(s);
    s->ordinal = ordinal;
    if (r->fmt == PARITY_LP_JSONL && !r->slice_field && fast_parity(r, line, len, s, ordinal)) return 0;
    if (r->fmt == PARITY_LP_OPENAI_CHAT && !r->slice_field) {
        if (fast_chat(r, line, len, s, ordinal)) return 0;
        lp_seq_reset(s);
        s->ordinal = ordinal;
    }
    lp_seq_reset(s);
    s->ordinal = ordinal;
    jl_arena_on = 1;
    cJSON *root = jl_tree(line, len);
    if (!root) root = cJSON_ParseWithLength(line, len);
    jl_arena_on = 0; /* reading the tree allocates nothing; parity's own allocations are malloc's */
    if (!root || !cJSON_IsObject(root)) {
        jl_arena_reset();
        return LERR(e, "not a JSON object%s", root ? "" : " (invalid JSON)");
    }
    int rc = 0;
    const cJSON *o = unwrap(root);
    switch (r->fmt) {
    case PARITY_LP_OPENAI_CHAT: rc = parse_chat(r, o, s, e); break;
    case PARITY_LP_OPENAI_COMPLETIONS: rc = parse_compl(r, o, s, e); break;
    case PARITY_LP_VLLM: rc = parse_vllm(r, o, s, e); break;
    case PARITY_LP_SGLANG: rc = parse_sglang(r, o, s, e); break;
    default: rc = parse_parity(r, o, s, e); break;
    }
    if (!rc) {
        char ob[32];
        const char *id = r->ordinal_ids ? NULL : id_of(root, r->fmt);
        if (!id && r->fmt == PARITY_LP_VLLM && cJSON_IsString(get(o, "request_id"))) id = get(o, "request_id")->valuestring;
        if (!id) {
            snprintf(ob, sizeof ob, "#%llu", (unsigned long long)ordinal);
            id = ob;
        }
        if (lp_seq_set_str(&s->id, id)) rc = e->st = PARITY_E_NOMEM;
        if (!rc && r->slice_field) {
            const cJSON *fv = get(root, r->slice_field);
            if (!fv && o != root) fv = get(o, r->slice_field);
            char nb[64];
            if (cJSON_IsNumber(fv)) snprintf(nb, sizeof nb, "%.17g", fv->valuedouble);
            const char *val = cJSON_IsString(fv) ? fv->valuestring : cJSON_IsNumber(fv) ? nb
                              : cJSON_IsBool(fv)  ? (cJSON_IsTrue(fv) ? "true" : "false")
                                                  : NULL;
            if (lp_seq_set_str(&s->field, val)) rc = e->st = PARITY_E_NOMEM;
        }
    }
    jl_arena_reset(); /* the whole tree (instead of cJSON_Delete) */
    return rc;
}

/* Find the next non-blank line from r->pos: [*b, *b + *len), advancing r->pos and r->line. */
static int next_line(parity_lp_reader_t *r, const char **b, size_t *len, uint64_t *lineno)
{
    while (r->pos < r->len) {
        const char *p = (const char *)r->base + r->pos;
        size_t left = r->len - r->pos;
        const char *nl = memchr(p, '\n', left);
        size_t l = nl ? (size_t)(nl - p) : left;
        r->pos += l + (nl ? 1 : 0);
        r->line++;
        size_t a = 0;
        while (a < l && (p[a] == ' ' || p[a] == '\t' || p[a] == '\r')) a++;
        if (a == l) continue;
        *b = p;
        *len = l;
        *lineno = r->line;
        return 1;
    }
    return 0;
}

parity_status_t lp_jsonl_open(parity_lp_reader_t *r, parity_diag_t *d)
{
    pthread_once(&jl_hooks_once, jl_hooks_init);
    r->dtype = "text";
    size_t save = r->pos;
    uint64_t sl = r->line;
    const char *b;
    size_t len;
    uint64_t ln;
    if (!next_line(r, &b, &len, &ln)) {
        if (r->fmt == PARITY_LP_AUTO) r->fmt = PARITY_LP_JSONL;
        return PARITY_OK; /* an empty dump: no sequences */
    }
    r->pos = save;
    r->line = sl;
    if (len > r->opts.max_line)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s:%llu: line of %zu bytes exceeds the limit of %zu", r->name,
                               (unsigned long long)ln, len, r->opts.max_line);
    cJSON *root = cJSON_ParseWithLength(b, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s:%llu: not a JSON object; expected JSONL (one JSON object per line), .npy "
                               "or .safetensors",
                               r->name, (unsigned long long)ln);
    }
    parity_lp_format_t f = r->fmt == PARITY_LP_AUTO ? detect(root) : r->fmt; /* or forced */
    if (f == PARITY_LP_AUTO) {
        cJSON_Delete(root);
        return parity_diag_set(d, PARITY_E_UNSUPPORTED,
                               "%s:%llu: cannot tell the JSON shape: expected 'logprobs' (parity), "
                               "'choices[].logprobs' (OpenAI), 'outputs'/'prompt_logprobs' (vLLM) or "
                               "'meta_info' (SGLang); use --format",
                               r->name, (unsigned long long)ln);
    }
    r->fmt = f;
    r->ordinal_ids = id_of(root, f) == NULL && !(f == PARITY_LP_VLLM && cJSON_IsString(get(unwrap(root), "request_id")));
    cJSON_Delete(root);
    return PARITY_OK;
}

/* A batch of lines of one reader: collected serially (line boundaries), parsed in parallel,
 * then finished serially in line order (errors, modality renumbering, pages released). */
typedef struct {
    parity_lp_reader_t *r;
    parity_lp_seq_t *seqs;
    const char **lines;
    size_t *lens;
    uint64_t *lnos;
    line_err_t *errs;
    uint64_t ord0;
    size_t n, bytes, nmods0;
} jl_batch_t;

/* The field of token i (top entry j, or -1) as the record's shape spells it, for messages. The
 * shapes that put the prompt first (vLLM, SGLang) are told apart by the token's phase. */
static void field_name(parity_lp_format_t f, const parity_lp_seq_t *s, size_t i, long j, char *b, size_t cap)
{
    size_t np = 0;
    if (f == PARITY_LP_VLLM || f == PARITY_LP_SGLANG)
        while (np < s->n && (s->flags[np] & PARITY_LP_PREFILL)) np++;
    int pre = i < np;
    size_t k = pre ? i : i - np;
    char top[48] = "";
    switch (f) {
    case PARITY_LP_OPENAI_CHAT:
        if (j >= 0) snprintf(top, sizeof top, ".top_logprobs[%ld]", j);
        snprintf(b, cap, "choices[0].logprobs.content[%zu]%s.logprob", i, top);
        break;
    case PARITY_LP_OPENAI_COMPLETIONS:
        if (j >= 0) snprintf(b, cap, "choices[0].logprobs.top_logprobs[%zu] (entry %ld)", i, j);
        else snprintf(b, cap, "choices[0].logprobs.token_logprobs[%zu]", i);
        break;
    case PARITY_LP_VLLM:
        if (j >= 0) snprintf(top, sizeof top, " (top entry %ld)", j);
        snprintf(b, cap, "%s[%zu]%s", pre ? "prompt_logprobs" : "outputs[0].logprobs", k, top);
        break;
    case PARITY_LP_SGLANG:
        if (j >= 0) snprintf(b, cap, "meta_info.%s_top_logprobs[%zu][%ld][0]", pre ? "input" : "output", k, j);
        else snprintf(b, cap, "meta_info.%s_token_logprobs[%zu][0]", pre ? "input" : "output", k);
        break;
    default:
        if (j >= 0) snprintf(b, cap, "field 'top_logprobs'[%zu][%ld]", i, j);
        else snprintf(b, cap, "field 'logprobs'[%zu]", i);
        break;
    }
}

/* The values of a parsed record that cannot be logprobs (lp_bad_value: positive beyond the
 * rounding slack; the parsers already refuse NaN and inf, which JSON cannot spell); one pass
 * over the record's doubles, in the parsing thread. */
static int check_values(const parity_lp_reader_t *r, const parity_lp_seq_t *s, line_err_t *e)
{
    unsigned allow = r->opts.allow | PARITY_LP_ALLOW_NONFINITE; /* (-inf is fine; NaN/inf: the parsers) */
    long bi = -1, bj = -1;
    for (size_t i = 0; i < s->n && bi < 0; i++)
        if ((s->flags[i] & PARITY_LP_PRESENT) && lp_bad_value(s->lp[i], allow)) bi = (long)i;
    size_t lim = bi >= 0 ? (size_t)bi : s->n; /* the token's own value first (vLLM's top entries hold it too) */
    for (size_t i = 0; i < lim && s->k && bj < 0; i++)
        for (size_t j = 0; j < s->k; j++)
            if (s->top_id[i * s->k + j] >= 0 && lp_bad_value(s->top_lp[i * s->k + j], allow)) {
                bi = (long)i;
                bj = (long)j;
                break;
            }
    if (bi < 0) return 0;
    double v = bj >= 0 ? s->top_lp[(size_t)bi * s->k + (size_t)bj] : s->lp[bi];
    char fb[96], wb[200];
    field_name(r->fmt, s, (size_t)bi, bj, fb, sizeof fb);
    lp_bad_describe(wb, sizeof wb, v, lp_bad_value(v, allow), 0);
    return LERR(e, "%s %s", fb, wb);
}

static void jl_parse_one(jl_batch_t *j, size_t i)
{
    j->errs[i].st = PARITY_OK;
    if (!parse_line(j->r, j->lines[i], j->lens[i], &j->seqs[i], j->ord0 + (uint64_t)i, &j->errs[i]))
        check_values(j->r, &j->seqs[i], &j->errs[i]);
}

/* One or two batches in one parallel section (a section costs a wake-up of every worker). Thread
 * t's share is lines [n t / T, n (t + 1) / T) of each batch, the same share of both files,
 * which the comparison's pairs (in line order when the files list requests alike) then find in
 * its cache; a thread done with its share takes lines of the others' (parity_steal_t). A
 * line's result does not depend on the thread (modality names are renumbered afterwards). */
typedef struct {
    jl_batch_t *b[2];
    int nt;
    parity_steal_t st; /* items: share t is its A lines then its B lines */
} jl_job_t;

static void jl_parse(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)b;
    (void)e;
    jl_job_t *j = ctx;
    size_t na = j->b[0]->n, nb = j->b[1] ? j->b[1]->n : 0, T = (size_t)j->nt;
    int64_t g;
    while ((g = parity_steal_next(&j->st, thread)) >= 0) {
        /* the share t holding item g, and g's place in it */
        size_t t = 0;
        while (t + 1 < T && (size_t)g >= na * (t + 1) / T + nb * (t + 1) / T) t++;
        size_t a0 = na * t / T, a1 = na * (t + 1) / T, o = (size_t)g - a0 - nb * t / T;
        if (o < a1 - a0) jl_parse_one(j->b[0], a0 + o);
        else jl_parse_one(j->b[1], nb * t / T + (o - (a1 - a0)));
    }
}

/* The modality names first seen in this batch were interned by the parsing threads in whatever
 * order they ran: renumber them in stream order (line, then position), as one thread would
 * have, so that modality indices, and with them the order of the modality slices in the
 * report, do not depend on the thread count. Names of earlier batches keep their index. */
static void canon_mods(parity_lp_reader_t *r, size_t n0, parity_lp_seq_t *seqs, size_t n)
{
    uint16_t map[LP_MAX_MODS + 1] = {0};
    size_t next = n0;
    /* A plain sequence has no tag and leaves mod[] unwritten (logprob.h): it is skipped. */
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; !seqs[i].plain && p < seqs[i].n; p++) {
            uint16_t m = seqs[i].mod[p];
            if (m > n0 && !map[m]) map[m] = (uint16_t)++next;
        }
    for (size_t m = n0 + 1; m <= r->nmods; m++) /* interned by a line that then failed */
        if (!map[m]) map[m] = (uint16_t)++next;
    char *names[LP_MAX_MODS + 1];
    for (size_t m = n0 + 1; m <= r->nmods; m++) names[map[m]] = r->mods[m];
    for (size_t m = n0 + 1; m <= r->nmods; m++) r->mods[m] = names[m];
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; !seqs[i].plain && p < seqs[i].n; p++)
            if (seqs[i].mod[p] > n0) seqs[i].mod[p] = map[seqs[i].mod[p]];
}

static void jl_batch_free(jl_batch_t *b)
{
    free(b->lines);
    free(b->lens);
    free(b->lnos);
    free(b->errs);
}

/* Up to max lines (and about BATCH_BYTES) of r into b. */
static parity_status_t jl_collect(parity_lp_reader_t *r, parity_lp_seq_t *seqs, size_t max, jl_batch_t *b,
                                  parity_diag_t *d)
{
    memset(b, 0, sizeof *b);
    b->r = r;
    b->seqs = seqs;
    b->ord0 = r->ordinal;
    b->nmods0 = r->nmods;
    b->lines = malloc(max * sizeof *b->lines);
    b->lens = malloc(max * sizeof *b->lens);
    b->lnos = malloc(max * sizeof *b->lnos);
    b->errs = calloc(max, sizeof *b->errs);
    if (!b->lines || !b->lens || !b->lnos || !b->errs) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    while (b->n < max && b->bytes < BATCH_BYTES) {
        const char *l;
        size_t len;
        uint64_t ln;
        if (!next_line(r, &l, &len, &ln)) break;
        if (len > r->opts.max_line)
            return parity_diag_set(d, PARITY_E_FORMAT, "%s:%llu: line of %zu bytes exceeds the limit of %zu", r->name,
                                   (unsigned long long)ln, len, r->opts.max_line);
        b->lines[b->n] = l;
        b->lens[b->n] = len;
        b->lnos[b->n] = ln;
        b->bytes += len;
        b->n++;
    }
    return PARITY_OK;
}

/* Give back the pages of a mapped dump below upto (the lines read). */
static void lp_release(parity_lp_reader_t *r, size_t upto)
{
    if (!r->mapped) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    size_t e = upto / (size_t)pg * (size_t)pg;
    /* Release in steps of at least 8 MiB to keep the syscall count low. */
    if (e > r->released + ((size_t)8 << 20)) {
        madvise((void *)(r->base + r->released), e - r->released, MADV_DONTNEED);
        r->released = e;
    }
}


/* The parsed batch in line order: the first failed line's error, the lines before it read. */
static parity_status_t jl_finish(jl_batch_t *b, size_t *got, parity_diag_t *d)
{
    parity_lp_reader_t *r = b->r;
    parity_status_t st = PARITY_OK;
    size_t ok = b->n;
    for (size_t i = 0; i < b->n; i++) {
        b->seqs[i].line = b->lnos[i];
        if (b->errs[i].st) {
            ok = i;
            st = parity_diag_set(d, b->errs[i].st, "%s:%llu: %s", r->name, (unsigned long long)b->lnos[i],
                                 b->errs[i].st == PARITY_E_NOMEM ? "out of memory" : b->errs[i].msg);
            break;
        }
    }
    /* only the lines parsed without error are read (a failed line's sequence may be partial) */
    if (r->nmods > b->nmods0) canon_mods(r, b->nmods0, b->seqs, ok);
    r->ordinal += ok;
    *got = ok;
    if (ok) lp_release(r, (size_t)(b->lines[ok - 1] - (const char *)r->base));
    return st;
}

/* in parallel unless the batches are tiny: a batch of a few long lines (engine output with
 * top-k: ~0.5 MB per 2048-token line) is as much work as thousands of short ones */
static void jl_parse_all(jl_batch_t *a, jl_batch_t *b)
{
    size_t nbl = b ? b->n : 0, n = a->n > nbl ? a->n : nbl, bytes = a->bytes + (b ? b->bytes : 0);
    int nt = n < 2 || bytes < ((size_t)64 << 10) ? 1 : a->r->opts.n_threads;
    if (nt <= 0) nt = parity_num_threads();
    if (nt > 64) nt = 64;
    if ((size_t)nt > n) nt = n > 0 ? (int)n : 1;
    jl_job_t job;
    job.b[0] = a;
    job.b[1] = b;
    job.nt = nt;
    int64_t bound[65];
    size_t na = a->n, nb = b ? b->n : 0;
    for (int t = 0; t <= nt; t++) bound[t] = (int64_t)(na * (size_t)t / (size_t)nt + nb * (size_t)t / (size_t)nt);
    parity_steal_init(&job.st, nt, bound);
    parity_parallel_for(nt, nt, jl_parse, &job);
}

/* An over-long line ends the batch with its error (in d), the lines before it are still parsed
 * and an error among them, earlier in the file, is the one reported (as one line at a time
 * would); only a failed allocation (the batch has no arrays) stops at once. */
static int jl_usable(const jl_batch_t *b) { return b->lines && b->lens && b->lnos && b->errs; }

parity_status_t lp_jsonl_next(parity_lp_reader_t *r, parity_lp_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d)
{
    jl_batch_t b;
    parity_status_t st = jl_collect(r, seqs, max, &b, d);
    if (jl_usable(&b)) {
        jl_parse_all(&b, NULL);
        parity_status_t fs = jl_finish(&b, got, d);
        if (fs) st = fs;
    }
    jl_batch_free(&b);
    return st;
}

parity_status_t lp_jsonl_next2(parity_lp_reader_t *ra, parity_lp_seq_t *sa, size_t maxa, size_t *gota,
                               parity_lp_reader_t *rb, parity_lp_seq_t *sb, size_t maxb, size_t *gotb,
                               parity_diag_t *d)
{
    jl_batch_t a, b;
    memset(&b, 0, sizeof b);
    *gota = *gotb = 0;
    /* B is not read when A's batch already ends in an error (as reading A, then B, would) */
    parity_status_t sta = jl_collect(ra, sa, maxa, &a, d), stb = PARITY_OK;
    if (!sta) stb = jl_collect(rb, sb, maxb, &b, d);
    int two = !sta && jl_usable(&b);
    if (jl_usable(&a)) {
        jl_parse_all(&a, two ? &b : NULL);
        parity_status_t fs = jl_finish(&a, gota, d);
        if (fs || sta) {
            jl_batch_free(&a);
            jl_batch_free(&b);
            return fs ? fs : sta;
        }
        if (two) {
            fs = jl_finish(&b, gotb, d);
            if (fs) stb = fs;
        }
    }
    jl_batch_free(&a);
    jl_batch_free(&b);
    return sta ? sta : stb;
}

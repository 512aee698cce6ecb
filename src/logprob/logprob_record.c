/* The shared record helpers of the logprob readers, the bottom of the logprob module: the
 * sequence buffers every reader fills (parity_logprob_seq_t: growing them, appending token text,
 * setting strings), the 62-bit keys and 31-bit ids of token texts, the reader's modality table
 * and the message that says why a value is not a logprob. Every reader (logprob_npy.c,
 * logprob_dense.c, the logprob_jsonl*.c units) and the dispatcher (logprob_read.c) call these;
 * this unit calls none of them (the dependency graph: logprob_impl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_impl.h"

const char *lp_bad_describe(char *buf, size_t cap, double v, int why, int relaxable_nonfinite)
{
    if (why == LP_BAD_POSITIVE)
        snprintf(buf, cap,
                 "is %+.9g, positive beyond rounding (a logprob is <= 0; up to +2^-14 = %.2g is fp32 rounding "
                 "of log_softmax, docs/logprobs.md; --allow positive reads it as given)",
                 v, PARITY_LOGPROB_POSITIVE_SLACK);
    else
        snprintf(buf, cap, "is %s (a logprob is finite or -inf%s)", why == LP_BAD_NAN ? "NaN" : "+inf",
                 relaxable_nonfinite ? "; --allow nonfinite reads it as given" : "");
    return buf;
}

void parity_logprob_seq_init(parity_logprob_seq_t *s)
{
    if (s) memset(s, 0, sizeof *s);
}

void parity_logprob_seq_free(parity_logprob_seq_t *s)
{
    if (!s) return;
    free(s->id);
    free(s->field);
    free(s->key);
    free(s->lp);
    free(s->flags);
    free(s->mod);
    free(s->text);
    free(s->tbuf);
    free(s->top_id);
    free(s->top_lp);
    memset(s, 0, sizeof *s);
}

const char *parity_logprob_seq_text(const parity_logprob_seq_t *s, size_t i)
{
    if (!s || i >= s->n || s->plain || !s->text || s->text[i] == UINT32_MAX) return NULL;
    return s->tbuf + s->text[i];
}

uint16_t parity_logprob_seq_mod(const parity_logprob_seq_t *s, size_t i)
{
    if (!s || i >= s->n || s->plain || !s->mod) return 0;
    return s->mod[i];
}

void lp_seq_reset(parity_logprob_seq_t *s)
{
    s->n = 0;
    s->plain = 0;
    s->tlen = 0;
    s->k = 0;
    s->line = 0;
    free(s->field);
    s->field = NULL;
}

static int grow(void **p, size_t n, size_t es)
{
    void *q = realloc(*p, n * es);
    if (!q) return -1;
    *p = q;
    return 0;
}

parity_status_t lp_seq_reserve(parity_logprob_seq_t *s, size_t n, size_t k)
{
    if (n > s->cap) {
        size_t c = n < 64 ? 64 : n;
        if (grow((void **)&s->key, c, 8) || grow((void **)&s->lp, c, 8) || grow((void **)&s->flags, c, 1) ||
            grow((void **)&s->mod, c, 2) || grow((void **)&s->text, c, 4))
            return PARITY_E_NOMEM;
        s->cap = c;
    }
    if (k && n > SIZE_MAX / 8 / k) return PARITY_E_NOMEM;
    if (n * k > s->topcap) {
        if (grow((void **)&s->top_id, n * k, 4) || grow((void **)&s->top_lp, n * k, 8)) return PARITY_E_NOMEM;
        s->topcap = n * k;
    }
    s->k = k;
    return PARITY_OK;
}

uint32_t lp_seq_add_text(parity_logprob_seq_t *s, const char *t, size_t len)
{
    if (!t || s->tlen + len + 1 >= UINT32_MAX) return UINT32_MAX;
    if (s->tlen + len + 1 > s->tcap) {
        size_t c = (s->tlen + len + 1) * 2;
        if (grow((void **)&s->tbuf, c, 1)) return UINT32_MAX;
        s->tcap = c;
    }
    uint32_t off = (uint32_t)s->tlen;
    memcpy(s->tbuf + s->tlen, t, len);
    s->tbuf[s->tlen + len] = 0;
    s->tlen += len + 1;
    return off;
}

parity_status_t lp_seq_set_str(char **dst, const char *src)
{
    free(*dst);
    *dst = NULL;
    if (!src) return PARITY_OK;
    *dst = strdup(src);
    return *dst ? PARITY_OK : PARITY_E_NOMEM;
}

uint16_t lp_intern_mod(parity_logprob_reader_t *r, const char *name)
{
    if (!name || !name[0]) return 0;
    uint16_t out = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 1; i <= r->nmods; i++)
        if (!strcmp(r->mods[i], name)) {
            out = (uint16_t)i;
            break;
        }
    if (!out && r->nmods < LP_MAX_MODS) {
        char *c = strdup(name);
        if (c) {
            r->mods[++r->nmods] = c;
            out = (uint16_t)r->nmods;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return out;
}

static uint64_t fnv1a(const char *t, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)t[i]) * 1099511628211ull;
    return h;
}

int64_t lp_text_key(const char *t, size_t len)
{
    return (int64_t)(fnv1a(t, len) & ((1ull << 62) - 1));
}

int32_t lp_text_id(const char *t, size_t len)
{
    return (int32_t)(fnv1a(t, len) & 0x7fffffffu);
}

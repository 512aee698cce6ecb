/* Internal to the JSONL reader, shared by its units: logprob_jsonl.c (lines, batches, the
 * parallel parse, value checks), logprob_jsonl_schema.c (records from cJSON trees, one
 * extractor per shape), logprob_jsonl_fast.c (the fast paths that fill a record straight from
 * the bytes) and logprob_jsonl_tree.c (cJSON trees built from an arena). The per-token helpers
 * both ways of reading a record use are inline here (they run once per token). Not a public
 * header. */
#ifndef PARITY_LOGPROB_JSONL_IMPL_H
#define PARITY_LOGPROB_JSONL_IMPL_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_impl.h"

/* What is wrong with a line (a parse error or a value that is not a logprob), filled in the
 * parsing thread, reported in line order by logprob_jsonl.c. */
typedef struct {
    parity_status_t st;
    char msg[320]; /* a field name (~96) and what is wrong with its value (~200) */
} line_err_t;

#define LERR(e, ...) (snprintf((e)->msg, sizeof (e)->msg, __VA_ARGS__), (e)->st = PARITY_E_FORMAT)


/* Key of a token given as text: "token_id:123" (vLLM's return_tokens_as_token_ids) is the id;
 * anything else is hashed. */
static inline int64_t jl_text_key(const char *t, uint8_t *fl)
{
    if (!strncmp(t, "token_id:", 9) && t[9] >= '0' && t[9] <= '9') {
        char *e;
        long long v = strtoll(t + 9, &e, 10);
        if (!*e && v >= 0) return v;
    }
    *fl |= PARITY_LOGPROB_KEY_TEXT;
    return lp_text_key(t, strlen(t));
}

static inline int32_t jl_text_top_id(const char *t)
{
    uint8_t fl = 0;
    int64_t k = jl_text_key(t, &fl);
    if (!(fl & PARITY_LOGPROB_KEY_TEXT) && k <= INT32_MAX) return (int32_t)k;
    return lp_text_id(t, strlen(t));
}

static inline const cJSON *jl_get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Append one token; top entries are filled by the caller at index (s->n - 1) * s->k. */
static inline int jl_push(parity_logprob_seq_t *s, int64_t key, double lp, int present, uint8_t fl, uint16_t mod,
                          const char *text)
{
    size_t i = s->n++;
    s->key[i] = key;
    s->lp[i] = present ? lp : 0;
    s->flags[i] = (uint8_t)(fl | (present ? PARITY_LOGPROB_PRESENT : 0));
    s->mod[i] = mod;
    s->text[i] = text ? lp_seq_add_text(s, text, strlen(text)) : UINT32_MAX;
    for (size_t j = 0; j < s->k; j++) {
        s->top_id[i * s->k + j] = -1;
        s->top_lp[i * s->k + j] = NAN;
    }
    return 0;
}

/* --- records from cJSON trees (logprob_jsonl_schema.c) ------------------------------------ */

/* The record o (the root or, for an OpenAI Batch line, its response body) into s, by r's shape
 * (r->fmt): 0, or non-zero with e filled. */
int lp_jsonl_parse_record(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e);
/* The object holding the record: the body of an OpenAI Batch output line, else root. */
const cJSON *lp_jsonl_unwrap(const cJSON *root);
/* The shape of a record (PARITY_LOGPROB_AUTO: none recognised). */
parity_logprob_format_t lp_jsonl_detect(const cJSON *root);
/* The request id of a record of shape f, or NULL. */
const char *lp_jsonl_id_of(const cJSON *root, parity_logprob_format_t f);

/* --- the fast paths (logprob_jsonl_fast.c) ------------------------------------------------ */

/* The line into s (and its id, "#ordinal" when the reader pairs by order) as the cJSON path
 * would fill it: 1; or 0, and the caller takes the cJSON path (s is then to be reset). For
 * parity's own schema, and for the OpenAI chat shape. */
int lp_jsonl_fast_parity(parity_logprob_reader_t *r, const char *line, size_t len, parity_logprob_seq_t *s,
                         uint64_t ordinal);
int lp_jsonl_fast_chat(parity_logprob_reader_t *r, const char *line, size_t len, parity_logprob_seq_t *s, uint64_t ordinal);

/* --- cJSON trees from the thread's arena (logprob_jsonl_tree.c) --------------------------- */

/* Install the cJSON allocation hooks (once per process; before the first tree). */
void lp_jsonl_hooks_install(void);
/* The line's tree (the arena's, or cJSON's parser's when the builder declines), or NULL when
 * the line is not JSON; valid until lp_jsonl_tree_drop. */
cJSON *lp_jsonl_tree_parse(const char *line, size_t len);
/* Drop the thread's tree (the whole arena at once, instead of cJSON_Delete). */
void lp_jsonl_tree_drop(void);

#endif

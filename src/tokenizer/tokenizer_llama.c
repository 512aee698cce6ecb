/* The llama2.c tokenizer (tokenizer.bin / tok512.bin: a sentencepiece-BPE vocabulary with scores)
 * with karpathy/llama2.c run.c's encode() and decode() semantics, written from the format
 * description in data/README.md. Same results as run.c's O(n^2) merge loop, in O(n log n).
 * It does not parse sentencepiece .model files and knows no special tokens beyond BOS/EOS ids. */
#include "parity/tokenizer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/tokenizer_impl.h"

struct parity_llama_tok {
    size_t n;
    int32_t max_len;
    char *blob;     /* all pieces back to back */
    uint32_t *off;  /* (n + 1) */
    float *score;   /* (n) */
    int32_t *slot;  /* piece bytes -> id, open addressing, -1 empty */
    size_t mask;
    int32_t space_id; /* the piece " " (sentencepiece's dummy prefix), -1 if absent */
    unsigned char bytes[256]; /* bytes[b] == b: what "<0xHH>" pieces decode to */
};

static inline size_t piece_len(const parity_llama_tok_t *t, int32_t id)
{
    return t->off[id + 1] - t->off[id];
}

/* Looks up the piece a || b (either may be empty) without building it: FNV-1a streams. */
static int32_t lookup2(const parity_llama_tok_t *t, const char *a, size_t na, const char *b,
                       size_t nb)
{
    size_t h = (size_t)tok_fnv(b, nb, tok_fnv(a, na, TOK_FNV_SEED)) & t->mask;
    for (;;) {
        int32_t id = t->slot[h];
        if (id < 0) return -1;
        const char *p = t->blob + t->off[id];
        if (piece_len(t, id) == na + nb && memcmp(p, a, na) == 0 && memcmp(p + na, b, nb) == 0)
            return id;
        h = (h + 1) & t->mask;
    }
}

static inline uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

parity_status_t parity_llama_tok_load(const char *path, int32_t vocab_size,
                                      parity_llama_tok_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!path || !out)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_llama_tok_load: NULL argument");
    if (vocab_size < 3)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "%s: vocab_size %d: expected at least 3 (<unk>, BOS, EOS)", path,
                               (int)vocab_size);
    char *buf = NULL;
    size_t size = 0;
    parity_status_t st = tok_read_file(path, &buf, &size, diag);
    if (st != PARITY_OK) return st;
    const unsigned char *u = (const unsigned char *)buf;
    parity_llama_tok_t *t = NULL;

    if (size < 4) {
        st = parity_diag_set(diag, PARITY_E_FORMAT,
                             "%s: header: file has %zu bytes, expected at least 4 "
                             "(int32 max_token_length)", path, size);
        goto fail;
    }
    int32_t max_len = (int32_t)rd_u32(u);
    if (max_len <= 0 || (size_t)max_len > size) {
        st = parity_diag_set(diag, PARITY_E_FORMAT,
                             "%s: header: max_token_length %d, expected 1..%zu (the file size)",
                             path, (int)max_len, size);
        goto fail;
    }
    t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->n = (size_t)vocab_size;
    t->max_len = max_len;
    t->off = malloc((t->n + 1) * sizeof *t->off);
    t->score = malloc(t->n * sizeof *t->score);
    t->blob = malloc(size); /* pieces are a subset of the file's bytes */
    if (!t->off || !t->score || !t->blob) goto nomem;

    /* Walk the entries, checking each against what is left of the file before reading it. */
    size_t at = 4, pos = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (size - at < 8) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token %zu of %zu: truncated at byte %zu (expected float32 "
                                 "score + int32 len, file has %zu bytes)", path, i, t->n, at, size);
            goto fail;
        }
        float score;
        uint32_t bits = rd_u32(u + at);
        memcpy(&score, &bits, sizeof score);
        int32_t len = (int32_t)rd_u32(u + at + 4);
        if (!isfinite(score)) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token %zu: score is not finite (expected a finite float32 "
                                 "merge score)", path, i);
            goto fail;
        }
        if (len < 0 || len > max_len) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token %zu: len %d, expected 0..%d (max_token_length)", path,
                                 i, (int)len, (int)max_len);
            goto fail;
        }
        at += 8;
        if (size - at < (size_t)len) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token %zu of %zu: truncated: piece needs %d bytes at byte "
                                 "%zu, file has %zu bytes", path, i, t->n, (int)len, at, size);
            goto fail;
        }
        t->score[i] = score;
        t->off[i] = (uint32_t)pos;
        memcpy(t->blob + pos, u + at, (size_t)len);
        pos += (size_t)len;
        at += (size_t)len;
    }
    t->off[t->n] = (uint32_t)pos;
    if (at != size) {
        st = parity_diag_set(diag, PARITY_E_FORMAT,
                             "%s: %zu bytes after token %zu (expected the file to end: is "
                             "vocab_size %zu the model's?)", path, size - at, t->n - 1, t->n);
        goto fail;
    }

    size_t cap = 16;
    while (cap < 2 * t->n) cap *= 2;
    t->mask = cap - 1;
    t->slot = malloc(cap * sizeof *t->slot);
    if (!t->slot) goto nomem;
    for (size_t i = 0; i < cap; i++) t->slot[i] = -1;
    for (size_t i = 0; i < t->n; i++) {
        /* run.c finds pieces by bsearch over a qsort'ed copy, which picks an arbitrary one of
         * duplicate pieces; we keep the lowest id so the choice is deterministic. */
        const char *p = t->blob + t->off[i];
        size_t n = piece_len(t, (int32_t)i);
        if (lookup2(t, p, n, "", 0) >= 0) continue;
        size_t h = (size_t)tok_fnv(p, n, TOK_FNV_SEED) & t->mask;
        while (t->slot[h] >= 0) h = (h + 1) & t->mask;
        t->slot[h] = (int32_t)i;
    }
    t->space_id = lookup2(t, " ", 1, "", 0);
    for (int b = 0; b < 256; b++) t->bytes[b] = (unsigned char)b;
    free(buf);
    *out = t;
    return PARITY_OK;

nomem:
    st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
fail:
    free(buf);
    parity_llama_tok_free(t);
    return st;
}

void parity_llama_tok_free(parity_llama_tok_t *t)
{
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->score);
    free(t->slot);
    free(t);
}

size_t parity_llama_tok_vocab_size(const parity_llama_tok_t *t)
{
    return t ? t->n : 0;
}

const char *parity_llama_tok_piece(const parity_llama_tok_t *t, int32_t id, size_t *len,
                                   float *score)
{
    if (!t || id < 0 || (size_t)id >= t->n) {
        if (len) *len = 0;
        if (score) *score = 0.0f;
        return NULL;
    }
    if (len) *len = piece_len(t, id);
    if (score) *score = t->score[id];
    return t->blob + t->off[id];
}

/* ------------------------------------------------------------------------------------------ */
/* encoding                                                                                    */

typedef struct {
    const parity_llama_tok_t *t;
    tok_syms_t syms;
    tok_heap_t heap;
} llama_ctx_t;

/* run.c only takes a merge whose score beats its initial best_score of -1e10 (strictly). */
static inline int try_push(llama_ctx_t *c, int32_t i)
{
    int32_t j = c->syms.next[i];
    if (j < 0) return 0;
    const parity_llama_tok_t *t = c->t;
    int32_t a = c->syms.id[i], b = c->syms.id[j];
    int32_t m = lookup2(t, t->blob + t->off[a], piece_len(t, a), t->blob + t->off[b],
                        piece_len(t, b));
    if (m < 0 || !(t->score[m] > -1e10f)) return 0;
    /* Max score first; equal scores: the leftmost pair, as run.c's strict '>' scan picks. */
    tok_cand_t cand = {-(double)t->score[m], (uint32_t)i, a, b, m};
    return tok_heap_push(&c->heap, cand);
}

parity_status_t parity_llama_tok_encode(const parity_llama_tok_t *t, const char *text,
                                        size_t len, int bos, int eos, int32_t **ids,
                                        size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!t || (!text && len) || !ids || !n_ids) return PARITY_E_INVALID;
    if (len > (size_t)INT32_MAX - 4) return PARITY_E_UNSUPPORTED;

    llama_ctx_t c;
    memset(&c, 0, sizeof c);
    c.t = t;
    parity_status_t st = PARITY_E_NOMEM;
    /* At most one symbol per byte, plus BOS, the dummy prefix and EOS. */
    if (tok_syms_reserve(&c.syms, len + 3)) goto done;
    int32_t *id = c.syms.id;
    size_t n = 0;
    if (bos) id[n++] = PARITY_LLAMA_BOS;
    if (len > 0) {
        /* sentencepiece's add_dummy_prefix. run.c would store -1 if the vocabulary lacked " ";
         * we take the space's byte fallback instead. */
        id[n++] = t->space_id >= 0 ? t->space_id : ' ' + 3;
    }
    /* run.c's UTF-8 walk: gather a lead byte and up to 3 following continuation bytes; a whole
     * character that is a piece becomes that piece, otherwise each byte becomes id byte + 3. */
    const unsigned char *s = (const unsigned char *)text;
    size_t blen = 0;
    char buf[4];
    for (size_t i = 0; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) blen = 0;
        buf[blen++] = (char)s[i];
        if (i + 1 < len && (s[i + 1] & 0xC0) == 0x80 && blen < 4) continue;
        int32_t p = lookup2(t, buf, blen, "", 0);
        if (p >= 0) {
            id[n++] = p;
        } else {
            for (size_t k = 0; k < blen; k++) {
                int32_t fb = (int32_t)(unsigned char)buf[k] + 3;
                if ((size_t)fb >= t->n) {
                    st = PARITY_E_UNSUPPORTED; /* a vocabulary without byte fallback pieces */
                    goto done;
                }
                id[n++] = fb;
            }
        }
        blen = 0;
    }
    /* BOS takes part in merging exactly as in run.c (its piece never combines in practice). */
    for (size_t i = 0; i < n; i++) {
        c.syms.prev[i] = (int32_t)i - 1;
        c.syms.next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (try_push(&c, (int32_t)i)) goto done;
    tok_cand_t m;
    int32_t *prev = c.syms.prev, *next = c.syms.next;
    while (tok_heap_pop(&c.heap, &m)) {
        int32_t i = (int32_t)m.pos;
        if (id[i] != m.left) continue; /* stale: position i merged or died since the push */
        int32_t j = next[i];
        if (j < 0 || id[j] != m.right) continue;
        id[i] = m.merged;
        id[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0 && try_push(&c, prev[i])) goto done;
        if (try_push(&c, i)) goto done;
    }
    size_t k = 0;
    int32_t *res = malloc((n + 1) * sizeof *res);
    if (!res) goto done;
    for (int32_t i = n ? 0 : -1; i >= 0; i = next[i]) res[k++] = id[i];
    if (eos) res[k++] = PARITY_LLAMA_EOS;
    if (k == 0) {
        free(res);
        res = NULL;
    }
    *ids = res;
    *n_ids = k;
    st = PARITY_OK;
done:
    tok_syms_free(&c.syms);
    free(c.heap.v);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* decoding                                                                                    */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *parity_llama_tok_decode_piece(const parity_llama_tok_t *t, int32_t prev_token,
                                          int32_t token, size_t *len)
{
    if (!t || token < 0 || (size_t)token >= t->n) {
        if (len) *len = 0;
        return NULL;
    }
    const char *p = t->blob + t->off[token];
    size_t n = piece_len(t, token);
    /* sentencepiece strips the dummy-prefix space of the first piece after BOS. */
    if (prev_token == PARITY_LLAMA_BOS && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    /* run.c uses sscanf(piece, "<0x%02hhX>"), which would also accept odd spellings ("<0x4",
     * "<0x+4>"); only the exact six-character form is a byte piece here. */
    if (n == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>') {
        int hi = hexval(p[3]), lo = hexval(p[4]);
        if (hi >= 0 && lo >= 0) {
            if (len) *len = 1;
            return (const char *)&t->bytes[hi * 16 + lo];
        }
    }
    if (len) *len = n;
    return p;
}

parity_status_t parity_llama_tok_decode(const parity_llama_tok_t *t, const int32_t *ids,
                                        size_t n, int32_t prev_token, char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || (!ids && n) || !text || !len) return PARITY_E_INVALID;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n) return PARITY_E_INVALID;
        total += piece_len(t, ids[i]);
    }
    char *s = malloc(total + 1); /* decoding never makes a piece longer */
    if (!s) return PARITY_E_NOMEM;
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        int32_t prev = i ? ids[i - 1] : prev_token;
        const char *piece = parity_llama_tok_decode_piece(t, prev, ids[i], &k);
        memcpy(s + p, piece, k);
        p += k;
    }
    s[p] = '\0';
    *text = s;
    *len = p;
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */

parity_status_t parity_text_tokens_llama(const char *text_path, const char *tok_path,
                                         int32_t vocab_size, int32_t **ids, size_t *n,
                                         parity_diag_t *diag)
{
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!text_path || !tok_path || !ids || !n)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_text_tokens_llama: NULL argument");
    parity_llama_tok_t *t = NULL;
    parity_status_t st = parity_llama_tok_load(tok_path, vocab_size, &t, diag);
    if (st != PARITY_OK) return st;
    char *text = NULL;
    size_t len = 0;
    st = tok_read_file(text_path, &text, &len, diag);
    tok_ids_t all = {NULL, 0, 0};
    for (size_t at = 0; st == PARITY_OK && at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t e = nl ? (size_t)(nl - text) : len;
        int32_t *line = NULL;
        size_t k = 0;
        if (e > at) st = parity_llama_tok_encode(t, text + at, e - at, 0, 0, &line, &k);
        if (st == PARITY_OK && k) {
            if (tok_ids_reserve(&all, k)) {
                st = PARITY_E_NOMEM;
            } else {
                memcpy(all.v + all.n, line, k * sizeof *line);
                all.n += k;
            }
        }
        free(line);
        if (st != PARITY_OK)
            parity_diag_set(diag, st, "%s: llama encoding failed at byte %zu: %s", text_path, at,
                            parity_status_str(st));
        at = e + 1;
    }
    if (st == PARITY_OK) {
        *ids = all.v;
        *n = all.n;
        all.v = NULL;
    }
    free(all.v);
    free(text);
    parity_llama_tok_free(t);
    return st;
}

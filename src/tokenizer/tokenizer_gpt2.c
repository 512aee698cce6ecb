/* GPT-2 byte-level BPE from OpenAI's encoder.json + vocab.bpe, in C: PCRE2 pre-tokenizer (GPT-2's
 * pattern, UTF + UCP), bytes_to_unicode undone at load time so tokens are raw bytes, merges by
 * lowest rank through a heap, and a per-call cache of each distinct pre-token's ids.
 * It does not recognise special tokens inside the text (that is tiktoken's encode_ordinary). */
#include "parity/tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "src/tokenizer/tokenizer_gpt2_stages.h"
#include "src/tokenizer/tokenizer_impl.h"

/* GPT-2's pre-tokenizer, as in openai/gpt-2 src/encoder.py (and tiktoken's "gpt2" pat_str):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with \s spelled out as the Unicode White_Space property, which is what Python's regex module
 * (GPT-2) and Rust's regex (tiktoken) mean by \s. PCRE2's UCP \s is \p{Z} + \h + \v, and its \h
 * still contains U+180E MONGOLIAN VOWEL SEPARATOR (removed from White_Space in Unicode 6.3):
 * with the literal \s, text containing U+180E tokenizes differently from tiktoken. */
#define WS                                                                                       \
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"    \
    "\\x{3000}"
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+"
                                   "| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

/* bytes_to_unicode maps the 188 printable bytes to the code point of the same value and the
 * other 68 to 256, 257, ... in byte order, so the highest code point used is 256 + 67. */
#define GPT2_MAX_CP (256 + 68)

#define MERGE_EMPTY UINT64_MAX

struct parity_gpt2 {
    size_t n_vocab;
    char *blob;          /* all tokens' raw bytes, back to back */
    uint32_t *off;       /* (n_vocab + 1): token i is blob[off[i] .. off[i+1]) */
    int32_t byte_id[256]; /* the single-byte token of each byte: the start of every BPE */
    /* merge table, open addressing keyed on (left id << 32 | right id) */
    uint64_t *mkey;
    int32_t *mrank, *mmerged;
    size_t mmask;
    pcre2_code *re;
};

/* ------------------------------------------------------------------------------------------ */
/* loading                                                                                     */

static void gpt2_unicode_to_byte(int16_t u2b[GPT2_MAX_CP])
{
    for (int i = 0; i < GPT2_MAX_CP; i++) u2b[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        u2b[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

/* Decodes one byte-level token string (UTF-8 of remapped code points) into raw bytes.
 * Returns the number of bytes written to out (which holds at least n bytes), or -1 with *bad_cp
 * set to the offending code point, or to -1 for invalid UTF-8. */
static long gpt2_unmap(const int16_t u2b[GPT2_MAX_CP], const char *s, size_t n, char *out,
                       long *bad_cp)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    long k = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                     : (c & 0xF8) == 0xF0 ? 3 : 4;
        if (extra == 4 || i + extra >= n) { /* a bad lead byte, or truncated at the end */
            *bad_cp = -1;
            return -1;
        }
        uint32_t cp = extra ? c & (0x3Fu >> extra) : c;
        for (size_t e = 1; e <= extra; e++) {
            if ((p[i + e] & 0xC0) != 0x80) {
                *bad_cp = -1;
                return -1;
            }
            cp = (cp << 6) | (p[i + e] & 0x3Fu);
        }
        i += extra + 1;
        if (cp >= GPT2_MAX_CP || u2b[cp] < 0) {
            *bad_cp = (long)cp;
            return -1;
        }
        out[k++] = (char)u2b[cp];
    }
    return k;
}

/* Bytes -> id map used only while loading (merge lines name tokens by their strings). */
typedef struct {
    int32_t *slot; /* id or -1 */
    size_t mask;
} bytes_map_t;

static int32_t bytes_map_find(const bytes_map_t *m, const parity_gpt2_t *t, const char *s,
                              size_t n)
{
    size_t h = (size_t)tok_fnv(s, n, TOK_FNV_SEED) & m->mask;
    for (;;) {
        int32_t id = m->slot[h];
        if (id < 0) return -1;
        size_t len = t->off[id + 1] - t->off[id];
        if (len == n && memcmp(t->blob + t->off[id], s, n) == 0) return id;
        h = (h + 1) & m->mask;
    }
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static parity_status_t gpt2_load_encoder(parity_gpt2_t *t, const char *path, bytes_map_t *map,
                                         parity_diag_t *diag)
{
    char *text = NULL;
    size_t len = 0;
    parity_status_t st = tok_read_file(path, &text, &len, diag);
    if (st != PARITY_OK) return st;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        free(text);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: invalid JSON near byte %zu (expected one object mapping "
                               "token strings to integer ids)", path, at);
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: top level: expected an object mapping token strings to ids",
                               path);
    }
    size_t n = (size_t)cJSON_GetArraySize(root);
    if (n < 256 || n > INT32_MAX / 2) {
        cJSON_Delete(root);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: top level: %zu tokens, expected at least 256 (one per byte)",
                               path, n);
    }
    int16_t u2b[GPT2_MAX_CP];
    gpt2_unicode_to_byte(u2b);

    /* Pass 1: validate ids and collect each token's length so the blob is one allocation. */
    const cJSON **by_id = calloc(n, sizeof *by_id);
    uint32_t *tlen = calloc(n, sizeof *tlen);
    if (!by_id || !tlen) {
        st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t idx = 0, total = 0;
    for (const cJSON *it = root->child; it; it = it->next, idx++) {
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(v >= 0) || v >= (double)n || v != floor(v)) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token #%zu \"%.60s\": expected an integer id in [0, %zu)",
                                 path, idx, it->string ? it->string : "", n);
            goto done;
        }
        size_t id = (size_t)v;
        if (by_id[id]) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token #%zu \"%.60s\": id %zu already used by \"%.60s\" "
                                 "(expected each id once)", path, idx, it->string, id,
                                 by_id[id]->string);
            goto done;
        }
        by_id[id] = it;
        tlen[id] = (uint32_t)strlen(it->string);
        total += tlen[id]; /* an upper bound: unmapping never makes a token longer */
    }
    t->n_vocab = n;
    t->off = malloc((n + 1) * sizeof *t->off);
    t->blob = malloc(total + 1);
    map->mask = pow2_at_least(2 * n) - 1;
    map->slot = malloc((map->mask + 1) * sizeof *map->slot);
    if (!t->off || !t->blob || !map->slot) {
        st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i <= map->mask; i++) map->slot[i] = -1;

    /* Pass 2, in id order: unmap each token to raw bytes and index it. */
    size_t pos = 0;
    for (size_t id = 0; id < n; id++) {
        const char *s = by_id[id]->string;
        long bad = 0;
        long k = gpt2_unmap(u2b, s, tlen[id], t->blob + pos, &bad);
        if (k <= 0) {
            if (k == 0)
                st = parity_diag_set(diag, PARITY_E_FORMAT,
                                     "%s: token id %zu: empty string (expected at least one "
                                     "character)", path, id);
            else if (bad < 0)
                st = parity_diag_set(diag, PARITY_E_FORMAT,
                                     "%s: token id %zu \"%.60s\": invalid UTF-8 (expected GPT-2 "
                                     "bytes_to_unicode characters)", path, id, s);
            else
                st = parity_diag_set(diag, PARITY_E_FORMAT,
                                     "%s: token id %zu \"%.60s\": character U+%04lX is not in "
                                     "GPT-2's bytes_to_unicode map (expected printable Latin-1 "
                                     "or U+0100..U+0143)", path, id, s, bad);
            goto done;
        }
        t->off[id] = (uint32_t)pos;
        t->off[id + 1] = (uint32_t)(pos + (size_t)k);
        if (bytes_map_find(map, t, t->blob + pos, (size_t)k) >= 0) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: token id %zu \"%.60s\": same bytes as an earlier token "
                                 "(expected distinct tokens)", path, id, s);
            goto done;
        }
        size_t h = (size_t)tok_fnv(t->blob + pos, (size_t)k, TOK_FNV_SEED) & map->mask;
        while (map->slot[h] >= 0) h = (h + 1) & map->mask;
        map->slot[h] = (int32_t)id;
        pos += (size_t)k;
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = bytes_map_find(map, t, &c, 1);
        if (t->byte_id[b] < 0) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: no token for byte 0x%02X (expected all 256 single-byte "
                                 "tokens, byte-level BPE starts from them)", path, b);
            goto done;
        }
    }
    st = PARITY_OK;
done:
    free(by_id);
    free(tlen);
    cJSON_Delete(root);
    return st;
}

static int merge_insert(parity_gpt2_t *t, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t h = (size_t)tok_mix64(key) & t->mmask;
    while (t->mkey[h] != MERGE_EMPTY) {
        if (t->mkey[h] == key) return -1;
        h = (h + 1) & t->mmask;
    }
    t->mkey[h] = key;
    t->mrank[h] = rank;
    t->mmerged[h] = merged;
    return 0;
}

static inline int merge_find(const parity_gpt2_t *t, int32_t a, int32_t b, int32_t *rank,
                             int32_t *merged)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t h = (size_t)tok_mix64(key) & t->mmask;
    for (;;) {
        uint64_t k = t->mkey[h];
        if (k == key) {
            *rank = t->mrank[h];
            *merged = t->mmerged[h];
            return 1;
        }
        if (k == MERGE_EMPTY) return 0;
        h = (h + 1) & t->mmask;
    }
}

static parity_status_t gpt2_load_merges(parity_gpt2_t *t, const char *path,
                                        const bytes_map_t *map, parity_diag_t *diag)
{
    char *text = NULL;
    size_t len = 0;
    parity_status_t st = tok_read_file(path, &text, &len, diag);
    if (st != PARITY_OK) return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    t->mmask = pow2_at_least(2 * lines) - 1;
    t->mkey = malloc((t->mmask + 1) * sizeof *t->mkey);
    t->mrank = malloc((t->mmask + 1) * sizeof *t->mrank);
    t->mmerged = malloc((t->mmask + 1) * sizeof *t->mmerged);
    char *buf = malloc(len + 1); /* scratch for unmapped tokens: never longer than the line */
    if (!t->mkey || !t->mrank || !t->mmerged || !buf) {
        st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i <= t->mmask; i++) t->mkey[i] = MERGE_EMPTY;

    int16_t u2b[GPT2_MAX_CP];
    gpt2_unicode_to_byte(u2b);
    int32_t rank = 0;
    size_t line_no = 0;
    for (size_t p = 0; p < len;) {
        size_t e = p;
        while (e < len && text[e] != '\n') e++;
        line_no++;
        size_t next = e + 1;
        if (e > p && text[e - 1] == '\r') e--; /* tolerate CRLF files */
        const char *line = text + p;
        size_t n = e - p;
        p = next;
        if (line_no == 1 && n > 0 && line[0] == '#') continue; /* "#version: 0.2" */
        if (n == 0) {
            /* Only the final newline may leave an empty line: blank lines in the middle would
             * silently shift every later rank. */
            if (p >= len) break;
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: line %zu: empty (expected a merge \"a b\")", path, line_no);
            goto done;
        }
        const char *sp = memchr(line, ' ', n);
        if (!sp || sp == line || sp == line + n - 1 ||
            memchr(sp + 1, ' ', (size_t)(line + n - sp - 1))) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: line %zu: \"%.*s\": expected two tokens separated by one "
                                 "space", path, line_no, (int)(n < 80 ? n : 80), line);
            goto done;
        }
        size_t na = (size_t)(sp - line), nb = n - na - 1;
        long bad = 0;
        long ka = gpt2_unmap(u2b, line, na, buf, &bad);
        long kb = ka > 0 ? gpt2_unmap(u2b, sp + 1, nb, buf + ka, &bad) : -1;
        int32_t a = ka > 0 ? bytes_map_find(map, t, buf, (size_t)ka) : -1;
        int32_t b = kb > 0 ? bytes_map_find(map, t, buf + ka, (size_t)kb) : -1;
        if (a < 0 || b < 0) {
            int first = a < 0;
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: line %zu: \"%.*s\": %s token \"%.*s\" is not in the encoder "
                                 "(expected both sides of a merge to be tokens)", path, line_no,
                                 (int)(n < 80 ? n : 80), line, first ? "left" : "right",
                                 (int)(first ? na : nb), first ? line : sp + 1);
            goto done;
        }
        int32_t m = bytes_map_find(map, t, buf, (size_t)(ka + kb));
        if (m < 0) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: line %zu: \"%.*s\": the merged token is not in the encoder "
                                 "(expected a+b to be a token)", path, line_no,
                                 (int)(n < 80 ? n : 80), line);
            goto done;
        }
        if (merge_insert(t, a, b, rank, m)) {
            st = parity_diag_set(diag, PARITY_E_FORMAT,
                                 "%s: line %zu: \"%.*s\": duplicate merge (expected each pair "
                                 "once, its rank is ambiguous)", path, line_no,
                                 (int)(n < 80 ? n : 80), line);
            goto done;
        }
        rank++;
    }
    st = PARITY_OK;
done:
    free(buf);
    free(text);
    return st;
}

/* An encoder.json loaded on its own: its tokens and the bytes -> id map the merges are resolved
 * through. parity_gpt2_load is the two stages below in one call; a caller pairing one encoder
 * with many vocab.bpe files (fuzz/fuzz_gpt2_vocab.c: parsing the fixed encoder took half of every
 * execution) keeps the first stage. */
struct parity_gpt2_encoder {
    parity_gpt2_t t; /* no merges, no pattern */
    bytes_map_t map;
};

void parity_gpt2_encoder_free(parity_gpt2_encoder_t *e)
{
    if (!e) return;
    free(e->t.blob);
    free(e->t.off);
    free(e->map.slot);
    free(e);
}

parity_status_t parity_gpt2_encoder_load(const char *encoder_json, parity_gpt2_encoder_t **out,
                                         parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!encoder_json || !out)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_gpt2_encoder_load: NULL argument");
    parity_gpt2_encoder_t *e = calloc(1, sizeof *e);
    if (!e) return parity_diag_set(diag, PARITY_E_NOMEM, "parity_gpt2_load: out of memory");
    parity_status_t st = gpt2_load_encoder(&e->t, encoder_json, &e->map, diag);
    if (st != PARITY_OK) {
        parity_gpt2_encoder_free(e);
        return st;
    }
    *out = e;
    return PARITY_OK;
}

parity_status_t parity_gpt2_load_with(const parity_gpt2_encoder_t *e, const char *vocab_bpe,
                                      parity_gpt2_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!e || !vocab_bpe || !out)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_gpt2_load: NULL argument");
    parity_gpt2_t *t = calloc(1, sizeof *t);
    size_t n = e->t.n_vocab, bytes = e->t.off[n];
    if (t) {
        t->n_vocab = n;
        memcpy(t->byte_id, e->t.byte_id, sizeof t->byte_id);
        t->off = malloc((n + 1) * sizeof *t->off);
        t->blob = malloc(bytes + 1);
    }
    if (!t || !t->off || !t->blob) {
        parity_gpt2_free(t);
        return parity_diag_set(diag, PARITY_E_NOMEM, "parity_gpt2_load: out of memory");
    }
    memcpy(t->off, e->t.off, (n + 1) * sizeof *t->off);
    memcpy(t->blob, e->t.blob, bytes);
    parity_status_t st = gpt2_load_merges(t, vocab_bpe, &e->map, diag);
    if (st == PARITY_OK) {
        int err = 0;
        PCRE2_SIZE erroff = 0;
        t->re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &erroff,
                              NULL);
        if (!t->re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(err, msg, sizeof msg);
            st = parity_diag_set(diag, PARITY_E_UNSUPPORTED,
                                 "GPT-2 pre-tokenizer pattern: PCRE2 cannot compile it at offset "
                                 "%zu: %s (expected a PCRE2 with Unicode support)",
                                 (size_t)erroff, (const char *)msg);
        } else {
            /* JIT makes pre-tokenizing several times faster; without it (unsupported platform)
             * pcre2_match silently uses the interpreter, which is still correct. */
            (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
        }
    }
    if (st != PARITY_OK) {
        parity_gpt2_free(t);
        return st;
    }
    *out = t;
    return PARITY_OK;
}

parity_status_t parity_gpt2_load(const char *encoder_json, const char *vocab_bpe,
                                 parity_gpt2_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!encoder_json || !vocab_bpe || !out)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_gpt2_load: NULL argument");
    parity_gpt2_encoder_t *e = NULL;
    parity_status_t st = parity_gpt2_encoder_load(encoder_json, &e, diag);
    if (st == PARITY_OK) st = parity_gpt2_load_with(e, vocab_bpe, out, diag);
    parity_gpt2_encoder_free(e);
    return st;
}

parity_status_t parity_gpt2_load_default(parity_gpt2_t **out, parity_diag_t *diag)
{
    char enc[4096], bpe[4096];
    parity_status_t st = parity_data_path("gpt2_encoder.json", enc, sizeof enc, diag);
    if (st == PARITY_OK) st = parity_data_path("gpt2_vocab.bpe", bpe, sizeof bpe, diag);
    if (st == PARITY_OK) st = parity_gpt2_load(enc, bpe, out, diag);
    return st;
}

void parity_gpt2_free(parity_gpt2_t *t)
{
    if (!t) return;
    pcre2_code_free(t->re);
    free(t->blob);
    free(t->off);
    free(t->mkey);
    free(t->mrank);
    free(t->mmerged);
    free(t);
}

size_t parity_gpt2_vocab_size(const parity_gpt2_t *t)
{
    return t ? t->n_vocab : 0;
}

const char *parity_gpt2_token_str(const parity_gpt2_t *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || (size_t)id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->off[id + 1] - t->off[id];
    return t->blob + t->off[id];
}

parity_status_t parity_gpt2_decode(const parity_gpt2_t *t, const int32_t *ids, size_t n,
                                   char **text, size_t *len)
{
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || (!ids && n) || !text || !len) return PARITY_E_INVALID;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_vocab) return PARITY_E_INVALID;
        total += t->off[ids[i] + 1] - t->off[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return PARITY_E_NOMEM;
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = t->off[ids[i] + 1] - t->off[ids[i]];
        memcpy(s + p, t->blob + t->off[ids[i]], k);
        p += k;
    }
    s[p] = '\0';
    *text = s;
    *len = p;
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* encoding                                                                                    */

/* Cache of distinct pre-tokens seen in this call -> their ids. Real text repeats a small set of
 * words (tinyshakespeare: 297833 pre-tokens, 15057 distinct), so BPE runs once per distinct word.
 * It is per call, not in the tokenizer, so a tokenizer stays immutable and shareable. */
typedef struct {
    uint64_t hash;
    uint32_t woff, wlen; /* wlen == 0: empty slot (pre-tokens are never empty) */
    uint32_t ioff, ilen;
} cache_slot_t;

typedef struct {
    const parity_gpt2_t *t;
    cache_slot_t *slot;
    size_t mask, count;
    char *words;
    size_t wn, wcap;
    tok_ids_t cached; /* ids of cached words, back to back */
    tok_ids_t *out;
    tok_syms_t syms;
    tok_heap_t heap;
} enc_ctx_t;

static int cache_grow(enc_ctx_t *c)
{
    size_t cap = (c->mask + 1) * 2;
    cache_slot_t *ns = calloc(cap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i <= c->mask; i++) {
        if (!c->slot[i].wlen) continue;
        size_t h = (size_t)c->slot[i].hash & (cap - 1);
        while (ns[h].wlen) h = (h + 1) & (cap - 1);
        ns[h] = c->slot[i];
    }
    free(c->slot);
    c->slot = ns;
    c->mask = cap - 1;
    return 0;
}

static inline int try_push(enc_ctx_t *c, int32_t i)
{
    int32_t j = c->syms.next[i];
    if (j < 0) return 0;
    int32_t rank, merged;
    if (!merge_find(c->t, c->syms.id[i], c->syms.id[j], &rank, &merged)) return 0;
    tok_cand_t cand = {(double)rank, (uint32_t)i, c->syms.id[i], c->syms.id[j], merged};
    return tok_heap_push(&c->heap, cand);
}

/* Byte-level BPE of one pre-token, appending its ids to c->out. GPT-2's reference loop merges
 * every occurrence of the lowest-ranked pair left to right, then looks again; popping
 * (rank, position) from a heap merges the same pairs in the same order, because a merge only
 * creates pairs containing the new, longer token, never another copy of the pair just merged. */
static int bpe_word(enc_ctx_t *c, const unsigned char *w, size_t n)
{
    if (n > INT32_MAX / 2 || tok_syms_reserve(&c->syms, n)) return -1;
    int32_t *id = c->syms.id, *prev = c->syms.prev, *next = c->syms.next;
    for (size_t i = 0; i < n; i++) {
        id[i] = c->t->byte_id[w[i]];
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    c->heap.n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (try_push(c, (int32_t)i)) return -1;
    tok_cand_t m;
    while (tok_heap_pop(&c->heap, &m)) {
        int32_t i = (int32_t)m.pos;
        if (id[i] != m.left) continue; /* i merged since (ids only grow) or died (-1) */
        int32_t j = next[i];
        if (j < 0 || id[j] != m.right) continue;
        id[i] = m.merged;
        id[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0 && try_push(c, prev[i])) return -1;
        if (try_push(c, i)) return -1;
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (tok_ids_push(c->out, id[i])) return -1;
    return 0;
}

static int encode_word(enc_ctx_t *c, const unsigned char *w, size_t n)
{
    if (n == 1) return tok_ids_push(c->out, c->t->byte_id[w[0]]);
    uint64_t hash = tok_fnv(w, n, TOK_FNV_SEED);
    size_t h = (size_t)hash & c->mask;
    for (;;) {
        cache_slot_t *s = &c->slot[h];
        if (!s->wlen) break;
        if (s->hash == hash && s->wlen == n && memcmp(c->words + s->woff, w, n) == 0) {
            if (tok_ids_reserve(c->out, s->ilen)) return -1;
            memcpy(c->out->v + c->out->n, c->cached.v + s->ioff, s->ilen * sizeof(int32_t));
            c->out->n += s->ilen;
            return 0;
        }
        h = (h + 1) & c->mask;
    }
    size_t first = c->out->n;
    if (bpe_word(c, w, n)) return -1;
    size_t k = c->out->n - first;
    /* Offsets are 32-bit; past 4 GiB of distinct words, stop caching (still correct). */
    if (c->wn + n > UINT32_MAX || c->cached.n + k > UINT32_MAX) return 0;
    if (c->wn + n > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 1 << 16;
        while (cap < c->wn + n) cap *= 2;
        char *nw = realloc(c->words, cap);
        if (!nw) return -1;
        c->words = nw;
        c->wcap = cap;
    }
    if (tok_ids_reserve(&c->cached, k)) return -1;
    cache_slot_t s = {hash, (uint32_t)c->wn, (uint32_t)n, (uint32_t)c->cached.n, (uint32_t)k};
    memcpy(c->words + c->wn, w, n);
    c->wn += n;
    memcpy(c->cached.v + c->cached.n, c->out->v + first, k * sizeof(int32_t));
    c->cached.n += k;
    c->slot[h] = s; /* h is the empty slot the probe above stopped at */
    if (++c->count * 2 > c->mask + 1 && cache_grow(c)) return -1;
    return 0;
}

parity_status_t parity_gpt2_encode(const parity_gpt2_t *t, const char *text, size_t len,
                                   int32_t **ids, size_t *n_ids)
{
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!t || (!text && len) || !ids || !n_ids) return PARITY_E_INVALID;
    if (len == 0) return PARITY_OK;

    tok_ids_t out = {NULL, 0, 0};
    enc_ctx_t c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.out = &out;
    c.mask = 1023;
    c.slot = calloc(c.mask + 1, sizeof *c.slot);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    /* Real text averages ~3.3 bytes per GPT-2 token; reserving len/3 avoids most regrowth. */
    parity_status_t st = PARITY_E_NOMEM;
    if (!c.slot || !md || tok_ids_reserve(&out, len / 3 + 16)) goto done;

    const unsigned char *s = (const unsigned char *)text;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t at = 0;
    while (at < len) {
        int rc = pcre2_match(t->re, s, len, at, 0, md, NULL);
        size_t ms = len, me = len;
        if (rc >= 0) {
            ms = ov[0];
            me = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            /* Only resource limits can fail here (the pattern cannot recurse deeply); report it
             * as unsupported input rather than guess a tokenization. */
            st = PARITY_E_UNSUPPORTED;
            goto done;
        }
        /* Bytes the pattern skipped are invalid UTF-8 (every valid character matches one of its
         * alternatives); keep them as one pre-token so decode(encode(x)) == x for any bytes. */
        if (ms > at && encode_word(&c, s + at, ms - at)) goto done;
        if (me > ms && encode_word(&c, s + ms, me - ms)) goto done;
        at = me > at ? me : len; /* the pattern never matches empty; guard anyway */
    }
    st = PARITY_OK;
    *ids = out.v;
    *n_ids = out.n;
    out.v = NULL;
done:
    free(out.v);
    pcre2_match_data_free(md);
    free(c.slot);
    free(c.words);
    free(c.cached.v);
    free(c.heap.v);
    tok_syms_free(&c.syms);
    return st;
}

parity_status_t parity_text_tokens_gpt2(const char *text_path, int32_t **ids, size_t *n,
                                        parity_diag_t *diag)
{
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!text_path || !ids || !n)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_text_tokens_gpt2: NULL argument");
    parity_gpt2_t *t = NULL;
    parity_status_t st = parity_gpt2_load_default(&t, diag);
    if (st != PARITY_OK) return st;
    char *text = NULL;
    size_t len = 0;
    st = tok_read_file(text_path, &text, &len, diag);
    if (st == PARITY_OK) {
        st = parity_gpt2_encode(t, text, len, ids, n);
        if (st != PARITY_OK)
            parity_diag_set(diag, st, "%s: GPT-2 encoding failed: %s", text_path,
                            parity_status_str(st));
    }
    free(text);
    parity_gpt2_free(t);
    return st;
}

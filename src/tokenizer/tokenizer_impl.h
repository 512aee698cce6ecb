/* Internal helpers shared by the two tokenizers (tokenizer_gpt2.c, tokenizer_llama.c): reading a
 * whole file, a streaming byte hash, a growable id array and the merge heap that turns BPE's
 * "repeatedly merge the best pair" from O(n^2) per word into O(n log n). Not a public API. */
#ifndef PARITY_TOKENIZER_IMPL_H
#define PARITY_TOKENIZER_IMPL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/status.h"

/* Reads the whole file into a malloc'ed buffer with one extra NUL byte (so text parsers may rely
 * on termination). PARITY_E_IO with diag naming the path and the OS reason. */
static inline parity_status_t tok_read_file(const char *path, char **buf, size_t *len,
                                            parity_diag_t *diag)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) {
        fclose(f);
        return parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                fclose(f);
                return parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(b);
        return parity_diag_set(diag, PARITY_E_IO, "%s: read error", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PARITY_OK;
}

/* FNV-1a, 64-bit. Streaming: hash(a || b) == tok_fnv(b, tok_fnv(a, TOK_FNV_SEED)), which lets the
 * llama tokenizer look up the concatenation of two pieces without building it. */
#define TOK_FNV_SEED 0xcbf29ce484222325ULL
static inline uint64_t tok_fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Mixes a 64-bit key (a pair of ids) into a well-spread hash (splitmix64's finalizer). */
static inline uint64_t tok_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* A growable int32 array. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_ids_t;

static inline int tok_ids_reserve(tok_ids_t *a, size_t extra)
{
    if (a->n + extra <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 256;
    while (cap < a->n + extra) cap *= 2;
    int32_t *nv = realloc(a->v, cap * sizeof *nv);
    if (!nv) return -1;
    a->v = nv;
    a->cap = cap;
    return 0;
}

static inline int tok_ids_push(tok_ids_t *a, int32_t x)
{
    if (tok_ids_reserve(a, 1)) return -1;
    a->v[a->n++] = x;
    return 0;
}

/* One candidate merge: the pair (left, right) starting at symbol position pos, whose merge gives
 * merged. key orders candidates (GPT-2: the merge rank; llama: minus the score), ties go to the
 * smaller pos, which is exactly "leftmost first" because symbols never change order. Entries are
 * not removed when a neighbour merge makes them stale; the consumer checks that the symbols at pos
 * still hold (left, right) when it pops one (lazy deletion). */
typedef struct {
    double key;
    uint32_t pos;
    int32_t left, right, merged;
} tok_cand_t;

typedef struct {
    tok_cand_t *v;
    size_t n, cap;
} tok_heap_t;

static inline int tok_cand_less(const tok_cand_t *a, const tok_cand_t *b)
{
    if (a->key != b->key) return a->key < b->key;
    return a->pos < b->pos;
}

static inline int tok_heap_push(tok_heap_t *h, tok_cand_t c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tok_cand_t *nv = realloc(h->v, cap * sizeof *nv);
        if (!nv) return -1;
        h->v = nv;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!tok_cand_less(&c, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
    return 0;
}

/* Removes the smallest candidate into *out; returns 0 when the heap is empty. */
static inline int tok_heap_pop(tok_heap_t *h, tok_cand_t *out)
{
    if (h->n == 0) return 0;
    *out = h->v[0];
    tok_cand_t last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = (l + 1 < n && tok_cand_less(&h->v[l + 1], &h->v[l])) ? l + 1 : l;
        if (!tok_cand_less(&h->v[m], &last)) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (n) h->v[i] = last;
    return 1;
}

/* Symbols of a word being merged: a doubly linked list over positions 0..n-1 (dead symbols are
 * unlinked; id[i] < 0 marks them). */
typedef struct {
    int32_t *id, *prev, *next;
    size_t cap;
} tok_syms_t;

static inline int tok_syms_reserve(tok_syms_t *s, size_t n)
{
    if (n <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    int32_t *a = realloc(s->id, cap * sizeof *a);
    if (!a) return -1;
    s->id = a;
    a = realloc(s->prev, cap * sizeof *a);
    if (!a) return -1;
    s->prev = a;
    a = realloc(s->next, cap * sizeof *a);
    if (!a) return -1;
    s->next = a;
    s->cap = cap;
    return 0;
}

static inline void tok_syms_free(tok_syms_t *s)
{
    free(s->id);
    free(s->prev);
    free(s->next);
    s->id = s->prev = s->next = NULL;
    s->cap = 0;
}

#endif

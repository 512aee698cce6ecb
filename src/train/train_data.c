/* The training probe's corpora: real text (tinyshakespeare through GPT-2 BPE) and Zipf / uniform
 * synthetic ids, each remapped to a dense vocabulary ordered by frequency (id 0 the most
 * frequent), with a 90/10 train/validation split. Deliberately not here: batches (train.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/rng.h"
#include "parity/workload.h"
#include "src/train/train_impl.h"

/* Vocabulary size of the synthetic corpora: the number of GPT-2 ids tinyshakespeare uses, so the
 * three corpora differ only in how the ids are distributed. */
#define SYNTH_VOCAB 11706

void train_corpus_free(corpus_t *c)
{
    free(c->tok);
    free(c->count);
    memset(c, 0, sizeof *c);
}

typedef struct {
    int64_t count;
    int32_t id;
} idcount_t;

static int cmp_by_count(const void *a, const void *b)
{
    const idcount_t *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Remap raw ids in [0, raw_v) to dense ids ordered by frequency over the whole corpus (ties by
 * raw id). */
static parity_status_t corpus_from_raw(corpus_t *c, const int32_t *raw, int64_t n, int raw_v)
{
    int64_t *cnt = calloc((size_t)raw_v, sizeof *cnt);
    idcount_t *order = malloc((size_t)raw_v * sizeof *order);
    int32_t *map = malloc((size_t)raw_v * sizeof *map);
    c->tok = malloc((size_t)n * sizeof *c->tok);
    if (!cnt || !order || !map || !c->tok) {
        free(cnt); free(order); free(map);
        return PARITY_E_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) cnt[raw[i]]++;
    int used = 0;
    for (int i = 0; i < raw_v; i++)
        if (cnt[i]) order[used++] = (idcount_t){cnt[i], i};
    qsort(order, (size_t)used, sizeof *order, cmp_by_count);
    for (int r = 0; r < used; r++) map[order[r].id] = r;
    for (int64_t i = 0; i < n; i++) c->tok[i] = map[raw[i]];
    c->n = n;
    c->n_train = n - n / 10;
    c->V = used;
    c->raw_vocab = used;
    c->count = calloc((size_t)used, sizeof *c->count);
    free(cnt); free(order); free(map);
    if (!c->count) return PARITY_E_NOMEM;
    for (int64_t i = 0; i < c->n_train; i++) c->count[c->tok[i]]++;
    return PARITY_OK;
}

parity_status_t train_corpus_build(corpus_t *c, parity_train_data_t kind,
                                   const parity_train_config_t *cfg, parity_diag_t *diag)
{
    memset(c, 0, sizeof *c);
    if (kind == PARITY_TRAIN_DATA_TEXT) {
        const int32_t *ids;
        size_t n;
        parity_status_t s = parity_workload_text_ids(&ids, &n, diag);
        if (s) return s;
        s = corpus_from_raw(c, ids, (int64_t)n, 50257);
        return s ? parity_diag_set(diag, s, "train: text corpus: out of memory") : PARITY_OK;
    }
    int64_t n = cfg->synth_tokens;
    int32_t *raw = malloc((size_t)n * sizeof *raw);
    double *cdf = malloc(SYNTH_VOCAB * sizeof *cdf);
    if (!raw || !cdf) {
        free(raw); free(cdf);
        return parity_diag_set(diag, PARITY_E_NOMEM, "train: synthetic corpus: out of memory");
    }
    double acc = 0.0;
    for (int r = 0; r < SYNTH_VOCAB; r++) {
        acc += kind == PARITY_TRAIN_DATA_ZIPF ? pow((double)(r + 1), -cfg->zipf_s) : 1.0;
        cdf[r] = acc;
    }
    /* The corpus depends on the seed but not on the data order: ranks are ids directly. */
    parity_rng_t rng;
    parity_rng_seed(&rng, cfg->seed, 0xc0de0000u + (uint64_t)kind);
    for (int64_t i = 0; i < n; i++) {
        double u = parity_rng_uniform(&rng) * acc;
        int lo = 0, hi = SYNTH_VOCAB - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        raw[i] = lo;
    }
    free(cdf);
    parity_status_t s = corpus_from_raw(c, raw, n, SYNTH_VOCAB);
    free(raw);
    return s ? parity_diag_set(diag, s, "train: synthetic corpus: out of memory") : PARITY_OK;
}

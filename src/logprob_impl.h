/* Internal to the logprob module: the reader object shared by the format-specific readers
 * (logprob_npy.c for npy/safetensors, logprob_jsonl.c for the JSON shapes) and the sequence
 * buffer helpers. Not a public header. */
#ifndef PARITY_LOGPROB_IMPL_H
#define PARITY_LOGPROB_IMPL_H

#include <pthread.h>

#include "parity/logprob.h"
#include "parity/safetensors.h"

#define LP_MAX_MODS 255
#define LP_MAX_DIM ((uint64_t)1 << 40) /* no dimension of a dump is larger than this */

/* A dense array of a npy/safetensors dump: element (s, p[, j]) is at
 * base + (s * rs + p * cs + j * ks) * es. */
typedef struct {
    const unsigned char *base;
    int dt; /* parity_st_dtype_t */
    size_t es;
    uint64_t rs, cs, ks;
    uint64_t file_off; /* offset of base in the file, for messages */
    int present;
} lp_dense_t;

struct parity_lp_reader {
    parity_lp_format_t fmt;
    char *name;
    const unsigned char *base;
    size_t len;
    int mapped;
    parity_lp_read_opts_t opts;
    char *slice_field;
    const char *dtype;
    int ordinal_ids;     /* request ids are positions in the file (pair by order) */
    /* modality names, index 1..nmods */
    char *mods[LP_MAX_MODS + 1];
    size_t nmods;
    pthread_mutex_t mu;
    uint64_t ordinal;    /* sequences returned so far */
    /* JSONL */
    size_t pos;          /* next byte */
    uint64_t line;       /* lines consumed */
    size_t released;     /* bytes released from memory */
    /* npy / safetensors */
    parity_st_file_t *st;
    lp_dense_t lp, tok, mask, mod, phase, top_id, top_lp;
    uint64_t nrows, ncols, topk;
    uint64_t rel_row;    /* rows whose pages have been given back */
    /* sidecar npy mappings (path-based npy only) */
    const unsigned char *side_base[2];
    size_t side_len[2];
};

/* Why v cannot be a logprob of a present token under the relaxations `allow`
 * (PARITY_LP_ALLOW_*, logprob.h): 0 when it can (-inf included), else LP_BAD_*. The common case
 * (v <= slack) is one comparison. */
enum { LP_BAD_NAN = 1, LP_BAD_INF = 2, LP_BAD_POSITIVE = 3 };
static inline int lp_bad_value(double v, unsigned allow)
{
    if (v <= PARITY_LP_POSITIVE_SLACK) return 0;
    if (v != v) return allow & PARITY_LP_ALLOW_NONFINITE ? 0 : LP_BAD_NAN;
    if (v > 1.79769313486231570815e308) return allow & PARITY_LP_ALLOW_NONFINITE ? 0 : LP_BAD_INF;
    return allow & PARITY_LP_ALLOW_POSITIVE ? 0 : LP_BAD_POSITIVE;
}
/* "is NaN (...)": what is wrong with v (lp_bad_value's `why`) and how to relax it, for a message;
 * `relaxable_nonfinite` is 0 for JSONL (JSON has no NaN or inf to relax). Returns buf. */
const char *lp_bad_describe(char *buf, size_t cap, double v, int why, int relaxable_nonfinite);

void lp_seq_reset(parity_lp_seq_t *s);
/* Ensure room for n tokens with top-k width k; sets s->k. */
parity_status_t lp_seq_reserve(parity_lp_seq_t *s, size_t n, size_t k);
/* Append token text; returns its offset or UINT32_MAX on failure. */
uint32_t lp_seq_add_text(parity_lp_seq_t *s, const char *t, size_t len);
parity_status_t lp_seq_set_str(char **dst, const char *src);
/* Intern a modality name (thread-safe); 0 when the table is full or name is NULL. */
uint16_t lp_intern_mod(parity_lp_reader_t *r, const char *name);
/* 62-bit key of a token text, 31-bit id of a top-k text. */
int64_t lp_text_key(const char *t, size_t len);
int32_t lp_text_id(const char *t, size_t len);

parity_status_t lp_npy_open(parity_lp_reader_t *r, parity_diag_t *d);
parity_status_t lp_st_open(parity_lp_reader_t *r, parity_diag_t *d);
parity_status_t lp_dense_next(parity_lp_reader_t *r, parity_lp_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d);
parity_status_t lp_jsonl_open(parity_lp_reader_t *r, parity_diag_t *d);
parity_status_t lp_jsonl_next(parity_lp_reader_t *r, parity_lp_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d);
/* A batch of each of two JSONL readers, their lines parsed in one parallel section; as
 * lp_jsonl_next on ra then on rb (B is not read when A's batch fails; A's error first). */
parity_status_t lp_jsonl_next2(parity_lp_reader_t *ra, parity_lp_seq_t *sa, size_t maxa, size_t *gota,
                               parity_lp_reader_t *rb, parity_lp_seq_t *sb, size_t maxb, size_t *gotb,
                               parity_diag_t *d);
/* The JSONL reader's own tree builder against cJSON's parser on one line (for tests and the
 * fuzzer): -1 when the builder leaves the line to cJSON, 0 when both trees are the same, 1 when
 * they differ (a bug). */
int lp_jsonl_tree_check(const char *line, size_t len);

#endif

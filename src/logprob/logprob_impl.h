/* Internal to the logprob module: the reader object every reader fills, the shared record
 * helpers (logprob_record.c) and the readers' entry points the dispatcher (logprob_read.c) and
 * the comparison call. Not a public header.
 *
 * The module's units, bottom up. "->" names the units whose functions a unit calls; the graph
 * has no cycle (checked with nm on the object files: an undefined symbol of one object that
 * another defines is an edge). The private headers follow it: logprob_json_scan.h is included
 * by the scanner, the tree and the fast paths only, logprob_dense_impl.h by logprob_dense.c and
 * logprob_direct.c only:
 *
 *   logprob_record.c        shared record helpers (this header)             -> none
 *   logprob_json_scan.c     strict JSON scanner (logprob_json_scan.h)       -> none
 *   logprob_jsonl_tree.c    cJSON trees from a per-thread arena             -> json_scan
 *   logprob_jsonl_schema.c  records from cJSON trees, one per shape         -> record
 *   logprob_jsonl_fast.c    fast paths, a line's bytes to a record          -> json_scan, record
 *   logprob_jsonl.c         the JSONL reader: lines, batches, value checks  -> jsonl_fast,
 *                           (its units share logprob_jsonl_impl.h)             jsonl_schema,
 *                                                                              jsonl_tree, record
 *   logprob_npy.c           opening npy and safetensors dumps               -> record
 *   logprob_dense.c         reading their rows                              -> record
 *   logprob_read.c          the dispatcher: open, next batch, close         -> npy, dense, jsonl
 *   logprob_result.c        floor metrics, verdicts, result accessors       -> none
 *   logprob_slices.c        slice registry, accumulators, final merge       -> read, metrics
 *   logprob_pair.c          one pair compared                               -> slices, read,
 *                                                                              record, metrics
 *   logprob_direct.c        two plain dense dumps compared row by row       -> dense, pair, slices
 *   logprob_compare.c       the comparison's driver                         -> direct, pair,
 *                           (the comparison's units share logprob_cmp_impl.h)  slices, result,
 *                                                                              jsonl, read, record,
 *                                                                              metrics
 *   logprob_report.c        text, JSON and HTML reports                     -> result, read
 *   logprob_rl.c            one RL step's view of two dumps                 -> read, record
 *
 * logprob_direct.c is the only caller of the dense reader's row-level functions, declared in
 * logprob_dense_impl.h apart from this header; everything else reads a dense dump in batches
 * through the dispatcher (lp_dense_next). The comparison also reads the reader object's fields
 * below (names, format, shape, ordinal), and calls lp_jsonl_next2 to parse a batch of each of
 * two JSONL dumps in one parallel section. */
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
    int dt; /* parity_safetensors_dtype_t */
    size_t es;
    uint64_t rs, cs, ks;
    uint64_t file_off; /* offset of base in the file, for messages */
    int present;
} lp_dense_t;

struct parity_logprob_reader {
    parity_logprob_format_t fmt;
    char *name;
    const unsigned char *base;
    size_t len;
    int mapped;
    parity_logprob_read_opts_t opts;
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
    parity_safetensors_file_t *st;
    lp_dense_t lp, tok, mask, mod, phase, top_id, top_lp;
    uint64_t nrows, ncols, topk;
    uint64_t rel_row;    /* rows whose pages have been given back */
    /* sidecar npy mappings (path-based npy only) */
    const unsigned char *side_base[2];
    size_t side_len[2];
};

/* --- the shared record helpers (logprob_record.c) ---------------------------------------- */

/* Why v cannot be a logprob of a present token under the relaxations `allow`
 * (PARITY_LOGPROB_ALLOW_*, logprob.h): 0 when it can (-inf included), else LP_BAD_*. The common case
 * (v <= slack) is one comparison. */
enum { LP_BAD_NAN = 1, LP_BAD_INF = 2, LP_BAD_POSITIVE = 3 };
static inline int lp_bad_value(double v, unsigned allow)
{
    if (v <= PARITY_LOGPROB_POSITIVE_SLACK) return 0;
    if (v != v) return allow & PARITY_LOGPROB_ALLOW_NONFINITE ? 0 : LP_BAD_NAN;
    if (v > 1.79769313486231570815e308) return allow & PARITY_LOGPROB_ALLOW_NONFINITE ? 0 : LP_BAD_INF;
    return allow & PARITY_LOGPROB_ALLOW_POSITIVE ? 0 : LP_BAD_POSITIVE;
}
/* "is NaN (...)": what is wrong with v (lp_bad_value's `why`) and how to relax it, for a message;
 * `relaxable_nonfinite` is 0 for JSONL (JSON has no NaN or inf to relax). Returns buf. */
const char *lp_bad_describe(char *buf, size_t cap, double v, int why, int relaxable_nonfinite);

void lp_seq_reset(parity_logprob_seq_t *s);
/* Ensure room for n tokens with top-k width k; sets s->k. */
parity_status_t lp_seq_reserve(parity_logprob_seq_t *s, size_t n, size_t k);
/* Append token text; returns its offset or UINT32_MAX on failure. */
uint32_t lp_seq_add_text(parity_logprob_seq_t *s, const char *t, size_t len);
parity_status_t lp_seq_set_str(char **dst, const char *src);
/* Intern a modality name (thread-safe); 0 when the table is full or name is NULL. */
uint16_t lp_intern_mod(parity_logprob_reader_t *r, const char *name);
/* 62-bit key of a token text, 31-bit id of a top-k text. */
int64_t lp_text_key(const char *t, size_t len);
int32_t lp_text_id(const char *t, size_t len);

/* --- the readers' entry points ----------------------------------------------------------- */

/* Open r (mapped by the dispatcher) as npy or safetensors (logprob_npy.c): its dense views. */
parity_status_t lp_npy_open(parity_logprob_reader_t *r, parity_diag_t *d);
parity_status_t lp_st_open(parity_logprob_reader_t *r, parity_diag_t *d);
/* The next batch of rows of a dense dump (logprob_dense.c), as parity_logprob_next_batch. */
parity_status_t lp_dense_next(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d);
/* Open r as JSONL, the shape told from the first record unless forced; the next batch of
 * lines (logprob_jsonl.c). */
parity_status_t lp_jsonl_open(parity_logprob_reader_t *r, parity_diag_t *d);
parity_status_t lp_jsonl_next(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d);
/* A batch of each of two JSONL readers, their lines parsed in one parallel section; as
 * lp_jsonl_next on ra then on rb (B is not read when A's batch fails; A's error first). */
parity_status_t lp_jsonl_next2(parity_logprob_reader_t *ra, parity_logprob_seq_t *sa, size_t maxa, size_t *gota,
                               parity_logprob_reader_t *rb, parity_logprob_seq_t *sb, size_t maxb, size_t *gotb,
                               parity_diag_t *d);
/* The JSONL reader's own tree builder (logprob_jsonl_tree.c) against cJSON's parser on one
 * line (for tests and the fuzzer): -1 when the builder leaves the line to cJSON, 0 when both trees are the same, 1 when
 * they differ (a bug). */
int lp_jsonl_tree_check(const char *line, size_t len);

#endif

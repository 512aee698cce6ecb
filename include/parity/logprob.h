/* logprob: readers for logprob dumps (npy, safetensors, JSONL in parity's own schema and in the
 * shapes OpenAI chat/completions, vLLM and SGLang emit), alignment of two dumps by
 * (request id, position, token id), and a sliced parity report measured against a noise floor.
 * Formats: docs/logprobs.md. Metric definitions and sources: docs/logprob-metrics.md.
 * Deliberately not here: the metric formulas themselves (metrics.h) and text/JSON/HTML writing
 * of anything but logprob reports. */
#ifndef PARITY_LOGPROB_H
#define PARITY_LOGPROB_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/logprob.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "parity/metrics.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Input formats. Values are only ever appended. */
typedef enum {
    PARITY_LOGPROB_AUTO = 0,
    PARITY_LOGPROB_NPY = 1,
    PARITY_LOGPROB_SAFETENSORS = 2,
    PARITY_LOGPROB_JSONL = 3,          /* parity's own JSONL schema */
    PARITY_LOGPROB_OPENAI_CHAT = 4,    /* choices[].logprobs.content[] */
    PARITY_LOGPROB_OPENAI_COMPLETIONS = 5, /* choices[].logprobs.{tokens, token_logprobs,
                                              top_logprobs} */
    PARITY_LOGPROB_VLLM = 6,           /* vLLM offline RequestOutput as JSON */
    PARITY_LOGPROB_SGLANG = 7          /* SGLang /generate:
                                          meta_info.{input,output}_token_logprobs */
} parity_logprob_format_t;

/* "auto", "npy", "safetensors", "jsonl", "openai-chat", "openai-completions", "vllm", "sglang". */
const char *parity_logprob_format_name(parity_logprob_format_t f);
parity_status_t parity_logprob_format_from_name(const char *name, parity_logprob_format_t *out);

/* Token flags. */
#define PARITY_LOGPROB_PRESENT 1u   /* the logprob is given (not null, not masked out) */
#define PARITY_LOGPROB_PREFILL 2u   /* a prompt (prefill) token */
#define PARITY_LOGPROB_DECODE 4u    /* a generated (decode) token */
#define PARITY_LOGPROB_KEY_TEXT 8u  /* key is a hash of the token text (no id in the dump) */
#define PARITY_LOGPROB_KEY_NONE 16u /* no id and no text: alignment by position only */

/* One sequence (request) of a dump: struct of arrays over its n tokens. Filled by
 * parity_logprob_next; owned by the caller (parity_logprob_seq_free), buffers reused across calls.
 */
typedef struct {
    char *id;          /* request id (the row index for npy/safetensors) */
    char *field;       /* value of the --slice-by field, or NULL */
    uint64_t ordinal;  /* 0-based index of the sequence in its file */
    uint64_t line;     /* 1-based line of a JSONL record, 0 otherwise */
    size_t n;
    int64_t *key;      /* (n) token id; with PARITY_LOGPROB_KEY_TEXT a 62-bit hash of the text */
    double *lp;        /* (n) logprob (meaningful with PARITY_LOGPROB_PRESENT) */
    uint8_t *flags;    /* (n) PARITY_LOGPROB_* */
    uint16_t *mod;     /* (n) modality: index into the reader's table, 0 = untagged */
    uint32_t *text;    /* (n) offset of the token text in tbuf, UINT32_MAX when absent */
    char *tbuf;
    size_t tlen;
    size_t k;          /* top-k width of this sequence (0: none) */
    int32_t *top_id;   /* (n * k) ids (or 31-bit text hashes), -1 padding */
    double *top_lp;    /* (n * k) */
    /* 1 when every token has the same flags (flags[i] == flags[0]), no modality tag and no
     * text: then mod[] and text[] are not written (the dense readers skip them); read them
     * through parity_logprob_seq_mod / parity_logprob_seq_text, which know this */
    int plain;
    /* capacities (internal) */
    size_t cap, tcap, topcap;
} parity_logprob_seq_t;

void parity_logprob_seq_init(parity_logprob_seq_t *s);
void parity_logprob_seq_free(parity_logprob_seq_t *s); /* frees the buffers; NULL is a no-op */
/* The text of token i or NULL. */
const char *parity_logprob_seq_text(const parity_logprob_seq_t *s, size_t i);
/* Modality of token i: an index into the reader's table (parity_logprob_reader_modality), 0 when
 * untagged. */
uint16_t parity_logprob_seq_mod(const parity_logprob_seq_t *s, size_t i);

typedef struct {
    parity_logprob_format_t format; /* PARITY_LOGPROB_AUTO: detect from extension and content */
    const char *slice_field;   /* a string field of each JSONL record copied to seq->field */
    size_t max_line;           /* longest JSONL line accepted (bytes); 0: 256 MiB */
    int n_threads;             /* parse threads (0: all cores) */
    unsigned allow; /* PARITY_LOGPROB_ALLOW_* relaxations of the value checks (0: none) */
} parity_logprob_read_opts_t;

/* What a logprob can be. A value (or top-k value) of a present token that is NaN, +inf, or
 * above PARITY_LOGPROB_POSITIVE_SLACK is an input error (PARITY_E_FORMAT naming the file, the
 * line or offset, and the field), unless opts.allow names the relaxation:
 *   PARITY_LOGPROB_ALLOW_POSITIVE   values above the slack are read as given (a dump computed
 *                                   in bf16/fp16 arithmetic, whose max token can come out at
 *                                   +ulp/2)
 *   PARITY_LOGPROB_ALLOW_NONFINITE  NaN and +inf are read as given (npy/safetensors; the
 *                                   metrics count them as invalid). JSON has no NaN: JSONL
 *                                   stays strict.
 * -inf (probability 0) is always a logprob. The slack: log_softmax evaluated in fp32 as
 * x - logsumexp(x) gives at most 0 for the max token when logsumexp is rounded once and
 * faithfully; an engine that rounds the logit and the logsumexp separately, or uses an
 * approximate log (CUDA's __logf: absolute error 2^-21.41), can give up to about two ulps of
 * the logsumexp, 2^-14 for |logsumexp| < 512 (docs/logprobs.md, "What a logprob can be"). */
#define PARITY_LOGPROB_ALLOW_POSITIVE 1u
#define PARITY_LOGPROB_ALLOW_NONFINITE 2u
#define PARITY_LOGPROB_POSITIVE_SLACK 0x1p-14
/* "positive" -> PARITY_LOGPROB_ALLOW_POSITIVE, "nonfinite" -> PARITY_LOGPROB_ALLOW_NONFINITE, or a
 * comma list of them, OR-ed into *allow; PARITY_E_NOTFOUND for an unknown name. */
parity_status_t parity_logprob_allow_from_names(const char *names, unsigned *allow);

typedef struct parity_logprob_reader parity_logprob_reader_t;

/* Open a dump. The file is mapped and read in order; pages already consumed are released so
 * the resident set stays bounded by the batch size, not the file size. Errors: PARITY_E_IO,
 * PARITY_E_FORMAT (diag names the file and the offset or line), PARITY_E_UNSUPPORTED (format
 * not detected), PARITY_E_NOMEM. Free with parity_logprob_close. */
parity_status_t parity_logprob_open(const char *path, const parity_logprob_read_opts_t *opts,
                                    parity_logprob_reader_t **out, parity_diag_t *diag);
/* Note for programs that link libcjson themselves: the first JSONL open installs cJSON
 * allocation hooks (cJSON_InitHooks; malloc/free outside parity's own line parses, a per-thread
 * arena inside them). Do not replace them while readers are in use. */
/* The same over a caller's buffer (kept, not copied; must outlive the reader). `name` is used
 * in messages and, with PARITY_LOGPROB_AUTO, for detection by extension (".npy", ".safetensors").
 */
parity_status_t parity_logprob_open_mem(const void *buf, size_t len, const char *name,
                                        const parity_logprob_read_opts_t *opts,
                                        parity_logprob_reader_t **out, parity_diag_t *diag);
void parity_logprob_close(parity_logprob_reader_t *r); /* NULL is a no-op */

/* Read up to max sequences into seqs[0..*got). *got == 0 means the end of the file. Sequences
 * are returned in file order. On error *got sequences before the bad record are valid. */
parity_status_t parity_logprob_next_batch(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs,
                                          size_t max, size_t *got, parity_diag_t *diag);
parity_logprob_format_t parity_logprob_reader_format(const parity_logprob_reader_t *r);
/* The modality name of index i (1..), NULL for 0 or an unknown index. */
const char *parity_logprob_reader_modality(const parity_logprob_reader_t *r, uint16_t i);
/* The element type the logprobs were stored in: "fp64", "fp32", "bf16", "fp16", or "text" for
 * JSON (decimal text, typically printed from fp32). */
const char *parity_logprob_reader_dtype(const parity_logprob_reader_t *r);
const char *parity_logprob_reader_name(const parity_logprob_reader_t *r);

/* ------------------------------------------------------------------------------------------ */
/* Comparison.                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    int by_modality;        /* slice by modality tag (default 1) */
    int by_position;        /* slice by position bucket [0,16), [16,32), [32,64)... (default 1) */
    int by_phase;           /* prefill vs decode (default 1) */
    int by_field;           /* slice by the reader's slice_field (set when one is given) */
    double k3_alarm;        /* default 1e-3 (dense); 1e-1 for MoE (docs/logprob-metrics.md) */
    double dlogprob_alarm;  /* per-token max |dlogprob|, default 5e-2 */
    double floor_factor;    /* "above floor" when a metric exceeds factor x floor (default 3) */
    const char *dtype;      /* declared dtype for the analytic floor; NULL: the readers' */
    int n_threads;          /* 0: all cores */
    size_t worst_tokens;    /* how many worst tokens to keep (default 10) */
    size_t batch_tokens;    /* tokens per batch (bounds memory), default 1 << 16 */
} parity_logprob_cmp_opts_t;

parity_logprob_cmp_opts_t parity_logprob_cmp_default_opts(void);

/* The numbers of one slice (or of everything: "overall"). */
typedef struct {
    char name[96];                /* "overall", "modality=image", "pos=512-1023", ... */
    parity_dist_summary_t m;      /* the metrics module's summary over the slice's tokens */
    double hist[2][40];           /* signed log-histogram of dlogprob (see docs) */
    double hist_zero;
} parity_logprob_slice_t;

typedef struct {
    char id[128];
    uint64_t position;
    int64_t key_a, key_b;  /* token ids; -1 where the dump has no id (text is the token's) */
    double lp_a, lp_b;
    char text[64];    /* the token's text (A's when present), escaped for display */
    char context[200];/* neighbouring token texts, the token in [brackets] */
    char slice_mod[48];
} parity_logprob_token_t;

typedef struct {
    char id[128];
    uint64_t position;         /* first position where the token keys differ (or lengths) */
    int64_t key_a, key_b;      /* INT64_MIN when the sequence ended on that side; -1 where
                                * the dump has no id (text_a / text_b hold the token) */
    char text_a[48], text_b[48];
    uint64_t n_a, n_b;         /* sequence lengths */
} parity_logprob_divergence_t;

typedef struct parity_logprob_result parity_logprob_result_t;

/* Compare dump B against dump A (delta = B - A, ratio = p_A / p_B). Sequences are paired by
 * request id (in order when both files list them in the same order; otherwise unmatched
 * sequences are held until their partner arrives, which is the one case where memory grows).
 * Within a pair, tokens are paired by position; the first position where token ids differ
 * ends the comparison of that pair and is reported. Errors from the readers are passed on.
 * PARITY_E_FORMAT (nothing to compare) when a dump has no sequences, when no sequence of A
 * pairs with one of B, or when the paired sequences hold no token at all. */
parity_status_t parity_logprob_compare(parity_logprob_reader_t *a, parity_logprob_reader_t *b,
                                       const parity_logprob_cmp_opts_t *opts,
                                       parity_logprob_result_t **out, parity_diag_t *diag);
void parity_logprob_result_free(parity_logprob_result_t *r);

/* Attach a floor: `floor` is the comparison of A with a second dump A2 of the same engine and
 * configuration (A2 - A). Without one, an analytic floor from the declared dtype is used.
 * The same as parity_logprob_result_add_floor(r, floor, PARITY_LOGPROB_SIDE_A, NULL, 0) after
 * dropping any measured floor attached before. */
parity_status_t parity_logprob_result_set_floor(parity_logprob_result_t *r,
                                                parity_logprob_result_t *floor);

/* A measured floor is two runs of the SAME side: A against A2 (a second run of A's engine and
 * configuration) or B against B2. A "floor" between one side and a run of the other measures
 * the drift itself and would hide it. docs/logprob-metrics.md, "Noise floor". */
typedef enum {
    PARITY_LOGPROB_SIDE_A = 0,
    PARITY_LOGPROB_SIDE_B = 1
} parity_logprob_side_t;

/* Attach a measured floor: `floor` compares `side` (A or B, the first file of that comparison)
 * with a second run of the same side. Once per side; with both, each metric's floor is the
 * larger of the two. `other` (optional, may be NULL): the floor file compared with the other
 * side, for the report's distances; `detected`: 1 when the side was found by
 * parity_logprob_floor_side rather than named. Replaces the analytic floor. PARITY_E_INVALID for
 * NULLs, a bad side, or a side given twice. */
parity_status_t parity_logprob_result_add_floor(parity_logprob_result_t *r,
                                                const parity_logprob_result_t *floor,
                                                parity_logprob_side_t side,
                                                const parity_logprob_result_t *other, int detected);

/* Which side a dump F repeats, from F compared with A (a_f: A vs F) and with B (b_f: B vs F): the
 * side whose overall mean |dlogprob| to F is at least PARITY_LOGPROB_FLOOR_SIDE_RATIO times smaller
 * than the other side's (0 against a positive distance counts). -1 when neither is (F about as
 * close to both: then the drift between A and B is itself within that factor of F's noise, and
 * only the user can say which side F repeats). */
#define PARITY_LOGPROB_FLOOR_SIDE_RATIO 10.0
int parity_logprob_floor_side(const parity_logprob_result_t *a_f,
                              const parity_logprob_result_t *b_f);

/* 1 when a measured floor is as large as the drift it bounds: in some slice, k3 or max
 * |dlogprob| is above its alarm but within floor_factor times its floor (the floor is what
 * stands between the drift and an alarm, so the comparison cannot tell drift from the floor
 * runs' own noise). The text report prints a warning and the JSON report sets
 * floor.as_large_as_drift. 0 without a measured floor. */
int parity_logprob_result_floor_as_large_as_drift(const parity_logprob_result_t *r);

/* Accessors. */
size_t parity_logprob_result_nslices(const parity_logprob_result_t *r); /* overall is slice 0 */
const parity_logprob_slice_t *parity_logprob_result_slice(const parity_logprob_result_t *r,
                                                          size_t i);
size_t parity_logprob_result_nworst(const parity_logprob_result_t *r);
const parity_logprob_token_t *parity_logprob_result_worst(const parity_logprob_result_t *r,
                                                          size_t i);
size_t parity_logprob_result_ndiv(const parity_logprob_result_t *r); /* stored (capped) */
const parity_logprob_divergence_t *parity_logprob_result_div(const parity_logprob_result_t *r,
                                                             size_t i);

typedef struct {
    uint64_t n_seq_a, n_seq_b, n_pairs;  /* sequences read, pairs matched */
    uint64_t n_only_a, n_only_b;         /* request ids on one side only */
    uint64_t n_diverged;                 /* pairs with a token-id (or length) divergence */
    uint64_t n_tokens_compared;          /* token pairs with both logprobs present */
    uint64_t n_tokens_absent;            /* skipped: a logprob absent (null, masked) on a side */
    uint64_t n_tokens_after_divergence;  /* not compared: past a divergence */
    uint64_t n_unkeyed;                  /* compared by position only (ids not comparable) */
    uint64_t bytes_a, bytes_b;
} parity_logprob_counts_t;
const parity_logprob_counts_t *parity_logprob_result_counts(const parity_logprob_result_t *r);

/* Verdict of a slice (strings: "ok", "above-floor", "alarm", "empty"). A measured floor excuses
 * k3 (k3 within floor_factor x its floor) only while the floor's own k3 is within the k3 alarm:
 * two runs of one side that disagree by more than the alarm are not noise. */
typedef enum {
    PARITY_LOGPROB_OK = 0,
    PARITY_LOGPROB_ABOVE_FLOOR = 1,
    PARITY_LOGPROB_ALARM = 2,
    PARITY_LOGPROB_EMPTY = 3
} parity_logprob_verdict_t;
parity_logprob_verdict_t parity_logprob_result_verdict(const parity_logprob_result_t *r,
                                                       size_t slice);
const char *parity_logprob_verdict_name(parity_logprob_verdict_t v);
/* Exit code the CLI should use: 1 when any slice is in alarm or any pair diverged, else 0. */
int parity_logprob_result_exit_code(const parity_logprob_result_t *r);

/* Reports. text: the summary (worst slices, worst tokens in context, divergences). json: the
 * stable schema of docs/logprobs.md written atomically (temp file + rename). html: a
 * self-contained page with inline SVG plots. Inputs' names appear in the reports. */
parity_status_t parity_logprob_report_text(const parity_logprob_result_t *r, FILE *out);
parity_status_t parity_logprob_report_json(const parity_logprob_result_t *r, const char *path,
                                           parity_diag_t *diag);
parity_status_t parity_logprob_report_html(const parity_logprob_result_t *r, const char *path,
                                           parity_diag_t *diag);

#ifdef __cplusplus
}
#endif

/* The names before issue #40 (parity/deprecated.h), for one release. */
#define PARITY_LOGPROB_H_DECLARED
#include "parity/deprecated.h"
#endif

/* Internal to the logprob module: the comparison state shared by the comparison's units
 * (logprob_compare.c the driver, logprob_pair.c one pair, logprob_slices.c the slices'
 * accumulators, logprob_direct.c the direct dense path, logprob_result.c floor and verdicts)
 * and the result object read by the reports (logprob_report.c). Not a public header. */
#ifndef PARITY_LOGPROB_CMP_IMPL_H
#define PARITY_LOGPROB_CMP_IMPL_H

#include <stdint.h>
#include <stdlib.h>

#include "src/logprob/logprob_impl.h"
#include "src/metrics/metrics_internal.h"

#define MAX_SLICES 512
#define MAX_WORST 100
#define MAX_DIV 1000
#define NPOS 21   /* position buckets: [0,16), [16,32), ..., [2^23, inf) */
#define HBINS 40  /* |delta| histogram: 4 bins per decade over [1e-9, 1e1) */

/* The position bucket of position p (inline: once per gathered token). */
static inline int pos_bucket(uint64_t p)
{
    /* [0,16) is bucket 0, then powers of two: [16,32) 1, [32,64) 2, ...: floor(log2 p) - 3 */
    if (p < 16) return 0;
    int b = 63 - __builtin_clzll(p) - 3;
    return b < NPOS - 1 ? b : NPOS - 1;
}

/* Metrics compared with the floor (index into floor arrays). Only appended. */
enum {
    LP_F_MAX_ABS = 0, LP_F_MEAN_ABS, LP_F_P50, LP_F_P99, LP_F_P999, LP_F_K1, LP_F_K2, LP_F_K3,
    LP_F_CHI2, LP_F_DPROB_MAX, LP_F_DPROB_MEAN, LP_F_DLOGPPL, LP_F_TKL, LP_NF
};

typedef struct {
    double v[LP_NF]; /* floor value per metric; NaN when none */
} lp_floor_t;

/* One measured floor: a second run of one side compared with that side (logprob_result.c). */
typedef struct {
    char path[512];      /* the floor file */
    int side;            /* PARITY_LOGPROB_SIDE_A or _B: the side it repeats */
    int detected;        /* 1: found by parity_logprob_floor_side (plain --floor), 0: named */
    int identical;       /* every compared logprob equal to its side's: a zero floor */
    double mean_same;    /* overall mean |dlogprob| to the side it repeats */
    double mean_other;   /* to the other side; NaN when not measured */
} lp_floor_run_t;

struct parity_logprob_result {
    parity_logprob_cmp_opts_t opts;
    char name_a[512], name_b[512], name_floor[512];
    lp_floor_run_t floor_run[2]; /* the measured floors (one per side at most), in order given */
    int nfloor_run;
    parity_logprob_format_t fmt_a, fmt_b;
    char dtype[16];
    const char *o_dtype;
    parity_logprob_slice_t *slices;
    lp_floor_t *fl;
    size_t nslices;
    int floor_kind; /* 1 analytic, 2 measured */
    parity_logprob_token_t worst[MAX_WORST + 1];
    double worstd[MAX_WORST + 1];
    size_t nworst;
    parity_logprob_divergence_t div[MAX_DIV];
    size_t ndiv;
    parity_logprob_counts_t counts;
};

/* A slice's accumulator in stream order (the order-dependent state: compensated sums,
 * Welford and co-moment merges), one per slice for the whole run, fed serially from the
 * pairs' entry logs; plus, at the end, the merged order-free parts. */
typedef struct {
    parity_dist_t *d;
    double hist[2][HBINS];
    double hist_zero;
    parity_csum_t fl_s, fl_s2; /* analytic floor: sum m, sum m^2 */
    double fl_max;
    uint64_t fl_n;
} slot_t;

/* A thread's order-free part of a slice: quantile sketches (thread 0 fills the slice
 * accumulator's own), histogram counts, the floor maximum. */
typedef struct {
    struct parity_qsketch *q_dlp, *q_dp;
    parity_dist_t *own; /* threads > 0: holds the sketches */
    uint64_t hc[4 * (2 * HBINS + 1)]; /* histogram counts, metrics_shist_t's layout */
    uint64_t *sb;                     /* its signed sketch bins (2 QS_NBINS) */
    double fl_max;
} tslot_t;

typedef struct {
    tslot_t **slots; /* MAX_SLICES, lazily allocated */
    parity_logprob_token_t *worst;
    double *worstd;
    uint64_t *worstp; /* ordinal of the pair of each worst token (stream order for ties) */
    size_t nworst;
    int nomem;
    /* gathered tokens of the current pair */
    size_t cap, topcap, K;
    double *a, *b;
    const double *ga, *gb;        /* the gathered logprobs: a, b, or the sequences' own arrays
                                   * when every position is present (dense pairs) */
    int dense;                    /* all present, no phase, modality or top-k: positions are the
                                   * indices, nothing per token is gathered */
    metrics_soa_t rec;            /* per-token metric quantities, computed once per pair */
    int *pos, *md;
    uint64_t *p;
    uint8_t *hastop, *ph;
    int32_t *ida, *idb;
    double *sa, *sb;
    parity_logprob_seq_t da, db;       /* the rows being compared (run_direct) */
} thr_t;

/* What a pair contributes to the order-dependent state of one slice, computed in parallel and
 * applied in stream order (pair by pair, entry by entry), so the result does not depend on the
 * number of threads and equals a serial run bit for bit. */
enum { E_BLK, E_TOK, E_SEQ, E_TOPK, E_FL };
typedef struct {
    int16_t slice;
    uint8_t type;
    union {
        metrics_blk_t blk;          /* E_BLK */
        parity_dist_tok_t tok;      /* E_TOK */
        struct {
            size_t n;
            uint64_t nf;
            double slr;
        } seq;                      /* E_SEQ */
        struct {
            size_t i0, i1;          /* into the pair's ov/t1/tkl */
        } topk;                     /* E_TOPK */
        struct {
            parity_csum_t s0, s1, q0, q1; /* partials of sum m and sum m^2 */
            size_t n;
        } fl;                       /* E_FL */
    } u;
} entry_t;

typedef struct {
    parity_logprob_seq_t *a, *b;
    int field_slice;
    int div;
    size_t divpos;
    uint64_t compared, absent, unkeyed;
    uint64_t ord;       /* ordinal of the pair in the stream */
    entry_t *e;         /* the pair's entries, in the order a serial run applies them */
    size_t ne, ecap;
    double *ov, *tkl;   /* per gathered token with top-k: overlap, truncated KL */
    uint8_t *t1;        /* top-1 agreement */
    size_t tcap;
    uint64_t n_a, n_b;  /* the sequences' lengths */
    parity_logprob_divergence_t dv; /* when div: what the report says of it */
} pair_t;

typedef struct node {
    parity_logprob_seq_t *s;
    char *key; /* the request id, or "#ordinal" when pairing by order */
    struct node *next;
} node_t;

typedef struct {
    node_t **b;
    size_t nb, n;
} map_t;

typedef struct {
    parity_logprob_cmp_opts_t o;
    parity_logprob_reader_t *ra, *rb;
    parity_logprob_result_t *res;
    parity_dist_opts_t dopts;
    int ordinal;
    const char *field_name;
    int nthreads;
    double unit;
    char names[MAX_SLICES][96];
    int nnames;
    int sl_prefill, sl_decode, sl_pos[NPOS];
    int overall_from_pos; /* overall's token statistics = merge of the position slices */
    int modmap[2][256];
    thr_t th[64];
    slot_t *gs[MAX_SLICES]; /* the slices' stream-order accumulators (lazily allocated) */
    uint64_t npair_seen;
    parity_logprob_seq_t **pool; /* compared sequences whose buffers the next batches reuse */
    size_t npool, poolcap;
    map_t pend[2];
    parity_logprob_seq_t *buf[2];
    size_t bufn[2];
    int eof[2];
} cmp_t;

/* A new entry of slice si in the pair's log (NULL when out of memory); inline: once per block
 * or slow token of every run. */
static inline entry_t *new_entry(pair_t *pr, int si, int type)
{
    if (pr->ne == pr->ecap) {
        size_t c = pr->ecap ? pr->ecap * 2 : 64;
        entry_t *e = realloc(pr->e, c * sizeof *e);
        if (!e) return NULL;
        pr->e = e;
        pr->ecap = c;
    }
    entry_t *e = &pr->e[pr->ne++];
    e->slice = (int16_t)si;
    e->type = (uint8_t)type;
    return e;
}

/* What the runs of a pair add up over the pair: the compensated sum of log r over its finite
 * pairs and their count (its sequence statistics), and the largest |delta| of a finite pair
 * (whether the worst-token scan must look at its tokens). */
typedef struct {
    parity_csum_t slr;
    uint64_t nf;
    double mx;
} runsum_t;

/* --- the slices (logprob_slices.c) -------------------------------------------------------- */

/* Register the fixed slices (overall, phases, position buckets) as the options ask. */
void lp_cmp_init_names(cmp_t *c);
/* Map every modality name of both readers to a slice (names agree across the two files). */
void lp_cmp_map_mods(cmp_t *c);
/* The slice of --slice-by value v (the "(other)" slice once the registry is full), or -1. */
int lp_cmp_field_slice(cmp_t *c, const char *v);
/* The histogram's map from sketch bins (once per process). */
void lp_cmp_hist_init(void);
/* Tokens [i0, i1) of thread t's gathered arrays into slice si (at the definition). */
void lp_cmp_add_run(cmp_t *c, int t, pair_t *pr, int si, size_t i0, size_t i1, int as_seq, runsum_t *rs_out);
/* A pair's entries into the slices' stream-order accumulators (serial, in pair order); *nomem
 * set when out of memory. */
void lp_cmp_apply_pair(cmp_t *c, const pair_t *pr, int *nomem);
/* The result's slices, floors and worst tokens from the accumulators (after the last pair). */
void lp_cmp_finish(cmp_t *c);

/* --- one pair (logprob_pair.c) ------------------------------------------------------------ */

/* Compare pair pr in thread t: divergence check, gather present tokens, accumulate per slice. */
void lp_cmp_pair(cmp_t *c, int t, pair_t *pr);
/* A pair in a reused slot: its entry and top-k buffers are kept. */
void lp_cmp_set_pair(pair_t *p, parity_logprob_seq_t *a, parity_logprob_seq_t *b);
/* A compared pair into the counts and the divergence list (serial, in pair order). */
void lp_cmp_account_pair(cmp_t *c, const pair_t *p);
void lp_cmp_free_pairs(pair_t *pairs, size_t n);

/* --- the direct dense path (logprob_direct.c) --------------------------------------------- */

/* Whether the two readers are plain dense dumps of the same shape, compared row by row. */
int lp_cmp_direct_ok(const cmp_t *c);
/* Every row pair of such dumps compared and applied, as the batched path would. */
parity_status_t lp_cmp_run_direct(cmp_t *c, parity_diag_t *d);

/* --- the result (logprob_result.c) -------------------------------------------------------- */

/* The unit roundoff of a dtype name (fp32 for JSON text and unknown names). */
double lp_unit_roundoff(const char *dtype);
double lp_metric(const parity_dist_summary_t *m, int k);
const char *lp_metric_name(int k);
/* Whether slice i's metric k (LP_F_K3 or LP_F_MAX_ABS) is above its alarm but within
 * floor_factor x its measured floor: the floor is as large as the drift it bounds. 0 without a
 * measured floor. */
int lp_floor_covers(const parity_logprob_result_t *r, size_t i, int k);
/* The alarm threshold of metric k (LP_F_K3 or LP_F_MAX_ABS). */
double lp_alarm_of(const parity_logprob_result_t *r, int k);

#endif

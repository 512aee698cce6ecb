/* All-reduce order simulators: which partial is added to which, in what order and in what format,
 * for each algorithm of NCCL and Open MPI's tuned collectives (docs/reduce.md derives each order
 * from the library's source). Elementwise: the result of element i depends only on its R partials
 * and on its position i of n (which chunk/block it falls in). Not here: inputs (reduce_inputs.c),
 * drift metrics (reduce_drift.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/reduce.h"

static const char *const ALGO_NAMES[] = {"ring", "tree", "rd", "oneshot", "linear", "mpi_ring",
                                         "rabenseifner"};
static const char *const DTYPE_NAMES[] = {"fp64", "fp32", "bf16", "fp16"};

const char *parity_reduce_algo_name(parity_reduce_algo_t a)
{
    return (unsigned)a < 7 ? ALGO_NAMES[a] : "?";
}

const char *parity_reduce_dtype_name(parity_reduce_dtype_t d)
{
    return (unsigned)d < 4 ? DTYPE_NAMES[d] : "?";
}

/* Rounding contexts: the formats are looked up once per call into a caller-stack struct, so there
 * is no shared mutable state. */
typedef struct {
    parity_format_t f[4];
} rctx_t;

static void rctx_init(rctx_t *c)
{
    parity_format_get("fp32", &c->f[PARITY_REDUCE_FP32], NULL);
    parity_format_get("bf16", &c->f[PARITY_REDUCE_BF16], NULL);
    parity_format_get("fp16", &c->f[PARITY_REDUCE_FP16], NULL);
}

static double rnd(const rctx_t *c, parity_reduce_dtype_t d, double x)
{
    switch (d) {
    case PARITY_REDUCE_FP64: return x;
    case PARITY_REDUCE_FP32: return (double)(float)x; /* nearest-even, IEEE overflow to inf */
    default: break;
    }
    float xf = (float)x;
    if ((double)xf == x) { /* exact in fp32: the fast single-rounding conversions apply */
        if (d == PARITY_REDUCE_BF16) return (double)parity_round_bf16(xf);
        uint16_t h;
        parity_fp32_to_fp16(&xf, &h, 1);
        parity_fp16_to_fp32(&h, &xf, 1);
        return (double)xf;
    }
    return c ? parity_format_round(&c->f[d], x, NULL, NULL) : NAN;
}

double parity_reduce_round(parity_reduce_dtype_t d, double x)
{
    if (d == PARITY_REDUCE_FP64 || d == PARITY_REDUCE_FP32 || (double)(float)x == x) return rnd(NULL, d, x);
    rctx_t c;
    rctx_init(&c);
    return rnd(&c, d, x);
}

/* One hop: a + b computed in the accumulator format, the value sent on rounded to the hop format.
 * a and b are in a format of at most 24 bits of precision (or fp64 with acc fp64), so rounding
 * the double sum to acc is the correctly rounded sum (double has >= 2p + 2 bits: no harmful
 * double rounding for p <= 25). */
static double hop_add(const rctx_t *c, const parity_reduce_spec_t *s, double a, double b)
{
    return rnd(c, s->hop, rnd(c, s->acc, a + b));
}

static double tree_sum(const rctx_t *c, const parity_reduce_spec_t *s, const double *p, int lo, int hi)
{
    if (hi - lo == 1) return p[lo];
    int mid = lo + (hi - lo + 1) / 2;
    double a = tree_sum(c, s, p, lo, mid), b = tree_sum(c, s, p, mid, hi);
    return hop_add(c, s, a, b);
}

static int floor_pow2(int r)
{
    int p = 1;
    while (p * 2 <= r) p *= 2;
    return p;
}

/* Open MPI recursive doubling / Rabenseifner per element: the first 2*extra ranks pre-add in pairs
 * (2i, 2i+1) into virtual rank i, the rest become virtual ranks extra.., then virtual ranks v and
 * v ^ d exchange and both compute the same sum (IEEE addition commutes) for d = 1, 2, 4, ... */
static double rd_sum(const rctx_t *c, const parity_reduce_spec_t *s, const double *p, int R)
{
    int pof2 = floor_pow2(R), extra = R - pof2;
    double v[PARITY_REDUCE_MAX_RANKS];
    for (int i = 0; i < pof2; i++)
        v[i] = i < extra ? hop_add(c, s, p[2 * i], p[2 * i + 1]) : p[i + extra];
    for (int d = 1; d < pof2; d *= 2)
        for (int i = 0; i < pof2; i++)
            if (!(i & d)) v[i] = v[i + d] = hop_add(c, s, v[i], v[i + d]);
    return v[0];
}

static double linear_sum(const rctx_t *c, const parity_reduce_spec_t *s, const double *p, int R)
{
    double acc = p[R - 1];
    for (int k = R - 2; k >= 0; k--) acc = hop_add(c, s, acc, p[k]);
    return acc;
}

/* Chunk b of a ring starting at rank `first`: first, first+1, ..., first+R-1 (mod R). */
static double ring_from(const rctx_t *c, const parity_reduce_spec_t *s, const double *p, int R,
                        int first)
{
    double acc = p[first % R];
    for (int j = 1; j < R; j++) acc = hop_add(c, s, acc, p[(first + j) % R]);
    return acc;
}

static double allreduce1(const rctx_t *c, const parity_reduce_spec_t *s, const double *p, size_t i,
                         size_t n)
{
    int R = s->ranks;
    if (R == 1) return p[0];
    switch (s->algo) {
    case PARITY_REDUCE_RING: {
        /* NCCL: chunk c of a channel starts at rank c+1 (step 0 of ring all-reduce sends chunk
         * ringIx + nranks - 1) and is finished by its owner c. */
        size_t C = (size_t)(s->channels > 0 ? s->channels : 1);
        size_t ch = i * C / n;
        while (ch + 1 < C && n * (ch + 1) / C <= i) ch++;
        while (ch > 0 && n * ch / C > i) ch--;
        size_t c0 = n * ch / C, c1 = n * (ch + 1) / C;
        size_t len = c1 - c0, o = i - c0;
        int chunk = (int)(o * (size_t)R / len);
        return ring_from(c, s, p, R, chunk + 1);
    }
    case PARITY_REDUCE_TREE: return tree_sum(c, s, p, 0, R);
    case PARITY_REDUCE_RD: return rd_sum(c, s, p, R);
    case PARITY_REDUCE_ONESHOT: {
        double acc = p[0];
        for (int k = 1; k < R; k++) acc = rnd(c, s->acc, acc + p[k]);
        return rnd(c, s->hop, acc);
    }
    case PARITY_REDUCE_LINEAR: return linear_sum(c, s, p, R);
    case PARITY_REDUCE_MPI_RING: {
        if (n < (size_t)R) return rd_sum(c, s, p, R);
        /* COLL_BASE_COMPUTE_BLOCKCOUNT: split = n % R blocks of n/R + 1, then blocks of n/R. */
        size_t late = n / (size_t)R, split = n % (size_t)R, early = late + (split ? 1 : 0);
        size_t b = i < split * early ? i / early : split + (i - split * early) / late;
        return ring_from(c, s, p, R, (int)b);
    }
    case PARITY_REDUCE_RABENSEIFNER:
        if (n < (size_t)floor_pow2(R)) return linear_sum(c, s, p, R);
        return rd_sum(c, s, p, R);
    }
    return NAN;
}

static int spec_ok(const parity_reduce_spec_t *s)
{
    return s && (unsigned)s->algo <= PARITY_REDUCE_RABENSEIFNER && s->ranks >= 1 &&
           s->ranks <= PARITY_REDUCE_MAX_RANKS && (unsigned)s->hop <= PARITY_REDUCE_FP16 &&
           (unsigned)s->acc <= PARITY_REDUCE_FP16 && s->channels >= 1 && s->channels <= 64;
}

double parity_reduce_allreduce1(const parity_reduce_spec_t *s, const double *p, size_t i, size_t n)
{
    if (!spec_ok(s) || !p || i >= n) return NAN;
    rctx_t c;
    rctx_init(&c);
    return allreduce1(&c, s, p, i, n);
}

parity_status_t parity_reduce_allreduce(const parity_reduce_spec_t *s, const double *part, size_t n,
                                        double *out)
{
    if (!spec_ok(s) || (n > 0 && (!part || !out))) return PARITY_E_INVALID;
    rctx_t c;
    rctx_init(&c);
    double p[PARITY_REDUCE_MAX_RANKS];
    for (size_t i = 0; i < n; i++) {
        for (int r = 0; r < s->ranks; r++) p[r] = part[(size_t)r * n + i];
        out[i] = allreduce1(&c, s, p, i, n);
    }
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Specs                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static int parse_dtype(const char *t, parity_reduce_dtype_t *d)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(t, DTYPE_NAMES[i]) == 0) {
            *d = (parity_reduce_dtype_t)i;
            return 0;
        }
    return -1;
}

static int parse_int(const char *t, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(t, &end, 10);
    if (!*t || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_algo(const char *t, parity_reduce_algo_t *a)
{
    static const struct {
        const char *name;
        parity_reduce_algo_t algo;
    } names[] = {{"ring", PARITY_REDUCE_RING},
                 {"tree", PARITY_REDUCE_TREE},
                 {"rd", PARITY_REDUCE_RD},
                 {"recursive_doubling", PARITY_REDUCE_RD},
                 {"oneshot", PARITY_REDUCE_ONESHOT},
                 {"linear", PARITY_REDUCE_LINEAR},
                 {"basic_linear", PARITY_REDUCE_LINEAR},
                 {"mpi_ring", PARITY_REDUCE_MPI_RING},
                 {"segmented_ring", PARITY_REDUCE_MPI_RING},
                 {"rabenseifner", PARITY_REDUCE_RABENSEIFNER}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(t, names[i].name) == 0) {
            *a = names[i].algo;
            return 0;
        }
    return -1;
}

parity_status_t parity_reduce_spec_parse(const char *text, parity_reduce_spec_t *out,
                                         parity_diag_t *diag)
{
    parity_reduce_spec_t s = {PARITY_REDUCE_RING, 1, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 1};
    if (out) *out = s;
    if (!text || !out) return parity_diag_set(diag, PARITY_E_INVALID, "no all-reduce spec");
    char buf[128];
    if (strlen(text) >= sizeof buf)
        return parity_diag_set(diag, PARITY_E_INVALID, "all-reduce spec '%.40s...' is too long",
                               text);
    strcpy(buf, text);
    char *save = NULL, *tok = strtok_r(buf, ":", &save);
    if (!tok) return parity_diag_set(diag, PARITY_E_INVALID, "empty all-reduce spec");
    if (strcmp(tok, "ompi") == 0) {
        /* Open MPI's coll_tuned_allreduce_algorithm numbering (4.1: 0 ignore, 1 basic_linear,
         * 2 nonoverlapping, 3 recursive_doubling, 4 ring, 5 segmented_ring, 6 rabenseifner). */
        static const int map[7] = {-1, PARITY_REDUCE_LINEAR, -1, PARITY_REDUCE_RD, PARITY_REDUCE_MPI_RING,
                                   PARITY_REDUCE_MPI_RING, PARITY_REDUCE_RABENSEIFNER};
        int num;
        tok = strtok_r(NULL, ":", &save);
        if (!tok || parse_int(tok, 0, 6, &num) || map[num] < 0)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "'%s': after ompi: expected an Open MPI allreduce algorithm "
                                   "number 1, 3, 4, 5 or 6 (2 depends on the reduce decision)",
                                   text);
        s.algo = (parity_reduce_algo_t)map[num];
    } else if (parse_algo(tok, &s.algo)) {
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "'%s': unknown algorithm '%s' (expected ring, tree, rd, oneshot, "
                               "linear, mpi_ring, rabenseifner or ompi:N)",
                               text, tok);
    }
    tok = strtok_r(NULL, ":", &save);
    if (!tok || parse_int(tok, 1, PARITY_REDUCE_MAX_RANKS, &s.ranks))
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "'%s': expected the rank count 1..%d after the algorithm", text,
                               PARITY_REDUCE_MAX_RANKS);
    int hop_set = 0, acc_set = 0;
    while ((tok = strtok_r(NULL, ":", &save))) {
        if (!hop_set && !parse_dtype(tok, &s.hop)) {
            hop_set = 1;
        } else if (strncmp(tok, "acc=", 4) == 0 && !parse_dtype(tok + 4, &s.acc)) {
            acc_set = 1;
        } else if (tok[0] == 'c' && tok[1] == 'h' && !parse_int(tok + 2, 1, 64, &s.channels)) {
            if (s.algo != PARITY_REDUCE_RING)
                return parity_diag_set(diag, PARITY_E_INVALID,
                                       "'%s': channels (chC) apply to the NCCL ring only", text);
        } else {
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "'%s': unexpected '%s' (expected a hop dtype fp64|fp32|bf16|"
                                   "fp16, acc=DTYPE or chC)",
                                   text, tok);
        }
    }
    if (!acc_set) s.acc = s.hop == PARITY_REDUCE_FP64 ? PARITY_REDUCE_FP64 : PARITY_REDUCE_FP32;
    *out = s;
    return PARITY_OK;
}

void parity_reduce_spec_str(const parity_reduce_spec_t *s, char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    if (!s) {
        buf[0] = 0;
        return;
    }
    parity_reduce_dtype_t dacc = s->hop == PARITY_REDUCE_FP64 ? PARITY_REDUCE_FP64 : PARITY_REDUCE_FP32;
    char acc[16] = "", ch[16] = "";
    if (s->acc != dacc) snprintf(acc, sizeof acc, ":acc=%s", parity_reduce_dtype_name(s->acc));
    if (s->channels > 1) snprintf(ch, sizeof ch, ":ch%d", s->channels);
    snprintf(buf, cap, "%s:%d:%s%s%s", parity_reduce_algo_name(s->algo), s->ranks,
             parity_reduce_dtype_name(s->hop), acc, ch);
}

/* The algorithm a spec actually runs for n elements, with the differences that cannot change a
 * result removed. */
static parity_reduce_spec_t canonical(const parity_reduce_spec_t *s, size_t n)
{
    parity_reduce_spec_t c = *s;
    int R = c.ranks;
    if (c.algo == PARITY_REDUCE_MPI_RING && n < (size_t)R) c.algo = PARITY_REDUCE_RD;
    if (c.algo == PARITY_REDUCE_RABENSEIFNER)
        c.algo = n < (size_t)floor_pow2(R) ? PARITY_REDUCE_LINEAR : PARITY_REDUCE_RD;
    if (c.algo != PARITY_REDUCE_RING) c.channels = 1;
    /* One or two ranks: a single addition (or none), commutative, whatever the algorithm. */
    if (R <= 2) {
        c.algo = PARITY_REDUCE_ONESHOT;
        c.channels = 1;
    }
    if (R == 1) c.acc = c.hop; /* no addition at all */
    return c;
}

int parity_reduce_same_order(const parity_reduce_spec_t *a, const parity_reduce_spec_t *b, size_t n)
{
    if (!spec_ok(a) || !spec_ok(b)) return 0;
    parity_reduce_spec_t x = canonical(a, n), y = canonical(b, n);
    return x.algo == y.algo && x.ranks == y.ranks && x.hop == y.hop && x.acc == y.acc &&
           x.channels == y.channels;
}

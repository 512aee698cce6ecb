/* MoE routing (softmax, top-k with a tie rule, renormalisation) and combine, emulated bit-exactly
 * per the spec; the workload (router logits, expert outputs), whole runs with their fp64
 * reference, and routing fragility. Every rounding is one call into the format module, from an
 * exact value (2Sum inside parity_format_add), so no double rounding sneaks in except where a
 * kernel does it too (fp32 probability -> bf16). Not here: drift metrics (reduce.h), the CLI. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/moe.h"
#include "parity/rng.h"
#include "parity/workload.h"

/* rng streams of the workload: independent draws from one seed. */
enum { STREAM_LOGITS = 31, STREAM_TIES = 32, STREAM_NOISE = 33, STREAM_Y = 34 };

/* The two formats every function needs, looked up once per call (cheap, no globals). */
typedef struct {
    parity_format_t bf16, fp32;
} fmts_t;

static void fmts_init(fmts_t *f)
{
    parity_format_get("bf16", &f->bf16, NULL);
    parity_format_get("fp32", &f->fp32, NULL);
}

/* Fast paths, same bits as the format module's (checked in tests/test_moe.c against
 * parity_format_round/add): double -> fp32 is the C conversion (round to nearest even, one
 * rounding). double -> bf16 goes through fp32 rounded to odd (truncate, then set the last bit when
 * inexact): fp32 keeps 16 more bits than bf16, so the second rounding is exact (Boldo and
 * Melquiond 2008). Additions: 2Sum; when a + b is not exact in double (exponents more than ~29
 * apart for these operands) fall back to parity_format_add. Finite values within fp32's range
 * only, which is all this module produces. */
static double rf32(const fmts_t *f, double x)
{
    (void)f;
    return (double)(float)x;
}

static double rbf16(const fmts_t *f, double x)
{
    (void)f;
    float r = (float)x;
    if ((double)r != x) {
        if (fabs((double)r) > fabs(x)) r = nextafterf(r, 0.0f);
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        u |= 1u;
        memcpy(&r, &u, sizeof r);
    }
    return (double)parity_round_bf16(r);
}

static int two_sum_exact(double a, double b, double *s)
{
    *s = a + b;
    double bp = *s - a, ap = *s - bp;
    return (a - ap) + (b - bp) == 0.0;
}

static double addbf16(const fmts_t *f, double a, double b)
{
    double s;
    return two_sum_exact(a, b, &s) ? rbf16(f, s) : parity_format_add(&f->bf16, a, b, NULL, NULL);
}

static double addf32(const fmts_t *f, double a, double b)
{
    double s;
    return two_sum_exact(a, b, &s) ? rf32(f, s) : parity_format_add(&f->fp32, a, b, NULL, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Specs.                                                                                     */
/* ------------------------------------------------------------------------------------------ */

parity_moe_spec_t parity_moe_spec_default(void)
{
    parity_moe_spec_t s = {PARITY_MOE_SOFTMAX_FP32, PARITY_MOE_TIE_LOWID, 1, PARITY_MOE_W_BF16,
                           PARITY_MOE_ORDER_EXPERT, PARITY_MOE_COMBINE_BF16BUF,
                           PARITY_MOE_SHARED_AFTER};
    return s;
}

static const char *const k_softmax[] = {"fp32", "bf16", NULL};
static const char *const k_tie[] = {"lowid", "highid", NULL};
static const char *const k_renorm[] = {"0", "1", NULL};
static const char *const k_weights[] = {"fp32", "bf16", NULL};
static const char *const k_order[] = {"expert", "slot", NULL};
static const char *const k_combine[] = {"bf16buf", "bf16prod", "fp32acc", "fp32fma", NULL};
static const char *const k_shared[] = {"none", "before", "after", NULL};

typedef struct {
    const char *key;
    const char *const *vals;
    size_t off;
} key_t_;

static const key_t_ k_keys[] = {
    {"softmax", k_softmax, offsetof(parity_moe_spec_t, softmax)},
    {"topk", k_tie, offsetof(parity_moe_spec_t, tie)},
    {"renorm", k_renorm, offsetof(parity_moe_spec_t, renorm)},
    {"weights", k_weights, offsetof(parity_moe_spec_t, weights)},
    {"order", k_order, offsetof(parity_moe_spec_t, order)},
    {"combine", k_combine, offsetof(parity_moe_spec_t, combine)},
    {"shared", k_shared, offsetof(parity_moe_spec_t, shared)},
};
#define NKEYS (sizeof k_keys / sizeof k_keys[0])

/* Every field is an enum or int of the same size; set/get through int. */
static void field_set(parity_moe_spec_t *s, size_t off, int v)
{
    switch (off) {
    case offsetof(parity_moe_spec_t, softmax): s->softmax = (parity_moe_softmax_t)v; break;
    case offsetof(parity_moe_spec_t, tie): s->tie = (parity_moe_tie_t)v; break;
    case offsetof(parity_moe_spec_t, renorm): s->renorm = v; break;
    case offsetof(parity_moe_spec_t, weights): s->weights = (parity_moe_wfmt_t)v; break;
    case offsetof(parity_moe_spec_t, order): s->order = (parity_moe_order_t)v; break;
    case offsetof(parity_moe_spec_t, combine): s->combine = (parity_moe_combine_t)v; break;
    default: s->shared = (parity_moe_shared_t)v; break;
    }
}

static int field_get(const parity_moe_spec_t *s, size_t off)
{
    switch (off) {
    case offsetof(parity_moe_spec_t, softmax): return (int)s->softmax;
    case offsetof(parity_moe_spec_t, tie): return (int)s->tie;
    case offsetof(parity_moe_spec_t, renorm): return s->renorm;
    case offsetof(parity_moe_spec_t, weights): return (int)s->weights;
    case offsetof(parity_moe_spec_t, order): return (int)s->order;
    case offsetof(parity_moe_spec_t, combine): return (int)s->combine;
    default: return (int)s->shared;
    }
}

static void join_vals(const char *const *v, char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; v[i]; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", i ? "|" : "", v[i]);
    }
}

parity_status_t parity_moe_spec_parse(const char *text, const parity_moe_spec_t *base,
                                      parity_moe_spec_t *out, parity_diag_t *diag)
{
    if (!out) return parity_diag_set(diag, PARITY_E_INVALID, "moe spec: no output");
    parity_moe_spec_t s = base ? *base : parity_moe_spec_default();
    if (!text) text = "";
    if (!strcmp(text, "default")) text = "";
    unsigned seen = 0;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "'%.*s' is not key=value (keys: softmax, topk, renorm, weights, "
                                   "order, combine, shared)",
                                   (int)len, p);
        size_t klen = (size_t)(eq - p), vlen = len - klen - 1;
        size_t ki = NKEYS;
        for (size_t i = 0; i < NKEYS; i++)
            if (strlen(k_keys[i].key) == klen && !strncmp(p, k_keys[i].key, klen)) ki = i;
        if (ki == NKEYS)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "unknown key '%.*s' (keys: softmax, topk, renorm, weights, order, "
                                   "combine, shared)",
                                   (int)klen, p);
        if (seen & (1u << ki))
            return parity_diag_set(diag, PARITY_E_INVALID, "key '%s' given twice", k_keys[ki].key);
        seen |= 1u << ki;
        const char *v = eq + 1;
        int val = -1;
        for (int i = 0; k_keys[ki].vals[i]; i++)
            if (strlen(k_keys[ki].vals[i]) == vlen && !strncmp(v, k_keys[ki].vals[i], vlen)) val = i;
        if (ki == 2 && val < 0) { /* renorm also takes yes/no */
            if (vlen == 3 && !strncmp(v, "yes", 3)) val = 1;
            if (vlen == 2 && !strncmp(v, "no", 2)) val = 0;
        }
        if (val < 0) {
            char acc[96];
            join_vals(k_keys[ki].vals, acc, sizeof acc);
            return parity_diag_set(diag, PARITY_E_INVALID, "%s=%.*s: expected %s=%s",
                                   k_keys[ki].key, (int)vlen, v, k_keys[ki].key, acc);
        }
        field_set(&s, k_keys[ki].off, val);
        if (!end) break;
        p = end + 1;
        if (!*p) return parity_diag_set(diag, PARITY_E_INVALID, "trailing ',' in '%s'", text);
    }
    *out = s;
    return PARITY_OK;
}

void parity_moe_spec_str(const parity_moe_spec_t *s, char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    buf[0] = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        int v = field_get(s, k_keys[i].off);
        size_t l = strlen(buf);
        if (l >= cap) break;
        snprintf(buf + l, cap - l, "%s%s=%s", i ? "," : "", k_keys[i].key, k_keys[i].vals[v]);
    }
}

int parity_moe_spec_equal(const parity_moe_spec_t *a, const parity_moe_spec_t *b)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (field_get(a, k_keys[i].off) != field_get(b, k_keys[i].off)) return 0;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* One token.                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void softmax_f(const fmts_t *f, parity_moe_softmax_t kind, const double *logits, size_t e,
                      double *p)
{
    int bf = kind == PARITY_MOE_SOFTMAX_BF16;
    double m = -INFINITY;
    for (size_t i = 0; i < e; i++) {
        p[i] = bf ? rbf16(f, logits[i]) : logits[i];
        if (p[i] > m) m = p[i];
    }
    double s = 0;
    for (size_t i = 0; i < e; i++) {
        p[i] = rf32(f, exp(rf32(f, p[i] - m)));
        s = addf32(f, s, p[i]);
    }
    for (size_t i = 0; i < e; i++) {
        p[i] = rf32(f, p[i] / s); /* double quotient -> fp32: innocuous (53 >= 2*24 + 2) */
        if (bf) p[i] = rbf16(f, p[i]);
    }
}

void parity_moe_softmax(parity_moe_softmax_t kind, const double *logits, size_t e, double *p)
{
    fmts_t f;
    fmts_init(&f);
    softmax_f(&f, kind, logits, e, p);
}

/* a ranks before b: larger value, or equal and preferred by the tie rule. */
static int before(double va, int32_t a, double vb, int32_t b, parity_moe_tie_t tie)
{
    if (va != vb) return va > vb;
    return tie == PARITY_MOE_TIE_LOWID ? a < b : a > b;
}

void parity_moe_topk(const double *p, size_t e, size_t k, parity_moe_tie_t tie, int32_t *ids)
{
    /* K passes of a selection: O(E K), fine for E <= 4096, and obviously correct. */
    for (size_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (size_t i = 0; i < e; i++) {
            int taken = 0;
            for (size_t q = 0; q < j; q++) taken |= ids[q] == (int32_t)i;
            if (taken) continue;
            if (best < 0 || before(p[i], (int32_t)i, p[best], best, tie)) best = (int32_t)i;
        }
        ids[j] = best;
    }
}

static void route_f(const fmts_t *f, const parity_moe_spec_t *spec, const double *logits,
                    size_t e, size_t k, int32_t *ids, double *w, double *p /* scratch (E) */)
{
    softmax_f(f, spec->softmax, logits, e, p);
    parity_moe_topk(p, e, k, spec->tie, ids);
    int bf = spec->softmax == PARITY_MOE_SOFTMAX_BF16;
    for (size_t j = 0; j < k; j++) w[j] = p[ids[j]];
    if (spec->renorm) {
        double s = 0;
        for (size_t j = 0; j < k; j++) s = addf32(f, s, w[j]);
        if (bf) s = rbf16(f, s);
        for (size_t j = 0; j < k; j++) {
            w[j] = rf32(f, w[j] / s);
            if (bf) w[j] = rbf16(f, w[j]);
        }
    }
    if (spec->weights == PARITY_MOE_W_BF16)
        for (size_t j = 0; j < k; j++) w[j] = rbf16(f, w[j]);
}

void parity_moe_route(const parity_moe_spec_t *spec, const double *logits, size_t e, size_t k,
                      int32_t *ids, double *w)
{
    fmts_t f;
    fmts_init(&f);
    double *p = malloc(e * sizeof *p);
    if (!p) { /* documented callers pass small E; fall back to a clear failure value */
        for (size_t j = 0; j < k; j++) ids[j] = -1, w[j] = NAN;
        return;
    }
    route_f(&f, spec, logits, e, k, ids, w, p);
    free(p);
}

/* perm[0..K): the order in which slots are added (slot order, or ascending expert id). */
static void add_order(const parity_moe_spec_t *spec, const int32_t *ids, size_t k, size_t *perm)
{
    for (size_t j = 0; j < k; j++) perm[j] = j;
    if (spec->order == PARITY_MOE_ORDER_EXPERT) /* insertion sort: K is small */
        for (size_t j = 1; j < k; j++)
            for (size_t q = j; q > 0 && ids[perm[q - 1]] > ids[perm[q]]; q--) {
                size_t t = perm[q];
                perm[q] = perm[q - 1];
                perm[q - 1] = t;
            }
}

static void combine_f(const fmts_t *f, const parity_moe_spec_t *spec, const int32_t *ids,
                      const double *w, size_t k, const double *y, const double *shared, size_t d,
                      double *out)
{
    size_t perm[4096];
    add_order(spec, ids, k, perm);
    int bfacc = spec->combine == PARITY_MOE_COMBINE_BF16BUF;
    for (size_t c = 0; c < d; c++) {
        double acc = spec->shared == PARITY_MOE_SHARED_BEFORE ? shared[c] : 0.0;
        for (size_t q = 0; q < k; q++) {
            size_t j = perm[q];
            double prod = w[j] * y[j * d + c]; /* exact: <= 24 + 8 significant bits */
            switch (spec->combine) {
            case PARITY_MOE_COMBINE_BF16BUF: acc = addbf16(f, acc, rbf16(f, prod)); break;
            case PARITY_MOE_COMBINE_BF16PROD: acc = addf32(f, acc, rbf16(f, prod)); break;
            case PARITY_MOE_COMBINE_FP32ACC: acc = addf32(f, acc, rf32(f, prod)); break;
            case PARITY_MOE_COMBINE_FP32FMA: acc = addf32(f, acc, prod); break;
            }
        }
        if (!bfacc) acc = rbf16(f, acc);
        if (spec->shared == PARITY_MOE_SHARED_AFTER) acc = addbf16(f, acc, shared[c]);
        out[c] = acc;
    }
}

void parity_moe_combine(const parity_moe_spec_t *spec, const int32_t *ids, const double *w,
                        size_t k, const double *y, const double *shared, size_t d, double *out)
{
    fmts_t f;
    fmts_init(&f);
    combine_f(&f, spec, ids, w, k > 4096 ? 4096 : k, y, shared, d, out);
}

/* ------------------------------------------------------------------------------------------ */
/* Workload.                                                                                  */
/* ------------------------------------------------------------------------------------------ */

parity_moe_config_t parity_moe_config_default(void)
{
    parity_moe_config_t c = {4096, 64, 8, 1024, 1.0, 0.0, 0, 8.0, 1};
    return c;
}

parity_status_t parity_moe_config_check(const parity_moe_config_t *c, parity_diag_t *diag)
{
    if (!c) return parity_diag_set(diag, PARITY_E_INVALID, "moe: no config");
    if (c->e < 1 || c->e > 4096)
        return parity_diag_set(diag, PARITY_E_INVALID, "experts %zu: expected 1..4096", c->e);
    if (c->k < 1 || c->k > c->e)
        return parity_diag_set(diag, PARITY_E_INVALID, "top-k %zu: expected 1..experts (%zu)",
                               c->k, c->e);
    if (c->t < 1 || c->d < 1 || c->t > (1u << 30) / c->d || c->t > (1u << 30) / c->e)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "tokens %zu x hidden %zu: expected both >= 1, T*D and T*E < 2^30",
                               c->t, c->d);
    if (!(c->sigma >= 0) || !isfinite(c->sigma))
        return parity_diag_set(diag, PARITY_E_INVALID, "sigma %g: expected finite >= 0", c->sigma);
    if (!(c->ties >= 0 && c->ties <= 1))
        return parity_diag_set(diag, PARITY_E_INVALID, "ties %g: expected 0..1", c->ties);
    if (c->outliers < 0 || (size_t)c->outliers > c->d || !isfinite(c->outlier_factor))
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "outliers %d (x%g): expected 0..hidden, a finite factor",
                               c->outliers, c->outlier_factor);
    return PARITY_OK;
}

void parity_moe_logits(const parity_moe_config_t *c, double eps, double *logits)
{
    fmts_t f;
    fmts_init(&f);
    size_t T = c->t, E = c->e, K = c->k;
    parity_workload_values(PARITY_VALS_NORMAL, c->sigma, 0, 1.0, c->seed, STREAM_LOGITS, 0,
                           (int64_t)T, (int64_t)E, logits);
    for (size_t i = 0; i < T * E; i++) logits[i] = rf32(&f, logits[i]);
    if (c->ties > 0 && K < E) {
        /* Ties at the top-k boundary: the (K+1)-th largest logit takes the K-th's value. The
         * token is chosen by its own uniform draw, so the set of tied tokens does not depend on
         * T or on the other streams. */
        int32_t *ids = malloc((K + 1) * sizeof *ids);
        if (ids) {
            for (size_t t = 0; t < T; t++) {
                parity_rng_t r;
                parity_rng_seed(&r, c->seed, ((uint64_t)STREAM_TIES << 40) ^ t);
                if (!(parity_rng_uniform(&r) < c->ties)) continue;
                parity_moe_topk(logits + t * E, E, K + 1, PARITY_MOE_TIE_LOWID, ids);
                logits[t * E + (size_t)ids[K]] = logits[t * E + (size_t)ids[K - 1]];
            }
            free(ids);
        }
    }
    if (eps > 0) {
        double *noise = malloc(E * sizeof *noise);
        for (size_t t = 0; noise && t < T; t++) {
            parity_workload_values(PARITY_VALS_NORMAL, 1.0, 0, 1.0, c->seed, STREAM_NOISE,
                                   (int64_t)t, (int64_t)t + 1, (int64_t)E, noise);
            for (size_t i = 0; i < E; i++)
                logits[t * E + i] = rf32(&f, logits[t * E + i] + eps * noise[i]);
        }
        free(noise);
    }
}

void parity_moe_expert_out(const parity_moe_config_t *c, size_t t, int32_t e, double *out)
{
    /* Row (t, e) of a (T, E + 1) grid; column 0 is the shared expert. The outlier channels depend
     * only on (seed, stream): the same hidden channels are large in every expert, as in LLMs. */
    int64_t row = (int64_t)(t * (c->e + 1) + (size_t)(e + 1));
    parity_workload_values(c->outliers ? PARITY_VALS_OUTLIER : PARITY_VALS_NORMAL, 1.0,
                           c->outliers, c->outlier_factor, c->seed, STREAM_Y, row, row + 1,
                           (int64_t)c->d, out);
    for (size_t i = 0; i < c->d; i++) out[i] = (double)parity_round_bf16((float)out[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* Whole runs.                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void exact_route(const parity_moe_spec_t *spec, const double *logits, size_t e, size_t k,
                        int32_t *ids, double *w, double *p)
{
    double m = -INFINITY;
    for (size_t i = 0; i < e; i++)
        if (logits[i] > m) m = logits[i];
    for (size_t i = 0; i < e; i++) p[i] = exp(logits[i] - m);
    double s = parity_sum_exact(p, e);
    for (size_t i = 0; i < e; i++) p[i] /= s;
    parity_moe_topk(p, e, k, spec->tie, ids);
    for (size_t j = 0; j < k; j++) w[j] = p[ids[j]];
    if (spec->renorm) {
        double ws = parity_sum_exact(w, k);
        for (size_t j = 0; j < k; j++) w[j] /= ws;
    }
}

parity_status_t parity_moe_run(const parity_moe_config_t *c, const parity_moe_spec_t *spec,
                               double *out, int32_t *ids, double *exact, int32_t *exact_ids)
{
    if (!spec || parity_moe_config_check(c, NULL)) return PARITY_E_INVALID;
    fmts_t f;
    fmts_init(&f);
    size_t T = c->t, E = c->e, K = c->k, D = c->d;
    double *logits = malloc(T * E * sizeof *logits), *p = malloc(E * sizeof *p);
    double *w = malloc(2 * K * sizeof *w), *y = malloc((2 * K + 1) * D * sizeof *y);
    double *terms = malloc((K + 1) * sizeof *terms);
    int32_t *id2 = malloc(2 * K * sizeof *id2);
    parity_status_t st = PARITY_OK;
    if (!logits || !p || !w || !y || !terms || !id2) {
        st = PARITY_E_NOMEM;
        goto done;
    }
    parity_moe_logits(c, 0.0, logits);
    int has_shared = spec->shared != PARITY_MOE_SHARED_NONE;
    double *ys = y + 2 * K * D; /* (D) the shared expert */
    for (size_t t = 0; t < T; t++) {
        const double *l = logits + t * E;
        int32_t *ia = id2, *ie = id2 + K;
        double *wa = w, *we = w + K;
        route_f(&f, spec, l, E, K, ia, wa, p);
        if (exact || exact_ids) exact_route(spec, l, E, K, ie, we, p);
        if (ids) memcpy(ids + t * K, ia, K * sizeof *ia);
        if (exact_ids) memcpy(exact_ids + t * K, ie, K * sizeof *ie);
        if (has_shared && (out || exact)) parity_moe_expert_out(c, t, -1, ys);
        if (out) {
            for (size_t j = 0; j < K; j++) parity_moe_expert_out(c, t, ia[j], y + j * D);
            combine_f(&f, spec, ia, wa, K, y, ys, D, out + t * D);
        }
        if (exact) {
            /* The reference's experts: reuse rows already drawn for the spec's routing. */
            for (size_t j = 0; j < K; j++) {
                size_t q = K;
                for (size_t r = 0; out && r < K; r++)
                    if (ia[r] == ie[j]) q = r;
                if (q < K) memcpy(y + (K + j) * D, y + q * D, D * sizeof *y);
                else parity_moe_expert_out(c, t, ie[j], y + (K + j) * D);
            }
            for (size_t col = 0; col < D; col++) {
                for (size_t j = 0; j < K; j++) terms[j] = we[j] * y[(K + j) * D + col];
                terms[K] = has_shared ? ys[col] : 0.0;
                exact[t * D + col] = rbf16(&f, parity_sum_exact(terms, K + 1));
            }
        }
    }
done:
    free(logits), free(p), free(w), free(y), free(terms), free(id2);
    return st;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

size_t parity_moe_set_differ(const int32_t *a, const int32_t *b, size_t n, size_t k)
{
    if (k == 0 || k > 4096) return 0;
    int32_t sa[4096], sb[4096];
    size_t nd = 0;
    for (size_t t = 0; t < n; t++) {
        memcpy(sa, a + t * k, k * sizeof *sa);
        memcpy(sb, b + t * k, k * sizeof *sb);
        qsort(sa, k, sizeof *sa, cmp_i32);
        qsort(sb, k, sizeof *sb, cmp_i32);
        nd += memcmp(sa, sb, k * sizeof *sa) != 0;
    }
    return nd;
}

parity_status_t parity_moe_flip_frac(const parity_moe_config_t *c, const parity_moe_spec_t *spec,
                                     double eps, double *frac)
{
    if (!spec || !frac || !(eps >= 0) || !isfinite(eps) || parity_moe_config_check(c, NULL))
        return PARITY_E_INVALID;
    fmts_t f;
    fmts_init(&f);
    size_t T = c->t, E = c->e, K = c->k;
    double *l0 = malloc(T * E * sizeof *l0), *l1 = malloc(T * E * sizeof *l1);
    double *p = malloc(E * sizeof *p), *w = malloc(K * sizeof *w);
    int32_t *i0 = malloc(T * K * sizeof *i0), *i1 = malloc(T * K * sizeof *i1);
    parity_status_t st = PARITY_OK;
    if (!l0 || !l1 || !p || !w || !i0 || !i1) {
        st = PARITY_E_NOMEM;
    } else {
        parity_moe_logits(c, 0.0, l0);
        parity_moe_logits(c, eps, l1);
        for (size_t t = 0; t < T; t++) {
            route_f(&f, spec, l0 + t * E, E, K, i0 + t * K, w, p);
            route_f(&f, spec, l1 + t * E, E, K, i1 + t * K, w, p);
        }
        *frac = (double)parity_moe_set_differ(i0, i1, T, K) / (double)T;
    }
    free(l0), free(l1), free(p), free(w), free(i0), free(i1);
    return st;
}

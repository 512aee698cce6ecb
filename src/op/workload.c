/* Workload generators: pure functions of (spec, seed). See workload.h. */
#include "parity/workload.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/tokenizer.h"
#include "src/core/internal.h"

/* Streams: each independent draw from one seed gets its own rng stream so that changing one
 * generator (say, the ids) does not shift the values of another. */
enum { STREAM_IDS = 1, STREAM_PERM = 2, STREAM_TEXT = 3, STREAM_GAMMA = 4 };

static pthread_once_t text_once = PTHREAD_ONCE_INIT;
static int32_t *text_ids;
static size_t text_n;
static parity_status_t text_status = PARITY_E_IO;
static parity_diag_t text_diag;
static parity_gpt2_t *text_tok;

static void load_text(void)
{
    char txt[4096];
    text_status = parity_data_path("tinyshakespeare.txt", txt, sizeof txt, &text_diag);
    if (text_status != PARITY_OK) return;
    text_status = parity_gpt2_load_default(&text_tok, &text_diag);
    if (text_status != PARITY_OK) return;
    FILE *f = fopen(txt, "rb");
    if (!f) {
        text_status = parity_diag_set(&text_diag, PARITY_E_IO,
                                      "%s: cannot open", txt);
        return;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        fclose(f);
        text_status = parity_diag_set(&text_diag, PARITY_E_IO, "%s: read failed", txt);
        return;
    }
    fclose(f);
    text_status = parity_gpt2_encode(text_tok, buf, (size_t)len, &text_ids, &text_n);
    if (text_status != PARITY_OK)
        parity_diag_set(&text_diag, text_status, "%s: GPT-2 encoding failed", txt);
    free(buf);
}

parity_status_t parity_workload_text_ids(const int32_t **ids, size_t *n, parity_diag_t *diag)
{
    pthread_once(&text_once, load_text);
    if (text_status != PARITY_OK) {
        if (diag) *diag = text_diag;
        return text_status;
    }
    *ids = text_ids;
    *n = text_n;
    return PARITY_OK;
}

const char *parity_workload_token_text(int32_t id, size_t *len)
{
    pthread_once(&text_once, load_text);
    *len = 0;
    if (!text_tok) return "";
    const char *s = parity_gpt2_token_str(text_tok, id, len);
    return s ? s : "";
}

parity_status_t parity_workload_ids(const char *what, parity_ids_t scheme, uint64_t seed, int64_t n,
                                    int64_t v, int32_t *ids, parity_diag_t *diag)
{
    parity_rng_t rng;
    if (n < 0 || v <= 0 || v > INT32_MAX)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: bad sizes n=%lld v=%lld",
                               what, (long long)n, (long long)v);
    switch (scheme.kind) {
    case PARITY_IDS_UNIFORM:
        parity_rng_seed(&rng, seed, STREAM_IDS);
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)parity_rng_below(&rng, (uint64_t)v);
        return PARITY_OK;
    case PARITY_IDS_ZIPF: {
        /* Inverse-CDF sampling over ranks 1..v with weights r^-s, then a seeded permutation maps
         * ranks to ids so that frequent tokens are not simply the smallest ids. */
        double *cdf = malloc((size_t)v * sizeof *cdf);
        int32_t *perm = malloc((size_t)v * sizeof *perm);
        if (!cdf || !perm) {
            free(cdf);
            free(perm);
            return PARITY_E_NOMEM;
        }
        double acc = 0;
        for (int64_t r = 0; r < v; r++) {
            acc += pow((double)(r + 1), -scheme.zipf_s);
            cdf[r] = acc;
        }
        parity_rng_seed(&rng, seed, STREAM_PERM);
        for (int64_t i = 0; i < v; i++) perm[i] = (int32_t)i;
        for (int64_t i = v - 1; i > 0; i--) {
            int64_t j = (int64_t)parity_rng_below(&rng, (uint64_t)i + 1);
            int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        parity_rng_seed(&rng, seed, STREAM_IDS);
        for (int64_t i = 0; i < n; i++) {
            double u = parity_rng_uniform(&rng) * acc;
            int64_t lo = 0, hi = v - 1;
            while (lo < hi) { /* first r with cdf[r] > u */
                int64_t mid = (lo + hi) / 2;
                if (cdf[mid] > u) hi = mid; else lo = mid + 1;
            }
            ids[i] = perm[lo];
        }
        free(cdf);
        free(perm);
        return PARITY_OK;
    }
    case PARITY_IDS_TEXT: {
        const int32_t *t;
        size_t tn;
        parity_status_t st = parity_workload_text_ids(&t, &tn, diag);
        if (st != PARITY_OK) return st;
        if (v < 50257)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "workload %s: real-text ids need V >= 50257 (GPT-2), got %lld",
                                   what, (long long)v);
        parity_rng_seed(&rng, seed, STREAM_TEXT);
        size_t off = (size_t)parity_rng_below(&rng, tn);
        for (int64_t i = 0; i < n; i++) ids[i] = t[(off + (size_t)i) % tn];
        return PARITY_OK;
    }
    }
    return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: unknown id distribution", what);
}

/* ---- typed workloads: a family's parameter struct read through its field table ---- */

const void *parity_workload_params(const parity_workload_t *wl, const char *op, parity_diag_t *diag)
{
    if (wl && wl->params) return wl->params;
    parity_diag_set(diag, PARITY_E_INVALID,
                    "workload '%s' carries no parameters of op %s (params is NULL): take a preset "
                    "(parity ops %s --workloads lists them) or set .params to the op family's struct",
                    wl && wl->name ? wl->name : "?", op ? op : "?", op ? op : "OP");
    return NULL;
}

void *parity_workload_own_params(const parity_workload_family_t *fam, parity_workload_t *w,
                                 parity_wl_params_store_t *store)
{
    if (!fam || !w || !w->params || fam->size > sizeof store->u.bytes) return NULL;
    if (w->params != store->u.bytes) memcpy(store->u.bytes, w->params, fam->size);
    w->params = store->u.bytes;
    return store->u.bytes;
}

const char *parity_vals_kind_name(parity_vals_kind_t k)
{
    switch (k) {
    case PARITY_VALS_NORMAL: return "normal";
    case PARITY_VALS_GRADSCALE: return "gradscale";
    case PARITY_VALS_OUTLIER: return "outlier";
    case PARITY_VALS_UNIFORM01: return "uniform01";
    case PARITY_VALS_INTPROBE: return "int[-4,4]";
    case PARITY_VALS_ONES: return "ones";
    case PARITY_VALS_SPARSE_POW2: return "sparse-pow2";
    }
    return "?";
}

const char *parity_ids_kind_name(parity_ids_kind_t k)
{
    switch (k) {
    case PARITY_IDS_UNIFORM: return "uniform";
    case PARITY_IDS_ZIPF: return "zipf";
    case PARITY_IDS_TEXT: return "text";
    }
    return "?";
}

const char *parity_gamma_kind_name(parity_gamma_kind_t k)
{
    switch (k) {
    case PARITY_GAMMA_ONES: return "ones";
    case PARITY_GAMMA_TRAINED: return "trained";
    case PARITY_GAMMA_NORMAL: return "normal";
    }
    return "?";
}

/* x as the describe text prints it: %a (hex), 2^e for a power of two beyond 2^±10, else the
 * shortest %g that reads back as x. */
static void num_text(double x, int hex, char *out, size_t cap)
{
    int e;
    if (hex) {
        snprintf(out, cap, "%a", x);
        return;
    }
    if (x > 0 && frexp(x, &e) == 0.5 && (e - 1 > 10 || e - 1 < -10)) {
        snprintf(out, cap, "2^%d", e - 1);
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, x);
        if (strtod(out, NULL) == x) return;
    }
}

int parity_workload_describe(const parity_workload_family_t *fam, const parity_workload_t *w, int hex,
                             char *buf, size_t cap)
{
    if (cap) buf[0] = '\0';
    if (!fam || !w || !w->params) return 0;
    char x[64];
    size_t n = 0;
    int total = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__);          \
        if (k_ > 0) { n += (size_t)k_; total += k_; }                                              \
    } while (0)
    for (int i = 0; i < fam->n_fields; i++) {
        const parity_wl_field_t *f = &fam->fields[i];
        const char *p = (const char *)w->params + f->offset;
        PUT("%s%s=", i ? " " : "", f->name);
        switch (f->type) {
        case PARITY_WL_VALS: {
            const parity_vals_t *v = (const parity_vals_t *)(const void *)p;
            num_text(v->scale, hex, x, sizeof x);
            PUT("%s*%s", parity_vals_kind_name(v->kind), x);
            break;
        }
        case PARITY_WL_IDS: {
            const parity_ids_t *v = (const parity_ids_t *)(const void *)p;
            if (v->kind == PARITY_IDS_ZIPF) {
                num_text(v->zipf_s, hex, x, sizeof x);
                PUT("zipf(%s)", x);
            } else PUT("%s", parity_ids_kind_name(v->kind));
            break;
        }
        case PARITY_WL_GAMMA: PUT("%s", parity_gamma_kind_name(*(const parity_gamma_kind_t *)(const void *)p)); break;
        case PARITY_WL_INT: PUT("%d", *(const int *)(const void *)p); break;
        case PARITY_WL_DOUBLE:
            num_text(*(const double *)(const void *)p, hex, x, sizeof x);
            PUT("%s", x);
            break;
        }
    }
#undef PUT
    return total;
}

void parity_workload_map_vals(const parity_workload_family_t *fam, void *params,
                              parity_vals_kind_t (*map)(parity_vals_kind_t kind, void *ctx), void *ctx)
{
    for (int i = 0; fam && params && i < fam->n_fields; i++)
        if (fam->fields[i].type == PARITY_WL_VALS) {
            parity_vals_t *v = (parity_vals_t *)(void *)((char *)params + fam->fields[i].offset);
            v->kind = map(v->kind, ctx);
        }
}

void parity_workload_map_ids(const parity_workload_family_t *fam, void *params,
                             parity_ids_kind_t (*map)(parity_ids_kind_t kind, void *ctx), void *ctx)
{
    for (int i = 0; fam && params && i < fam->n_fields; i++)
        if (fam->fields[i].type == PARITY_WL_IDS) {
            parity_ids_t *v = (parity_ids_t *)(void *)((char *)params + fam->fields[i].offset);
            v->kind = map(v->kind, ctx);
        }
}

int parity_workload_has_ids(const parity_workload_family_t *fam, const void *params,
                            parity_ids_kind_t kind)
{
    for (int i = 0; fam && params && i < fam->n_fields; i++)
        if (fam->fields[i].type == PARITY_WL_IDS &&
            ((const parity_ids_t *)(const void *)((const char *)params + fam->fields[i].offset))->kind ==
                kind)
            return 1;
    return 0;
}

/* 0 with probability 1/2, else ±2^e, e uniform in [-EMAX, EMAX]: one draw of 64 bits. */
static double sparse_pow2(parity_rng_t *rng)
{
    uint64_t r = parity_rng_u64(rng);
    if (r & 1) return 0.0;
    int e = (int)((r >> 8) % (2 * PARITY_POW2_EMAX + 1)) - PARITY_POW2_EMAX;
    return ldexp(r & 2 ? -1.0 : 1.0, e);
}

double parity_workload_draw(parity_vals_kind_t kind, parity_rng_t *rng)
{
    switch (kind) {
    case PARITY_VALS_UNIFORM01: return parity_rng_uniform(rng);
    case PARITY_VALS_SPARSE_POW2: return sparse_pow2(rng);
    case PARITY_VALS_INTPROBE: return (double)((int64_t)parity_rng_below(rng, 9) - 4);
    case PARITY_VALS_ONES: return 1.0;
    default: return parity_rng_normal(rng);
    }
}

void parity_workload_values(parity_vals_kind_t kind, double scale, int outliers,
                            double outlier_factor, uint64_t seed, uint64_t stream,
                            int64_t row_begin, int64_t row_end, int64_t cols, double *out)
{
    for (int64_t i = row_begin; i < row_end; i++) {
        parity_rng_t rng;
        parity_rng_seed(&rng, seed, ((100 + stream) << 40) ^ (uint64_t)i);
        double *o = out + (i - row_begin) * cols;
        switch (kind) {
        case PARITY_VALS_NORMAL:
        case PARITY_VALS_OUTLIER:
            parity_rng_normals(&rng, o, cols, scale);
            break;
        case PARITY_VALS_GRADSCALE: {
            double mag = pow(10.0, -3.0 - 3.0 * parity_rng_uniform(&rng)) * scale;
            parity_rng_normals(&rng, o, cols, mag);
            break;
        }
        case PARITY_VALS_UNIFORM01:
            for (int64_t j = 0; j < cols; j++) o[j] = parity_rng_uniform(&rng) * scale;
            break;
        case PARITY_VALS_INTPROBE:
            for (int64_t j = 0; j < cols; j++) o[j] = (double)((int64_t)parity_rng_below(&rng, 9) - 4);
            break;
        case PARITY_VALS_ONES:
            for (int64_t j = 0; j < cols; j++) o[j] = scale;
            break;
        case PARITY_VALS_SPARSE_POW2:
            for (int64_t j = 0; j < cols; j++) o[j] = sparse_pow2(&rng) * scale;
            break;
        }
    }
    if (kind == PARITY_VALS_OUTLIER && cols > 0) {
        parity_rng_t r2;
        parity_rng_seed(&r2, seed, 200 + stream);
        for (int o = 0; o < outliers; o++) {
            int64_t c = (int64_t)parity_rng_below(&r2, (uint64_t)cols);
            for (int64_t i = 0; i < row_end - row_begin; i++) out[i * cols + c] *= outlier_factor;
        }
    }
}

int parity_vals_symmetric(parity_vals_kind_t kind)
{
    switch (kind) {
    /* The ziggurat's normals take their sign from a bit of the draw that nothing else uses (the
     * strip and the magnitude come from other bits; a rejected draw is redrawn whole), so the
     * sign is fair and independent of the magnitude; the gradient scale and the outlier factor
     * multiply magnitudes only. Sparse powers of two take their sign from a bit
     * of their own; the integers in [-4, 4] are uniform, so +-m are equally likely. */
    case PARITY_VALS_NORMAL:
    case PARITY_VALS_GRADSCALE:
    case PARITY_VALS_OUTLIER:
    case PARITY_VALS_INTPROBE:
    case PARITY_VALS_SPARSE_POW2: return 1;
    case PARITY_VALS_UNIFORM01:
    case PARITY_VALS_ONES: return 0;
    }
    return 0;
}

int parity_vals_continuous(parity_vals_kind_t kind)
{
    /* Drawn from a continuous distribution (then scaled): no two rows share their values, so
     * no two share the roundings computed from them. Integers and sparse powers of two repeat. */
    return kind == PARITY_VALS_NORMAL || kind == PARITY_VALS_GRADSCALE ||
           kind == PARITY_VALS_OUTLIER || kind == PARITY_VALS_UNIFORM01;
}

void parity_workload_gamma(parity_gamma_kind_t kind, uint64_t seed, int64_t d, double *out)
{
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, STREAM_GAMMA);
    for (int64_t j = 0; j < d; j++) {
        switch (kind) {
        case PARITY_GAMMA_ONES: out[j] = 1.0; break;
        case PARITY_GAMMA_TRAINED: out[j] = exp(0.5 * parity_rng_normal(&rng)); break;
        case PARITY_GAMMA_NORMAL: out[j] = parity_rng_normal(&rng); break;
        }
    }
}

/* Workload generators: pure functions of (spec, seed). See workload.h. */
#include "parity/workload.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/tokenizer.h"
#include "src/core/rng_impl.h"

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

parity_status_t parity_workload_ids(const parity_workload_t *w, uint64_t seed, int64_t n, int64_t v,
                                    int32_t *ids, parity_diag_t *diag)
{
    parity_rng_t rng;
    if (n < 0 || v <= 0 || v > INT32_MAX)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: bad sizes n=%lld v=%lld",
                               w->name, (long long)n, (long long)v);
    switch (w->ids) {
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
            acc += pow((double)(r + 1), -w->zipf_s);
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
                                   w->name, (long long)v);
        parity_rng_seed(&rng, seed, STREAM_TEXT);
        size_t off = (size_t)parity_rng_below(&rng, tn);
        for (int64_t i = 0; i < n; i++) ids[i] = t[(off + (size_t)i) % tn];
        return PARITY_OK;
    }
    }
    return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: unknown id distribution", w->name);
}

/* n normals times scale, two per draw by Marsaglia's polar method (no trigonometry: one log and
 * one sqrt per pair, 21% of draws rejected); a pure function of the rng state. In batches: up to
 * B candidate pairs are drawn, the accepted ones kept in order without a branch, then their logs
 * and scalings; the pairs used are the accepted ones in draw order, as drawn one at a time (the
 * same bits: tests/test_rng.c holds it to that loop), 1.4x faster (no mispredicted rejection
 * branch, independent logs back to back). Candidates drawn after the row's last pair are
 * discarded: every row has an rng of its own (parity_workload_values). */
/* The pairs k < m into o[2k], o[2k + 1] (the last odd one alone when only left < 2m values are
 * wanted): (u f, v f) with f = sqrt(-2 l / s) scale, l = log(s). Two pairs per instruction where
 * SSE2 is (every x86-64): the same IEEE operations in the same order (a division, a square root
 * and products, each correctly rounded, no contraction), so the same bits as the scalar loop,
 * whose square root GCC keeps scalar for errno's sake. */
static void scale_pairs(double *restrict o, const double *restrict u, const double *restrict v,
                        const double *restrict s, double *restrict l, int m, int64_t left,
                        double scale)
{
    int k = 0;
#if defined(__SSE2__)
    const __m128d m2 = _mm_set1_pd(-2.0), sc = _mm_set1_pd(scale);
    for (; k + 2 <= m; k += 2) {
        __m128d q = _mm_div_pd(_mm_mul_pd(m2, _mm_loadu_pd(l + k)), _mm_loadu_pd(s + k));
        _mm_storeu_pd(l + k, _mm_mul_pd(_mm_sqrt_pd(q), sc));
    }
#endif
    for (; k < m; k++) l[k] = sqrt(-2.0 * l[k] / s[k]) * scale;
    int full = 2 * (int64_t)m <= left ? m : m - 1; /* left is odd: the last pair's v is dropped */
    for (k = 0; k < full; k++) {
        o[2 * k] = u[k] * l[k];
        o[2 * k + 1] = v[k] * l[k];
    }
    if (full < m) o[2 * full] = u[full] * l[full];
}

static void normals(parity_rng_t *rng, double *o, int64_t n, double scale)
{
    enum { B = 64 };
    double u[B], v[B], s[B], l[B];
    for (int64_t j = 0; j < n;) {
        /* pairs still to produce; a candidate is accepted with probability pi/4 (the unit disc
         * in the square), so need / (pi/4) ~ 1.27 need candidates are expected: need + need/4 + 2
         * draws about that many for a row's last pairs instead of a whole batch. Only speed
         * depends on it: a short batch is followed by another. */
        int64_t need = (n - j + 1) / 2;
        int draw = need + need / 4 + 2 < B ? (int)(need + need / 4 + 2) : B, m = 0;
        for (int b = 0; b < draw; b++) {
            double x = 2.0 * parity_rng_uniform_inline(rng) - 1.0;
            double y = 2.0 * parity_rng_uniform_inline(rng) - 1.0;
            double q = x * x + y * y;
            u[m] = x;
            v[m] = y;
            s[m] = q;
            m += q < 1.0 && q != 0.0;
        }
        if (m > need) m = (int)need;
        for (int k = 0; k < m; k++) l[k] = log(s[k]);
        scale_pairs(o + j, u, v, s, l, m, n - j, scale);
        j += 2 * (int64_t)m;
    }
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
            normals(&rng, o, cols, scale);
            break;
        case PARITY_VALS_GRADSCALE: {
            double mag = pow(10.0, -3.0 - 3.0 * parity_rng_uniform(&rng)) * scale;
            normals(&rng, o, cols, mag);
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
    /* Marsaglia's polar pair (u f, v f): (u, v) is uniform on the disk, so the signs of u and v
     * are fair and independent of each other and of f and |u|, |v|; the gradient scale and the
     * outlier factor multiply magnitudes only. Sparse powers of two take their sign from a bit
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

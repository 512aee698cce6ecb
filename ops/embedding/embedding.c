/* The embedding family's fused embedding-gradient + RMSNorm backward, with its fp64 reference and
 * the error-model data of docs/error-model.md, and the helpers the family shares
 * (embedding_impl.h). Embedding backward and forward alone: embedding_plain.c; RMSNorm alone:
 * ops/rmsnorm/rmsnorm.c. */
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/core/internal.h"
#include "ops/embedding/embedding_impl.h"

/* ---- shared helpers ---------------------------------------------------------------------- */

/* GCC at -O3 for the reference's hot loops: it hoists elem()'s dtype switch out of them and
 * vectorizes the element-wise ones; it never reorders a sum (no -fassociative-math) and the
 * build's -ffp-contract=off still holds, so the reference keeps its bits (docs/check-speed.md). */
#if defined(__GNUC__) && !defined(__clang__)
#define REF_HOT __attribute__((optimize("O3")))
#else
#define REF_HOT
#endif

/* ---- scatter bookkeeping: which positions feed which vocabulary row ------------------------ */


void emb_scatter_free(parity_case_t *c)
{
    scatter_t *s = c->priv;
    if (!s) return;
    free(s->ids);
    free(s->hits);
    free(s->off);
    free(s->pos);
    free(s);
    c->priv = NULL;
}

parity_status_t emb_scatter_build(parity_case_t *c, const int32_t *ids, int64_t n, int64_t d,
                                  int64_t v)
{
    scatter_t *s = calloc(1, sizeof *s);
    if (!s) return PARITY_E_NOMEM;
    c->priv = s;
    s->n = n;
    s->d = d;
    s->v = v;
    s->ids = malloc((size_t)(n ? n : 1) * sizeof *s->ids);
    s->hits = calloc((size_t)v, sizeof *s->hits);
    s->off = calloc((size_t)v + 1, sizeof *s->off);
    s->pos = malloc((size_t)(n ? n : 1) * sizeof *s->pos);
    if (!s->ids || !s->hits || !s->off || !s->pos) return PARITY_E_NOMEM;
    memcpy(s->ids, ids, (size_t)n * sizeof *ids);
    for (int64_t i = 0; i < n; i++) s->hits[ids[i]]++;
    for (int64_t r = 0; r < v; r++) s->off[r + 1] = s->off[r] + s->hits[r];
    int64_t *fill = malloc((size_t)v * sizeof *fill);
    if (!fill) return PARITY_E_NOMEM;
    memcpy(fill, s->off, (size_t)v * sizeof *fill);
    for (int64_t i = 0; i < n; i++) s->pos[fill[ids[i]]++] = i;
    free(fill);
    return PARITY_OK;
}

/* Set up a sparse (V, D) reference whose rows are vocabulary ids. */
parity_status_t emb_vocab_ref_alloc(parity_case_t *c, int out, const char *name, int with_up)
{
    scatter_t *s = c->priv;
    int64_t used = 0;
    for (int64_t r = 0; r < s->v; r++) used += s->hits[r] > 0;
    parity_ref_output_t *R = &c->ref[out];
    parity_status_t st = parity_ref_output_alloc(R, name, "token", s->v, s->d, 1, used, with_up);
    if (st != PARITY_OK) return st;
    int64_t k = 0;
    for (int64_t r = 0; r < s->v; r++) {
        R->slot[r] = s->hits[r] > 0 ? k : -1;
        if (s->hits[r] > 0) R->k[k++] = s->hits[r];
    }
    c->out_ndim[out] = 2;
    c->out_shape[out][0] = s->v;
    c->out_shape[out][1] = s->d;
    return PARITY_OK;
}

/* Symmetric reduction class (op.h s_sym; docs/error-model.md): the reference accumulates the
 * squares of the terms into s_sym, and sym_finish takes the square root. */
parity_status_t emb_sym_alloc(parity_ref_output_t *R)
{
    size_t ne = (size_t)(R->n_slots * R->cols);
    R->s_sym = parity_calloc_faulted(ne, sizeof *R->s_sym);
    return R->s_sym ? PARITY_OK : PARITY_E_NOMEM;
}

/* a[e] = sqrt(a[e]) in place, on every core and two per SSE2 instruction: the square root is
 * correctly rounded either way (GCC keeps the scalar one for errno's sake), so the same bits; the
 * production workload's two 98 MB arrays were 3% of a cold check's CPU, on one core. */
static void sqrt_range(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    double *a = ctx;
#if defined(__SSE2__)
    for (; b + 2 <= e; b += 2) _mm_storeu_pd(a + b, _mm_sqrt_pd(_mm_loadu_pd(a + b)));
#endif
    for (; b < e; b++) a[b] = sqrt(a[b]);
}

static void sqrt_all(double *a, int64_t n)
{
    if (n < (1 << 16)) sqrt_range(a, 0, n, 0); /* below ~0.1 ms: no threads to start */
    else parity_parallel_for(n, 0, sqrt_range, a);
}

void emb_sym_finish(parity_ref_output_t *R)
{
    if (R->s_sym) sqrt_all(R->s_sym, R->n_slots * R->cols);
    if (R->s_up2) sqrt_all(R->s_up2, R->n_slots * R->cols);
}

static parity_status_t up2_alloc(parity_ref_output_t *R)
{
    size_t ne = (size_t)(R->n_slots * R->cols);
    R->s_up2 = parity_calloc_faulted(ne, sizeof *R->s_up2);
    return R->s_up2 ? PARITY_OK : PARITY_E_NOMEM;
}

/* Generate the float inputs of a workload, row-parallel: values are a pure function of (seed,
 * stream, row) so the split does not matter. */
typedef struct {
    parity_tensor_t *t;
    parity_vals_kind_t kind;
    double scale;
    int outliers;
    double factor;
    uint64_t seed, stream;
    int64_t cols;
} gen_ctx_t;

static void gen_rows(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    gen_ctx_t *g = p;
    enum { CHUNK = 64 };
    double *buf = malloc((size_t)CHUNK * (size_t)g->cols * sizeof *buf);
    if (!buf) return; /* leaves zeros; callers check allocation of the tensor, not this */
    for (int64_t r = b; r < e; r += CHUNK) {
        int64_t re = r + CHUNK < e ? r + CHUNK : e;
        parity_workload_values(g->kind, g->scale, g->outliers, g->factor, g->seed, g->stream, r, re,
                               g->cols, buf);
        parity_tensor_store_f64(&g->t->view, r * g->cols, buf, (re - r) * g->cols);
    }
    free(buf);
}

parity_tensor_t *emb_gen_matrix(const char *name, parity_dtype_t dt, int64_t rows, int64_t cols,
                                parity_vals_kind_t kind, double scale, int outliers,
                                double factor, uint64_t seed, uint64_t stream)
{
    int64_t shape[2] = {rows, cols};
    parity_tensor_t *t = parity_tensor_new(name, dt, 2, shape);
    if (!t) return NULL;
    gen_ctx_t g = {t, kind, scale, outliers, factor, seed, stream, cols};
    parity_parallel_for(rows, 0, gen_rows, &g);
    return t;
}

parity_tensor_t *emb_gen_ids(const char *name, const parity_workload_t *wl, parity_ids_t ids,
                             uint64_t seed, int64_t n, int64_t v, parity_status_t *st,
                             parity_diag_t *diag)
{
    int64_t shape[1] = {n};
    parity_tensor_t *t = parity_tensor_new(name, PARITY_DT_I32, 1, shape);
    if (!t) {
        *st = PARITY_E_NOMEM;
        return NULL;
    }
    *st = parity_workload_ids(wl->name, ids, seed, n, v, t->view.data, diag);
    return t;
}

static parity_tensor_t *gen_gamma(parity_gamma_kind_t kind, parity_dtype_t dt, uint64_t seed,
                                  int64_t d)
{
    int64_t shape[1] = {d};
    parity_tensor_t *t = parity_tensor_new("gamma", dt, 1, shape);
    double *g = malloc((size_t)d * sizeof *g);
    if (!t || !g) {
        parity_tensor_free(t);
        free(g);
        return NULL;
    }
    parity_workload_gamma(kind, seed, d, g);
    parity_store_f64(t, g);
    free(g);
    return t;
}

/* ---- embedding_rmsnorm_bwd ----------------------------------------------------------------- */
/* Inputs: dy (N,D), x (N,D), gamma (D), ids (N). Outputs: dE (V,D), dgamma (D).
 * Per row i: r = (mean_k x_k^2 + eps)^-1/2, xhat = x r, c = mean_k(g_k dy_k xhat_k),
 * dx_j = r (g_j dy_j - xhat_j c); dE[ids[i]] += dx; dgamma_j += dy_j xhat_j.
 * Error model: dE[v,j] accumulates k = hits(v) terms dx_ij, each produced by about 4D+20
 * roundings (docs/error-model.md), so s_up = sum_i r_i(|g_j dy_ij| + |xhat_ij| cabs_i) with
 * m_up = 4D+32; dgamma_j accumulates N terms dy xhat, each with about D+8 roundings. */

#define N_ROW_CHUNKS 64 /* fixed, so the reference's summation order is independent of threads */

typedef struct {
    parity_case_t *c;
    const parity_abi_tensor_t *dy, *x;
    const double *g;
    double *r, *cc, *ca;           /* per row: r, c, cabs */
    double *dg, *dg_abs;           /* [N_ROW_CHUNKS][D] partial dgamma */
    double *dg_sq;                 /* [N_ROW_CHUNKS][D] partial sum (dy xhat)^2, or NULL */
    int ignore_gamma;              /* embedding_bwd reuses nothing of this; kept for clarity */
    int failed;                    /* a thread could not allocate its row buffers */
} fused_ctx_t;

/* Elements [jb, je) of row i of a 2-D input as doubles (exact: every input dtype converts exactly). */
REF_HOT static void row_f64(const parity_abi_tensor_t *t, int64_t i, int64_t jb, int64_t je, double *out)
{
    int64_t d = t->shape[1];
    if (t->dtype == PARITY_DT_BF16) {
        const uint16_t *src = (const uint16_t *)t->data + i * d;
        for (int64_t j = jb; j < je; j++) out[j - jb] = bf16_f32(src[j]);
    } else if (t->dtype == PARITY_DT_F32) {
        const float *src = (const float *)t->data + i * d;
        for (int64_t j = jb; j < je; j++) out[j - jb] = src[j];
    } else {
        for (int64_t j = jb; j < je; j++) out[j - jb] = elem(t, i * d + j);
    }
}

/* Row i's element-wise part of pass 1 (vectorized): t_k = g_k dy_k xhat_k into t, and the chunk's
 * dgamma partial sums over rows, in row order. */
REF_HOT static void pass1_terms(const double *restrict g, const double *restrict xd,
                                const double *restrict dyd, double r, int64_t d,
                                double *restrict t, double *restrict dg, double *restrict dga,
                                double *restrict dgs)
{
    if (dgs)
        for (int64_t k = 0; k < d; k++) {
            double xh = xd[k] * r, w = dyd[k] * xh;
            t[k] = g[k] * dyd[k] * xh;
            dg[k] += w;
            dga[k] += fabs(w);
            dgs[k] += w * w;
        }
    else
        for (int64_t k = 0; k < d; k++) {
            double xh = xd[k] * r, w = dyd[k] * xh;
            t[k] = g[k] * dyd[k] * xh;
            dg[k] += w;
            dga[k] += fabs(w);
        }
}

/* Pass 1, per row: r, c = mean(g dy xhat), cabs = mean |g dy xhat|, and dgamma's chunk partials.
 * The sums over k are sequential, as they always were (the same bits); rows are taken ROWS_G at a time
 * so that their independent sums run side by side (one sum is a chain of dependent additions,
 * latency-bound), and the element-wise work is a loop of its own that vectorizes. */
/* Rows side by side in pass 1: four independent chains of additions cover an addition's latency
 * (3-4 cycles on current x86 cores) at about one addition per cycle. */
enum { ROWS_G = 4 };
REF_HOT static void fused_pass1(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    fused_ctx_t *f = p;
    scatter_t *s = f->c->priv;
    int64_t n = s->n, d = s->d;
    double *buf = malloc((size_t)d * 3 * ROWS_G * sizeof *buf);
    if (!buf) {
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    double *xd = buf, *dyd = buf + ROWS_G * d, *t = buf + 2 * ROWS_G * d;
    for (int64_t ch = b; ch < e; ch++) {
        double *dg = f->dg + ch * d, *dga = f->dg_abs + ch * d;
        double *dgs = f->dg_sq ? f->dg_sq + ch * d : NULL;
        int64_t i1 = n * (ch + 1) / N_ROW_CHUNKS;
        for (int64_t i0 = n * ch / N_ROW_CHUNKS; i0 < i1; i0 += ROWS_G) {
            int m = i1 - i0 < ROWS_G ? (int)(i1 - i0) : ROWS_G;
            double ss[ROWS_G] = {0}, c[ROWS_G] = {0}, ca[ROWS_G] = {0}, r[ROWS_G];
            for (int q = 0; q < m; q++) {
                row_f64(f->x, i0 + q, 0, d, xd + q * d);
                row_f64(f->dy, i0 + q, 0, d, dyd + q * d);
            }
            if (m == ROWS_G)
                for (int64_t k = 0; k < d; k++)
                    for (int q = 0; q < ROWS_G; q++) ss[q] += xd[q * d + k] * xd[q * d + k];
            else
                for (int q = 0; q < m; q++)
                    for (int64_t k = 0; k < d; k++) ss[q] += xd[q * d + k] * xd[q * d + k];
            for (int q = 0; q < m; q++) {
                r[q] = 1.0 / sqrt(ss[q] / (double)d + PARITY_RMS_EPS);
                pass1_terms(f->g, xd + q * d, dyd + q * d, r[q], d, t + q * d, dg, dga, dgs);
            }
            if (m == ROWS_G)
                for (int64_t k = 0; k < d; k++)
                    for (int q = 0; q < ROWS_G; q++) {
                        c[q] += t[q * d + k];
                        ca[q] += fabs(t[q * d + k]);
                    }
            else
                for (int q = 0; q < m; q++)
                    for (int64_t k = 0; k < d; k++) {
                        c[q] += t[q * d + k];
                        ca[q] += fabs(t[q * d + k]);
                    }
            for (int q = 0; q < m; q++) {
                f->r[i0 + q] = r[q];
                f->cc[i0 + q] = c[q] / (double)d;
                f->ca[i0 + q] = ca[q] / (double)d;
            }
        }
    }
    free(buf);
}

/* Row i's terms of pass 2 over the w columns given (vectorized): dx, and the error model's sums. */
REF_HOT static void pass2_terms(const double *restrict g, const double *restrict xd,
                                const double *restrict dyd, double r, double c, double ca,
                                int64_t w, double *restrict ref, double *restrict sa,
                                double *restrict su, double *restrict sq, double *restrict s2)
{
    for (int64_t j = 0; j < w; j++) {
        double xh = xd[j] * r, gd = g[j] * dyd[j];
        double dx = r * (gd - xh * c);
        double a = r * (fabs(gd) + fabs(xh) * ca);
        ref[j] += dx;
        sa[j] += fabs(dx);
        su[j] += a;
        if (sq) sq[j] += dx * dx;
        if (s2) s2[j] += a * a;
    }
}

REF_HOT static void fused_pass2(void *p, int64_t jb, int64_t je, int thread)
{
    (void)thread;
    fused_ctx_t *f = p;
    scatter_t *s = f->c->priv;
    parity_ref_output_t *R = &f->c->ref[0];
    int64_t d = s->d, w = je - jb;
    if (w <= 0) return;
    double *buf = malloc((size_t)w * 2 * sizeof *buf);
    if (!buf) {
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    double *xd = buf, *dyd = buf + w;
    /* Rows grouped by id, ascending within a group (s->pos): each element of the reference sees
     * its terms in the order of i as before (the same bits), and a row's accumulators stay in
     * cache over all its hits. */
    for (int64_t q = 0; q < s->n; q++) {
        int64_t i = s->pos[q];
        int64_t o = R->slot[s->ids[i]] * d + jb;
        row_f64(f->x, i, jb, je, xd);
        row_f64(f->dy, i, jb, je, dyd);
        pass2_terms(f->g + jb, xd, dyd, f->r[i], f->cc[i], f->ca[i], w, R->ref + o, R->s_acc + o,
                    R->s_up + o, R->s_sym ? R->s_sym + o : NULL, R->s_up2 ? R->s_up2 + o : NULL);
    }
    free(buf);
}

static parity_status_t fused_build(const parity_op_t *op, const parity_workload_t *wl,
                                   uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                   parity_diag_t *diag)
{
    const emb_fused_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    int64_t n = wl->n, d = wl->d, v = wl->v;
    parity_status_t st = PARITY_OK;
    c->inputs[0] = emb_gen_matrix("dy", dt, n, d, p->dy.kind, p->dy.scale, 0, 1, seed, 1);
    c->inputs[1] = emb_gen_matrix("x", dt, n, d, p->x.kind, p->x.scale, p->outliers,
                              p->outlier_factor, seed, 2);
    c->inputs[2] = gen_gamma(p->gamma, dt, seed, d);
    c->inputs[3] = emb_gen_ids("ids", wl, p->ids, seed, n, v, &st, diag);
    if (st != PARITY_OK) return st;
    for (int i = 0; i < 4; i++)
        if (!c->inputs[i]) return PARITY_E_NOMEM;
    c->rows_are_text_tokens = p->ids.kind == PARITY_IDS_TEXT;
    c->n_attrs = 1;
    c->attr_names[0] = "eps";
    c->attr_values[0] = PARITY_RMS_EPS;
    if ((st = emb_scatter_build(c, c->inputs[3]->view.data, n, d, v)) != PARITY_OK) return st;
    if ((st = emb_vocab_ref_alloc(c, 0, "dE", 1)) != PARITY_OK) return st;
    c->ref[0].m_up = 4 * d + 32;
    parity_ref_output_t *G = &c->ref[1];
    if ((st = parity_ref_output_alloc(G, "dgamma", "channel", d, 1, 0, 0, 1)) != PARITY_OK)
        return st;
    G->m_up = d + 8;
    c->out_ndim[1] = 1;
    c->out_shape[1][0] = d;
    /* Symmetric class. dx_i = r_i (g dy_i - xhat_i c_i) is odd in the row dy_i (c_i is linear in
     * it, r_i does not depend on it), and so is a kernel's fp32 dx (rounding commutes with
     * negation): with dy symmetric, the hits(v) terms of dE[v, j] (distinct rows i) have fair,
     * independent signs. dgamma's terms dy_ij xhat_ij are odd in dy_i and in x_i alike. */
    int dy_sym = parity_vals_symmetric(p->dy.kind), x_sym = parity_vals_symmetric(p->x.kind);
    if (dy_sym && (st = emb_sym_alloc(&c->ref[0])) != PARITY_OK) return st;
    if ((dy_sym || x_sym) && (st = emb_sym_alloc(G)) != PARITY_OK) return st;
    /* Per-term errors across terms (docs/error-model.md, "Per-term errors across terms", which
     * derives the counts). dE: the first-order coefficients of one dx term satisfy
     * sum_r c_r^2 <= (13D/4 + 34) A^2 <= m_up A^2. What can add linearly, in u A per term: r's
     * relative error enters dx with a coefficient of at most 3A, so an rsqrt intrinsic 2 ulp off
     * (<= 4u relative) costs 12; the constants 1/D and eps, each rounded once for every row,
     * cost 1.5 + 1 (1/D through r and through c) + 1.5 (eps through r) = 4; the 12 roundings
     * m_up allows for other evaluation orders are charged linearly too: b_up = 28. dgamma: a
     * term dy xhat has sum c^2 <= (D/4 + 4.5) A^2 <= (D + 8) A^2 and r enters it with
     * coefficient A: b_up = 4 + 0.5 + 0.5 + the 2 spare roundings of m_up = 7. */
    if (parity_rms_rows_distinct(p->x.kind, p->dy.kind)) {
        if ((st = up2_alloc(&c->ref[0])) != PARITY_OK || (st = up2_alloc(G)) != PARITY_OK)
            return st;
        c->ref[0].b_up = 28;
        G->b_up = 7;
    }

    fused_ctx_t f = {c, &c->inputs[0]->view, &c->inputs[1]->view, NULL, NULL, NULL, NULL,
                     NULL, NULL, NULL, 0, 0};
    double *g = malloc((size_t)d * sizeof *g);
    f.r = malloc((size_t)(n ? n : 1) * sizeof *f.r);
    f.cc = malloc((size_t)(n ? n : 1) * sizeof *f.cc);
    f.ca = malloc((size_t)(n ? n : 1) * sizeof *f.ca);
    f.dg = calloc((size_t)N_ROW_CHUNKS * (size_t)d, sizeof *f.dg);
    f.dg_abs = calloc((size_t)N_ROW_CHUNKS * (size_t)d, sizeof *f.dg_abs);
    if (G->s_sym || G->s_up2) f.dg_sq = calloc((size_t)N_ROW_CHUNKS * (size_t)d, sizeof *f.dg_sq);
    if (!g || !f.r || !f.cc || !f.ca || !f.dg || !f.dg_abs || ((G->s_sym || G->s_up2) && !f.dg_sq))
        st = PARITY_E_NOMEM;
    if (st == PARITY_OK) {
        parity_tensor_to_f64(&c->inputs[2]->view, g);
        f.g = g;
        parity_parallel_for(N_ROW_CHUNKS, 0, fused_pass1, &f);
        if (!f.failed) parity_parallel_for(d, 0, fused_pass2, &f);
        if (f.failed) st = PARITY_E_NOMEM;
    }
    if (st == PARITY_OK) {
        for (int64_t j = 0; j < d; j++) {
            double a = 0, b = 0, q = 0;
            for (int ch = 0; ch < N_ROW_CHUNKS; ch++) {
                a += f.dg[ch * d + j];
                b += f.dg_abs[ch * d + j];
                if (f.dg_sq) q += f.dg_sq[ch * d + j];
            }
            G->ref[j] = a;
            G->s_acc[j] = b;
            G->s_up[j] = b;
            G->k[j] = n;
            if (G->s_sym) G->s_sym[j] = q;
            if (G->s_up2) G->s_up2[j] = q; /* A_i = |dy xhat| for dgamma: sum A^2 = sum term^2 */
        }
        emb_sym_finish(&c->ref[0]);
        emb_sym_finish(G);
    }
    free(g);
    free(f.r);
    free(f.cc);
    free(f.ca);
    free(f.dg);
    free(f.dg_abs);
    free(f.dg_sq);
    return st;
}

/* fp32 terms of row i (dx and dy*xhat), as a faithful kernel computes them. */
static void fused_terms_f32(const parity_case_t *c, int64_t i, float *dx, float *xdy, float *tmp)
{
    scatter_t *s = c->priv;
    int64_t d = s->d;
    float *x = tmp, *dy = tmp + d, *g = tmp + 2 * d;
    parity_row_to_f32(&c->inputs[1]->view, i, x);
    parity_row_to_f32(&c->inputs[0]->view, i, dy);
    parity_row_to_f32(&c->inputs[2]->view, 0, g);
    parity_rms_bwd_row_f32(x, dy, g, d, (float)PARITY_RMS_EPS, dx, xdy, 0, 0);
}

/* Emulate vocabulary rows (dE) or channels (dgamma) with accumulator `acc`. For dE the terms of
 * row v are dx of its positions in ascending order; for dgamma all N rows' dy*xhat. */
parity_status_t emb_scatter_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows,
                                    int64_t n_rows, double *dst, int fused)
{
    scatter_t *s = c->priv;
    int64_t d = s->d;
    parity_round_opts_t o = parity_format_default_opts(acc);
    float *tmp = malloc((size_t)d * 5 * sizeof *tmp);
    if (!tmp) return PARITY_E_NOMEM;
    float *dx = tmp + 3 * d, *xdy = tmp + 4 * d;
    parity_status_t st = PARITY_OK;
    if (out == 0) {
        for (int64_t q = 0; q < n_rows && st == PARITY_OK; q++) {
            int64_t v = rows[q], h = s->hits[v];
            double *terms = malloc((size_t)(h ? h : 1) * (size_t)d * sizeof *terms);
            double *col = malloc((size_t)(h ? h : 1) * sizeof *col);
            if (!terms || !col) st = PARITY_E_NOMEM;
            for (int64_t t = 0; st == PARITY_OK && t < h; t++) {
                int64_t i = s->pos[s->off[v] + t];
                if (fused) {
                    fused_terms_f32(c, i, dx, xdy, tmp);
                    for (int64_t j = 0; j < d; j++) terms[t * d + j] = dx[j];
                } else {
                    for (int64_t j = 0; j < d; j++) terms[t * d + j] = elem(&c->inputs[0]->view, i * d + j);
                }
            }
            for (int64_t j = 0; st == PARITY_OK && j < d; j++) {
                for (int64_t t = 0; t < h; t++) col[t] = terms[t * d + j];
                dst[q * d + j] = parity_format_sum(acc, col, (size_t)h, order, 0, &o, NULL);
            }
            free(terms);
            free(col);
        }
    } else if (fused && out == 1) {
        double *terms = malloc((size_t)(n_rows ? n_rows : 1) * (size_t)(s->n ? s->n : 1) * sizeof *terms);
        if (!terms) st = PARITY_E_NOMEM;
        for (int64_t i = 0; st == PARITY_OK && i < s->n; i++) {
            fused_terms_f32(c, i, dx, xdy, tmp);
            for (int64_t q = 0; q < n_rows; q++) terms[q * s->n + i] = xdy[rows[q]];
        }
        for (int64_t q = 0; st == PARITY_OK && q < n_rows; q++)
            dst[q] = parity_format_sum(acc, terms + q * s->n, (size_t)s->n, order, 0, &o, NULL);
        free(terms);
    } else {
        st = PARITY_E_UNSUPPORTED;
    }
    free(tmp);
    return st;
}

/* The terms of dE's sums for the diagnosis's dropped-terms cause (op.h terms_ref): term t of
 * row v is the t-th of its positions in ascending order (scatter_t pos), dy of that position
 * (embedding_bwd) or its fp32 dx as a faithful kernel forms it (fused: fused_terms_f32; its
 * difference from the fp64 term is far inside the tolerance). Rows with fewer than `to` terms
 * add those they have. dgamma has no such terms here. */
parity_status_t emb_scatter_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                      const int64_t *rows, int64_t n_rows, double *sum,
                                      double *abs_sum, double *sq_sum, int fused)
{
    scatter_t *s = c->priv;
    if (out != 0 || !s || from < 0 || from > to) return PARITY_E_UNSUPPORTED;
    int64_t d = s->d;
    float *tmp = fused ? malloc((size_t)d * 5 * sizeof *tmp) : NULL;
    if (fused && !tmp) return PARITY_E_NOMEM;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t v = rows[q];
        if (v < 0 || v >= s->v) continue;
        for (int64_t t = from; t < to && t < s->hits[v]; t++) {
            int64_t i = s->pos[s->off[v] + t];
            if (fused) fused_terms_f32(c, i, tmp + 3 * d, tmp + 4 * d, tmp);
            for (int64_t j = 0; j < d; j++) {
                double x = fused ? tmp[3 * d + j] : elem(&c->inputs[0]->view, i * d + j);
                sum[q * d + j] += x;
                abs_sum[q * d + j] += fabs(x);
                if (sq_sum) sq_sum[q * d + j] += x * x;
            }
        }
    }
    free(tmp);
    return PARITY_OK;
}

static parity_status_t fused_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                       const int64_t *rows, int64_t n_rows, double *sum,
                                       double *abs_sum, double *sq_sum)
{
    return emb_scatter_terms_ref(c, out, from, to, rows, n_rows, sum, abs_sum, sq_sum, 1);
}

static parity_status_t fused_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                     parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                     double *dst)
{
    return emb_scatter_emulate(c, out, acc, order, rows, n_rows, dst, 1);
}

/* Presets. Scales: dy "gradscale" = 1e-3..1e-6 per row; x = 0.02 N(0,1) is an embedding row at
 * GPT-2's init scale (small enough that RMSNorm's eps matters, as in real models). */
/* The op's variants (op.h variant_ref): 0, gamma ignored: dE of the rows as the build forms it
 * (pass1 and pass2 above, in fp64) but with g = 1, dx_j = r (dy_j - xhat_j c), c = mean(dy xhat).
 * dgamma does not involve gamma: PARITY_E_UNSUPPORTED there. */
static parity_status_t fused_variant_ref(const parity_case_t *c, int out, int which,
                                         const parity_format_t *fmt, int dir, const int64_t *rows,
                                         int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    scatter_t *s = c->priv;
    if (out != 0 || which != 0 || !s) return PARITY_E_UNSUPPORTED;
    int64_t d = s->d;
    double *buf = malloc((size_t)d * 4 * sizeof *buf);
    if (!buf) return PARITY_E_NOMEM;
    double *ones = buf, *xd = buf + d, *dyd = buf + 2 * d, *su = buf + 3 * d;
    for (int64_t j = 0; j < d; j++) ones[j] = 1.0;
    memset(ref, 0, (size_t)n_rows * (size_t)d * sizeof *ref);
    memset(s_acc, 0, (size_t)n_rows * (size_t)d * sizeof *s_acc);
    if (s_up) memset(s_up, 0, (size_t)n_rows * (size_t)d * sizeof *s_up);
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t v = rows[q];
        if (v < 0 || v >= s->v) continue;
        for (int64_t t = 0; t < s->hits[v]; t++) {
            int64_t i = s->pos[s->off[v] + t];
            row_f64(&c->inputs[1]->view, i, 0, d, xd);
            row_f64(&c->inputs[0]->view, i, 0, d, dyd);
            double ss = 0, cc = 0, ca = 0;
            for (int64_t k = 0; k < d; k++) ss += xd[k] * xd[k];
            double r = 1.0 / sqrt(ss / (double)d + PARITY_RMS_EPS);
            for (int64_t k = 0; k < d; k++) {
                double tk = dyd[k] * xd[k] * r;
                cc += tk;
                ca += fabs(tk);
            }
            if (!s_up) memset(su, 0, (size_t)d * sizeof *su);
            pass2_terms(ones, xd, dyd, r, cc / (double)d, ca / (double)d, d, ref + q * d,
                        s_acc + q * d, s_up ? s_up + q * d : su, NULL, NULL);
        }
    }
    free(buf);
    return PARITY_OK;
}

#define F(member, type, what) PARITY_WL_FIELD(emb_fused_params_t, member, type, what)
const parity_workload_family_t emb_fused_family = {
    "embedding_rmsnorm_bwd", sizeof(emb_fused_params_t), 6,
    {F(ids, PARITY_WL_IDS, "the tokens' ids over [0, V)"),
     F(dy, PARITY_WL_VALS, "upstream gradient dy (N,D)"),
     F(x, PARITY_WL_VALS, "activations x (N,D)"),
     F(outliers, PARITY_WL_INT, "outlier channels of x (x outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor"),
     F(gamma, PARITY_WL_GAMMA, "the norm weight gamma (D)")}};
#undef F

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define FUSED_RANGE(name_, summary_, ...)                                                          \
    {.name = name_, .summary = summary_ "; N=4097, D=259, V=1024", .n = 4097, .d = 259, .v = 1024, \
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},                            \
                           .gamma = PARITY_GAMMA_TRAINED, __VA_ARGS__}}
static const parity_workload_t FUSED_PRESETS[] = {
    {.name = "uniform",
     .summary = "uniform ids (about 1 hit per row), unit normal dy and x, gamma = 1: the public benchmarks' regime",
     .n = 4096, .d = 512, .v = 4096,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_NORMAL, 1}, .x = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_ONES}},
    {.name = "zipf0.8",
     .summary = "Zipf(0.8) ids, gradient-scale dy, embedding-scale x, trained gamma",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_ZIPF, 0.8},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "zipf1.1",
     .summary = "Zipf(1.1) ids, gradient-scale dy, embedding-scale x, trained gamma",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "zipf1.4",
     .summary = "Zipf(1.4) ids (a few rows get most hits), gradient-scale dy, trained gamma",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_ZIPF, 1.4},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "text",
     .summary = "tinyshakespeare through GPT-2 BPE, gradient-scale dy, embedding-scale x, trained gamma",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_TEXT},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "outlier",
     .summary = "real-text ids, 4 outlier channels in x at 100x, gradient-scale dy, trained gamma",
     .n = 8192, .d = 512, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_TEXT},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_OUTLIER, 0.02},
                           .outliers = 4, .outlier_factor = 100, .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "gamma",
     .summary = "uniform ids, unit normal values, trained (non-unit) gamma",
     .n = 4096, .d = 256, .v = 4096,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_NORMAL, 1}, .x = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "odd-d1000",
     .summary = "odd shape N=4097 D=1000, Zipf(1.1) ids, trained gamma",
     .n = 4097, .d = 1000, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "odd-d4097",
     .summary = "odd shape N=1031 D=4097, Zipf(1.1) ids, trained gamma",
     .n = 1031, .d = 4097, .v = 50257,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "prod",
     .summary = "production-like: N=65536 tokens of real text, D=2048, V=50257, gradient-scale dy",
     .n = 65536, .d = 2048, .v = 50257, .production = 1,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_TEXT},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .x = {PARITY_VALS_NORMAL, 0.02},
                           .gamma = PARITY_GAMMA_TRAINED}},
    /* Structure and range (docs/workloads.md): D = 259 (2 x 128 + 3), about 4 hits per row. */
    FUSED_RANGE("exact",
                "sparse powers of two in dy and x (0 or +-2^e, |e| <= 2), trained gamma: a dropped, misplaced or unzeroed term is a gross error",
                .dy = {PARITY_VALS_SPARSE_POW2, 1}, .x = {PARITY_VALS_SPARSE_POW2, 1}),
    FUSED_RANGE("x1e-3",
                "unit randn dy and x times 1e-3 (x^2 ~ 1e-6, near eps), trained gamma",
                .dy = {PARITY_VALS_NORMAL, 1e-3}, .x = {PARITY_VALS_NORMAL, 1e-3}),
    FUSED_RANGE("x64",
                "unit randn dy and x times 64, trained gamma",
                .dy = {PARITY_VALS_NORMAL, 64}, .x = {PARITY_VALS_NORMAL, 64}),
    FUSED_RANGE("near-max",
                "x = randn x 2^14 (fp16's edge: some |x| > 65504), dy = randn x 2^100 (dgamma near 2^112)",
                .dy = {PARITY_VALS_NORMAL, 0x1p100}, .x = {PARITY_VALS_NORMAL, 0x1p14}),
    FUSED_RANGE("subnormal",
                "dy at gradient scale x 1e-35 (1e-38..1e-41 per token): dx and dE in fp32's subnormal range",
                .dy = {PARITY_VALS_GRADSCALE, 1e-35}, .x = {PARITY_VALS_NORMAL, 1}),
};
#undef FUSED_RANGE

/* The baseline verifiers' own input schemes (verify.c applies their comparison rules).
 * Shapes are stand-ins: see docs/baselines.md for what each verifier uses and what we assume. */
static const parity_workload_t FUSED_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "unit randn dy and x, gamma = 1, uniform ids, seed 200",
     .n = 4096, .d = 1024, .v = 16384,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_NORMAL, 1}, .x = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_ONES}},
    {.name = "kernelbench",
     .summary = "torch.rand inputs (U[0,1)) including gamma, uniform ids, one shape",
     .n = 2048, .d = 1024, .v = 8192,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_UNIFORM01, 1}, .x = {PARITY_VALS_UNIFORM01, 1},
                           .gamma = PARITY_GAMMA_ONES}},
    {.name = "assert_close",
     .summary = "a unit test: randn inputs and gamma, uniform ids, small shape",
     .n = 512, .d = 256, .v = 1000,
     .params = &(const emb_fused_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_NORMAL, 1}, .x = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_NORMAL}},
};

const parity_op_t parity_op_embedding_rmsnorm_bwd = {
    .name = "embedding_rmsnorm_bwd",
    .summary = "fused RMSNorm backward + embedding-gradient scatter-add: outputs dE (V,D), dgamma (D)",
    .n_inputs = 4,
    .n_outputs = 2,
    .input_names = {"dy", "x", "gamma", "ids"},
    .output_names = {"dE", "dgamma"},
    .input_is_float = {1, 1, 1, 0},
    .faithful_accumulator = "fp32",
    .error_model = "dE[v,j]: hits(v) terms dx, each from ~4D+32 roundings; dgamma[j]: N terms dy*xhat",
    .presets = FUSED_PRESETS,
    .n_presets = (int)(sizeof FUSED_PRESETS / sizeof FUSED_PRESETS[0]),
    .baseline_workloads = FUSED_BASELINES,
    .wl_family = &emb_fused_family,
    .catalog = {{parity_catalog_embedding, &parity_catalog_embedding_count}, {parity_catalog_embedding_fast, &parity_catalog_embedding_fast_count}},
    .cost = &parity_cost_embedding_rmsnorm_bwd,
    .build = fused_build,
    .emulate = fused_emulate,
    .terms_ref = fused_terms_ref,
    .variants = {{PARITY_VARIANT_IGNORED, "gamma (dx computed as if it were all ones)", 0}},
    .variant_ref = fused_variant_ref,
    .free_priv = emb_scatter_free,
};


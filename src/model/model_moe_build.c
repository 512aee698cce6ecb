/* model_moe_build: upcycling stories260K into a mixture of experts (parity_model_moe_build):
 * each layer's SwiGLU units split into a shared expert and E routed experts, a linear router
 * fitted to the oracle top-K experts on calibration text the fp64 reference samples itself,
 * written as the side file model_moe.c reads. Split from model_moe.c: building runs the dense
 * forward (model_forward.c, model_generate.c), which runs the MoE FFN, so the side file and the
 * specs the forward needs stay below it and the building above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_impl.h"
#include "parity/tokenizer.h"

/* ------------------------------------------------------------------------------------------ */
/* Building                                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    double v;
    int i, e;
} pair_t;

static int pair_cmp(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1; /* descending similarity */
    if (x->i != y->i) return x->i < y->i ? -1 : 1;
    return x->e < y->e ? -1 : (x->e > y->e);
}

static int int_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Balanced k-means of n unit vectors P (n, D) into E clusters of G = n / E: centroids start at
 * units 0, G, 2G, ...; each round assigns (unit, cluster) pairs in descending cosine order while
 * the cluster has room, then renormalises the centroid means. 30 rounds (it settles in ~10). */
static int balanced_kmeans(const double *P, int n, int D, int E, int *assign)
{
    int G = n / E;
    double *C = malloc((size_t)E * D * sizeof *C);
    pair_t *pr = malloc((size_t)n * E * sizeof *pr);
    int *cnt = malloc((size_t)E * sizeof *cnt);
    if (!C || !pr || !cnt) {
        free(C), free(pr), free(cnt);
        return -1;
    }
    for (int e = 0; e < E; e++) memcpy(C + (size_t)e * D, P + (size_t)e * G * D, (size_t)D * sizeof *C);
    for (int it = 0; it < 30; it++) {
        for (int i = 0; i < n; i++)
            for (int e = 0; e < E; e++) {
                double s = 0;
                for (int k = 0; k < D; k++) s += P[(size_t)i * D + k] * C[(size_t)e * D + k];
                pr[(size_t)i * E + e] = (pair_t){s, i, e};
            }
        qsort(pr, (size_t)n * E, sizeof *pr, pair_cmp);
        for (int i = 0; i < n; i++) assign[i] = -1;
        for (int e = 0; e < E; e++) cnt[e] = 0;
        for (size_t q = 0; q < (size_t)n * E; q++)
            if (assign[pr[q].i] < 0 && cnt[pr[q].e] < G) assign[pr[q].i] = pr[q].e, cnt[pr[q].e]++;
        for (int e = 0; e < E; e++) {
            double nn = 0;
            for (int k = 0; k < D; k++) {
                double s = 0;
                for (int i = 0; i < n; i++)
                    if (assign[i] == e) s += P[(size_t)i * D + k];
                C[(size_t)e * D + k] = s;
                nn += s * s;
            }
            nn = sqrt(nn);
            for (int k = 0; k < D && nn > 0; k++) C[(size_t)e * D + k] /= nn;
        }
    }
    free(C), free(pr), free(cnt);
    return 0;
}

/* Solves (A + lambda I) X = B for symmetric positive definite A (n, n), B (n, m), in place in
 * B, by Cholesky in double. Returns -1 when A + lambda I is not positive definite. */
static int ridge_solve(double *A, int n, double lambda, double *B, int m)
{
    for (int i = 0; i < n; i++) A[(size_t)i * n + i] += lambda;
    for (int j = 0; j < n; j++) {
        double d = A[(size_t)j * n + j];
        for (int k = 0; k < j; k++) d -= A[(size_t)j * n + k] * A[(size_t)j * n + k];
        if (!(d > 0)) return -1;
        d = sqrt(d);
        A[(size_t)j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[(size_t)i * n + j];
            for (int k = 0; k < j; k++) s -= A[(size_t)i * n + k] * A[(size_t)j * n + k];
            A[(size_t)i * n + j] = s / d;
        }
    }
    for (int c = 0; c < m; c++) {
        for (int i = 0; i < n; i++) { /* L y = b */
            double s = B[(size_t)i * m + c];
            for (int k = 0; k < i; k++) s -= A[(size_t)i * n + k] * B[(size_t)k * m + c];
            B[(size_t)i * m + c] = s / A[(size_t)i * n + i];
        }
        for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
            double s = B[(size_t)i * m + c];
            for (int k = i + 1; k < n; k++) s -= A[(size_t)k * n + i] * B[(size_t)k * m + c];
            B[(size_t)i * m + c] = s / A[(size_t)i * n + i];
        }
    }
    return 0;
}

/* One layer: the shared units, the expert partition and the router, from the FFN inputs X
 * (N, D) of the dense fp64 reference. */
static int build_layer(const parity_model_t *m, const parity_model_moe_opts_t *o, int l,
                       const double *X, size_t N, int32_t *perm, float *router)
{
    const int D = m->cfg.dim, F = m->cfg.hidden_dim, E = o->experts, K = o->topk;
    const int SH = o->n_shared, G = (F - SH) / E;
    const float *w1 = m->w.w1 + (size_t)l * F * D, *w3 = m->w.w3 + (size_t)l * F * D;
    const float *w2 = m->w.w2 + (size_t)l * D * F;
    double *H = malloc(N * (size_t)F * sizeof *H), *imp = calloc((size_t)F, sizeof *imp);
    double *w2n = calloc((size_t)F, sizeof *w2n), *P = malloc((size_t)F * D * sizeof *P);
    int *assign = malloc((size_t)F * sizeof *assign);
    double *A = calloc((size_t)(D + 1) * (D + 1), sizeof *A), *B = calloc((size_t)(D + 1) * E, sizeof *B);
    double *c = malloc((size_t)E * sizeof *c);
    int32_t *rest = malloc((size_t)F * sizeof *rest);
    pair_t *ord = malloc((size_t)F * sizeof *ord);
    int rc = -1;
    if (!H || !imp || !w2n || !P || !assign || !A || !B || !c || !rest || !ord) goto done;
    for (int i = 0; i < F; i++) {
        double s = 0;
        for (int j = 0; j < D; j++) s += (double)w2[(size_t)j * F + i] * w2[(size_t)j * F + i];
        w2n[i] = sqrt(s);
    }
    for (size_t t = 0; t < N; t++)
        for (int i = 0; i < F; i++) {
            double a = 0, b = 0;
            for (int k = 0; k < D; k++) {
                a += (double)w1[(size_t)i * D + k] * X[t * D + k];
                b += (double)w3[(size_t)i * D + k] * X[t * D + k];
            }
            double h = a / (1 + exp(-a)) * b;
            H[t * F + i] = h;
            imp[i] += fabs(h) * w2n[i];
        }
    /* shared expert: the SH units of largest mean contribution |h_i| ||w2[:, i]|| */
    for (int i = 0; i < F; i++) ord[i] = (pair_t){imp[i], i, 0};
    qsort(ord, (size_t)F, sizeof *ord, pair_cmp);
    for (int i = 0; i < SH; i++) perm[i] = ord[i].i;
    qsort(perm, (size_t)SH, sizeof *perm, int_cmp);
    int nr = 0;
    for (int i = SH; i < F; i++) rest[nr++] = ord[i].i;
    qsort(rest, (size_t)nr, sizeof *rest, int_cmp);
    /* routed experts: balanced k-means of the normalised w1 rows (units that fire together) */
    for (int i = 0; i < nr; i++) {
        double s = 0;
        for (int k = 0; k < D; k++) s += (double)w1[(size_t)rest[i] * D + k] * w1[(size_t)rest[i] * D + k];
        s = sqrt(s);
        for (int k = 0; k < D; k++) P[(size_t)i * D + k] = w1[(size_t)rest[i] * D + k] / s;
    }
    if (balanced_kmeans(P, nr, D, E, assign) != 0) goto done;
    int q = SH;
    for (int e = 0; e < E; e++)
        for (int i = 0; i < nr; i++)
            if (assign[i] == e) perm[q++] = rest[i];
    /* router: ridge regression of the oracle top-K indicator (experts of largest output norm)
     * on [x, 1]; normal equations accumulated in token order */
    for (size_t t = 0; t < N; t++) {
        for (int e = 0; e < E; e++) {
            double ss = 0;
            for (int j = 0; j < D; j++) {
                double y = 0;
                for (int g = 0; g < G; g++) {
                    int u = perm[SH + e * G + g];
                    y += H[t * F + u] * w2[(size_t)j * F + u];
                }
                ss += y * y;
            }
            c[e] = sqrt(ss);
        }
        int32_t top[64];
        parity_moe_topk(c, (size_t)E, (size_t)K, PARITY_MOE_TIE_LOWID, top);
        const double *x = X + t * D;
        for (int a = 0; a <= D; a++) {
            double xa = a < D ? x[a] : 1.0;
            for (int b = 0; b <= D; b++) A[(size_t)a * (D + 1) + b] += xa * (b < D ? x[b] : 1.0);
            for (int k = 0; k < K; k++) B[(size_t)a * E + top[k]] += xa;
        }
    }
    if (ridge_solve(A, D + 1, o->ridge * (double)N, B, E) != 0) goto done;
    for (int e = 0; e < E; e++)
        for (int a = 0; a <= D; a++) router[(size_t)e * (D + 1) + a] = (float)(o->beta * B[(size_t)a * E + e]);
    rc = 0;
done:
    free(H), free(imp), free(w2n), free(P), free(assign), free(A), free(B), free(c), free(rest), free(ord);
    return rc;
}

parity_status_t parity_model_moe_build(const parity_model_t *m, const parity_model_moe_opts_t *o,
                                       const char *out_path, parity_diag_t *diag)
{
    if (!m || !o || !out_path) return parity_diag_set(diag, PARITY_E_INVALID, "moe build: NULL argument");
    const parity_model_config_t *c = &m->cfg;
    const int D = c->dim, F = c->hidden_dim, L = c->n_layers, S = c->seq_len;
    if (o->experts < 1 || o->experts > 64 || o->topk < 1 || o->topk > o->experts ||
        o->n_shared < 0 || o->n_shared >= F || (F - o->n_shared) % o->experts ||
        o->n_calib < 1 || o->calib_len < 2 || o->calib_len > S || !(o->beta > 0) || !(o->ridge >= 0))
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "moe build: expected 1 <= K <= E <= 64, (F - shared) divisible by E "
                               "(F %d, E %d, shared %d), calib_len 2..%d",
                               F, o->experts, o->n_shared, S);
    parity_model_path_t ref;
    parity_model_path_default(&ref);
    parity_model_runner_t *r = NULL;
    /* the dense reference: build from a dense view even when m already has an MoE attached */
    parity_model_t dense = *m;
    dense.moe = NULL;
    parity_status_t st = parity_model_runner_new(&dense, &ref, &r, diag);
    if (st != PARITY_OK) return st;
    size_t cap = (size_t)o->n_calib * (size_t)(o->calib_len + 1);
    int32_t *seq = malloc(((size_t)o->calib_len + 1) * sizeof *seq);
    double *X = malloc((size_t)L * cap * D * sizeof *X), *cap_buf = malloc((size_t)L * S * D * sizeof *cap_buf);
    int32_t *perm = malloc((size_t)L * F * sizeof *perm);
    float *router = malloc((size_t)L * o->experts * (D + 1) * sizeof *router);
    size_t N = 0;
    if (!seq || !X || !cap_buf || !perm || !router) {
        st = parity_diag_set(diag, PARITY_E_NOMEM, "moe build: out of memory");
        goto done;
    }
    for (int sidx = 1; sidx <= o->n_calib; sidx++) {
        int32_t bos = PARITY_LLAMA_BOS;
        size_t n = 0;
        parity_model_generate(r, &bos, 1, (size_t)o->calib_len, 1.0, (uint64_t)sidx, seq, &n);
        if (n < 2) continue;
        r->cap_ffn = cap_buf;
        parity_model_forward(r, seq, n, NULL, NULL);
        r->cap_ffn = NULL;
        for (int l = 0; l < L; l++)
            for (size_t t = 0; t < n; t++)
                memcpy(X + ((size_t)l * cap + N + t) * D, cap_buf + ((size_t)l * S + t) * D,
                       (size_t)D * sizeof *X);
        N += n;
    }
    for (int l = 0; l < L; l++)
        if (build_layer(m, o, l, X + (size_t)l * cap * D, N, perm + (size_t)l * F,
                        router + (size_t)l * o->experts * (D + 1)) != 0) {
            st = parity_diag_set(diag, PARITY_E_NOMEM, "moe build: layer %d: out of memory or a "
                                 "singular router fit", l);
            goto done;
        }
    FILE *f = fopen(out_path, "wb");
    if (!f) {
        st = parity_diag_set(diag, PARITY_E_IO, "%s: cannot write", out_path);
        goto done;
    }
    int32_t h[7] = {MODEL_MOE_VERSION, L, D, F, o->experts, o->topk, o->n_shared};
    float scale = (float)o->topk; /* routed scaling factor: renormalised weights sum to 1 */
    size_t RE = (size_t)o->experts * (D + 1);
    fwrite(MODEL_MOE_MAGIC, 1, 4, f);
    fwrite(h, 4, 7, f);
    fwrite(&scale, 4, 1, f);
    for (int l = 0; l < L; l++) {
        fwrite(perm + (size_t)l * F, 4, (size_t)F, f);
        fwrite(router + (size_t)l * RE, 4, RE, f);
    }
    if (fclose(f) != 0) st = parity_diag_set(diag, PARITY_E_IO, "%s: write failed", out_path);
done:
    parity_model_runner_free(r);
    free(seq), free(X), free(cap_buf), free(perm), free(router);
    return st;
}

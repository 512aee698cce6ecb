/* model_moe_run: the MoE FFN of one position under a forward path: router GEMM, routing
 * (moe.h's softmax, top-k tie rule, renormalisation; fp64 for the reference), dispatch to the
 * K selected experts and the shared expert (SwiGLU GEMMs with the path's split-K and TP), and
 * the combine in the spec's order and buffer, with expert parallelism: each rank sums the terms
 * of its own experts, the partials travel in the storage dtype (the all-to-all combine), and
 * the home rank adds them in rank order, or in arrival order when communication overlaps
 * computation. The arithmetic is written out in docs/moe-model.md. Not here: building the
 * experts (model_moe.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_impl.h"

struct model_moe_run {
    int E, K, SH, G;
    double *buf;
    double *ws1, *ws3, *ws2; /* shared (L, SH, D), (L, SH, D), (L, D, SH) */
    double *wx1, *wx3, *wx2; /* routed (L, E, G, D), (L, E, G, D), (L, E, D, G) x scale */
    double *wr, *br;         /* router (L, E, D), bias (L, E) */
    double *y, *s, *lg, *p, *w, *part; /* scratch: (K, D), (D), (E), (E), (K), (8, D) */
    int32_t *ids;            /* (K) */
    int32_t *rec_ids;        /* (L, S, K) */
    double *rec_p;           /* (L, S, E) */
};

#define ST(x) model_rnd(r, r->p.storage, (x))
#define C(x) model_rnd(r, cd, (x))

void model_moe_runner_free(parity_model_runner_t *r)
{
    if (!r || !r->moe) return;
    free(r->moe->buf);
    free(r->moe->ids);
    free(r->moe->rec_ids);
    free(r->moe);
    r->moe = NULL;
}

parity_status_t model_moe_runner_new(parity_model_runner_t *r, parity_diag_t *diag)
{
    const model_moe_t *mm = r->m->moe;
    const parity_model_path_t *p = &r->p;
    if (p->moe.shared == PARITY_MOE_SHARED_NONE)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "path: moe:shared=none: the upcycled model has a shared expert "
                               "(shared=before or shared=after)");
    if (p->ep > mm->E || mm->E % p->ep)
        return parity_diag_set(diag, PARITY_E_INVALID, "path: ep%d: expected ranks dividing E (%d)",
                               p->ep, mm->E);
    if (p->tp > mm->G)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "path: tp%d: more ranks than units per expert (%d)", p->tp, mm->G);
    struct model_moe_run *q = calloc(1, sizeof *q);
    if (!q) return parity_diag_set(diag, PARITY_E_NOMEM, "model runner: out of memory");
    r->moe = q;
    size_t L = (size_t)r->L, D = (size_t)r->D, F = (size_t)r->F, S = (size_t)r->S;
    size_t E = (size_t)mm->E, K = (size_t)mm->K, SH = (size_t)mm->n_shared, G = (size_t)mm->G;
    q->E = mm->E, q->K = mm->K, q->SH = mm->n_shared, q->G = mm->G;
    size_t n = 3 * L * SH * D + 3 * L * E * G * D + L * E * D + L * E + K * D + D + 2 * E + K +
               8 * D + L * S * E;
    q->buf = malloc(n * sizeof(double));
    q->ids = malloc(K * sizeof *q->ids);
    q->rec_ids = malloc(L * S * K * sizeof *q->rec_ids);
    if (!q->buf || !q->ids || !q->rec_ids)
        return parity_diag_set(diag, PARITY_E_NOMEM, "model runner: out of memory");
    double *b = q->buf;
    q->ws1 = b, b += L * SH * D;
    q->ws3 = b, b += L * SH * D;
    q->ws2 = b, b += L * D * SH;
    q->wx1 = b, b += L * E * G * D;
    q->wx3 = b, b += L * E * G * D;
    q->wx2 = b, b += L * E * D * G;
    q->wr = b, b += L * E * D;
    q->br = b, b += L * E;
    q->y = b, b += K * D;
    q->s = b, b += D;
    q->lg = b, b += E;
    q->p = b, b += E;
    q->w = b, b += K;
    q->part = b, b += 8 * D;
    q->rec_p = b;
    memset(q->rec_ids, 0, L * S * K * sizeof *q->rec_ids);
    memset(q->rec_p, 0, L * S * E * sizeof *q->rec_p);
    /* Gather the units of each expert from the dense tensors (already in the storage dtype);
     * the routed w2 is multiplied by the routed scaling factor, a power of two: exact. */
    const model_weights_t *w = &r->w;
    for (size_t l = 0; l < L; l++) {
        const int32_t *perm = mm->perm + l * F;
        const double *w1 = w->w1 + l * F * D, *w3 = w->w3 + l * F * D, *w2 = w->w2 + l * D * F;
        for (size_t u = 0; u < F; u++) {
            size_t src = (size_t)perm[u];
            double *d1, *d3, *d2;
            size_t stride2, col;
            double sc = 1.0;
            if (u < SH) {
                d1 = q->ws1 + (l * SH + u) * D, d3 = q->ws3 + (l * SH + u) * D;
                d2 = q->ws2 + l * D * SH, stride2 = SH, col = u;
            } else {
                size_t e = (u - SH) / G, g = (u - SH) % G;
                d1 = q->wx1 + ((l * E + e) * G + g) * D, d3 = q->wx3 + ((l * E + e) * G + g) * D;
                d2 = q->wx2 + (l * E + e) * D * G, stride2 = G, col = g;
                sc = (double)mm->scale;
            }
            memcpy(d1, w1 + src * D, D * sizeof(double));
            memcpy(d3, w3 + src * D, D * sizeof(double));
            for (size_t j = 0; j < D; j++) d2[j * stride2 + col] = ST(sc * w2[j * F + src]);
        }
        for (size_t e = 0; e < E; e++) {
            const float *rw = mm->router + (l * E + e) * (D + 1);
            for (size_t j = 0; j < D; j++) q->wr[(l * E + e) * D + j] = ST((double)rw[j]);
            q->br[l * E + e] = ST((double)rw[D]);
        }
    }
    return PARITY_OK;
}

/* The routing of the fp64 reference: softmax in double (sum in expert order), top-k with the
 * tie rule, renormalised in double. */
static void route_fp64(const parity_moe_spec_t *spec, const double *lg, int E, int K, double *p,
                       int32_t *ids, double *w)
{
    double mx = -INFINITY, s = 0;
    for (int e = 0; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E; e++) s += (p[e] = exp(lg[e] - mx));
    for (int e = 0; e < E; e++) p[e] /= s;
    parity_moe_topk(p, (size_t)E, (size_t)K, spec->tie, ids);
    double t = 0;
    for (int j = 0; j < K; j++) t += (w[j] = p[ids[j]]);
    if (spec->renorm)
        for (int j = 0; j < K; j++) w[j] /= t;
}

/* splitmix64: the arrival order of EP partials is a pure function of (run seed, layer, position,
 * rank), a different one for every server run. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* acc (+)= w * y under the combine mode; the spec's "bf16" (buffer, product) means the
 * storage dtype. The product of two fp32 values is exact in double, and so is the sum of two
 * values of the same narrow format unless their exponents are ~29 (fp32) or ~45 (bf16) apart,
 * so rounding the double once is the correctly rounded operation the moe module computes (with
 * bf16 storage these are its modes; the rare inexact sums are the only difference). */
static double comb_add(const parity_model_runner_t *r, parity_moe_combine_t mode, double acc,
                       double w, double y)
{
    parity_model_dtype_t cd = model_cmp_dtype(r);
    double prod = w * y;
    switch (mode) {
    case PARITY_MOE_COMBINE_BF16BUF: return ST(acc + ST(prod));
    case PARITY_MOE_COMBINE_BF16PROD: return C(acc + ST(prod));
    case PARITY_MOE_COMBINE_FP32ACC: return C(acc + C(prod));
    case PARITY_MOE_COMBINE_FP32FMA:
    default: return C(acc + prod);
    }
}

/* The combine with R expert-parallel ranks (R 1 included, for dtypes other than bf16). */
static void combine_ep(parity_model_runner_t *r, int l, int pos, double *out)
{
    struct model_moe_run *q = r->moe;
    const parity_moe_spec_t *sp = &r->p.moe;
    parity_model_dtype_t cd = model_cmp_dtype(r);
    const int D = r->D, K = q->K, R = r->p.ep, per = q->E / R;
    int order[64], rk[8], nrk = 0;
    /* the slots in the spec's order: slot order, or ascending expert id */
    for (int j = 0; j < K; j++) order[j] = j;
    if (sp->order == PARITY_MOE_ORDER_EXPERT)
        for (int j = 1; j < K; j++)
            for (int i = j; i > 0 && q->ids[order[i - 1]] > q->ids[order[i]]; i--) {
                int t = order[i];
                order[i] = order[i - 1], order[i - 1] = t;
            }
    /* the ranks that hold an expert of this token, in rank order or arrival order */
    for (int k = 0; k < R; k++)
        for (int j = 0; j < K; j++)
            if (q->ids[j] / per == k) {
                rk[nrk++] = k;
                break;
            }
    if (r->p.ep_overlap) {
        uint64_t key[8];
        for (int i = 0; i < nrk; i++)
            key[i] = mix64(r->run_seed * 0x100000001b3ULL ^ mix64(((uint64_t)l << 40) ^
                                                                 ((uint64_t)pos << 8) ^ (uint64_t)rk[i]));
        for (int i = 1; i < nrk; i++)
            for (int j = i; j > 0 && key[j - 1] > key[j]; j--) {
                uint64_t tk = key[j];
                key[j] = key[j - 1], key[j - 1] = tk;
                int t = rk[j];
                rk[j] = rk[j - 1], rk[j - 1] = t;
            }
    }
    int before = sp->shared == PARITY_MOE_SHARED_BEFORE;
    for (int c = 0; c < D; c++) {
        double tot = before ? q->s[c] : 0.0;
        if (R == 1) {
            for (int i = 0; i < K; i++)
                tot = comb_add(r, sp->combine, tot, q->w[order[i]], q->y[(size_t)order[i] * D + c]);
        } else {
            for (int i = 0; i < nrk; i++) {
                double acc = 0;
                for (int j = 0; j < K; j++) {
                    int sl = order[j];
                    if (q->ids[sl] / per != rk[i]) continue;
                    acc = comb_add(r, sp->combine, acc, q->w[sl], q->y[(size_t)sl * D + c]);
                }
                acc = ST(acc); /* the partial travels in the activation dtype */
                tot = sp->combine == PARITY_MOE_COMBINE_BF16BUF ? ST(tot + acc) : C(tot + acc);
            }
        }
        tot = ST(tot);
        if (sp->shared == PARITY_MOE_SHARED_AFTER) tot = ST(tot + q->s[c]);
        out[c] = tot;
    }
}

void model_moe_ffn(parity_model_runner_t *r, int l, int pos, const double *xb, double *delta,
                   size_t rows)
{
    struct model_moe_run *q = r->moe;
    const parity_moe_spec_t *sp = &r->p.moe;
    parity_model_dtype_t cd = model_cmp_dtype(r);
    const int D = r->D, E = q->E, K = q->K, G = q->G, SH = q->SH;
    const size_t lu = (size_t)l;
    /* gate: the router GEMM, its output stored like any activation, plus the bias */
    model_gemm(r, q->lg, q->wr + lu * E * D, xb, E, D, rows, 0);
    for (int e = 0; e < E; e++) q->lg[e] = ST(C(q->lg[e] + q->br[lu * E + e]));
    if (r->p.storage == PARITY_MODEL_FP64 && sp->softmax == PARITY_MOE_SOFTMAX_FP32) {
        route_fp64(sp, q->lg, E, K, q->p, q->ids, q->w);
    } else {
        /* moe.h's routing on fp32 logits; weights cast to the storage dtype when asked */
        parity_moe_spec_t s2 = *sp;
        s2.weights = PARITY_MOE_W_FP32;
        for (int e = 0; e < E; e++) q->lg[e] = (double)(float)q->lg[e];
        parity_moe_softmax(sp->softmax, q->lg, (size_t)E, q->p);
        parity_moe_route(&s2, q->lg, (size_t)E, (size_t)K, q->ids, q->w);
        if (sp->weights == PARITY_MOE_W_BF16)
            for (int j = 0; j < K; j++) q->w[j] = ST(q->w[j]);
    }
    memcpy(q->rec_ids + (lu * r->S + (size_t)pos) * K, q->ids, (size_t)K * sizeof *q->ids);
    memcpy(q->rec_p + (lu * r->S + (size_t)pos) * E, q->p, (size_t)E * sizeof *q->p);
    if (r->cap) model_cap_route(r, l, (size_t)pos, q->ids, q->w, q->p);
    /* dispatch: the selected experts and the shared expert, each a SwiGLU MLP */
    for (int j = 0; j < K; j++) {
        size_t e = lu * E + (size_t)q->ids[j];
        model_gemm(r, r->hb, q->wx1 + e * G * D, xb, G, D, rows, 0);
        model_gemm(r, r->hb2, q->wx3 + e * G * D, xb, G, D, rows, 0);
        model_swiglu(r, r->hb, r->hb2, G, r->p.moe_fused);
        model_gemm(r, q->y + (size_t)j * D, q->wx2 + e * D * G, r->hb, D, G, rows, 1);
    }
    model_gemm(r, r->hb, q->ws1 + lu * SH * D, xb, SH, D, rows, 0);
    model_gemm(r, r->hb2, q->ws3 + lu * SH * D, xb, SH, D, rows, 0);
    model_swiglu(r, r->hb, r->hb2, SH, r->p.moe_fused);
    model_gemm(r, q->s, q->ws2 + lu * D * SH, r->hb, D, SH, rows, 1);
    /* combine: bf16 storage on one rank is the moe module's combine, bit for bit */
    if (r->p.storage == PARITY_MODEL_BF16 && r->p.ep == 1)
        parity_moe_combine(sp, q->ids, q->w, (size_t)K, q->y, q->s, (size_t)D, delta);
    else
        combine_ep(r, l, pos, delta);
}

parity_status_t parity_model_runner_routing(const parity_model_runner_t *r, const int32_t **ids,
                                            const double **probs)
{
    if (!r || !r->moe) return PARITY_E_INVALID;
    if (ids) *ids = r->moe->rec_ids;
    if (probs) *probs = r->moe->rec_p;
    return PARITY_OK;
}

void parity_model_runner_set_run_seed(parity_model_runner_t *r, uint64_t seed)
{
    if (r) r->run_seed = seed;
}

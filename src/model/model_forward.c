/* model_forward: the arithmetic of every forward path, one position at a time against a KV
 * cache. All values are held in doubles; each operation is rounded explicitly to the dtype the
 * path computes or stores it in, so one code path serves the fp64 reference (no rounding), the
 * fp32 path (run.c's operation order, rounded to fp32 after every operation) and the bf16/fp16
 * serving paths (fp32 math, bf16 storage). Rounding a double result of +, -, * of two fp32 values
 * to fp32 is exact emulation of fp32 arithmetic: the double holds the exact result or a rounding
 * of it with 53 >= 2*24 + 2 bits, and such double rounding is innocuous (Figueroa 1995).
 * What deliberately is not modelled: vectorized reduction orders of a particular CPU/GPU; every
 * reduction order here is named in docs/model.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/reduce.h"
#include "src/model/model_impl.h"

/* The rounding, GEMM and SwiGLU primitives are model_math.c's (below this file and
 * model_moe_run.c, which both use them); here under the short names the arithmetic reads with. */
#define rnd model_rnd
#define cmp_dtype model_cmp_dtype
#define C(x) rnd(r, cd, (x))          /* in-op math result */
#define ST(x) rnd(r, r->p.storage, (x)) /* a value stored between ops */
#define c_exp model_exp
#define c_sqrt model_sqrt
#define gemm model_gemm

/* ------------------------------------------------------------------------------------------ */
/* RMSNorm, residual add, RoPE, attention                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Pairwise sum (a block reduction's shape) of sq[lo..hi) in the compute dtype. */
static double pair_sum(const parity_model_runner_t *r, const double *sq, int lo, int hi)
{
    if (hi - lo == 1) return sq[lo];
    parity_model_dtype_t cd = cmp_dtype(r);
    int mid = lo + (hi - lo + 1) / 2;
    return C(pair_sum(r, sq, lo, mid) + pair_sum(r, sq, mid, hi));
}

/* out = RMSNorm(x) * w as run.c orders it: ss = sum x^2; ss /= D; ss += eps; inv = 1/sqrt(ss);
 * out_j = w_j * (inv * x_j). With narrow storage, inv * x_j is rounded to the storage dtype
 * before the weight multiply (as HF LlamaRMSNorm and vLLM's kernels do). ss_pre, when >= 0, is
 * a sum of squares already computed (the fused kernel's, over the unrounded sum). The unfused
 * sum of squares is sequential; the fused kernel's is pairwise. */
static void rmsnorm(parity_model_runner_t *r, double *out, const double *x, const double *w,
                    double ss_pre)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    int D = r->D;
    double ss = ss_pre;
    if (ss < 0) {
        if (r->p.fused_norm) {
            for (int j = 0; j < D; j++) r->att[j] = C(x[j] * x[j]);
            ss = pair_sum(r, r->att, 0, D);
        } else {
            ss = 0;
            for (int j = 0; j < D; j++) ss = C(ss + C(x[j] * x[j]));
        }
    }
    double eps = cd == PARITY_MODEL_FP64 ? 1e-5 : (double)1e-5f;
    ss = C(ss / (double)D);
    ss = C(ss + eps);
    double inv = C(1.0 / c_sqrt(cd, ss));
    int narrow = r->p.storage != cd;
    for (int j = 0; j < D; j++) {
        double n = C(inv * x[j]);
        if (narrow) n = ST(n);
        out[j] = ST(C(w[j] * n));
    }
}

/* x += delta, then out = RMSNorm(x) * w. Unfused: the sum is stored (rounded) and the norm reads
 * it back. Fused (vLLM fused_add_rms_norm): the sum of squares is taken over the unrounded
 * sum z, the residual is stored rounded, and the normalization reads the rounded residual. */
static void add_norm(parity_model_runner_t *r, const double *delta, const double *w, double *out)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    int D = r->D;
    double *x = r->x;
    if (!r->p.fused_norm) {
        for (int j = 0; j < D; j++) x[j] = ST(C(x[j] + delta[j]));
        rmsnorm(r, out, x, w, -1);
        return;
    }
    for (int j = 0; j < D; j++) {
        double z = C(x[j] + delta[j]);
        r->att[j] = C(z * z);
        x[j] = ST(z);
    }
    rmsnorm(r, out, x, w, pair_sum(r, r->att, 0, D));
}

/* RoPE on adjacent pairs (run.c): pair i of a head rotates by pos * 10000^(-(i % hs)/hs). The
 * fp32 paths use powf/cosf/sinf as run.c does; narrow storage rounds cos/sin and each product to
 * the storage dtype (HF's cos.to(dtype), q * cos + rotate(q) * sin in bf16). */
static void rope(parity_model_runner_t *r, double *q, double *k, int pos)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    for (int i = 0; i < r->D; i += 2) {
        int hd = i % r->hs;
        double fcr, fci;
        if (cd == PARITY_MODEL_FP64) {
            double val = pos * pow(10000.0, -(double)hd / r->hs);
            fcr = cos(val), fci = sin(val);
        } else {
            float freq = 1.0f / powf(10000.0f, (float)hd / (float)r->hs);
            float val = (float)pos * freq;
            fcr = ST(cosf(val)), fci = ST(sinf(val));
        }
        int rotn = i < r->kvd ? 2 : 1;
        for (int v = 0; v < rotn; v++) {
            double *vec = v == 0 ? q : k;
            double v0 = vec[i], v1 = vec[i + 1];
            vec[i] = ST(C(ST(C(v0 * fcr)) - ST(C(v1 * fci))));
            vec[i + 1] = ST(C(ST(C(v0 * fci)) + ST(C(v1 * fcr))));
        }
    }
}

/* Prefill ("eager") attention, as run.c and HF eager: scores, a two-pass softmax normalized
 * before P.V, P.V accumulated over t in order. Narrow storage rounds QK^T, the scaled scores and
 * P to the storage dtype (bf16 matmul outputs, softmax(dtype=fp32).to(bf16)). */
static void attn_eager(parity_model_runner_t *r, double *out, const double *q, const double *kc,
                       const double *vc, int pos)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    double sq = c_sqrt(cd, (double)r->hs);
    double *att = r->att;
    double mx = -INFINITY;
    for (int t = 0; t <= pos; t++) {
        const double *k = kc + (size_t)t * r->kvd;
        double s = 0;
        for (int j = 0; j < r->hs; j++) s = C(s + C(q[j] * k[j]));
        s = ST(C(ST(s) / sq));
        att[t] = s;
        if (s > mx) mx = s;
    }
    double sum = 0;
    for (int t = 0; t <= pos; t++) {
        att[t] = C(c_exp(cd, C(att[t] - mx)));
        sum = C(sum + att[t]);
    }
    for (int t = 0; t <= pos; t++) att[t] = ST(C(att[t] / sum));
    for (int j = 0; j < r->hs; j++) {
        double o = 0;
        for (int t = 0; t <= pos; t++) o = C(o + C(att[t] * vc[(size_t)t * r->kvd + j]));
        out[j] = ST(o);
    }
}

/* Decode attention (split-KV online softmax, as flash-decoding / paged-attention kernels): keys
 * in blocks of 16; per block a max, an unnormalized sum and P.V with P rounded to the storage
 * dtype for the PV product (FlashAttention-2 feeds P to the MMA in bf16) while the sum uses
 * unrounded P; blocks merged in order with exp rescaling; one division at the end. Scores stay
 * in the compute dtype. */
#define KV_BLOCK 16
static void attn_decode(parity_model_runner_t *r, double *out, const double *q, const double *kc,
                        const double *vc, int pos)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    double sq = c_sqrt(cd, (double)r->hs);
    int hs = r->hs;
    double *att = r->att, *O = r->part, *ob = r->part + hs;
    double M = 0, Lsum = 0;
    for (int b0 = 0; b0 <= pos; b0 += KV_BLOCK) {
        int b1 = b0 + KV_BLOCK <= pos + 1 ? b0 + KV_BLOCK : pos + 1;
        double mb = -INFINITY;
        for (int t = b0; t < b1; t++) {
            const double *k = kc + (size_t)t * r->kvd;
            double s = 0;
            for (int j = 0; j < hs; j++) s = C(s + C(q[j] * k[j]));
            s = C(s / sq);
            att[t] = s;
            if (s > mb) mb = s;
        }
        double lb = 0;
        for (int j = 0; j < hs; j++) ob[j] = 0;
        for (int t = b0; t < b1; t++) {
            double e = C(c_exp(cd, C(att[t] - mb)));
            lb = C(lb + e);
            double ep = ST(e);
            for (int j = 0; j < hs; j++) ob[j] = C(ob[j] + C(ep * vc[(size_t)t * r->kvd + j]));
        }
        if (b0 == 0) {
            M = mb, Lsum = lb;
            for (int j = 0; j < hs; j++) O[j] = ob[j];
        } else {
            double Mn = mb > M ? mb : M;
            double a = C(c_exp(cd, C(M - Mn))), bb = C(c_exp(cd, C(mb - Mn)));
            Lsum = C(C(Lsum * a) + C(lb * bb));
            for (int j = 0; j < hs; j++) O[j] = C(C(O[j] * a) + C(ob[j] * bb));
            M = Mn;
        }
    }
    for (int j = 0; j < hs; j++) out[j] = ST(C(O[j] / Lsum));
}

/* ------------------------------------------------------------------------------------------ */
/* One position                                                                               */
/* ------------------------------------------------------------------------------------------ */

static void capture(const parity_model_runner_t *r, double *hidden, size_t n_total, int slice,
                    size_t t, const double *v)
{
    if (!hidden) return;
    memcpy(hidden + ((size_t)slice * n_total + t) * (size_t)r->D, v, (size_t)r->D * sizeof *v);
}

void model_run_positions(parity_model_runner_t *r, const int32_t *tokens, size_t t0, size_t t1,
                         size_t rows, double *logits, double *hidden, size_t n_total)
{
    const int D = r->D, F = r->F, L = r->L, hs = r->hs, kvd = r->kvd, S = r->S;
    const int qpk = r->H / r->KVH; /* query heads per kv head */
    const model_weights_t *w = &r->w;
    for (size_t t = t0; t < t1; t++) {
        int pos = (int)t;
        const double *e = w->emb + (size_t)tokens[t] * D;
        if (t >= r->img0 && t < r->img0 + r->n_img) e = r->img + (t - r->img0) * (size_t)D;
        memcpy(r->x, e, (size_t)D * sizeof(double));
        capture(r, hidden, n_total, 0, t, r->x);
        if (r->cap) model_cap_out(r, 0, t, r->x, NULL), model_cap_in(r, 1, t, r->x, NULL);
        rmsnorm(r, r->xb, r->x, w->rms_att, -1);
        if (r->cap) model_cap_out(r, 1, t, r->x, r->xb);
        for (int l = 0; l < L; l++) {
            double *kc = r->kcache + (size_t)l * S * kvd, *vc = r->vcache + (size_t)l * S * kvd;
            double *k = kc + (size_t)pos * kvd, *v = vc + (size_t)pos * kvd;
            if (r->cap) model_cap_in(r, MODEL_MOD_LAYER(l, 1), t, r->xb, NULL);
            gemm(r, r->q, w->wq + (size_t)l * D * D, r->xb, D, D, rows, 0);
            gemm(r, k, w->wk + (size_t)l * kvd * D, r->xb, kvd, D, rows, 0);
            gemm(r, v, w->wv + (size_t)l * kvd * D, r->xb, kvd, D, rows, 0);
            rope(r, r->q, k, pos);
            for (int h = 0; h < r->H; h++) {
                size_t ko = (size_t)(h / qpk) * hs;
                if (r->p.kvcache)
                    attn_decode(r, r->xb + h * hs, r->q + h * hs, kc + ko, vc + ko, pos);
                else
                    attn_eager(r, r->xb + h * hs, r->q + h * hs, kc + ko, vc + ko, pos);
            }
            gemm(r, r->delta, w->wo + (size_t)l * D * D, r->xb, D, D, rows, 1);
            if (r->cap) {
                model_cap_out(r, MODEL_MOD_LAYER(l, 1), t, r->delta, NULL);
                model_cap_in(r, MODEL_MOD_LAYER(l, 2), t, r->x, r->delta);
            }
            add_norm(r, r->delta, w->rms_ffn + (size_t)l * D, r->xb);
            if (r->cap) {
                model_cap_out(r, MODEL_MOD_LAYER(l, 2), t, r->x, r->xb);
                model_cap_in(r, MODEL_MOD_LAYER(l, 3), t, r->xb, NULL);
            }
            if (r->cap_ffn)
                memcpy(r->cap_ffn + ((size_t)l * S + (size_t)pos) * D, r->xb, (size_t)D * sizeof(double));
            if (r->moe) {
                model_moe_ffn(r, l, pos, r->xb, r->delta, rows);
            } else {
                gemm(r, r->hb, w->w1 + (size_t)l * F * D, r->xb, F, D, rows, 0);
                gemm(r, r->hb2, w->w3 + (size_t)l * F * D, r->xb, F, D, rows, 0);
                model_swiglu(r, r->hb, r->hb2, F, 0);
                gemm(r, r->delta, w->w2 + (size_t)l * D * F, r->hb, D, F, rows, 1);
            }
            if (r->cap) {
                model_cap_out(r, MODEL_MOD_LAYER(l, 3), t, r->delta, NULL);
                model_cap_in(r, MODEL_MOD_LAYER(l + 1, 0), t, r->x, r->delta);
            }
            add_norm(r, r->delta, l + 1 < L ? w->rms_att + (size_t)(l + 1) * D : w->rms_final,
                     r->xb);
            if (r->cap) model_cap_out(r, MODEL_MOD_LAYER(l + 1, 0), t, r->x, r->xb);
            capture(r, hidden, n_total, l + 1, t, r->x);
        }
        capture(r, hidden, n_total, L + 1, t, r->xb);
        if (r->cap) model_cap_in(r, MODEL_MOD_LAYER(L, 1), t, r->xb, NULL);
        if (logits) gemm(r, logits + (t - t0) * (size_t)r->V, w->wcls, r->xb, r->V, D, rows, 0);
        if (r->cap && logits) model_cap_out(r, MODEL_MOD_LAYER(L, 1), t, logits + (t - t0) * (size_t)r->V, NULL);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Runner                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void convert(parity_model_runner_t *r, double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = rnd(r, r->p.storage, (double)src[i]);
}

parity_status_t parity_model_runner_new(const parity_model_t *m, const parity_model_path_t *p,
                                        parity_model_runner_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!m || !p || !out) return parity_diag_set(diag, PARITY_E_INVALID, "model runner: NULL argument");
    const parity_model_config_t *c = &m->cfg;
    if (p->tp < 1 || p->tp > 8 || c->n_heads % p->tp || p->tp > c->hidden_dim)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "path: tp%d: expected 1..8 ranks dividing n_heads (%d)", p->tp,
                               c->n_heads);
    if ((p->moe_fused || p->moe_set || p->ep > 1) && !m->moe)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "path: fusedmoe, moe: and ep need an MoE model (--moe)");
    if ((unsigned)p->storage > 3 || (unsigned)p->accum > 3 || (unsigned)p->hop > 3 ||
        (unsigned)p->allreduce > 2 || p->splitk < 0 || p->splitk > 16 || p->batch < 0 ||
        p->batch > 64)
        return parity_diag_set(diag, PARITY_E_INVALID, "path: a field is out of range");
    parity_model_runner_t *r = calloc(1, sizeof *r);
    if (!r) return parity_diag_set(diag, PARITY_E_NOMEM, "model runner: out of memory");
    r->m = m;
    r->p = *p;
    if (!r->p.hop_set) r->p.hop = r->p.storage;
    r->D = c->dim, r->F = c->hidden_dim, r->L = c->n_layers, r->H = c->n_heads;
    r->KVH = c->n_kv_heads, r->V = c->vocab_size, r->S = c->seq_len;
    r->hs = r->D / r->H, r->kvd = r->hs * r->KVH;
    parity_format_get("bf16", &r->fmt_bf16, NULL);
    parity_format_get("fp16", &r->fmt_fp16, NULL);
    size_t D = (size_t)r->D, F = (size_t)r->F, L = (size_t)r->L, V = (size_t)r->V;
    size_t kvd = (size_t)r->kvd, S = (size_t)r->S;
    size_t sizes[12] = {V * D, L * D, L * D * D, L * kvd * D, L * kvd * D, L * D * D,
                        L * D,  L * F * D, L * D * F, L * F * D, D,
                        c->shared_classifier ? 0 : V * D};
    size_t nw = 0;
    for (int i = 0; i < 12; i++) nw += sizes[i];
    size_t nscratch = 4 * D + S + D + 2 * F + 2 * (size_t)(r->hs > 8 ? r->hs : 8) + 16 + 8 * (size_t)D;
    r->wbuf = malloc((nw + 2 * L * S * kvd + nscratch) * sizeof(double));
    if (!r->wbuf) {
        free(r);
        return parity_diag_set(diag, PARITY_E_NOMEM, "model runner: out of memory");
    }
    double **dst[12] = {&r->w.emb, &r->w.rms_att, &r->w.wq, &r->w.wk, &r->w.wv, &r->w.wo,
                        &r->w.rms_ffn, &r->w.w1, &r->w.w2, &r->w.w3, &r->w.rms_final, &r->w.wcls};
    const float *src[12] = {m->w.emb, m->w.rms_att, m->w.wq, m->w.wk, m->w.wv, m->w.wo,
                            m->w.rms_ffn, m->w.w1, m->w.w2, m->w.w3, m->w.rms_final, m->w.wcls};
    double *q = r->wbuf;
    for (int i = 0; i < 12; i++) {
        *dst[i] = q;
        convert(r, q, src[i], sizes[i]);
        q += sizes[i];
    }
    if (c->shared_classifier) r->w.wcls = r->w.emb;
    r->kcache = q, q += L * S * kvd;
    r->vcache = q, q += L * S * kvd;
    r->x = q, q += D;
    r->xb = q, q += D;
    r->delta = q, q += D;
    r->q = q, q += D;
    r->att = q, q += S + D; /* scores over S positions; squares over D in the norms */
    r->hb = q, q += F;
    r->hb2 = q, q += F;
    r->part = q, q += 2 * (size_t)(r->hs > 8 ? r->hs : 8) + 16;
    r->arpart = q;
    r->img = malloc((size_t)PARITY_MODEL_MAX_PATCHES * D * sizeof(double));
    if (!r->img) {
        parity_model_runner_free(r);
        return parity_diag_set(diag, PARITY_E_NOMEM, "model runner: out of memory");
    }
    if (m->moe) {
        parity_status_t st = model_moe_runner_new(r, diag);
        if (st != PARITY_OK) {
            parity_model_runner_free(r);
            return st;
        }
    }
    *out = r;
    return PARITY_OK;
}

void parity_model_runner_free(parity_model_runner_t *r)
{
    if (!r) return;
    model_moe_runner_free(r);
    free(r->img);
    free(r->wbuf);
    free(r->companions);
    free(r);
}

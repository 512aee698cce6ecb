/* attention_bwd: the attention backward as FlashAttention computes it, dQ, dK, dV (H,T,Dh) from
 * Q, K, V, O, dO (H,T,Dh) and the forward's LSE (H,T), with an fp64 reference and the error-model
 * data derived in docs/ops/attention.md ("Backward"). P is recomputed from the given LSE and
 * D_i = dO_i . O_i from the given O, as FlashAttention's backward does.
 * Deliberately not here: the kernels (ops/attention/kernels.c), the forward (ops/attention/attention.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/format/format_fast.h"

#define ATT_STREAM_DO 0x4154440000000000ull

typedef struct {
    const double *Q, *K, *V, *dO, *LSE, *D, *Dabs; /* (H,T,Dh) / (H,T) exact input values */
    int64_t T, dh, H;
    double scale, softcap;
    int causal;
    parity_ref_output_t *out; /* [3]: dQ, dK, dV (NULL: values only, into vals) */
    double *vals[3];          /* when out is NULL: (H,T,Dh) dQ, dK, dV */
} bwd_t;

typedef struct {
    double P, dsr;   /* P_ij and the raw-score gradient g·P(dP - D) */
    double wP;       /* P's relative error in units of γ_{Dh+2} (docs: a + r^P) */
    double Edsr;     /* dsr's absolute error in the same units */
} pair_t;

static void pair_terms(const bwd_t *b, int64_t h, int64_t i, int64_t j, pair_t *p)
{
    int64_t dh = b->dh, ri = h * b->T + i, rj = h * b->T + j;
    const double *q = b->Q + ri * dh, *k = b->K + rj * dh, *v = b->V + rj * dh, *go = b->dO + ri * dh;
    double s = 0, a = 0, dP = 0, bb = 0;
    for (int64_t c = 0; c < dh; c++) {
        s += q[c] * k[c];
        a += fabs(q[c] * k[c]);
        dP += go[c] * v[c];
        bb += fabs(go[c] * v[c]);
    }
    s *= b->scale;
    a *= fabs(b->scale);
    double c = b->softcap, th = c > 0 ? tanh(s / c) : 0, t = c > 0 ? c * th : s;
    double g = c > 0 ? 1.0 - th * th : 1.0, L = b->LSE[ri];
    p->P = exp(t - L);
    /* P = exp(t - LSE): the score (a), the subtraction |t - LSE|, expf 4, the exp2 domain's
     * conversions of t and LSE (2|t| + 2|LSE|), the softcap's 2|s| + 5|t|. */
    p->wP = a + fabs(t - L) + 4.0 + 2.0 * fabs(t) + 2.0 * fabs(L) +
            (c > 0 ? 2.0 * fabs(s) + 5.0 * fabs(t) : 0.0);
    double dd = dP - b->D[ri], dS = p->P * dd;
    /* dS = P (dP - D): P's error, the two Dh-term dot products, the subtraction and product. */
    double EdS = fabs(dS) * (p->wP + 1.0) + p->P * (bb + b->Dabs[ri] + fabs(dd));
    p->dsr = g * dS;
    /* dsr = g dS with g = 1 - tanh^2(s/c): g's sensitivity to the score error (|dg/ds| a =
     * 2|th| g a / c), tanhf, the square and 1 - x (8 th^2 + 1), the product (|dsr|). */
    p->Edsr = g * EdS + (c > 0 ? fabs(dS) * (2.0 * fabs(th) * g / c * a + 8.0 * th * th + 1.0) : 0.0) +
              fabs(p->dsr);
}

/* dQ rows r = h*T + i: Σ over attended keys j. */
static void dq_rows(void *ctx, int64_t b0, int64_t e0, int thread)
{
    (void)thread;
    const bwd_t *b = ctx;
    int64_t T = b->T, dh = b->dh;
    for (int64_t r = b0; r < e0; r++) {
        int64_t h = r / T, i = r % T, kend = b->causal ? i + 1 : T;
        parity_ref_output_t *R = b->out ? &b->out[0] : NULL;
        double *y = R ? R->ref + r * dh : b->vals[0] + r * dh;
        double *sa = R ? R->s_acc + r * dh : NULL, *su = R ? R->s_up + r * dh : NULL;
        for (int64_t c = 0; c < dh; c++) {
            y[c] = 0;
            if (R) sa[c] = su[c] = 0;
        }
        for (int64_t j = 0; j < kend; j++) {
            pair_t p;
            pair_terms(b, h, i, j, &p);
            const double *k = b->K + (h * T + j) * dh;
            for (int64_t c = 0; c < dh; c++) {
                double term = b->scale * p.dsr * k[c];
                y[c] += term;
                if (R) {
                    sa[c] += fabs(term);
                    su[c] += fabs(b->scale * k[c]) * p.Edsr + 2.0 * fabs(term);
                }
            }
        }
        if (R) R->k[r] = kend;
    }
}

/* dK and dV rows r = h*T + j: Σ over the queries i that attend key j. */
static void dkv_rows(void *ctx, int64_t b0, int64_t e0, int thread)
{
    (void)thread;
    const bwd_t *b = ctx;
    int64_t T = b->T, dh = b->dh;
    for (int64_t r = b0; r < e0; r++) {
        int64_t h = r / T, j = r % T, i0 = b->causal ? j : 0;
        parity_ref_output_t *RK = b->out ? &b->out[1] : NULL, *RV = b->out ? &b->out[2] : NULL;
        double *yk = RK ? RK->ref + r * dh : b->vals[1] + r * dh;
        double *yv = RV ? RV->ref + r * dh : b->vals[2] + r * dh;
        for (int64_t c = 0; c < dh; c++) {
            yk[c] = yv[c] = 0;
            if (RK) RK->s_acc[r * dh + c] = RK->s_up[r * dh + c] = RV->s_acc[r * dh + c] = RV->s_up[r * dh + c] = 0;
        }
        for (int64_t i = i0; i < T; i++) {
            pair_t p;
            pair_terms(b, h, i, j, &p);
            const double *q = b->Q + (h * T + i) * dh, *go = b->dO + (h * T + i) * dh;
            for (int64_t c = 0; c < dh; c++) {
                double tk = b->scale * p.dsr * q[c], tv = p.P * go[c];
                yk[c] += tk;
                yv[c] += tv;
                if (RK) {
                    RK->s_acc[r * dh + c] += fabs(tk);
                    RK->s_up[r * dh + c] += fabs(b->scale * q[c]) * p.Edsr + 2.0 * fabs(tk);
                    RV->s_acc[r * dh + c] += fabs(tv);
                    RV->s_up[r * dh + c] += fabs(tv) * (p.wP + 1.0);
                }
            }
        }
        if (RK) RK->k[r] = RV->k[r] = T - i0;
    }
}

static void d_rows(bwd_t *b, const double *O, double *D, double *Dabs)
{
    for (int64_t r = 0; r < b->H * b->T; r++) {
        double s = 0, sa = 0;
        for (int64_t c = 0; c < b->dh; c++) {
            s += b->dO[r * b->dh + c] * O[r * b->dh + c];
            sa += fabs(b->dO[r * b->dh + c] * O[r * b->dh + c]);
        }
        D[r] = s;
        Dabs[r] = sa;
    }
}

void parity_ref_attention_bwd(const double *Q, const double *K, const double *V, const double *O,
                              const double *dO, const double *LSE, int64_t H, int64_t T, int64_t dh,
                              double scale, double softcap, int causal, double *dQ, double *dK,
                              double *dV)
{
    double *D = malloc((size_t)(2 * H * T) * sizeof *D);
    if (!D) return;
    bwd_t b = {Q, K, V, dO, LSE, D, D + H * T, T, dh, H, scale, softcap, causal, NULL, {dQ, dK, dV}};
    d_rows(&b, O, D, D + H * T);
    dq_rows(&b, 0, H * T, 0);
    dkv_rows(&b, 0, H * T, 0);
    free(D);
}

/* ---- building a case ------------------------------------------------------------------------ */

/* The case's private data (c->priv): the exact input values the diagnosis recomputes rows from,
 * D = rowsum(dO o O) of the given O, and the forward's O in fp64 before it was rounded to the
 * input dtype (what a kernel that recomputes O from Q, K, V has instead of the given O). */
typedef struct {
    double *Q, *K, *V, *O, *dO, *LSE, *D, *Dabs, *O64, *D64, *Dabs64;
} bwd_priv_t;

static void bwd_free_priv(parity_case_t *c)
{
    bwd_priv_t *p = c->priv;
    if (!p) return;
    free(p->Q);
    free(p->K);
    free(p->V);
    free(p->O);
    free(p->dO);
    free(p->LSE);
    free(p->D);
    free(p->O64);
    free(p->D64);
    free(p);
    c->priv = NULL;
}

typedef struct {
    int64_t T, dh;
    double scale, softcap;
    int causal;
    const double *Q, *K, *V;
    double *O, *LSE;
    int failed;
} fwd_ctx_t;

static void fwd_rows(void *p, int64_t b0, int64_t e0, int thread)
{
    (void)thread;
    fwd_ctx_t *g = p;
    int64_t T = g->T, dh = g->dh;
    double *w = malloc((size_t)(5 * T + 3 * dh) * sizeof *w);
    if (!w) {
        g->failed = 1;
        return;
    }
    for (int64_t r = b0; r < e0; r++) {
        int64_t h = r / T, i = r % T, k = g->causal ? i + 1 : T;
        double lsup;
        parity_ref_attention_row(g->Q + r * dh, g->K + h * T * dh, g->V + h * T * dh, k, dh, g->scale,
                                 g->softcap, g->O + r * dh, g->LSE + r, w + 5 * T, w + 5 * T + dh,
                                 &lsup, w);
    }
    free(w);
}

static parity_status_t bwd_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    (void)op;
    int64_t T = wl->n, dh = wl->d, H = wl->v;
    double *Q, *K, *V;
    parity_status_t st = parity_attention_gen(wl, seed, dt, c, &Q, &K, &V, diag);
    size_t ne = (size_t)(H * T * dh);
    double *O = NULL, *dO = NULL, *LSE = NULL, *D = NULL;
    if (st == PARITY_OK) {
        O = malloc(ne * sizeof *O);
        dO = malloc(ne * sizeof *dO);
        LSE = malloc((size_t)(H * T) * sizeof *LSE);
        D = malloc((size_t)(2 * H * T) * sizeof *D);
        int64_t shape[3] = {H, T, dh}, lshape[2] = {H, T};
        c->inputs[3] = parity_tensor_new("O", dt, 3, shape);
        c->inputs[4] = parity_tensor_new("dO", dt, 3, shape);
        /* LSE stays fp32 whatever the input dtype, as FlashAttention keeps it. */
        c->inputs[5] = parity_tensor_new("LSE", PARITY_DT_F32, 2, lshape);
        if (!O || !dO || !LSE || !D || !c->inputs[3] || !c->inputs[4] || !c->inputs[5]) st = PARITY_E_NOMEM;
    }
    if (st == PARITY_OK) {
        /* The forward in fp64, then O and LSE rounded to what the forward kernel hands over. */
        fwd_ctx_t f = {T, dh, c->attr_values[0], c->attr_values[1], c->attr_values[2] != 0, Q, K, V, O, LSE, 0};
        parity_parallel_for(H * T, 0, fwd_rows, &f);
        if (f.failed) st = PARITY_E_NOMEM;
    }
    double *O64 = st == PARITY_OK ? malloc(ne * sizeof *O64) : NULL;
    if (st == PARITY_OK && !O64) st = PARITY_E_NOMEM;
    if (st == PARITY_OK) {
        memcpy(O64, O, ne * sizeof *O64);
        for (size_t e = 0; e < ne; e++) {
            parity_tensor_set(&c->inputs[3]->view, (int64_t)e, O[e]);
            O[e] = parity_tensor_get(&c->inputs[3]->view, (int64_t)e);
        }
        for (int64_t r = 0; r < H * T; r++) {
            ((float *)c->inputs[5]->view.data)[r] = (float)LSE[r];
            LSE[r] = ((float *)c->inputs[5]->view.data)[r];
            /* dO: N(0,1) per row (the backward is linear in dO; its scale does not matter). */
            parity_rng_t rng;
            parity_rng_seed(&rng, seed, ATT_STREAM_DO + (uint64_t)r);
            for (int64_t e = 0; e < dh; e++) {
                parity_tensor_set(&c->inputs[4]->view, r * dh + e, parity_rng_normal(&rng));
                dO[r * dh + e] = parity_tensor_get(&c->inputs[4]->view, r * dh + e);
            }
        }
        const char *names[3] = {"dQ", "dK", "dV"};
        const char *kinds[3] = {"query", "key", "key"};
        for (int o = 0; o < 3 && st == PARITY_OK; o++) {
            st = parity_ref_output_alloc(&c->ref[o], names[o], kinds[o], H * T, dh, 0, 0, 1);
            /* m_up = Dh + 2 as in the forward: the Dh-term dot products (scores, dP, D) and
             * every u-sized rounding folded into s_up (docs/ops/attention.md, "Backward"). */
            c->ref[o].m_up = dh + 2;
            c->out_ndim[o] = 3;
            c->out_shape[o][0] = H;
            c->out_shape[o][1] = T;
            c->out_shape[o][2] = dh;
        }
    }
    if (st == PARITY_OK) {
        bwd_t b = {Q, K, V, dO, LSE, D, D + H * T, T, dh, H, c->attr_values[0], c->attr_values[1],
                   c->attr_values[2] != 0, c->ref, {NULL, NULL, NULL}};
        d_rows(&b, O, D, D + H * T);
        parity_parallel_for(H * T, 0, dq_rows, &b);
        parity_parallel_for(H * T, 0, dkv_rows, &b);
    }
    bwd_priv_t *pv = st == PARITY_OK ? calloc(1, sizeof *pv) : NULL;
    double *D64 = pv ? malloc((size_t)(2 * H * T) * sizeof *D64) : NULL;
    if (pv && D64) { /* kept for the diagnosis (bwd_rows_ref) */
        bwd_t b = {Q, K, V, dO, LSE, NULL, NULL, T, dh, H, 0, 0, 0, NULL, {NULL, NULL, NULL}};
        d_rows(&b, O64, D64, D64 + H * T);
        *pv = (bwd_priv_t){Q, K, V, O, dO, LSE, D, D + H * T, O64, D64, D64 + H * T};
        c->priv = pv;
        return PARITY_OK;
    }
    free(pv);
    free(D64);
    free(O64);
    free(Q);
    free(K);
    free(V);
    free(O);
    free(dO);
    free(LSE);
    free(D);
    return st == PARITY_OK ? PARITY_E_NOMEM : st;
}

/* ---- the diagnosis: rows recomputed (op.h param_ref, variant_ref) and emulated (op.h emulate) ---- */

/* Rows rows[0..n_rows) of output out (dQ, dK, dV) as bwd_build forms them, with the scale and
 * softcap given, dK times dkf / scale at the end (dkf = scale: the op's), and D from the given O
 * or, with recomputed, from the forward's O in fp64 (a kernel that recomputes O from Q, K, V). */
static parity_status_t bwd_rows_ref(const parity_case_t *c, int out, double scale, double cap, double dkf,
                                    int recomputed, const int64_t *rows, int64_t n_rows, double *ref,
                                    double *s_acc, double *s_up)
{
    const bwd_priv_t *p = c->priv;
    if (out < 0 || out > 2 || !p) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *Qv = &c->inputs[0]->view;
    int64_t H = Qv->shape[0], T = Qv->shape[1], dh = Qv->shape[2];
    size_t ne = (size_t)(H * T * dh);
    parity_ref_output_t R[3];
    memset(R, 0, sizeof R);
    double *b = malloc(ne * 6 * sizeof *b); /* dQ and dK share one set, dV has its own */
    int64_t *k = malloc((size_t)(H * T) * sizeof *k);
    if (!b || !k) {
        free(b);
        free(k);
        return PARITY_E_NOMEM;
    }
    for (int o = 0; o < 3; o++) {
        double *bo = o == 2 ? b + 3 * ne : b;
        R[o] = (parity_ref_output_t){.ref = bo, .s_acc = bo + ne, .s_up = bo + 2 * ne, .k = k};
    }
    bwd_t bb = {p->Q, p->K, p->V, p->dO, p->LSE, recomputed ? p->D64 : p->D, recomputed ? p->Dabs64 : p->Dabs,
                T, dh, H, scale, cap, c->attr_values[2] != 0, R, {NULL, NULL, NULL}};
    double f = out == 1 ? dkf / scale : 1.0, *bo = out == 2 ? b + 3 * ne : b;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t r = rows[q];
        if (out == 0)
            dq_rows(&bb, r, r + 1, 0);
        else
            dkv_rows(&bb, r, r + 1, 0);
        for (int64_t ch = 0; ch < dh; ch++) {
            size_t x = (size_t)(r * dh + ch);
            ref[q * dh + ch] = f * bo[x];
            s_acc[q * dh + ch] = fabs(f) * bo[ne + x];
            if (s_up) s_up[q * dh + ch] = fabs(f) * bo[2 * ne + x];
        }
    }
    free(b);
    free(k);
    return PARITY_OK;
}

/* The op's parameters (op.h params): the forward's scale and softcap (attention.h), and the
 * scale dK is multiplied by at the end (a factor on dK alone: a kernel that leaves it out). */
static double bwd_param_value(const parity_case_t *c, int which)
{
    return which == 2 ? c->attr_values[0] : parity_attention_param_value(c, which);
}

static parity_status_t bwd_param_ref(const parity_case_t *c, int out, int which, double value,
                                     const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                     double *s_up)
{
    double scale = c->attr_values[0], cap = c->attr_values[1];
    if (which == 2 && out != 1) return PARITY_E_UNSUPPORTED;
    if (which < 0 || which > 2) return PARITY_E_UNSUPPORTED;
    return bwd_rows_ref(c, out, which == 0 ? value : scale, which == 1 ? (isfinite(value) ? value : 0) : cap,
                        which == 2 ? value : (which == 0 ? value : scale), 0, rows, n_rows, ref, s_acc, s_up);
}

/* The op's variants (op.h variant_ref): 0, the given O ignored and recomputed from Q, K, V (D
 * from the forward's fp64 O): dQ and dK (dV does not read O). */
static parity_status_t bwd_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    if (which != 0 || out == 2) return PARITY_E_UNSUPPORTED;
    return bwd_rows_ref(c, out, c->attr_values[0], c->attr_values[1], c->attr_values[0], 1, rows, n_rows,
                        ref, s_acc, s_up);
}

/* fp32 dot product with four interleaved partial sums, as the catalog kernels' (kernels.c). */
static float emu_dot(const float *a, const float *b, int64_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
        s0 += a[c] * b[c];
        s1 += a[c + 1] * b[c + 1];
        s2 += a[c + 2] * b[c + 2];
        s3 += a[c + 3] * b[c + 3];
    }
    for (; c < n; c++) s0 += a[c] * b[c];
    return (s0 + s1) + (s2 + s3);
}

/* Rows of dQ, dK or dV as the naive fp32 kernel (kernels.c bwd_naive) computes them, except for
 * the accumulation over keys (dQ) or queries (dK, dV), done in `acc` with `order`: in fp32, D_i
 * = dO_i . O_i, P = expf(t - LSE_i), dS = P (dO_i . v_j - D_i) (1 - tanh^2), the terms dS k_j,
 * dS q_i or P dO_i, then dQ and dK times scale. */
static parity_status_t bwd_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    if (out < 0 || out > 2) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *in[6];
    for (int a = 0; a < 6; a++) in[a] = &c->inputs[a]->view;
    int64_t T = in[0]->shape[1], dh = in[0]->shape[2];
    float scale = (float)c->attr_values[0], cap = (float)c->attr_values[1];
    int causal = c->attr_values[2] != 0;
    float *f = malloc((size_t)(5 * T * dh + 2 * T) * sizeof *f);
    double *terms = malloc((size_t)(T * dh) * sizeof *terms);
    if (!f || !terms) {
        free(f);
        free(terms);
        return PARITY_E_NOMEM;
    }
    float *q = f, *k = q + T * dh, *v = k + T * dh, *o = v + T * dh, *go = o + T * dh, *L = go + T * dh,
          *D = L + T;
    int64_t head = -1;
    parity_status_t st = PARITY_OK;
    for (int64_t n = 0; n < n_rows && st == PARITY_OK; n++) {
        int64_t r = rows[n], h = r / T, x = r % T;
        if (h != head) { /* the head's rows in fp32 */
            head = h;
            for (int64_t i = 0; i < T; i++) {
                parity_row_to_f32(in[0], h * T + i, q + i * dh);
                parity_row_to_f32(in[1], h * T + i, k + i * dh);
                parity_row_to_f32(in[2], h * T + i, v + i * dh);
                parity_row_to_f32(in[3], h * T + i, o + i * dh);
                parity_row_to_f32(in[4], h * T + i, go + i * dh);
                L[i] = (float)parity_tensor_get(in[5], h * T + i);
                D[i] = emu_dot(go + i * dh, o + i * dh, dh);
            }
        }
        /* pairs (i, j): dQ row x: i = x, j < its end; dK/dV row x: j = x, the queries attending it */
        int64_t b0 = out == 0 ? 0 : (causal ? x : 0), e0 = out == 0 ? (causal ? x + 1 : T) : T, m = 0;
        for (int64_t y = b0; y < e0; y++, m++) {
            int64_t i = out == 0 ? x : y, j = out == 0 ? y : x;
            float s = emu_dot(q + i * dh, k + j * dh, dh) * scale, gr = 1.0f, t = s;
            if (cap > 0) {
                float th = tanhf(s / cap);
                t = cap * th;
                gr = 1.0f - th * th;
            }
            float P = expf(t - L[i]), dS = P * (emu_dot(go + i * dh, v + j * dh, dh) - D[i]) * gr;
            const float *w = out == 0 ? k + j * dh : out == 1 ? q + i * dh : go + i * dh;
            float wt = out == 2 ? P : dS;
            for (int64_t ch = 0; ch < dh; ch++) terms[m * dh + ch] = wt * w[ch];
        }
        st = parity_format_sum_fast_cols(acc, terms, m, dh, order, dst + n * dh);
        for (int64_t ch = 0; out != 2 && ch < dh; ch++) dst[n * dh + ch] = (float)dst[n * dh + ch] * scale;
    }
    free(f);
    free(terms);
    return st;
}

/* As the forward's presets (ops/attention/attention.c, the same parameters), at shapes that
 * keep the backward's three O(T^2 Dh) products per kernel run to about a second. */
/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define ATT_BWD_RANGE(name_, case_, summary_)                                                    \
    {.name = name_, .summary = summary_, .n = 259, .d = 64, .v = 2, .params = &att_cases[case_]}
static const parity_workload_t BWD_PRESETS[] = {
    {.name = "long-causal",
     .summary = "T=2048 causal, 1 head of Dh=64, randn Q/K with 2 keys per query at scores 20-30",
     .n = 2048, .d = 64, .v = 1,
     .params = &att_cases[ATT_CASE_LONG_CAUSAL]},
    {.name = "softcap",
     .summary = "Gemma-2 style: softcap 50, Dh=256, T=512 causal, raw scores 70-80 on 3 keys per query",
     .n = 512, .d = 256, .v = 2,
     .params = &att_cases[ATT_CASE_SOFTCAP]},
    {.name = "outlier-channels",
     .summary = "massive activations: 4 of 128 Q/K channels x6, T=1024 causal, 1 key per query at 15-25",
     .n = 1024, .d = 128, .v = 1,
     .params = &att_cases[ATT_CASE_OUTLIER_CHANNELS]},
    {.name = "odd-t1031",
     .summary = "T=1031 (no block multiple), no mask, Dh=80, 1 head, 2 keys per query at 17-27",
     .n = 1031, .d = 80, .v = 1,
     .params = &att_cases[ATT_CASE_ODD_T1031]},
    {.name = "near-zero",
     .summary = "public verifiers' scheme: randn Q/K/V, scores ~N(0,1), softcap 50, T=512 causal",
     .n = 512, .d = 64, .v = 4,
     .params = &att_cases[ATT_CASE_NEAR_ZERO]},
    {.name = "prod-llama3",
     .summary = "Llama-3-8B attention: Dh=128, T=4096 causal, 1 of its 32 heads, peaks at 20-30",
     .n = 4096, .d = 128, .v = 1, .production = 1,
     .params = &att_cases[ATT_CASE_PROD_LLAMA3]},
    /* Structure and range (docs/workloads.md): T = 259 (4 key blocks of 64 and 3), 2 heads. */
    ATT_BWD_RANGE("exact", ATT_CASE_EXACT,
                  "sparse powers of two in Q, K, V (0 or +-2^e, |e| <= 2): exact scores, massive ties; causal, softcap 50"),
    ATT_BWD_RANGE("x1e-3", ATT_CASE_X1E_3,
                  "randn Q, K, V times 1e-3: a near-uniform softmax, causal"),
    ATT_BWD_RANGE("x64", ATT_CASE_X64,
                  "randn Q, K, V times 64: scores ~ 4096 (one key per query), softcap 50, causal"),
    ATT_BWD_RANGE("near-max", ATT_CASE_NEAR_MAX,
                  "randn Q, K; V x 2^100 (dP = dO V^T near 2^103), no mask"),
    ATT_BWD_RANGE("subnormal", ATT_CASE_SUBNORMAL,
                  "randn Q, K; V x 1e-39 (bf16 subnormals): dQ and dK in fp32's subnormal range, causal"),
};
#undef ATT_BWD_RANGE

static const parity_workload_t BWD_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn Q/K/V/dO, H=4 T=512 Dh=64, causal, softcap 50, seed 200",
     .n = 512, .d = 64, .v = 4,
     .params = &att_cases[ATT_CASE_SOL_EXECBENCH]},
    {.name = "kernelbench",
     .summary = "torch.rand Q/K/V, H=2 T=512 Dh=64, causal, softcap 50",
     .n = 512, .d = 64, .v = 2,
     .params = &att_cases[ATT_CASE_KERNELBENCH]},
    {.name = "assert_close",
     .summary = "small randn Q/K/V/dO, H=2 T=128 Dh=32, causal, softcap 50",
     .n = 128, .d = 32, .v = 2,
     .params = &att_cases[ATT_CASE_ASSERT_CLOSE]},
};

const parity_op_t parity_op_attention_bwd = {
    .name = "attention_bwd",
    .summary = "attention backward: dQ, dK, dV (H,T,Dh) from Q, K, V, O, dO (H,T,Dh) and LSE (H,T, fp32); "
               "attrs scale, softcap, causal (N = T, D = Dh, V = H)",
    .n_inputs = 6,
    .n_outputs = 3,
    .input_names = {"Q", "K", "V", "O", "dO", "LSE"},
    .output_names = {"dQ", "dK", "dV"},
    .input_is_float = {1, 1, 1, 1, 1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "dQ[i]: k = attended keys, s_acc = Σ_j |scale dS~_ij k_j|; dK/dV[j]: k = queries "
                   "attending j; s_up: P's and dS~'s errors (scores, dP, D dot products), m_up = Dh+2",
    .presets = BWD_PRESETS,
    .n_presets = (int)(sizeof BWD_PRESETS / sizeof BWD_PRESETS[0]),
    .baseline_workloads = BWD_BASELINES,
    .wl_family = &att_family,
    .catalog = {{parity_catalog_attention, &parity_catalog_attention_count}},
    .cost = &parity_cost_attention_bwd,
    .build = bwd_build,
    .emulate = bwd_emulate,
    .free_priv = bwd_free_priv,
    .params = {{"scale", 0, 0}, {"softcap", 0, PARITY_PARAM_NONE}, {"dK's scale", 0, PARITY_PARAM_FACTOR}},
    .param_value = bwd_param_value,
    .param_ref = bwd_param_ref,
    .variants = {{PARITY_VARIANT_IGNORED, "the given O (recomputed from Q, K, V)", 0}},
    .variant_ref = bwd_variant_ref,
};

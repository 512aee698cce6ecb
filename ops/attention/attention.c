/* attention (forward): O = softmax(softcap(scale * Q K^T) + causal mask) V and the row
 * log-sum-exp LSE, per head, with an fp64 reference and the error-model data derived in
 * docs/ops/attention.md. Q, K, V are (H, T, Dh); O is (H, T, Dh), LSE (H, T).
 * Deliberately not here: the kernels (ops/attention/kernels.c), judging, the backward (not covered). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/format/format_fast.h"

/* Streams of the generators: one rng per (tensor, head, row), so any split of the rows gives the
 * same values. */
#define ATT_STREAM_Q 0x4154510000000000ull
#define ATT_STREAM_K 0x41544b0000000000ull
#define ATT_STREAM_V 0x4154560000000000ull
#define ATT_STREAM_CH 0x4154430000000000ull
#define ATT_STREAM_PEAK 0x4154500000000000ull

/* ---- workloads ------------------------------------------------------------------------------
 * The parameters (att_params_t, attention.h): n = T (sequence length: queries = keys), d = Dh
 * (head dim), v = H (heads), so a preset at another shape is `--workload long-causal@TxDhxH`, e.g.
 * long-causal@1031x64x2; Q/K and V values, outlier channels, the mask, the softcap, the peaks. */

/* One row (Dh values) of Q or K of head h, as exact doubles. `ch` marks the outlier channels. */
static void gen_qk_row(const att_params_t *ap, uint64_t seed, uint64_t stream, int64_t row,
                       int64_t dh, const unsigned char *ch, double *x)
{
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, stream + (uint64_t)row);
    for (int64_t c = 0; c < dh; c++) {
        double r = parity_workload_draw(ap->qk.kind, &rng);
        x[c] = r * ap->qk.scale * (ch && ch[c] ? ap->outlier_factor : 1.0);
    }
}

/* ---- the fp64 reference of one query row ---------------------------------------------------- */

/* Rescales that can act on key j's contribution: the running-max records after j in a
 * left-to-right scan (a blocked kernel rescales at a subset of those) or before j in a
 * right-to-left scan, whichever is more, plus ATT_MERGES for split-K-V merges
 * (docs/ops/attention.md, step 4). n[j] receives the count. */
#define ATT_MERGES 8
static void rescales_per_key(const double *t, int64_t k, double *n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < k; j++) { /* n[j] = 1 if j is a left-to-right record */
        n[j] = t[j] > m;
        m = t[j] > m ? t[j] : m;
    }
    double after = 0;
    for (int64_t j = k - 1; j >= 0; j--) { /* records strictly after j */
        double rec = n[j];
        n[j] = after;
        after += rec;
    }
    m = -INFINITY;
    double before = 0; /* right-to-left records among [j+1, k) are "before" j in that scan */
    for (int64_t j = k - 1; j >= 0; j--) {
        n[j] = (before > n[j] ? before : n[j]) + ATT_MERGES;
        if (t[j] > m) {
            before += 1;
            m = t[j];
        }
    }
}

void parity_ref_attention_row(const double *q, const double *K, const double *V, int64_t k,
                              int64_t dh, double scale, double softcap, double *o, double *lse,
                              double *o_sacc, double *o_sup, double *lse_sup, double *work)
{
    parity_ref_attention_row_scores(q, K, V, k, dh, scale, softcap, NULL, o, lse, o_sacc, o_sup,
                                    lse_sup, work);
}

void parity_ref_attention_row_scores(const double *q, const double *K, const double *V, int64_t k,
                                     int64_t dh, double scale, double softcap, const double *given,
                                     double *o, double *lse, double *o_sacc, double *o_sup,
                                     double *lse_sup, double *work)
{
    /* work: 5k doubles: t (scores after softcap), a (score conditions), logp then p, rest, n. */
    double *t = work, *a = work + k, *lp = work + 2 * k, *rest = work + 3 * k, *n = work + 4 * k;
    for (int64_t j = 0; j < k; j++) {
        const double *kj = K + j * dh;
        double s = 0, sa = 0;
        for (int64_t c = 0; c < dh; c++) {
            s += q[c] * kj[c];
            sa += fabs(q[c] * kj[c]);
        }
        s = given ? given[j] : s * scale;
        a[j] = fabs(scale) * sa;
        t[j] = softcap > 0 ? softcap * tanh(s / softcap) : s;
        /* The part of the first-order coefficient of u in e_j's relative error that does not
         * come from the score's dot product (docs/ops/attention.md, steps 2-4): expf (4), the
         * exp2 domain's multiply by log2(e) and that constant's rounding (2|t_j|), the softcap's
         * division, tanhf and multiply (2|s_j| + 5|t_j|); the max subtraction with the
         * telescoped rescale exponents (2|d_j|) and the rescale factors' expf (4 n_j) are added
         * below. */
        rest[j] = 4.0 + 2.0 * fabs(t[j]) + (softcap > 0 ? 2.0 * fabs(s) + 5.0 * fabs(t[j]) : 0.0);
    }
    /* log p_j and the normaliser: log_softmax's reference (max shift, compensated sum). With
     * target 0 its loss is L - (t_0 - m), so LSE = m + L = loss + t_0. */
    double loss = 0;
    parity_ref_log_softmax_row(t, k, 0, lp, NULL, &loss, NULL);
    double lse_v = loss + t[0], m = -INFINITY;
    for (int64_t j = 0; j < k; j++) m = t[j] > m ? t[j] : m;
    double L = lse_v - m;
    rescales_per_key(t, k, n);
    for (int64_t c = 0; c < dh; c++) o[c] = 0;
    double plse = 0;
    for (int64_t j = 0; j < k; j++) {
        double p = exp(lp[j]);
        lp[j] = p; /* from here on: p_j */
        rest[j] += 2.0 * (m - t[j]) + 4.0 * n[j];
        plse += p * (a[j] + rest[j] + n[j]);
        const double *vj = V + j * dh;
        for (int64_t c = 0; c < dh; c++) o[c] += p * vj[c];
    }
    *lse = lse_v;
    /* LSE: e_j's relative errors weighted by p_j, the running sum's rescale multiplies (n_j,
     * in plse), logf (2 ulp of L), the final addition m + L (|LSE|), and the exp2 domain's
     * conversions (m in log2 units: |m|; the multiply by ln 2 and that constant: 2|LSE|). */
    *lse_sup = plse + 4.0 * L + fabs(m) + 3.0 * fabs(lse_v);
    /* O_c: the accumulations are k-term sums of p_j v_jc (numerator) and p_j (normaliser, whose
     * relative error moves O_c by |O_c| times it): s_acc = Σ p_j |v_jc| + |O_c|. e_j's relative
     * errors move O_c by p_j ε_j (v_jc - O_c); the product p_j v_jc and the final division cost
     * u s_acc; each rescale multiply of the accumulator (of the sum) u p_j |v_jc| (u p_j |O_c|)
     * per key it acts on. */
    double pn = 0;
    for (int64_t c = 0; c < dh; c++) {
        o_sacc[c] = fabs(o[c]);
        o_sup[c] = 0;
    }
    for (int64_t j = 0; j < k; j++) {
        const double *vj = V + j * dh;
        double p = lp[j], w = p * (a[j] + rest[j]), pnj = p * (1.0 + n[j]);
        pn += p * n[j];
        for (int64_t c = 0; c < dh; c++) {
            o_sacc[c] += p * fabs(vj[c]);
            o_sup[c] += w * fabs(vj[c] - o[c]) + pnj * fabs(vj[c]);
        }
    }
    for (int64_t c = 0; c < dh; c++) o_sup[c] += (2.0 + pn) * fabs(o[c]);
}

/* ---- building a case ------------------------------------------------------------------------ */

typedef struct {
    int64_t T, dh, H;
    double scale, softcap;
    int causal;
    const double *Q, *K, *V; /* exact input values, (H, T, Dh) */
    parity_case_t *c;
    double a_max; /* the largest score condition a_j the per-key split covers */
    int failed;
} build_ctx_t;

static void build_rows(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    build_ctx_t *g = p;
    int64_t T = g->T, dh = g->dh;
    double *work = malloc((size_t)(5 * T) * sizeof *work);
    if (!work) {
        g->failed = 1;
        return;
    }
    parity_ref_output_t *O = &g->c->ref[0], *L = &g->c->ref[1];
    for (int64_t r = b; r < e; r++) { /* r = h*T + i */
        int64_t h = r / T, i = r % T, k = g->causal ? i + 1 : T;
        const double *Kh = g->K + h * T * dh, *Vh = g->V + h * T * dh;
        double lse, lse_sup;
        parity_ref_attention_row(g->Q + r * dh, Kh, Vh, k, dh, g->scale, g->softcap, O->ref + r * dh,
                                 &lse, O->s_acc + r * dh, O->s_up + r * dh, &lse_sup, work);
        if (O->s_op) { /* work[2k, 3k) holds p_j: the Hoeffding scale of rounding each p_j */
            const double *pj = work + 2 * k;
            for (int64_t c = 0; c < dh; c++) {
                double s2 = 0;
                for (int64_t j = 0; j < k; j++) {
                    double x = pj[j] * Vh[j * dh + c];
                    s2 += x * x;
                }
                O->s_op[r * dh + c] = sqrt(s2);
            }
        }
        if (O->s_up2) { /* the split per-term term (docs/ops/attention.md, "The per-key split") */
            const double *aj = work + k, *pj = work + 2 * k;
            int ok = 1;
            for (int64_t j = 0; j < k && ok; j++) ok = aj[j] <= g->a_max;
            for (int64_t c = 0; c < dh; c++) {
                double s2 = 0, oc = O->ref[r * dh + c];
                for (int64_t j = 0; j < k && ok; j++) {
                    double x = pj[j] * fabs(Vh[j * dh + c] - oc) * aj[j];
                    s2 += x * x;
                }
                /* A key beyond a_max: exp's second order is not covered; the row keeps the
                 * folded term (an infinite s_up2 never wins the verdict's min). */
                O->s_up2[r * dh + c] = ok ? sqrt(s2) : INFINITY;
            }
        }
        O->k[r] = k;
        L->k[r] = k;
        L->ref[r] = lse;
        L->s_acc[r] = 1.0; /* the normaliser's relative error is LSE's absolute error */
        L->s_up[r] = lse_sup;
    }
    free(work);
}

/* Store x into tensor t at [off, off + n) and read back the exact stored values. */
static void store_exact(parity_tensor_t *t, int64_t off, double *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        parity_tensor_set(&t->view, off + j, x[j]);
        x[j] = parity_tensor_get(&t->view, off + j);
    }
}

/* Q, K, V of a workload (docs/ops/attention.md, "Workloads") into c->inputs[0..2] (dtype dt) and
 * their exact values into *Q, *K, *V ((H, T, Dh) doubles, malloc'd; the caller frees them, also
 * on error). Also the attributes: scale, softcap, causal. Shared with the backward. */
parity_status_t parity_attention_gen(const parity_workload_t *wl, uint64_t seed, parity_dtype_t dt,
                                     parity_case_t *c, double **Qp, double **Kp, double **Vp,
                                     parity_diag_t *diag)
{
    *Qp = *Kp = *Vp = NULL;
    const att_params_t *ap = parity_workload_params(wl, "attention", diag);
    if (!ap) return PARITY_E_INVALID;
    int64_t T = wl->n, dh = wl->d, H = wl->v;
    /* H*T*Dh <= 2^31 elements per tensor, as parity_op_workload bounds N*D; the reference costs
     * O(H T^2 Dh) besides. */
    if (T < 1 || dh < 1 || H < 1 || T > (1 << 20) || dh > 4096 ||
        (double)H * (double)T * (double)dh > 2147483648.0)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "workload %s: need T >= 1 (N), 1 <= Dh <= 4096 (D), H >= 1 (V), "
                               "H*T*Dh <= 2^31", wl->name);
    int64_t shape[3] = {H, T, dh};
    const char *names[3] = {"Q", "K", "V"};
    for (int a = 0; a < 3; a++)
        if (!(c->inputs[a] = parity_tensor_new(names[a], dt, 3, shape))) return PARITY_E_NOMEM;
    size_t ne = (size_t)(H * T * dh);
    double *Q = *Qp = malloc(ne * sizeof *Q), *K = *Kp = malloc(ne * sizeof *K);
    double *V = *Vp = malloc(ne * sizeof *V);
    unsigned char *ch = calloc((size_t)dh, 1);
    if (!Q || !K || !V || !ch) {
        free(ch);
        return PARITY_E_NOMEM;
    }
    double scale = 1.0 / sqrt((double)dh);
    for (int64_t h = 0; h < H; h++) {
        /* Outlier channels of this head: the same in Q and K. */
        memset(ch, 0, (size_t)dh);
        if (ap->qk.kind == PARITY_VALS_OUTLIER) {
            parity_rng_t rng;
            parity_rng_seed(&rng, seed, ATT_STREAM_CH + (uint64_t)h);
            for (int o = 0; o < ap->outliers && o < dh; o++) ch[parity_rng_below(&rng, (uint64_t)dh)] = 1;
        }
        uint64_t hs = (uint64_t)h << 24;
        for (int64_t i = 0; i < T; i++) {
            int64_t r = h * T + i;
            gen_qk_row(ap, seed, ATT_STREAM_K + hs, i, dh, ch, K + r * dh);
            store_exact(c->inputs[1], r * dh, K + r * dh, dh);
            parity_rng_t rng;
            parity_rng_seed(&rng, seed, ATT_STREAM_V + hs + (uint64_t)i);
            for (int64_t d = 0; d < dh; d++)
                V[r * dh + d] = parity_workload_draw(ap->v.kind, &rng) * ap->v.scale;
            store_exact(c->inputs[2], r * dh, V + r * dh, dh);
        }
        for (int64_t i = 0; i < T; i++) {
            int64_t r = h * T + i, kend = ap->causal ? i + 1 : T;
            double *q = Q + r * dh;
            gen_qk_row(ap, seed, ATT_STREAM_Q + hs, i, dh, ch, q);
            /* Peaks: q += (target / (scale |k_j|^2)) k_j makes the raw score of key j about
             * target (plus the noise part's). */
            parity_rng_t rng;
            parity_rng_seed(&rng, seed, ATT_STREAM_PEAK + hs + (uint64_t)i);
            for (int p = 0; p < ap->peaks; p++) {
                int64_t j = (int64_t)parity_rng_below(&rng, (uint64_t)kend);
                double target = ap->peak - 5.0 + 10.0 * parity_rng_uniform(&rng);
                const double *kj = K + (h * T + j) * dh;
                double n2 = 0;
                for (int64_t d = 0; d < dh; d++) n2 += kj[d] * kj[d];
                if (n2 > 0)
                    for (int64_t d = 0; d < dh; d++) q[d] += target / (scale * n2) * kj[d];
            }
            store_exact(c->inputs[0], r * dh, q, dh);
        }
    }
    free(ch);
    c->n_attrs = 3;
    c->attr_names[0] = "scale";
    c->attr_values[0] = scale;
    c->attr_names[1] = "softcap";
    c->attr_values[1] = ap->softcap;
    c->attr_names[2] = "causal";
    c->attr_values[2] = ap->causal;
    return PARITY_OK;
}

static parity_status_t att_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    (void)op;
    int64_t T = wl->n, dh = wl->d, H = wl->v;
    double *Q, *K, *V;
    parity_status_t st = parity_attention_gen(wl, seed, dt, c, &Q, &K, &V, diag);
    if (st == PARITY_OK) st = parity_ref_output_alloc(&c->ref[0], "O", "query", H * T, dh, 0, 0, 1);
    if (st == PARITY_OK) st = parity_ref_output_alloc(&c->ref[1], "LSE", "query", H * T, 1, 0, 0, 1);
    if (st == PARITY_OK) {
        /* m_up = Dh + 2: the score is a Dh-term dot product times scale (γ_{Dh+2} of its
         * absolute condition a_j); every other per-term rounding is folded into s_up with
         * coefficient 1, which γ_{Dh+2} over-covers (docs/ops/attention.md). */
        c->ref[0].m_up = dh + 2;
        c->ref[1].m_up = dh + 2;
        /* The bf16/fp16-input contract lets P~ be rounded to the input dtype before the P~V
         * product, as FlashAttention 2/3, cuDNN and xformers do (their P~V runs on tensor cores
         * with input-dtype operands): one more rounding of unit u_in per term of O's sum,
         * normaliser untouched (docs/ops/attention.md, "The bf16 contract"). */
        if (dt == PARITY_DT_BF16 || dt == PARITY_DT_F16) {
            c->ref[0].u_op = dt == PARITY_DT_BF16 ? 0x1p-8 : 0x1p-11;
            c->ref[0].s_op = calloc((size_t)(H * T * dh), sizeof *c->ref[0].s_op);
            if (!c->ref[0].s_op) st = PARITY_E_NOMEM;
        }
        c->out_ndim[0] = 3;
        c->out_shape[0][0] = H;
        c->out_shape[0][1] = T;
        c->out_shape[0][2] = dh;
        c->out_ndim[1] = 2;
        c->out_shape[1][0] = H;
        c->out_shape[1][1] = T;
        /* The per-key split of O's per-term error (docs/ops/attention.md, "The per-key split"):
         * only the score roundings are distinct per key, Sum_r c_r^2 <= (Dh + 1) a_j^2 <= m_up
         * a_j^2 for a Dh-term dot product in any order and the scale multiply, so their random
         * part is lambda u sqrt(m_up) sqrt(Sum_j (p_j |v_jc - O_c| a_j)^2). Linear, b_up = 2 per
         * unit of s_up: 1 for the u-sized terms of s_up's third line (a worst-case sum, coefficient
         * 1) and for a pre-scaled Q (q_c scale rounded once for every key: a shared error of at
         * most u a_j per key), 1 for exp's second order |e^eta - 1 - eta| <= e^|eta| eta^2 / 2
         * with |eta| <= gamma_{m_up} a_j, which is below u a_j while a_j <= 1 / (m_up^2 u) (then
         * |eta| <= 1.0001 / m_up and the bound is at most 0.5 e^{1.0001/m_up} u a_j <= 0.56 u a_j
         * for Dh >= 8): rows with a key beyond that keep the folded term. Only for continuous generated Q and K (distinct dot products); a user's
         * file, or sparse exact values, keep it everywhere. */
        if (parity_vals_continuous(((const att_params_t *)wl->params)->qk.kind) && st == PARITY_OK) {
            c->ref[0].s_up2 = parity_calloc_faulted((size_t)(H * T * dh), sizeof *c->ref[0].s_up2);
            if (!c->ref[0].s_up2) st = PARITY_E_NOMEM;
            c->ref[0].b_up = 2;
        }
        double mu = (double)(dh + 2);
        build_ctx_t g = {T, dh, H, c->attr_values[0], c->attr_values[1], c->attr_values[2] != 0, Q, K, V, c,
                         1.0 / (mu * mu * 0x1p-24), 0};
        if (st == PARITY_OK) parity_parallel_for(H * T, 0, build_rows, &g);
        if (g.failed) st = PARITY_E_NOMEM;
    }
    free(Q);
    free(K);
    free(V);
    return st;
}

/* ---- emulation for the diagnosis ------------------------------------------------------------
 * Query rows as the naive two-pass fp32 kernel (ops/attention/kernels.c, cfg bk = 0) computes them,
 * except for the two accumulations over keys, done in `acc` with `order` (parity_format_sum_fast:
 * parity_format_sum's rounding, fast): the normaliser l = Σ e_j and, per channel, O_c =
 * Σ fl32(p_j v_jc). In fp32: the scores (a Dh-term dot product with four interleaved partial
 * sums, as the kernels' vectorised one, times scale, then the softcap), m = max, e_j =
 * expf(t_j - m), p_j = e_j / l, LSE = m + logf(l). l is exact in fp32 for the diagnosis's
 * formats (at most 24 significant bits, 8 exponent bits). */

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

static parity_status_t att_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    if (out != 0 && out != 1) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *Q = &c->inputs[0]->view, *K = &c->inputs[1]->view,
                              *V = &c->inputs[2]->view;
    int64_t T = Q->shape[1], dh = Q->shape[2];
    float scale = (float)c->attr_values[0], cap = (float)c->attr_values[1];
    int causal = c->attr_values[2] != 0;
    /* q (dh), the head's K and V rows as needed (2 T dh), scores (T); terms: T doubles per
     * channel ((k, Dh) row-major: the Dh sums run side by side). */
    float *q = malloc((size_t)(dh + 2 * T * dh + T) * sizeof *q);
    double *terms = malloc((size_t)(T * (dh + 1)) * sizeof *terms);
    if (!q || !terms) {
        free(q);
        free(terms);
        return PARITY_E_NOMEM;
    }
    float *kf = q + dh, *vf = kf + T * dh, *t = vf + T * dh;
    parity_status_t st = PARITY_OK;
    for (int64_t n = 0; n < n_rows && st == PARITY_OK; n++) {
        int64_t r = rows[n], h = r / T, i = r % T, k = causal ? i + 1 : T;
        parity_row_to_f32(Q, r, q);
        for (int64_t j = 0; j < k; j++) {
            parity_row_to_f32(K, h * T + j, kf + j * dh);
            parity_row_to_f32(V, h * T + j, vf + j * dh);
        }
        float m = -INFINITY;
        for (int64_t j = 0; j < k; j++) {
            float s = emu_dot(q, kf + j * dh, dh) * scale;
            t[j] = cap > 0 ? cap * tanhf(s / cap) : s;
            m = t[j] > m ? t[j] : m;
        }
        double *e = terms + T * dh;
        for (int64_t j = 0; j < k; j++) e[j] = expf(t[j] - m);
        float l = (float)parity_format_sum_fast(acc, e, k, order);
        if (out == 1) {
            dst[n] = m + logf(l);
            continue;
        }
        for (int64_t j = 0; j < k; j++) {
            float p = (float)e[j] / l;
            for (int64_t ch = 0; ch < dh; ch++) terms[j * dh + ch] = p * vf[j * dh + ch];
        }
        st = parity_format_sum_fast_cols(acc, terms, k, dh, order, dst + n * dh);
    }
    free(q);
    free(terms);
    return st;
}

/* The op's variants (op.h variant_ref): 0, the scores scale·(q·k) rounded to fmt (nearest), each
 * formed in fp32 as the catalog kernels form it (emu_dot, times the fp32 scale); 1, q·k rounded
 * to fmt and then scaled in fmt (Hugging Face's eager attention: a bf16 matmul's output times the
 * scale, a bf16 tensor op: two roundings, not one where the scale is no power of two); the rest exact:
 * O (out 0) and LSE (out 1) of the rows with their error-model data as att_build forms them. A
 * kernel whose fp32 score differs (another dot order) can round a score near a boundary the
 * other way: that row then does not fit (docs/error-model.md, "Cause"). */
static parity_status_t att_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)dir;
    if ((out != 0 && out != 1) || which < 0 || which > 1 || !fmt) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *Q = &c->inputs[0]->view, *K = &c->inputs[1]->view,
                              *V = &c->inputs[2]->view;
    int64_t T = Q->shape[1], dh = Q->shape[2];
    float scale = (float)c->attr_values[0];
    double cap = c->attr_values[1];
    int causal = c->attr_values[2] != 0;
    float *qf = malloc((size_t)(dh * (T + 1)) * sizeof *qf);
    double *d = malloc((size_t)(2 * T * dh + 2 * dh + 7 * T + dh) * sizeof *d);
    if (!qf || !d) {
        free(qf);
        free(d);
        return PARITY_E_NOMEM;
    }
    float *kf = qf + dh;
    double *kd = d, *vd = kd + T * dh, *qd = vd + T * dh, *s = qd + dh, *work = s + T, *o = work + 5 * T,
           *sa = o + dh, *su = sa + dh;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t r = rows[q], h = r / T, i = r % T, k = causal ? i + 1 : T;
        parity_row_to_f32(Q, r, qf);
        for (int64_t ch = 0; ch < dh; ch++) qd[ch] = qf[ch];
        for (int64_t j = 0; j < k; j++) {
            parity_row_to_f32(K, h * T + j, kf + j * dh);
            for (int64_t ch = 0; ch < dh; ch++) {
                kd[j * dh + ch] = kf[j * dh + ch];
                vd[j * dh + ch] = parity_tensor_get(V, (h * T + j) * dh + ch);
            }
            float dot = emu_dot(qf, kf + j * dh, dh);
            if (which == 0) s[j] = parity_variant_round(fmt, (double)(dot * scale), 0);
            else s[j] = parity_variant_round(fmt, (double)((float)parity_variant_round(fmt, dot, 0) * scale), 0);
        }
        double lse, lse_sup;
        parity_ref_attention_row_scores(qd, kd, vd, k, dh, c->attr_values[0], cap, s, o, &lse, sa,
                                        su, &lse_sup, work);
        if (out == 1) {
            ref[q] = lse;
            s_acc[q] = 1.0;
            if (s_up) s_up[q] = lse_sup;
            continue;
        }
        for (int64_t ch = 0; ch < dh; ch++) {
            ref[q * dh + ch] = o[ch];
            s_acc[q * dh + ch] = sa[ch];
            if (s_up) s_up[q * dh + ch] = su[ch];
        }
    }
    free(qf);
    free(d);
    return PARITY_OK;
}

/* The op's parameters (op.h params, param_value): 0 the softmax scale (the case's, 1/sqrt(Dh)),
 * 1 the softcap (the case's; 0, off, is not refit; "none" is a candidate: a kernel that skips
 * it). Shared with the backward (attention_bwd.c). */
double parity_attention_param_value(const parity_case_t *c, int which)
{
    return which == 0 ? c->attr_values[0] : which == 1 ? c->attr_values[1] : 0;
}

/* The reference of rows[0..n_rows) (r = h*T + i) of O (out 0) or LSE (out 1) with parameter
 * `which` at value (op.h param_ref), as att_build forms it. */
static parity_status_t att_param_ref(const parity_case_t *c, int out, int which, double value,
                                     const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                     double *s_up)
{
    if ((out != 0 && out != 1) || which < 0 || which > 1) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *Q = &c->inputs[0]->view, *K = &c->inputs[1]->view,
                              *V = &c->inputs[2]->view;
    int64_t T = Q->shape[1], dh = Q->shape[2];
    double scale = which == 0 ? value : c->attr_values[0];
    double cap = which == 1 ? (isfinite(value) ? value : 0) : c->attr_values[1];
    int causal = c->attr_values[2] != 0;
    double *d = malloc((size_t)(2 * T * dh + 4 * dh + 5 * T) * sizeof *d);
    if (!d) return PARITY_E_NOMEM;
    double *kd = d, *vd = kd + T * dh, *qd = vd + T * dh, *o = qd + dh, *sa = o + dh, *su = sa + dh,
           *work = su + dh;
    int64_t head = -1, loaded = 0;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t r = rows[q], h = r / T, i = r % T, k = causal ? i + 1 : T;
        if (h != head) {
            head = h;
            loaded = 0;
        }
        for (; loaded < k; loaded++) /* the head's K and V rows, as far as this row needs */
            for (int64_t ch = 0; ch < dh; ch++) {
                kd[loaded * dh + ch] = parity_tensor_get(K, (h * T + loaded) * dh + ch);
                vd[loaded * dh + ch] = parity_tensor_get(V, (h * T + loaded) * dh + ch);
            }
        for (int64_t ch = 0; ch < dh; ch++) qd[ch] = parity_tensor_get(Q, r * dh + ch);
        double lse, lse_sup;
        parity_ref_attention_row(qd, kd, vd, k, dh, scale, cap, o, &lse, sa, su, &lse_sup, work);
        if (out == 1) {
            ref[q] = lse;
            s_acc[q] = 1.0;
            if (s_up) s_up[q] = lse_sup;
            continue;
        }
        for (int64_t ch = 0; ch < dh; ch++) {
            ref[q * dh + ch] = o[ch];
            s_acc[q * dh + ch] = sa[ch];
            if (s_up) s_up[q * dh + ch] = su[ch];
        }
    }
    free(d);
    return PARITY_OK;
}

#define F(member, type, what) PARITY_WL_FIELD(att_params_t, member, type, what)
const parity_workload_family_t att_family = {
    "attention", sizeof(att_params_t), 8,
    {F(qk, PARITY_WL_VALS, "Q and K entries (H,T,Dh)"),
     F(v, PARITY_WL_VALS, "V entries (H,T,Dh)"),
     F(outliers, PARITY_WL_INT, "outlier channels of Dh, the same in Q and K of a head (qk outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor"),
     F(causal, PARITY_WL_INT, "1: the causal mask"),
     F(softcap, PARITY_WL_DOUBLE, "the softcap c (c tanh(s / c)), 0 none"),
     F(peaks, PARITY_WL_INT, "attended keys per query whose raw score is set to U[peak-5, peak+5]"),
     F(peak, PARITY_WL_DOUBLE, "their level")}};
#undef F

/* The family's cases: the forward's presets and the public verifiers' schemes; the backward's
 * presets are the same cases at shapes that keep its three O(T^2 Dh) products small. */
const att_params_t att_cases[ATT_CASE_N] = {
    [ATT_CASE_LONG_CAUSAL] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 1, .peaks = 2, .peak = 25},
    [ATT_CASE_SOFTCAP] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1}, .causal = 1,
        .softcap = 50, .peaks = 3, .peak = 75},
    [ATT_CASE_OUTLIER_CHANNELS] = {.qk = {PARITY_VALS_OUTLIER, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .outliers = 4, .outlier_factor = 6, .causal = 1, .peaks = 1, .peak = 20},
    [ATT_CASE_ODD_T1031] = {.qk = {PARITY_VALS_NORMAL, 1.5}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 0, .peaks = 2, .peak = 22},
    [ATT_CASE_NEAR_ZERO] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 1, .softcap = 50},
    [ATT_CASE_PROD_LLAMA3] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 1, .peaks = 2, .peak = 25},
    [ATT_CASE_EXACT] = {.qk = {PARITY_VALS_SPARSE_POW2, 1}, .v = {PARITY_VALS_SPARSE_POW2, 1},
        .causal = 1, .softcap = 50},
    [ATT_CASE_X1E_3] = {.qk = {PARITY_VALS_NORMAL, 1e-3}, .v = {PARITY_VALS_NORMAL, 1e-3},
        .causal = 1},
    [ATT_CASE_X64] = {.qk = {PARITY_VALS_NORMAL, 64}, .v = {PARITY_VALS_NORMAL, 64}, .causal = 1,
        .softcap = 50},
    [ATT_CASE_NEAR_MAX] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 0x1p100},
        .causal = 0},
    [ATT_CASE_SUBNORMAL] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1e-39},
        .causal = 1},
    [ATT_CASE_SOL_EXECBENCH] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 1, .softcap = 50},
    [ATT_CASE_KERNELBENCH] = {.qk = {PARITY_VALS_UNIFORM01, 1}, .v = {PARITY_VALS_UNIFORM01, 1},
        .causal = 1, .softcap = 50},
    [ATT_CASE_ASSERT_CLOSE] = {.qk = {PARITY_VALS_NORMAL, 1}, .v = {PARITY_VALS_NORMAL, 1},
        .causal = 1, .softcap = 50},
};

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define ATT_RANGE(name_, case_, summary_)                                                        \
    {.name = name_, .summary = summary_, .n = 259, .d = 64, .v = 2, .params = &att_cases[case_]}
static const parity_workload_t ATT_PRESETS[] = {
    {.name = "long-causal",
     .summary = "T=4096 causal, 1 head of Dh=64, randn Q/K with 2 keys per query at scores 20-30",
     .n = 4096, .d = 64, .v = 1,
     .params = &att_cases[ATT_CASE_LONG_CAUSAL]},
    {.name = "softcap",
     .summary = "Gemma-2 style: softcap 50, Dh=256, T=1024 causal, raw scores 70-80 on 3 keys per query",
     .n = 1024, .d = 256, .v = 2,
     .params = &att_cases[ATT_CASE_SOFTCAP]},
    {.name = "outlier-channels",
     .summary = "massive activations: 4 of 128 Q/K channels x6, T=2048 causal, 1 key per query at 15-25",
     .n = 2048, .d = 128, .v = 1,
     .params = &att_cases[ATT_CASE_OUTLIER_CHANNELS]},
    {.name = "odd-t1031",
     .summary = "T=1031 (no block multiple), no mask, Dh=80, 3 heads, 2 keys per query at 17-27",
     .n = 1031, .d = 80, .v = 3,
     .params = &att_cases[ATT_CASE_ODD_T1031]},
    {.name = "near-zero",
     .summary = "public verifiers' scheme: randn Q/K/V, scores ~N(0,1), softcap 50, T=1024 causal",
     .n = 1024, .d = 64, .v = 4,
     .params = &att_cases[ATT_CASE_NEAR_ZERO]},
    {.name = "prod-llama3",
     .summary = "Llama-3-8B attention: Dh=128, T=4096 causal, 2 of its 32 heads, peaks at 20-30",
     .n = 4096, .d = 128, .v = 2, .production = 1,
     .params = &att_cases[ATT_CASE_PROD_LLAMA3]},
    /* Structure and range (docs/workloads.md): T = 259 (4 key blocks of 64 and 3), 2 heads. */
    ATT_RANGE("exact", ATT_CASE_EXACT,
              "sparse powers of two in Q, K, V (0 or +-2^e, |e| <= 2): exact scores, massive ties; causal, softcap 50"),
    ATT_RANGE("x1e-3", ATT_CASE_X1E_3,
              "randn Q, K, V times 1e-3: a near-uniform softmax, causal"),
    ATT_RANGE("x64", ATT_CASE_X64,
              "randn Q, K, V times 64: scores ~ 4096 (one key per query), softcap 50, causal"),
    ATT_RANGE("near-max", ATT_CASE_NEAR_MAX,
              "randn Q, K; V x 2^100 (O and the backward's dP near 2^103), no mask"),
    ATT_RANGE("subnormal", ATT_CASE_SUBNORMAL,
              "randn Q, K; V x 1e-39 (bf16 subnormals): O, dQ and dK in fp32's subnormal range, causal"),
};
#undef ATT_RANGE

static const parity_workload_t ATT_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn Q/K/V, H=8 T=512 Dh=64, causal, softcap 50, seed 200",
     .n = 512, .d = 64, .v = 8,
     .params = &att_cases[ATT_CASE_SOL_EXECBENCH]},
    {.name = "kernelbench",
     .summary = "torch.rand Q/K/V, H=4 T=512 Dh=64, causal, softcap 50",
     .n = 512, .d = 64, .v = 4,
     .params = &att_cases[ATT_CASE_KERNELBENCH]},
    {.name = "assert_close",
     .summary = "small randn Q/K/V, H=2 T=128 Dh=32, causal, softcap 50",
     .n = 128, .d = 32, .v = 2,
     .params = &att_cases[ATT_CASE_ASSERT_CLOSE]},
};

const parity_op_t parity_op_attention_fwd = {
    .name = "attention_fwd",
    .summary = "attention forward: O (H,T,Dh), LSE (H,T) from Q, K, V (H,T,Dh); attrs scale, softcap, "
               "causal (N = T, D = Dh, V = H)",
    .n_inputs = 3,
    .n_outputs = 2,
    .input_names = {"Q", "K", "V"},
    .output_names = {"O", "LSE"},
    .input_is_float = {1, 1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "O[h,i,c]: k = attended keys, s_acc = Σ p_j|v_jc| + |O_c|, s_up = Σ p_j|v_jc - O_c|"
                   "(a_j + rest_j) + rescale and product terms, m_up = Dh+2; LSE[h,i]: s_acc = 1",
    .presets = ATT_PRESETS,
    .n_presets = (int)(sizeof ATT_PRESETS / sizeof ATT_PRESETS[0]),
    .baseline_workloads = ATT_BASELINES,
    .wl_family = &att_family,
    .catalog = {{parity_catalog_attention, &parity_catalog_attention_count}},
    .cost = &parity_cost_attention_fwd,
    .build = att_build,
    .emulate = att_emulate,
    .free_priv = NULL,
    .params = PARITY_ATTENTION_PARAMS,
    .param_value = parity_attention_param_value,
    .param_ref = att_param_ref,
    .variants = {{PARITY_VARIANT_ROUNDED, "the scores scale*(q.k)", 0},
                 {PARITY_VARIANT_ROUNDED, "the scores q.k, and then their product with the scale", 0}},
    .variant_ref = att_variant_ref,
};

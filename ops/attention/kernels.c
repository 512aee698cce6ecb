/* Built-in catalogs for attention_fwd and attention_bwd. Forward: faithful fp32 variants (naive
 * two-pass softmax, FlashAttention-style online softmax over key blocks with running max / sum /
 * accumulator and rescaling, the same in FA2's exp2 domain, bf16 outputs) and mutants modelling
 * real bugs (the accumulator's rescale skipped for the second block, the softmax scale applied
 * twice, the softcap skipped) plus FA2's bf16 P~ (outside the fp32 contract). Backward: naive and
 * FA2-order faithful variants, bf16 outputs, and mutants (softcap derivative missing, dK without
 * the scale, LSE taken as log2). Scalar C on the CPU: the arithmetic of a GPU kernel, not its speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"

/* Row loops at O3 (as src/format/format_bulk.c's hot loops): vectorises the accumulator updates over
 * Dh without reassociating any sum (-ffp-contract=off still holds), so the arithmetic is the
 * same, only the per-workload check time shrinks. */
#define HOT __attribute__((optimize("O3")))

typedef struct {
    int bk;           /* key block size of the online softmax; 0: two-pass over the whole row */
    int exp2_domain;  /* FA2: scores times scale*log2(e), exp2f, LSE converted back with ln 2 */
    int skip_rescale; /* mutant: acc not rescaled when the max grows in block 1 (the second) */
    int scale_twice;  /* mutant: s = (q.k) * scale * scale (Q pre-scaled and scaled again) */
    int no_softcap;   /* mutant: the softcap attribute ignored */
    int p_bf16;       /* FA2/FA3 with bf16 inputs: P~ rounded to bf16 for the P~V product only */
    int l_bf16;       /* mutant: the running row sum l kept in a bf16 register */
    int acc_bf16;     /* mutant: the output accumulator kept in bf16 (a half-precision O tile) */
    int s_bf16;       /* mutant: the scores scale·(q·k) rounded to bf16 (eager attention with
                         bf16 QK^T scores), everything after in fp32 */
} cfg_t;

typedef struct {
    const parity_abi_call_t *call;
    cfg_t cfg;
    const float *q, *k, *v; /* (H, T, Dh) in fp32 (exact copies of bf16/fp32 inputs) */
    int64_t T, dh;
    float scale, softcap;
    int causal;
    int failed;
} att_t;

/* fp32 dot product with four interleaved partial sums (the order a vectorised kernel uses). */
HOT static float dot(const float *a, const float *b, int64_t n)
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

/* The score of key j as the kernel feeds it to exp: scale, softcap, and in the exp2 domain the
 * factor log2(e). */
HOT static float score(const att_t *g, const float *q, const float *kj)
{
    float s = dot(q, kj, g->dh) * g->scale;
    if (g->cfg.s_bf16) s = parity_round_bf16(s);
    if (g->cfg.scale_twice) s *= g->scale;
    if (g->softcap > 0 && !g->cfg.no_softcap) s = g->softcap * tanhf(s / g->softcap);
    if (g->cfg.exp2_domain) s *= 1.44269504088896340736f; /* log2(e) */
    return s;
}

static float ex(const att_t *g, float x) { return g->cfg.exp2_domain ? exp2f(x) : expf(x); }

HOT static void rows(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    att_t *g = p;
    int64_t T = g->T, dh = g->dh;
    float *s = malloc((size_t)(T + 2 * dh) * sizeof *s);
    if (!s) {
        g->failed = 1;
        return;
    }
    float *restrict acc = s + T, *restrict pv = acc + dh;
    parity_abi_tensor_t *O = &g->call->outputs[0], *LSE = &g->call->outputs[1];
    for (int64_t r = b; r < e; r++) { /* r = h*T + i */
        int64_t h = r / T, i = r % T, kend = g->causal ? i + 1 : T;
        const float *q = g->q + r * dh, *K = g->k + h * T * dh, *V = g->v + h * T * dh;
        float m = -INFINITY, l = 0;
        for (int64_t c = 0; c < dh; c++) acc[c] = 0;
        if (g->cfg.bk == 0) { /* two-pass: scores, max, sum of exps, then Σ (e_j / S) v_j */
            for (int64_t j = 0; j < kend; j++) {
                s[j] = score(g, q, K + j * dh);
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < kend; j++) {
                s[j] = ex(g, s[j] - m);
                l += s[j];
            }
            for (int64_t j = 0; j < kend; j++) {
                float pj = s[j] / l;
                const float *restrict vj = V + j * dh;
                for (int64_t c = 0; c < dh; c++) acc[c] += pj * vj[c];
            }
            for (int64_t c = 0; c < dh; c++) parity_put_f32(O, r * dh + c, acc[c]);
        } else { /* online softmax over key blocks of bk (the last one partial) */
            for (int64_t j0 = 0, blk = 0; j0 < kend; j0 += g->cfg.bk, blk++) {
                int64_t j1 = j0 + g->cfg.bk < kend ? j0 + g->cfg.bk : kend;
                float mb = -INFINITY;
                for (int64_t j = j0; j < j1; j++) {
                    s[j] = score(g, q, K + j * dh);
                    mb = s[j] > mb ? s[j] : mb;
                }
                float mn = mb > m ? mb : m;
                float alpha = m == -INFINITY ? 0.0f : ex(g, m - mn); /* rescale of the old state */
                float rs = 0;
                for (int64_t c = 0; c < dh; c++) pv[c] = 0;
                for (int64_t j = j0; j < j1; j++) {
                    float pj = ex(g, s[j] - mn);
                    rs += pj;
                    if (g->cfg.p_bf16) pj = parity_round_bf16(pj);
                    const float *restrict vj = V + j * dh;
                    for (int64_t c = 0; c < dh; c++) pv[c] += pj * vj[c];
                }
                l = l * alpha + rs;
                if (g->cfg.l_bf16) l = parity_round_bf16(l);
                if (g->cfg.skip_rescale && blk == 1)
                    for (int64_t c = 0; c < dh; c++) acc[c] += pv[c];
                else
                    for (int64_t c = 0; c < dh; c++) acc[c] = acc[c] * alpha + pv[c];
                if (g->cfg.acc_bf16)
                    for (int64_t c = 0; c < dh; c++) acc[c] = parity_round_bf16(acc[c]);
                m = mn;
            }
            for (int64_t c = 0; c < dh; c++) parity_put_f32(O, r * dh + c, acc[c] / l);
        }
        float lse = g->cfg.exp2_domain ? (m + log2f(l)) * 0.69314718055994530942f : m + logf(l);
        parity_put_f32(LSE, r, lse);
    }
    free(s);
}

static float *to_f32(const parity_abi_tensor_t *t, int64_t nrows)
{
    float *x = malloc((size_t)(nrows * t->shape[t->ndim - 1]) * sizeof *x);
    if (x)
        for (int64_t i = 0; i < nrows; i++) parity_row_to_f32(t, i, x + i * t->shape[t->ndim - 1]);
    return x;
}

static int attention(const parity_abi_call_t *call, cfg_t cfg)
{
    const parity_abi_tensor_t *Q = &call->inputs[0];
    if (call->n_inputs != 3 || call->n_outputs != 2 || Q->ndim != 3) return PARITY_KERNEL_ERROR;
    int64_t H = Q->shape[0], T = Q->shape[1], dh = Q->shape[2];
    att_t g = {call, cfg, NULL, NULL, NULL, T, dh, 0, 0, 0, 0};
    g.scale = (float)parity_call_attr(call, "scale", 1.0 / sqrt((double)dh));
    g.softcap = (float)parity_call_attr(call, "softcap", 0);
    g.causal = parity_call_attr(call, "causal", 1) != 0;
    float *q = to_f32(Q, H * T), *k = to_f32(&call->inputs[1], H * T), *v = to_f32(&call->inputs[2], H * T);
    int rc = PARITY_KERNEL_ERROR;
    if (q && k && v) {
        g.q = q;
        g.k = k;
        g.v = v;
        parity_parallel_for(H * T, call->n_threads, rows, &g);
        rc = g.failed ? PARITY_KERNEL_ERROR : PARITY_KERNEL_OK;
    }
    free(q);
    free(k);
    free(v);
    return rc;
}

static int att_two_pass(const parity_abi_call_t *c) { return attention(c, (cfg_t){0, 0, 0, 0, 0, 0, 0, 0, 0}); }
static int att_online(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 0, 0, 0, 0, 0, 0}); }
static int att_online_exp2(const parity_abi_call_t *c) { return attention(c, (cfg_t){128, 1, 0, 0, 0, 0, 0, 0, 0}); }
static int att_skip_rescale(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 1, 0, 0, 0, 0, 0, 0}); }
static int att_scale_twice(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 1, 0, 0, 0, 0, 0}); }
static int att_no_softcap(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 0, 1, 0, 0, 0, 0}); }
static int att_p_bf16(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 0, 0, 1, 0, 0, 0}); }
static int att_l_bf16(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 0, 0, 0, 1, 0, 0}); }
static int att_acc_bf16(const parity_abi_call_t *c) { return attention(c, (cfg_t){64, 0, 0, 0, 0, 0, 0, 1, 0}); }
static int att_s_bf16(const parity_abi_call_t *c) { return attention(c, (cfg_t){0, 0, 0, 0, 0, 0, 0, 0, 1}); }

/* ---- backward ------------------------------------------------------------------------------
 * Per head: D_i = dO_i . O_i; for each attended pair P = exp(t - LSE_i), dP = dO_i . v_j,
 * dS = P (dP - D_i), with a softcap dS~ = (1 - tanh^2(s/c)) dS; dV_j += P dO_i,
 * dK_j += dS~ q_i, dQ_i += dS~ k_j, dQ and dK times scale at the end. */
typedef struct {
    int fa2;           /* FA2 order: key blocks of 64 outer, queries inner, exp2 domain, dQ per block */
    int no_cap_grad;   /* mutant: the softcap's derivative (1 - tanh^2) left out */
    int dk_no_scale;   /* mutant: dK not multiplied by the softmax scale */
    int lse_log2;      /* mutant: exp2 domain with LSE used as if already in log2 units */
    int recompute_o;   /* mutant: O recomputed from Q, K, V (fp32 two-pass) for D, the given O unread */
} bcfg_t;

typedef struct {
    const parity_abi_call_t *call;
    bcfg_t cfg;
    const float *q, *k, *v, *o, *dO, *lse;
    int64_t T, dh;
    float scale, softcap;
    int causal;
    int failed;
} bwd_t;

HOT static void bwd_heads(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    bwd_t *g = p;
    int64_t T = g->T, dh = g->dh;
    float *buf = malloc((size_t)(3 * T * dh + T + dh) * sizeof *buf);
    if (!buf) {
        g->failed = 1;
        return;
    }
    float *restrict dq = buf, *restrict dk = buf + T * dh, *restrict dv = buf + 2 * T * dh;
    float *D = buf + 3 * T * dh, *restrict dqp = D + T;
    const float l2e = 1.44269504088896340736f;
    for (int64_t h = b; h < e; h++) {
        const float *Q = g->q + h * T * dh, *K = g->k + h * T * dh, *V = g->v + h * T * dh;
        const float *dO = g->dO + h * T * dh, *O = g->o + h * T * dh, *L = g->lse + h * T;
        memset(buf, 0, (size_t)(3 * T * dh) * sizeof *buf);
        for (int64_t i = 0; i < T && !g->cfg.recompute_o; i++) D[i] = dot(dO + i * dh, O + i * dh, dh);
        for (int64_t i = 0; i < T && g->cfg.recompute_o; i++) { /* autograd's O: softmax(t) V in fp32 */
            int64_t ke = g->causal ? i + 1 : T;
            float m = -INFINITY, l = 0, *p = dq + i * dh; /* dq's row i as scratch: zeroed below */
            for (int64_t j = 0; j < ke; j++) {
                float t = dot(Q + i * dh, K + j * dh, dh) * g->scale;
                if (g->softcap > 0) t = g->softcap * tanhf(t / g->softcap);
                m = t > m ? t : m;
            }
            for (int64_t c = 0; c < dh; c++) p[c] = 0;
            for (int64_t j = 0; j < ke; j++) {
                float t = dot(Q + i * dh, K + j * dh, dh) * g->scale;
                if (g->softcap > 0) t = g->softcap * tanhf(t / g->softcap);
                float e = expf(t - m);
                l += e;
                for (int64_t c = 0; c < dh; c++) p[c] += e * V[j * dh + c];
            }
            for (int64_t c = 0; c < dh; c++) p[c] /= l;
            D[i] = dot(dO + i * dh, p, dh);
            for (int64_t c = 0; c < dh; c++) p[c] = 0;
        }
        int64_t bk = g->cfg.fa2 ? 64 : T;
        for (int64_t j0 = 0; j0 < T; j0 += bk) {
            int64_t j1 = j0 + bk < T ? j0 + bk : T;
            for (int64_t i = g->causal ? j0 : 0; i < T; i++) {
                const float *qi = Q + i * dh, *gi = dO + i * dh;
                int64_t je = g->causal && i + 1 < j1 ? i + 1 : j1;
                for (int64_t c = 0; c < dh; c++) dqp[c] = 0;
                for (int64_t j = j0; j < je; j++) {
                    const float *kj = K + j * dh, *vj = V + j * dh;
                    float s = dot(qi, kj, dh) * g->scale, gr = 1.0f, t = s;
                    if (g->softcap > 0) {
                        float th = tanhf(s / g->softcap);
                        t = g->softcap * th;
                        if (!g->cfg.no_cap_grad) gr = 1.0f - th * th;
                    }
                    float P;
                    if (!g->cfg.fa2) P = expf(t - L[i]);
                    else if (g->cfg.lse_log2) P = exp2f(t * l2e - L[i]);
                    else P = exp2f(t * l2e - L[i] * l2e);
                    float dS = P * (dot(gi, vj, dh) - D[i]) * gr;
                    float *restrict dkj = dk + j * dh, *restrict dvj = dv + j * dh;
                    for (int64_t c = 0; c < dh; c++) {
                        dqp[c] += dS * kj[c];
                        dkj[c] += dS * qi[c];
                        dvj[c] += P * gi[c];
                    }
                }
                /* dQ: one partial per key block, added as FA2's atomicAdd of dQ does. */
                float *restrict dqi = dq + i * dh;
                for (int64_t c = 0; c < dh; c++) dqi[c] += dqp[c];
            }
        }
        parity_abi_tensor_t *oq = &g->call->outputs[0], *ok = &g->call->outputs[1], *ov = &g->call->outputs[2];
        float sk = g->cfg.dk_no_scale ? 1.0f : g->scale;
        for (int64_t x = 0; x < T * dh; x++) {
            parity_put_f32(oq, h * T * dh + x, dq[x] * g->scale);
            parity_put_f32(ok, h * T * dh + x, dk[x] * sk);
            parity_put_f32(ov, h * T * dh + x, dv[x]);
        }
    }
    free(buf);
}

static int attention_bwd(const parity_abi_call_t *call, bcfg_t cfg)
{
    const parity_abi_tensor_t *Q = &call->inputs[0];
    if (call->n_inputs != 6 || call->n_outputs != 3 || Q->ndim != 3) return PARITY_KERNEL_ERROR;
    int64_t H = Q->shape[0], T = Q->shape[1], dh = Q->shape[2];
    bwd_t g = {call, cfg, NULL, NULL, NULL, NULL, NULL, NULL, T, dh, 0, 0, 0, 0};
    g.scale = (float)parity_call_attr(call, "scale", 1.0 / sqrt((double)dh));
    g.softcap = (float)parity_call_attr(call, "softcap", 0);
    g.causal = parity_call_attr(call, "causal", 1) != 0;
    float *in[6];
    for (int a = 0; a < 6; a++) in[a] = to_f32(&call->inputs[a], a == 5 ? H : H * T);
    int rc = PARITY_KERNEL_ERROR, ok = 1;
    for (int a = 0; a < 6; a++) ok = ok && in[a];
    if (ok) {
        g.q = in[0];
        g.k = in[1];
        g.v = in[2];
        g.o = in[3];
        g.dO = in[4];
        g.lse = in[5];
        parity_parallel_for(H, call->n_threads, bwd_heads, &g);
        rc = g.failed ? PARITY_KERNEL_ERROR : PARITY_KERNEL_OK;
    }
    for (int a = 0; a < 6; a++) free(in[a]);
    return rc;
}

static int bwd_naive(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){0, 0, 0, 0, 0}); }
static int bwd_fa2(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){1, 0, 0, 0, 0}); }
static int bwd_no_cap_grad(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){1, 1, 0, 0, 0}); }
static int bwd_dk_no_scale(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){1, 0, 1, 0, 0}); }
static int bwd_lse_log2(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){1, 0, 0, 1, 0}); }
static int bwd_recomputed_o(const parity_abi_call_t *c) { return attention_bwd(c, (bcfg_t){0, 0, 0, 0, 1}); }

#define K(name, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, "attention_fwd", desc, 0, in, out, fn, exp}
#define KB(name, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, "attention_bwd", desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_attention[] = {
    K("fp32", "naive two-pass fp32: scores, max, sum of expf, O = sum (e_j/S) v_j", BF, F32, att_two_pass, "faithful"),
    K("online", "online softmax over key blocks of 64: fp32 running max/sum/accumulator, rescaled by expf(m_old - m_new)", BF, F32, att_online, "faithful"),
    K("online_exp2", "FA2-style: blocks of 128, scores times log2(e), exp2f, LSE back in natural log", BF, F32, att_online_exp2, "faithful"),
    K("bf16_out", "online (blocks of 64), O and LSE rounded to bf16", BF, BF, att_online, "faithful"),
    K("skip_rescale", "online, but the accumulator is not rescaled when the max grows in the second key block", BF, F32, att_skip_rescale, "unfaithful"),
    K("scale_twice", "online, softmax scale applied twice (pre-scaled Q scaled again)", BF, F32, att_scale_twice, "unfaithful"),
    K("no_softcap", "online, softcap ignored (s instead of c*tanh(s/c))", BF, F32, att_no_softcap, "unfaithful"),
    KB("fp32", "naive: queries outer, keys inner, P = expf(t - LSE), sequential fp32 dQ/dK/dV", BF, F32, bwd_naive, "faithful"),
    KB("fa2", "FA2 order: key blocks of 64 outer, queries inner, exp2 domain, dQ added once per key block", BF, F32, bwd_fa2, "faithful"),
    KB("bf16_out", "fa2, dQ/dK/dV rounded to bf16", BF, BF, bwd_fa2, "faithful"),
    KB("no_softcap_grad", "fa2, the softcap's derivative 1 - tanh^2(s/c) left out of dS", BF, F32, bwd_no_cap_grad, "unfaithful"),
    KB("dk_no_scale", "fa2, dK not multiplied by the softmax scale (dQ is)", BF, F32, bwd_dk_no_scale, "unfaithful"),
    KB("lse_log2", "fa2, P = exp2(t log2(e) - LSE): the natural-log LSE used as a log2 one", BF, F32, bwd_lse_log2, "unfaithful"),
    KB("recomputed_o", "naive, but D = rowsum(dO o O) from O recomputed from Q, K, V in fp32 (autograd through the forward), not the given O: differs where the given O was rounded (bf16)", BF, F32, bwd_recomputed_o, "unfaithful"),
    K("p_bf16", "online, P~ rounded to bf16 for the P~V product, fp32 row sum (FA2/FA3 with bf16 inputs; within the bf16 contract)", BF, F32, att_p_bf16, "faithful"),
    K("l_bf16", "online, the running row sum l kept in bf16 (a half-precision softmax denominator)", BF, F32, att_l_bf16, "unfaithful"),
    K("acc_bf16", "online, the output accumulator rescaled and accumulated in bf16 (a half-precision O tile)", BF, F32, att_acc_bf16, "unfaithful"),
    K("scores_bf16", "two-pass, the scores scale*(q.k) rounded to bf16 before the softmax (eager attention computing QK^T in bf16)", BF, F32, att_s_bf16, "unfaithful"),
};
const int parity_catalog_attention_count =
    (int)(sizeof parity_catalog_attention / sizeof parity_catalog_attention[0]);

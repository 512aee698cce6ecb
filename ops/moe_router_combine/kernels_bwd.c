/* Built-in catalog for moe_router_combine_bwd: faithful fp32 variants (sequential fp32 dots with
 * rounded products; fmaf dots with a pairwise normaliser; fp32 inputs; bf16 outputs) and mutants
 * modelling real bugs (the g = dout·y dot products accumulated in bf16, the softmax Jacobian's
 * −w_e Σ w_f g_f term forgotten, gradient leaking into unselected experts' d_expert_out through
 * the unmasked probabilities, the raw-probability backward used for a renormalising router).
 * Selection is on the logits with the lower id first (the forward's rule; docs/ops/
 * moe_router_combine.md shows every faithful fp32 kernel selects the same on parity's inputs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "parity/format.h"
#include "parity/moe.h"

typedef enum {
    M_FP32 = 0,       /* expf, sequential fp32 normaliser, fp32 dots (product rounded, then added) */
    M_FMA,            /* pairwise fp32 normaliser over E, fmaf dots and G */
    M_BF16_DOT,       /* g = dout·y accumulated in a bf16 register (a bf16 matmul epilogue-free
                         dot, e.g. torch.bmm on bf16 tensors without fp32 accumulation) */
    M_NO_JACOBIAN,    /* d_logit_e = w_e g_e: the −w_e Σ w_f g_f term of the softmax Jacobian
                         forgotten (the diagonal-only softmax backward) */
    M_DENSE_DEXP,     /* d_expert_out at unselected experts = p_e·dout: the backward multiplies by
                         the saved pre-top-k probabilities instead of the masked gates */
    M_RENORM_IGNORED  /* the renorm = 0 backward (weights = raw probabilities over E) whatever
                         `renorm` says: a Switch / Qwen2-MoE backward reused for Mixtral */
} mode_t_;

static float bf16r(float v) { return parity_bf16_to_fp32_1(parity_fp32_to_bf16_1(v)); }

static int mrb(const parity_abi_call_t *call, mode_t_ mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *Y = &call->inputs[1], *DO = &call->inputs[2];
    parity_abi_tensor_t *DE = &call->outputs[0], *DL = &call->outputs[1];
    int64_t n = X->shape[0], e = X->shape[1], d = Y->shape[2];
    double kd = parity_call_attr(call, "k", 0);
    int renorm = parity_call_attr(call, "renorm", 1) != 0;
    if (!(kd >= 1 && kd <= (double)e)) return PARITY_KERNEL_ERROR;
    int k = (int)kd;
    if (mode == M_RENORM_IGNORED) renorm = 0;
    float *x = malloc((size_t)(4 * e + 2 * d) * sizeof *x);
    double *xd = malloc((size_t)e * sizeof *xd);
    int32_t *ids = malloc((size_t)k * sizeof *ids);
    if (!x || !xd || !ids) {
        free(x);
        free(xd);
        free(ids);
        return PARITY_KERNEL_ERROR;
    }
    float *ex = x + e, *q = ex + e, *g = q + e, *dout = g + e, *y = dout + d;
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        parity_row_to_f32(DO, i, dout);
        for (int64_t j = 0; j < e; j++) xd[j] = x[j];
        parity_moe_topk(xd, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, ids);
        float m = x[ids[0]];
        for (int64_t j = 0; j < e; j++) {
            ex[j] = expf(x[j] - m);
            q[j] = 0.0f;
            g[j] = 0.0f;
        }
        /* The weights: over the k selected (renorm) or all E (raw). p (full softmax) is kept in
         * ex for the dense mutant. */
        float s = 0.0f;
        if (renorm) {
            for (int r = 0; r < k; r++) s += ex[ids[r]];
            for (int r = 0; r < k; r++) q[ids[r]] = ex[ids[r]] / s;
        } else {
            if (mode == M_FMA) s = parity_pairwise_f32(ex, e);
            else
                for (int64_t j = 0; j < e; j++) s += ex[j];
            for (int64_t j = 0; j < e; j++) q[j] = ex[j] / s;
        }
        /* d_expert_out: w_e·dout at the selected, 0 elsewhere (or p_e·dout for the mutant). */
        float sall = 0.0f;
        if (mode == M_DENSE_DEXP)
            for (int64_t j = 0; j < e; j++) sall += ex[j];
        for (int64_t j = 0; j < e; j++) {
            int selj = 0;
            for (int r = 0; r < k; r++) selj |= ids[r] == (int32_t)j;
            float wj = selj ? q[j] : mode == M_DENSE_DEXP ? ex[j] / sall : 0.0f;
            for (int64_t c = 0; c < d; c++) parity_put_f32(DE, (i * e + j) * d + c, wj * dout[c]);
        }
        /* g_e = dout·y_e for the selected, and G = Σ w_f g_f. */
        float G = 0.0f;
        for (int r = 0; r < k; r++) {
            parity_row_to_f32(Y, i * e + ids[r], y);
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++) {
                if (mode == M_FMA) acc = fmaf(dout[c], y[c], acc);
                else if (mode == M_BF16_DOT) acc = bf16r(acc + dout[c] * y[c]);
                else {
                    float t = dout[c] * y[c];
                    acc += t;
                }
            }
            g[ids[r]] = acc;
            if (mode == M_FMA) G = fmaf(q[ids[r]], acc, G);
            else {
                float t = q[ids[r]] * acc;
                G += t;
            }
        }
        for (int64_t j = 0; j < e; j++) {
            float v = q[j] == 0.0f ? 0.0f : mode == M_NO_JACOBIAN ? q[j] * g[j] : q[j] * (g[j] - G);
            parity_put_f32(DL, i * e + j, v);
        }
    }
    free(x);
    free(xd);
    free(ids);
    return PARITY_KERNEL_OK;
}

static int k_fp32(const parity_abi_call_t *c) { return mrb(c, M_FP32); }
static int k_fma(const parity_abi_call_t *c) { return mrb(c, M_FMA); }
static int k_bf16_dot(const parity_abi_call_t *c) { return mrb(c, M_BF16_DOT); }
static int k_no_jacobian(const parity_abi_call_t *c) { return mrb(c, M_NO_JACOBIAN); }
static int k_dense_dexp(const parity_abi_call_t *c) { return mrb(c, M_DENSE_DEXP); }
static int k_renorm_ignored(const parity_abi_call_t *c) { return mrb(c, M_RENORM_IGNORED); }

#define K(name, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, "moe_router_combine_bwd", desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_moe_router_combine_bwd[] = {
    K("fp32", "top-k on logits (lower id first), expf, sequential fp32 normaliser, fp32 dots g = dout.y (products rounded), G = sum w g, d = w (g - G)", BF, F32, k_fp32, "faithful"),
    K("fma", "pairwise fp32 normaliser over E, fmaf dots and G", BF, F32, k_fma, "faithful"),
    K("fp32_in", "the fp32 variant on fp32 logits, expert outputs and dout", F32, F32, k_fp32, "faithful"),
    K("bf16_out", "the fp32 variant, d_expert_out and d_logits rounded to bf16", BF, BF, k_fp32, "faithful"),
    K("bf16_dot", "g = dout.y accumulated in bf16 (a bf16 bmm without fp32 accumulation)", BF, F32, k_bf16_dot, "unfaithful"),
    K("no_jacobian", "d_logit = w g: the softmax Jacobian's - w sum(w g) term forgotten", BF, F32, k_no_jacobian, "unfaithful"),
    K("dense_dexp", "d_expert_out of unselected experts = p dout: the saved pre-top-k probabilities instead of the masked gates", BF, F32, k_dense_dexp, "unfaithful"),
    K("renorm_ignored", "the raw-probability (renorm = 0) backward whatever renorm says: a Switch/Qwen2-MoE backward on a Mixtral config", BF, F32, k_renorm_ignored, "unfaithful"),
};
const int parity_catalog_moe_router_combine_bwd_count =
    (int)(sizeof parity_catalog_moe_router_combine_bwd / sizeof parity_catalog_moe_router_combine_bwd[0]);

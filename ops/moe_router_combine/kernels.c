/* Built-in catalog for moe_router_combine: faithful fp32 variants (softmax over all experts then
 * top-k on the probabilities, as TensorRT-LLM / vLLM's topk_softmax; top-k on the logits then
 * softmax over the selected, as Hugging Face Mixtral; fp32 inputs; bf16 outputs) and mutants
 * modelling real bugs (router softmax in bf16, combine accumulated in a bf16 buffer, ties broken
 * toward the higher expert id, renormalisation applied when the model does not renormalise).
 * Routing and combine arithmetic comes from the bit-exact emulator of src/moe/moe.c where it has it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "parity/moe.h"

typedef enum {
    M_FP32 = 0,      /* fp32 softmax over E, top-k on probabilities (lower id first), fp32
                        renormalisation, fp32 combine in slot order */
    M_TOPK_LOGITS,   /* top-k on the logits, expf over the selected (pairwise fp32 sum over all
                        E when not renormalised), combine with fmaf in ascending expert id */
    M_BF16_SOFTMAX,  /* probabilities (and renormalised weights) rounded to bf16 */
    M_BF16_COMBINE,  /* fp32 routing; the combine accumulated in a bf16 buffer (index_add_ into
                        a bf16 output) */
    M_TIE_HIGHID,    /* equal probabilities: the higher expert id first */
    M_RENORM_ALWAYS  /* softmax over the selected logits whatever `renorm` says */
} mode_t_;

/* Pairwise fp32 sum (a warp's butterfly reduction has this shape). */
/* Route one token as a Mixtral-style kernel: top-k on the logits (lower id first), then
 * weights = expf(x - m) over the selected divided by their sum (renorm) or by the pairwise sum
 * over all E (no renorm). */
static void route_logits(const float *x, int64_t e, int k, int renorm, int32_t *ids, float *w,
                         float *ex, double *xd)
{
    for (int64_t j = 0; j < e; j++) xd[j] = x[j];
    parity_moe_topk(xd, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, ids);
    float m = x[ids[0]];
    float s = 0.0f;
    if (renorm) {
        for (int q = 0; q < k; q++) s += expf(x[ids[q]] - m);
    } else {
        for (int64_t j = 0; j < e; j++) ex[j] = expf(x[j] - m);
        s = parity_pairwise_f32(ex, e);
    }
    for (int q = 0; q < k; q++) w[q] = expf(x[ids[q]] - m) / s;
}

static int mrc(const parity_abi_call_t *call, mode_t_ mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *Y = &call->inputs[1];
    parity_abi_tensor_t *O = &call->outputs[0], *G = &call->outputs[1];
    int64_t n = X->shape[0], e = X->shape[1], d = Y->shape[2];
    double kd = parity_call_attr(call, "k", 0);
    int renorm = parity_call_attr(call, "renorm", 1) != 0;
    if (!(kd >= 1 && kd <= (double)e)) return PARITY_KERNEL_ERROR;
    int k = (int)kd;
    float *x = malloc((size_t)(2 * e + (int64_t)k * d + d + k) * sizeof *x);
    double *xd = malloc((size_t)(e + (int64_t)k * d + k + d) * sizeof *xd);
    int32_t *ids = malloc((size_t)k * sizeof *ids);
    if (!x || !xd || !ids) {
        free(x);
        free(xd);
        free(ids);
        return PARITY_KERNEL_ERROR;
    }
    float *ex = x + e, *y = ex + e, *acc = y + (int64_t)k * d, *w = acc + d;
    double *yd = xd + e, *wd = yd + (int64_t)k * d, *od = wd + k;
    parity_moe_spec_t spec = parity_moe_spec_default();
    spec.softmax = mode == M_BF16_SOFTMAX ? PARITY_MOE_SOFTMAX_BF16 : PARITY_MOE_SOFTMAX_FP32;
    spec.tie = mode == M_TIE_HIGHID ? PARITY_MOE_TIE_HIGHID : PARITY_MOE_TIE_LOWID;
    spec.renorm = renorm;
    spec.weights = PARITY_MOE_W_FP32;
    spec.order = PARITY_MOE_ORDER_EXPERT;
    spec.combine = PARITY_MOE_COMBINE_BF16BUF;
    spec.shared = PARITY_MOE_SHARED_NONE;
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        if (mode == M_TOPK_LOGITS || mode == M_RENORM_ALWAYS) {
            route_logits(x, e, k, mode == M_RENORM_ALWAYS ? 1 : renorm, ids, w, ex, xd);
        } else {
            for (int64_t j = 0; j < e; j++) xd[j] = x[j];
            parity_moe_route(&spec, xd, (size_t)e, (size_t)k, ids, wd);
            for (int q = 0; q < k; q++) w[q] = (float)wd[q]; /* fp32 (or bf16) values: exact */
        }
        for (int64_t j = 0; j < e; j++) parity_put_f32(G, i * e + j, 0.0f);
        for (int q = 0; q < k; q++) {
            parity_put_f32(G, i * e + ids[q], w[q]);
            parity_row_to_f32(Y, i * e + ids[q], y + (int64_t)q * d);
        }
        if (mode == M_BF16_COMBINE) {
            for (int q = 0; q < k; q++) {
                wd[q] = w[q];
                for (int64_t c = 0; c < d; c++) yd[(int64_t)q * d + c] = y[(int64_t)q * d + c];
            }
            parity_moe_combine(&spec, ids, wd, (size_t)k, yd, NULL, (size_t)d, od);
            for (int64_t c = 0; c < d; c++) parity_put_f32(O, i * d + c, (float)od[c]);
            continue;
        }
        for (int64_t c = 0; c < d; c++) acc[c] = 0.0f;
        if (mode == M_TOPK_LOGITS) { /* ascending expert id, fused multiply-add */
            for (int64_t j = 0; j < e; j++)
                for (int q = 0; q < k; q++) {
                    if (ids[q] != (int32_t)j) continue;
                    for (int64_t c = 0; c < d; c++) acc[c] = fmaf(w[q], y[(int64_t)q * d + c], acc[c]);
                }
        } else { /* slot order, product rounded then added */
            for (int q = 0; q < k; q++)
                for (int64_t c = 0; c < d; c++) {
                    float t = w[q] * y[(int64_t)q * d + c];
                    acc[c] += t;
                }
        }
        for (int64_t c = 0; c < d; c++) parity_put_f32(O, i * d + c, acc[c]);
    }
    free(x);
    free(xd);
    free(ids);
    return PARITY_KERNEL_OK;
}

static int k_fp32(const parity_abi_call_t *c) { return mrc(c, M_FP32); }
static int k_topk_logits(const parity_abi_call_t *c) { return mrc(c, M_TOPK_LOGITS); }
static int k_bf16_softmax(const parity_abi_call_t *c) { return mrc(c, M_BF16_SOFTMAX); }
static int k_bf16_combine(const parity_abi_call_t *c) { return mrc(c, M_BF16_COMBINE); }
static int k_tie_highid(const parity_abi_call_t *c) { return mrc(c, M_TIE_HIGHID); }
static int k_renorm_always(const parity_abi_call_t *c) { return mrc(c, M_RENORM_ALWAYS); }

#define K(name, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, "moe_router_combine", desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_moe_router_combine[] = {
    K("fp32", "fp32 softmax over E, top-k on probabilities (lower id first), fp32 renorm, fp32 combine in slot order (TensorRT-LLM/vLLM topk_softmax)", BF, F32, k_fp32, "faithful"),
    K("topk_logits", "top-k on logits, expf over the selected / pairwise sum over E, fmaf combine in expert order (HF Mixtral)", BF, F32, k_topk_logits, "faithful"),
    K("fp32_in", "the fp32 variant on fp32 logits and expert outputs", F32, F32, k_fp32, "faithful"),
    K("bf16_out", "the fp32 variant, out and gates rounded to bf16", BF, BF, k_fp32, "faithful"),
    K("bf16_softmax", "router softmax in bf16: probabilities and renormalised weights rounded to bf16", BF, F32, k_bf16_softmax, "unfaithful"),
    K("bf16_combine", "fp32 routing; combine accumulated in a bf16 buffer in expert order (index_add_ into bf16)", BF, BF, k_bf16_combine, "unfaithful"),
    K("tie_highid", "top-k ties broken toward the higher expert id (an unstable sort's order)", BF, F32, k_tie_highid, "unfaithful"),
    K("renorm_always", "softmax over the selected logits even when the model does not renormalise (Mixtral routing on a Qwen2-MoE/DeepSeek-V2 config)", BF, F32, k_renorm_always, "unfaithful"),
};
const int parity_catalog_moe_router_combine_count =
    (int)(sizeof parity_catalog_moe_router_combine / sizeof parity_catalog_moe_router_combine[0]);

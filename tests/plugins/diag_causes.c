/* Test plugin: realistic bugs whose error no accumulator explains, for the diagnosis's cause line
 * (issue #36; tests/cli_diagnosis.sh: the sum_bf16 kernels read intermediate-rounding). Includes only the ABI header and the C library.
 *   log_softmax   sum_bf16, sum_bf16_f32out: the row's sum of exps accumulated in fp32, then
 *                 rounded to bf16 (what torch's CPU log_softmax does on bf16 input)
 *   cross_entropy sum_bf16, sum_bf16_out: the same sum rounded to bf16 in the fused loss and
 *                 gradient (fp32 or bf16 outputs)
 *   gemm          daz: subnormal A and B read as zero (denormals-are-zero on the operands: the bf16
 *                 dot-product instructions' input rule, or MXCSR.DAZ), then the sequential fp32
 *                 loop with IEEE subnormal arithmetic (flush-to-zero; only `subnormal` exposes it)
 *   rmsnorm_fwd   div_d_minus_1: the mean of squares divided by D - 1 (a formula bug)
 *                 eps_1e6: eps 1e-6 where the op's is 1e-5 (a wrapper passing the wrong eps)
 *   rmsnorm_bwd   eps_1e6, div_d_minus_1: the same two bugs in the backward (dx, dgamma) */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"

static float bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) /* round to nearest even; finite inputs */
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static float load(const parity_abi_tensor_t *t, int64_t i)
{
    if (t->dtype == PARITY_DT_BF16) return bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

static void put(parity_abi_tensor_t *t, int64_t i, float v)
{
    if (t->dtype == PARITY_DT_BF16) ((uint16_t *)t->data)[i] = f32_to_bf16(v);
    else ((float *)t->data)[i] = v;
}

static double attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}

/* Row i's max m and its sum of expf(x - m), accumulated in fp32 and rounded to bf16. */
static void row_stats(const parity_abi_tensor_t *X, int64_t i, int64_t v, float *m_out, float *s_out)
{
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = 0; j < v; j++) m = load(X, i * v + j) > m ? load(X, i * v + j) : m;
    for (int64_t j = 0; j < v; j++) s += expf(load(X, i * v + j) - m);
    *m_out = m;
    *s_out = bf(s);
}

static int lsm_sum_bf16(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *X = &call->inputs[0];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], v = X->shape[1];
    for (int64_t i = 0; i < n; i++) {
        float m, s;
        row_stats(X, i, v, &m, &s);
        float L = logf(s);
        for (int64_t j = 0; j < v; j++) put(Y, i * v + j, (load(X, i * v + j) - m) - L);
    }
    return PARITY_KERNEL_OK;
}

static int ce_sum_bf16(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *T = &call->inputs[1];
    parity_abi_tensor_t *LO = &call->outputs[0], *G = &call->outputs[1];
    int64_t n = X->shape[0], v = X->shape[1];
    const int32_t *tg = T->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t t = tg[i];
        if (t < 0 || t >= v) return PARITY_KERNEL_ERROR;
        float m, s;
        row_stats(X, i, v, &m, &s);
        put(LO, i, logf(s) - (load(X, i * v + t) - m));
        for (int64_t j = 0; j < v; j++) {
            float p = expf(load(X, i * v + j) - m) / s;
            put(G, i * v + j, j == t ? p - 1.0f : p);
        }
    }
    return PARITY_KERNEL_OK;
}

static int rms_div_d_minus_1(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *G = &call->inputs[1];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], d = X->shape[1];
    float eps = (float)attr(call, "eps", 1e-5);
    for (int64_t i = 0; i < n; i++) {
        float ss = 0.0f;
        for (int64_t j = 0; j < d; j++) ss += load(X, i * d + j) * load(X, i * d + j);
        float r = 1.0f / sqrtf(ss / (float)(d - 1) + eps);
        for (int64_t j = 0; j < d; j++) put(Y, i * d + j, load(X, i * d + j) * r * load(G, j));
    }
    return PARITY_KERNEL_OK;
}

static int rms_eps_1e6(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *G = &call->inputs[1];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], d = X->shape[1];
    float eps = 1e-6f; /* the call's eps attribute (1e-5) ignored */
    for (int64_t i = 0; i < n; i++) {
        float ss = 0.0f;
        for (int64_t j = 0; j < d; j++) ss += load(X, i * d + j) * load(X, i * d + j);
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t j = 0; j < d; j++) put(Y, i * d + j, load(X, i * d + j) * r * load(G, j));
    }
    return PARITY_KERNEL_OK;
}

/* RMSNorm backward in fp32 with eps and the mean's divisor div (the op's: the call's eps and D):
 * r = 1/sqrtf(ss/div + eps), c = sum(g dy x r)/div, dx = r (g dy - x r c), dgamma = sum dy x r. */
static int rms_bwd_with(const parity_abi_call_t *call, float eps, int div_d_minus_1)
{
    const parity_abi_tensor_t *DY = &call->inputs[0], *X = &call->inputs[1], *G = &call->inputs[2];
    parity_abi_tensor_t *DX = &call->outputs[0], *DG = &call->outputs[1];
    int64_t n = X->shape[0], d = X->shape[1];
    float div = (float)(div_d_minus_1 ? d - 1 : d), *dg = calloc((size_t)d, sizeof *dg);
    if (!dg) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < n; i++) {
        float ss = 0.0f, c = 0.0f;
        for (int64_t j = 0; j < d; j++) ss += load(X, i * d + j) * load(X, i * d + j);
        float r = 1.0f / sqrtf(ss / div + eps);
        for (int64_t j = 0; j < d; j++) c += load(G, j) * load(DY, i * d + j) * (load(X, i * d + j) * r);
        c /= div;
        for (int64_t j = 0; j < d; j++) {
            float xh = load(X, i * d + j) * r, dy = load(DY, i * d + j);
            put(DX, i * d + j, r * (load(G, j) * dy - xh * c));
            dg[j] += dy * xh;
        }
    }
    for (int64_t j = 0; j < d; j++) put(DG, j, dg[j]);
    free(dg);
    return PARITY_KERNEL_OK;
}
static int rms_bwd_eps_1e6(const parity_abi_call_t *call) { return rms_bwd_with(call, 1e-6f, 0); }
static int rms_bwd_div_d_minus_1(const parity_abi_call_t *call)
{
    return rms_bwd_with(call, (float)attr(call, "eps", 1e-5), 1);
}

static float daz(float x) { return fabsf(x) < FLT_MIN ? 0.0f : x; }

static int gemm_daz(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *A = &call->inputs[0], *B = &call->inputs[1];
    parity_abi_tensor_t *C = &call->outputs[0];
    int64_t m = A->shape[0], k = A->shape[1], n = B->shape[1];
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) row[j] = 0.0f;
        for (int64_t t = 0; t < k; t++) {
            float a = daz(load(A, i * k + t));
            for (int64_t j = 0; j < n; j++) row[j] += a * daz(load(B, t * n + j));
        }
        for (int64_t j = 0; j < n; j++) put(C, i * n + j, row[j]);
    }
    free(row);
    return PARITY_KERNEL_OK;
}

#define K(name, op, desc, out, fn) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, PARITY_DT_BF16, out, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("sum_bf16", "log_softmax", "fp32 sum of exps rounded to bf16, bf16 output", PARITY_DT_BF16, lsm_sum_bf16),
    K("sum_bf16_f32out", "log_softmax", "fp32 sum of exps rounded to bf16, fp32 output", PARITY_DT_F32,
      lsm_sum_bf16),
    K("sum_bf16", "cross_entropy", "fp32 sum of exps rounded to bf16, fp32 outputs", PARITY_DT_F32, ce_sum_bf16),
    K("sum_bf16_out", "cross_entropy", "fp32 sum of exps rounded to bf16, bf16 outputs", PARITY_DT_BF16,
      ce_sum_bf16),
    K("daz", "gemm", "subnormal operands read as zero, sequential fp32", PARITY_DT_F32, gemm_daz),
    K("div_d_minus_1", "rmsnorm_fwd", "mean of squares divided by D - 1", PARITY_DT_F32, rms_div_d_minus_1),
    K("eps_1e6", "rmsnorm_fwd", "eps 1e-6 where the op's is 1e-5", PARITY_DT_F32, rms_eps_1e6),
    K("eps_1e6", "rmsnorm_bwd", "eps 1e-6 where the op's is 1e-5", PARITY_DT_F32, rms_bwd_eps_1e6),
    K("div_d_minus_1", "rmsnorm_bwd", "both means divided by D - 1", PARITY_DT_F32, rms_bwd_div_d_minus_1),
};

static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t),
                                           "parity_test_diag_causes",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

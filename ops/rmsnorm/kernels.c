/* Built-in catalog for RMSNorm forward/backward: a faithful fp32 kernel and mutants modelling
 * real bugs for each. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"

/* rmsnorm_fwd: mode 0 faithful, 1 eps outside sqrt, 2 sum of squares in bf16, 3 gamma ignored */
static int rfwd(const parity_abi_call_t *call, int mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *G = &call->inputs[1];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], d = X->shape[1];
    float eps = (float)parity_call_attr(call, "eps", PARITY_RMS_EPS);
    float *x = malloc((size_t)d * 2 * sizeof *x);
    if (!x) return PARITY_KERNEL_ERROR;
    float *g = x + d;
    parity_row_to_f32(G, 0, g);
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        float ss = 0.0f;
        for (int64_t k = 0; k < d; k++) ss = mode == 2 ? parity_round_bf16(ss + x[k] * x[k]) : ss + x[k] * x[k];
        float ms = ss / (float)d;
        float r = mode == 1 ? 1.0f / (sqrtf(ms) + eps) : 1.0f / sqrtf(ms + eps);
        for (int64_t j = 0; j < d; j++) parity_put_f32(Y, i * d + j, x[j] * r * (mode == 3 ? 1.0f : g[j]));
    }
    free(x);
    return PARITY_KERNEL_OK;
}
static int rfwd_fp32(const parity_abi_call_t *c) { return rfwd(c, 0); }
static int rfwd_nogamma(const parity_abi_call_t *c) { return rfwd(c, 3); }
static int rfwd_eps(const parity_abi_call_t *c) { return rfwd(c, 1); }
static int rfwd_bf16ss(const parity_abi_call_t *c) { return rfwd(c, 2); }

/* rmsnorm_bwd: mode 0 faithful, 1 eps outside, 2 gamma ignored, 3 dgamma accumulated in bf16 */
static int rbwd(const parity_abi_call_t *call, int mode)
{
    const parity_abi_tensor_t *DY = &call->inputs[0], *X = &call->inputs[1], *G = &call->inputs[2];
    parity_abi_tensor_t *DX = &call->outputs[0], *DG = &call->outputs[1];
    int64_t n = X->shape[0], d = X->shape[1];
    float eps = (float)parity_call_attr(call, "eps", PARITY_RMS_EPS);
    float *buf = malloc((size_t)d * 6 * sizeof *buf);
    if (!buf) return PARITY_KERNEL_ERROR;
    float *x = buf, *dy = buf + d, *g = buf + 2 * d, *dx = buf + 3 * d, *xdy = buf + 4 * d, *dg = buf + 5 * d;
    memset(dg, 0, (size_t)d * sizeof *dg);
    parity_row_to_f32(G, 0, g);
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        parity_row_to_f32(DY, i, dy);
        parity_rms_bwd_row_f32(x, dy, g, d, eps, dx, xdy, mode == 2, mode == 1);
        for (int64_t j = 0; j < d; j++) {
            parity_put_f32(DX, i * d + j, dx[j]);
            dg[j] = mode == 3 ? parity_round_bf16(dg[j] + xdy[j]) : dg[j] + xdy[j];
        }
    }
    for (int64_t j = 0; j < d; j++) parity_put_f32(DG, j, dg[j]);
    free(buf);
    return PARITY_KERNEL_OK;
}
static int rbwd_fp32(const parity_abi_call_t *c) { return rbwd(c, 0); }
static int rbwd_eps(const parity_abi_call_t *c) { return rbwd(c, 1); }
static int rbwd_gamma(const parity_abi_call_t *c) { return rbwd(c, 2); }
static int rbwd_bf16dg(const parity_abi_call_t *c) { return rbwd(c, 3); }

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_rmsnorm[] = {
    K("fp32", "rmsnorm_fwd", "fp32 sum of squares, 1/sqrtf(mean + eps)", BF, F32, rfwd_fp32, "faithful"),
    K("bf16_out", "rmsnorm_fwd", "fp32 math, output rounded to bf16", BF, BF, rfwd_fp32, "faithful"),
    K("eps_outside_sqrt", "rmsnorm_fwd", "1/(sqrt(mean x^2) + eps)", BF, F32, rfwd_eps, "unfaithful"),
    K("bf16_sumsq", "rmsnorm_fwd", "sum of squares accumulated in bf16", BF, F32, rfwd_bf16ss, "unfaithful"),
    K("gamma_ignored", "rmsnorm_fwd", "y = x r: gamma never applied (a fused kernel that leaves the scale to an epilogue that is not run)", BF, F32, rfwd_nogamma, "unfaithful"),
    K("fp32", "rmsnorm_bwd", "textbook fp32 backward", BF, F32, rbwd_fp32, "faithful"),
    K("eps_outside_sqrt", "rmsnorm_bwd", "1/(sqrt(mean x^2) + eps)", BF, F32, rbwd_eps, "unfaithful"),
    K("gamma_ignored", "rmsnorm_bwd", "dx computed as if gamma were 1", BF, F32, rbwd_gamma, "unfaithful"),
    K("bf16_dgamma", "rmsnorm_bwd", "dgamma accumulated over tokens in bf16", BF, F32, rbwd_bf16dg, "unfaithful"),
};
const int parity_catalog_rmsnorm_count = (int)(sizeof parity_catalog_rmsnorm / sizeof parity_catalog_rmsnorm[0]);

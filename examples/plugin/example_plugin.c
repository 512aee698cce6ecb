/* An example parity plugin: two kernels for the op `embedding_rmsnorm_bwd`.
 *
 * This file is meant to be copied. It includes nothing but parity's ABI header
 * (include/parity/kernel_abi.h, self-contained) and the C standard library: a plugin never
 * links against libparity.
 *
 *   faithful_fp32  bf16 inputs, fp32 accumulation, fp32 outputs: what parity calls faithful.
 *   bf16_accum     the same math, but dE is accumulated in bf16 (as an atomicAdd into a bf16
 *                  buffer does): parity judges it unfaithful on rows hit by many tokens.
 *
 * The op (run `parity ops` for the authoritative signature):
 *   inputs  dy (N,D), x (N,D), gamma (D), ids (N, int32)     -- in that order
 *   outputs dE (V,D), dgamma (D)                              -- in that order
 *   attrs   eps
 * Per row i:  r = 1/sqrt(mean_j x_ij^2 + eps)
 *             c = mean_j (gamma_j * dy_ij * x_ij * r)
 *             dx_ij = r * (gamma_j * dy_ij - x_ij * r * c)
 *             dE[ids[i], :] += dx_i            (dE starts from zero)
 *             dgamma_j += dy_ij * x_ij * r
 *
 * Build (see docs/plugins.md):
 *   gcc -O2 -ffp-contract=off -fPIC -shared -I include examples/plugin/example_plugin.c \
 *       -o libparity_example.so
 * Check:
 *   parity check embedding_rmsnorm_bwd --kernel ./libparity_example.so
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"

/* ---- dtype helpers ------------------------------------------------------------------------ */

/* bf16 is stored as the upper 16 bits of an IEEE fp32. */
static float bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* fp32 -> bf16, round to nearest, ties to even (NaN stays NaN). */
static uint16_t f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u); /* quiet NaN */
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* Round an fp32 value to the nearest bf16 and back: models a bf16 register/buffer. */
static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/* Element i (counted in elements, strides already applied) of a floating-point tensor. The
 * kernel declares in_dtype; parity hands exactly that dtype, but checking is cheap. */
static float load(const parity_abi_tensor_t *t, int64_t i)
{
    if (t->dtype == PARITY_DT_BF16) return bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

static void store(parity_abi_tensor_t *t, int64_t i, float v)
{
    if (t->dtype == PARITY_DT_BF16) ((uint16_t *)t->data)[i] = f32_to_bf16(v);
    else ((float *)t->data)[i] = v;
}

/* Scalar attribute by name (attributes are passed by name, never by position). */
static double attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}

/* ---- the kernel body ---------------------------------------------------------------------- */

typedef enum { ACC_FP32 = 0, ACC_BF16 = 1 } acc_kind_t;

static int rmsnorm_embedding_bwd(const parity_abi_call_t *call, acc_kind_t acc_kind)
{
    /* Defensive checks: decline what this kernel was not written for. Returning
     * PARITY_KERNEL_UNSUPPORTED gives the verdict "unsupported", never a crash. */
    if (call->n_inputs < 4 || call->n_outputs < 2) return PARITY_KERNEL_UNSUPPORTED;
    const parity_abi_tensor_t *dy = &call->inputs[0], *x = &call->inputs[1];
    const parity_abi_tensor_t *g = &call->inputs[2], *ids_t = &call->inputs[3];
    parity_abi_tensor_t *dE = &call->outputs[0], *dg = &call->outputs[1];
    if (dy->ndim != 2 || x->ndim != 2 || dE->ndim != 2 || ids_t->dtype != PARITY_DT_I32)
        return PARITY_KERNEL_UNSUPPORTED;

    const int64_t n = dy->shape[0], d = dy->shape[1], v = dE->shape[0];
    const int32_t *ids = (const int32_t *)ids_t->data;
    const float eps = (float)attr(call, "eps", 1e-5);
    /* Strides are in elements. Rows of dy/x/dE are strides[0] apart, columns strides[1]. */
    const int64_t dys0 = dy->strides[0], dys1 = dy->strides[1];
    const int64_t xs0 = x->strides[0], xs1 = x->strides[1];
    const int64_t es0 = dE->strides[0], es1 = dE->strides[1];
    const int64_t gs = g->strides[0], dgs = dg->strides[0];

    /* fp32 scratch: the dE accumulator, one dx row, dgamma, and the current row of x/dy. */
    float *acc = malloc((size_t)(v * d + 4 * d + 1) * sizeof *acc);
    if (!acc) return PARITY_KERNEL_ERROR;
    float *dx = acc + v * d, *dgacc = dx + d, *xr = dgacc + d, *dyr = xr + d;

    /* Outputs arrive pre-filled with sentinels (NaN, or other values): zero them ourselves. */
    for (int64_t i = 0; i < v * d; i++) acc[i] = 0.0f;
    for (int64_t j = 0; j < d; j++) dgacc[j] = 0.0f;

    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i * ids_t->strides[0]];
        if (id < 0 || id >= v) { free(acc); return PARITY_KERNEL_ERROR; }
        for (int64_t j = 0; j < d; j++) {
            xr[j] = load(x, i * xs0 + j * xs1);
            dyr[j] = load(dy, i * dys0 + j * dys1);
        }
        /* r = 1/sqrt(mean(x^2) + eps), all in fp32. */
        float ss = 0.0f;
        for (int64_t j = 0; j < d; j++) ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        /* c = mean(gamma * dy * xhat). */
        float c = 0.0f;
        for (int64_t j = 0; j < d; j++) c += load(g, j * gs) * dyr[j] * (xr[j] * r);
        c /= (float)d;
        for (int64_t j = 0; j < d; j++) {
            float xh = xr[j] * r;
            dx[j] = r * (load(g, j * gs) * dyr[j] - xh * c);
            dgacc[j] += dyr[j] * xh; /* dgamma: always fp32 */
        }
        /* The scatter-add into the embedding gradient. This is where the accumulator matters:
         * a row hit by k tokens sums k terms. */
        float *dst = acc + (int64_t)id * d;
        if (acc_kind == ACC_FP32) {
            for (int64_t j = 0; j < d; j++) dst[j] += dx[j];
        } else {
            /* THE BUG: every partial sum is rounded to bf16 (8 significant bits), so once a row
             * is large, small updates are lost. */
            for (int64_t j = 0; j < d; j++) dst[j] = round_bf16(dst[j] + dx[j]);
        }
    }
    /* Write every output element: parity NaN-fills them before the first run and fills them
     * with the reference before the second, so an element left unwritten is caught. */
    for (int64_t r0 = 0; r0 < v; r0++)
        for (int64_t j = 0; j < d; j++) store(dE, r0 * es0 + j * es1, acc[r0 * d + j]);
    for (int64_t j = 0; j < d; j++) store(dg, j * dgs, dgacc[j]);
    free(acc);
    return PARITY_KERNEL_OK;
}

/* ---- entry points ------------------------------------------------------------------------- */

static int run_faithful_fp32(const parity_abi_call_t *call)
{
    return rmsnorm_embedding_bwd(call, ACC_FP32);
}

static int run_bf16_accum(const parity_abi_call_t *call)
{
    return rmsnorm_embedding_bwd(call, ACC_BF16);
}

/* The kernel table. struct_size first: parity uses it as the distance between entries, so a
 * plugin built against a newer header (with more fields) still loads in an older parity. */
static const parity_abi_kernel_t kernels[] = {
    {sizeof(parity_abi_kernel_t), "faithful_fp32", "embedding_rmsnorm_bwd",
     "bf16 in, fp32 accumulation, fp32 out: the faithful reference implementation",
     0 /* flags: deterministic */, PARITY_DT_BF16, PARITY_DT_F32, run_faithful_fp32,
     NULL /* expected: built-in catalog only */},
    {sizeof(parity_abi_kernel_t), "bf16_accum", "embedding_rmsnorm_bwd",
     "dE accumulated in bf16 (atomicAdd into a bf16 dE): the classic incident",
     0, PARITY_DT_BF16, PARITY_DT_BF16, run_bf16_accum, NULL},
};

static const parity_abi_plugin_t plugin = {
    PARITY_ABI_VERSION, /* the header version this plugin was compiled against */
    sizeof(parity_abi_plugin_t),
    "parity_example",
    (int32_t)(sizeof kernels / sizeof kernels[0]),
    kernels,
};

/* The one symbol parity looks up (PARITY_PLUGIN_ENTRY_SYMBOL). Keep it exported with default
 * visibility; everything else can be static. */
const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

/* Shared by the test plugins cheats.c and caching.c: the faithful fused embedding-gradient +
 * RMSNorm backward they compute when they do compute (bf16 or f32 in, fp32 out, contiguous), on
 * the ABI header and the C library alone. */
#ifndef PARITY_TEST_PLUGIN_FUSED_H
#define PARITY_TEST_PLUGIN_FUSED_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static inline float load(const parity_abi_tensor_t *t, int64_t i)
{
    if (t->dtype == PARITY_DT_BF16) return bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

static inline double attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}

/* Faithful computation (bf16 or f32 in, fp32 out, contiguous). Writes dE rows [0, v_rows). */
static inline int compute(const parity_abi_call_t *call, int64_t v_rows)
{
    const parity_abi_tensor_t *dy = &call->inputs[0], *x = &call->inputs[1];
    const parity_abi_tensor_t *g = &call->inputs[2];
    const int32_t *ids = (const int32_t *)call->inputs[3].data;
    float *dE = (float *)call->outputs[0].data, *dg = (float *)call->outputs[1].data;
    int64_t n = dy->shape[0], d = dy->shape[1], v = call->outputs[0].shape[0];
    float eps = (float)attr(call, "eps", 1e-5);
    float *acc = calloc((size_t)(v * d + 2 * d), sizeof *acc);
    if (!acc) return PARITY_KERNEL_ERROR;
    float *dgacc = acc + v * d, *dx = dgacc + d;
    for (int64_t i = 0; i < n; i++) {
        float ss = 0.0f, c = 0.0f;
        for (int64_t j = 0; j < d; j++) ss += load(x, i * d + j) * load(x, i * d + j);
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t j = 0; j < d; j++) c += load(g, j) * load(dy, i * d + j) * (load(x, i * d + j) * r);
        c /= (float)d;
        for (int64_t j = 0; j < d; j++) {
            float xh = load(x, i * d + j) * r;
            dx[j] = r * (load(g, j) * load(dy, i * d + j) - xh * c);
            dgacc[j] += load(dy, i * d + j) * xh;
        }
        float *dst = acc + (int64_t)ids[i] * d;
        for (int64_t j = 0; j < d; j++) dst[j] += dx[j];
    }
    memcpy(dE, acc, (size_t)(v_rows * d) * sizeof *dE);
    memcpy(dg, dgacc, (size_t)d * sizeof *dg);
    free(acc);
    return PARITY_KERNEL_OK;
}

#endif

/* Helpers shared by the catalog kernels of every op family (ops/<family>/kernels*.c) and by
 * references that read ABI tensors: widening a row to fp32, the catalog's output store, a pairwise
 * fp32 sum, and finding an argument of an ABI call by name. Deliberately not here: anything
 * op-specific (each family's header, ops/<family>/<family>.h). */
#include "src/kernel/kernel_util.h"

#include <string.h>

#include "parity/format.h"
#include "parity/tensor.h"

void parity_row_to_f32(const parity_abi_tensor_t *t, int64_t i, float *out)
{
    int64_t d = t->shape[t->ndim - 1];
    if (t->dtype == PARITY_DT_F32) {
        memcpy(out, (const float *)t->data + i * d, (size_t)d * sizeof(float));
    } else if (t->dtype == PARITY_DT_BF16) {
        parity_bf16_to_fp32((const uint16_t *)t->data + i * d, out, (size_t)d);
    } else {
        for (int64_t j = 0; j < d; j++) out[j] = (float)parity_tensor_get(t, i * d + j);
    }
}

void parity_put_f32(parity_abi_tensor_t *o, int64_t i, float v)
{
    if (o->dtype == PARITY_DT_BF16) ((uint16_t *)o->data)[i] = parity_fp32_to_bf16_1(v);
    else ((float *)o->data)[i] = v;
}

float parity_pairwise_f32(const float *v, int64_t n)
{
    if (n == 0) return 0.0f;
    if (n == 1) return v[0];
    int64_t h = n / 2;
    return parity_pairwise_f32(v, h) + parity_pairwise_f32(v + h, n - h);
}

int parity_call_input(const parity_abi_call_t *call, const char *name)
{
    for (int i = 0; i < call->n_inputs; i++)
        if (call->inputs[i].name && strcmp(call->inputs[i].name, name) == 0) return i;
    return -1;
}

int parity_call_output(const parity_abi_call_t *call, const char *name)
{
    for (int i = 0; i < call->n_outputs; i++)
        if (call->outputs[i].name && strcmp(call->outputs[i].name, name) == 0) return i;
    return -1;
}

double parity_call_attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}


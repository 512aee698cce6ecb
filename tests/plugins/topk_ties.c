/* Test plugin: moe_router_combine kernels for the diagnosis's tie cause (issue #36;
 * tests/cli_cause_tie.sh). Includes only the ABI header and the C library. Both are the catalog's
 * fp32 kernel (fp32 softmax over E, top-k on the probabilities, fp32 renormalisation, fp32 combine
 * in slot order) but for the selection:
 *   topk_unstable  equal probabilities ordered by the higher expert id on some rows and the lower
 *                  on others (a hash of the row): an order that is not a stable sort's, as
 *                  torch.topk's; must read tie
 *   rank_swap      on every fifth row the (k+1)-th expert taken instead of the k-th, tie or not
 *                  (an off-by-one in a selection loop); must not read tie */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"

static float load(const parity_abi_tensor_t *t, int64_t i)
{
    if (t->dtype == PARITY_DT_BF16) {
        uint32_t b = (uint32_t)((const uint16_t *)t->data)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    return ((const float *)t->data)[i];
}

static double attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}

/* a ranks before b among probabilities p: larger, or equal and preferred by the row's rule. */
static int before(const float *p, int a, int b, int high)
{
    if (p[a] != p[b]) return p[a] > p[b];
    return high ? a > b : a < b;
}

static int route(const parity_abi_call_t *call, int mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *Y = &call->inputs[1];
    parity_abi_tensor_t *O = &call->outputs[0], *G = &call->outputs[1];
    int64_t n = X->shape[0], e = X->shape[1], d = Y->shape[2];
    int k = (int)attr(call, "k", 0), renorm = attr(call, "renorm", 1) != 0;
    if (k < 1 || k > e || (mode == 1 && k + 1 > e)) return PARITY_KERNEL_ERROR;
    float *p = malloc((size_t)(e + d + k + 1) * sizeof *p);
    int *ord = malloc((size_t)e * sizeof *ord);
    if (!p || !ord) {
        free(p);
        free(ord);
        return PARITY_KERNEL_ERROR;
    }
    float *acc = p + e, *w = acc + d;
    for (int64_t i = 0; i < n; i++) {
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < e; j++) m = fmaxf(m, load(X, i * e + j));
        for (int64_t j = 0; j < e; j++) {
            p[j] = expf(load(X, i * e + j) - m);
            s += p[j];
        }
        for (int64_t j = 0; j < e; j++) p[j] /= s;
        int high = mode == 0 && ((uint32_t)i * 2654435761u >> 13 & 1u);
        for (int64_t j = 0; j < e; j++) ord[j] = (int)j;
        for (int q = 0; q <= k && q < e; q++) /* selection sort of the first k + 1 ranks */
            for (int64_t j = q + 1; j < e; j++)
                if (before(p, ord[j], ord[q], high)) {
                    int t = ord[q];
                    ord[q] = ord[j];
                    ord[j] = t;
                }
        if (mode == 1 && i % 5 == 0) ord[k - 1] = ord[k];
        float rs = 0.0f;
        for (int q = 0; q < k; q++) {
            w[q] = p[ord[q]];
            rs += w[q];
        }
        if (renorm)
            for (int q = 0; q < k; q++) w[q] /= rs;
        for (int64_t j = 0; j < e; j++) ((float *)G->data)[i * e + j] = 0.0f;
        for (int q = 0; q < k; q++) ((float *)G->data)[i * e + ord[q]] = w[q];
        for (int64_t c = 0; c < d; c++) acc[c] = 0.0f;
        for (int q = 0; q < k; q++)
            for (int64_t c = 0; c < d; c++) {
                float t = w[q] * load(Y, (i * e + ord[q]) * d + c);
                acc[c] += t;
            }
        for (int64_t c = 0; c < d; c++) ((float *)O->data)[i * d + c] = acc[c];
    }
    free(p);
    free(ord);
    return PARITY_KERNEL_OK;
}

static int k_unstable(const parity_abi_call_t *c) { return route(c, 0); }
static int k_rank_swap(const parity_abi_call_t *c) { return route(c, 1); }

#define K(name, desc, fn) \
    {sizeof(parity_abi_kernel_t), name, "moe_router_combine", desc, 0, PARITY_DT_BF16, PARITY_DT_F32, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("topk_unstable", "fp32 router, top-k ties ordered by the higher id on some rows, the lower on others", k_unstable),
    K("rank_swap", "fp32 router, every fifth row takes the (k+1)-th expert for the k-th", k_rank_swap),
};

static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t),
                                           "parity_test_topk_ties",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

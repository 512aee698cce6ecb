/* Built-in catalog for embedding forward: a faithful row gather (bf16 and widened-fp32 outputs)
 * and a mutant with a wrong base offset. */
#include <stdlib.h>

#include "ops/ops_impl.h"

/* embedding_fwd */
static int efwd(const parity_abi_call_t *call, int off_by_one)
{
    const parity_abi_tensor_t *E = &call->inputs[0], *ids = &call->inputs[1];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = ids->shape[0], d = E->shape[1], v = E->shape[0];
    float *row = malloc((size_t)d * sizeof *row);
    if (!row) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ((const int32_t *)ids->data)[i];
        /* off_by_one models a gather with a wrong base: the last id reads past the table's
         * logical end, wrapped to stay in memory. */
        if (off_by_one) id = (id + 1) % v;
        parity_row_to_f32(E, id, row);
        for (int64_t j = 0; j < d; j++) parity_put_f32(Y, i * d + j, row[j]);
    }
    free(row);
    return PARITY_KERNEL_OK;
}
static int efwd_copy(const parity_abi_call_t *c) { return efwd(c, 0); }
static int efwd_obo(const parity_abi_call_t *c) { return efwd(c, 1); }

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_embedding_fwd[] = {
    K("copy", "embedding_fwd", "row gather, exact copy", BF, BF, efwd_copy, "faithful"),
    K("copy_fp32_out", "embedding_fwd", "row gather, widened to fp32 (exact)", BF, F32, efwd_copy, "faithful"),
    K("off_by_one", "embedding_fwd", "gathers row id+1: a wrong base offset", BF, BF, efwd_obo, "unfaithful"),
};
const int parity_catalog_embedding_fwd_count =
    (int)(sizeof parity_catalog_embedding_fwd / sizeof parity_catalog_embedding_fwd[0]);

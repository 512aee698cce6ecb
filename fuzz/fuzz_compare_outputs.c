/* libFuzzer target: the outputs file of `parity compare` (parity_outputs_load: tensor names,
 * shapes, dtypes against the case), for the fixed case of fuzz_compare.h. */
#include "fuzz_compare.h"

static parity_case_t *fuzz_case;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parity_diag_t d;
    if (!fuzz_case && parity_case_load(fuzz_compare_gen(1), NULL, &fuzz_case, &d) != PARITY_OK) abort();
    const char *p = fuzz_write(0, "out.safetensors", data, size);
    if (!p) return 0;
    parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
    parity_dtype_t dt;
    if (parity_outputs_load(fuzz_case, p, outs, &dt, &d) == PARITY_OK)
        for (int i = 0; i < fuzz_case->n_outputs; i++) parity_tensor_free(outs[i]);
    return 0;
}

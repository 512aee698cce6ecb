/* libFuzzer target: the safetensors module (header, offsets, conversions) and the logprob view
 * of it (named tensors, shapes, top-k). */
#include "fuzz_lp_common.h"
#include "parity/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parity_safetensors_file_t *f = NULL;
    parity_diag_t d;
    if (parity_safetensors_open_mem(data, size, "fuzz.safetensors", &f, &d) == PARITY_OK) {
        for (size_t i = 0; i < parity_safetensors_count(f); i++) {
            const parity_safetensors_tensor_t *t = parity_safetensors_tensor(f, i);
            double v[16];
            int64_t w[16];
            size_t n = t->numel < 16 ? (size_t)t->numel : 16;
            parity_safetensors_read_f64(f, t, 0, n, v);
            parity_safetensors_read_i64(f, t, 0, n, w);
        }
        parity_safetensors_close(f);
    }
    return fuzz_lp_drain(data, size, "fuzz.safetensors", PARITY_LOGPROB_SAFETENSORS);
}

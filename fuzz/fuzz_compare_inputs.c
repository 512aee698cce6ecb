/* libFuzzer target: the inputs file of `parity compare` (parity_case_load: safetensors, the
 * parity.* metadata, regenerating the case and checking its bytes). The harness skips inputs
 * whose workload would take more than ~2^16 multiply-adds to build (a preset's full size, or
 * "preset@NxDxV" with a large shape): they are valid requests, only too slow for fuzzing. */
#include <string.h>

#include "fuzz_compare.h"

static int small_enough(const uint8_t *data, size_t size)
{
    parity_safetensors_file_t *f = NULL;
    parity_diag_t d;
    if (parity_safetensors_open_mem(data, size, "fuzz.safetensors", &f, &d) != PARITY_OK) return 1; /* rejected early */
    const char *opn = parity_safetensors_metadata(f, "parity.op"), *wn = parity_safetensors_metadata(f, "parity.workload");
    int ok = 1;
    const parity_op_t *op = opn ? parity_op_find(opn) : NULL;
    parity_workload_t wl;
    if (op && wn && parity_op_workload(op, wn, &wl) == PARITY_OK) {
        double n = (double)wl.n, dd = (double)wl.d, v = wl.v > 1 ? (double)wl.v : 1.0;
        ok = n * dd * v <= 65536.0;
    }
    parity_safetensors_close(f);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!small_enough(data, size)) return 0;
    const char *p = fuzz_write(0, "in.safetensors", data, size);
    if (!p) return 0;
    parity_case_t *c = NULL;
    parity_diag_t d;
    if (parity_case_load(p, NULL, &c, &d) == PARITY_OK) parity_case_free(c);
    return 0;
}

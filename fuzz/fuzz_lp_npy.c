/* libFuzzer target: the .npy reader (header parsing, shape validation, row conversion). */
#include "fuzz_lp_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_lp_drain(data, size, "fuzz.npy", PARITY_LOGPROB_NPY);
}

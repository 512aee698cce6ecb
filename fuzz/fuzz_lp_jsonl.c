/* libFuzzer target: the JSONL reader (all JSON shapes, detected from the first record). */
#include "fuzz_lp_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_lp_drain(data, size, "fuzz.jsonl", PARITY_LP_AUTO);
}

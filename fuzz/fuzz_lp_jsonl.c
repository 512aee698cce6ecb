/* libFuzzer target: the JSONL reader (all JSON shapes, detected from the first record); and,
 * on each line of the input, the reader's own tree builder against cJSON's parser (they must
 * build the same tree whenever the builder takes the line). Inputs that format detection
 * (open_common in src/logprob/logprob_read.c) would take for npy or safetensors are not drained here:
 * fuzz_lp_npy and fuzz_lp_safetensors read them, and the shared seed corpus made them a fifth
 * of this target's time (perf: the safetensors open's modality table). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_lp_common.h"
#include "src/logprob/logprob_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *e = p + size;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
        if (n && lp_jsonl_tree_check(p, n) == 1) abort();
        p += n + 1;
    }
    if ((size >= 6 && !memcmp(data, "\x93NUMPY", 6)) || (size >= 9 && data[8] == '{' && data[0] != '{')) return 0;
    return fuzz_lp_drain(data, size, "fuzz.jsonl", PARITY_LOGPROB_AUTO);
}

/* libFuzzer target: GPT-2 vocab.bpe (the input) with a fixed encoder.json (fuzz_gpt2.h). */
#include "fuzz_gpt2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    const char *enc = fuzz_path(0, "encoder.json");
    if (!once++) {
        size_t n;
        char *j = fuzz_gpt2_encoder(&n);
        if (!fuzz_write(0, "encoder.json", j, n)) abort();
        free(j);
    }
    const char *voc = fuzz_write(1, "vocab.bpe", data, size);
    if (voc) fuzz_gpt2_run(enc, voc);
    return 0;
}

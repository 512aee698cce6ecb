/* libFuzzer target: GPT-2 encoder.json (the input) with a fixed vocab.bpe (fuzz_gpt2.h). */
#include "fuzz_gpt2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *enc = fuzz_write(0, "encoder.json", data, size);
    const char *voc = fuzz_path(1, "vocab.bpe");
    static int once;
    if (!once++ && !fuzz_write(1, "vocab.bpe", fuzz_gpt2_vocab_text, sizeof fuzz_gpt2_vocab_text - 1)) abort();
    if (enc) fuzz_gpt2_run(enc, voc);
    return 0;
}

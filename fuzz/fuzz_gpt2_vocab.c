/* libFuzzer target: GPT-2 vocab.bpe (the input) with a fixed encoder.json (fuzz_gpt2.h). The
 * encoder is parsed once (parity_gpt2_encoder_load) and every input goes through
 * parity_gpt2_load_with, the second stage of parity_gpt2_load: parsing the fixed encoder again
 * was half of each execution (cJSON's tree of 259 tokens under ASan). */
#include "fuzz_gpt2.h"
#include "src/tokenizer/tokenizer_gpt2_stages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static parity_gpt2_encoder_t *enc;
    if (!enc) {
        size_t n;
        char *j = fuzz_gpt2_encoder(&n);
        const char *p = fuzz_write(0, "encoder.json", j, n);
        parity_diag_t d;
        if (!p || parity_gpt2_encoder_load(p, &enc, &d) != PARITY_OK) abort();
        free(j);
    }
    const char *voc = fuzz_write(1, "vocab.bpe", data, size);
    if (!voc) return 0;
    parity_gpt2_t *t = NULL;
    parity_diag_t d;
    if (parity_gpt2_load_with(enc, voc, &t, &d) == PARITY_OK) fuzz_gpt2_check(t);
    parity_gpt2_free(t);
    return 0;
}

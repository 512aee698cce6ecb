/* libFuzzer target: llama2.c tokenizer files (parity_llama_tok_load), then encode and decode on
 * a valid one. The first two bytes of the input give the vocab size the model header would give
 * (3 + their little-endian value mod 1024: the file does not store it), the rest is the file. */
#include <stdlib.h>

#include "fuzz_file.h"
#include "parity/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int32_t vocab = 3 + (int32_t)((data[0] | data[1] << 8) % 1024);
    const char *p = fuzz_write(0, "tok.bin", data + 2, size - 2);
    if (!p) return 0;
    parity_llama_tok_t *t = NULL;
    parity_diag_t d;
    if (parity_llama_tok_load(p, vocab, &t, &d) != PARITY_OK) return 0;
    static const char text[] = "Once upon a time, \xc3\xa9l\xe2\x82\xac\n<0x0A>\0z";
    int32_t *ids = NULL;
    size_t n = 0;
    if (parity_llama_tok_encode(t, text, sizeof text - 1, 1, 1, &ids, &n) == PARITY_OK) {
        int32_t prev = -1;
        for (size_t i = 0; i < n; i++) {
            size_t len;
            if (ids[i] < 0 || (size_t)ids[i] >= parity_llama_tok_vocab_size(t)) abort();
            (void)parity_llama_tok_decode_piece(t, prev, ids[i], &len);
            prev = ids[i];
        }
    }
    free(ids);
    parity_llama_tok_free(t);
    return 0;
}

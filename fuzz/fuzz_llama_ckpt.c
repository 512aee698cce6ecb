/* libFuzzer target: llama2.c checkpoints (parity_model_load: the 7-int header, its bounds and the
 * file size it implies), then, on a valid one, a reference forward over two tokens (weights may
 * be anything, NaN included: the forward must not crash). */
#include <stdlib.h>

#include "fuzz_file.h"
#include "parity/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = fuzz_write(0, "model.bin", data, size);
    if (!p) return 0;
    parity_model_t *m = NULL;
    parity_diag_t d;
    if (parity_model_load(p, &m, &d) != PARITY_OK) return 0;
    const parity_model_config_t *c = parity_model_config(m);
    parity_model_path_t path;
    parity_model_path_default(&path);
    parity_model_runner_t *r = NULL;
    if (parity_model_runner_new(m, &path, &r, &d) == PARITY_OK) {
        int32_t tok[2] = {0, c->vocab_size > 1 ? 1 : 0};
        size_t n = c->seq_len >= 2 ? 2 : 1;
        double *logits = malloc(n * (size_t)c->vocab_size * sizeof *logits);
        if (logits && parity_model_forward(r, tok, n, logits, NULL) != PARITY_OK) abort();
        free(logits);
        parity_model_runner_free(r);
    }
    parity_model_free(m);
    return 0;
}

/* libFuzzer target: the MoE side file (parity_model_moe_attach: magic, header against the dense
 * model, the unit permutations, the routers, trailing bytes) on a tiny dense model built once
 * (dim 8, hidden 16, 1 layer, 2 heads, vocab 10, seq_len 4, weights 0.1 sin(i + 1): a side file
 * depends on the shape only, and the shipped stories260K made the forward 90% of the time);
 * on a side file that attaches, a forward over two tokens (routed through the experts) must
 * return OK. Seeds (tests/corpus/moe_side/, fuzz/make_seeds.py): `parity model upcycle` of a
 * model of that shape, 4 experts top-2, with and without a shared part. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "parity/model.h"

enum { D = 8, F = 16, L = 1, H = 2, KV = 2, V = 10, S = 4, HS = D / H };

static parity_model_t *tiny_model(void)
{
    /* llama2.c's layout: embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freqs */
    size_t n = V * D + L * D + L * D * D + 2 * L * HS * KV * D + L * D * D + L * D + 3 * L * F * D + D + S * HS;
    size_t bytes = 28 + 4 * n;
    unsigned char *b = malloc(bytes);
    if (!b) abort();
    const int32_t h[7] = {D, F, L, H, KV, V, S};
    memcpy(b, h, sizeof h);
    for (size_t i = 0; i < n; i++) {
        float w = 0.1f * sinf((float)(i + 1));
        memcpy(b + 28 + 4 * i, &w, 4);
    }
    const char *p = fuzz_write(1, "dense.bin", b, bytes);
    free(b);
    parity_model_t *m = NULL;
    parity_diag_t d;
    if (!p || parity_model_load(p, &m, &d) != PARITY_OK) abort();
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static parity_model_t *m;
    parity_diag_t d;
    if (!m) m = tiny_model();
    const char *p = fuzz_write(0, "moe.bin", data, size);
    if (!p || parity_model_moe_attach(m, p, &d) != PARITY_OK) return 0;
    parity_model_path_t path;
    parity_model_path_default(&path);
    parity_model_runner_t *r = NULL;
    if (parity_model_runner_new(m, &path, &r, &d) == PARITY_OK) {
        int32_t tok[2] = {1, 2};
        double logits[2 * V];
        if (parity_model_forward(r, tok, 2, logits, NULL) != PARITY_OK) abort();
        parity_model_runner_free(r);
    }
    return 0;
}

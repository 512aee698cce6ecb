/* libFuzzer target: the npy sidecars of a logprob dump (X.mask.npy, X.tokens.npy next to X.npy):
 * X.npy is a fixed valid [2, 3] float32 dump; the input is the sidecar, written as the mask when
 * its first byte is even and as the token ids when odd (the other sidecar absent). */
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_lp_common.h"

/* numpy.save of float32 [[-0.5, -1, -inf], [-0.25, 0, -2]] (format 1.0, 128-byte header) */
static size_t main_npy(unsigned char *b)
{
    static const char h[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    memcpy(b, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(b + 10, ' ', 118);
    memcpy(b + 10, h, sizeof h - 1);
    b[127] = '\n';
    static const float v[6] = {-0.5f, -1.0f, -1.0f / 0.0f, -0.25f, 0.0f, -2.0f};
    memcpy(b + 128, v, sizeof v);
    return 128 + sizeof v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    const char *x = fuzz_path(0, "x.npy"), *mk = fuzz_path(1, "x.mask.npy"), *tk = fuzz_path(2, "x.tokens.npy");
    if (!once++) {
        unsigned char b[256];
        size_t n = main_npy(b);
        if (!fuzz_write(0, "x.npy", b, n)) abort();
    }
    if (size < 1) return 0;
    int tokens = data[0] & 1;
    unlink(tokens ? mk : tk);
    if (!fuzz_write(tokens ? 2 : 1, tokens ? "x.tokens.npy" : "x.mask.npy", data + 1, size - 1)) return 0;
    parity_logprob_reader_t *r = NULL;
    parity_diag_t d;
    parity_logprob_read_opts_t o = {0};
    o.n_threads = 1;
    if (parity_logprob_open(x, &o, &r, &d) != PARITY_OK) return 0;
    parity_logprob_seq_t s[2];
    parity_logprob_seq_init(&s[0]);
    parity_logprob_seq_init(&s[1]);
    size_t got;
    while (parity_logprob_next_batch(r, s, 2, &got, &d) == PARITY_OK && got) {}
    parity_logprob_seq_free(&s[0]);
    parity_logprob_seq_free(&s[1]);
    parity_logprob_close(r);
    return 0;
}

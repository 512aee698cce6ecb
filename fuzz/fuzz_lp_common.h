/* Shared body of the logprob reader fuzzers: open the input as a dump named NAME (the extension
 * selects npy / safetensors / JSONL detection) and read every sequence. Any status is fine;
 * a crash, a sanitizer report or a leak is a bug. */
#include <stddef.h>
#include <stdint.h>

#include "parity/logprob.h"

static int fuzz_lp_drain(const uint8_t *data, size_t size, const char *name, parity_logprob_format_t fmt)
{
    parity_logprob_reader_t *r = NULL;
    parity_diag_t d;
    parity_logprob_read_opts_t o = {0};
    o.format = fmt;
    o.n_threads = 1;
    o.max_line = 1 << 20;
    if (parity_logprob_open_mem(data, size, name, &o, &r, &d) != PARITY_OK) return 0;
    parity_logprob_seq_t s[2];
    parity_logprob_seq_init(&s[0]);
    parity_logprob_seq_init(&s[1]);
    size_t got, total = 0;
    /* At most 2^16 sequences: an npy header may declare billions of rows of length 0 in a few
     * bytes, all valid, which the reader would (correctly) return one by one past the
     * fuzzer's timeout. */
    while (total < ((size_t)1 << 16) && parity_logprob_next_batch(r, s, 2, &got, &d) == PARITY_OK && got) total += got;
    parity_logprob_seq_free(&s[0]);
    parity_logprob_seq_free(&s[1]);
    parity_logprob_close(r);
    return 0;
}

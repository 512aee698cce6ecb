/* The GPT-2 tokenizer targets (fuzz_gpt2_encoder.c, fuzz_gpt2_vocab.c): one of the two files is
 * the input, the other a fixed small valid one (the 256 byte tokens plus "Ġt", "he" and "Ġthe";
 * merges "Ġ t", "h e", "Ġt he"); on a valid pair, encode a fixed text and decode it back, which
 * must give the text (byte-level BPE loses nothing). */
#ifndef PARITY_FUZZ_GPT2_H
#define PARITY_FUZZ_GPT2_H

#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "parity/tokenizer.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to
 * U+0100.. in byte order. Writes the UTF-8 of byte b's character to o; returns its length. */
static size_t fuzz_gpt2_char(int b, char *o)
{
    static int map[256], done;
    if (!done) {
        int n = 0;
        for (int i = 0; i < 256; i++) {
            int keep = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            map[i] = keep ? i : 256 + n++;
        }
        done = 1;
    }
    int u = map[b];
    if (u < 0x80) {
        o[0] = (char)u;
        return 1;
    }
    o[0] = (char)(0xC0 | (u >> 6));
    o[1] = (char)(0x80 | (u & 0x3F));
    return 2;
}

/* The fixed encoder.json (malloc'ed, NUL-terminated). */
static char *fuzz_gpt2_encoder(size_t *len)
{
    char *j = malloc(16384), c[4];
    size_t n = 0;
    j[n++] = '{';
    for (int b = 0; b < 256; b++) {
        j[n++] = '"';
        size_t k = fuzz_gpt2_char(b, c);
        if (c[0] == '"' || c[0] == '\\') j[n++] = '\\';
        memcpy(j + n, c, k);
        n += k;
        n += (size_t)sprintf(j + n, "\": %d, ", b);
    }
    n += (size_t)sprintf(j + n, "\"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258}");
    *len = n;
    return j;
}

static const char fuzz_gpt2_vocab_text[] = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";

/* Encode a fixed text with a loaded tokenizer and decode it back: it must give the text. */
static void fuzz_gpt2_check(const parity_gpt2_t *t)
{
    static const char text[] = "the the  theme\n\t\xc3\xa9\xe2\x82\xac \xff\x00 'll 's 123";
    int32_t *ids = NULL;
    size_t n = 0;
    if (parity_gpt2_encode(t, text, sizeof text - 1, &ids, &n) == PARITY_OK) {
        char *back = NULL;
        size_t bl = 0;
        if (parity_gpt2_decode(t, ids, n, &back, &bl) != PARITY_OK) abort();
        if (bl != sizeof text - 1 || memcmp(back, text, bl)) abort(); /* BPE lost bytes */
        free(back);
    }
    free(ids);
}

static inline void fuzz_gpt2_run(const char *enc, const char *voc)
{
    parity_gpt2_t *t = NULL;
    parity_diag_t d;
    if (parity_gpt2_load(enc, voc, &t, &d) != PARITY_OK) return;
    fuzz_gpt2_check(t);
    parity_gpt2_free(t);
}

#endif

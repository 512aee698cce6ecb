/* The two stages of parity_gpt2_load (include/parity/tokenizer.h), for a caller that pairs one
 * encoder.json with many vocab.bpe files: the fuzz target of vocab.bpe (fuzz/fuzz_gpt2_vocab.c)
 * parses its fixed encoder once instead of once per input. Not a public API.
 *   parity_gpt2_encoder_load  encoder.json alone: every check parity_gpt2_load makes of it, the
 *                             same statuses and messages;
 *   parity_gpt2_load_with     a tokenizer from a copy of the encoder and vocab_bpe's merges: the
 *                             same result as parity_gpt2_load on the pair (e is not changed);
 *   parity_gpt2_encoder_free  NULL is fine. */
#ifndef PARITY_TOKENIZER_GPT2_STAGES_H
#define PARITY_TOKENIZER_GPT2_STAGES_H

#include "parity/tokenizer.h"

typedef struct parity_gpt2_encoder parity_gpt2_encoder_t;

parity_status_t parity_gpt2_encoder_load(const char *encoder_json, parity_gpt2_encoder_t **out,
                                         parity_diag_t *diag);
parity_status_t parity_gpt2_load_with(const parity_gpt2_encoder_t *e, const char *vocab_bpe,
                                      parity_gpt2_t **out, parity_diag_t *diag);
void parity_gpt2_encoder_free(parity_gpt2_encoder_t *e);

#endif

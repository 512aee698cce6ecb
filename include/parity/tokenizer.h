/* tokenizer: the two tokenizers of the shared real data, written from their format descriptions.
 *  - GPT-2 byte-level BPE (OpenAI's gpt2_encoder.json + gpt2_vocab.bpe): turns real text into
 *    the skewed token-id streams that the real-text workloads and `parity train` use.
 *  - the llama2.c tokenizer (tok512.bin, a sentencepiece-BPE export) that goes with
 *    stories260K.bin, with karpathy/llama2.c run.c's encode/decode semantics.
 * Neither handles special tokens written inside the text: "<|endoftext|>" or "<s>" in the input is
 * encoded as ordinary text; callers add EOT/BOS/EOS ids themselves.
 * Every object is immutable after loading, so one tokenizer may be shared by threads.
 * docs/tokenizers.md has the sources, the verification against tiktoken and run.c, and speed. */
#ifndef PARITY_TOKENIZER_H
#define PARITY_TOKENIZER_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/tokenizer.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * GPT-2 byte-level BPE
 * ------------------------------------------------------------------------------------------- */

typedef struct parity_gpt2 parity_gpt2_t;

enum {
    PARITY_GPT2_VOCAB_SIZE = 50257, /* tokens in OpenAI's encoder.json */
    PARITY_GPT2_EOT = 50256         /* id of "<|endoftext|>" in that file */
};

/* Loads encoder.json (an object mapping byte-to-unicode token strings to ids 0..n-1, parsed with
 * cJSON) and vocab.bpe (optional "#version" line, then one merge "a b" per line, in rank order).
 * Returns PARITY_OK and *out (free with parity_gpt2_free); PARITY_E_INVALID for NULL arguments;
 * PARITY_E_IO when a file cannot be read; PARITY_E_FORMAT for malformed content (bad JSON, a
 * non-integer or duplicate id, a character outside GPT-2's byte map, a merge line that is not two
 * known tokens whose concatenation is a token); PARITY_E_NOMEM. On error *out is NULL and diag
 * (may be NULL) names the file, the field or line, and what was expected. */
parity_status_t parity_gpt2_load(const char *encoder_json, const char *vocab_bpe,
                                 parity_gpt2_t **out, parity_diag_t *diag);

/* parity_gpt2_load on gpt2_encoder.json and gpt2_vocab.bpe, each found by parity_data_path
 * (status.h); PARITY_E_IO naming the missing file and the places looked in. */
parity_status_t parity_gpt2_load_default(parity_gpt2_t **out, parity_diag_t *diag);

/* Frees a tokenizer; NULL is a no-op. */
void parity_gpt2_free(parity_gpt2_t *tok);

/* Number of tokens (50257 for OpenAI's files); 0 for NULL. */
size_t parity_gpt2_vocab_size(const parity_gpt2_t *tok);

/* Encodes len bytes of text (UTF-8; need not be NUL-terminated; may contain NUL) exactly as
 * GPT-2 / tiktoken's encode_ordinary does. Bytes that are not valid UTF-8 cannot be matched by the
 * pre-tokenizer; each maximal run of them becomes one pre-token of its own, so every input still
 * round-trips through parity_gpt2_decode. On PARITY_OK, *ids is a malloc'ed array of *n_ids ids
 * (the caller frees it with free(); NULL when *n_ids is 0). Returns PARITY_E_INVALID for NULL
 * arguments (text may be NULL only when len is 0), PARITY_E_NOMEM on allocation failure. */
parity_status_t parity_gpt2_encode(const parity_gpt2_t *tok, const char *text, size_t len,
                                   int32_t **ids, size_t *n_ids);

/* The raw bytes of token id (GPT-2's unicode remapping undone, so " the" not "Ġthe"), with their
 * length in *len (len may be NULL). The bytes are not NUL-terminated and may be partial UTF-8.
 * The pointer lives as long as tok. Returns NULL (and *len = 0) for an id out of range. */
const char *parity_gpt2_token_str(const parity_gpt2_t *tok, int32_t id, size_t *len);

/* Concatenates the bytes of n ids. On PARITY_OK *text is a malloc'ed buffer of *len bytes plus a
 * terminating NUL (caller frees). PARITY_E_INVALID for NULL arguments or an id out of range. */
parity_status_t parity_gpt2_decode(const parity_gpt2_t *tok, const int32_t *ids, size_t n,
                                   char **text, size_t *len);

/* Convenience for workloads: loads the GPT-2 tokenizer from the data folders (parity_data_path) and encodes the
 * whole file at text_path. Ownership of *ids as in parity_gpt2_encode. Returns the statuses of
 * parity_gpt2_load_default, PARITY_E_IO (with diag) when text_path cannot be read. */
parity_status_t parity_text_tokens_gpt2(const char *text_path, int32_t **ids, size_t *n,
                                        parity_diag_t *diag);

/* ---------------------------------------------------------------------------------------------
 * llama2.c tokenizer (tokenizer.bin / tok512.bin)
 * ------------------------------------------------------------------------------------------- */

typedef struct parity_llama_tok parity_llama_tok_t;

enum {
    PARITY_LLAMA_UNK = 0, /* "<unk>" */
    PARITY_LLAMA_BOS = 1, /* "\n<s>\n" */
    PARITY_LLAMA_EOS = 2  /* "\n</s>\n" */
};

/* Loads a llama2.c tokenizer file: int32 max_token_length, then vocab_size entries of
 * (float32 score, int32 len, len bytes). vocab_size is not stored in the file; pass the model
 * header's (512 for stories260K). Each len must be in [0, max_token_length], each score finite,
 * and the entries must end exactly at the end of the file (trailing bytes mean the vocab_size
 * does not belong to this file). Returns PARITY_OK and *out (free with parity_llama_tok_free);
 * PARITY_E_INVALID for NULL arguments or vocab_size < 3 (BOS/EOS ids would not exist);
 * PARITY_E_IO when the file cannot be read; PARITY_E_FORMAT with diag naming the file, the token
 * index and field, and what was expected; PARITY_E_NOMEM. */
parity_status_t parity_llama_tok_load(const char *path, int32_t vocab_size,
                                      parity_llama_tok_t **out, parity_diag_t *diag);

/* Frees a tokenizer; NULL is a no-op. */
void parity_llama_tok_free(parity_llama_tok_t *tok);

/* vocab_size as loaded; 0 for NULL. */
size_t parity_llama_tok_vocab_size(const parity_llama_tok_t *tok);

/* The stored piece of id (bytes, not NUL-terminated, "<0x0A>" kept literally), its length in
 * *len (may be NULL) and, if score is non-NULL, its score. NULL for an id out of range. */
const char *parity_llama_tok_piece(const parity_llama_tok_t *tok, int32_t id, size_t *len,
                                   float *score);

/* Encodes len bytes of text with run.c's encode(): BOS if bos, then the piece " " (the
 * sentencepiece dummy prefix) when len > 0, then one token per UTF-8 character (a lead byte and
 * up to 3 continuation bytes) or, when that character is not a piece, one byte-fallback id
 * (byte + 3) per byte; then repeatedly merges the adjacent pair whose concatenated piece exists
 * and has the highest score (ties: leftmost; scores <= -1e10 never merge); then EOS if eos.
 * The result is identical to run.c's O(n^2) loop but computed in O(n log n). Unlike run.c, the
 * text is len bytes and may contain NUL (it takes the byte fallback id 3). On PARITY_OK *ids is
 * malloc'ed (caller frees; NULL when *n_ids is 0). PARITY_E_INVALID for NULL arguments,
 * PARITY_E_NOMEM on allocation failure. */
parity_status_t parity_llama_tok_encode(const parity_llama_tok_t *tok, const char *text,
                                        size_t len, int bos, int eos, int32_t **ids,
                                        size_t *n_ids);

/* run.c's decode(): the bytes token stands for when it follows prev_token. After BOS (prev_token
 * == 1) a leading space of the piece is dropped; a piece spelled exactly "<0xHH>" (two hex digits)
 * stands for that one raw byte. Length in *len (may be NULL); the bytes may be a NUL byte or
 * partial UTF-8 and live as long as tok. NULL (and *len = 0) for a token out of range.
 * Unlike run.c's safe_printf, nothing is filtered: printing policy is the caller's. */
const char *parity_llama_tok_decode_piece(const parity_llama_tok_t *tok, int32_t prev_token,
                                          int32_t token, size_t *len);

/* Concatenates parity_llama_tok_decode_piece over ids, each token decoded after its predecessor
 * in the array and ids[0] after prev_token (pass -1 for none, PARITY_LLAMA_BOS if a BOS came
 * before). So for ids = encode(text, bos=1, eos=0), decoding ids + 1 with prev_token = BOS gives
 * text back byte for byte. On PARITY_OK *text is malloc'ed with *len bytes plus a NUL (caller
 * frees). PARITY_E_INVALID for NULL arguments or an id out of range. */
parity_status_t parity_llama_tok_decode(const parity_llama_tok_t *tok, const int32_t *ids,
                                        size_t n, int32_t prev_token, char **text, size_t *len);

/* Convenience for workloads: loads tok_path (vocab_size entries) and encodes the file at
 * text_path one line at a time, as llama2.c-style training data is: each line without its '\n',
 * no BOS/EOS, empty lines give no tokens. Ownership of *ids as in parity_llama_tok_encode. */
parity_status_t parity_text_tokens_llama(const char *text_path, const char *tok_path,
                                         int32_t vocab_size, int32_t **ids, size_t *n,
                                         parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif

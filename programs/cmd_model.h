/* Shared parts of `parity model`'s subcommands: options, loading (with the MoE side file and
 * the image prefix), prompts, in cmd_model_shared.c. cmd_model.c holds run/dump/upcycle and the
 * dispatch, cmd_model_parity.c parity, cmd_model_capture.c capture. */
#ifndef PARITY_CMD_MODEL_H
#define PARITY_CMD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "parity/model.h"
#include "parity/tokenizer.h"

typedef struct {
    const char *model, *tok, *prompt, *prompts, *out, *moe_file, *manifest;
    const char *paths[2];
    int npaths, top, markdown, moe, floor;
    long steps, image;  /* image: patches of the image prefixed to every prompt (0: none) */
    double temp, max_k3;
    uint64_t seed;
    parity_model_moe_opts_t up; /* upcycle */
} opts_t;

typedef struct {
    parity_model_t *m;
    parity_llama_tok_t *tok;
    char model_path[1024], tok_path[1024], moe_path[1024];
} loaded_t;

/* Prompts, encoded: ids[i] = BOS, then n_img[i] image tokens (with --image), then the text's
 * tokens; len[i] <= seq_len. */
typedef struct {
    size_t n;
    char **text;
    int32_t **ids;
    size_t *len;
    size_t n_img; /* image tokens after BOS in every prompt (0: none) */
} prompts_t;

int model_cli_parse_opts(const char *cmd, int argc, char **argv, opts_t *o);
int model_cli_load_all(const char *cmd, const opts_t *o, loaded_t *L);
void model_cli_unload(loaded_t *L);
int model_cli_make_runner(const char *cmd, const loaded_t *L, const char *spec,
                          parity_model_path_t *p, parity_model_runner_t **r);
int model_cli_prompts_load(const char *cmd, const char *file, const loaded_t *L, long image,
                           prompts_t *P);
void model_cli_prompts_free(prompts_t *P);
/* Prepares runner r for prompt i: batch companions and the prompt's image (seed i + 1). */
int model_cli_set_batch(parity_model_runner_t *r, const parity_model_path_t *p, const prompts_t *P,
                        size_t i);
/* "image" or "text": the modality of the token at position t of prompt P (t >= 1). */
const char *model_cli_modality(const prompts_t *P, size_t t);

int model_cli_parity(int argc, char **argv);
int model_cli_capture(int argc, char **argv); /* cmd_model_capture.c */

#endif

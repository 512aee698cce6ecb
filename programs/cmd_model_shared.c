/* The shared parts of `parity model`'s subcommands (cmd_model.h): options, loading (with the MoE
 * side file and the image prefix), runners, prompts. Below the subcommands (cmd_model.c: run, dump,
 * upcycle and the dispatch; cmd_model_parity.c; cmd_model_capture.c), which all call them; split
 * from cmd_model.c so that the subcommands it dispatches to do not call back into it. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_model.h"
#include "parity/model.h"
#include "parity/tokenizer.h"

static const char *const BUILTIN_PROMPTS[] = {
    "Once upon a time, there was a little dog named Max. Max liked to run in the park.",
    "Lily and Ben went to the beach. They wanted to build a big sand castle.",
    "One day, a little bird found a shiny stone in the garden. She was very happy.",
    "Tom was sad because his toy car was broken. His mom said, \"We can fix it together.\"",
    "The sun was hot, so the cat slept under the big tree all day long.",
    "Before we proceed any further, hear me speak.", /* tinyshakespeare.txt, line 2 */
};
#define N_BUILTIN (sizeof BUILTIN_PROMPTS / sizeof BUILTIN_PROMPTS[0])

/* ------------------------------------------------------------------------------------------ */

int model_cli_parse_opts(const char *cmd, int argc, char **argv, opts_t *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                              \
    do {                                                                                    \
        if (!v) return cli_usage_error(cmd, "parity model --help", "%s needs a value", a); \
        i++;                                                                                \
    } while (0)
        if (!strcmp(a, "--tokenizer") || !strcmp(a, "-z")) {
            NEED();
            o->tok = v;
        } else if (!strcmp(a, "--path")) {
            NEED();
            if (o->npaths == 2)
                return cli_usage_error(cmd, "--path A --path B", "at most two --path options");
            o->paths[o->npaths++] = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--temperature")) {
            NEED();
            if (cli_parse_double(v, &o->temp) != 0 || !(o->temp >= 0) || isinf(o->temp))
                return cli_usage_error(cmd, "-t 0 (greedy) or -t 0.8", "%s wants a finite temperature >= 0, got '%s'", a, v);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--steps")) {
            NEED();
            if (cli_parse_long(v, 1, 1L << 20, &o->steps) != 0)
                return cli_usage_error(cmd, "-n 200", "%s wants a step count in 1..1048576, got '%s'", a, v);
        } else if (!strcmp(a, "--prompt") || !strcmp(a, "-i")) {
            NEED();
            o->prompt = v;
        } else if (!strcmp(a, "--prompts")) {
            NEED();
            o->prompts = v;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            NEED();
            o->out = v;
        } else if (!strcmp(a, "--top")) {
            NEED();
            long k;
            if (cli_parse_long(v, 0, 64, &k) != 0)
                return cli_usage_error(cmd, "--top 5 (0..64)", "--top wants 0..64 ids, got '%s'", v);
            o->top = (int)k;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            if (cli_parse_u64(v, &o->seed) != 0)
                return cli_usage_error(cmd, "--seed 42", "--seed wants a non-negative decimal integer, got '%s'", v);
        } else if (!strcmp(a, "--max-k3")) {
            NEED();
            if (cli_parse_double(v, &o->max_k3) != 0 || !(o->max_k3 >= 0) || isinf(o->max_k3))
                return cli_usage_error(cmd, "--max-k3 1e-4", "--max-k3 wants a finite number >= 0, got '%s'", v);
        } else if (!strcmp(a, "--markdown")) {
            o->markdown = 1;
        } else if (!strcmp(a, "--moe")) {
            o->moe = 1;
        } else if (!strcmp(a, "--moe-file")) {
            NEED();
            o->moe = 1, o->moe_file = v;
        } else if (!strcmp(a, "--floor")) {
            o->floor = 1;
        } else if (!strcmp(a, "--manifest")) {
            NEED();
            o->manifest = v;
        } else if (!strcmp(a, "--image")) {
            NEED();
            if (cli_parse_long(v, 0, PARITY_MODEL_MAX_PATCHES, &o->image) != 0)
                return cli_usage_error(cmd, "--image 16 (0..64 patches)", "--image wants 0..64 patches, got '%s'", v);
        } else if (!strcmp(a, "--experts") || !strcmp(a, "--topk") || !strcmp(a, "--shared")) {
            NEED();
            long k;
            if (cli_parse_long(v, 0, 4096, &k) != 0)
                return cli_usage_error(cmd, "--experts 8 --topk 4 --shared 108", "%s wants an integer in 0..4096, got '%s'", a, v);
            if (a[2] == 'e') o->up.experts = (int)k;
            else if (a[2] == 't') o->up.topk = (int)k;
            else o->up.n_shared = (int)k;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(cmd, "parity model --help", "unknown option '%s'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return cli_usage_error(cmd, "parity model run [MODEL]", "unexpected argument '%s'", a);
        }
#undef NEED
    }
    return 0;
}

int model_cli_load_all(const char *cmd, const opts_t *o, loaded_t *L)
{
    parity_diag_t d;
    /* Only the files not named on the command line are looked up in the data folders. */
    parity_status_t st = parity_model_default_files(o->model ? NULL : L->model_path, sizeof L->model_path,
                                                    o->tok ? NULL : L->tok_path, sizeof L->tok_path, &d);
    if (st == PARITY_OK && o->moe && !o->moe_file)
        st = parity_model_moe_default_file(L->moe_path, sizeof L->moe_path, &d);
    if (st != PARITY_OK) return cli_input_error(cmd, "%s", d.msg);
    if (o->moe_file) snprintf(L->moe_path, sizeof L->moe_path, "%s", o->moe_file);
    if (o->model) snprintf(L->model_path, sizeof L->model_path, "%s", o->model);
    if (o->tok) snprintf(L->tok_path, sizeof L->tok_path, "%s", o->tok);
    st = parity_model_load(L->model_path, &L->m, &d);
    if (st != PARITY_OK) return st == PARITY_E_INVALID ? cli_usage_error(cmd, NULL, "%s", d.msg)
                                                       : cli_input_error(cmd, "%s", d.msg);
    if (o->moe && (st = parity_model_moe_attach(L->m, L->moe_path, &d)) != PARITY_OK) {
        parity_model_free(L->m);
        L->m = NULL;
        return cli_input_error(cmd, "%s", d.msg);
    }
    st = parity_llama_tok_load(L->tok_path, parity_model_config(L->m)->vocab_size, &L->tok, &d);
    if (st != PARITY_OK) {
        parity_model_free(L->m);
        L->m = NULL;
        return cli_input_error(cmd, "%s", d.msg);
    }
    return 0;
}

void model_cli_unload(loaded_t *L)
{
    parity_llama_tok_free(L->tok);
    parity_model_free(L->m);
}

int model_cli_make_runner(const char *cmd, const loaded_t *L, const char *spec,
                       parity_model_path_t *p, parity_model_runner_t **r)
{
    parity_diag_t d;
    if (parity_model_path_parse(spec ? spec : "ref", p, &d) != PARITY_OK)
        return cli_usage_error(cmd, "--path bf16+kvcache+tp4:ring:bf16+splitk2", "%s", d.msg);
    parity_status_t st = parity_model_runner_new(L->m, p, r, &d);
    if (st == PARITY_E_INVALID) return cli_usage_error(cmd, "--path bf16+tp4", "%s", d.msg);
    if (st != PARITY_OK) return cli_input_error(cmd, "%s", d.msg);
    return 0;
}

/* run.c's safe_printf: a single raw byte that is neither printable nor whitespace is dropped. */

/* ------------------------------------------------------------------------------------------ */
/* Prompts                                                                                    */
/* ------------------------------------------------------------------------------------------ */

void model_cli_prompts_free(prompts_t *P)
{
    for (size_t i = 0; i < P->n; i++) {
        free(P->text[i]);
        free(P->ids[i]);
    }
    free(P->text);
    free(P->ids);
    free(P->len);
}

int model_cli_prompts_load(const char *cmd, const char *file, const loaded_t *L, long image,
                           prompts_t *P)
{
    memset(P, 0, sizeof *P);
    P->n_img = (size_t)image;
    size_t cap = N_BUILTIN;
    char *buf = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) return cli_input_error(cmd, "%s: cannot open the prompts file", file);
        size_t bcap = 1 << 16, blen = 0;
        buf = malloc(bcap + 1);
        size_t got;
        while (buf && (got = fread(buf + blen, 1, bcap - blen, f)) > 0) {
            blen += got;
            if (blen == bcap) {
                char *nb = realloc(buf, 2 * bcap + 1);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = nb, bcap *= 2;
            }
        }
        fclose(f);
        if (!buf) return cli_input_error(cmd, "out of memory");
        buf[blen] = '\0';
        cap = 1;
        for (size_t i = 0; i < blen; i++) cap += buf[i] == '\n';
    }
    P->text = calloc(cap, sizeof *P->text);
    P->ids = calloc(cap, sizeof *P->ids);
    P->len = calloc(cap, sizeof *P->len);
    if (!P->text || !P->ids || !P->len) {
        free(buf);
        return cli_input_error(cmd, "out of memory");
    }
    size_t S = (size_t)parity_model_config(L->m)->seq_len;
    char *line = buf;
    for (size_t k = 0; k < cap; k++) {
        const char *t;
        size_t tl;
        if (!file) {
            t = BUILTIN_PROMPTS[k], tl = strlen(t);
        } else {
            if (!line) break;
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            t = line, tl = strlen(line);
            if (tl && t[tl - 1] == '\r') tl--;
            line = nl ? nl + 1 : NULL;
            if (tl == 0) continue;
        }
        size_t i = P->n;
        P->text[i] = malloc(tl + 1);
        if (!P->text[i]) break;
        memcpy(P->text[i], t, tl);
        P->text[i][tl] = '\0';
        P->n++;
        if (parity_llama_tok_encode(L->tok, t, tl, 1, 0, &P->ids[i], &P->len[i]) != PARITY_OK) {
            free(buf);
            return cli_input_error(cmd, "cannot encode prompt %zu", i);
        }
        if (image > 0 && P->len[i] > 0) {
            /* BOS, the image's tokens (the picture of seed i + 1), then the text */
            int32_t *ids = malloc((P->len[i] + (size_t)image) * sizeof *ids);
            parity_diag_t d;
            if (!ids || parity_model_image_tokens(L->m, i + 1, (size_t)image, ids + 1, &d) != PARITY_OK) {
                free(ids);
                free(buf);
                return cli_input_error(cmd, "cannot build the image of prompt %zu", i);
            }
            ids[0] = P->ids[i][0];
            memcpy(ids + 1 + image, P->ids[i] + 1, (P->len[i] - 1) * sizeof *ids);
            free(P->ids[i]);
            P->ids[i] = ids;
            P->len[i] += (size_t)image;
        }
        if (P->len[i] > S) P->len[i] = S; /* the model cannot see further */
    }
    free(buf);
    if (P->n == 0) return cli_input_error(cmd, "%s: no non-empty prompt lines", file ? file : "prompts");
    return 0;
}

/* Companions of prompt i in a batch of B: the next B-1 prompts, cyclically. */
const char *model_cli_modality(const prompts_t *P, size_t t)
{
    return t >= 1 && t <= P->n_img ? "image" : "text";
}

int model_cli_set_batch(parity_model_runner_t *r, const parity_model_path_t *p, const prompts_t *P,
                        size_t i)
{
    if (parity_model_runner_set_image(r, i + 1, P->n_img, 1) != PARITY_OK) return -1;
    if (p->batch <= 1) return 0;
    size_t lens[64];
    for (int k = 0; k < p->batch - 1; k++) lens[k] = P->len[(i + 1 + (size_t)k) % P->n];
    return parity_model_runner_set_companions(r, lens, (size_t)p->batch - 1) == PARITY_OK ? 0 : -1;
}

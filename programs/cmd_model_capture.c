/* `parity model capture`: every module's inputs and outputs of one path over the prompts, in
 * the capture format `parity bisect` reads (docs/bisect.md); --replay A_DIR also runs every
 * module of this path on A's recorded inputs (the introduced error, measured). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_model.h"
#include "parity/bisect.h"
#include "parity/model.h"
#include "src/core/internal.h"

/* One pass over the prompts with the capture set (replay_src NULL: record; else replay). */
static int run_pass(parity_model_runner_t *r, const parity_model_path_t *p, const prompts_t *P,
                    parity_capture_t *cap, const parity_capture_t *src, double *logits,
                    parity_diag_t *d)
{
    size_t row0 = 0;
    for (size_t i = 0; i < P->n; i++) {
        if (parity_model_runner_set_capture(r, cap, row0, src, d) != PARITY_OK) return -1;
        model_cli_set_batch(r, p, P, i);
        parity_model_forward(r, P->ids[i], P->len[i], logits, NULL);
        row0 += P->len[i];
    }
    parity_model_runner_set_capture(r, NULL, 0, NULL, NULL);
    return 0;
}

int model_cli_capture(int argc, char **argv)
{
    const char *cmd = "model capture";
    const char *replay = NULL;
    char **av = malloc(((size_t)argc + 1) * sizeof *av);
    if (!av) return cli_input_error(cmd, "out of memory");
    int ac = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--replay")) {
            if (i + 1 >= argc) {
                free(av);
                return cli_usage_error(cmd, "--replay A_DIR", "--replay needs a capture directory");
            }
            replay = argv[++i];
        } else {
            av[ac++] = argv[i];
        }
    }
    opts_t o = {0};
    int rc = model_cli_parse_opts(cmd, ac, av, &o);
    free(av);
    if (rc) return rc;
    if (!o.out)
        return cli_usage_error(cmd, "parity model capture --path bf16 --out bf16.cap", "missing --out DIR");
    if (o.npaths > 1) return cli_usage_error(cmd, "--path bf16", "capture takes one --path");
    loaded_t L = {0};
    if ((rc = model_cli_load_all(cmd, &o, &L))) return rc;
    parity_model_path_t p;
    parity_model_runner_t *r = NULL;
    prompts_t P = {0};
    double *logits = NULL;
    parity_capture_t *cap = NULL, *src = NULL;
    parity_diag_t d;
    const char *model_name = o.moe ? "stories260K-moe" : "stories260K";
    if ((rc = model_cli_make_runner(cmd, &L, o.paths[0], &p, &r))) goto done;
    if ((rc = model_cli_prompts_load(cmd, o.prompts, &L, o.image, &P))) goto done;
    parity_model_runner_set_run_seed(r, o.seed);
    size_t rows = 0;
    for (size_t i = 0; i < P.n; i++) rows += P.len[i];
    const parity_model_config_t *c = parity_model_config(L.m);
    logits = malloc((size_t)c->seq_len * (size_t)c->vocab_size * sizeof *logits);
    if (!logits || parity_model_capture_new(r, rows, model_name, &cap, &d) != PARITY_OK) {
        rc = cli_input_error(cmd, "out of memory");
        goto done;
    }
    cap->n_seq = P.n;
    cap->seq_start = calloc(P.n, sizeof(size_t));
    cap->seq_len = calloc(P.n, sizeof(size_t));
    if (P.n_img) cap->modality = calloc(rows, sizeof *cap->modality);
    if (!cap->seq_start || !cap->seq_len || (P.n_img && !cap->modality)) {
        rc = cli_input_error(cmd, "out of memory");
        goto done;
    }
    for (size_t i = 0, row = 0; i < P.n; row += P.len[i], i++) {
        cap->seq_start[i] = row, cap->seq_len[i] = P.len[i];
        for (size_t t = 0; P.n_img && t < P.len[i]; t++) {
            const char *mdl = model_cli_modality(&P, t);
            cap->modality[row + t] = malloc(strlen(mdl) + 1);
            if (cap->modality[row + t]) strcpy(cap->modality[row + t], mdl);
        }
    }
    double t0 = parity_now();
    if (run_pass(r, &p, &P, cap, NULL, logits, &d) != 0) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    double t_fwd = parity_now() - t0;
    if (replay) {
        parity_status_t st = parity_capture_read(replay, &src, &d);
        if (st != PARITY_OK) {
            rc = cli_input_error(cmd, "--replay: %s", d.msg);
            goto done;
        }
        if (strcmp(src->model, model_name)) {
            rc = cli_input_error(cmd, "--replay %s: a capture of model '%s', expected '%s' (add or drop --moe)",
                                 replay, src->model, model_name);
            goto done;
        }
        if (run_pass(r, &p, &P, cap, src, logits, &d) != 0) {
            rc = cli_input_error(cmd, "--replay %s: %s (capture it with the same prompts and --image)",
                                 replay, d.msg);
            goto done;
        }
        size_t n = strlen(src->id) + 1;
        cap->replay_of = malloc(n);
        if (cap->replay_of) memcpy(cap->replay_of, src->id, n);
    }
    if (parity_capture_write(cap, o.out, &d) != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    fprintf(stderr, "parity model capture: path %s, %zu modules, %zu rows (%zu prompts), forward "
            "%.3f s%s -> %s\n", cap->path, cap->n_mod, rows, P.n, t_fwd,
            replay ? ", replayed on --replay's inputs" : "", o.out);
done:
    parity_capture_free(cap);
    parity_capture_free(src);
    free(logits);
    model_cli_prompts_free(&P);
    parity_model_runner_free(r);
    model_cli_unload(&L);
    return rc;
}

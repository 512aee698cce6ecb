/* `parity train --kernel K`: train the small LM with the fp32 reference embedding_rmsnorm_bwd and
 * with candidate K from the same weights and data order, over data x optimizer cells, and say in
 * which cells the candidate's loss leaves the seed-to-seed noise. The kernel runs in-process. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/kernel.h"
#include "parity/train.h"

void parity_help_train(FILE *out)
{
    parity_train_config_t c;
    parity_train_config_default(&c);
    fprintf(out,
            "usage: parity train --kernel K [--data text,zipf,uniform|all] "
            "[--optimizer sgd,sgdm,adamw|all]\n"
            "                    [--steps N] [--seed S] [--json FILE] [--svg FILE] [options]\n\n"
            "Trains a small transformer LM (token embedding -> RMSNorm -> pre-norm block(s) -> "
            "RMSNorm -> LM head)\ntwice from the same weights and data order: once with the fp32 "
            "reference for the fused\nembedding-gradient + RMSNorm backward (embedding_rmsnorm_bwd), "
            "once with kernel K, plus the\nreference with another data order (the seed-to-seed noise). "
            "Per (data, optimizer) cell it\nreports both loss curves, the final and largest "
            "validation-loss gap, the first step where the\ngap leaves the noise, the drift of "
            "embedding rows by token frequency, and a verdict:\nwithin-noise, departs, crashed "
            "(the kernel failed or wrote non-finite values), diverged.\n\n"
            "  --kernel K       builtin:NAME (parity kernels embedding_rmsnorm_bwd) or PATH.so[:NAME];\n"
            "                   runs in this process: a kernel that crashes kills the run\n"
            "  --data D         comma list of text (tinyshakespeare, GPT-2 BPE, remapped to a dense\n"
            "                   vocabulary), zipf, uniform; or all (default all)\n"
            "  --optimizer O    comma list of sgd, sgdm (momentum %.2g), adamw; or all (default all)\n"
            "  --steps N        training steps (default %d)\n"
            "  --seed S         weights and data order (default %llu); the noise run uses S+1\n"
            "  --batch B        sequences per step (default %d, of %d tokens: %d tokens/step)\n"
            "  --dim D          hidden size (default %d), --heads H (default %d), --layers L (%d)\n"
            "  --eval-every K   validation loss every K steps (default %d)\n"
            "  --zipf-s S       Zipf exponent of the synthetic data (default %.2g)\n"
            "  --lr-sgd X       SGD learning rate (default %.3g); --lr-sgdm X (%.3g); --lr-adamw X (%.3g)\n"
            "  --jobs J         runs trained concurrently (default %d; 1 for non-reentrant plugins)\n"
            "  --json FILE      every curve, schema parity.train/1 (docs/train.md)\n"
            "  --svg FILE       one panel per cell\n"
            "  --timing         print where the time of a step goes (forward/backward/op/optimizer)\n"
            "  -q, --quiet      no progress on stderr\n\n"
            "Exit: 0 within noise in every cell, 1 departs/crashed/diverged somewhere, 2 usage,\n"
            "3 input error (text data missing: the message names the file and the places looked in).\n",
            c.sgd_momentum, c.steps, (unsigned long long)c.seed, c.batch_seqs, c.seq_len,
            c.batch_seqs * c.seq_len, c.d_model, c.n_heads, c.n_layers, c.eval_every, c.zipf_s,
            c.sgd_lr, c.sgdm_lr, c.adamw_lr, c.jobs);
}

static void progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "parity train: %s\n", line);
}

static int parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out)
{
    long v;
    if (cli_parse_long(val, lo, hi, &v) != 0)
        return cli_usage_error(cmd, NULL, "%s wants an integer in %ld..%ld, got '%s'", opt, lo, hi, val);
    *out = (int)v;
    return 0;
}

static int parse_pos(const char *opt, const char *val, double *out)
{
    double v;
    if (cli_parse_double(val, &v) != 0 || !(v > 0.0) || !isfinite(v))
        return cli_usage_error("train", NULL, "%s wants a positive number, got '%s'", opt, val);
    *out = v;
    return 0;
}

int parity_cmd_train(int argc, char **argv)
{
    parity_train_config_t cfg;
    parity_train_config_default(&cfg);
    const char *kspec = NULL, *data = "all", *optn = "all", *json = NULL, *svg = NULL;
    int quiet = 0, timing = 0, rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            parity_help_train(stdout);
            return PARITY_EXIT_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) { quiet = 1; continue; }
        if (strcmp(a, "--timing") == 0) { timing = 1; continue; }
        if (a[0] != '-') return cli_usage_error("train", "parity train --kernel builtin:bf16_accum", "unexpected argument '%s'", a);
        if (i + 1 >= argc) return cli_usage_error("train", NULL, "%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0) kspec = v;
        else if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--optimizer") == 0) optn = v;
        else if (strcmp(a, "--json") == 0) json = v;
        else if (strcmp(a, "--svg") == 0) svg = v;
        else if (strcmp(a, "--seed") == 0) {
            uint64_t s;
            if (cli_parse_u64(v, &s) != 0 || s > (1ull << 53))
                return cli_usage_error("train", "--seed 1", "--seed wants an integer in 0..2^53, got '%s'", v);
            cfg.seed = s;
        } else if (strcmp(a, "--steps") == 0) { if ((rc = parse_int("train", a, v, 1, 1000000, &cfg.steps))) return rc; }
        else if (strcmp(a, "--batch") == 0) { if ((rc = parse_int("train", a, v, 1, 65536, &cfg.batch_seqs))) return rc; }
        else if (strcmp(a, "--dim") == 0) { if ((rc = parse_int("train", a, v, 2, 1024, &cfg.d_model))) return rc; }
        else if (strcmp(a, "--heads") == 0) { if ((rc = parse_int("train", a, v, 1, 64, &cfg.n_heads))) return rc; }
        else if (strcmp(a, "--layers") == 0) { if ((rc = parse_int("train", a, v, 1, 8, &cfg.n_layers))) return rc; }
        else if (strcmp(a, "--seq-len") == 0) { if ((rc = parse_int("train", a, v, 2, 1024, &cfg.seq_len))) return rc; }
        else if (strcmp(a, "--eval-every") == 0) { if ((rc = parse_int("train", a, v, 1, 1000000, &cfg.eval_every))) return rc; }
        else if (strcmp(a, "--val-seqs") == 0) { if ((rc = parse_int("train", a, v, 1, 4096, &cfg.val_seqs))) return rc; }
        else if (strcmp(a, "--jobs") == 0) { if ((rc = parse_int("train", a, v, 1, 64, &cfg.jobs))) return rc; }
        else if (strcmp(a, "--synth-tokens") == 0) { if ((rc = parse_int("train", a, v, 1000, 100000000, &cfg.synth_tokens))) return rc; }
        else if (strcmp(a, "--zipf-s") == 0) { if ((rc = parse_pos(a, v, &cfg.zipf_s))) return rc; }
        else if (strcmp(a, "--lr-sgd") == 0) { if ((rc = parse_pos(a, v, &cfg.sgd_lr))) return rc; }
        else if (strcmp(a, "--lr-sgdm") == 0) { if ((rc = parse_pos(a, v, &cfg.sgdm_lr))) return rc; }
        else if (strcmp(a, "--lr-adamw") == 0) { if ((rc = parse_pos(a, v, &cfg.adamw_lr))) return rc; }
        else return cli_usage_error("train", "parity train --help", "unknown option '%s'", a);
    }
    if (!kspec) return cli_usage_error("train", "parity train --kernel builtin:bf16_accum", "no --kernel given");
    if (cfg.d_model % cfg.n_heads)
        return cli_usage_error("train", "--dim 32 --heads 2", "--dim %d is not divisible by --heads %d", cfg.d_model, cfg.n_heads);

    parity_train_data_t datas[3];
    parity_train_opt_t opts[3];
    int nd = 0, no = 0;
    /* comma-separated lists; "all" expands; duplicates are dropped */
    for (int pass = 0; pass < 2; pass++) {
        const char *spec = pass ? optn : data;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", strcmp(spec, "all") == 0 ? (pass ? "sgd,sgdm,adamw" : "text,zipf,uniform") : spec);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int k = 0; k < 3; k++)
                if (strcmp(tok, pass ? parity_train_opt_name((parity_train_opt_t)k)
                                     : parity_train_data_name((parity_train_data_t)k)) == 0) found = k;
            if (found < 0)
                return pass ? cli_usage_error("train", "--optimizer sgd,sgdm,adamw or all", "unknown optimizer '%s'", tok)
                            : cli_usage_error("train", "--data text,zipf,uniform or all", "unknown data '%s'", tok);
            int dup = 0;
            for (int k = 0; k < (pass ? no : nd); k++)
                dup |= pass ? (int)opts[k] == found : (int)datas[k] == found;
            if (dup) continue;
            if (pass) opts[no++] = (parity_train_opt_t)found;
            else datas[nd++] = (parity_train_data_t)found;
        }
        if (pass ? !no : !nd) return cli_usage_error("train", "--data all --optimizer sgd,adamw", "empty list '%s'", spec);
    }

    parity_kernel_list_t kl = {0};
    parity_diag_t diag = {{0}};
    parity_status_t st = parity_kernel_resolve(kspec, "embedding_rmsnorm_bwd", &kl, &diag);
    if (st != PARITY_OK) {
        parity_kernel_list_free(&kl);
        if (st == PARITY_E_NOTFOUND || st == PARITY_E_INVALID)
            return cli_usage_error("train", "parity kernels embedding_rmsnorm_bwd", "%s", diag.msg);
        return cli_input_error("train", "%s", diag.msg);
    }
    if (kl.n != 1) {
        int n = kl.n;
        parity_kernel_list_free(&kl);
        return cli_usage_error("train", "--kernel builtin:NAME or PATH.so:NAME",
                               "'%s' names %d kernels; train takes one at a time", kspec, n);
    }
    parity_train_report_t *rep = NULL;
    st = parity_train_run(&cfg, kl.items[0].k, kl.items[0].label, datas, nd, opts, no,
                          quiet ? NULL : progress, NULL, &rep, &diag);
    if (st != PARITY_OK) {
        parity_kernel_list_free(&kl);
        if (st == PARITY_E_INVALID) return cli_usage_error("train", NULL, "%s", diag.msg);
        return cli_input_error("train", "%s", diag.msg);
    }

    printf("parity train: %s vs the fp32 reference (embedding_rmsnorm_bwd), seed %llu\n",
           rep->kernel_label, (unsigned long long)cfg.seed);
    printf("model: D=%d, %d head(s), %d block(s), MLP %dD, T=%d; %d steps of %d tokens; "
           "validation %d x %d tokens every %d steps\n",
           cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.mlp_mult, cfg.seq_len, cfg.steps,
           cfg.batch_seqs * cfg.seq_len, cfg.val_seqs, cfg.seq_len, cfg.eval_every);
    if (rep->text_tokens)
        printf("text: %lld GPT-2 tokens of tinyshakespeare, %d distinct ids remapped densely by "
               "frequency\n", (long long)rep->text_tokens, rep->text_raw_vocab);
    printf("\n%-14s %6s %9s %9s %9s %9s %9s %9s  %-13s %s\n", "cell", "vocab", "max hits",
           "val ref", "val cand", "gap", "max |gap|", "noise", "verdict", "first departure");
    int bad = 0;
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        char name[32], dep[64] = "-";
        snprintf(name, sizeof name, "%s/%s", parity_train_data_name(c->data), parity_train_opt_name(c->opt));
        if (c->first_departure >= 0) snprintf(dep, sizeof dep, "step %d", c->first_departure);
        int ne = c->n_eval;
        char vc[32] = "        -";
        if (isfinite(c->val_cand[ne - 1])) snprintf(vc, sizeof vc, "%9.4f", c->val_cand[ne - 1]);
        printf("%-14s %6d %9lld %9.4f %9s %+9.4f %9.4f %9.4f  %-13s %s\n", name, c->vocab,
               (long long)c->max_hits, c->val_ref[ne - 1], vc, c->final_gap, c->max_gap,
               c->noise_max, c->verdict, dep);
        if (strcmp(c->verdict, "within-noise") != 0) bad = 1;
    }
    printf("\n(gap = candidate - reference validation loss at the last step the candidate reached; "
           "noise = largest\n |reference(seed+1) - reference|; val cand '-': the candidate stopped)\n");
    printf("\nembedding drift by frequency rank: mean over rows of ||E_cand - E_ref|| / "
           "||E_ref - E_init||,\ncandidate vs [reference with the other data order]:\n");
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        printf("  %s/%s\n", parity_train_data_name(c->data), parity_train_opt_name(c->opt));
        for (int b = 0; b < PARITY_TRAIN_DRIFT_BUCKETS; b++) {
            const parity_train_drift_t *d = &c->drift[b];
            if (d->rank_hi <= d->rank_lo) continue;
            printf("    ranks %5d-%-5d  %8.2f hits/step  drift %.4f  [%.4f]\n", d->rank_lo,
                   d->rank_hi - 1, d->mean_hits_per_step, d->cand_drift, d->noise_drift);
        }
    }
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        if (c->reason[0]) printf("%s/%s: %s\n", parity_train_data_name(c->data), parity_train_opt_name(c->opt), c->reason);
        if (strcmp(c->verdict, "within-noise") != 0)
            printf("reproduce: parity train --kernel %s --data %s --optimizer %s --steps %d --seed %llu\n",
                   kspec, parity_train_data_name(c->data), parity_train_opt_name(c->opt), cfg.steps,
                   (unsigned long long)cfg.seed);
    }
    if (timing) {
        printf("\ntiming (seconds per step; op = embedding_rmsnorm_bwd incl. dtype conversions):\n");
        for (int i = 0; i < rep->n_cells; i++) {
            const parity_train_cell_t *c = &rep->cells[i];
            const parity_train_stats_t *s[2] = {&c->stats_ref, &c->stats_cand};
            double sec[2] = {c->seconds_ref, c->seconds_cand};
            int steps[2] = {cfg.steps, c->steps_done};
            static const char *const who[2] = {"reference", "candidate"};
            for (int r = 0; r < 2; r++) {
                double n = steps[r] > 0 ? steps[r] : 1;
                printf("timing %s/%s %s: tokens_per_s %.0f step %.5f forward %.5f backward_excl_op "
                       "%.5f op %.5f optimizer %.5f total_s %.2f\n",
                       parity_train_data_name(c->data), parity_train_opt_name(c->opt), who[r],
                       n * cfg.batch_seqs * cfg.seq_len / (s[r]->t_forward + s[r]->t_backward + s[r]->t_optimizer),
                       (s[r]->t_forward + s[r]->t_backward + s[r]->t_optimizer) / n,
                       s[r]->t_forward / n, (s[r]->t_backward - s[r]->t_kernel) / n,
                       s[r]->t_kernel / n, s[r]->t_optimizer / n, sec[r]);
            }
        }
    }
    int ex = bad ? PARITY_EXIT_VERDICT : PARITY_EXIT_OK;
    if (json && parity_train_write_json(rep, json, &diag) != PARITY_OK) ex = cli_input_error("train", "%s", diag.msg);
    if (svg && parity_train_write_svg(rep, svg, &diag) != PARITY_OK) ex = cli_input_error("train", "%s", diag.msg);
    parity_train_report_free(rep);
    parity_kernel_list_free(&kl);
    return ex;
}

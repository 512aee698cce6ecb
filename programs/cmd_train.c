/* `parity train --kernel K ...`: train the small LM with the fp32 reference embedding_rmsnorm_bwd,
 * a faithful floor and candidates K from the same weights and data order, over data x optimizer
 * cells, and say in which cells a candidate leaves the floor (loss or gradient damage by token
 * frequency). The kernels run in-process. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/kernel.h"
#include "parity/train.h"

void parity_help_train(FILE *out)
{
    parity_train_config_t c, p;
    parity_train_config_default(&c);
    parity_train_config_production(&p);
    fprintf(out,
            "usage: parity train --kernel K [--kernel K2 ...] [--faithful] [--preset production]\n"
            "                    [--data text,zipf,uniform|all] [--optimizer sgd,sgdm,adamw|all]\n"
            "                    [--steps N] [--seed S] [--json FILE] [--svg FILE] [options]\n\n"
            "Trains a small transformer LM (token embedding -> RMSNorm -> pre-norm block(s) -> "
            "RMSNorm -> LM head)\nfrom the same weights and data order with the fp32 reference "
            "for the fused embedding-gradient +\nRMSNorm backward (embedding_rmsnorm_bwd), with "
            "each kernel K, and with a faithful floor:\n--floor-orders runs of a faithful kernel with K's interface "
            "that differs from the reference only\nin its fp32 summation order. Per "
            "(data, optimizer, kernel) cell it compares the kernel's distance from the\nreference "
            "with the floor's: the validation loss, and every step's dE rows per frequency bucket\n"
            "(relative error, cosine, contributions a bf16/fp32 accumulator rounds away), plus "
            "embedding drift,\nthe reference with another data order (context) and Liger-Kernel's "
            "convergence rule. Verdict:\nwithin-floor, departs (a measure exceeds M x the floor, "
            "M derived from K), crashed, diverged.\n\n"
            "  --kernel K       builtin:NAME (parity kernels embedding_rmsnorm_bwd) or PATH.so[:NAME];\n"
            "                   repeatable; runs in this process: a kernel that crashes kills the run\n"
            "  --faithful       add every faithful catalog kernel of the op (the controls)\n"
            "  --preset P       default, or production: D=%d, T=%d, %d sequences = %d tokens/step,\n"
            "                   %d steps (options after it override)\n"
            "  --data D         comma list of text (tinyshakespeare, GPT-2 BPE, remapped to a dense\n"
            "                   vocabulary), zipf, uniform; or all (default all)\n"
            "  --optimizer O    comma list of sgd, sgdm (momentum %.2g), adamw; or all (default all)\n"
            "  --steps N        training steps (default %d)\n"
            "  --seed S         weights and data order (default %llu); the noise run uses S+1\n"
            "  --batch B        sequences per step (default %d, of %d tokens: %d tokens/step)\n"
            "  --seq-len T      context (default %d); --dim D (default %d), --heads H (%d), --layers L (%d)\n"
            "  --floor-orders N faithful-order floor runs per kernel interface (default %d, 1..%d)\n"
            "  --eval-every K   validation loss every K steps (default %d)\n"
            "  --val-seqs N     validation sequences (default %d, 1..4096; fixed, evenly spaced over\n"
            "                   the held-out 10%% of the data)\n"
            "  --synth-tokens N length of the zipf and uniform corpora (default %d, as many as the\n"
            "                   text; 1000..100000000, at least 4 (T + 2))\n"
            "  --zipf-s S       Zipf exponent of the synthetic data (default %.2g)\n"
            "  --lr-sgd X       SGD learning rate (default %.3g); --lr-sgdm X (%.3g); --lr-adamw X (%.3g)\n"
            "  --jobs J         runs trained concurrently (default %d; 1 for non-reentrant plugins)\n"
            "  --json FILE      every curve and every step's gradient damage, schema parity.train/2\n"
            "  --svg FILE       one panel per cell\n"
            "  --timing         print where the time of a step goes (forward/backward/op/optimizer)\n"
            "  -q, --quiet      no progress on stderr\n"
            "Numbers are decimal (integers: digits only); a bad one is a usage error naming the option.\n\n"
            "Exit: 0 every kernel within the floor in every cell, 1 one departs/crashed/diverged\n"
            "somewhere, 2 usage, 3 input error (text data missing: the message names the file and\n"
            "the places looked in).\n",
            p.d_model, p.seq_len, p.batch_seqs, p.batch_seqs * p.seq_len, p.steps,
            c.sgd_momentum, c.steps, (unsigned long long)c.seed, c.batch_seqs, c.seq_len,
            c.batch_seqs * c.seq_len, c.seq_len, c.d_model, c.n_heads, c.n_layers, c.floor_orders,
            PARITY_TRAIN_MAX_FLOOR, c.eval_every, c.val_seqs, c.synth_tokens, c.zipf_s, c.sgd_lr, c.sgdm_lr, c.adamw_lr, c.jobs);
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

static const char *short_label(const char *l)
{
    return strncmp(l, "builtin:", 8) == 0 ? l + 8 : l;
}

/* The text report: the verdict table, the gradient damage by bucket, drift, reproducers, timing.
 * Returns the exit code (1 when any cell is not within the floor). */
static int train_print(const parity_train_report_t *rep, const parity_train_config_t *cfg, int timing)
{
    printf("parity train: %d kernel(s) vs the fp32 reference (embedding_rmsnorm_bwd), seed %llu\n",
           rep->n_kernels, (unsigned long long)cfg->seed);
    printf("model: D=%d, %d head(s), %d block(s), MLP %dD, T=%d; %d steps of %d tokens; "
           "validation %d x %d tokens every %d steps\n",
           cfg->d_model, cfg->n_heads, cfg->n_layers, cfg->mlp_mult, cfg->seq_len, cfg->steps,
           cfg->batch_seqs * cfg->seq_len, cfg->val_seqs, cfg->seq_len, cfg->eval_every);
    if (rep->text_tokens)
        printf("text: %lld GPT-2 tokens of tinyshakespeare, %d distinct ids remapped densely by "
               "frequency\n", (long long)rep->text_tokens, rep->text_raw_vocab);
    double M = rep->n_cells ? rep->cells[0].margin : NAN;
    printf("floor: %d faithful-order run(s) per kernel interface; margin M = %.2f (P(false departure) "
           "<= %.2g per cell)\n", cfg->floor_orders, M, PARITY_TRAIN_ALPHA);
    printf("\n%-14s %-16s %6s %9s %9s %8s %9s %9s %8s %8s %6s  %-12s %s\n", "cell", "kernel",
           "hits", "max|gap|", "floor", "x floor", "grad 0-9", "floor", "x floor", "lost bf16",
           "liger", "verdict", "departs on");
    int bad = 0;
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        char name[32];
        snprintf(name, sizeof name, "%s/%s", parity_train_data_name(c->data), parity_train_opt_name(c->opt));
        printf("%-14s %-16.16s %6lld %9.2e %9.2e %8.3g %9.2e %9.2e %8.3g %8.4f %6s  %-12s %s\n", name,
               short_label(rep->kernel_labels[c->kernel]), (long long)c->max_hits, c->max_gap,
               c->floor_gap_max, c->loss_ratio, c->grad_err[0], c->floor_grad_err[0], c->grad_ratio[0],
               c->absorbed_bf16[0], c->liger_pass ? "pass" : "FAIL", c->verdict,
               c->departs_on[0] ? c->departs_on : "-");
        if (strcmp(c->verdict, "within-floor") != 0) bad = 1;
    }
    printf("\n(max|gap| = largest |val_cand - val_ref|; floor = largest |val_floor - val_ref| of the floor "
           "runs; x floor = ratio,\n departs above M; grad 0-9 = mean over steps of the 10 most frequent "
           "rows' ||dE - dE_ref|| / ||dE_ref||;\n lost bf16 = fraction of their contributions a bf16 "
           "accumulator rounds away; liger = Liger-Kernel's bf16\n convergence rule, loss of the first "
           "%d steps within 1e-3 + 1e-2|ref| and parameters within 1e-2 + 1e-2|ref|)\n",
           PARITY_TRAIN_LIGER_STEPS);
    printf("\ngradient damage and drift by frequency rank (means over steps; drift = ||E_cand - E_ref|| / "
           "||E_ref - E_init||\nat the end, candidate [floor] {reference with the other data order}):\n");
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        printf("  %s/%s %s: val gap %+.4f at the end, data-order noise %.4f (largest %.4f), "
               "liger loss %.3g param %.3g x tolerance\n", parity_train_data_name(c->data),
               parity_train_opt_name(c->opt), rep->kernel_labels[c->kernel], c->final_gap,
               c->noise_final, c->noise_max, c->liger_loss_worst, c->liger_param_worst);
        for (int b = 0; b < PARITY_TRAIN_BUCKETS; b++) {
            const parity_train_drift_t *d = &c->drift[b];
            if (d->rank_hi <= d->rank_lo) continue;
            printf("    ranks %5d-%-5d %9.2f hits/step  rel err %.2e [%.2e] x%-7.3g cos %.5f  lost bf16 "
                   "%.4f fp32 %.4f  drift %.4f [%.4f] {%.4f}\n", d->rank_lo, d->rank_hi - 1,
                   d->mean_hits_per_step, c->grad_err[b], c->floor_grad_err[b], c->grad_ratio[b],
                   c->grad_cos[b], c->absorbed_bf16[b], c->absorbed_fp32[b], d->cand_drift,
                   d->floor_drift, d->noise_drift);
        }
    }
    for (int i = 0; i < rep->n_cells; i++) {
        const parity_train_cell_t *c = &rep->cells[i];
        const char *k = rep->kernel_labels[c->kernel];
        if (c->reason[0]) printf("%s/%s %s: %s\n", parity_train_data_name(c->data), parity_train_opt_name(c->opt), k, c->reason);
        if (strcmp(c->verdict, "within-floor") != 0)
            printf("departs: %s/%s %s (%s%s%s); reproduce: parity train --kernel %s --data %s --optimizer %s "
                   "--steps %d --batch %d --seq-len %d --dim %d --seed %llu\n",
                   parity_train_data_name(c->data), parity_train_opt_name(c->opt), k, c->verdict,
                   c->departs_on[0] ? " on " : "", c->departs_on, k, parity_train_data_name(c->data),
                   parity_train_opt_name(c->opt), cfg->steps, cfg->batch_seqs, cfg->seq_len,
                   cfg->d_model, (unsigned long long)cfg->seed);
    }
    if (timing) {
        printf("\ntiming (seconds per step; op = embedding_rmsnorm_bwd incl. dtype conversions):\n");
        for (int i = 0; i < rep->n_cells; i++) {
            const parity_train_cell_t *c = &rep->cells[i];
            const parity_train_stats_t *s[2] = {&c->stats_ref, &c->stats_cand};
            double sec[2] = {c->seconds_ref, c->seconds_cand};
            int steps[2] = {cfg->steps, c->steps_done};
            static const char *const who[2] = {"reference", "candidate"};
            for (int r = 0; r < 2; r++) {
                double n = steps[r] > 0 ? steps[r] : 1;
                printf("timing %s/%s %s: tokens_per_s %.0f step %.5f forward %.5f backward_excl_op "
                       "%.5f op %.5f optimizer %.5f total_s %.2f\n",
                       parity_train_data_name(c->data), parity_train_opt_name(c->opt), who[r],
                       n * cfg->batch_seqs * cfg->seq_len / (s[r]->t_forward + s[r]->t_backward + s[r]->t_optimizer),
                       (s[r]->t_forward + s[r]->t_backward + s[r]->t_optimizer) / n,
                       s[r]->t_forward / n, (s[r]->t_backward - s[r]->t_kernel) / n,
                       s[r]->t_kernel / n, s[r]->t_optimizer / n, sec[r]);
            }
        }
    }
    return bad ? PARITY_EXIT_VERDICT : PARITY_EXIT_OK;
}

int parity_cmd_train(int argc, char **argv)
{
    parity_train_config_t cfg;
    parity_train_config_default(&cfg);
    const char *kspecs[16], *data = "all", *optn = "all", *json = NULL, *svg = NULL;
    int nspec = 0, quiet = 0, timing = 0, faithful = 0, rc;
    /* the preset first, so that options after (or before) it override it */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--preset") == 0) {
            if (strcmp(argv[i + 1], "production") == 0) parity_train_config_production(&cfg);
            else if (strcmp(argv[i + 1], "default") != 0)
                return cli_usage_error("train", "--preset production", "unknown preset '%s'", argv[i + 1]);
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            parity_help_train(stdout);
            return PARITY_EXIT_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) { quiet = 1; continue; }
        if (strcmp(a, "--timing") == 0) { timing = 1; continue; }
        if (strcmp(a, "--faithful") == 0) { faithful = 1; continue; }
        if (a[0] != '-') return cli_usage_error("train", "parity train --kernel builtin:bf16_accum", "unexpected argument '%s'", a);
        if (i + 1 >= argc) return cli_usage_error("train", NULL, "%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0) {
            if (nspec == 16) return cli_usage_error("train", NULL, "at most 16 --kernel options");
            kspecs[nspec++] = v;
        } else if (strcmp(a, "--preset") == 0) continue; /* applied above */
        else if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--optimizer") == 0) optn = v;
        else if (strcmp(a, "--json") == 0) json = v;
        else if (strcmp(a, "--svg") == 0) svg = v;
        else if (strcmp(a, "--seed") == 0) {
            uint64_t s;
            if (cli_parse_u64(v, &s) != 0 || s > (1ull << 53))
                return cli_usage_error("train", "--seed 1", "--seed wants a decimal integer in 0..2^53, got '%s'", v);
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
        else if (strcmp(a, "--floor-orders") == 0) { if ((rc = parse_int("train", a, v, 1, PARITY_TRAIN_MAX_FLOOR, &cfg.floor_orders))) return rc; }
        else if (strcmp(a, "--synth-tokens") == 0) { if ((rc = parse_int("train", a, v, 1000, 100000000, &cfg.synth_tokens))) return rc; }
        else if (strcmp(a, "--zipf-s") == 0) { if ((rc = parse_pos(a, v, &cfg.zipf_s))) return rc; }
        else if (strcmp(a, "--lr-sgd") == 0) { if ((rc = parse_pos(a, v, &cfg.sgd_lr))) return rc; }
        else if (strcmp(a, "--lr-sgdm") == 0) { if ((rc = parse_pos(a, v, &cfg.sgdm_lr))) return rc; }
        else if (strcmp(a, "--lr-adamw") == 0) { if ((rc = parse_pos(a, v, &cfg.adamw_lr))) return rc; }
        else return cli_usage_error("train", "parity train --help", "unknown option '%s'", a);
    }
    if (!nspec && !faithful) return cli_usage_error("train", "parity train --kernel builtin:bf16_accum", "no --kernel given");
    if (cfg.d_model % cfg.n_heads)
        return cli_usage_error("train", "--dim 32 --heads 2", "--dim %d is not divisible by --heads %d", cfg.d_model, cfg.n_heads);

    parity_train_data_t datas[3];
    parity_train_opt_t opts[3];
    int nd = 0, no = 0;
    /* comma-separated lists; "all" expands; duplicates are dropped */
    for (int pass = 0; pass < 2; pass++) {
        const char *spec = pass ? optn : data;
        char buf[128];
        const char *opt = pass ? "--optimizer" : "--data";
        const char *list = strcmp(spec, "all") == 0 ? (pass ? "sgd,sgdm,adamw" : "text,zipf,uniform") : spec;
        size_t len = strlen(list);
        /* no empty item (",text", "text,", "text,,zipf"): strtok would skip it silently */
        if (len == 0 || len >= sizeof buf || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,"))
            return cli_usage_error("train", pass ? "--optimizer sgd,adamw or all" : "--data text,zipf or all",
                                   "%s wants a comma list without empty items, got '%s'", opt, spec);
        memcpy(buf, list, len + 1);
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
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < nspec && st == PARITY_OK; i++)
        st = parity_kernel_resolve(kspecs[i], "embedding_rmsnorm_bwd", &kl, &diag);
    if (st == PARITY_OK && faithful) {
        /* the catalog's faithful kernels of the op, in catalog order, the ones given skipped */
        parity_kernel_list_t all = {0};
        st = parity_kernel_resolve("builtin:all", "embedding_rmsnorm_bwd", &all, &diag);
        for (int i = 0; st == PARITY_OK && i < all.n; i++) {
            const parity_abi_kernel_t *k = all.items[i].k;
            int dup = !k->expected || strcmp(k->expected, "faithful") != 0;
            for (int j = 0; j < kl.n; j++) dup |= kl.items[j].k == k;
            if (dup) continue;
            char spec[512];
            snprintf(spec, sizeof spec, "builtin:%s", k->name);
            st = parity_kernel_resolve(spec, "embedding_rmsnorm_bwd", &kl, &diag);
        }
        parity_kernel_list_free(&all);
    }
    if (st != PARITY_OK) {
        parity_kernel_list_free(&kl);
        if (st == PARITY_E_NOTFOUND || st == PARITY_E_INVALID)
            return cli_usage_error("train", "parity kernels embedding_rmsnorm_bwd", "%s", diag.msg);
        return cli_input_error("train", "%s", diag.msg);
    }
    if (kl.n < 1 || kl.n > 64) {
        int n = kl.n;
        parity_kernel_list_free(&kl);
        return cli_usage_error("train", "--kernel builtin:NAME or PATH.so:NAME",
                               "%d kernels named; train takes 1 to 64", n);
    }
    const parity_abi_kernel_t *ks[64];
    const char *labels[64];
    for (int j = 0; j < kl.n; j++) {
        ks[j] = kl.items[j].k;
        labels[j] = kl.items[j].label;
    }
    parity_train_report_t *rep = NULL;
    st = parity_train_run(&cfg, ks, labels, kl.n, datas, nd, opts, no, quiet ? NULL : progress,
                          NULL, &rep, &diag);
    if (st != PARITY_OK) {
        parity_kernel_list_free(&kl);
        if (st == PARITY_E_INVALID) return cli_usage_error("train", NULL, "%s", diag.msg);
        return cli_input_error("train", "%s", diag.msg);
    }
    int ex = train_print(rep, &cfg, timing);
    if (json && parity_train_write_json(rep, json, &diag) != PARITY_OK) ex = cli_input_error("train", "%s", diag.msg);
    if (svg && parity_train_write_svg(rep, svg, &diag) != PARITY_OK) ex = cli_input_error("train", "%s", diag.msg);
    parity_train_report_free(rep);
    parity_kernel_list_free(&kl);
    return ex;
}

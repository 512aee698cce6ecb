/* Report files of the training probe: the stable JSON schema "parity.train/2" (every curve, no
 * timings, so identical inputs give identical bytes) and a self-contained hand-written SVG with
 * one panel per (data, optimizer) cell. Deliberately not here: the text summary (the CLI). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "src/train/train_impl.h"

static cJSON *darr(const double *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* One bucket's gradient damage over steps: {rows_hit, rel_err, cosine, absorbed_bf16,
 * absorbed_fp32}, each an array with one value per step. */
static cJSON *gsteps(const parity_train_gstep_t *g, int steps, int b)
{
    cJSON *o = cJSON_CreateObject();
    static const char *const names[5] = {"rows_hit", "rel_err", "cosine", "absorbed_bf16", "absorbed_fp32"};
    for (int f = 0; o && f < 5; f++) {
        cJSON *a = cJSON_AddArrayToObject(o, names[f]);
        for (int t = 0; a && t < steps; t++) {
            const parity_train_gstep_t *x = &g[(size_t)t * PARITY_TRAIN_BUCKETS + b];
            double v = f == 0 ? x->rows_hit : f == 1 ? x->rel_err : f == 2 ? x->cosine
                     : f == 3 ? x->absorbed_bf16 : x->absorbed_fp32;
            cJSON_AddItemToArray(a, num_or_null(v));
        }
    }
    return o;
}

parity_status_t parity_train_write_json(const parity_train_report_t *r, const char *path,
                                        parity_diag_t *diag)
{
    const parity_train_config_t *c = &r->cfg;
    cJSON *root = cJSON_CreateObject();
    if (!root) return parity_diag_set(diag, PARITY_E_NOMEM, "train: JSON: out of memory");
    cJSON_AddStringToObject(root, "schema", "parity.train/2");
    cJSON_AddStringToObject(root, "op", "embedding_rmsnorm_bwd");
    cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
    for (int j = 0; j < r->n_kernels; j++) cJSON_AddItemToArray(ks, cJSON_CreateString(r->kernel_labels[j]));
    cJSON_AddNumberToObject(root, "seed", (double)c->seed);
    cJSON *cf = cJSON_AddObjectToObject(root, "config");
    cJSON_AddNumberToObject(cf, "d_model", c->d_model);
    cJSON_AddNumberToObject(cf, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(cf, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(cf, "mlp_mult", c->mlp_mult);
    cJSON_AddNumberToObject(cf, "seq_len", c->seq_len);
    cJSON_AddNumberToObject(cf, "batch_seqs", c->batch_seqs);
    cJSON_AddNumberToObject(cf, "batch_tokens", (double)c->batch_seqs * c->seq_len);
    cJSON_AddNumberToObject(cf, "val_seqs", c->val_seqs);
    cJSON_AddNumberToObject(cf, "steps", c->steps);
    cJSON_AddNumberToObject(cf, "eval_every", c->eval_every);
    cJSON_AddNumberToObject(cf, "zipf_s", c->zipf_s);
    cJSON_AddNumberToObject(cf, "synth_tokens", c->synth_tokens);
    cJSON_AddNumberToObject(cf, "sgd_lr", c->sgd_lr);
    cJSON_AddNumberToObject(cf, "sgd_momentum", c->sgd_momentum);
    cJSON_AddNumberToObject(cf, "sgdm_lr", c->sgdm_lr);
    cJSON_AddNumberToObject(cf, "adamw_lr", c->adamw_lr);
    cJSON_AddNumberToObject(cf, "adamw_beta1", c->adamw_beta1);
    cJSON_AddNumberToObject(cf, "adamw_beta2", c->adamw_beta2);
    cJSON_AddNumberToObject(cf, "adamw_eps", c->adamw_eps);
    cJSON_AddNumberToObject(cf, "adamw_wd", c->adamw_wd);
    cJSON_AddNumberToObject(cf, "floor_orders", c->floor_orders);
    cJSON_AddNumberToObject(cf, "alpha", PARITY_TRAIN_ALPHA);
    if (r->text_tokens) {
        cJSON *tx = cJSON_AddObjectToObject(root, "text");
        cJSON_AddNumberToObject(tx, "tokens", (double)r->text_tokens);
        cJSON_AddNumberToObject(tx, "gpt2_ids_used", r->text_raw_vocab);
        cJSON_AddStringToObject(tx, "remap", "dense ids by descending frequency over the corpus, "
                                             "ties by GPT-2 id; 90/10 train/validation split");
    }
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    for (int i = 0; i < r->n_cells; i++) {
        const parity_train_cell_t *x = &r->cells[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(cells, o);
        cJSON_AddStringToObject(o, "data", parity_train_data_name(x->data));
        cJSON_AddStringToObject(o, "optimizer", parity_train_opt_name(x->opt));
        cJSON_AddStringToObject(o, "kernel", r->kernel_labels[x->kernel]);
        cJSON_AddStringToObject(o, "verdict", x->verdict ? x->verdict : "?");
        cJSON_AddStringToObject(o, "departs_on", x->departs_on);
        cJSON_AddStringToObject(o, "reason", x->reason);
        cJSON_AddItemToObject(o, "margin", num_or_null(x->margin));
        cJSON_AddItemToObject(o, "loss_ratio", num_or_null(x->loss_ratio));
        cJSON_AddItemToObject(o, "floor_gap_max", num_or_null(x->floor_gap_max));
        cJSON *fg = cJSON_AddArrayToObject(o, "floor_gap");
        for (int k = 0; k < x->n_floor; k++) cJSON_AddItemToArray(fg, num_or_null(x->floor_gap[k]));
        cJSON *lg = cJSON_AddObjectToObject(o, "liger");
        cJSON_AddNumberToObject(lg, "steps", x->liger_steps);
        cJSON_AddBoolToObject(lg, "pass", x->liger_pass);
        cJSON_AddItemToObject(lg, "loss_worst", num_or_null(x->liger_loss_worst));
        cJSON_AddItemToObject(lg, "param_worst", num_or_null(x->liger_param_worst));
        cJSON_AddNumberToObject(o, "vocab", x->vocab);
        cJSON_AddNumberToObject(o, "max_hits_per_row_per_step", (double)x->max_hits);
        cJSON_AddNumberToObject(o, "steps_done", x->steps_done);
        cJSON_AddItemToObject(o, "final_gap", num_or_null(x->final_gap));
        cJSON_AddItemToObject(o, "max_gap", num_or_null(x->max_gap));
        cJSON_AddItemToObject(o, "noise_final", num_or_null(x->noise_final));
        cJSON_AddItemToObject(o, "noise_max", num_or_null(x->noise_max));
        cJSON_AddNumberToObject(o, "first_departure_step", x->first_departure);
        cJSON *ev = cJSON_AddArrayToObject(o, "eval_steps");
        for (int e = 0; e < x->n_eval; e++) cJSON_AddItemToArray(ev, cJSON_CreateNumber(x->eval_steps[e]));
        cJSON *tl = cJSON_AddObjectToObject(o, "train_loss");
        cJSON_AddItemToObject(tl, "reference", darr(x->train_ref, c->steps));
        cJSON_AddItemToObject(tl, "reference_seed2", darr(x->train_noise, c->steps));
        cJSON_AddItemToObject(tl, "candidate", darr(x->train_cand, x->steps_done));
        cJSON *vl = cJSON_AddObjectToObject(o, "val_loss");
        cJSON_AddItemToObject(vl, "reference", darr(x->val_ref, x->n_eval));
        cJSON_AddItemToObject(vl, "reference_seed2", darr(x->val_noise, x->n_eval));
        cJSON_AddItemToObject(vl, "candidate", darr(x->val_cand, x->n_eval));
        cJSON *vf = cJSON_AddArrayToObject(vl, "floor");
        for (int k = 0; k < x->n_floor; k++) cJSON_AddItemToArray(vf, darr(x->val_floor + (size_t)k * x->n_eval, x->n_eval));
        cJSON *gr = cJSON_AddArrayToObject(o, "gradient");
        for (int b = 0; b < PARITY_TRAIN_BUCKETS; b++) {
            const parity_train_drift_t *d = &x->drift[b];
            if (d->rank_hi <= d->rank_lo) continue;
            cJSON *q = cJSON_CreateObject();
            cJSON_AddItemToArray(gr, q);
            cJSON_AddNumberToObject(q, "rank_lo", d->rank_lo);
            cJSON_AddNumberToObject(q, "rank_hi", d->rank_hi);
            cJSON_AddItemToObject(q, "rel_err", num_or_null(x->grad_err[b]));
            cJSON_AddItemToObject(q, "floor_rel_err", num_or_null(x->floor_grad_err[b]));
            cJSON_AddItemToObject(q, "ratio", num_or_null(x->grad_ratio[b]));
            cJSON_AddItemToObject(q, "cosine", num_or_null(x->grad_cos[b]));
            cJSON_AddItemToObject(q, "absorbed_bf16", num_or_null(x->absorbed_bf16[b]));
            cJSON_AddItemToObject(q, "absorbed_fp32", num_or_null(x->absorbed_fp32[b]));
            cJSON_AddItemToObject(q, "candidate_steps", gsteps(x->grad_cand, x->steps_done, b));
            cJSON *fs = cJSON_AddArrayToObject(q, "floor_steps");
            for (int k = 0; k < x->n_floor; k++)
                cJSON_AddItemToArray(fs, gsteps(x->grad_floor + (size_t)k * c->steps * PARITY_TRAIN_BUCKETS, c->steps, b));
        }
        cJSON *dr = cJSON_AddArrayToObject(o, "embedding_drift");
        for (int b = 0; b < PARITY_TRAIN_DRIFT_BUCKETS; b++) {
            const parity_train_drift_t *d = &x->drift[b];
            if (d->rank_hi <= d->rank_lo) continue;
            cJSON *q = cJSON_CreateObject();
            cJSON_AddItemToArray(dr, q);
            cJSON_AddNumberToObject(q, "rank_lo", d->rank_lo);
            cJSON_AddNumberToObject(q, "rank_hi", d->rank_hi);
            cJSON_AddNumberToObject(q, "mean_hits_per_step", d->mean_hits_per_step);
            cJSON_AddNumberToObject(q, "candidate_drift", d->cand_drift);
            cJSON_AddNumberToObject(q, "noise_drift", d->noise_drift);
            cJSON_AddNumberToObject(q, "floor_drift", d->floor_drift);
        }
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return parity_diag_set(diag, PARITY_E_NOMEM, "train: JSON: out of memory");
    FILE *f = fopen(path, "w");
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(txt);
    return ok ? PARITY_OK : parity_diag_set(diag, PARITY_E_IO, "%s: cannot write the JSON report", path);
}

/* ---- SVG ------------------------------------------------------------------------------------ */

#define PW 380
#define PH 250
#define ML 52
#define MR 12
#define MT 34
#define MB 34

static void polyline(FILE *f, const double *y, const int *xs, int n, double x0, double y0,
                     double sx, double ymin, double sy, const char *style)
{
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            if (open) fputs("\"/>\n", f);
            open = 0;
            continue;
        }
        double px = x0 + sx * (xs ? xs[i] : i), py = y0 - sy * (y[i] - ymin);
        if (!open) fprintf(f, "<polyline %s points=\"", style);
        fprintf(f, "%.1f,%.1f ", px, py);
        open = 1;
    }
    if (open) fputs("\"/>\n", f);
}

static void range(const double *v, int n, double *lo, double *hi)
{
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            if (v[i] < *lo) *lo = v[i];
            if (v[i] > *hi) *hi = v[i];
        }
}

parity_status_t parity_train_write_svg(const parity_train_report_t *r, const char *path,
                                       parity_diag_t *diag)
{
    FILE *f = fopen(path, "w");
    if (!f) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot write the SVG", path);
    /* a row per (data, optimizer), a column per kernel (or per optimizer with one kernel) */
    int cols = r->n_kernels > 1 ? r->n_kernels : 1;
    if (cols == 1)
        while (cols < r->n_cells && r->cells[cols].data == r->cells[0].data) cols++;
    int rows = (r->n_cells + cols - 1) / cols;
    int W = cols * PW, H = rows * PH + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"8\" y=\"16\" font-size=\"13\">parity train: %d kernel(s) vs fp32 reference "
               "(embedding_rmsnorm_bwd), seed %llu, %d steps of %d tokens</text>\n",
            r->n_kernels, (unsigned long long)r->cfg.seed, r->cfg.steps,
            r->cfg.batch_seqs * r->cfg.seq_len);
    fprintf(f, "<text x=\"8\" y=\"32\">validation loss: <tspan fill=\"black\">reference (thick "
               "black)</tspan>, <tspan fill=\"#d62728\">candidate (red)</tspan>, <tspan "
               "fill=\"#888\">reference, other data order (dashed grey)</tspan>, <tspan "
               "fill=\"#2ca02c\">floor (dotted green)</tspan>; thin: training loss</text>\n");
    for (int i = 0; i < r->n_cells; i++) {
        const parity_train_cell_t *c = &r->cells[i];
        double ox = (i % cols) * PW, oy = 40 + (i / cols) * PH;
        /* y range from the values after the first tenth of the run (the initial loss would
         * squash the part where curves can separate); earlier values are clipped */
        double lo = INFINITY, hi = -INFINITY;
        int s0 = r->cfg.steps / 10, e0 = 0;
        while (e0 + 1 < c->n_eval && c->eval_steps[e0] < s0) e0++;
        range(c->val_ref + e0, c->n_eval - e0, &lo, &hi);
        range(c->val_cand + e0, c->n_eval - e0, &lo, &hi);
        range(c->val_noise + e0, c->n_eval - e0, &lo, &hi);
        for (int k = 0; k < c->n_floor; k++) range(c->val_floor + (size_t)k * c->n_eval + e0, c->n_eval - e0, &lo, &hi);
        if (s0 < r->cfg.steps) range(c->train_ref + s0, r->cfg.steps - s0, &lo, &hi);
        if (s0 < c->steps_done) range(c->train_cand + s0, c->steps_done - s0, &lo, &hi);
        if (!(hi > lo)) { lo = isfinite(lo) ? lo - 1 : 0; hi = lo + 2; }
        double pad = 0.03 * (hi - lo);
        lo -= pad; hi += pad;
        double x0 = ox + ML, y0 = oy + PH - MB, w = PW - ML - MR, h = PH - MT - MB;
        double sx = w / (double)r->cfg.steps, sy = h / (hi - lo);
        const char *col = strcmp(c->verdict ? c->verdict : "", "within-floor") == 0 ? "#2ca02c" : "#d62728";
        fprintf(f, "<g>\n<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s / %s / %.40s: <tspan "
                   "fill=\"%s\">%s</tspan>", ox + ML, oy + 14, parity_train_data_name(c->data),
                parity_train_opt_name(c->opt), r->kernel_labels[c->kernel], col, c->verdict ? c->verdict : "?");
        if (c->first_departure >= 0) fprintf(f, " at step %d", c->first_departure);
        fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"#555\">max gap %.2g = %.3g x floor, "
                   "hot-row grad %.3g x floor, hits/row/step %lld</text>\n", ox + ML, oy + 27, c->max_gap,
                c->loss_ratio, c->grad_ratio[0], (long long)c->max_hits);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                   "stroke=\"#999\"/>\n", x0, y0 - h, w, h);
        fprintf(f, "<clipPath id=\"c%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                   "height=\"%.1f\"/></clipPath>\n", i, x0, y0 - h, w, h);
        for (int t = 0; t <= 4; t++) {
            double v = lo + (hi - lo) * t / 4.0, py = y0 - sy * (v - lo);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", x0 - 4, py + 4, v);
            double st = r->cfg.steps * t / 4.0, px = x0 + sx * st;
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", px, y0 + 14, st);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">step</text>\n",
                x0 + w / 2, y0 + 27);
        if (c->first_departure >= 0) {
            double px = x0 + sx * c->first_departure;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
                       "stroke-dasharray=\"2,3\"/>\n", px, y0, px, y0 - h);
        }
        fprintf(f, "<g clip-path=\"url(#c%d)\">\n", i);
        polyline(f, c->train_ref, NULL, r->cfg.steps, x0, y0, sx, lo, sy,
                 "fill=\"none\" stroke=\"#bbb\" stroke-width=\"0.7\"");
        polyline(f, c->train_cand, NULL, c->steps_done, x0, y0, sx, lo, sy,
                 "fill=\"none\" stroke=\"#f4a6a6\" stroke-width=\"0.7\"");
        polyline(f, c->val_noise, c->eval_steps, c->n_eval, x0, y0, sx, lo, sy,
                 "fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"");
        for (int k = 0; k < c->n_floor; k++)
            polyline(f, c->val_floor + (size_t)k * c->n_eval, c->eval_steps, c->n_eval, x0, y0, sx, lo, sy,
                     "fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1\" stroke-dasharray=\"1,2\"");
        polyline(f, c->val_ref, c->eval_steps, c->n_eval, x0, y0, sx, lo, sy,
                 "fill=\"none\" stroke=\"black\" stroke-width=\"2\"");
        polyline(f, c->val_cand, c->eval_steps, c->n_eval, x0, y0, sx, lo, sy,
                 "fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"");
        fputs("</g>\n</g>\n", f);
    }
    fputs("</svg>\n", f);
    int ok = !ferror(f);
    if (fclose(f) != 0) ok = 0;
    return ok ? PARITY_OK : parity_diag_set(diag, PARITY_E_IO, "%s: cannot write the SVG", path);
}

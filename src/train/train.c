/* The training experiment: batches, optimizers, and the data x optimizer matrix of runs
 * (reference, reference with another data order, faithful floor, candidates) with gaps, floor,
 * margin, gradient damage and verdicts. Deliberately not here: the corpora (train_data.c), the
 * model's arithmetic (train_model.c), the floor kernel and the gradient probe (train_probe.c),
 * report files (train_report.c). */
#define _GNU_SOURCE /* M_PI */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/rng.h"
#include "src/train/train_impl.h"

const char *parity_train_data_name(parity_train_data_t d)
{
    switch (d) {
    case PARITY_TRAIN_DATA_TEXT: return "text";
    case PARITY_TRAIN_DATA_ZIPF: return "zipf";
    case PARITY_TRAIN_DATA_UNIFORM: return "uniform";
    }
    return "?";
}

const char *parity_train_opt_name(parity_train_opt_t o)
{
    switch (o) {
    case PARITY_TRAIN_OPT_SGD: return "sgd";
    case PARITY_TRAIN_OPT_SGDM: return "sgdm";
    case PARITY_TRAIN_OPT_ADAMW: return "adamw";
    }
    return "?";
}

void parity_train_config_default(parity_train_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->d_model = 32;
    c->n_heads = 2;
    c->n_layers = 1;
    c->mlp_mult = 4;
    c->seq_len = 64;
    c->batch_seqs = 128; /* N = 8192 tokens: the most frequent text token gets ~970 hits/step */
    c->val_seqs = 64;
    c->steps = 100;
    c->eval_every = 10;
    c->seed = 1;
    c->zipf_s = 1.0;
    c->synth_tokens = 338025; /* as many as the text */
    c->sgd_lr = 1.0;
    c->sgd_momentum = 0.9;
    c->adamw_lr = 3e-3;
    c->adamw_beta1 = 0.9;
    c->adamw_beta2 = 0.95;
    c->adamw_eps = 1e-8;
    c->adamw_wd = 0.01;
    c->jobs = 2;
    /* lr (1 - momentum): the same step as plain SGD once the momentum buffer has filled; with
     * lr = 1.0 (10x the SGD step) the reference itself diverges on zipf (docs/train.md) */
    c->sgdm_lr = 0.1;
    c->floor_orders = 2; /* M = 19.5; K = 3 gives 7.8 at 2 more runs per interface (docs/train.md) */
}

void parity_train_config_production(parity_train_config_t *c)
{
    parity_train_config_default(c);
    /* 65,536 tokens per step (the most frequent text token: ~7,700 hits per step) at about four
     * times the cost of a default 8,192-token step: D 32 -> 16 and T 64 -> 32 halve the per-token
     * cost of the head and the attention; 12 steps keep the 9-cell table with the catalog's
     * faithful kernels (117 runs) near an hour on two shared cores (docs/train.md) */
    c->d_model = 16;
    c->seq_len = 32;
    c->batch_seqs = 2048;
    c->steps = 12;
    c->eval_every = 3;
}

/* P(|Z0| > M max(|Z1|, .., |Zk|)) for i.i.d. standard normal Z = E[erf(|Z0| / (M sqrt 2))^k]:
 * Simpson's rule over |Z0| in [0, 12] (the tail beyond holds < 1e-32 of the mass). */
static double exceed_prob(double M, int k)
{
    const int n = 2400;
    const double h = 12.0 / n;
    double s = 0.0;
    for (int i = 0; i <= n; i++) {
        double z = i * h, w = (i == 0 || i == n) ? 1.0 : (i % 2 ? 4.0 : 2.0);
        s += w * 2.0 * exp(-0.5 * z * z) / sqrt(2.0 * M_PI) * pow(erf(z / (M * sqrt(2.0))), k);
    }
    return s * h / 3.0;
}

double parity_train_margin(int k, double alpha)
{
    if (k < 1 || !(alpha > 0.0 && alpha < 1.0)) return NAN;
    double lo = 1.0, hi = 1e6; /* exceed_prob falls monotonically in M */
    for (int it = 0; it < 200 && hi / lo > 1.0 + 1e-12; it++) {
        double mid = sqrt(lo * hi);
        if (exceed_prob(mid, k) > alpha) lo = mid;
        else hi = mid;
    }
    return hi;
}

/* ---- one training run ------------------------------------------------------------------------- */

/* Roles of the runs of one (data, optimizer) group: the reference, the reference with the other
 * data order (noise), the floor runs (one per candidate interface and order), the candidates. */
enum { ROLE_REF = 0, ROLE_NOISE = 1, ROLE_FLOOR = 2, ROLE_CAND = 3 };

typedef struct run {
    const parity_train_config_t *cfg;
    const corpus_t *corpus;
    parity_train_opt_t opt;
    int role;
    const parity_abi_kernel_t *kernel; /* ROLE_CAND */
    int floor_in, floor_out, floor_order; /* ROLE_FLOOR */
    int probe_in;       /* ROLE_FLOOR / ROLE_CAND: the probe's input dtype; -1 no probe */
    int liger;          /* keep the parameters after PARITY_TRAIN_LIGER_STEPS updates */
    /* results */
    double *train_loss; /* (steps) */
    double *val_loss;   /* (n_eval) */
    float *final_wte;   /* (V, D) */
    float *liger_params; /* (nparams) or NULL */
    size_t nparams;
    parity_train_gstep_t *grad; /* (steps, BUCKETS) when probed */
    int steps_done;
    int64_t max_hits;
    int failed;         /* 1 kernel failure, 2 non-finite loss, 3 setup error */
    char reason[256];
    double seconds;
    parity_train_stats_t stats;
    void (*tick)(void *pool, const struct run *r, int step); /* progress, may be NULL */
    void *pool;
    const char *label;
} run_t;

static int n_evals(const parity_train_config_t *cfg)
{
    return cfg->steps / cfg->eval_every + 1 + (cfg->steps % cfg->eval_every != 0);
}

static int eval_step(const parity_train_config_t *cfg, int e)
{
    int s = e * cfg->eval_every;
    return s > cfg->steps ? cfg->steps : s;
}

static int liger_steps(const parity_train_config_t *cfg)
{
    return cfg->steps < PARITY_TRAIN_LIGER_STEPS ? cfg->steps : PARITY_TRAIN_LIGER_STEPS;
}

static void batch(const corpus_t *c, int T, int nseq, parity_rng_t *rng, int32_t *in, int32_t *tg)
{
    for (int b = 0; b < nseq; b++) {
        int64_t o = (int64_t)parity_rng_below(rng, (uint64_t)(c->n_train - T - 1));
        memcpy(in + (size_t)b * T, c->tok + o, (size_t)T * sizeof *in);
        memcpy(tg + (size_t)b * T, c->tok + o + 1, (size_t)T * sizeof *tg);
    }
}

static void val_batch(const corpus_t *c, int T, int nseq, int32_t *in, int32_t *tg)
{
    int64_t span = c->n - c->n_train - T - 1;
    for (int b = 0; b < nseq; b++) {
        int64_t o = c->n_train + (nseq > 1 ? span * b / (nseq - 1) : 0);
        memcpy(in + (size_t)b * T, c->tok + o, (size_t)T * sizeof *in);
        memcpy(tg + (size_t)b * T, c->tok + o + 1, (size_t)T * sizeof *tg);
    }
}

/* Decoupled weight decay on matrices only (names not starting with 'g' after the layer prefix). */
static int decays(const char *name)
{
    const char *dot = strrchr(name, '.');
    return (dot ? dot[1] : name[0]) != 'g';
}

static void optimizer_step(const parity_train_config_t *cfg, parity_train_opt_t opt,
                           parity_train_model_t *m, float *mom, float *vel, int step)
{
    float *p = parity_train_model_params(m), *g = parity_train_model_grads(m);
    int t1 = step + 1;
    double bc1 = 1.0 - pow(cfg->adamw_beta1, t1), bc2 = 1.0 - pow(cfg->adamw_beta2, t1);
    for (int ti = 0; ti < parity_train_model_ntensors(m); ti++) {
        size_t off, cnt;
        const char *nm = parity_train_model_tensor(m, ti, &off, &cnt);
        float *pp = p + off, *gg = g + off, *mm = mom + off;
        if (opt == PARITY_TRAIN_OPT_SGD) {
            float lr = (float)cfg->sgd_lr;
            for (size_t i = 0; i < cnt; i++) pp[i] -= lr * gg[i];
        } else if (opt == PARITY_TRAIN_OPT_SGDM) {
            float lr = (float)cfg->sgdm_lr, mu = (float)cfg->sgd_momentum;
            for (size_t i = 0; i < cnt; i++) {
                mm[i] = mu * mm[i] + gg[i];
                pp[i] -= lr * mm[i];
            }
        } else {
            float b1 = (float)cfg->adamw_beta1, b2 = (float)cfg->adamw_beta2;
            float lr = (float)cfg->adamw_lr, eps = (float)cfg->adamw_eps;
            float wd = decays(nm) ? (float)cfg->adamw_wd : 0.0f;
            float c1 = (float)(1.0 / bc1), c2 = (float)(1.0 / bc2);
            float *vv = vel + off;
            for (size_t i = 0; i < cnt; i++) {
                mm[i] = b1 * mm[i] + (1.0f - b1) * gg[i];
                vv[i] = b2 * vv[i] + (1.0f - b2) * gg[i] * gg[i];
                float mh = mm[i] * c1, vh = vv[i] * c2;
                pp[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * pp[i]);
            }
        }
    }
}

static void run_train(run_t *r)
{
    const parity_train_config_t *cfg = r->cfg;
    const corpus_t *c = r->corpus;
    int T = cfg->seq_len, B = cfg->batch_seqs, NV = cfg->val_seqs;
    double t0 = parity_now();
    parity_train_model_t *m = NULL;
    parity_diag_t diag = {{0}};
    size_t N = (size_t)B * T, NVt = (size_t)(NV > 0 ? NV : 1) * T;
    int32_t *in = malloc(N * 4), *tg = malloc(N * 4), *vin = malloc(NVt * 4), *vtg = malloc(NVt * 4);
    float *mom = NULL, *vel = NULL;
    int ok = in && tg && vin && vtg && parity_train_model_new(cfg, c->V, cfg->seed, &m, &diag) == PARITY_OK;
    ok = ok && (r->role != ROLE_FLOOR ||
                train_model_set_floor(m, r->floor_in, r->floor_out, r->floor_order) == PARITY_OK);
    ok = ok && (r->probe_in < 0 || train_model_set_probe(m, r->probe_in) == PARITY_OK);
    if (!ok) {
        r->failed = 3;
        snprintf(r->reason, sizeof r->reason, "setup: %.200s", diag.msg[0] ? diag.msg : "out of memory");
        goto done;
    }
    size_t np = parity_train_model_nparams(m);
    float *p = parity_train_model_params(m);
    mom = calloc(np, sizeof *mom);
    vel = r->opt == PARITY_TRAIN_OPT_ADAMW ? calloc(np, sizeof *vel) : NULL;
    if (r->liger) {
        r->nparams = np;
        r->liger_params = malloc(np * sizeof(float));
    }
    if (!mom || (r->opt == PARITY_TRAIN_OPT_ADAMW && !vel) || (r->liger && !r->liger_params)) {
        r->failed = 3;
        snprintf(r->reason, sizeof r->reason, "setup: out of memory");
        goto done;
    }
    if (NV > 0) val_batch(c, T, NV, vin, vtg);
    parity_rng_t rng;
    parity_rng_seed(&rng, cfg->seed + (r->role == ROLE_NOISE ? 1u : 0u), 0xba7c0000u);
    int e = 0;
    for (int q = 0; q < n_evals(cfg); q++) r->val_loss[q] = NAN;
    for (int step = 0; step <= cfg->steps; step++) {
        if (NV > 0 && e < n_evals(cfg) && eval_step(cfg, e) == step) {
            r->val_loss[e] = parity_train_model_loss(m, vin, vtg, NV);
            e++;
        }
        if (step == cfg->steps) break;
        batch(c, T, B, &rng, in, tg);
        double loss;
        parity_status_t s = parity_train_model_grad(m, in, tg, B, r->kernel,
                                                    cfg->seed * 1000003u + (uint64_t)step, &loss,
                                                    &r->stats, &diag);
        if (r->stats.max_hits > r->max_hits) r->max_hits = r->stats.max_hits;
        r->train_loss[step] = loss;
        if (s != PARITY_OK) {
            r->failed = r->stats.nonfinite_input ? 2 : 1;
            snprintf(r->reason, sizeof r->reason, "step %d: %.200s", step, diag.msg);
            break;
        }
        if (!isfinite(loss)) {
            r->failed = 2;
            snprintf(r->reason, sizeof r->reason, "step %d: loss %g (the run diverged)", step, loss);
            break;
        }
        if (r->grad) memcpy(r->grad + (size_t)step * PARITY_TRAIN_BUCKETS, m->probe, sizeof m->probe);
        double to = parity_now();
        optimizer_step(cfg, r->opt, m, mom, vel, step);
        r->stats.t_optimizer += parity_now() - to;
        r->steps_done = step + 1;
        if (r->liger && r->steps_done == liger_steps(cfg)) memcpy(r->liger_params, p, np * sizeof(float));
        int quarter = cfg->steps >= 40 ? cfg->steps / 4 : cfg->steps;
        if (r->tick && r->steps_done % quarter == 0 && r->steps_done < cfg->steps)
            r->tick(r->pool, r, r->steps_done);
    }
    memcpy(r->final_wte, p, (size_t)c->V * cfg->d_model * sizeof(float));
    for (; e < n_evals(cfg); e++) r->val_loss[e] = NAN; /* never evaluated (the run stopped) */
done:
    parity_train_model_free(m);
    free(in); free(tg); free(vin); free(vtg); free(mom); free(vel);
    r->seconds = parity_now() - t0;
}

/* ---- the matrix ------------------------------------------------------------------------------- */

typedef struct {
    const parity_train_config_t *cfg;
    run_t *runs;
    int n_runs, next, done;
    pthread_mutex_t mu;
    parity_train_progress_fn progress;
    void *ctx;
    double t0;
} pool_t;

static void say(pool_t *pl, const char *line)
{
    if (pl->progress) pl->progress(pl->ctx, line);
}

static void tick(void *pool, const run_t *r, int step)
{
    pool_t *pl = pool;
    char line[320];
    snprintf(line, sizeof line, "%-44s %4d/%d steps  train %.4f  %.1f s", r->label, step,
             pl->cfg->steps, r->train_loss[step - 1], parity_now() - pl->t0);
    pthread_mutex_lock(&pl->mu);
    say(pl, line);
    pthread_mutex_unlock(&pl->mu);
}

static void *worker(void *arg)
{
    pool_t *pl = arg;
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        int i = pl->next < pl->n_runs ? pl->next++ : -1;
        int nth = pl->next;
        pthread_mutex_unlock(&pl->mu);
        if (i < 0) return NULL;
        run_t *r = &pl->runs[i];
        r->tick = pl->progress ? tick : NULL;
        r->pool = pl;
        run_train(r);
        char line[700];
        int ne = n_evals(pl->cfg);
        int n = snprintf(line, sizeof line, "[%d/%d] %-44s %4d/%d done  train %.4f  val %.4f  %.1f s%s%s",
                         nth, pl->n_runs, r->label, r->steps_done, pl->cfg->steps,
                         r->steps_done ? r->train_loss[r->steps_done - 1] : NAN,
                         pl->cfg->val_seqs > 0 ? r->val_loss[ne - 1] : NAN, r->seconds,
                         r->failed ? "  FAILED: " : "", r->failed ? r->reason : "");
        pthread_mutex_lock(&pl->mu);
        /* Every run trains the same steps on the same shapes, so the runs' throughput so far is a
         * fair estimate of what is left (the long default grid takes many minutes); the runs still
         * in flight count half done each. */
        int done = ++pl->done;
        double eff = done + 0.5 * (pl->next - done);
        if (done < pl->n_runs && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, "  (about %.0f s left)",
                     (parity_now() - pl->t0) / eff * (pl->n_runs - eff));
        say(pl, line);
        pthread_mutex_unlock(&pl->mu);
    }
}

void parity_train_report_free(parity_train_report_t *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_cells; i++) {
        parity_train_cell_t *c = &r->cells[i];
        free(c->eval_steps); free(c->train_ref); free(c->train_cand); free(c->train_noise);
        free(c->val_ref); free(c->val_cand); free(c->val_noise); free(c->val_floor);
        free(c->grad_cand); free(c->grad_floor);
    }
    free(r->cells);
    free(r->kernel_labels);
    free(r);
}

static double row_dist(const float *a, const float *b, int d)
{
    double s = 0.0;
    for (int k = 0; k < d; k++) {
        double t = (double)a[k] - (double)b[k];
        s += t * t;
    }
    return sqrt(s);
}

/* Drift of the final embedding rows by frequency-rank bucket. */
static void drift(parity_train_cell_t *cell, const corpus_t *c, const parity_train_config_t *cfg,
                  const float *e0, const run_t *ref, const run_t *noise, const run_t *const *floors,
                  int nf, const run_t *cand)
{
    int D = cfg->d_model;
    double N = (double)cfg->batch_seqs * cfg->seq_len;
    for (int b = 0; b < PARITY_TRAIN_DRIFT_BUCKETS; b++) {
        parity_train_drift_t *dr = &cell->drift[b];
        dr->rank_lo = train_bucket_edges[b] < c->V ? train_bucket_edges[b] : c->V;
        dr->rank_hi = train_bucket_edges[b + 1] < c->V ? train_bucket_edges[b + 1] : c->V;
        double hs = 0.0, cs = 0.0, ns = 0.0, fs[PARITY_TRAIN_MAX_FLOOR] = {0};
        int nrow = 0;
        for (int r = dr->rank_lo; r < dr->rank_hi; r++) {
            hs += (double)c->count[r] / (double)c->n_train * N;
            const float *er = ref->final_wte + (size_t)r * D;
            double moved = row_dist(er, e0 + (size_t)r * D, D);
            if (!(moved > 0.0)) continue;
            cs += row_dist(cand->final_wte + (size_t)r * D, er, D) / moved;
            ns += row_dist(noise->final_wte + (size_t)r * D, er, D) / moved;
            for (int k = 0; k < nf; k++) fs[k] += row_dist(floors[k]->final_wte + (size_t)r * D, er, D) / moved;
            nrow++;
        }
        int rows = dr->rank_hi - dr->rank_lo;
        dr->mean_hits_per_step = rows ? hs / rows : 0.0;
        dr->cand_drift = nrow ? cs / nrow : 0.0;
        dr->noise_drift = nrow ? ns / nrow : 0.0;
        dr->floor_drift = 0.0;
        for (int k = 0; k < nf; k++)
            if (nrow && fs[k] / nrow > dr->floor_drift) dr->floor_drift = fs[k] / nrow;
    }
}

/* Mean over a run's first `steps` probed steps of one bucket's field (steps whose bucket had no
 * row to compare are left out). */
static double gmean(const parity_train_gstep_t *g, int steps, int b, int field)
{
    double s = 0.0;
    int n = 0;
    for (int t = 0; t < steps; t++) {
        const parity_train_gstep_t *x = &g[(size_t)t * PARITY_TRAIN_BUCKETS + b];
        if (!x->rows_hit) continue;
        s += field == 0 ? x->rel_err : field == 1 ? x->cosine : field == 2 ? x->absorbed_bf16 : x->absorbed_fp32;
        n++;
    }
    return n ? s / n : 0.0;
}

static double ratio(double a, double f) { return f > 0.0 ? a / f : (a > 0.0 ? INFINITY : 0.0); }

/* Liger-Kernel's convergence rule on the reference and candidate runs (see train.h). */
static void liger(parity_train_cell_t *cell, const parity_train_config_t *cfg, const run_t *ref,
                  const run_t *cand)
{
    int L = liger_steps(cfg);
    cell->liger_steps = L;
    double w = 0.0;
    for (int s = 0; s < L; s++) {
        double d = s < cand->steps_done ? fabs(cand->train_loss[s] - ref->train_loss[s]) : INFINITY;
        double q = d / (PARITY_TRAIN_LIGER_LOSS_ATOL + PARITY_TRAIN_LIGER_LOSS_RTOL * fabs(ref->train_loss[s]));
        if (!(q <= w)) w = q; /* NaN counts as a failure */
    }
    cell->liger_loss_worst = w;
    w = 0.0;
    if (cand->steps_done < L || !cand->liger_params || !ref->liger_params) w = INFINITY;
    else
        for (size_t i = 0; i < ref->nparams; i++) {
            double d = fabs((double)cand->liger_params[i] - ref->liger_params[i]);
            double q = d / (PARITY_TRAIN_LIGER_PARAM_ATOL + PARITY_TRAIN_LIGER_PARAM_RTOL * fabs((double)ref->liger_params[i]));
            if (!(q <= w)) w = q;
        }
    cell->liger_param_worst = w;
    cell->liger_pass = cell->liger_loss_worst <= 1.0 && cell->liger_param_worst <= 1.0;
}

/* Distances, floor, margin, departures and verdict of one candidate's cell. */
static void judge(parity_train_cell_t *cell, const parity_train_config_t *cfg, double margin,
                  const run_t *ref, const run_t *noise, const run_t *const *floors, int nf,
                  const run_t *cand)
{
    int ne = cell->n_eval, last = -1;
    cell->first_departure = -1;
    cell->steps_done = cand->steps_done;
    cell->margin = margin;
    const run_t *bad = ref->failed ? ref : noise->failed ? noise : NULL;
    for (int k = 0; k < nf && !bad; k++)
        if (floors[k]->failed) bad = floors[k];
    if (bad) {
        cell->verdict = "diverged";
        /* "%.200s": the run's reason is longer than the cell's room; keep its start. */
        snprintf(cell->reason, sizeof cell->reason, "a %s run failed: %.200s",
                 bad == ref ? "reference" : bad == noise ? "reference (other data order)" : "floor",
                 bad->reason);
        return;
    }
    double run_floor = 0.0;
    for (int e = 0; e < ne; e++) {
        for (int k = 0; k < nf; k++) {
            double f = fabs(floors[k]->val_loss[e] - ref->val_loss[e]);
            if (f > cell->floor_gap[k]) cell->floor_gap[k] = f;
            if (f > run_floor) run_floor = f;
        }
        double nz = fabs(noise->val_loss[e] - ref->val_loss[e]);
        if (nz > cell->noise_max) cell->noise_max = nz;
        if (!isfinite(cand->val_loss[e])) continue;
        last = e;
        double gap = cand->val_loss[e] - ref->val_loss[e];
        if (fabs(gap) > cell->max_gap) cell->max_gap = fabs(gap);
        if (cell->first_departure < 0 && fabs(gap) > cell->margin * run_floor)
            cell->first_departure = cell->eval_steps[e];
    }
    for (int k = 0; k < nf; k++)
        if (cell->floor_gap[k] > cell->floor_gap_max) cell->floor_gap_max = cell->floor_gap[k];
    if (last >= 0) {
        cell->final_gap = cand->val_loss[last] - ref->val_loss[last];
        cell->noise_final = fabs(noise->val_loss[last] - ref->val_loss[last]);
    }
    cell->loss_ratio = ratio(cell->max_gap, cell->floor_gap_max);
    int loss_departs = cell->loss_ratio > cell->margin;
    if (!loss_departs) cell->first_departure = -1;
    char *dep = cell->departs_on;
    dep[0] = 0;
    if (loss_departs) snprintf(dep, sizeof cell->departs_on, "loss");
    int sd = cand->steps_done;
    for (int b = 0; b < PARITY_TRAIN_BUCKETS; b++) {
        cell->grad_err[b] = gmean(cand->grad, sd, b, 0);
        cell->grad_cos[b] = gmean(cand->grad, sd, b, 1);
        cell->absorbed_bf16[b] = gmean(cand->grad, sd, b, 2);
        cell->absorbed_fp32[b] = gmean(cand->grad, sd, b, 3);
        for (int k = 0; k < nf; k++) {
            double f = gmean(floors[k]->grad, floors[k]->steps_done, b, 0);
            if (f > cell->floor_grad_err[b]) cell->floor_grad_err[b] = f;
        }
        cell->grad_ratio[b] = ratio(cell->grad_err[b], cell->floor_grad_err[b]);
        if (cell->grad_ratio[b] > cell->margin && train_bucket_edges[b] < cell->vocab) {
            size_t n = strlen(dep);
            int hi = train_bucket_edges[b + 1] < cell->vocab ? train_bucket_edges[b + 1] : cell->vocab;
            snprintf(dep + n, sizeof cell->departs_on - n, "%sgrad %d-%d", n ? "," : "",
                     train_bucket_edges[b], hi - 1);
            for (int t = 0; t < sd; t++) {
                const parity_train_gstep_t *x = &cand->grad[(size_t)t * PARITY_TRAIN_BUCKETS + b];
                if (x->rows_hit && x->rel_err > cell->margin * cell->floor_grad_err[b]) {
                    if (cell->first_departure < 0 || t < cell->first_departure) cell->first_departure = t;
                    break;
                }
            }
        }
    }
    liger(cell, cfg, ref, cand);
    if (cand->failed) {
        cell->verdict = cand->failed == 2 ? "diverged" : "crashed";
        if (cell->first_departure < 0) cell->first_departure = cand->steps_done;
        snprintf(cell->reason, sizeof cell->reason, "%s", cand->reason);
        return;
    }
    cell->verdict = dep[0] ? "departs" : "within-floor";
}

static double *dup_d(const double *v, int n)
{
    double *o = malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    if (o && n > 0) memcpy(o, v, (size_t)n * sizeof *o);
    return o;
}

/* The distinct (in, out) interfaces of the candidates; iface[j] is candidate j's. */
static int interfaces(const parity_abi_kernel_t *const *cands, int n, int ifin[], int ifout[], int iface[])
{
    int ni = 0;
    for (int j = 0; j < n; j++) {
        int in = cands[j]->in_dtype == PARITY_DT_BF16 ? PARITY_DT_BF16 : PARITY_DT_F32;
        int out = cands[j]->out_dtype == PARITY_DT_BF16 ? PARITY_DT_BF16 : PARITY_DT_F32;
        int f = -1;
        for (int i = 0; i < ni; i++)
            if (ifin[i] == in && ifout[i] == out) f = i;
        if (f < 0) {
            f = ni++;
            ifin[f] = in;
            ifout[f] = out;
        }
        iface[j] = f;
    }
    return ni;
}

static const char *dt_name(int dt) { return dt == PARITY_DT_BF16 ? "bf16" : "f32"; }

parity_status_t parity_train_run(const parity_train_config_t *cfg,
                                 const parity_abi_kernel_t *const *candidates,
                                 const char *const *labels, int n_cand,
                                 const parity_train_data_t *datas, int n_datas,
                                 const parity_train_opt_t *opts, int n_opts,
                                 parity_train_progress_fn progress, void *ctx,
                                 parity_train_report_t **out, parity_diag_t *diag)
{
    *out = NULL;
    int cands_ok = candidates && n_cand >= 1 && n_cand <= 64;
    for (int j = 0; cands_ok && j < n_cand; j++) cands_ok = candidates[j] && candidates[j]->run;
    if (!cfg || !cands_ok || n_datas < 1 || n_datas > 3 || n_opts < 1 || n_opts > 3 ||
        cfg->steps < 1 || cfg->eval_every < 1 || cfg->val_seqs < 1 || cfg->jobs < 1 ||
        cfg->floor_orders < 1 || cfg->floor_orders > PARITY_TRAIN_MAX_FLOOR ||
        cfg->synth_tokens < 4 * (cfg->seq_len + 2) || cfg->synth_tokens > 100000000)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "train: need 1-64 kernels, 1-3 data kinds and optimizers, steps >= 1, "
                               "eval_every >= 1, val_seqs >= 1, jobs >= 1, floor orders 1..%d, "
                               "synth_tokens >= 4 (seq_len + 2)", PARITY_TRAIN_MAX_FLOOR);
    parity_train_report_t *rep = calloc(1, sizeof *rep);
    if (!rep) return PARITY_E_NOMEM;
    rep->cfg = *cfg;
    rep->n_kernels = n_cand;
    rep->kernel_labels = calloc((size_t)n_cand, sizeof *rep->kernel_labels);
    if (!rep->kernel_labels) { free(rep); return PARITY_E_NOMEM; }
    for (int j = 0; j < n_cand; j++)
        snprintf(rep->kernel_labels[j], sizeof rep->kernel_labels[j], "%s",
                 labels && labels[j] ? labels[j] : candidates[j]->name);
    corpus_t corp[3];
    memset(corp, 0, sizeof corp);
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < n_datas && !st; i++) {
        st = train_corpus_build(&corp[i], datas[i], cfg, diag);
        if (!st && (corp[i].n_train < 2 * (cfg->seq_len + 2) ||
                    corp[i].n - corp[i].n_train < cfg->seq_len + 2))
            st = parity_diag_set(diag, PARITY_E_INVALID,
                                 "train: %s corpus of %lld tokens: its 10%% validation split is "
                                 "shorter than a sequence of %d (+2) tokens",
                                 parity_train_data_name(datas[i]), (long long)corp[i].n,
                                 cfg->seq_len);
        if (!st && datas[i] == PARITY_TRAIN_DATA_TEXT) {
            rep->text_raw_vocab = corp[i].raw_vocab;
            rep->text_tokens = corp[i].n;
        }
    }
    int ifin[64], ifout[64], iface[64];
    int ni = interfaces(candidates, n_cand, ifin, ifout, iface), K = cfg->floor_orders;
    int ngroup = n_datas * n_opts, per = 2 + ni * K + n_cand, nrun = per * ngroup, ne = n_evals(cfg);
    int ncell = ngroup * n_cand;
    run_t *runs = st ? NULL : calloc((size_t)nrun, sizeof *runs);
    char(*lbuf)[96] = st ? NULL : calloc((size_t)nrun, sizeof *lbuf);
    rep->cells = st ? NULL : calloc((size_t)ncell, sizeof *rep->cells);
    if (!st && (!runs || !lbuf || !rep->cells)) st = PARITY_E_NOMEM;
    rep->n_cells = rep->cells ? ncell : 0;
    for (int gi = 0; !st && gi < ngroup; gi++) {
        const corpus_t *c = &corp[gi / n_opts];
        parity_train_data_t dk = datas[gi / n_opts];
        parity_train_opt_t ok = opts[gi % n_opts];
        for (int q = 0; q < per && !st; q++) {
            run_t *r = &runs[gi * per + q];
            r->cfg = cfg;
            r->corpus = c;
            r->opt = ok;
            r->probe_in = -1;
            char what[80];
            if (q == 0) {
                r->role = ROLE_REF;
                r->liger = 1;
                snprintf(what, sizeof what, "reference");
            } else if (q == 1) {
                r->role = ROLE_NOISE;
                snprintf(what, sizeof what, "reference seed+1");
            } else if (q < 2 + ni * K) {
                int i = (q - 2) / K, k = (q - 2) % K;
                r->role = ROLE_FLOOR;
                r->floor_in = ifin[i];
                r->floor_out = ifout[i];
                r->floor_order = k + 1;
                r->probe_in = ifin[i];
                snprintf(what, sizeof what, "floor %s->%s #%d", dt_name(ifin[i]), dt_name(ifout[i]), k + 1);
            } else {
                int j = q - 2 - ni * K;
                r->role = ROLE_CAND;
                r->kernel = candidates[j];
                r->probe_in = candidates[j]->in_dtype == PARITY_DT_BF16 ? PARITY_DT_BF16 : PARITY_DT_F32;
                r->liger = 1;
                snprintf(what, sizeof what, "%.70s", rep->kernel_labels[j]);
            }
            r->train_loss = calloc((size_t)cfg->steps, sizeof(double));
            r->val_loss = calloc((size_t)ne, sizeof(double));
            r->final_wte = calloc((size_t)c->V * cfg->d_model, sizeof(float));
            if (r->probe_in >= 0)
                r->grad = calloc((size_t)cfg->steps * PARITY_TRAIN_BUCKETS, sizeof *r->grad);
            if (!r->train_loss || !r->val_loss || !r->final_wte || (r->probe_in >= 0 && !r->grad))
                st = PARITY_E_NOMEM;
            snprintf(lbuf[gi * per + q], sizeof lbuf[0], "%s/%s %s", parity_train_data_name(dk),
                     parity_train_opt_name(ok), what);
            r->label = lbuf[gi * per + q];
        }
    }
    if (st == PARITY_E_NOMEM) parity_diag_set(diag, st, "train: out of memory");
    if (!st) {
        pool_t pl = {cfg, runs, nrun, 0, 0, PTHREAD_MUTEX_INITIALIZER, progress, ctx, parity_now()};
        int nth = cfg->jobs < nrun ? cfg->jobs : nrun;
        if (progress) {
            char plan[200];
            snprintf(plan, sizeof plan, "%d runs of %d steps (%d sequences of %d tokens a step), %d at a "
                     "time; the time left is estimated after each run", nrun, cfg->steps, cfg->batch_seqs,
                     cfg->seq_len, nth);
            progress(ctx, plan);
        }
        pthread_t th[64];
        if (nth > 64) nth = 64;
        int started = 0;
        for (int i = 1; i < nth; i++)
            if (pthread_create(&th[i], NULL, worker, &pl) == 0) started = i;
            else break;
        worker(&pl);
        for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    }
    /* one loss measure and one gradient measure per bucket share the false-departure budget */
    double margin = parity_train_margin(K, PARITY_TRAIN_ALPHA / (1 + PARITY_TRAIN_BUCKETS));
    for (int ci = 0; !st && ci < ncell; ci++) {
        int gi = ci / n_cand, j = ci % n_cand;
        parity_train_cell_t *cell = &rep->cells[ci];
        const corpus_t *c = &corp[gi / n_opts];
        run_t *g = &runs[gi * per];
        const run_t *ref = &g[0], *noise = &g[1], *cand = &g[2 + ni * K + j];
        const run_t *floors[PARITY_TRAIN_MAX_FLOOR];
        for (int k = 0; k < K; k++) floors[k] = &g[2 + iface[j] * K + k];
        cell->data = datas[gi / n_opts];
        cell->opt = opts[gi % n_opts];
        cell->kernel = j;
        cell->vocab = c->V;
        cell->n_eval = ne;
        cell->n_floor = K;
        cell->eval_steps = malloc((size_t)ne * sizeof(int));
        cell->train_ref = dup_d(ref->train_loss, cfg->steps);
        cell->train_noise = dup_d(noise->train_loss, cfg->steps);
        cell->train_cand = dup_d(cand->train_loss, cfg->steps);
        cell->val_ref = dup_d(ref->val_loss, ne);
        cell->val_noise = dup_d(noise->val_loss, ne);
        cell->val_cand = dup_d(cand->val_loss, ne);
        cell->val_floor = malloc((size_t)K * ne * sizeof(double));
        cell->grad_cand = calloc((size_t)cfg->steps * PARITY_TRAIN_BUCKETS, sizeof *cell->grad_cand);
        cell->grad_floor = calloc((size_t)K * cfg->steps * PARITY_TRAIN_BUCKETS, sizeof *cell->grad_floor);
        if (!cell->eval_steps || !cell->train_ref || !cell->train_noise || !cell->train_cand ||
            !cell->val_ref || !cell->val_noise || !cell->val_cand || !cell->val_floor ||
            !cell->grad_cand || !cell->grad_floor) {
            st = parity_diag_set(diag, PARITY_E_NOMEM, "train: out of memory");
            break;
        }
        for (int e = 0; e < ne; e++) cell->eval_steps[e] = eval_step(cfg, e);
        size_t gs = (size_t)cfg->steps * PARITY_TRAIN_BUCKETS;
        memcpy(cell->grad_cand, cand->grad, gs * sizeof *cand->grad);
        for (int k = 0; k < K; k++) {
            memcpy(cell->val_floor + (size_t)k * ne, floors[k]->val_loss, (size_t)ne * sizeof(double));
            memcpy(cell->grad_floor + (size_t)k * gs, floors[k]->grad, gs * sizeof *floors[k]->grad);
        }
        cell->max_hits = ref->max_hits > cand->max_hits ? ref->max_hits : cand->max_hits;
        cell->seconds = cand->seconds;
        cell->stats_ref = ref->stats;
        cell->stats_cand = cand->stats;
        cell->seconds_ref = ref->seconds;
        cell->seconds_cand = cand->seconds;
        judge(cell, cfg, margin, ref, noise, floors, K, cand);
        int all_ok = !ref->failed && !noise->failed && !cand->failed;
        for (int k = 0; k < K; k++) all_ok = all_ok && !floors[k]->failed;
        parity_train_model_t *m0 = NULL;
        if (all_ok && parity_train_model_new(cfg, c->V, cfg->seed, &m0, NULL) == PARITY_OK)
            drift(cell, c, cfg, parity_train_model_params(m0), ref, noise, floors, K, cand);
        parity_train_model_free(m0);
    }
    for (int i = 0; runs && i < nrun; i++) {
        free(runs[i].train_loss); free(runs[i].val_loss); free(runs[i].final_wte);
        free(runs[i].liger_params); free(runs[i].grad);
    }
    free(runs); free(lbuf);
    for (int i = 0; i < 3; i++) train_corpus_free(&corp[i]);
    if (st) {
        parity_train_report_free(rep);
        return st;
    }
    *out = rep;
    return PARITY_OK;
}

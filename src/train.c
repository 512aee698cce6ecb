/* The training experiment: corpora (real text remapped to a dense frequency-ranked vocabulary,
 * Zipf and uniform synthetic), batches, optimizers, and the data x optimizer matrix of runs
 * (reference, reference with another data order, candidate) with gaps, noise and verdicts.
 * Deliberately not here: the model's arithmetic (train_model.c), report files (train_report.c). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/rng.h"
#include "parity/workload.h"
#include "train_impl.h"

/* Vocabulary size of the synthetic corpora: the number of GPT-2 ids tinyshakespeare uses, so the
 * three corpora differ only in how the ids are distributed. */
#define SYNTH_VOCAB 11706

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
}

/* ---- corpora ---------------------------------------------------------------------------------- */

typedef struct {
    int32_t *tok;     /* dense ids, rank order: 0 is the most frequent */
    int64_t n, n_train;
    int V;            /* dense vocabulary (ids actually used) */
    int raw_vocab;    /* ids used before remapping */
    int64_t *count;   /* (V) occurrences in the training split */
} corpus_t;

static void corpus_free(corpus_t *c)
{
    free(c->tok);
    free(c->count);
    memset(c, 0, sizeof *c);
}

typedef struct {
    int64_t count;
    int32_t id;
} idcount_t;

static int cmp_by_count(const void *a, const void *b)
{
    const idcount_t *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Remap raw ids in [0, raw_v) to dense ids ordered by frequency over the whole corpus (ties by
 * raw id). */
static parity_status_t corpus_from_raw(corpus_t *c, const int32_t *raw, int64_t n, int raw_v)
{
    int64_t *cnt = calloc((size_t)raw_v, sizeof *cnt);
    idcount_t *order = malloc((size_t)raw_v * sizeof *order);
    int32_t *map = malloc((size_t)raw_v * sizeof *map);
    c->tok = malloc((size_t)n * sizeof *c->tok);
    if (!cnt || !order || !map || !c->tok) {
        free(cnt); free(order); free(map);
        return PARITY_E_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) cnt[raw[i]]++;
    int used = 0;
    for (int i = 0; i < raw_v; i++)
        if (cnt[i]) order[used++] = (idcount_t){cnt[i], i};
    qsort(order, (size_t)used, sizeof *order, cmp_by_count);
    for (int r = 0; r < used; r++) map[order[r].id] = r;
    for (int64_t i = 0; i < n; i++) c->tok[i] = map[raw[i]];
    c->n = n;
    c->n_train = n - n / 10;
    c->V = used;
    c->raw_vocab = used;
    c->count = calloc((size_t)used, sizeof *c->count);
    free(cnt); free(order); free(map);
    if (!c->count) return PARITY_E_NOMEM;
    for (int64_t i = 0; i < c->n_train; i++) c->count[c->tok[i]]++;
    return PARITY_OK;
}

static parity_status_t corpus_build(corpus_t *c, parity_train_data_t kind,
                                    const parity_train_config_t *cfg, parity_diag_t *diag)
{
    memset(c, 0, sizeof *c);
    if (kind == PARITY_TRAIN_DATA_TEXT) {
        const int32_t *ids;
        size_t n;
        parity_status_t s = parity_workload_text_ids(&ids, &n, diag);
        if (s) return s;
        s = corpus_from_raw(c, ids, (int64_t)n, 50257);
        return s ? parity_diag_set(diag, s, "train: text corpus: out of memory") : PARITY_OK;
    }
    int64_t n = cfg->synth_tokens;
    int32_t *raw = malloc((size_t)n * sizeof *raw);
    double *cdf = malloc(SYNTH_VOCAB * sizeof *cdf);
    if (!raw || !cdf) {
        free(raw); free(cdf);
        return parity_diag_set(diag, PARITY_E_NOMEM, "train: synthetic corpus: out of memory");
    }
    double acc = 0.0;
    for (int r = 0; r < SYNTH_VOCAB; r++) {
        acc += kind == PARITY_TRAIN_DATA_ZIPF ? pow((double)(r + 1), -cfg->zipf_s) : 1.0;
        cdf[r] = acc;
    }
    /* The corpus depends on the seed but not on the data order: ranks are ids directly. */
    parity_rng_t rng;
    parity_rng_seed(&rng, cfg->seed, 0xc0de0000u + (uint64_t)kind);
    for (int64_t i = 0; i < n; i++) {
        double u = parity_rng_uniform(&rng) * acc;
        int lo = 0, hi = SYNTH_VOCAB - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        raw[i] = lo;
    }
    free(cdf);
    parity_status_t s = corpus_from_raw(c, raw, n, SYNTH_VOCAB);
    free(raw);
    return s ? parity_diag_set(diag, s, "train: synthetic corpus: out of memory") : PARITY_OK;
}

/* ---- one training run ------------------------------------------------------------------------- */

enum { ROLE_REF = 0, ROLE_NOISE = 1, ROLE_CAND = 2 };

typedef struct run {
    const parity_train_config_t *cfg;
    const corpus_t *corpus;
    parity_train_opt_t opt;
    int role;
    const parity_abi_kernel_t *kernel; /* NULL: reference */
    /* results */
    double *train_loss; /* (steps) */
    double *val_loss;   /* (n_eval) */
    float *final_wte;   /* (V, D) */
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

static void run_train(run_t *r)
{
    const parity_train_config_t *cfg = r->cfg;
    const corpus_t *c = r->corpus;
    int T = cfg->seq_len, B = cfg->batch_seqs, NV = cfg->val_seqs;
    double t0 = train_now();
    parity_train_model_t *m = NULL;
    parity_diag_t diag = {{0}};
    size_t N = (size_t)B * T, NVt = (size_t)(NV > 0 ? NV : 1) * T;
    int32_t *in = malloc(N * 4), *tg = malloc(N * 4), *vin = malloc(NVt * 4), *vtg = malloc(NVt * 4);
    float *mom = NULL, *vel = NULL;
    if (!in || !tg || !vin || !vtg || parity_train_model_new(cfg, c->V, cfg->seed, &m, &diag)) {
        r->failed = 3;
        snprintf(r->reason, sizeof r->reason, "setup: %.200s", diag.msg[0] ? diag.msg : "out of memory");
        goto done;
    }
    size_t np = parity_train_model_nparams(m);
    float *p = parity_train_model_params(m), *g = parity_train_model_grads(m);
    mom = calloc(np, sizeof *mom);
    vel = r->opt == PARITY_TRAIN_OPT_ADAMW ? calloc(np, sizeof *vel) : NULL;
    if (!mom || (r->opt == PARITY_TRAIN_OPT_ADAMW && !vel)) {
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
        double to = train_now();
        /* optimizer, per tensor (weight decay depends on the tensor) */
        int t1 = step + 1;
        double bc1 = 1.0 - pow(cfg->adamw_beta1, t1), bc2 = 1.0 - pow(cfg->adamw_beta2, t1);
        for (int ti = 0; ti < parity_train_model_ntensors(m); ti++) {
            size_t off, cnt;
            const char *nm = parity_train_model_tensor(m, ti, &off, &cnt);
            float *pp = p + off, *gg = g + off, *mm = mom + off;
            if (r->opt == PARITY_TRAIN_OPT_SGD) {
                float lr = (float)cfg->sgd_lr;
                for (size_t i = 0; i < cnt; i++) pp[i] -= lr * gg[i];
            } else if (r->opt == PARITY_TRAIN_OPT_SGDM) {
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
        r->stats.t_optimizer += train_now() - to;
        r->steps_done = step + 1;
        int quarter = cfg->steps >= 40 ? cfg->steps / 4 : cfg->steps;
        if (r->tick && r->steps_done % quarter == 0 && r->steps_done < cfg->steps)
            r->tick(r->pool, r, r->steps_done);
    }
    memcpy(r->final_wte, p, (size_t)c->V * cfg->d_model * sizeof(float));
    for (; e < n_evals(cfg); e++) r->val_loss[e] = NAN; /* never evaluated (the run stopped) */
done:
    parity_train_model_free(m);
    free(in); free(tg); free(vin); free(vtg); free(mom); free(vel);
    r->seconds = train_now() - t0;
}

/* ---- the matrix ------------------------------------------------------------------------------- */

typedef struct {
    const parity_train_config_t *cfg;
    run_t *runs;
    int n_runs, next;
    pthread_mutex_t mu;
    parity_train_progress_fn progress;
    void *ctx;
    const char **labels; /* (n_runs) "text/sgd candidate" */
    double t0;
} pool_t;

static void say(pool_t *pl, const char *line)
{
    if (pl->progress) pl->progress(pl->ctx, line);
}

static void tick(void *pool, const run_t *r, int step)
{
    pool_t *pl = pool;
    char line[256];
    snprintf(line, sizeof line, "%-30s %4d/%d steps  train %.4f  %.1f s", r->label, step,
             pl->cfg->steps, r->train_loss[step - 1], train_now() - pl->t0);
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
        pthread_mutex_unlock(&pl->mu);
        if (i < 0) return NULL;
        run_t *r = &pl->runs[i];
        r->tick = pl->progress ? tick : NULL;
        r->pool = pl;
        r->label = pl->labels[i];
        run_train(r);
        char line[512];
        int ne = n_evals(pl->cfg);
        snprintf(line, sizeof line, "%-30s %4d/%d done  train %.4f  val %.4f  %.1f s%s%s",
                 pl->labels[i], r->steps_done, pl->cfg->steps,
                 r->steps_done ? r->train_loss[r->steps_done - 1] : NAN,
                 pl->cfg->val_seqs > 0 ? r->val_loss[ne - 1] : NAN, r->seconds,
                 r->failed ? "  FAILED: " : "", r->failed ? r->reason : "");
        pthread_mutex_lock(&pl->mu);
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
        free(c->val_ref); free(c->val_cand); free(c->val_noise);
    }
    free(r->cells);
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
                  const float *e0, const run_t *ref, const run_t *noise, const run_t *cand)
{
    static const int edges[PARITY_TRAIN_DRIFT_BUCKETS + 1] = {0, 10, 100, 1000, 5000, 1 << 30};
    int D = cfg->d_model;
    double N = (double)cfg->batch_seqs * cfg->seq_len;
    for (int b = 0; b < PARITY_TRAIN_DRIFT_BUCKETS; b++) {
        parity_train_drift_t *dr = &cell->drift[b];
        dr->rank_lo = edges[b] < c->V ? edges[b] : c->V;
        dr->rank_hi = edges[b + 1] < c->V ? edges[b + 1] : c->V;
        double hs = 0.0, cs = 0.0, ns = 0.0;
        int nrow = 0;
        for (int r = dr->rank_lo; r < dr->rank_hi; r++) {
            hs += (double)c->count[r] / (double)c->n_train * N;
            const float *er = ref->final_wte + (size_t)r * D;
            double moved = row_dist(er, e0 + (size_t)r * D, D);
            if (!(moved > 0.0)) continue;
            cs += row_dist(cand->final_wte + (size_t)r * D, er, D) / moved;
            ns += row_dist(noise->final_wte + (size_t)r * D, er, D) / moved;
            nrow++;
        }
        int rows = dr->rank_hi - dr->rank_lo;
        dr->mean_hits_per_step = rows ? hs / rows : 0.0;
        dr->cand_drift = nrow ? cs / nrow : 0.0;
        dr->noise_drift = nrow ? ns / nrow : 0.0;
    }
}

/* Gaps, noise envelope, first departure and verdict of a finished cell. Evaluations the candidate
 * never reached (it crashed or diverged) are NaN and end the comparison. */
static void judge(parity_train_cell_t *cell, const run_t *ref, const run_t *noise, const run_t *cand)
{
    int ne = cell->n_eval, last = -1;
    cell->first_departure = -1;
    cell->steps_done = cand->steps_done;
    if (ref->failed || noise->failed) {
        cell->verdict = "diverged";
        /* "%.200s": the run's reason is longer than the cell's room; keep its start. */
        snprintf(cell->reason, sizeof cell->reason, "the reference failed: %.200s",
                 ref->failed ? ref->reason : noise->reason);
        return;
    }
    int over_prev = 0;
    for (int e = 0; e < ne; e++) {
        if (!isfinite(cell->val_cand[e])) break;
        last = e;
        double gap = cell->val_cand[e] - cell->val_ref[e];
        double nz = fabs(cell->val_noise[e] - cell->val_ref[e]);
        if (fabs(gap) > cell->max_gap) cell->max_gap = fabs(gap);
        if (nz > cell->noise_max) cell->noise_max = nz;
        /* The noise envelope at evaluation e is the largest seed-to-seed distance within two
         * evaluations either side: local (the early transient, where the two data orders differ
         * most, does not hide a late departure) but not one point (two reference curves that
         * happen to cross there do not make the envelope zero). A departure needs two
         * consecutive evaluations above it (or the last one). */
        double env = 0.0;
        for (int q = e - 2; q <= e + 2; q++)
            if (q >= 0 && q < ne && fabs(cell->val_noise[q] - cell->val_ref[q]) > env)
                env = fabs(cell->val_noise[q] - cell->val_ref[q]);
        int over = fabs(gap) > env;
        if (cell->first_departure < 0 && over && (over_prev || e == ne - 1))
            cell->first_departure = over_prev ? cell->eval_steps[e - 1] : cell->eval_steps[e];
        over_prev = over;
    }
    if (last >= 0) {
        cell->final_gap = cell->val_cand[last] - cell->val_ref[last];
        cell->noise_final = fabs(cell->val_noise[last] - cell->val_ref[last]);
    }
    if (cand->failed) {
        cell->verdict = cand->failed == 2 ? "diverged" : "crashed";
        if (cell->first_departure < 0) cell->first_departure = cand->steps_done;
        snprintf(cell->reason, sizeof cell->reason, "%s", cand->reason);
        return;
    }
    cell->verdict = cell->first_departure >= 0 ? "departs" : "within-noise";
}

parity_status_t parity_train_run(const parity_train_config_t *cfg,
                                 const parity_abi_kernel_t *candidate, const char *label,
                                 const parity_train_data_t *datas, int n_datas,
                                 const parity_train_opt_t *opts, int n_opts,
                                 parity_train_progress_fn progress, void *ctx,
                                 parity_train_report_t **out, parity_diag_t *diag)
{
    *out = NULL;
    if (!cfg || !candidate || !candidate->run || n_datas < 1 || n_datas > 3 || n_opts < 1 ||
        n_opts > 3 || cfg->steps < 1 || cfg->eval_every < 1 || cfg->val_seqs < 1 || cfg->jobs < 1 ||
        cfg->synth_tokens < 4 * (cfg->seq_len + 2) || cfg->synth_tokens > 100000000)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "train: need a kernel, 1-3 data kinds and optimizers, steps >= 1, "
                               "eval_every >= 1, val_seqs >= 1, jobs >= 1, synth_tokens >= 4 (seq_len + 2)");
    parity_train_report_t *rep = calloc(1, sizeof *rep);
    if (!rep) return PARITY_E_NOMEM;
    rep->cfg = *cfg;
    snprintf(rep->kernel_label, sizeof rep->kernel_label, "%s", label ? label : candidate->name);
    corpus_t corp[3];
    memset(corp, 0, sizeof corp);
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < n_datas && !st; i++) {
        st = corpus_build(&corp[i], datas[i], cfg, diag);
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
    int ncell = n_datas * n_opts, nrun = 3 * ncell, ne = n_evals(cfg);
    run_t *runs = st ? NULL : calloc((size_t)nrun, sizeof *runs);
    const char **labels = st ? NULL : calloc((size_t)nrun, sizeof *labels);
    char(*lbuf)[64] = st ? NULL : calloc((size_t)nrun, sizeof *lbuf);
    rep->cells = st ? NULL : calloc((size_t)ncell, sizeof *rep->cells);
    if (!st && (!runs || !labels || !lbuf || !rep->cells)) st = PARITY_E_NOMEM;
    rep->n_cells = rep->cells ? ncell : 0;
    static const char *const role_name[3] = {"reference", "reference seed+1", "candidate"};
    for (int ci = 0; !st && ci < ncell; ci++) {
        const corpus_t *c = &corp[ci / n_opts];
        parity_train_cell_t *cell = &rep->cells[ci];
        cell->data = datas[ci / n_opts];
        cell->opt = opts[ci % n_opts];
        cell->vocab = c->V;
        cell->n_eval = ne;
        cell->eval_steps = malloc((size_t)ne * sizeof(int));
        if (!cell->eval_steps) { st = PARITY_E_NOMEM; break; }
        for (int e = 0; e < ne; e++) cell->eval_steps[e] = eval_step(cfg, e);
        for (int role = 0; role < 3; role++) {
            /* interleave roles so that two workers finish a cell at about the same time */
            run_t *r = &runs[ci * 3 + role];
            r->cfg = cfg;
            r->corpus = c;
            r->opt = cell->opt;
            r->role = role;
            r->kernel = role == ROLE_CAND ? candidate : NULL;
            r->train_loss = calloc((size_t)cfg->steps, sizeof(double));
            r->val_loss = calloc((size_t)ne, sizeof(double));
            r->final_wte = calloc((size_t)c->V * cfg->d_model, sizeof(float));
            if (!r->train_loss || !r->val_loss || !r->final_wte) { st = PARITY_E_NOMEM; break; }
            snprintf(lbuf[ci * 3 + role], 64, "%s/%s %s", parity_train_data_name(cell->data),
                     parity_train_opt_name(cell->opt), role_name[role]);
            labels[ci * 3 + role] = lbuf[ci * 3 + role];
        }
    }
    if (st == PARITY_E_NOMEM) parity_diag_set(diag, st, "train: out of memory");
    if (!st) {
        pool_t pl = {cfg, runs, nrun, 0, PTHREAD_MUTEX_INITIALIZER, progress, ctx, labels, train_now()};
        int nth = cfg->jobs < nrun ? cfg->jobs : nrun;
        pthread_t th[64];
        if (nth > 64) nth = 64;
        int started = 0;
        for (int i = 1; i < nth; i++)
            if (pthread_create(&th[i], NULL, worker, &pl) == 0) started = i;
            else break;
        worker(&pl);
        for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    }
    for (int ci = 0; !st && ci < ncell; ci++) {
        parity_train_cell_t *cell = &rep->cells[ci];
        run_t *ref = &runs[ci * 3], *noise = &runs[ci * 3 + 1], *cand = &runs[ci * 3 + 2];
        const corpus_t *c = &corp[ci / n_opts];
        cell->train_ref = ref->train_loss; cell->train_noise = noise->train_loss;
        cell->train_cand = cand->train_loss;
        cell->val_ref = ref->val_loss; cell->val_noise = noise->val_loss;
        cell->val_cand = cand->val_loss;
        ref->train_loss = noise->train_loss = cand->train_loss = NULL;
        ref->val_loss = noise->val_loss = cand->val_loss = NULL;
        cell->max_hits = ref->max_hits > cand->max_hits ? ref->max_hits : cand->max_hits;
        cell->seconds = ref->seconds + noise->seconds + cand->seconds;
        cell->stats_ref = ref->stats;
        cell->stats_cand = cand->stats;
        cell->seconds_ref = ref->seconds;
        cell->seconds_cand = cand->seconds;
        judge(cell, ref, noise, cand);
        parity_train_model_t *m0 = NULL;
        if (!ref->failed && !noise->failed && !cand->failed &&
            parity_train_model_new(cfg, c->V, cfg->seed, &m0, NULL) == PARITY_OK)
            drift(cell, c, cfg, parity_train_model_params(m0), ref, noise, cand);
        parity_train_model_free(m0);
    }
    for (int i = 0; runs && i < nrun; i++) {
        free(runs[i].train_loss); free(runs[i].val_loss); free(runs[i].final_wte);
    }
    free(runs); free(labels); free(lbuf);
    for (int i = 0; i < 3; i++) corpus_free(&corp[i]);
    if (st) {
        parity_train_report_free(rep);
        return st;
    }
    *out = rep;
    return PARITY_OK;
}

/* The power sweep (include/parity/power.h): mutant outputs of known weakness built from each
 * case's reference and the op's emulation, judged by parity (its tolerance, on the op's presets)
 * and by every baseline rule (on the rule's own input scheme). Deliberately not here: how the
 * figures are printed (programs/cmd_power.c) and what the rules are (src/verify/baseline.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/kernel.h"
#include "parity/power.h"
#include "parity/rng.h"
#include "src/core/internal.h"
#include "src/verify/verify_internal.h"

/* Mutants, in a fixed order: accumulators (sequential 8..23, pairwise 8..23), the m = 24
 * control, dropped updates at 1e-2..1e-6, the dropped tail, inputs in tf32 and bf16, the
 * faithful kernel itself. */
#define N_BITS (PARITY_POWER_MAX_BITS - PARITY_POWER_MIN_BITS + 1)
enum {
    M_SEQ = 0,
    M_PAIR = M_SEQ + N_BITS,
    M_FP32 = M_PAIR + N_BITS,
    M_DROP = M_FP32 + 1,
    M_TAIL = M_DROP + PARITY_POWER_N_RATES,
    M_TF32 = M_TAIL + 1,
    M_BF16 = M_TF32 + 1,
    M_FAITHFUL = M_BF16 + 1,
    N_MUTANTS = M_FAITHFUL + 1
};

void parity_power_opts_default(parity_power_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->row_budget = 16777216.0; /* 2^24 terms: ~0.2 s of emulation per output and mutant */
    o->n_threads = 1;
}

const char *parity_power_judge_name(int j)
{
    return j == 0 ? "parity" : parity_baseline_name(j - 1);
}

static void say(const parity_power_opts_t *o, const char *msg)
{
    if (o->progress) o->progress(o->progress_ctx, msg);
}

/* One case with its sampled rows per output and mutant output buffers (fp32). */
typedef struct {
    parity_case_t *c;
    int64_t *rows[PARITY_OP_MAX_ARGS];
    int64_t n_rows[PARITY_OP_MAX_ARGS];
    parity_tensor_t *out[PARITY_OP_MAX_ARGS];
} mcase_t;

static void mcase_free(mcase_t *m)
{
    for (int i = 0; i < PARITY_OP_MAX_ARGS; i++) {
        free(m->rows[i]);
        parity_tensor_free(m->out[i]);
    }
    parity_case_free(m->c);
    memset(m, 0, sizeof *m);
}

static int cmp_desc(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (k, row) pairs */
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Rows of output o to emulate: all of them when rows x cols x K fits the budget, else the most
 * hit half of the allowance (where a narrow accumulator shows most) and an even spread of the
 * rest. Unsampled rows keep the reference rounded to fp32 (the best fp32 answer: an
 * undercount of what the mutant does, never an invention). */
static int sample_rows(mcase_t *m, int o, double budget)
{
    const parity_ref_output_t *R = &m->c->ref[o];
    int64_t nz = 0, K = 1;
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t s = R->slot ? R->slot[r] : r;
        if (s < 0) continue;
        nz++;
        if (R->k && R->k[s] > K) K = R->k[s];
    }
    int64_t want = (int64_t)(budget / ((double)R->cols * (double)K));
    if (want < 4) want = 4;
    int64_t *pairs = malloc((size_t)(nz ? nz : 1) * 2 * sizeof *pairs);
    int64_t n = nz < want ? nz : want;
    m->rows[o] = malloc((size_t)(n ? n : 1) * sizeof *m->rows[o]);
    if (!pairs || !m->rows[o]) {
        free(pairs);
        return -1;
    }
    int64_t q = 0;
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t s = R->slot ? R->slot[r] : r;
        if (s < 0) continue;
        pairs[2 * q] = R->k ? R->k[s] : 1;
        pairs[2 * q + 1] = r;
        q++;
    }
    if (n < nz) {
        qsort(pairs, (size_t)nz, 2 * sizeof *pairs, cmp_desc);
        int64_t top = n / 2, rest = n - top;
        for (int64_t i = 0; i < top; i++) m->rows[o][i] = pairs[2 * i + 1];
        for (int64_t i = 0; i < rest; i++)
            m->rows[o][top + i] = pairs[2 * (top + (i * (nz - top)) / rest) + 1];
    } else {
        for (int64_t i = 0; i < n; i++) m->rows[o][i] = pairs[2 * i + 1];
    }
    m->n_rows[o] = n;
    free(pairs);
    return 0;
}

static parity_status_t mcase_build(mcase_t *m, const parity_op_t *op, const parity_workload_t *wl,
                                   uint64_t seed, double budget, parity_diag_t *diag)
{
    memset(m, 0, sizeof *m);
    parity_status_t st = parity_case_build(op, wl, seed, PARITY_DT_F32, &m->c, diag);
    if (st != PARITY_OK) return st;
    for (int o = 0; o < m->c->n_outputs; o++) {
        m->out[o] = parity_tensor_new(op->output_names[o], PARITY_DT_F32, m->c->out_ndim[o], m->c->out_shape[o]);
        if (!m->out[o] || sample_rows(m, o, budget) != 0) {
            mcase_free(m);
            return PARITY_E_NOMEM;
        }
    }
    return PARITY_OK;
}

static double mean_term(const parity_ref_output_t *R, int64_t slot, int64_t j)
{
    int64_t k = R->k ? R->k[slot] : 1;
    double s = R->s_acc ? R->s_acc[slot * R->cols + j] : fabs(R->ref[slot * R->cols + j]);
    return k > 0 ? s / (double)k : 0;
}

/* Poisson(lambda) by inversion (lambda <= ~30 here: k p with p <= 1e-2 and k <= a few 1000;
 * beyond, the normal approximation). */
static int64_t poisson(parity_rng_t *rng, double lambda)
{
    if (lambda > 30) {
        double x = lambda + sqrt(lambda) * parity_rng_normal(rng);
        return x < 0 ? 0 : (int64_t)llround(x);
    }
    double u = parity_rng_uniform(rng), p = exp(-lambda), cdf = p;
    int64_t n = 0;
    while (u > cdf && n < 1000) {
        n++;
        p *= lambda / (double)n;
        cdf += p;
    }
    return n;
}

/* Build mutant x into m->out. 0, or -1 when the op cannot express it (no emulation, no kernel). */
static int make_mutant(mcase_t *m, int x, const parity_abi_kernel_t *fk, const parity_power_opts_t *opts)
{
    parity_case_t *c = m->c;
    for (int o = 0; o < c->n_outputs; o++) parity_fill_reference(m->out[o], &c->ref[o]);
    if (x < M_DROP) { /* accumulators */
        if (!c->op->emulate) return -1;
        parity_format_t f;
        int bits = x == M_FP32 ? 24 : PARITY_POWER_MIN_BITS + (x < M_PAIR ? x - M_SEQ : x - M_PAIR);
        if (bits == 24) parity_format_get("fp32", &f, NULL);
        else parity_format_custom(bits - 1, 8, &f);
        parity_sum_order_t order = x >= M_PAIR && x < M_FP32 ? PARITY_SUM_PAIRWISE : PARITY_SUM_SEQUENTIAL;
        int any = 0;
        for (int o = 0; o < c->n_outputs; o++) {
            const parity_ref_output_t *R = &c->ref[o];
            int64_t n = m->n_rows[o];
            double *v = malloc((size_t)(n ? n : 1) * (size_t)R->cols * sizeof *v);
            if (!v) return -1;
            if (n && c->op->emulate(c, o, &f, order, m->rows[o], n, v) == PARITY_OK) {
                float *y = m->out[o]->view.data;
                for (int64_t q = 0; q < n; q++)
                    for (int64_t j = 0; j < R->cols; j++)
                        y[m->rows[o][q] * R->cols + j] = (float)v[q * R->cols + j];
                any = 1;
            }
            free(v);
        }
        return any ? 0 : -1;
    }
    if (x < M_TF32) { /* dropped updates, dropped tail: every element */
        double p = x == M_TAIL ? 0 : pow(10, -2 - (x - M_DROP));
        parity_rng_t rng;
        parity_rng_seed(&rng, c->seed, 0x90e7 + (uint64_t)x);
        for (int o = 0; o < c->n_outputs; o++) {
            const parity_ref_output_t *R = &c->ref[o];
            float *y = m->out[o]->view.data;
            for (int64_t r = 0; r < R->rows; r++) {
                int64_t s = R->slot ? R->slot[r] : r;
                if (s < 0) continue;
                int64_t k = R->k ? R->k[s] : 1;
                for (int64_t j = 0; j < R->cols; j++) {
                    int64_t d = x == M_TAIL ? (k > 0) : poisson(&rng, (double)k * p);
                    if (!d) continue;
                    double a = mean_term(R, s, j), e = 0;
                    for (int64_t t = 0; t < d && t < k; t++) e += (parity_rng_u64(&rng) & 1) ? a : -a;
                    y[r * R->cols + j] = (float)(R->ref[s * R->cols + j] + e);
                }
            }
        }
        return 0;
    }
    /* The faithful kernel, on inputs rounded to tf32 / bf16 or as they are. */
    if (!fk) return -1;
    parity_tensor_t *copy[PARITY_OP_MAX_ARGS] = {0};
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    parity_case_make_call(c, in, out, m->out, opts->n_threads, c->seed, &call);
    int rc = 0;
    if (x != M_FAITHFUL) {
        parity_format_t f;
        parity_format_get(x == M_TF32 ? "tf32" : "bf16", &f, NULL);
        for (int i = 0; i < c->n_inputs && rc == 0; i++) {
            if (!c->op->input_is_float[i] || c->inputs[i]->view.dtype != PARITY_DT_F32) continue;
            const parity_tensor_t *src = c->inputs[i];
            copy[i] = parity_tensor_new(src->name, PARITY_DT_F32, src->view.ndim, src->view.shape);
            if (!copy[i]) {
                rc = -1;
                break;
            }
            const float *a = src->view.data;
            float *b = copy[i]->view.data;
            int64_t ne = parity_tensor_numel(&src->view);
            for (int64_t e = 0; e < ne; e++) b[e] = (float)parity_format_round(&f, a[e], NULL, NULL);
            in[i].data = copy[i]->view.data;
        }
    }
    if (rc == 0 && fk->run(&call) != PARITY_KERNEL_OK) rc = -1;
    for (int i = 0; i < PARITY_OP_MAX_ARGS; i++) parity_tensor_free(copy[i]);
    return rc;
}

/* Does judge j catch what m->out holds? */
static int judge(int j, mcase_t *m)
{
    if (j == 0) {
        parity_wl_result_t res;
        memset(&res, 0, sizeof res);
        for (int o = 0; o < m->c->n_outputs; o++)
            parity_judge_output(&m->c->ref[o], &m->out[o]->view, PARITY_DT_F32, o, &res, NULL);
        return res.max_q > 1;
    }
    parity_baseline_result_t br;
    if (parity_baseline_judge(j - 1, m->c, m->out, &br) != PARITY_OK) return 0;
    return br.caught;
}

/* The faithful fp32-in, fp32-out catalog kernel of op (the first listed), or NULL. */
static const parity_abi_kernel_t *faithful_kernel(const parity_op_t *op)
{
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op->name) == 0 && k->expected && strcmp(k->expected, "faithful") == 0 &&
            k->in_dtype == PARITY_DT_F32 && k->out_dtype == PARITY_DT_F32)
            return k;
    }
    return NULL;
}

/* caught[x]: 1 / 0, or -1 where mutant x does not exist for the op. */
static void summarise(const int *caught, parity_power_cell_t *cell)
{
    memset(cell, 0, sizeof *cell);
    for (int b = 0; b <= PARITY_POWER_MAX_BITS; b++) cell->caught_seq[b] = cell->caught_pair[b] = -1;
    int have_acc = caught[M_SEQ] >= 0;
    cell->acc_seq_bits = cell->acc_pair_bits = have_acc ? PARITY_POWER_MIN_BITS - 1 : -1;
    for (int i = 0; i < N_BITS && have_acc; i++) {
        int bits = PARITY_POWER_MIN_BITS + i;
        cell->caught_seq[bits] = caught[M_SEQ + i];
        cell->caught_pair[bits] = caught[M_PAIR + i];
    }
    for (int i = 0; i < N_BITS && have_acc && caught[M_SEQ + i] == 1; i++) cell->acc_seq_bits = PARITY_POWER_MIN_BITS + i;
    for (int i = 0; i < N_BITS && have_acc && caught[M_PAIR + i] == 1; i++) cell->acc_pair_bits = PARITY_POWER_MIN_BITS + i;
    cell->drop_rate = 0;
    for (int i = 0; i < PARITY_POWER_N_RATES; i++) cell->caught_drop[i] = caught[M_DROP + i];
    for (int i = 0; i < PARITY_POWER_N_RATES && caught[M_DROP + i] == 1; i++) cell->drop_rate = pow(10, -2 - i);
    cell->tail = caught[M_TAIL];
    cell->inputs_tf32 = caught[M_TF32];
    cell->inputs_bf16 = caught[M_BF16];
    cell->alarm_fp32_acc = caught[M_FP32];
    cell->alarm_faithful = caught[M_FAITHFUL];
}

/* OR mutant verdicts of judge j on case m into caught[]. */
static void sweep_case(mcase_t *m, int j0, int j1, int caught[][N_MUTANTS], const parity_abi_kernel_t *fk,
                       const parity_power_opts_t *opts)
{
    /* Within the accumulator and dropped-update families, mutants go from strongest to
     * weakest; the first one this case's judge misses ends the family here (the figures are
     * the weakest mutant caught with every stronger one: what follows a miss cannot raise
     * them, except through another case, which runs its own). Saves most of the sweep. */
    int missed = 0;
    for (int x = 0; x < N_MUTANTS; x++) {
        if (x == M_SEQ || x == M_PAIR || x == M_FP32 || x == M_DROP || x >= M_TAIL) missed = 0;
        if (missed) continue;
        if (make_mutant(m, x, fk, opts) != 0) {
            for (int j = j0; j < j1; j++)
                if (caught[j][x] < 0) caught[j][x] = -1;
            continue;
        }
        int all = 1;
        for (int j = j0; j < j1; j++) {
            int k = judge(j, m);
            all &= k;
            if (caught[j][x] < 1) caught[j][x] = k;
        }
        if (!all && x < M_TAIL && x != M_FP32) missed = 1;
    }
}

parity_status_t parity_power_run(const parity_op_t *op, const parity_power_opts_t *opts,
                                 parity_power_result_t *r, parity_diag_t *diag)
{
    memset(r, 0, sizeof *r);
    r->op = op;
    r->n_sets = opts->quick || opts->workload ? 1 : 2;
    snprintf(r->set_name[0], sizeof r->set_name[0], "%s", opts->workload ? opts->workload : "quick");
    snprintf(r->set_name[1], sizeof r->set_name[1], "production");
    parity_workload_t probe;
    if (opts->workload && parity_op_workload(op, opts->workload, &probe) != PARITY_OK)
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "op %s has no workload '%s'", op->name, opts->workload);
    const parity_abi_kernel_t *fk = faithful_kernel(op);
    r->kernel = fk ? fk->name : NULL;
    char msg[256];
    /* The baselines, once: their input schemes do not depend on the shape set. */
    int base[PARITY_POWER_N_JUDGES][N_MUTANTS];
    for (int j = 0; j < PARITY_POWER_N_JUDGES; j++)
        for (int x = 0; x < N_MUTANTS; x++) base[j][x] = -2; /* not yet judged */
    double t0 = parity_now();
    for (int b = 0; b < PARITY_N_BASELINES && op->baseline_workloads; b++) {
        const parity_workload_t *bw;
        uint64_t bseed;
        if (parity_baseline_workload(op, b, &bw, &bseed) != PARITY_OK) continue;
        mcase_t m;
        parity_status_t st = mcase_build(&m, op, bw, bseed, opts->row_budget * 4, diag);
        if (st != PARITY_OK) return st;
        snprintf(msg, sizeof msg, "%s: baseline %s on its inputs (N=%lld D=%lld V=%lld)", op->name,
                 parity_baseline_name(b), (long long)bw->n, (long long)bw->d, (long long)bw->v);
        say(opts, msg);
        sweep_case(&m, 1 + b, 2 + b, base, fk, opts);
        mcase_free(&m);
    }
    double t_base = parity_now() - t0;
    for (int s = 0; s < r->n_sets; s++) {
        double t1 = parity_now();
        int par[PARITY_POWER_N_JUDGES][N_MUTANTS];
        for (int x = 0; x < N_MUTANTS; x++) par[0][x] = -2;
        parity_workload_t one;
        if (opts->workload) {
            if (parity_op_workload(op, opts->workload, &one) != PARITY_OK)
                return parity_diag_set(diag, PARITY_E_NOTFOUND, "op %s has no workload '%s'", op->name, opts->workload);
            if (one.label[0]) one.name = one.label;
        }
        int n_wl = opts->workload ? 1 : op->n_presets;
        for (int w = 0; w < n_wl; w++) {
            const parity_workload_t *wl = opts->workload ? &one : &op->presets[w];
            if (!opts->workload && wl->production != s) continue;
            mcase_t m;
            parity_status_t st = mcase_build(&m, op, wl, opts->seed, opts->row_budget, diag);
            if (st != PARITY_OK) return st;
            for (int o = 0; o < m.c->n_outputs; o++) {
                r->rows_judged[s] += m.n_rows[o];
                r->rows_total[s] += m.c->ref[o].rows;
            }
            snprintf(msg, sizeof msg, "%s: %s (N=%lld D=%lld V=%lld)", op->name, wl->name,
                     (long long)wl->n, (long long)wl->d, (long long)wl->v);
            say(opts, msg);
            sweep_case(&m, 0, 1, par, fk, opts);
            r->n_workloads[s]++;
            mcase_free(&m);
        }
        int row[N_MUTANTS];
        for (int x = 0; x < N_MUTANTS; x++) row[x] = par[0][x] == -2 ? -1 : par[0][x];
        summarise(row, &r->cell[s][0]);
        for (int j = 1; j < PARITY_POWER_N_JUDGES; j++) {
            for (int x = 0; x < N_MUTANTS; x++) row[x] = base[j][x] == -2 ? -1 : base[j][x];
            summarise(row, &r->cell[s][j]);
        }
        r->seconds[s] = parity_now() - t1 + (s == 0 ? t_base : 0);
    }
    return PARITY_OK;
}

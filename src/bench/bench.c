/* `parity bench`'s engine: check first, then time every kernel that ran on one workload in a
 * child process (inputs regenerated and caches scrubbed between runs), and score the faithful
 * ones against the speed of light and a baseline kernel (SOL-ExecBench's S).
 * Deliberately not here: cost models (bench_cost.c), ceilings (bench_ceil.c), printing. */
#include "parity/bench.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/bench/bench_impl.h"
#include "src/core/internal.h"
#include "src/core/parallel.h"
#include "src/verify/verify_internal.h"
#include "parity/tensor.h"

static void progress(const parity_bench_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const parity_bench_opts_t *o, const char *fmt, ...)
{
    if (!o->progress) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->progress(o->progress_ctx, msg);
}

void parity_time_opts_default(parity_time_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = 2;
    o->runs = 10;
    o->timeout_s = 300;
}

void parity_bench_opts_default(parity_bench_opts_t *o)
{
    memset(o, 0, sizeof *o);
    parity_check_opts_default(&o->check);
    o->check.quick = 1;
    o->check.noise_floor = 0;
    parity_time_opts_default(&o->time);
    parity_ceiling_opts_default(&o->ceil);
    o->seed = 1;
}

/* ---- timing in a child ---------------------------------------------------------------------- */

static int is_float_dtype(int32_t dt)
{
    return dt == PARITY_DT_F32 || dt == PARITY_DT_BF16 || dt == PARITY_DT_F16 || dt == PARITY_DT_F64;
}

/* The digest of the first floating-point input's bytes (0 when there is none). */
static uint64_t first_float_digest(const parity_abi_call_t *call)
{
    for (int i = 0; i < call->n_inputs; i++) {
        const parity_abi_tensor_t *t = &call->inputs[i];
        if (!is_float_dtype(t->dtype)) continue;
        return parity_digest64(t->data, (size_t)parity_tensor_numel(t) *
                                            parity_dtype_size((parity_dtype_t)t->dtype));
    }
    return 0;
}

/* All of a case's inputs, one digest. */
static uint64_t case_inputs_digest(const parity_case_t *c)
{
    uint64_t h = 0;
    for (int i = 0; i < c->n_inputs; i++) h = h * 0x9E3779B97F4A7C15ULL + parity_tensor_hash(c->inputs[i]);
    return h;
}

static void scrub(unsigned char *buf, int64_t n, int r)
{
    if (!buf) return;
    memset(buf, r & 0xff, (size_t)n);
    /* and read it back, so the lines are resident rather than in flight */
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < n; i += 4096) sink ^= buf[i];
    (void)sink;
}

static int64_t default_scrub(void)
{
    int64_t llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) llc = l3;
#endif
    int64_t b = 2 * llc;
    if (b < ((int64_t)64 << 20)) b = (int64_t)64 << 20;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0 && b > (int64_t)pages * psz / 8) b = (int64_t)pages * psz / 8;
    return b;
}

/* The timed runs, in the isolated child (a step of parity_run_isolated_step): warm-up + runs
 * calls, each on inputs with the first float element flipped in sign (a kernel cannot reuse the
 * last call's result), NaN-prefilled outputs and a scrubbed cache, times and the first
 * mismatches into the shared mapping, the done flag last. */
typedef struct {
    const parity_time_opts_t *o;
    const bench_expect_t *e;
    double *shm;
    bench_mismatch_t *sm;
    int runs, warm;
    int64_t sb;
} bench_step_t;

static int bench_step(void *vctx, const parity_abi_kernel_t *k, const parity_abi_call_t *call)
{
    const bench_step_t *x = vctx;
    const bench_expect_t *e = x->e;
    unsigned char *buf = x->sb > 0 ? malloc((size_t)x->sb) : NULL;
    for (int r = 0; r < x->warm + x->runs; r++) {
        bench_flip_first_float(call);
        /* NaN before every call, so that one which writes nothing returns NaN, not the last
         * call's outputs; before the scrub, so the outputs start in DRAM as they did. */
        if (e)
            for (int i = 0; i < e->c->n_outputs; i++) parity_tensor_fill_nan(e->outs[i]);
        scrub(buf, x->sb > 0 ? x->sb : 0, r);
        double a = parity_now();
        int rc = k->run(call);
        double b = parity_now();
        if (rc != PARITY_KERNEL_OK) return rc == PARITY_KERNEL_UNSUPPORTED ? 64 : 65;
        if (r >= x->warm) x->shm[r - x->warm] = b - a;
        bench_mismatch_t mm; /* outside the timed region */
        if (e && x->sm[1].run < 0 && bench_expect_check(e, r, &mm)) {
            if (x->sm[0].run < 0) x->sm[0] = mm;
            if (mm.judged) x->sm[1] = mm;
        }
    }
    if ((x->warm + x->runs) % 2) bench_flip_first_float(call); /* the case's inputs again */
    x->shm[x->runs] = 1.0; /* done */
    return PARITY_CHILD_STEP_DONE;
}

parity_verdict_t parity_bench_time_kernel(const parity_abi_kernel_t *k, const parity_abi_call_t *call,
                                          const parity_time_opts_t *o, double *times,
                                          char *detail, size_t detail_len)
{
    bench_mismatch_t m[2];
    return bench_time_kernel_judged(k, call, o, NULL, times, m, detail, detail_len);
}

parity_verdict_t bench_time_kernel_judged(const parity_abi_kernel_t *k, const parity_abi_call_t *call,
                                          const parity_time_opts_t *o, const bench_expect_t *e,
                                          double *times, bench_mismatch_t m[2], char *detail,
                                          size_t detail_len)
{
    m[0].run = m[1].run = -1;
    parity_time_opts_t def;
    if (!o) {
        parity_time_opts_default(&def);
        o = &def;
    }
    int runs = o->runs > 0 ? o->runs : 1, warm = o->warmup > 0 ? o->warmup : 0;
    int64_t sb = o->scrub_bytes == 0 ? default_scrub() : o->scrub_bytes;
    /* times, a done flag, then the first mismatch (bench_judge.c) */
    size_t shm_len = sizeof(double) * (size_t)(runs + 1) + 2 * sizeof(bench_mismatch_t);
    double *shm = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        snprintf(detail, detail_len, "cannot map shared memory for the times");
        return PARITY_VERDICT_CRASHED;
    }
    memset(shm, 0, shm_len);
    bench_mismatch_t *sm = (bench_mismatch_t *)(shm + runs + 1);
    sm[0].run = sm[1].run = -1;
    /* The inputs are the case's shared memory: the child's flips reach this process. The child
     * flips them back at the end (an even count); a child that ended early can leave one flip,
     * undone here; anything else is a kernel that changed its inputs. Before, an odd warm-up +
     * runs (--runs 5) left them flipped, and every kernel timed after was judged on inputs
     * that were not the reference's: "unfaithful", err/tol 1e5. */
    uint64_t in_digest = first_float_digest(call);
    /* The timed runs are one step of the check engine's isolated run (isolate.c: the fork, the
     * parent-side deadline and kill, the exit-status verdicts), the whole of the child's work. */
    bench_step_t ctx = {o, e, shm, sm, runs, warm, sb};
    double secs = 0;
    parity_verdict_t v = parity_run_isolated_step(k, NULL, bench_step, &ctx, call, o->timeout_s, detail, detail_len,
                                                  &secs);
    int inputs_changed = 0;
    if (first_float_digest(call) != in_digest) {
        bench_flip_first_float(call);
        inputs_changed = first_float_digest(call) != in_digest;
        if (inputs_changed) bench_flip_first_float(call); /* not a leftover flip: as the kernel left it */
    }
    if (v == PARITY_VERDICT_TIMEOUT) {
        snprintf(detail, detail_len, "timing not done after %.0f s (killed)", o->timeout_s);
    } else if (inputs_changed) {
        snprintf(detail, detail_len, "the kernel changed its inputs during the timed runs");
        v = PARITY_VERDICT_MODIFIED_INPUTS;
    } else if (v == PARITY_VERDICT_FAITHFUL && shm[runs] != 1.0) {
        snprintf(detail, detail_len, "kernel failed while timing (the timed runs did not finish)");
        v = PARITY_VERDICT_CRASHED;
    } else if (v == PARITY_VERDICT_FAITHFUL) { /* "ran": the times, and the first mismatches */
        memcpy(times, shm, sizeof(double) * (size_t)runs);
        m[0] = sm[0];
        m[1] = sm[1];
    }
    munmap(shm, shm_len);
    return v;
}

/* ---- the bench ------------------------------------------------------------------------------ */

/* Merge a second check's verdicts into the rows (a kernel is faithful only if both say so). */
static void take_verdicts(parity_bench_row_t *rows, int n, const parity_kernel_result_t *kr,
                          const char *timed)
{
    for (int i = 0; i < n; i++) {
        if (rows[i].verdict != PARITY_VERDICT_FAITHFUL) continue;
        rows[i].verdict = kr[i].verdict;
        if (kr[i].verdict == PARITY_VERDICT_FAITHFUL || kr[i].n_wl < 1) continue;
        /* Name the timed workload when it failed there too ("unfaithful on text"), else the one
         * that decided the verdict. */
        const parity_wl_result_t *w = &kr[i].wl[kr[i].worst_wl];
        for (int j = 0; j < kr[i].n_wl; j++)
            if (strcmp(kr[i].wl[j].workload, timed) == 0 &&
                kr[i].wl[j].verdict != PARITY_VERDICT_FAITHFUL)
                w = &kr[i].wl[j];
        snprintf(rows[i].verdict_wl, sizeof rows[i].verdict_wl, "%s", w->workload);
        snprintf(rows[i].check_detail, sizeof rows[i].check_detail, "%s", w->detail);
    }
}

static const parity_abi_kernel_t *default_baseline(const parity_op_t *op)
{
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op->name) == 0 && k->expected && strcmp(k->expected, "faithful") == 0)
            return k;
    }
    return NULL;
}

parity_status_t parity_bench_run(const parity_op_t *op, const parity_kernel_list_t *kernels,
                                 const parity_bench_opts_t *o, parity_bench_result_t *res,
                                 parity_diag_t *diag)
{
    memset(res, 0, sizeof *res);
    res->baseline_row = -1;
    if (!op || !kernels || !o) return parity_diag_set(diag, PARITY_E_INVALID, "bench: NULL argument");
    res->op = op;
    res->seed = o->seed;
    parity_cost_t probe;
    if (parity_bench_cost_shape(op->name, 1, 1, 1, PARITY_DT_F32, PARITY_DT_F32, &probe) != PARITY_OK)
        return parity_diag_set(diag, PARITY_E_NOTFOUND,
                               "op %s has no cost model (docs/bench.md lists the ops bench covers)",
                               op->name);
    /* The timed workload. */
    const char *wname = o->workload;
    if (!wname) wname = parity_op_find_preset(op, "text") ? "text" : op->presets[0].name;
    parity_status_t st = parity_op_workload(op, wname, &res->wl);
    if (st != PARITY_OK)
        return parity_diag_set(diag, st, "op %s has no workload '%s' (list them: parity ops %s)",
                               op->name, wname, op->name);

    /* The rows: the kernels asked for, then the baseline if it is not among them. */
    const char *bspec = o->baseline;
    char bbuf[300];
    if (!bspec) {
        const parity_abi_kernel_t *bk = default_baseline(op);
        if (bk) {
            snprintf(bbuf, sizeof bbuf, "builtin:%s", bk->name);
            bspec = bbuf;
        }
    }
    int n = kernels->n, brow = -1;
    if (bspec) {
        for (int i = 0; i < n; i++)
            if (strcmp(kernels->items[i].label, bspec) == 0) brow = i;
        if (brow < 0) {
            st = parity_kernel_resolve(bspec, op->name, &res->extra, diag);
            if (st != PARITY_OK) return st;
            brow = n;
        }
    }
    int total = n + (brow == n ? 1 : 0);
    res->refs = calloc((size_t)total, sizeof *res->refs);
    res->rows = calloc((size_t)total, sizeof *res->rows);
    if (!res->refs || !res->rows) return PARITY_E_NOMEM;
    for (int i = 0; i < n; i++) res->refs[i] = kernels->items[i];
    if (brow == n) res->refs[n] = res->extra.items[0];
    res->n_rows = total;
    for (int i = 0; i < total; i++) {
        res->rows[i].kr = &res->refs[i];
        res->rows[i].is_baseline = i == brow;
        res->rows[i].added_baseline = i == brow && brow == n;
        res->rows[i].verdict = PARITY_VERDICT_FAITHFUL;
        res->rows[i].timed_outputs = -1;
        res->rows[i].score = NAN;
        res->rows[i].gbs = res->rows[i].gflops = res->rows[i].frac_sol = NAN;
        res->rows[i].t_median = res->rows[i].t_best = res->rows[i].t_worst = NAN;
    }
    int n_threads = o->time.n_threads > 0 ? o->time.n_threads : parity_num_threads();
    res->n_threads = n_threads;
    res->n = res->wl.n;
    res->d = res->wl.d;
    res->v = res->wl.v;
    res->runs = o->time.runs > 0 ? o->time.runs : 1;
    res->warmup = o->time.warmup;

    /* 1. The ceilings, with the threads the kernels get. */
    parity_ceiling_opts_t co = o->ceil;
    co.n_threads = n_threads;
    progress(o, "bench: machine ceilings%s", co.remeasure ? " (remeasuring)" : "");
    st = parity_bench_ceilings(&co, &res->ceil, diag);
    if (st != PARITY_OK) return st;

    /* 2. The gate: check every row (the suite, and the timed workload if the suite lacks it). */
    parity_kernel_list_t all = {res->refs, total, NULL, 0};
    parity_check_opts_t chk = o->check;
    chk.seed = o->seed;
    chk.n_threads = n_threads;
    chk.progress = o->progress;
    chk.progress_ctx = o->progress_ctx;
    int suite_has_timed = 0;
    if (chk.workload) {
        suite_has_timed = strcmp(chk.workload, wname) == 0;
        snprintf(res->check_workloads, sizeof res->check_workloads, "%s", chk.workload);
    } else {
        for (int i = 0; i < op->n_presets; i++)
            if (!(chk.quick && op->presets[i].production) && strcmp(op->presets[i].name, wname) == 0)
                suite_has_timed = 1;
        snprintf(res->check_workloads, sizeof res->check_workloads, "%s",
                 chk.quick ? "every non-production workload (--quick)" : "every workload");
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (suite_has_timed) break;
            chk.workload = wname;
            size_t l = strlen(res->check_workloads);
            snprintf(res->check_workloads + l, sizeof res->check_workloads - l, " + %s", wname);
        }
        progress(o, "bench: check %s on %s", op->name, chk.workload ? chk.workload : res->check_workloads);
        parity_kernel_result_t *kr = NULL;
        st = parity_check_run(op, &all, &chk, &kr, diag);
        if (st != PARITY_OK) return st;
        take_verdicts(res->rows, total, kr, wname);
        parity_check_results_free(kr, total);
    }

    /* 3. Time every kernel that ran to completion in the check, on the timed workload. Kernels
     * of the same input dtype share a case; a kernel that leaves its inputs changed (the check's
     * modified-inputs kernels are timed too) would hand the next kernel inputs that are not its
     * reference's, so the case's input digests are compared after each kernel, and a changed case
     * is dropped and built again for the next one. */
    parity_case_t *cases[4] = {0};
    parity_dtype_t case_dt[4];
    uint64_t case_in[4] = {0};
    int n_cases = 0;
    double *times = malloc(sizeof(double) * (size_t)res->runs);
    if (!times) return PARITY_E_NOMEM;
    int have_cost = 0;
    for (int i = 0; i < total && st == PARITY_OK; i++) {
        parity_bench_row_t *row = &res->rows[i];
        const parity_abi_kernel_t *k = row->kr->k;
        if (row->verdict == PARITY_VERDICT_CRASHED || row->verdict == PARITY_VERDICT_TIMEOUT ||
            row->verdict == PARITY_VERDICT_UNSUPPORTED) {
            snprintf(row->time_detail, sizeof row->time_detail, "not timed: %s in the check",
                     parity_verdict_name(row->verdict));
            continue;
        }
        parity_case_t *c = NULL;
        for (int j = 0; j < n_cases; j++)
            if (case_dt[j] == (parity_dtype_t)k->in_dtype) c = cases[j];
        if (!c) {
            if (n_cases == 4) {
                parity_case_free(cases[0]);
                memmove(cases, cases + 1, 3 * sizeof *cases);
                memmove(case_dt, case_dt + 1, 3 * sizeof *case_dt);
                n_cases = 3;
            }
            st = parity_case_build(op, &res->wl, o->seed, (parity_dtype_t)k->in_dtype, &c, diag);
            if (st != PARITY_OK) break;
            cases[n_cases] = c;
            case_in[n_cases] = case_inputs_digest(c);
            case_dt[n_cases++] = (parity_dtype_t)k->in_dtype;
        }
        parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
        int ok = 1;
        for (int j = 0; j < c->n_outputs; j++) {
            outs[j] = parity_tensor_new(op->output_names[j], (parity_dtype_t)k->out_dtype,
                                        c->out_ndim[j], c->out_shape[j]);
            if (!outs[j]) ok = 0;
        }
        if (ok) {
            parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
            parity_abi_call_t call;
            parity_case_make_call(c, in, out, outs, n_threads, o->seed, &call);
            parity_cost_t cost;
            int cost_ok = parity_bench_cost_call(&call, &cost) == PARITY_OK;
            if (cost_ok && (!have_cost || i == brow)) {
                /* The problem's cost (and T_SOL) is the baseline's: its dtypes define the task. */
                res->cost = cost;
                have_cost = 1;
            }
            progress(o, "bench: timing %s (%d of %d): %d warm-up + %d runs, %d thread(s)",
                     row->kr->label, i + 1, total, res->warmup, res->runs, n_threads);
            /* What is timed is judged: a kernel faithful in the check runs twice alone first
             * (bench_judge.c), and every timed call must return those outputs. */
            bench_expect_t ex;
            memset(&ex, 0, sizeof ex);
            int judging = row->verdict == PARITY_VERDICT_FAITHFUL;
            row->timed_outputs = -1;
            if (judging) {
                char det[256];
                parity_verdict_t jv = bench_expect_build(c, k, outs, &call, o->time.timeout_s,
                                                         &ex, det, sizeof det);
                if (jv != PARITY_VERDICT_FAITHFUL) {
                    judging = 0;
                    row->timed_outputs = 0;
                    row->verdict = jv;
                    snprintf(row->verdict_wl, sizeof row->verdict_wl, "%s", res->wl.name);
                    snprintf(row->check_detail, sizeof row->check_detail, "bench: %.240s", det);
                }
            }
            bench_mismatch_t mm[2];
            parity_verdict_t tv = bench_time_kernel_judged(k, &call, &o->time, judging ? &ex : NULL,
                                                           times, mm, row->time_detail,
                                                           sizeof row->time_detail);
            if (judging && tv == PARITY_VERDICT_FAITHFUL) bench_row_judge(row, c, mm, res->warmup);
            bench_expect_free(&ex);
            if (judging && row->verdict != PARITY_VERDICT_FAITHFUL)
                snprintf(row->verdict_wl, sizeof row->verdict_wl, "%s", res->wl.name);
            if (tv == PARITY_VERDICT_FAITHFUL) {
                row->timed = 1;
                parity_bench_stats(times, res->runs, &row->t_median, &row->t_best, &row->t_worst);
                if (cost_ok && row->t_median > 0) {
                    row->gbs = cost.bytes / row->t_median * 1e-9;
                    row->gflops = cost.flops / row->t_median * 1e-9;
                }
            }
        } else {
            snprintf(row->time_detail, sizeof row->time_detail, "cannot allocate the outputs");
        }
        for (int j = 0; j < c->n_outputs; j++) parity_tensor_free(outs[j]);
        for (int j = 0; j < n_cases; j++) {
            if (cases[j] != c || case_inputs_digest(c) == case_in[j]) continue;
            if (row->verdict == PARITY_VERDICT_FAITHFUL) {
                row->verdict = PARITY_VERDICT_MODIFIED_INPUTS;
                snprintf(row->verdict_wl, sizeof row->verdict_wl, "%s", res->wl.name);
                snprintf(row->check_detail, sizeof row->check_detail,
                         "bench: an input changed during the judged or timed calls");
            }
            parity_case_free(c);
            memmove(cases + j, cases + j + 1, (size_t)(n_cases - j - 1) * sizeof *cases);
            memmove(case_dt + j, case_dt + j + 1, (size_t)(n_cases - j - 1) * sizeof *case_dt);
            memmove(case_in + j, case_in + j + 1, (size_t)(n_cases - j - 1) * sizeof *case_in);
            n_cases--;
            break;
        }
    }
    for (int j = 0; j < n_cases; j++) parity_case_free(cases[j]);
    free(times);
    if (st != PARITY_OK) return st;

    /* 4. Speed of light and scores. */
    res->t_sol = have_cost ? parity_bench_sol(&res->cost, &res->ceil) : NAN;
    if (brow >= 0 && res->rows[brow].timed && res->rows[brow].verdict == PARITY_VERDICT_FAITHFUL)
        res->baseline_row = brow;
    for (int i = 0; i < total; i++) {
        parity_bench_row_t *row = &res->rows[i];
        if (!row->timed) continue;
        row->frac_sol = res->t_sol / row->t_median;
        if (row->verdict != PARITY_VERDICT_FAITHFUL || res->baseline_row < 0) continue;
        row->score = parity_bench_score(row->t_median, res->t_sol, res->rows[brow].t_median);
        row->scored = !isnan(row->score);
    }
    return PARITY_OK;
}

void parity_bench_result_free(parity_bench_result_t *res)
{
    if (!res) return;
    free(res->rows);
    free(res->refs);
    parity_kernel_list_free(&res->extra);
    res->rows = NULL;
    res->refs = NULL;
    res->n_rows = 0;
}

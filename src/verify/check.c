/* The units of a check: one kernel on one workload (its runs, judgement and diagnosis by
 * emulation), the noise floor of one workload, one baseline verifier's rule on one kernel; and
 * the state a worker keeps between units (the cases of the current workload, pooled buffers).
 * Which units run where (jobs, ranks, the floor cache) is check_grid.c; judging is verify.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/verify/check_impl.h"
#include "src/verify/check_cause_more.h"
#include "parity/baseline.h"
#include "parity/verify.h"
#include "src/verify/verify_impl.h"

/* Diagnosis rows: the most-hit rows (where a narrow accumulator shows) plus random ones; 64 rows
 * keep the six emulations well under a second on the quick workloads. */
#define N_DIAG_TOP 32
#define N_DIAG_RANDOM 32

static const char *const EMU_FMT[PARITY_N_EMU] = {"bf16", "bf16", "custom:m=10,e=8",
                                                  "custom:m=10,e=8", "fp32", "fp32"};
#define EMU_FMT_NAME(e) EMU_FMT[e]

static void progress(const parity_check_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const parity_check_opts_t *o, const char *fmt, ...)
{
    if (!o->progress) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    o->progress(o->progress_ctx, buf);
}

/* Cases of one workload, one per input dtype, with their emulations for diagnosis. */
typedef struct {
    parity_case_t *c;
    parity_dtype_t dt;
    int dirty; /* a kernel modified the inputs: rebuild before the next use */
    int emu_done[PARITY_OP_MAX_ARGS];
    int64_t n_rows[PARITY_OP_MAX_ARGS];
    int64_t *rows[PARITY_OP_MAX_ARGS];
    double *emu[PARITY_OP_MAX_ARGS][PARITY_N_EMU];
    /* The worker's output pools (borrowed), and the decoy inputs of this case. */
    parity_tensor_t *(*pool)[PARITY_OP_MAX_ARGS];
    parity_tensor_t *decoy_in[PARITY_OP_MAX_ARGS];
    uint64_t decoy_hash[PARITY_OP_MAX_ARGS]; /* a decoy input a kernel changed is rebuilt */
    /* The inputs' hashes as built, taken once (in_hashed): while the slot is not dirty its inputs
     * are those bytes (every run that could change them hashes them after and marks the slot
     * dirty, which rebuilds it), so a run compares against these instead of hashing before. */
    uint64_t in_hash[PARITY_OP_MAX_ARGS];
    int in_hashed;
} case_slot_t;

static const uint64_t *slot_hashes(case_slot_t *cs)
{
    if (!cs->in_hashed) {
        for (int i = 0; i < cs->c->n_inputs; i++) cs->in_hash[i] = parity_tensor_hash(cs->c->inputs[i]);
        cs->in_hashed = 1;
    }
    return cs->in_hash;
}

/* The rerun writes into the judged run's buffers, compared by digest (run_one), and so do the
 * decoy and the call on the judged buffers before it in its child (check_anticache.c). POOL_RERUN
 * is only for kernels declared nondeterministic, whose judged outputs must outlive a rerun that
 * may differ; POOL_DECOY only for naming the probe that made a rerun stale (stale_outputs). */
enum { POOL_RUN = 0, POOL_DECOY = 1, POOL_RERUN = 2, N_POOLS = 3 };

typedef struct {
    case_slot_t slots[4];
    int n;
    /* Output buffers reused by every run of the worker, across kernels and workloads: one
     * mapping per (judged run, decoy, rerun) x output, grown to the largest shape seen and
     * faulted in once (a fresh mapping per run made the check spend about as long in page faults
     * as in kernels: docs/check-speed.md). */
    parity_tensor_t *pool[N_POOLS][PARITY_OP_MAX_ARGS];
} case_cache_t;

/* A worker: the cases of the workload it is on, and its pools. */
struct check_worker {
    case_cache_t cc;
    check_nbr_t *nbr; /* the shape-neighbour cases of the current workload (check_anticache.c) */
    const parity_workload_t *wl; /* the workload cc holds cases of, with seed */
    uint64_t seed;
};

/* Free what a slot owns except the case itself. */
static void slot_release(case_slot_t *s)
{
    for (int o = 0; o < PARITY_OP_MAX_ARGS; o++) {
        free(s->rows[o]);
        s->rows[o] = NULL;
        for (int e = 0; e < PARITY_N_EMU; e++) {
            free(s->emu[o][e]);
            s->emu[o][e] = NULL;
        }
        parity_tensor_free(s->decoy_in[o]);
        s->decoy_in[o] = NULL;
    }
}

/* Drop the cases (the pools stay). */
static void cache_clear(case_cache_t *cc)
{
    for (int i = 0; i < cc->n; i++) {
        slot_release(&cc->slots[i]);
        parity_case_free(cc->slots[i].c);
    }
    memset(cc->slots, 0, sizeof cc->slots);
    cc->n = 0;
}

static void pools_free(parity_tensor_t *(*pool)[PARITY_OP_MAX_ARGS])
{
    for (int p = 0; p < N_POOLS; p++)
        for (int o = 0; o < PARITY_OP_MAX_ARGS; o++) {
            parity_tensor_free(pool[p][o]);
            pool[p][o] = NULL;
        }
}

static parity_status_t cache_get(case_cache_t *cc, const parity_op_t *op,
                                 const parity_workload_t *wl, uint64_t seed, parity_dtype_t dt,
                                 case_slot_t **out, parity_diag_t *diag)
{
    for (int i = 0; i < cc->n; i++)
        if (cc->slots[i].dt == dt) {
            if (cc->slots[i].dirty) { /* restore pristine inputs by rebuilding the case */
                cache_clear(cc);
                break;
            }
            *out = &cc->slots[i];
            return PARITY_OK;
        }
    if (cc->n == 4) cache_clear(cc);
    case_slot_t *s = &cc->slots[cc->n];
    memset(s, 0, sizeof *s);
    parity_status_t st = parity_case_build(op, wl, seed, dt, &s->c, diag);
    if (st != PARITY_OK) return st;
    s->dt = dt;
    s->pool = cc->pool;
    cc->n++;
    *out = s;
    return PARITY_OK;
}

/* Output tensors for a kernel on a case, from the worker's pool `which` (owned by the pool;
 * valid until the next call for the same pool). Guards are fresh; the data holds whatever the
 * last use left, so every caller prefills. */
static int pool_outputs(case_slot_t *cs, int which, const parity_abi_kernel_t *k, parity_tensor_t **o)
{
    const parity_case_t *c = cs->c;
    parity_dtype_t dt = (parity_dtype_t)k->out_dtype;
    for (int i = 0; i < c->n_outputs; i++) {
        cs->pool[which][i] = parity_tensor_reuse(cs->pool[which][i], c->op->output_names[i], dt,
                                                 c->out_ndim[i], c->out_shape[i]);
        if (!cs->pool[which][i]) return -1;
        o[i] = cs->pool[which][i];
    }
    return 0;
}

/* The decoy inputs of a case, built once: floating-point inputs scaled by -2 (exact), others
 * copied. */
static int decoy_inputs(case_slot_t *cs)
{
    const parity_case_t *c = cs->c;
    for (int i = 0; i < c->n_inputs; i++) {
        if (cs->decoy_in[i]) continue;
        const parity_tensor_t *src = c->inputs[i];
        parity_tensor_t *t = parity_tensor_new(src->name, (parity_dtype_t)src->view.dtype,
                                               src->view.ndim, src->view.shape);
        if (!t) return -1;
        int64_t ne = parity_tensor_numel(&src->view);
        if (c->op->input_is_float[i] && src->view.dtype == PARITY_DT_F32) {
            const float *a = src->view.data;
            float *b = t->view.data;
            for (int64_t e = 0; e < ne; e++) b[e] = -2.0f * a[e];
        } else if (c->op->input_is_float[i] && src->view.dtype == PARITY_DT_BF16) {
            const uint16_t *a = src->view.data;
            uint16_t *b = t->view.data;
            for (int64_t e = 0; e < ne; e++) /* normal, away from overflow: sign and exponent */
                b[e] = ((a[e] >> 7) & 0xff) - 1u < 253u
                           ? (uint16_t)((a[e] ^ 0x8000u) + 0x0080u)
                           : parity_fp32_to_bf16_1(-2.0f * parity_bf16_to_fp32_1(a[e]));
        } else if (c->op->input_is_float[i]) {
            for (int64_t e = 0; e < ne; e++)
                parity_tensor_set(&t->view, e, -2.0 * parity_tensor_get(&src->view, e));
        } else {
            memcpy(t->view.data, src->view.data, src->nbytes);
        }
        cs->decoy_in[i] = t;
        cs->decoy_hash[i] = parity_tensor_hash(t);
    }
    return 0;
}


/* dst[j] = (float)ref[j]: a conversion per element, exact IEEE rounding whether scalar or
 * vector, so GCC may vectorize it (-O3 here; no contraction or fast-math is involved). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void fill_ref_row_f32(float *restrict dst, const double *restrict ref, int64_t n)
{
    for (int64_t j = 0; j < n; j++) dst[j] = (float)ref[j];
}

/* Fill an output with the reference rounded to its dtype (the second run's prefill: a kernel
 * that leaves elements unwritten then returns different bits than with the NaN prefill). */
void parity_fill_reference(parity_tensor_t *t, const parity_ref_output_t *R)
{
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t slot = R->slot ? R->slot[r] : r;
        if (t->view.dtype == PARITY_DT_F32) { /* the common case, at memory speed: same bits */
            float *dst = (float *)t->view.data + r * R->cols;
            if (slot < 0) memset(dst, 0, (size_t)R->cols * sizeof *dst); /* +0.0f */
            else fill_ref_row_f32(dst, R->ref + slot * R->cols, R->cols);
            continue;
        }
        for (int64_t j = 0; j < R->cols; j++) {
            double v = slot >= 0 ? R->ref[slot * R->cols + j] : 0;
            if (t->view.dtype == PARITY_DT_F32) ((float *)t->view.data)[r * R->cols + j] = (float)v;
            else parity_tensor_set(&t->view, r * R->cols + j, v);
        }
    }
}

/* check_stale_outputs with the decoy in buffers of its own (POOL_DECOY, mapped only for a
 * kernel whose rerun came out different): what the decoy alone does tells the probes apart.
 * NaN-prefilled there (check_stale_outputs): what a pooled buffer held before must not reach a
 * kernel that reads its outputs, or a verdict would depend on which units ran before on this
 * worker (and --jobs / ranks would change reports). */
static int stale_outputs(case_slot_t *cs, const parity_abi_kernel_t *k, parity_tensor_t **o2,
                         const parity_abi_call_t *call2, const parity_abi_call_t *decoy,
                         const parity_check_opts_t *opts, parity_wl_result_t *res)
{
    parity_tensor_t *dout[PARITY_OP_MAX_ARGS] = {0};
    parity_abi_tensor_t doutv[PARITY_OP_MAX_ARGS];
    parity_abi_call_t own = *decoy;
    int have = pool_outputs(cs, POOL_DECOY, k, dout) == 0;
    for (int i = 0; i < cs->c->n_outputs && have; i++) doutv[i] = dout[i]->view;
    if (have) own.outputs = doutv;
    return check_stale_outputs(cs->c, k, o2, call2, have ? &own : NULL, opts, res);
}

/* One judged run of kernel k on case c, alone in a fresh child, NaN-prefilled.
 * rerun: a second run, reference-prefilled (unwritten outputs and nondeterminism show as bits
 * that differ); with use_decoy, the same child first calls the kernel on a decoy and on the
 * judged buffers holding other contents (check_anticache.c), so a kernel that answers from an
 * earlier call returns stale outputs: judged, they give "stale-cache". Each costs kernel calls,
 * so the driver asks for them on the small workloads and not on production-sized ones. */
static void run_one(const parity_kernel_ref_t *kr, case_slot_t *cs, const parity_check_opts_t *opts,
                    int rerun, int use_decoy, parity_wl_result_t *res, parity_tensor_t **keep_out)
{
    const parity_case_t *c = cs->c;
    const parity_abi_kernel_t *k = kr->k;
    parity_tensor_t *o[PARITY_OP_MAX_ARGS] = {0};
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    if (pool_outputs(cs, POOL_RUN, k, o) != 0) {
        res->verdict = PARITY_VERDICT_CRASHED;
        snprintf(res->detail, sizeof res->detail, "harness could not allocate the outputs");
        return;
    }
    const uint64_t *in_hash = slot_hashes(cs);
    for (int i = 0; i < c->n_inputs; i++) parity_tensor_reset_guards(c->inputs[i]);
    for (int i = 0; i < c->n_outputs; i++) parity_tensor_fill_nan(o[i]);
    parity_case_make_call(c, in, out, o, opts->n_threads, c->seed, &call);
    res->verdict = parity_run_isolated(k, NULL, &call, opts->timeout_s, res->detail,
                                       sizeof res->detail, &res->seconds);
    if (res->verdict != PARITY_VERDICT_FAITHFUL) goto done;
    for (int i = 0; i < c->n_outputs; i++)
        if (!parity_tensor_guards_ok(o[i])) {
            res->verdict = PARITY_VERDICT_OOB;
            snprintf(res->detail, sizeof res->detail, "bytes around output %s were overwritten",
                     c->op->output_names[i]);
            goto done;
        }
    for (int i = 0; i < c->n_inputs; i++) {
        if (!parity_tensor_guards_ok(c->inputs[i])) {
            cs->dirty = 1;
            res->verdict = PARITY_VERDICT_OOB;
            snprintf(res->detail, sizeof res->detail, "bytes around input %s were overwritten",
                     c->op->input_names[i]);
            goto done;
        }
        if (parity_tensor_hash(c->inputs[i]) != in_hash[i]) {
            cs->dirty = 1;
            res->verdict = PARITY_VERDICT_MODIFIED_INPUTS;
            snprintf(res->detail, sizeof res->detail, "input %s changed during the run",
                     c->op->input_names[i]);
            goto done;
        }
    }
    /* Numeric judgement of the NaN-prefilled run. */
    parity_judge_case(c, o, res);
    if (rerun && res->verdict == PARITY_VERDICT_FAITHFUL) {
        parity_tensor_t *o2[PARITY_OP_MAX_ARGS] = {0};
        parity_abi_tensor_t out2[PARITY_OP_MAX_ARGS];
        parity_abi_call_t call2;
        char det[200];
        double secs;
        int nondet = (k->flags & PARITY_KERNEL_NONDETERMINISTIC) != 0;
        /* The rerun overwrites the judged outputs (a second vocabulary-sized buffer per output
         * cost more than the rest of the comparison: docs/check-speed.md); their digests are
         * what it is compared with. A kernel declared nondeterministic keeps its judged outputs
         * (diagnosed with --diagnose even when the rerun differs): a buffer of its own. */
        uint64_t dig[PARITY_OP_MAX_ARGS];
        for (int i = 0; i < c->n_outputs && !nondet; i++)
            dig[i] = parity_digest64(o[i]->view.data, o[i]->nbytes);
        int got2 = nondet ? pool_outputs(cs, POOL_RERUN, k, o2) == 0 : 1;
        for (int i = 0; i < c->n_outputs && !nondet; i++) o2[i] = o[i];
        if (got2) {
            parity_case_make_call(c, in, out2, o2, opts->n_threads, c->seed, &call2);
            /* Decoy: the same shapes with every floating-point input scaled by -2 (exact) and a
             * different seed, written into the judged buffers (NaN-prefilled below); then the
             * call on the judged buffers holding other contents, then the judged call. Every
             * memo the decoy could expose (keyed on shapes, on nothing, on output pointers) the
             * call on the judged buffers exposes too; the decoy keeps the calls per child at
             * three, and check_stale_outputs runs it again in buffers of its own to name the
             * probe. A pool of its own for every decoy cost a vocabulary-sized mapping per
             * worker, the largest first touch of a cold check (docs/check-speed.md). */
            parity_abi_tensor_t dinv[PARITY_OP_MAX_ARGS];
            parity_abi_call_t decoy;
            int have_decoy = use_decoy && decoy_inputs(cs) == 0;
            if (have_decoy) {
                for (int i = 0; i < c->n_inputs; i++) dinv[i] = cs->decoy_in[i]->view;
                decoy = call2;
                decoy.inputs = dinv;
                decoy.seed = c->seed ^ 0xdec0dec0ULL;
            }
            /* Without the probes, reference-prefilled; with them, the decoy starts from NaN
             * and each later call from what the call before it wrote. */
            for (int i = 0; i < c->n_outputs; i++)
                if (have_decoy) parity_tensor_fill_nan(o2[i]);
                else parity_fill_reference(o2[i], &c->ref[i]);
            parity_verdict_t v2 = parity_run_isolated_step(
                k, have_decoy ? &decoy : NULL, have_decoy ? check_same_buffers_step : NULL,
                (void *)c, &call2, opts->timeout_s, det, sizeof det, &secs);
            int modified = -1;
            for (int i = 0; i < c->n_inputs; i++)
                if (parity_tensor_hash(c->inputs[i]) != in_hash[i]) modified = i;
            if (modified >= 0) { /* by the kernel, or left with other contents by a crash */
                cs->dirty = 1;
                if (v2 == PARITY_VERDICT_FAITHFUL) {
                    v2 = PARITY_VERDICT_MODIFIED_INPUTS;
                    snprintf(det, sizeof det, "input %s changed", c->op->input_names[modified]);
                }
            }
            if (v2 == PARITY_VERDICT_MODIFIED_INPUTS) cs->dirty = 1;
            /* A decoy input the kernel changed would make the next kernel's decoy another one
             * (reports would depend on which units ran before on a worker): rebuilt. */
            for (int i = 0; i < c->n_inputs && have_decoy; i++)
                if (parity_tensor_hash(cs->decoy_in[i]) != cs->decoy_hash[i]) {
                    parity_tensor_free(cs->decoy_in[i]);
                    cs->decoy_in[i] = NULL;
                    if (v2 == PARITY_VERDICT_FAITHFUL) {
                        v2 = PARITY_VERDICT_MODIFIED_INPUTS;
                        snprintf(det, sizeof det, "input %s changed during the decoy call",
                                 c->op->input_names[i]);
                    }
                }
            int differ = -1, stale = 0;
            for (int i = 0; i < c->n_outputs && differ < 0 && v2 == PARITY_VERDICT_FAITHFUL; i++)
                if (nondet ? memcmp(o[i]->view.data, o2[i]->view.data, o[i]->nbytes) != 0
                           : parity_digest64(o2[i]->view.data, o2[i]->nbytes) != dig[i])
                    differ = i;
            if (v2 != PARITY_VERDICT_FAITHFUL) {
                res->verdict = v2;
                snprintf(res->detail, sizeof res->detail, "second run: %s", det);
            } else if (have_decoy && (differ >= 0 || nondet) &&
                       (stale = stale_outputs(cs, k, o2, &call2, &decoy, opts, res)) != 0) {
                if (stale == 2) cs->dirty = 1; /* res says "stale-cache" */
            } else if (differ >= 0 && !nondet) {
                res->verdict = PARITY_VERDICT_NONDETERMINISTIC;
                snprintf(res->detail, sizeof res->detail,
                         "output %s differs bit-wise between two runs on the same inputs "
                         "(declare PARITY_KERNEL_NONDETERMINISTIC if intended)",
                         c->op->output_names[differ]);
            }
        }
    }
done:
    /* keep_out: the judged run's outputs, owned by the slot's pool (valid until its next run). */
    if (keep_out && (res->verdict == PARITY_VERDICT_FAITHFUL || res->verdict == PARITY_VERDICT_UNFAITHFUL))
        for (int i = 0; i < c->n_outputs; i++) keep_out[i] = o[i];
}

/* ---- diagnosis ---- */

static int cmp_desc_k(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* pairs (k, row) */
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void ensure_emulations(case_slot_t *cs, int o)
{
    if (cs->emu_done[o]) return;
    cs->emu_done[o] = 1;
    const parity_case_t *c = cs->c;
    const parity_ref_output_t *R = &c->ref[o];
    /* Rows: the N_DIAG_TOP with the most terms, plus N_DIAG_RANDOM others (seeded); also without
     * an emulation (check_cause_refits). */
    int64_t nz = 0;
    for (int64_t r = 0; r < R->rows; r++) nz += (R->slot ? R->slot[r] : r) >= 0;
    int64_t *pairs = malloc((size_t)(nz ? nz : 1) * 2 * sizeof *pairs);
    int64_t *rows = malloc((N_DIAG_TOP + N_DIAG_RANDOM) * sizeof *rows);
    if (!pairs || !rows) {
        free(pairs);
        free(rows);
        return;
    }
    int64_t q = 0;
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t s = R->slot ? R->slot[r] : r;
        if (s < 0) continue;
        pairs[2 * q] = R->k[s];
        pairs[2 * q + 1] = r;
        q++;
    }
    qsort(pairs, (size_t)nz, 2 * sizeof *pairs, cmp_desc_k);
    int64_t n = 0;
    for (int64_t i = 0; i < nz && n < N_DIAG_TOP; i++) rows[n++] = pairs[2 * i + 1];
    parity_rng_t rng;
    parity_rng_seed(&rng, c->seed, 77);
    for (int t = 0; t < N_DIAG_RANDOM && nz > N_DIAG_TOP; t++) {
        int64_t i = N_DIAG_TOP + (int64_t)parity_rng_below(&rng, (uint64_t)(nz - N_DIAG_TOP));
        rows[n++] = pairs[2 * i + 1];
    }
    free(pairs);
    cs->rows[o] = rows;
    cs->n_rows[o] = n;
    for (int e = 0; e < PARITY_N_EMU && c->op->emulate; e++) {
        parity_format_t f;
        parity_format_get(EMU_FMT_NAME(e), &f, NULL);
        double *dst = malloc((size_t)(n ? n : 1) * (size_t)R->cols * sizeof *dst);
        if (!dst) continue;
        if (c->op->emulate(c, o, &f, (e % 2) ? PARITY_SUM_PAIRWISE : PARITY_SUM_SEQUENTIAL, rows,
                           n, dst) != PARITY_OK) {
            free(dst);
            continue;
        }
        cs->emu[o][e] = dst;
    }
}

static void diagnose(case_slot_t *cs, const parity_kernel_ref_t *kr, parity_tensor_t **outs,
                     parity_wl_result_t *res)
{
    const parity_case_t *c = cs->c;
    int o = 0;
    for (int i = 0; i < c->n_outputs; i++)
        if (strcmp(c->op->output_names[i], res->worst.output) == 0) o = i;
    ensure_emulations(cs, o);
    if (!cs->rows[o]) return;
    const parity_ref_output_t *R = &c->ref[o];
    int64_t n = cs->n_rows[o];
    double *vals = malloc((size_t)(n ? n : 1) * (size_t)R->cols * sizeof *vals);
    if (!vals) return;
    for (int64_t q = 0; q < n; q++)
        for (int64_t j = 0; j < R->cols; j++)
            vals[q * R->cols + j] = parity_tensor_get(&outs[o]->view, cs->rows[o][q] * R->cols + j);
    parity_dtype_t odt = (parity_dtype_t)kr->k->out_dtype;
    parity_diagnosis_t *d = &res->diag;
    /* The candidate's values are already in its dtype: rounding them again changes nothing. */
    d->cand_err = check_diag_error(R, cs->rows[o], n, vals, odt);
    if (!isfinite(d->cand_err) || !cs->emu[o][0]) { /* NaN/inf outputs: nothing to compare */
        if (isfinite(d->cand_err) && res->verdict == PARITY_VERDICT_UNFAITHFUL) /* no emulation */
            check_cause_refits(c, o, cs->rows[o], n, vals, odt, d);
        else if (res->verdict == PARITY_VERDICT_UNFAITHFUL)
            check_cause_nonfinite(R, cs->rows[o], n, vals, d);
        free(vals);
        return;
    }
    snprintf(d->output, sizeof d->output, "%s", R->name);
    for (int e = 0; e < PARITY_N_EMU; e++)
        d->emu_err[e] = cs->emu[o][e] ? check_diag_error(R, cs->rows[o], n, cs->emu[o][e], odt) : NAN;
    /* The comparison above weighs elements by sum|terms| and skips those where it is 0; when
     * the worst element is one of them (d_expert_out of an unselected expert written, a dE row no
     * id hits left unzeroed, a wrong expert selected where the right ones' values are 0), the
     * error is structural, whatever the sampled rows say. */
    const parity_worst_t *w = &res->worst;
    if (w->row >= 0 && w->row < R->rows && w->col >= 0 && w->col < R->cols && w->got != 0) {
        int64_t slot = R->slot ? R->slot[w->row] : w->row;
        d->zero_written = slot < 0 || !(R->s_acc[slot * R->cols + w->col] > 0);
    }
    d->worst_terms = w->k;
    parity_diagnosis_classify(d); /* after zero_written and worst_terms: the cause reads them */
    if (res->verdict == PARITY_VERDICT_UNFAITHFUL && !d->zero_written)
        check_cause_parameter(c, o, cs->rows[o], n, vals, odt, d);
    /* After the accumulator rule and over it: a dropped tail is never called accumulator. */
    if (res->verdict == PARITY_VERDICT_UNFAITHFUL && !d->zero_written && d->cause != PARITY_CAUSE_PARAMETER)
        check_cause_dropped(c, o, cs->rows[o], n, vals, odt, d);
    /* The accumulator's match (check_match): of the sampled elements outside the faithful
     * tolerance, those within it of the closest emulation (another summation order than the
     * kernel's reproduces its error's size, rarely its bits: a low match here is no evidence
     * against the cause). within: the sampled elements within it of the emulation, all or not. */
    int64_t within = 0;
    if (res->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause == PARITY_CAUSE_ACCUMULATOR && cs->emu[o][d->closest] &&
        !isnan(check_fit_q(R, cs->rows[o], n, vals, odt, cs->emu[o][d->closest], NULL, NULL, NULL, &within))) {
        check_rows_ref_t fe = {cs->emu[o][d->closest], NULL, NULL, NULL, 0, NULL};
        d->match = check_match(R, cs->rows[o], n, vals, odt, &fe);
        d->has_match = !isnan(d->match);
    }
    /* fp16's range, which the 11-bit emulation lacks; then terms lost element by element, over
     * unknown or an accumulator that does not reproduce the elements (check_cause_more.c). */
    int unf = res->verdict == PARITY_VERDICT_UNFAITHFUL && !d->zero_written;
    if (unf && d->cause == PARITY_CAUSE_UNKNOWN && d->cand_err > 0)
        check_cause_fp16_range(c, o, cs->rows[o], n, vals, odt, cs->emu[o][2] /* 11-bit sequential */, d);
    if (unf && (d->cause == PARITY_CAUSE_UNKNOWN || (d->cause == PARITY_CAUSE_ACCUMULATOR && !(d->match >= CHECK_MATCH_MAJORITY))))
        check_cause_at(check_cause_lost, c, o, cs->rows[o], n, vals, odt, &outs[o]->view, w->row, d);
    /* The op's variants, over the accumulator word too, except where the accumulator emulation
     * reproduces every sampled element (a narrow accumulator of a sum with one or two sizeable
     * terms, x64's exps, is one rounding of that sum: the data cannot tell them apart). */
    /* A structural error (zero_written) too: a variant that selects otherwise (a tie rule, a
     * mask) reproduces the elements it wrote, or names nothing. */
    if (res->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_PARAMETER &&
        d->cause != PARITY_CAUSE_DROPPED_TERMS && d->cause != PARITY_CAUSE_DUPLICATED_TERMS &&
        !(d->cause == PARITY_CAUSE_ACCUMULATOR && d->has_match && within == n * R->cols))
        check_cause_at(check_cause_variants, c, o, cs->rows[o], n, vals, odt, &outs[o]->view, w->row, d);
    free(vals);
}

/* ---- baselines ---- */

/* Baseline rule b on kr: one plain run on the rule's own case, then the rule (src/verify/baseline.c). */
static void run_baseline(int b, const parity_kernel_ref_t *kr, case_slot_t *cs,
                         const parity_check_opts_t *opts, parity_baseline_result_t *br)
{
    parity_wl_result_t tmp;
    memset(&tmp, 0, sizeof tmp);
    parity_tensor_t *o[PARITY_OP_MAX_ARGS] = {0};
    run_one(kr, cs, opts, 0, 0, &tmp, o);
    if (tmp.verdict != PARITY_VERDICT_FAITHFUL && tmp.verdict != PARITY_VERDICT_UNFAITHFUL) {
        check_baseline_names(b, br);
        br->ran = 1;
        br->caught = 1;
        snprintf(br->detail, sizeof br->detail, "%s", parity_verdict_name(tmp.verdict));
        return;
    }
    if (parity_baseline_judge(b, cs->c, o, br) != PARITY_OK) {
        check_baseline_names(b, br);
        br->ran = 0;
    }
}

/* ---- units ---- */

check_worker_t *check_worker_new(void)
{
    check_worker_t *w = calloc(1, sizeof(check_worker_t));
    if (w) w->nbr = check_nbr_new(); /* NULL: no neighbour sequence, never a wrong verdict */
    return w;
}

void check_worker_free(check_worker_t *w)
{
    if (!w) return;
    cache_clear(&w->cc);
    pools_free(w->cc.pool);
    check_nbr_free(w->nbr);
    free(w);
}

/* The case of (wl, seed, dt) on worker w: the cases of one workload are kept while consecutive
 * units are on it (inputs and reference built once for all its kernels and its floor). */
static parity_status_t worker_case(check_worker_t *w, const parity_op_t *op,
                                   const parity_workload_t *wl, uint64_t seed, parity_dtype_t dt,
                                   case_slot_t **cs, parity_diag_t *diag)
{
    if (w->wl != wl || w->seed != seed) {
        cache_clear(&w->cc);
        w->wl = wl;
        w->seed = seed;
    }
    return cache_get(&w->cc, op, wl, seed, dt, cs, diag);
}

int check_floor_kernels(const parity_op_t *op, const parity_abi_kernel_t **fk)
{
    int n = 0;
    for (int i = 0; i < parity_catalog_count() && n < CHECK_N_FLOOR_KERNELS; i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op->name) == 0 && k->expected && strcmp(k->expected, "faithful") == 0 &&
            k->out_dtype == PARITY_DT_F32)
            fk[n++] = k;
    }
    return n;
}

parity_status_t check_unit_floor(check_worker_t *w, const parity_op_t *op,
                                 const parity_workload_t *wl, const parity_check_opts_t *opts,
                                 const parity_abi_kernel_t *const *fk, int nf, double *floor_q,
                                 int *complete, parity_diag_t *diag)
{
    *floor_q = -1;
    *complete = 1;
    /* Consecutive variants on the same case run in one child (check_floor.c). */
    for (int f = 0; f < nf;) {
        case_slot_t *cs;
        parity_status_t st = worker_case(w, op, wl, opts->seed, (parity_dtype_t)fk[f]->in_dtype, &cs, diag);
        if (st != PARITY_OK) return st;
        int n = 1;
        while (f + n < nf && fk[f + n]->in_dtype == fk[f]->in_dtype) n++;
        parity_tensor_t *o[PARITY_OP_MAX_ARGS] = {0};
        double q[CHECK_N_FLOOR_KERNELS];
        int judged[CHECK_N_FLOOR_KERNELS], modified = 0;
        if (pool_outputs(cs, POOL_RUN, fk[f], o) != 0) {
            *complete = 0;
            f++;
            continue;
        }
        int used = check_floor_child(cs->c, o, slot_hashes(cs), fk + f, n, opts, q, judged, &modified);
        for (int i = 0; i < used; i++) {
            if (judged[i]) *floor_q = q[i] > *floor_q ? q[i] : *floor_q;
            else *complete = 0; /* a timeout or crash of a floor variant: not a value to keep */
        }
        if (modified) cs->dirty = 1; /* the next use rebuilds the inputs */
        f += used;
    }
    return PARITY_OK;
}

parity_status_t check_unit_kernel(check_worker_t *w, const parity_op_t *op,
                                  const parity_workload_t *wl, const parity_check_opts_t *opts,
                                  const parity_kernel_ref_t *kr, int diagnose_all,
                                  parity_wl_result_t *r, parity_diag_t *diag)
{
    memset(r, 0, sizeof *r);
    snprintf(r->workload, sizeof r->workload, "%s", wl->name);
    r->production = wl->production;
    r->hit_corr = NAN;
    r->floor_q = -1;
    case_slot_t *cs;
    double t0 = parity_now();
    int fresh = w->wl != wl || w->seed != opts->seed;
    parity_status_t st = worker_case(w, op, wl, opts->seed, (parity_dtype_t)kr->k->in_dtype, &cs, diag);
    if (st != PARITY_OK) return st;
    if (fresh)
        progress(opts, "%s: inputs and fp64 reference (N=%lld D=%lld V=%lld) in %.1f s", wl->name,
                 (long long)wl->n, (long long)wl->d, (long long)wl->v, parity_now() - t0);
    parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
    int small = !wl->production;
    run_one(kr, cs, opts, small, small, r, outs);
    /* Diagnosis tells why numbers are wrong: it runs where they are (an unfaithful workload),
     * and on passing ones only when asked (a faithful kernel's check is its runs + judging). */
    if (outs[0] && small && (r->verdict == PARITY_VERDICT_UNFAITHFUL || diagnose_all))
        diagnose(cs, kr, outs, r);
    /* The shape neighbours (check_anticache.c) of a kernel that passed this workload. */
    if (small && r->verdict == PARITY_VERDICT_FAITHFUL) {
        st = check_neighbours(w->nbr, op, wl, opts, kr, r);
        if (st != PARITY_OK) return parity_diag_set(diag, st, "check: out of memory (shape neighbours)");
    }
    progress(opts, "  %-14s %-40s %-18s err/tol %.3g (%.2f s)", wl->name, kr->label,
             parity_verdict_name(r->verdict), r->max_q, r->seconds);
    return PARITY_OK;
}

void check_baseline_names(int b, parity_baseline_result_t *br)
{
    br->name = parity_baseline_name(b);
    br->rule = parity_baseline_rule(b);
}

parity_status_t check_unit_baseline(check_worker_t *w, const parity_op_t *op, int b,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_baseline_result_t *br, parity_diag_t *diag)
{
    memset(br, 0, sizeof *br);
    case_slot_t *cs;
    const parity_workload_t *bw;
    uint64_t bseed;
    parity_status_t st = op->baseline_workload ? op->baseline_workload(op, b, &bw, &bseed, br->detail, sizeof br->detail)
                                               : parity_baseline_workload(op, b, &bw, &bseed);
    if (st == PARITY_E_NOTFOUND && op->baseline_workload) return PARITY_OK; /* n/a here: detail says why */
    if (st != PARITY_OK) return st;
    st = worker_case(w, op, bw, bseed, (parity_dtype_t)kr->k->in_dtype, &cs, diag);
    if (st == PARITY_E_FORMAT && op->declared) { /* the reference is not defined on the rule's inputs */
        snprintf(br->detail, sizeof br->detail, "%.159s", diag && diag->msg[0] ? diag->msg : "the reference fails");
        if (diag) diag->msg[0] = 0;
        return PARITY_OK;
    }
    if (st != PARITY_OK) return st;
    run_baseline(b, kr, cs, opts, br);
    progress(opts, "  [baseline %s] %-40s %s", parity_baseline_name(b), kr->label, br->caught ? "caught" : "pass");
    return PARITY_OK;
}

parity_status_t check_unit_plain(check_worker_t *w, const parity_op_t *op, const parity_workload_t *wl,
                                 uint64_t seed, const parity_check_opts_t *opts,
                                 const parity_kernel_ref_t *kr, parity_wl_result_t *r,
                                 parity_tensor_t **outs, const parity_case_t **c, parity_diag_t *diag)
{
    memset(r, 0, sizeof *r);
    r->hit_corr = NAN;
    r->floor_q = -1;
    case_slot_t *cs;
    parity_status_t st = worker_case(w, op, wl, seed, (parity_dtype_t)kr->k->in_dtype, &cs, diag);
    if (st != PARITY_OK) return st;
    run_one(kr, cs, opts, 0, 0, r, outs);
    *c = cs->c;
    return PARITY_OK;
}

/* The file-based flow: judge outputs produced elsewhere for case c, with the same floor,
 * judgement and diagnosis as check. The case is borrowed, not freed. */
parity_status_t parity_compare_case(parity_case_t *c, parity_tensor_t *const *outs,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_wl_result_t *res)
{
    return parity_compare_case_diag(c, outs, kr, opts, 1, res);
}

/* diagnose_all 0: diagnose only an unfaithful workload, as check_unit_kernel (the Python bridge:
 * a faithful kernel's judgement then costs what the CLI's does, not the emulations too). */
parity_status_t parity_compare_case_diag(parity_case_t *c, parity_tensor_t *const *outs,
                                         const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                         int diagnose_all, parity_wl_result_t *res)
{
    case_slot_t cs;
    memset(&cs, 0, sizeof cs);
    parity_tensor_t *pool[N_POOLS][PARITY_OP_MAX_ARGS] = {{0}};
    cs.pool = pool;
    cs.c = c;
    cs.dt = c->in_dtype;
    memset(res, 0, sizeof *res);
    res->verdict = PARITY_VERDICT_NOT_JUDGED; /* 0 would read "faithful" (issue #40) */
    snprintf(res->workload, sizeof res->workload, "%s", c->wl->name);
    res->production = c->wl->production;
    res->hit_corr = NAN;
    res->floor_q = -1;
    if (opts->noise_floor) {
        int nf = 0;
        for (int i = 0; i < parity_catalog_count() && nf < (c->wl->production ? 1 : CHECK_N_FLOOR_KERNELS); i++) {
            const parity_abi_kernel_t *k = parity_catalog_at(i);
            if (strcmp(k->op, c->op->name) != 0 || !k->expected || strcmp(k->expected, "faithful") != 0 ||
                k->out_dtype != PARITY_DT_F32 || k->in_dtype != (int32_t)c->in_dtype)
                continue;
            parity_kernel_ref_t fr = {k, "", 1};
            parity_wl_result_t fres;
            memset(&fres, 0, sizeof fres);
            run_one(&fr, &cs, opts, 0, 0, &fres, NULL);
            if (fres.verdict == PARITY_VERDICT_FAITHFUL || fres.verdict == PARITY_VERDICT_UNFAITHFUL)
                res->floor_q = fres.max_q > res->floor_q ? fres.max_q : res->floor_q;
            nf++;
        }
    }
    res->verdict = PARITY_VERDICT_FAITHFUL;
    parity_judge_case(c, outs, res);
    if (!c->wl->production && (diagnose_all || res->verdict == PARITY_VERDICT_UNFAITHFUL))
        diagnose(&cs, kr, (parity_tensor_t **)outs, res);
    slot_release(&cs);
    pools_free(pool);
    return PARITY_OK;
}

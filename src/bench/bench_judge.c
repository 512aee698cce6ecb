/* `parity bench` judges what it times: the outputs of every timed call are compared with those of
 * judged runs at the same shapes, bit for bit (or, for kernels declared nondeterministic, judged
 * against the fp64 reference with the check's tolerances), so a kernel that skips work on
 * repeated calls, or answers a benchmark loop from a memo, loses its score (docs/bench.md).
 * Deliberately not here: timing (bench.c), the tolerances (verify.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/bench/bench_impl.h"
#include "src/verify/verify_internal.h"

/* The float formats whose sign bit bench_flip_first_float flips (bench.c's first_float_digest
 * reads the same ones). */
static int is_float_dtype(int32_t dt)
{
    return dt == PARITY_DT_F32 || dt == PARITY_DT_BF16 || dt == PARITY_DT_F16 || dt == PARITY_DT_F64;
}

/* Here with the judged runs that flip the inputs as the timing does (bench.c times the flipped
 * and unflipped calls, and calls this; this file calls nothing in bench.c). */
/* Flip the sign bit of every element of the first floating-point input (exact for every float
 * format; the distribution of a symmetric workload is unchanged, the outputs change). */
void bench_flip_first_float(const parity_abi_call_t *call)
{
    for (int i = 0; i < call->n_inputs; i++) {
        const parity_abi_tensor_t *t = &call->inputs[i];
        if (!is_float_dtype(t->dtype)) continue;
        int64_t ne = parity_tensor_numel(t);
        if (t->dtype == PARITY_DT_BF16 || t->dtype == PARITY_DT_F16) {
            uint16_t *p = t->data;
            for (int64_t e = 0; e < ne; e++) p[e] ^= 0x8000u;
        } else if (t->dtype == PARITY_DT_F32) {
            uint32_t *p = t->data;
            for (int64_t e = 0; e < ne; e++) p[e] ^= 0x80000000u;
        } else {
            uint64_t *p = t->data;
            for (int64_t e = 0; e < ne; e++) p[e] ^= 0x8000000000000000ull;
        }
        return;
    }
}

void bench_expect_free(bench_expect_t *e)
{
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < PARITY_OP_MAX_ARGS; i++) {
            free(e->exp[p][i]);
            e->exp[p][i] = NULL;
        }
}

/* One run alone in a child, outputs NaN-prefilled; 1 when it ran and wrote within bounds. */
static parity_verdict_t run_alone(const parity_case_t *c, const parity_abi_kernel_t *k,
                                  parity_tensor_t *const *outs, const parity_abi_call_t *call,
                                  double timeout_s, char *detail, size_t len)
{
    for (int i = 0; i < c->n_outputs; i++) {
        parity_tensor_fill_nan(outs[i]);
        parity_tensor_reset_guards(outs[i]);
    }
    double secs;
    parity_verdict_t v = parity_run_isolated(k, NULL, call, timeout_s, detail, len, &secs);
    if (v != PARITY_VERDICT_FAITHFUL) return v;
    for (int i = 0; i < c->n_outputs; i++)
        if (!parity_tensor_guards_ok(outs[i])) {
            snprintf(detail, len, "bytes around output %s were overwritten", c->op->output_names[i]);
            return PARITY_VERDICT_OOB;
        }
    return PARITY_VERDICT_FAITHFUL;
}

static int keep(bench_expect_t *e, int p, parity_tensor_t *const *outs, int n)
{
    for (int i = 0; i < n; i++) {
        if (!(e->exp[p][i] = malloc(outs[i]->nbytes ? outs[i]->nbytes : 1))) return -1;
        memcpy(e->exp[p][i], outs[i]->view.data, outs[i]->nbytes);
    }
    return 0;
}

parity_verdict_t bench_expect_build(const parity_case_t *c, const parity_abi_kernel_t *k,
                                    parity_tensor_t *const *outs, const parity_abi_call_t *call,
                                    double timeout_s, bench_expect_t *e, char *detail, size_t len)
{
    memset(e, 0, sizeof *e);
    e->c = c;
    e->outs = outs;
    e->nondet = (k->flags & PARITY_KERNEL_NONDETERMINISTIC) != 0;
    /* On the case's inputs: judged like the check judges. */
    parity_verdict_t v = run_alone(c, k, outs, call, timeout_s, detail, len);
    if (v != PARITY_VERDICT_FAITHFUL) return v;
    parity_wl_result_t r;
    memset(&r, 0, sizeof r);
    r.verdict = PARITY_VERDICT_FAITHFUL;
    parity_judge_case(c, outs, &r);
    if (r.verdict != PARITY_VERDICT_FAITHFUL) {
        snprintf(detail, len, "the judged run at the timed shape: err/tol %.3g", r.max_q);
        return r.verdict;
    }
    if (keep(e, 1, outs, c->n_outputs) != 0) goto nomem;
    /* On the sign-flipped inputs (what even-numbered timed calls see): no reference exists for
     * them, so this run is trusted as what it is, the first call of a fresh process. The case's
     * inputs are flipped back bit for bit (the flip is an involution). */
    bench_flip_first_float(call);
    v = run_alone(c, k, outs, call, timeout_s, detail, len);
    bench_flip_first_float(call);
    if (v != PARITY_VERDICT_FAITHFUL) {
        bench_expect_free(e);
        return v;
    }
    if (keep(e, 0, outs, c->n_outputs) != 0) goto nomem;
    return PARITY_VERDICT_FAITHFUL;
nomem:
    bench_expect_free(e);
    snprintf(detail, len, "cannot keep the judged run's outputs (out of memory)");
    return PARITY_VERDICT_CRASHED;
}

int bench_expect_check(const bench_expect_t *e, int r, bench_mismatch_t *m)
{
    int p = r % 2; /* even calls: flipped inputs */
    const parity_case_t *c = e->c;
    int bad = -1;
    if (e->nondet) {
        if (p == 0) return 0; /* no reference for the flipped inputs: only case-input calls */
        parity_wl_result_t w;
        memset(&w, 0, sizeof w);
        w.verdict = PARITY_VERDICT_FAITHFUL;
        parity_judge_case(c, e->outs, &w);
        if (w.verdict == PARITY_VERDICT_FAITHFUL) return 0;
        bad = 0;
        for (int i = 0; i < c->n_outputs; i++)
            if (strcmp(c->op->output_names[i], w.worst.output) == 0) bad = i;
        *m = (bench_mismatch_t){r, bad, 1, w.max_q, w.nan_count};
        return 1;
    }
    for (int i = 0; i < c->n_outputs && bad < 0; i++)
        if (memcmp(e->outs[i]->view.data, e->exp[p][i], e->outs[i]->nbytes) != 0) bad = i;
    if (bad < 0) return 0;
    *m = (bench_mismatch_t){r, bad, 0, NAN, 0};
    if (p == 1) { /* the case's inputs: how wrong is it? */
        parity_wl_result_t w;
        memset(&w, 0, sizeof w);
        w.verdict = PARITY_VERDICT_FAITHFUL;
        parity_judge_case(c, e->outs, &w);
        m->judged = 1;
        m->q = w.max_q;
        m->nan_count = w.nan_count;
    } else {
        int64_t n = 0; /* NaN left in the outputs: the call did not write them */
        for (int i = 0; i < c->n_outputs; i++) {
            int64_t ne = parity_tensor_numel(&e->outs[i]->view);
            for (int64_t j = 0; j < ne; j++) n += isnan(parity_tensor_get(&e->outs[i]->view, j));
        }
        m->nan_count = n;
    }
    return 1;
}

void bench_row_judge(parity_bench_row_t *row, const parity_case_t *c, const bench_mismatch_t m[2],
                     int warmup)
{
    if (m[0].run < 0) {
        row->timed_outputs = 1;
        return;
    }
    row->timed_outputs = 0;
    /* Classify by the judged mismatch when there is one: wrong (err/tol > 1 or NaN) is stale
     * outputs; within tolerance is nondeterminism the kernel did not declare. A mismatch seen only
     * on flipped inputs has no reference: NaN (outputs left unwritten) is stale, else the bits
     * merely differ. */
    const bench_mismatch_t *x = m[1].run >= 0 ? &m[1] : &m[0];
    int stale = x->nan_count > 0 || (x->judged && !(x->q <= 1));
    char when[64];
    if (x->run < warmup) snprintf(when, sizeof when, "warm-up call %d", x->run + 1);
    else snprintf(when, sizeof when, "timed call %d", x->run - warmup + 1);
    char q[32] = "not judged: sign-flipped inputs";
    if (x->judged) snprintf(q, sizeof q, "err/tol %.3g", x->q);
    row->verdict = stale ? PARITY_VERDICT_STALE_CACHE : PARITY_VERDICT_NONDETERMINISTIC;
    snprintf(row->check_detail, sizeof row->check_detail,
             "%s: output %s is not the judged run's (%s, %lld NaN)%s", when,
             c->op->output_names[x->output], q, (long long)x->nan_count,
             stale ? ": work skipped or answered from a memo on repeated calls"
                   : ": bits differ between calls (declare PARITY_KERNEL_NONDETERMINISTIC if intended)");
}

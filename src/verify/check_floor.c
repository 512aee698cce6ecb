/* The noise floor's runs in one child process: the faithful catalog variants of a floor (our own
 * builtin kernels, never a candidate) run one after another in a single fork, each on
 * NaN-prefilled pooled outputs, and each is judged in that child. Before, every variant had a
 * child of its own, and each child paid the page tables of the shared outputs again (a fork
 * copies them for private memory only): on the quick workloads of embedding_rmsnorm_bwd that was
 * about a third of a cold check (docs/check-speed.md). The value is the same: the same kernels,
 * the same bytes in front of each call, the same judgement code (parity_judge_output).
 * Deliberately not here: candidates. A candidate is judged by the parent from what it wrote,
 * never by code running in the candidate's own process. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/core/parallel.h"
#include "src/kernel/kernel_util.h"
#include "src/verify/check_impl.h"
#include "src/verify/verify_impl.h"

enum { F_PENDING = 0, F_JUDGED = 1, F_FAILED = 2 }; /* per variant, in the shared page */

typedef struct {
    volatile int32_t state[CHECK_N_FLOOR_KERNELS];
    volatile double q[CHECK_N_FLOOR_KERNELS];
} floor_shared_t;

/* The variants' thread count: every core (parity_num_threads), or --threads when it is more. The
 * floor is a property of the catalog's faithful variants, whose bits do not depend on the thread
 * count they are given (tests/test_check_fill.c, catalog_bits_ignore_threads), so this changes
 * its time, never its value: a production floor's fp32_seq ran on one core while the others
 * waited (docs/check-speed.md). Candidates keep --threads. */
static int floor_threads(const parity_check_opts_t *opts)
{
    int n = parity_num_threads();
    return opts->n_threads > n ? opts->n_threads : n;
}

/* Variant f on case c into the pooled outputs o: what run_one does for a floor run (guards
 * reset, NaN prefill, the call, the guard and input checks, the judgement), in this process.
 * Returns F_JUDGED with *q, or F_FAILED (the variant declined, failed, wrote out of bounds or
 * changed an input: not a value to keep, as before). */
static int floor_one(const parity_case_t *c, parity_tensor_t *const *o,
                     const parity_abi_kernel_t *k, const parity_check_opts_t *opts,
                     const uint64_t *in_hash, double *const *tp, double *q)
{
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    for (int i = 0; i < c->n_inputs; i++) parity_tensor_reset_guards(c->inputs[i]);
    for (int i = 0; i < c->n_outputs; i++) {
        parity_tensor_reset_guards(o[i]);
        /* a catalog kernel that writes its outputs before reading them: the prefill cannot reach
         * its result (a vocabulary-sized pass per variant, a third of a cold quick check's fills) */
        if (!(k->flags & PARITY_KERNEL_WRITES_OUTPUTS_FIRST)) parity_tensor_fill_nan(o[i]);
    }
    parity_case_make_call(c, in, out, (parity_tensor_t **)o, floor_threads(opts), c->seed, &call);
    if (k->run(&call) != PARITY_KERNEL_OK) return F_FAILED;
    for (int i = 0; i < c->n_outputs; i++)
        if (!parity_tensor_guards_ok(o[i])) return F_FAILED;
    for (int i = 0; i < c->n_inputs; i++)
        if (!parity_tensor_guards_ok(c->inputs[i]) || parity_tensor_hash(c->inputs[i]) != in_hash[i])
            return F_FAILED;
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    res.verdict = PARITY_VERDICT_FAITHFUL;
    for (int i = 0; i < c->n_outputs; i++) {
        double m = tp[i] && o[i]->view.dtype == PARITY_DT_F32
                       ? parity_judge_max_q(&c->ref[i], &o[i]->view, tp[i]) : NAN;
        if (isnan(m)) parity_judge_output(&c->ref[i], &o[i]->view, PARITY_DT_F32, i, &res, NULL);
        else if (m > res.max_q) res.max_q = m;
    }
    *q = res.max_q;
    return F_JUDGED;
}

/* The variants' tolerances, computed once (their outputs are fp32 and accumulated in fp32, as
 * check_floor_kernels requires): the judge's largest err/tol from them is the same number as from
 * a full judgement, without forming every tolerance again for every variant (those were the
 * larger part of a cold quick check's floor: docs/check-speed.md). With one variant, or without
 * memory for them, tp[i] is NULL and the full judgement runs. */
static void floor_tolerances(const parity_case_t *c, int nf, double **tp)
{
    for (int i = 0; i < c->n_outputs; i++)
        tp[i] = nf > 1 ? parity_judge_tolerances(&c->ref[i], PARITY_DT_F32, PARITY_DT_F32) : NULL;
}

/* How many variants were used when the first not judged is f (nf: all judged); *modified when
 * then an input differs from its hash before the runs. */
static int floor_used(const parity_case_t *c, const uint64_t *in_hash, int f, int nf, int *modified)
{
    *modified = 0;
    if (f >= nf) return nf;
    for (int i = 0; i < c->n_inputs; i++)
        if (parity_tensor_hash(c->inputs[i]) != in_hash[i]) *modified = 1;
    return f + 1;
}

int check_floor_child(const parity_case_t *c, parity_tensor_t *const *o, const uint64_t *in_hash,
                      const parity_abi_kernel_t *const *fk, int nf, const parity_check_opts_t *opts,
                      double *q, int *judged, int *modified)
{
    for (int f = 0; f < nf; f++) judged[f] = 0;
    floor_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pid = -1;
    if (sh != MAP_FAILED) {
        memset(sh, 0, sizeof *sh);
        fflush(NULL);
        pid = fork();
    }
    if (pid <= 0) { /* the child, or no child to be had: run here (as parity_run_isolated does) */
        if (pid == 0) {
            parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
            parity_abi_call_t call;
            parity_case_make_call(c, in, out, (parity_tensor_t **)o, floor_threads(opts), c->seed, &call);
            parity_populate_call(&call); /* once for all the variants: the point of this file */
        }
        double *tp[PARITY_OP_MAX_ARGS] = {0};
        floor_tolerances(c, nf, tp);
        int f = 0;
        for (; f < nf; f++) {
            double qf = 0;
            int s = floor_one(c, o, fk[f], opts, in_hash, tp, &qf);
            if (pid == 0) {
                sh->q[f] = qf;
                __atomic_store_n(&sh->state[f], s, __ATOMIC_SEQ_CST);
            } else {
                q[f] = qf;
                judged[f] = s == F_JUDGED;
            }
            if (s != F_JUDGED) break; /* inputs may have changed: the caller rebuilds, goes on */
        }
        if (pid == 0) _exit(0);
        for (int i = 0; i < c->n_outputs; i++) free(tp[i]);
        if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
        return floor_used(c, in_hash, f, nf, modified);
    }
    /* Each variant has opts->timeout_s from the end of the one before (or from the fork). The
     * child's end wakes the wait at once; the variants' progress (the shared page) is read at
     * least every FLOOR_LOOK_S, which is all the per-variant clock needs. */
    const double FLOOR_LOOK_S = 0.05;
    double t_last = parity_now();
    int seen = 0, status = 0, fd = parity_child_fd(pid);
    long sleep_us = 200;
    for (;;) {
        double left = opts->timeout_s - (parity_now() - t_last);
        int w = parity_child_wait(pid, fd, &status, left < FLOOR_LOOK_S ? left : FLOOR_LOOK_S, &sleep_us);
        while (seen < nf && __atomic_load_n(&sh->state[seen], __ATOMIC_SEQ_CST) != F_PENDING) {
            seen++;
            t_last = parity_now();
            sleep_us = 200;
        }
        if (w != 0) break; /* ended (or waitpid failed) */
        if (parity_now() - t_last > opts->timeout_s) {
            parity_child_kill(pid, &status);
            break;
        }
    }
    if (fd >= 0) close(fd);
    int f = 0;
    for (; f < nf; f++) {
        int s = __atomic_load_n(&sh->state[f], __ATOMIC_SEQ_CST);
        if (s == F_PENDING) break; /* the variant that crashed or timed out */
        judged[f] = s == F_JUDGED;
        q[f] = sh->q[f];
        if (s != F_JUDGED) break;
    }
    munmap(sh, sizeof *sh);
    return floor_used(c, in_hash, f, nf, modified);
}

/* Declared ops: running a kernel on a declared op's workloads as `parity check` runs a plugin
 * kernel -- in a child process (fork: a crash, an exit or a hang is a verdict, the report always
 * completes), a decoy call first (float inputs x -2, so state kept across calls shows), the
 * judged call into NaN-filled outputs followed by guard bytes (out-of-bounds writes), inputs
 * verified unmodified, and a rerun compared bit for bit on non-production workloads.
 * Outputs come back through a shared anonymous mapping; judging is custom_tol.c's.
 * Deliberately not here: worker pools, MPI, the noise floor (verify.h's harness has them). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/custom/custom_impl.h"

#define GUARD 64 /* bytes after each output that a kernel must leave alone */
#define GUARD_BYTE 0xA5

typedef struct {
    int rc_decoy, rc_main, rc_rerun;
    int modified; /* 1 + index of the first modified input, 0: none */
    int done;
    double seconds;
} child_status_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_nan(void *p, int dt, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        if (dt == PARITY_DT_F32) ((uint32_t *)p)[j] = 0x7fc00000u;
        else ((uint16_t *)p)[j] = dt == PARITY_DT_BF16 ? 0x7fc0u : 0x7e00u;
    }
}

static void call_init(const custom_case_t *c, const parity_abi_kernel_t *k, parity_abi_tensor_t *in,
                      parity_abi_tensor_t *out, parity_abi_call_t *call)
{
    memset(call, 0, sizeof *call);
    call->abi_version = PARITY_ABI_VERSION;
    call->struct_size = sizeof *call;
    call->op = c->op->d->name;
    call->n_inputs = c->op->n_in;
    call->n_outputs = c->op->n_out;
    call->inputs = in;
    call->outputs = out;
    call->n_attrs = c->op->d->n_attrs;
    call->attr_names = c->op->d->attr_names;
    call->attr_values = c->op->d->attr_values;
    call->seed = 1;
    call->n_threads = 1;
    (void)k;
}

/* The child: never returns. */
static void child(const custom_case_t *c, const parity_abi_kernel_t *k, int small, double timeout,
                  void *const *outA, void *const *outB, child_status_t *st)
{
    const parity_custom_op_t *op = c->op;
    int dt = c->dtype, odt = k->out_dtype;
    parity_abi_tensor_t in[PARITY_CUSTOM_MAX_ARGS], out[PARITY_CUSTOM_MAX_ARGS];
    void *kin[PARITY_CUSTOM_MAX_ARGS] = {0};
    parity_abi_call_t call;
    unsigned secs = (unsigned)ceil(timeout > 0 ? timeout : 120);
    call_init(c, k, in, out, &call);
    for (int i = 0; i < op->n_in; i++) { /* the kernel gets copies; the case's stay pristine */
        int fl = custom_is_float_role(op->role[i]);
        size_t bytes = (size_t)c->n_in[i] * (fl ? custom_dtype_size(dt) : sizeof(int64_t));
        if (!(kin[i] = malloc(bytes ? bytes : 1))) _exit(4);
        memcpy(kin[i], fl ? (small ? c->decoy[i] : c->store[i]) : (void *)c->ids[i], bytes);
        custom_tensor(op, &op->in[i], c->wl->size, kin[i], fl ? dt : PARITY_DT_I64, &in[i]);
    }
    if (small) { /* the decoy, into private outputs */
        for (int o = 0; o < op->n_out; o++) {
            void *p = malloc((size_t)c->n_out[o] * custom_dtype_size(odt) + 1);
            if (!p) _exit(4);
            fill_nan(p, odt, c->n_out[o]);
            custom_tensor(op, &op->out[o], c->wl->size, p, odt, &out[o]);
        }
        alarm(secs);
        st->rc_decoy = k->run(&call);
        for (int i = 0; i < op->n_in; i++) /* now the real inputs */
            if (custom_is_float_role(op->role[i]))
                memcpy(kin[i], c->store[i], (size_t)c->n_in[i] * custom_dtype_size(dt));
    }
    for (int o = 0; o < op->n_out; o++) custom_tensor(op, &op->out[o], c->wl->size, outA[o], odt, &out[o]);
    alarm(secs);
    double t0 = now();
    st->rc_main = k->run(&call);
    st->seconds = now() - t0;
    for (int i = 0; i < op->n_in && !st->modified; i++) {
        int fl = custom_is_float_role(op->role[i]);
        size_t bytes = (size_t)c->n_in[i] * (fl ? custom_dtype_size(dt) : sizeof(int64_t));
        if (memcmp(kin[i], fl ? c->store[i] : (void *)c->ids[i], bytes) != 0) st->modified = 1 + i;
    }
    if (small && st->rc_main == PARITY_KERNEL_OK && !st->modified) {
        for (int o = 0; o < op->n_out; o++) custom_tensor(op, &op->out[o], c->wl->size, outB[o], odt, &out[o]);
        alarm(secs);
        st->rc_rerun = k->run(&call);
    }
    alarm(0);
    st->done = 1;
    _exit(0);
}

static int guards_ok(const unsigned char *g)
{
    for (int j = 0; j < GUARD; j++)
        if (g[j] != GUARD_BYTE) return 0;
    return 1;
}

void custom_run_one(const custom_case_t *c, const parity_abi_kernel_t *k, const parity_custom_opts_t *opts,
                    parity_custom_result_t *r, void **keep)
{
    const parity_custom_op_t *op = c->op;
    int odt = k->out_dtype, small = !c->wl->production;
    size_t esz = custom_dtype_size(odt), off[2][PARITY_CUSTOM_MAX_ARGS], total = sizeof(child_status_t);
    total = (total + 63) & ~(size_t)63;
    for (int b = 0; b < 2; b++)
        for (int o = 0; o < op->n_out; o++) {
            off[b][o] = total;
            total += ((size_t)c->n_out[o] * esz + GUARD + 63) & ~(size_t)63;
        }
    unsigned char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        r->verdict = PARITY_VERDICT_CRASHED;
        snprintf(r->detail, sizeof r->detail, "harness: cannot map %zu bytes for the outputs", total);
        return;
    }
    child_status_t *st = (child_status_t *)m;
    memset(st, 0, sizeof *st);
    void *outA[PARITY_CUSTOM_MAX_ARGS], *outB[PARITY_CUSTOM_MAX_ARGS];
    for (int o = 0; o < op->n_out; o++) {
        outA[o] = m + off[0][o];
        outB[o] = m + off[1][o];
        for (int b = 0; b < 2; b++) {
            fill_nan(m + off[b][o], odt, c->n_out[o]);
            memset(m + off[b][o] + (size_t)c->n_out[o] * esz, GUARD_BYTE, GUARD);
        }
    }
    fflush(NULL); /* the child must not flush the parent's buffered output a second time */
    pid_t pid = fork();
    if (pid == 0) child(c, k, small, opts->timeout, outA, outB, st);
    int status = 0;
    if (pid < 0) {
        r->verdict = PARITY_VERDICT_CRASHED;
        snprintf(r->detail, sizeof r->detail, "harness: fork failed: %s", strerror(errno));
        goto done;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    r->seconds = st->seconds;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        r->verdict = PARITY_VERDICT_TIMEOUT;
        snprintf(r->detail, sizeof r->detail, "no result within %g s per call; the child was killed", opts->timeout);
    } else if (WIFSIGNALED(status)) {
        r->verdict = PARITY_VERDICT_CRASHED;
        snprintf(r->detail, sizeof r->detail, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else if (!st->done || WEXITSTATUS(status) != 0) {
        r->verdict = PARITY_VERDICT_CRASHED;
        snprintf(r->detail, sizeof r->detail, "the kernel's process exited with status %d", WEXITSTATUS(status));
    } else if (st->rc_main == PARITY_KERNEL_UNSUPPORTED || st->rc_decoy == PARITY_KERNEL_UNSUPPORTED) {
        r->verdict = PARITY_VERDICT_UNSUPPORTED;
        snprintf(r->detail, sizeof r->detail, "the kernel returned PARITY_KERNEL_UNSUPPORTED");
    } else if (st->rc_main != PARITY_KERNEL_OK || st->rc_decoy != PARITY_KERNEL_OK) {
        r->verdict = PARITY_VERDICT_CRASHED;
        snprintf(r->detail, sizeof r->detail, "the kernel returned %d", st->rc_main ? st->rc_main : st->rc_decoy);
    } else if (st->modified) {
        r->verdict = PARITY_VERDICT_MODIFIED_INPUTS;
        snprintf(r->detail, sizeof r->detail, "input %s was written", op->in[st->modified - 1].name);
    } else {
        for (int o = 0; o < op->n_out; o++)
            for (int b = 0; b < (small ? 2 : 1); b++)
                if (!guards_ok(m + off[b][o] + (size_t)c->n_out[o] * esz)) {
                    r->verdict = PARITY_VERDICT_OOB;
                    snprintf(r->detail, sizeof r->detail, "wrote past the end of output %s", op->out[o].name);
                    goto done;
                }
        custom_judge(c, odt, outA, r);
        for (int o = 0; keep && o < op->n_out; o++) /* the outputs, for the baseline rules */
            if ((keep[o] = malloc((size_t)c->n_out[o] * esz + 1)) != NULL)
                memcpy(keep[o], outA[o], (size_t)c->n_out[o] * esz);
        if (r->verdict == PARITY_VERDICT_FAITHFUL && small && !(k->flags & PARITY_KERNEL_NONDETERMINISTIC)) {
            if (st->rc_rerun != PARITY_KERNEL_OK) {
                r->verdict = PARITY_VERDICT_CRASHED;
                snprintf(r->detail, sizeof r->detail, "the rerun returned %d", st->rc_rerun);
            }
            for (int o = 0; r->verdict == PARITY_VERDICT_FAITHFUL && o < op->n_out; o++)
                if (memcmp(outA[o], outB[o], (size_t)c->n_out[o] * esz) != 0) {
                    r->verdict = PARITY_VERDICT_NONDETERMINISTIC;
                    snprintf(r->detail, sizeof r->detail, "output %s differs bit for bit on a rerun", op->out[o].name);
                }
        }
    }
done:
    munmap(m, total);
}

parity_status_t parity_custom_check(const parity_custom_op_t *op, const parity_abi_kernel_t *k,
                                    const parity_custom_opts_t *opts, parity_custom_result_t *results,
                                    int *n_results, parity_diag_t *diag)
{
    *n_results = 0;
    parity_custom_opts_t defaults;
    if (!opts) {
        parity_custom_opts_default(&defaults);
        opts = &defaults;
    }
    int odt = k->out_dtype;
    if (odt != PARITY_DT_F32 && odt != PARITY_DT_BF16 && odt != PARITY_DT_F16)
        return parity_diag_set(diag, PARITY_E_INVALID, "kernel %s: out_dtype %d: declared ops take f32, bf16 or "
                               "f16 outputs", k->name, odt);
    int found = 0;
    for (int w = 0; w < op->n_wl; w++) {
        const custom_workload_t *wl = &op->wl[w];
        if (opts->workload ? strcmp(opts->workload, wl->name) != 0 : (opts->quick && wl->production)) continue;
        found = 1;
        custom_case_t c;
        memset(&c, 0, sizeof c);
        c.op = op;
        c.wl = wl;
        c.dtype = k->in_dtype;
        parity_custom_result_t *r = &results[(*n_results)++];
        memset(r, 0, sizeof *r);
        snprintf(r->workload, sizeof r->workload, "%s", wl->name);
        r->production = wl->production;
        parity_status_t st = custom_case_inputs(&c, opts->seed, diag);
        if (!st) st = custom_case_reference(&c, diag);
        void *keep[PARITY_CUSTOM_MAX_ARGS] = {0};
        if (!st) custom_run_one(&c, k, opts, r, wl->production ? NULL : keep);
        if (!st && r->verdict == PARITY_VERDICT_UNFAITHFUL && keep[0]) custom_diagnose(&c, k->out_dtype, keep, r);
        for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(keep[o]);
        custom_case_free(&c);
        if (st) return st;
    }
    if (!found)
        return parity_diag_set(diag, PARITY_E_INVALID, "op %s has no workload %s", op->d->name,
                               opts->workload ? opts->workload : "(all production, and --quick)");
    return PARITY_OK;
}

/* Declared ops, several kernels at once (custom_op.h parity_custom_check_many, the CLI's
 * --jobs): the units -- each kernel on each workload, each kernel's baselines -- dealt out to
 * forked worker processes round-robin, their results written into one shared anonymous mapping
 * and read back in unit order, so the report cannot depend on how many workers there were.
 * A unit's kernel runs in its own child process as always (the check engine): a worker only
 * sequences units. Deliberately not here: MPI ranks, a work queue (the units of one declared op
 * are few and alike; round-robin keeps the assignment a pure function of the unit index). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/custom/custom_impl.h"

typedef struct {
    int done;
    parity_status_t st;
    char msg[1024];
    int n;                    /* results written (0 or 1) */
    parity_custom_result_t r; /* a workload unit */
    parity_custom_baselines_t b;
} unit_t;

typedef struct {
    int kernel, workload; /* workload -1: the kernel's baselines */
} unit_id_t;

static void run_unit(const parity_custom_op_t *op, const parity_abi_kernel_t *const *k,
                     const parity_custom_opts_t *opts, const unit_id_t *id, unit_t *u)
{
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    if (id->workload < 0) {
        u->st = parity_custom_baselines(op, k[id->kernel], opts, &u->b, &diag);
    } else {
        parity_custom_opts_t o = *opts;
        o.workload = op->wl[id->workload].name;
        parity_custom_result_t res[PARITY_CUSTOM_MAX_WORKLOADS];
        u->st = parity_custom_check(op, k[id->kernel], &o, res, &u->n, &diag);
        if (u->n > 0) u->r = res[0];
    }
    snprintf(u->msg, sizeof u->msg, "%s", diag.msg);
    u->done = 1;
}

parity_status_t parity_custom_check_many(const parity_custom_op_t *op, const parity_abi_kernel_t *const *k, int n,
                                         const parity_custom_opts_t *opts, int baselines, int jobs,
                                         parity_custom_kernel_report_t *out, parity_diag_t *diag)
{
    int nw = 0, sel[PARITY_CUSTOM_MAX_WORKLOADS];
    for (int w = 0; w < op->n_wl; w++)
        if (opts->workload ? strcmp(opts->workload, op->wl[w].name) == 0 : !(opts->quick && op->wl[w].production))
            sel[nw++] = w;
    if (nw == 0) { /* the serial path's error, for every kernel */
        for (int i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].st = PARITY_E_INVALID;
            snprintf(out[i].msg, sizeof out[i].msg, "op %s has no workload %s", op->d->name,
                     opts->workload ? opts->workload : "(all production, and --quick)");
        }
        return PARITY_OK;
    }
    int nu = n * (nw + (baselines != 0));
    unit_id_t *ids = malloc((size_t)(nu > 0 ? nu : 1) * sizeof *ids);
    size_t bytes = (size_t)(nu > 0 ? nu : 1) * sizeof(unit_t);
    unit_t *u = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!ids || u == MAP_FAILED) {
        free(ids);
        if (u != MAP_FAILED) munmap(u, bytes);
        return parity_diag_set(diag, PARITY_E_NOMEM, "cannot map %zu bytes for %d units", bytes, nu);
    }
    memset(u, 0, bytes);
    int q = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < nw; j++) ids[q++] = (unit_id_t){i, sel[j]};
        if (baselines) ids[q++] = (unit_id_t){i, -1};
    }
    if (jobs > nu) jobs = nu;
    if (jobs <= 1) {
        for (int x = 0; x < nu; x++) run_unit(op, k, opts, &ids[x], &u[x]);
    } else {
        fflush(NULL); /* the workers must not flush the parent's buffered output again */
        pid_t *pid = calloc((size_t)jobs, sizeof *pid);
        for (int j = 0; pid && j < jobs; j++) {
            pid[j] = fork();
            if (pid[j] == 0) {
                for (int x = j; x < nu; x += jobs) run_unit(op, k, opts, &ids[x], &u[x]);
                _exit(0);
            }
        }
        for (int j = 0; pid && j < jobs; j++) {
            int status;
            if (pid[j] > 0)
                while (waitpid(pid[j], &status, 0) < 0 && errno == EINTR) {}
        }
        for (int x = 0; x < nu; x++) /* no memory for the pids, or a fork failed: run those here */
            if (!u[x].done && (!pid || pid[x % jobs] < 0)) run_unit(op, k, opts, &ids[x], &u[x]);
        free(pid);
    }
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].st = PARITY_OK;
    }
    for (int x = 0; x < nu; x++) {
        parity_custom_kernel_report_t *o = &out[ids[x].kernel];
        if (!u[x].done) {
            st = parity_diag_set(diag, PARITY_E_IO, "a --jobs worker died before finishing its units");
            break;
        }
        if (o->st) continue; /* the kernel's first error, in unit order, is the serial one */
        if (u[x].st) {
            o->st = u[x].st;
            snprintf(o->msg, sizeof o->msg, "%s", u[x].msg);
        } else if (ids[x].workload == -1) {
            o->baselines = u[x].b;
        } else if (u[x].n > 0 && o->n_results < PARITY_CUSTOM_MAX_WORKLOADS) {
            o->results[o->n_results++] = u[x].r;
        }
    }
    munmap(u, bytes);
    free(ids);
    return st;
}

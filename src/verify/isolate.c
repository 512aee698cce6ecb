/* Runs a candidate kernel isolated in a forked child (verify.h parity_run_isolated, _step): the
 * child's page tables for the shared-memory tensors filled in one call per tensor, a decoy call
 * and a step before the judged call when asked, and the verdict of how the child ended (signal,
 * exit status, timeout). Split from verify.c, which judges the outputs. */
#include "parity/verify.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/core/parallel.h"
#include "src/verify/verify_impl.h"

/* A forked child does not inherit the page tables of shared mappings (Linux copies them for
 * private memory only), so a kernel touching a pooled output of hundreds of MB would take a
 * fault per 4 KiB page. One madvise per tensor fills the tables in a single call instead:
 * measured 2-3x less time than first-touch faults for 800 MB on this machine
 * (docs/check-speed.md). Outputs too are populated for reading: their pages exist already (the
 * parent wrote them), a read fault on shared memory maps 16 of them at once (fault-around), and
 * shared anonymous memory needs no write notification, so those entries are writable and the
 * kernel's stores take no further fault; MADV_POPULATE_WRITE takes one fault per page (824 MB:
 * 0.39-0.58 s against 0.99-1.27 s here, 13k against 211k faults). Where entries come out
 * read-only (another kernel version) a store traps once per page, as it would without this.
 * Advisory: an older kernel without MADV_POPULATE_* changes nothing. */
static void populate(const parity_abi_tensor_t *t, int n, int write)
{
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    for (int i = 0; i < n; i++) {
        size_t es = parity_dtype_size((parity_dtype_t)t[i].dtype);
        int64_t ne = parity_tensor_numel(&t[i]);
        if (!t[i].data || es == 0 || ne <= 0) continue;
        uintptr_t a = (uintptr_t)t[i].data, e = a + (uintptr_t)ne * es;
        a &= ~(uintptr_t)(page - 1);
        e = (e + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
        (void)write;
        parity_madvise_parallel((void *)a, e - a, MADV_POPULATE_READ);
    }
#else
    (void)t; (void)n; (void)write;
#endif
}

static void populate_call(const parity_abi_call_t *c)
{
    populate(c->inputs, c->n_inputs, 0);
    populate(c->outputs, c->n_outputs, 1);
}

/* A decoy's tensors, less the outputs it shares with the judged call (check.c writes the decoy
 * into the judged buffers): those are populated with the call's. */
static void populate_decoy(const parity_abi_call_t *d, const parity_abi_call_t *c)
{
    populate(d->inputs, d->n_inputs, 0);
    for (int i = 0; i < d->n_outputs; i++) {
        int shared = 0;
        for (int j = 0; j < c->n_outputs; j++) shared |= d->outputs[i].data == c->outputs[j].data;
        if (!shared) populate(&d->outputs[i], 1, 1);
    }
}

/* The verdict of a child step's exit status (PARITY_CHILD_STEP_*, 64 and 65 as the kernel's). */
static parity_verdict_t parity_child_status_verdict(int code, const parity_abi_call_t *call,
                                                    char *detail, size_t detail_len)
{
    if (code == 64) {
        snprintf(detail, detail_len, "kernel declined this shape/dtype");
        return PARITY_VERDICT_UNSUPPORTED;
    }
    if (code >= PARITY_CHILD_STEP_MODIFIED && code < PARITY_CHILD_STEP_MODIFIED + PARITY_OP_MAX_ARGS) {
        int i = code - PARITY_CHILD_STEP_MODIFIED;
        const char *name = i < call->n_inputs && call->inputs[i].name ? call->inputs[i].name : "?";
        snprintf(detail, detail_len, "input %s changed during a call before the judged one (on the "
                 "same buffers, other contents)", name);
        return PARITY_VERDICT_MODIFIED_INPUTS;
    }
    snprintf(detail, detail_len, "kernel returned an error");
    return PARITY_VERDICT_CRASHED;
}

parity_verdict_t parity_run_isolated(const parity_abi_kernel_t *k, const parity_abi_call_t *decoy,
                                     const parity_abi_call_t *call, double timeout_s, char *detail,
                                     size_t detail_len, double *seconds)
{
    return parity_run_isolated_step(k, decoy, NULL, NULL, call, timeout_s, detail, detail_len, seconds);
}

parity_verdict_t parity_run_isolated_step(const parity_abi_kernel_t *k, const parity_abi_call_t *decoy,
                                          parity_child_step_fn step, void *step_ctx,
                                          const parity_abi_call_t *call, double timeout_s,
                                          char *detail, size_t detail_len, double *seconds)
{
    double t0 = parity_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { /* cannot isolate: a status, never an unisolated run (issue #35) */
        *seconds = parity_now() - t0;
        snprintf(detail, detail_len, "not run: parity could not fork to isolate the kernel (%s)", strerror(errno));
        return PARITY_VERDICT_CRASHED;
    }
    if (pid == 0) {
        /* The decoy call runs first in the same process, on different inputs of the same shape:
         * a kernel that caches results across calls returns the decoy's answer and fails. */
        if (decoy) populate_decoy(decoy, call);
        populate_call(call);
        if (decoy) (void)k->run(decoy);
        int sc = step ? step(step_ctx, k, call) : 0;
        if (sc) _exit(sc == PARITY_CHILD_STEP_DONE ? 0 : sc);
        int rc = k->run(call);
        _exit(rc == PARITY_KERNEL_OK ? 0 : rc == PARITY_KERNEL_UNSUPPORTED ? 64 : 65);
    }
    int status = 0, fd = parity_child_fd(pid);
    long sleep_us = 200;
    int w = parity_child_wait(pid, fd, &status, timeout_s - (parity_now() - t0), &sleep_us);
    if (fd >= 0) close(fd);
    if (w == 0) {
        parity_child_kill(pid, &status);
        *seconds = parity_now() - t0;
        snprintf(detail, detail_len, "no result after %.0f s (killed)", timeout_s);
        return PARITY_VERDICT_TIMEOUT;
    }
    *seconds = parity_now() - t0;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(detail, detail_len, "killed by signal %d (%s)", sig, strsignal(sig));
        return PARITY_VERDICT_CRASHED;
    }
    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        if (code == 0) return PARITY_VERDICT_FAITHFUL; /* "ran"; judged later */
        if (code == 64) {
            snprintf(detail, detail_len, "kernel declined this shape/dtype");
            return PARITY_VERDICT_UNSUPPORTED;
        }
        if (code == 65) snprintf(detail, detail_len, "kernel returned an error");
        else if (code >= PARITY_CHILD_STEP_MODIFIED && code < PARITY_CHILD_STEP_MODIFIED + PARITY_OP_MAX_ARGS)
            return parity_child_status_verdict(code, call, detail, detail_len);
        else snprintf(detail, detail_len, "kernel exited the process with status %d", code);
        return PARITY_VERDICT_CRASHED;
    }
    snprintf(detail, detail_len, "child ended abnormally");
    return PARITY_VERDICT_CRASHED;
}

void parity_populate_call(const parity_abi_call_t *c) { populate_call(c); }

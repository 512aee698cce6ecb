/* The grid of a check: which workloads, which units (the noise floor of each workload unless the
 * cache has it, each kernel on each workload, each baseline rule on each kernel), who runs them
 * (this process, --jobs worker processes, MPI ranks through an OR-exchange), and the verdicts
 * from the results. The units themselves are check.c; docs/check-speed.md says why it is cut so.
 * Deliberately not here: MPI itself (the CLI provides the exchange; libparity never links it). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include "src/verify/check_cache.h"
#include "src/verify/check_impl.h"
#include "parity/verify.h"
#include "src/verify/verify_impl.h"

#define MAX_WL 192

enum { UNIT_FLOOR = 1, UNIT_KERNEL = 2, UNIT_BASELINE = 3 };

typedef struct {
    int kind, w, k, b;
} unit_t;

/* What a unit leaves for the grid: plain bytes (no pointers that matter), so it can be written
 * by a worker into shared memory or OR-ed across ranks. Units a process does not own stay all
 * zero bytes, which is what makes the OR an exact gather. */
typedef struct {
    int32_t done;
    int32_t status;
    int32_t floor_complete;
    double floor_q;
    parity_wl_result_t wl;
    parity_baseline_result_t base;
    parity_diag_t diag;
} unit_out_t;

typedef struct {
    int32_t known;
    double q;
} floor_known_t;

void parity_check_exec_default(parity_check_exec_t *x)
{
    memset(x, 0, sizeof *x);
    x->jobs = 1;
    x->n_ranks = 1;
}

/* The workloads of the run into store (MAX_WL entries); *n_wl of them. */
static parity_status_t resolve_workloads(const parity_op_t *op, const parity_check_opts_t *opts,
                                         parity_workload_t *store, int *n_out, parity_diag_t *diag)
{
    int n_wl = 0;
    if (opts->workload) {
        parity_status_t ws = parity_op_workload(op, opts->workload, &store[0]);
        if (ws == PARITY_E_INVALID)
            return parity_diag_set(diag, PARITY_E_INVALID, "workload '%s': expected NAME@NxD or "
                                   "NAME@NxDxV with N*D and V*D at most 2^31", opts->workload);
        if (ws == PARITY_OK) n_wl = 1;
    } else {
        for (int i = 0; i < op->n_presets && n_wl < MAX_WL; i++)
            if (!(opts->quick && op->presets[i].production)) store[n_wl++] = op->presets[i];
    }
    if (n_wl > 0 && opts->shape_n > 0 && opts->shape_d > 0) {
        /* Each selected preset at the requested shape and at two shapes around it. */
        int base_n = n_wl;
        parity_workload_t *bases = malloc((size_t)base_n * sizeof *bases);
        if (!bases) return PARITY_E_NOMEM;
        memcpy(bases, store, (size_t)base_n * sizeof *bases);
        n_wl = 0;
        for (int i = 0; i < base_n; i++) {
            const int64_t dn[3] = {0, 1, -1}, dd[3] = {0, 1, -1};
            char base[40];
            snprintf(base, sizeof base, "%s", bases[i].name);
            char *at = strchr(base, '@');
            if (at) *at = 0;
            for (int f = 0; f < 3 && n_wl < MAX_WL; f++) {
                int64_t n = opts->shape_n + dn[f], d = opts->shape_d + dd[f];
                int64_t v = opts->shape_v > 0 ? opts->shape_v : bases[i].v;
                if (n < 1 || d < 1) continue;
                char name[128];
                /* Ops without a vocabulary (V = 0: rmsnorm, attention's H is a preset's) take NxD. */
                if (v > 0)
                    snprintf(name, sizeof name, "%s@%lldx%lldx%lld", base, (long long)n, (long long)d, (long long)v);
                else
                    snprintf(name, sizeof name, "%s@%lldx%lld", base, (long long)n, (long long)d);
                parity_diag_t why = {{0}};
                if (parity_op_workload_ex(op, name, &store[n_wl], &why) != PARITY_OK) {
                    free(bases);
                    return parity_diag_set(diag, PARITY_E_INVALID, "--shape %lldx%lld: %s", (long long)n,
                                           (long long)d, why.msg);
                }
                n_wl++;
            }
        }
        free(bases);
    }
    for (int i = 0; i < n_wl; i++)
        if (store[i].label[0]) store[i].name = store[i].label; /* derived names live in the copy */
    if (n_wl == 0) {
        char names[1024] = "";
        for (int i = 0; i < op->n_presets; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, op->presets[i].name, sizeof names - strlen(names) - 1);
        }
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "op %s has no workload '%s' (it has: %s)",
                               op->name, opts->workload ? opts->workload : "", names);
    }
    *n_out = n_wl;
    return PARITY_OK;
}

typedef struct {
    const parity_op_t *op;
    const parity_kernel_list_t *kl;
    const parity_check_opts_t *opts;
    const parity_check_exec_t *x;
    const parity_workload_t *wls;
    const parity_abi_kernel_t *fk[CHECK_N_FLOOR_KERNELS];
    int n_floor;
} grid_t;

static void run_unit(const grid_t *g, check_worker_t *w, const unit_t *u, unit_out_t *o)
{
    parity_status_t st = PARITY_OK;
    memset(o, 0, sizeof *o);
    if (!w) {
        st = parity_diag_set(&o->diag, PARITY_E_NOMEM, "check: out of memory for a worker");
    } else if (u->kind == UNIT_FLOOR) {
        const parity_workload_t *wl = &g->wls[u->w];
        /* One floor variant on production-sized workloads, where each run costs seconds. */
        int nf = wl->production && g->n_floor > 1 ? 1 : g->n_floor;
        int complete = 0;
        st = check_unit_floor(w, g->op, wl, g->opts, g->fk, nf, &o->floor_q, &complete, &o->diag);
        o->floor_complete = complete;
    } else if (u->kind == UNIT_KERNEL) {
        st = check_unit_kernel(w, g->op, &g->wls[u->w], g->opts, &g->kl->items[u->k],
                               g->x->diagnose_all, &o->wl, &o->diag);
    } else {
        st = check_unit_baseline(w, g->op, u->b, &g->kl->items[u->k], g->opts, &o->base, &o->diag);
    }
    o->status = (int32_t)st;
    o->done = 1;
}

/* The claims of --jobs workers: ranges [cb[i], cb[i+1]) of mine[0..n), *n_claims of them. A
 * claim is a workload's consecutive floor and kernel units, so that one worker builds the
 * workload's inputs and fp64 reference (and maps outputs of its shape) instead of every worker
 * that takes one of its units: with one claim per unit, two workers on the floor and the kernel
 * of the same workload built it twice, and the check cost 25% more CPU with --jobs 2 than with
 * --jobs 1 (docs/check-speed.md). With at least twice as many jobs as workloads, a small
 * workload's units are cut into up to jobs / workloads claims (building the case again is then cheaper than idle
 * workers); a production-sized workload is never cut (its case is gigabytes: one per worker could
 * exhaust memory). Baseline units are a claim each. cb has room for n + 1 entries. */
static void unit_claims(const grid_t *g, const unit_t *units, const int *mine, int n, int jobs,
                        int *cb, int *n_claims)
{
    int groups = 0;
    for (int i = 0; i < n; i++) {
        const unit_t *u = &units[mine[i]], *p = i ? &units[mine[i - 1]] : NULL;
        if (!p || u->kind == UNIT_BASELINE || p->kind == UNIT_BASELINE || u->w != p->w) groups++;
    }
    int split = groups > 0 && jobs >= 2 * groups ? jobs / groups : 1;
    int nc = 0;
    for (int i = 0; i < n;) {
        int e = i + 1;
        const unit_t *u = &units[mine[i]];
        if (u->kind != UNIT_BASELINE)
            while (e < n && units[mine[e]].kind != UNIT_BASELINE && units[mine[e]].w == u->w) e++;
        int parts = u->kind != UNIT_BASELINE && !g->wls[u->w].production ? split : 1;
        int len = e - i, per = (len + parts - 1) / parts;
        for (int b = i; b < e; b += per) cb[nc++] = b;
        i = e;
    }
    cb[nc] = n;
    *n_claims = nc;
}

/* Run the units in mine[0..n) into out[] (indexed by unit): in this process, or spread over
 * jobs forked workers that take the next claim (unit_claims) from a shared counter. Which worker
 * runs a unit changes nothing in its result (check_impl.h), so the dynamic order is safe. */
static parity_status_t run_units(const grid_t *g, const unit_t *units, const int *mine, int n,
                                 unit_out_t *out, int jobs, parity_diag_t *diag)
{
    int *cb = jobs > 1 && n > 1 ? malloc((size_t)(n + 1) * sizeof *cb) : NULL;
    int n_claims = n;
    if (cb) unit_claims(g, units, mine, n, jobs, cb, &n_claims);
    else jobs = 1;
    if (jobs > n_claims) jobs = n_claims;
    if (jobs <= 1) {
        free(cb);
        check_worker_t *w = check_worker_new();
        for (int i = 0; i < n; i++) run_unit(g, w, &units[mine[i]], &out[mine[i]]);
        check_worker_free(w);
        return PARITY_OK;
    }
    /* Worker results go to shared memory; the parent copies them out. */
    size_t bytes = (size_t)n * sizeof(unit_out_t) + 64;
    void *shm = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        free(cb);
        return parity_diag_set(diag, PARITY_E_NOMEM, "check --jobs: no shared memory");
    }
    int *next = shm;
    unit_out_t *so = (unit_out_t *)((char *)shm + 64);
    pid_t pids[256];
    int started = 0;
    fflush(NULL);
    pid_t parent = getpid();
    (void)parent;
    for (int j = 0; j < jobs && j < 256; j++) {
        pid_t pid = fork();
        if (pid < 0) break;
        if (pid == 0) {
#ifdef __linux__
            /* --jobs is the default now: a parent killed on its own (kill PID, not ^C to the
             * group) takes its workers with it instead of leaving them to finish the grid. */
            (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(0);
#endif
            check_worker_t *w = check_worker_new();
            for (;;) {
                int c = __atomic_fetch_add(next, 1, __ATOMIC_SEQ_CST);
                if (c >= n_claims) break;
                for (int i = cb[c]; i < cb[c + 1]; i++) run_unit(g, w, &units[mine[i]], &so[i]);
            }
            check_worker_free(w);
            fflush(NULL);
            _exit(0);
        }
        pids[started++] = pid;
    }
    free(cb); /* the workers have their copies */
    if (started == 0) { /* cannot fork: run here rather than give up */
        munmap(shm, bytes);
        return run_units(g, units, mine, n, out, 1, diag);
    }
    int died = 0;
    for (int j = 0; j < started; j++) {
        int status;
        while (waitpid(pids[j], &status, 0) < 0 && errno == EINTR) {}
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) died++;
    }
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < n; i++) {
        if (!so[i].done && st == PARITY_OK)
            st = parity_diag_set(diag, PARITY_E_IO, "check --jobs: %d worker process(es) died "
                                 "before finishing their units (out of memory?)", died);
        out[mine[i]] = so[i];
    }
    munmap(shm, bytes);
    return st;
}

/* The floors known from the cache (rank 0 reads; the OR hands its answer to every rank so that
 * all ranks build the same unit list). */
static parity_status_t cached_floors(const grid_t *g, int n_wl, floor_known_t *fl, parity_diag_t *diag)
{
    const parity_check_exec_t *x = g->x;
    if (x->rank == 0 && x->cache_dir)
        for (int w = 0; w < n_wl; w++) {
            char key[4096];
            int nf = g->wls[w].production && g->n_floor > 1 ? 1 : g->n_floor;
            if (check_floor_key(key, sizeof key, g->op, &g->wls[w], g->opts->seed, g->fk, nf,
                                g->opts->n_threads) == 0 &&
                check_cache_get(x->cache_dir, key, &fl[w].q))
                fl[w].known = 1;
        }
    if (x->n_ranks > 1 && x->or_all(x->or_ctx, fl, (size_t)n_wl * sizeof *fl) != 0)
        return parity_diag_set(diag, PARITY_E_IO, "check: the exchange between ranks failed");
    return PARITY_OK;
}

static void store_floor(const grid_t *g, int w, double q)
{
    char key[4096];
    int nf = g->wls[w].production && g->n_floor > 1 ? 1 : g->n_floor;
    if (check_floor_key(key, sizeof key, g->op, &g->wls[w], g->opts->seed, g->fk, nf,
                        g->opts->n_threads) == 0)
        (void)check_cache_put(g->x->cache_dir, key, q); /* a failed write costs the next run only */
}

/* A workload's size for ordering: elements of its token-major (N x D) and vocabulary-major (V x D)
 * tensors, which bound every op's inputs and outputs. Only an order: never a result. */
static double wl_size(const parity_workload_t *w)
{
    return (double)w->d * ((double)w->n + (double)w->v);
}

/* Overall verdict per kernel (parity_kernel_result_finish, verify_impl.h: shared with the Python
 * package's checks). */
static void finish_verdicts(parity_kernel_result_t *res, int n_k, int n_wl)
{
    for (int k = 0; k < n_k; k++) {
        res[k].n_wl = n_wl;
        parity_kernel_result_finish(&res[k]);
    }
}

parity_status_t parity_check_run(const parity_op_t *op, const parity_kernel_list_t *kl,
                                 const parity_check_opts_t *opts, parity_kernel_result_t **results,
                                 parity_diag_t *diag)
{
    parity_check_exec_t x;
    parity_check_exec_default(&x);
    return parity_check_run_ex(op, kl, opts, &x, results, diag);
}

parity_status_t parity_check_run_ex(const parity_op_t *op, const parity_kernel_list_t *kl,
                                    const parity_check_opts_t *opts, const parity_check_exec_t *x,
                                    parity_kernel_result_t **results, parity_diag_t *diag)
{
    *results = NULL;
    if (x->jobs < 1 || x->n_ranks < 1 || x->rank < 0 || x->rank >= x->n_ranks ||
        (x->n_ranks > 1 && !x->or_all))
        return parity_diag_set(diag, PARITY_E_INVALID, "check: jobs %d, rank %d of %d: invalid",
                               x->jobs, x->rank, x->n_ranks);
    parity_workload_t *store = calloc(MAX_WL, sizeof *store);
    if (!store) return PARITY_E_NOMEM;
    int n_wl = 0;
    parity_status_t st = resolve_workloads(op, opts, store, &n_wl, diag);
    if (st != PARITY_OK) {
        free(store);
        return st;
    }
    int n_k = kl->n;
    parity_kernel_result_t *res = calloc((size_t)(n_k ? n_k : 1), sizeof *res);
    int max_units = n_wl * (n_k + 1) + PARITY_N_BASELINES * n_k;
    unit_t *units = calloc((size_t)max_units + 1, sizeof *units);
    int *mine = calloc((size_t)max_units + 1, sizeof *mine);
    unit_out_t *out = calloc((size_t)max_units + 1, sizeof *out);
    floor_known_t *fl = calloc((size_t)n_wl, sizeof *fl);
    grid_t g = {op, kl, opts, x, store, {0}, 0};
    if (!res || !units || !mine || !out || !fl) {
        st = PARITY_E_NOMEM;
        goto fail;
    }
    for (int k = 0; k < n_k; k++) {
        res[k].kr = &kl->items[k];
        res[k].n_wl = n_wl;
        res[k].diag_wl = -1;
        if (!(res[k].wl = calloc((size_t)n_wl, sizeof *res[k].wl))) {
            st = PARITY_E_NOMEM;
            goto fail;
        }
    }
    g.n_floor = check_floor_kernels(op, g.fk);
    if (opts->noise_floor && (st = cached_floors(&g, n_wl, fl, diag)) != PARITY_OK) goto fail;
    /* The unit list, workload-major (a worker on consecutive units reuses the workload's case),
     * identical on every rank; the largest workloads first, so that a worker's pooled buffers are
     * mapped once at their final size instead of regrown (and re-faulted) at every larger one. The
     * order of execution changes no result; the report keeps the workloads' own order. */
    int *order = malloc((size_t)n_wl * sizeof *order);
    if (!order) {
        st = PARITY_E_NOMEM;
        goto fail;
    }
    for (int w = 0; w < n_wl; w++) order[w] = w;
    for (int i = 1; i < n_wl; i++) /* stable insertion sort, descending size */
        for (int j = i; j > 0 && wl_size(&store[order[j]]) > wl_size(&store[order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int n_units = 0;
    for (int i = 0; i < n_wl; i++) {
        int w = order[i];
        if (opts->noise_floor && !fl[w].known) units[n_units++] = (unit_t){UNIT_FLOOR, w, 0, 0};
        for (int k = 0; k < n_k; k++) units[n_units++] = (unit_t){UNIT_KERNEL, w, k, 0};
    }
    free(order);
    if (opts->baselines && (op->baseline_workloads || op->baseline_workload))
        for (int b = 0; b < PARITY_N_BASELINES; b++)
            for (int k = 0; k < n_k; k++) units[n_units++] = (unit_t){UNIT_BASELINE, 0, k, b};
    int n_mine = 0;
    for (int u = 0; u < n_units; u++)
        if (u % x->n_ranks == x->rank) mine[n_mine++] = u;
    st = run_units(&g, units, mine, n_mine, out, x->jobs, diag);
    /* Every rank reaches the exchange, whatever happened in its units (a rank that left early
     * would hang the others); a local failure travels in the units' status. */
    if (st != PARITY_OK)
        for (int i = 0; i < n_mine; i++)
            if (!out[mine[i]].done) {
                out[mine[i]].done = 1;
                out[mine[i]].status = (int32_t)st;
                out[mine[i]].diag = *diag;
            }
    if (x->n_ranks > 1 && x->or_all(x->or_ctx, out, (size_t)n_units * sizeof *out) != 0) {
        st = parity_diag_set(diag, PARITY_E_IO, "check: the exchange between ranks failed");
        goto fail;
    }
    st = PARITY_OK;
    for (int u = 0; u < n_units && st == PARITY_OK; u++) { /* the first failure in grid order */
        if (!out[u].done) {
            st = parity_diag_set(diag, PARITY_E_IO, "check: unit %d of %d has no result", u, n_units);
        } else if (out[u].status != PARITY_OK) {
            st = (parity_status_t)out[u].status;
            if (diag) *diag = out[u].diag;
        }
    }
    if (st != PARITY_OK) goto fail;
    for (int u = 0; u < n_units; u++) {
        const unit_t *un = &units[u];
        if (un->kind == UNIT_FLOOR) {
            fl[un->w].q = out[u].floor_q;
            if (x->rank == 0 && x->cache_dir && out[u].floor_complete) store_floor(&g, un->w, out[u].floor_q);
        } else if (un->kind == UNIT_KERNEL) {
            res[un->k].wl[un->w] = out[u].wl;
        } else {
            res[un->k].base[un->b] = out[u].base;
            check_baseline_names(un->b, &res[un->k].base[un->b]);
        }
    }
    for (int k = 0; k < n_k; k++)
        for (int w = 0; w < n_wl; w++) res[k].wl[w].floor_q = opts->noise_floor ? fl[w].q : -1;
    finish_verdicts(res, n_k, n_wl);
    *results = res;
    free(units);
    free(mine);
    free(out);
    free(fl);
    /* The workloads' names are copied into the results; store may go. */
    free(store);
    return PARITY_OK;
fail:
    parity_check_results_free(res, n_k);
    free(units);
    free(mine);
    free(out);
    free(fl);
    free(store);
    return st;
}

void parity_check_results_free(parity_kernel_result_t *r, int n)
{
    if (!r) return;
    for (int k = 0; k < n; k++) free(r[k].wl);
    free(r);
}

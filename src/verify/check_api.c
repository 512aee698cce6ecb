/* The stable C API of include/parity/parity.h: opaque options and reports over the check engine
 * (parity_check_run, include/parity/verify.h), so a program that uses them depends on no struct
 * layout (issue #40, docs/c-api.md). */
#include "parity/parity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"

struct parity_check_options {
    parity_check_opts_t o;
    char *workload; /* owned copy of o.workload */
};

struct parity_check_report {
    const parity_op_t *op;
    parity_kernel_list_t kl;     /* owned: the results' kr point into kl.items */
    parity_kernel_result_t *res; /* kl.n entries */
};

parity_check_options_t *parity_check_options_new(void)
{
    parity_check_options_t *o = calloc(1, sizeof *o);
    if (o) parity_check_opts_default(&o->o);
    return o;
}

void parity_check_options_free(parity_check_options_t *o)
{
    if (!o) return;
    free(o->workload);
    free(o);
}

parity_status_t parity_check_options_set_seed(parity_check_options_t *o, uint64_t seed)
{
    if (!o) return PARITY_E_INVALID;
    o->o.seed = seed;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_quick(parity_check_options_t *o, int quick)
{
    if (!o) return PARITY_E_INVALID;
    o->o.quick = quick != 0;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_workload(parity_check_options_t *o, const char *workload)
{
    if (!o) return PARITY_E_INVALID;
    char *copy = NULL;
    if (workload) {
        size_t n = strlen(workload) + 1;
        if (!(copy = malloc(n))) return PARITY_E_NOMEM;
        memcpy(copy, workload, n);
    }
    free(o->workload);
    o->workload = copy;
    o->o.workload = copy;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_noise_floor(parity_check_options_t *o, int on)
{
    if (!o) return PARITY_E_INVALID;
    o->o.noise_floor = on != 0;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_baselines(parity_check_options_t *o, int on)
{
    if (!o) return PARITY_E_INVALID;
    o->o.baselines = on != 0;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_timeout(parity_check_options_t *o, double seconds)
{
    if (!o || !(seconds > 0) || isinf(seconds)) return PARITY_E_INVALID;
    o->o.timeout_s = seconds;
    return PARITY_OK;
}

parity_status_t parity_check_options_set_threads(parity_check_options_t *o, int n_threads)
{
    if (!o || n_threads < 0 || n_threads > 1024) return PARITY_E_INVALID;
    o->o.n_threads = n_threads;
    return PARITY_OK;
}

void parity_check_report_free(parity_check_report_t *r)
{
    if (!r) return;
    parity_check_results_free(r->res, r->kl.n);
    parity_kernel_list_free(&r->kl);
    free(r);
}

parity_status_t parity_check_report_run(const char *op, const char *const *specs, int n_specs,
                                        const parity_check_options_t *o,
                                        parity_check_report_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!op || !specs || n_specs < 1 || !out)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_check_report_run: op, specs "
                               "(n_specs >= 1) and out are required");
    const parity_op_t *d = parity_op_find(op);
    if (!d)
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "no op '%s' (parity ops lists them)", op);
    parity_check_report_t *r = calloc(1, sizeof *r);
    if (!r) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    r->op = d;
    parity_status_t st = PARITY_OK;
    for (int i = 0; i < n_specs && st == PARITY_OK; i++) {
        if (!specs[i])
            st = parity_diag_set(diag, PARITY_E_INVALID, "parity_check_report_run: specs[%d] is NULL", i);
        else
            st = parity_kernel_resolve(specs[i], d->name, &r->kl, diag);
    }
    parity_check_opts_t opts;
    if (o) opts = o->o;
    else parity_check_opts_default(&opts);
    if (st == PARITY_OK) st = parity_check_run(d, &r->kl, &opts, &r->res, diag);
    if (st != PARITY_OK) {
        r->res = NULL;
        parity_check_report_free(r);
        return st;
    }
    *out = r;
    return PARITY_OK;
}

static const parity_kernel_result_t *kernel_at(const parity_check_report_t *r, int k)
{
    return r && r->res && k >= 0 && k < r->kl.n ? &r->res[k] : NULL;
}

static const parity_wl_result_t *wl_at(const parity_check_report_t *r, int k, int w)
{
    const parity_kernel_result_t *kr = kernel_at(r, k);
    return kr && w >= 0 && w < kr->n_wl ? &kr->wl[w] : NULL;
}

const char *parity_check_report_op(const parity_check_report_t *r) { return r ? r->op->name : NULL; }

int parity_check_report_n_kernels(const parity_check_report_t *r) { return r && r->res ? r->kl.n : 0; }

const char *parity_check_report_kernel_label(const parity_check_report_t *r, int k)
{
    const parity_kernel_result_t *kr = kernel_at(r, k);
    return kr ? r->kl.items[k].label : NULL;
}

parity_verdict_t parity_check_report_verdict(const parity_check_report_t *r, int k)
{
    const parity_kernel_result_t *kr = kernel_at(r, k);
    return kr ? kr->verdict : PARITY_VERDICT_NOT_JUDGED;
}

int parity_check_report_n_workloads(const parity_check_report_t *r, int k)
{
    const parity_kernel_result_t *kr = kernel_at(r, k);
    return kr ? kr->n_wl : 0;
}

const char *parity_check_report_workload_name(const parity_check_report_t *r, int k, int w)
{
    const parity_wl_result_t *x = wl_at(r, k, w);
    return x ? x->workload : NULL;
}

parity_verdict_t parity_check_report_workload_verdict(const parity_check_report_t *r, int k, int w)
{
    const parity_wl_result_t *x = wl_at(r, k, w);
    return x ? x->verdict : PARITY_VERDICT_NOT_JUDGED;
}

double parity_check_report_workload_max_err_over_tol(const parity_check_report_t *r, int k, int w)
{
    const parity_wl_result_t *x = wl_at(r, k, w);
    return x ? x->max_q : NAN;
}

const char *parity_check_report_workload_detail(const parity_check_report_t *r, int k, int w)
{
    const parity_wl_result_t *x = wl_at(r, k, w);
    return x ? x->detail : NULL;
}

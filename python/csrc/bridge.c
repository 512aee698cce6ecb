/* The C side of the Python package (python/parity/_lib.py loads it with ctypes): cases built by
 * name, their tensors' addresses for zero-copy views, output buffers with guard regions, one
 * judgement per workload through the very code `parity compare` uses (floor, tolerance,
 * diagnosis), the library's text and JSON reports (include/parity/report.h, the CLI's bytes),
 * declared ops (parity.Op: python/parity/_declared.py, their registry bridge_decl.c), number formats and logprob comparison.
 * Flat functions over opaque handles and plain C types, so ctypes needs no struct layouts.
 * Deliberately not here: calling the user's Python function (python/parity/_harness.py does,
 * in the caller's process or a spawned worker) and anything about frameworks or devices. */
#define _GNU_SOURCE /* open_memstream */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/report.h"
#include "parity/baseline.h"
#include "parity/custom_op.h"
#include "parity/format.h"
#include "parity/logprob.h"
#include "parity/op.h"
#include "parity/rng.h"
#include "parity/tensor.h"
#include "parity/verify.h"
#include "parity/version.h"
#include "parity/workload.h"
#include "src/verify/verify_internal.h"
#include "python/csrc/bridge_impl.h"

static void set_err(char *err, size_t len, const char *msg)
{
    if (err && len) snprintf(err, len, "%s", msg);
}

EXPORT void parity_py_free(void *p) { free(p); }
/* 1 when n bytes at a and b are identical (the rerun's bit-for-bit comparison, without the
 * temporaries numpy's array_equal makes). */
EXPORT int parity_py_memeq(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static char *json_take(cJSON *root)
{
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- ops ----------------------------------------------------------------------------------- */

EXPORT int parity_py_op_count(void) { return parity_op_count(); }
EXPORT const char *parity_py_op_name(int i)
{
    const parity_op_t *op = parity_op_at(i);
    return op ? op->name : NULL;
}

/* The static description of an op as JSON (caller frees with parity_py_free); NULL if unknown. */
EXPORT char *parity_py_op_json(const char *name)
{
    const parity_op_t *op = py_op_find(name);
    if (!op) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", op->name);
    cJSON_AddStringToObject(o, "summary", op->summary ? op->summary : "");
    cJSON_AddStringToObject(o, "faithful_accumulator", op->faithful_accumulator);
    cJSON_AddStringToObject(o, "error_model", op->error_model);
    cJSON *in = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < op->n_inputs; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", op->input_names[i]);
        cJSON_AddBoolToObject(x, "float", op->input_is_float[i]);
        cJSON_AddItemToArray(in, x);
    }
    cJSON *out = cJSON_AddArrayToObject(o, "outputs");
    for (int i = 0; i < op->n_outputs; i++) cJSON_AddItemToArray(out, cJSON_CreateString(op->output_names[i]));
    cJSON *ws = cJSON_AddArrayToObject(o, "workloads");
    for (int i = 0; i < op->n_presets; i++) {
        const parity_workload_t *w = &op->presets[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", w->name);
        cJSON_AddStringToObject(x, "summary", w->summary ? w->summary : "");
        cJSON_AddNumberToObject(x, "N", (double)w->n);
        cJSON_AddNumberToObject(x, "D", (double)w->d);
        cJSON_AddNumberToObject(x, "V", (double)w->v);
        cJSON_AddBoolToObject(x, "production", w->production);
        cJSON_AddItemToArray(ws, x);
    }
    return json_take(o);
}

/* ---- cases --------------------------------------------------------------------------------- */

/* Build op's case for workload `workload` ("text", "text@NxD[xV]"), seed and the dtype of its
 * floating-point inputs. NULL on error with err filled. Free with parity_py_case_free. */
EXPORT parity_case_t *parity_py_case_new(const char *op_name, const char *workload, uint64_t seed,
                                         const char *dtype, char *err, size_t errlen)
{
    parity_diag_t diag = {{0}};
    const parity_op_t *op = py_op_find(op_name);
    if (!op) {
        snprintf(diag.msg, sizeof diag.msg, "no op '%s' (parity.ops() lists them)", op_name);
        set_err(err, errlen, diag.msg);
        return NULL;
    }
    parity_dtype_t dt;
    if (parity_dtype_from_name(dtype, &dt) != PARITY_OK || !parity_dtype_is_float(dt)) {
        snprintf(diag.msg, sizeof diag.msg, "dtype '%s': expected f32, bf16, f16 or f64", dtype);
        set_err(err, errlen, diag.msg);
        return NULL;
    }
    parity_workload_t *wl = malloc(sizeof *wl);
    if (!wl) return NULL;
    parity_status_t st;
    if (strncmp(workload, "baseline:", 9) == 0 && py_op_is_decl(op)) {
        /* A declared op's rule workload: its descriptor builds the rule's inputs by name. */
        int bi = parity_baseline_find(workload + 9);
        if (bi < 0) {
            snprintf(diag.msg, sizeof diag.msg, "op %s has no baseline input scheme '%s'", op->name, workload + 9);
            free(wl);
            set_err(err, errlen, diag.msg);
            return NULL;
        }
        memset(wl, 0, sizeof *wl);
        snprintf(wl->label, sizeof wl->label, "%s", workload);
        wl->summary = "";
        wl->production = 1; /* one plain run, as the rules' own verifiers run a kernel */
        seed = parity_custom_baseline_seed(bi);
        st = PARITY_OK;
    } else if (strncmp(workload, "baseline:", 9) == 0) {
        /* A baseline rule's own input scheme: its workload and its fixed seed (the seed given
         * is ignored, as `parity check --baselines` ignores --seed for them). */
        const parity_workload_t *bw = NULL;
        int bi = parity_baseline_find(workload + 9);
        st = bi < 0 ? PARITY_E_NOTFOUND : parity_baseline_workload(op, bi, &bw, &seed);
        if (st != PARITY_OK) {
            snprintf(diag.msg, sizeof diag.msg, "op %s has no baseline input scheme '%s'", op->name, workload + 9);
            free(wl);
            set_err(err, errlen, diag.msg);
            return NULL;
        }
        *wl = *bw;
    } else {
        st = parity_op_workload(op, workload, wl);
        if (st != PARITY_OK && py_op_is_decl(op)) { /* a declared op's given inputs: its build finds them */
            memset(wl, 0, sizeof *wl);
            snprintf(wl->label, sizeof wl->label, "%s", workload);
            wl->summary = "";
            st = PARITY_OK;
        }
    }
    if (st != PARITY_OK) {
        char names[768] = "";
        for (int i = 0; i < op->n_presets; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, op->presets[i].name, sizeof names - strlen(names) - 1);
        }
        if (st == PARITY_E_INVALID)
            snprintf(diag.msg, sizeof diag.msg, "workload '%s': expected NAME@NxD or NAME@NxDxV "
                     "with N*D and V*D at most 2^31", workload);
        else
            snprintf(diag.msg, sizeof diag.msg, "op %s has no workload '%s' (it has: %s)",
                     op->name, workload, names);
        free(wl);
        set_err(err, errlen, diag.msg);
        return NULL;
    }
    if (wl->label[0]) wl->name = wl->label; /* derived names live in the copy */
    parity_case_t *c = NULL;
    st = parity_case_build(op, wl, seed, dt, &c, &diag);
    if (st != PARITY_OK) {
        free(wl);
        set_err(err, errlen, diag.msg[0] ? diag.msg : parity_status_str(st));
        return NULL;
    }
    c->owned_wl = wl; /* the case keeps its workload (freed with it), as parity_case_load does */
    return c;
}

EXPORT void parity_py_case_free(parity_case_t *c) { parity_case_free(c); }

/* The case's shapes, dtypes, attributes and workload as JSON (free with parity_py_free). */
EXPORT char *parity_py_case_json(const parity_case_t *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", c->op->name);
    cJSON_AddStringToObject(o, "workload", c->wl->name);
    cJSON_AddBoolToObject(o, "production", c->wl->production);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddStringToObject(o, "dtype", parity_dtype_name(c->in_dtype));
    cJSON *dims = cJSON_AddObjectToObject(o, "dims");
    cJSON_AddNumberToObject(dims, "N", (double)c->wl->n);
    cJSON_AddNumberToObject(dims, "D", (double)c->wl->d);
    cJSON_AddNumberToObject(dims, "V", (double)c->wl->v);
    cJSON *in = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < c->n_inputs; i++) {
        const parity_abi_tensor_t *v = &c->inputs[i]->view;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", c->op->input_names[i]);
        cJSON_AddStringToObject(x, "dtype", parity_dtype_name((parity_dtype_t)v->dtype));
        cJSON_AddBoolToObject(x, "float", c->op->input_is_float[i]);
        cJSON *sh = cJSON_AddArrayToObject(x, "shape");
        for (int d = 0; d < v->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)v->shape[d]));
        cJSON_AddNumberToObject(x, "nbytes", (double)c->inputs[i]->nbytes);
        cJSON_AddItemToArray(in, x);
    }
    cJSON *out = cJSON_AddArrayToObject(o, "outputs");
    for (int i = 0; i < c->n_outputs; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", c->op->output_names[i]);
        cJSON *sh = cJSON_AddArrayToObject(x, "shape");
        for (int d = 0; d < c->out_ndim[i]; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)c->out_shape[i][d]));
        cJSON_AddItemToArray(out, x);
    }
    cJSON *at = cJSON_AddObjectToObject(o, "attrs");
    for (int i = 0; i < c->n_attrs; i++) cJSON_AddNumberToObject(at, c->attr_names[i], c->attr_values[i]);
    return json_take(o);
}

/* Address of input i's data (row-major, contiguous, owned by the case). */
EXPORT void *parity_py_case_input(const parity_case_t *c, int i) { return c->inputs[i]->view.data; }
/* The digest of input i's bytes (src/core/digest.c) and whether the guard bytes around it are intact. */
EXPORT uint64_t parity_py_case_input_hash(const parity_case_t *c, int i) { return parity_tensor_hash(c->inputs[i]); }
EXPORT int parity_py_case_input_guards_ok(const parity_case_t *c, int i) { return parity_tensor_guards_ok(c->inputs[i]); }

/* ---- output buffers ------------------------------------------------------------------------- */

/* A new buffer for output i of case c in dtype `dtype`, with guard regions, NaN-filled (the
 * harness's prefill for `out=` functions). NULL on a bad dtype or no memory. */
EXPORT parity_tensor_t *parity_py_output_new(const parity_case_t *c, int i, const char *dtype)
{
    parity_dtype_t dt;
    if (parity_dtype_from_name(dtype, &dt) != PARITY_OK) return NULL;
    parity_tensor_t *t = parity_tensor_new(c->op->output_names[i], dt, c->out_ndim[i], c->out_shape[i]);
    if (t) parity_tensor_fill_nan(t);
    return t;
}
/* A view of caller memory `data` as output i of case c in dtype `dtype` (row-major, the
 * output's shape): outputs computed in Python are judged where they lie, without a copy. No
 * guard regions. Free with parity_py_output_unwrap (the memory itself stays the caller's). */
EXPORT parity_tensor_t *parity_py_output_wrap(const parity_case_t *c, int i, const char *dtype, void *data)
{
    parity_dtype_t dt;
    if (parity_dtype_from_name(dtype, &dt) != PARITY_OK || i < 0 || i >= c->n_outputs) return NULL;
    parity_tensor_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->view.data = data;
    t->view.dtype = (int32_t)dt;
    t->view.ndim = c->out_ndim[i];
    t->view.name = c->op->output_names[i];
    int64_t st = 1;
    for (int d = c->out_ndim[i] - 1; d >= 0; d--) {
        t->view.shape[d] = c->out_shape[i][d];
        t->view.strides[d] = st;
        st *= c->out_shape[i][d];
    }
    t->nbytes = (size_t)st * parity_dtype_size(dt);
    snprintf(t->name, sizeof t->name, "%s", c->op->output_names[i]);
    return t;
}
EXPORT void parity_py_output_unwrap(parity_tensor_t *t) { free(t); }
/* Fill output buffer t (from parity_py_output_new for output i of c) with the reference rounded
 * to its dtype: the rerun's prefill, as `parity check` does it (an element the function leaves
 * unwritten then differs from the NaN-prefilled first run). */
EXPORT void parity_py_output_fill_reference(const parity_case_t *c, int i, parity_tensor_t *t)
{
    parity_fill_reference(t, &c->ref[i]);
}
/* Output i's fp64 reference, n doubles (rows x cols of the judge), into out. 0, or -1 when n is
 * not its size. What the isolated worker's stand-in of a declared op gets (_case.worker_spec). */
EXPORT int parity_py_case_reference(const parity_case_t *c, int i, double *out, int64_t n)
{
    if (!c || i < 0 || i >= c->n_outputs || c->ref[i].rows * c->ref[i].cols != n || !c->ref[i].ref) return -1;
    memcpy(out, c->ref[i].ref, (size_t)n * sizeof *out);
    return 0;
}
EXPORT void *parity_py_tensor_data(parity_tensor_t *t) { return t->view.data; }
EXPORT int parity_py_tensor_guards_ok(const parity_tensor_t *t) { return parity_tensor_guards_ok(t); }
EXPORT void parity_py_tensor_free(parity_tensor_t *t) { parity_tensor_free(t); }

/* ---- one check: a candidate judged over workloads ------------------------------------------ */

typedef struct {
    const parity_op_t *op;
    parity_abi_kernel_t k;
    parity_kernel_ref_t kr;
    parity_kernel_result_t res;
    char desc[512];
    uint64_t seed;
    int quick;
    int baselines; /* a baseline rule was applied: the reports show the matrix */
    char reproduce[1024];
} py_check_t;

EXPORT py_check_t *parity_py_check_new(const char *op_name, int n_wl, const char *label,
                                       const char *desc, uint64_t seed, int quick)
{
    const parity_op_t *op = py_op_find(op_name);
    if (!op || n_wl < 1) return NULL;
    py_check_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->res.wl = calloc((size_t)n_wl, sizeof *p->res.wl);
    if (!p->res.wl) {
        free(p);
        return NULL;
    }
    p->op = op;
    snprintf(p->desc, sizeof p->desc, "%s", desc ? desc : "");
    snprintf(p->kr.label, sizeof p->kr.label, "%s", label);
    p->k = (parity_abi_kernel_t){sizeof p->k, p->kr.label, op->name, p->desc[0] ? p->desc : NULL,
                                 0, PARITY_DT_F32, PARITY_DT_F32, NULL, NULL};
    p->kr.k = &p->k;
    p->res.kr = &p->kr;
    p->res.n_wl = n_wl;
    p->res.diag_wl = -1;
    p->seed = seed;
    p->quick = quick;
    for (int w = 0; w < n_wl; w++) p->res.wl[w].hit_corr = NAN;
    return p;
}

EXPORT void parity_py_check_free(py_check_t *p)
{
    if (!p) return;
    free(p->res.wl);
    free(p);
}

/* Judge outputs outs[0..n_outputs) of case c as workload w: floor (when `floor`), per-element
 * judgement, diagnosis; exactly what `parity compare` does. The outputs' dtype is taken from
 * outs[0] (the diagnosis rounds emulations to it). 0, or -1 on a bad argument. */
EXPORT int parity_py_check_judge(py_check_t *p, int w, parity_case_t *c, parity_tensor_t **outs,
                                 int floor, double seconds)
{
    if (!p || w < 0 || w >= p->res.n_wl || !c || c->op != p->op) return -1;
    for (int i = 0; i < c->n_outputs; i++)
        if (!outs[i]) return -1;
    p->k.in_dtype = (int32_t)c->in_dtype;
    p->k.out_dtype = outs[0]->view.dtype;
    parity_check_opts_t opts;
    parity_check_opts_default(&opts);
    opts.seed = c->seed;
    opts.noise_floor = floor;
    parity_wl_result_t *r = &p->res.wl[w];
    if (parity_compare_case_diag(c, outs, &p->kr, &opts, 0, r) != PARITY_OK) return -1;
    /* As parity check (check.c, check_unit_kernel): a workload's diagnosis is reported where it
     * fails, so a faithful kernel's report is the same from Python as from the CLI. */
    if (r->verdict != PARITY_VERDICT_UNFAITHFUL) memset(&r->diag, 0, sizeof r->diag);
    r->seconds = seconds;
    return 0;
}

/* Record a verdict reached without judging (the function crashed, timed out, modified its
 * inputs, wrote out of bounds, was nondeterministic or unsupported). */
EXPORT int parity_py_check_set(py_check_t *p, int w, const char *workload, int production,
                               int verdict, const char *detail, double seconds)
{
    if (!p || w < 0 || w >= p->res.n_wl || verdict < 0 || verdict > PARITY_VERDICT_STALE_CACHE) return -1;
    parity_wl_result_t *r = &p->res.wl[w];
    if (!r->workload[0]) { /* never judged: no numbers (a judged one keeps them, as in the CLI,
                              where a rerun's finding replaces only the verdict and detail) */
        memset(r, 0, sizeof *r);
        r->hit_corr = NAN;
        r->floor_q = -1;
    }
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    r->production = production;
    r->verdict = (parity_verdict_t)verdict;
    snprintf(r->detail, sizeof r->detail, "%s", detail ? detail : "");
    r->seconds = seconds;
    return 0;
}

/* ---- baseline rules ---- */

EXPORT int parity_py_baseline_count(void) { return PARITY_N_BASELINES; }
EXPORT const char *parity_py_baseline_name(int b) { return parity_baseline_name(b); }

/* Declared ops (python/parity/_custom_baselines.py): which rules apply (custom_op.h); the rules
 * themselves: parity_py_decl_baseline_judge. */
EXPORT const char *parity_py_baseline_rule(int b) { return parity_baseline_rule(b); }
EXPORT int parity_py_custom_baseline_applies(int b, int n_out, const int *reduced, int multilinear, char *why,
                                             size_t cap)
{
    return parity_custom_baseline_applies(b, n_out, reduced, multilinear, why, cap);
}
/* A C-declared op for parity.Op.from_plugin (python/parity/_custom_plugin.py): load, describe,
 * call its reference, free (custom_op.h). */
EXPORT void *parity_py_custom_op_load(const char *path, const char *name, char *err, size_t cap)
{
    parity_custom_op_t *op = NULL;
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    if (parity_custom_op_load(path, name && name[0] ? name : NULL, &op, &diag) != PARITY_OK) {
        snprintf(err, cap, "%s", diag.msg);
        return NULL;
    }
    return op;
}
EXPORT void parity_py_custom_op_free(void *op) { parity_custom_op_free(op); }
EXPORT char *parity_py_custom_op_json(void *op) { return parity_custom_op_json(op); }
EXPORT int parity_py_custom_op_reference(void *op, const int64_t *sizes, int dtype, const void *const *inputs,
                                         void *const *outputs)
{
    return parity_custom_op_reference(op, sizes, dtype, inputs, outputs);
}

/* Rule b's verdict on outputs outs[0..n_outputs) of case c (built with workload
 * "baseline:NAME", the rule's input scheme), as `parity check --baselines` gives it. 0 or -1. */
EXPORT int parity_py_check_baseline(py_check_t *p, int b, parity_case_t *c, parity_tensor_t **outs)
{
    if (!p || !c || c->op != p->op || b < 0 || b >= PARITY_N_BASELINES) return -1;
    if (parity_baseline_judge(b, c, outs, &p->res.base[b]) != PARITY_OK) return -1;
    p->baselines = 1;
    return 0;
}

/* Rule b when the candidate did not run to outputs (crashed, timed out, ...): a rejection, as in
 * the CLI. */
EXPORT int parity_py_check_baseline_set(py_check_t *p, int b, int verdict)
{
    if (!p || b < 0 || b >= PARITY_N_BASELINES) return -1;
    parity_baseline_result_t *br = &p->res.base[b];
    memset(br, 0, sizeof *br);
    br->name = parity_baseline_name(b);
    br->rule = parity_baseline_rule(b);
    br->ran = 1;
    br->caught = 1;
    snprintf(br->detail, sizeof br->detail, "%s", parity_verdict_name((parity_verdict_t)verdict));
    p->baselines = 1;
    return 0;
}

/* Rule b's result: caught (0/1, -1 when it did not run) and pass_fraction. */
EXPORT int parity_py_check_baseline_caught(const py_check_t *p, int b)
{
    if (!p || b < 0 || b >= PARITY_N_BASELINES || !p->res.base[b].ran) return -1;
    return p->res.base[b].caught;
}

EXPORT int parity_py_check_wl_verdict(const py_check_t *p, int w) { return p->res.wl[w].verdict; }
/* Workload w's worst err/tol (0 when not judged). */
EXPORT double parity_py_check_wl_q(const py_check_t *p, int w) { return p->res.wl[w].max_q; }

/* Overall verdict and the workload that decided it, exactly as `parity check` computes them. */
EXPORT int parity_py_check_finish(py_check_t *p)
{
    parity_kernel_result_finish(&p->res);
    return p->res.verdict;
}

EXPORT const char *parity_py_check_worst_workload(const py_check_t *p)
{
    return p->res.wl[p->res.worst_wl].workload;
}

EXPORT const char *parity_py_verdict_name(int v) { return parity_verdict_name((parity_verdict_t)v); }
/* The C enums by name, "?" past the last (python/parity/_lib.py reads them in order). */
EXPORT const char *parity_py_dtype_name(int v) { return parity_dtype_name((parity_dtype_t)v); }
EXPORT const char *parity_py_role_name(int v) { return parity_custom_role_name(v); }

static parity_report_opts_t report_ctx(const py_check_t *p, const char *reproduce)
{
    parity_report_opts_t ctx = {"check", p->seed, p->quick, p->baselines, NULL, NULL, 0, NULL};
    ctx.reproduce = reproduce && reproduce[0] ? reproduce : NULL;
    return ctx;
}

/* The text report (the library's renderer, the CLI's bytes; malloc'd; free with parity_py_free).
 * reproduce: the line printed after "reproduce:" (NULL: the CLI's own). */
EXPORT char *parity_py_check_text(const py_check_t *p, const char *reproduce)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    parity_report_opts_t ctx = report_ctx(p, reproduce);
    parity_report_text(f, p->op, &p->res, 1, &ctx);
    fclose(f);
    return buf;
}

/* The JSON report (docs/check-json.md), the bytes `parity check --json` writes (malloc'd; free
 * with parity_py_free); NULL without memory. */
EXPORT char *parity_py_check_json(const py_check_t *p, const char *reproduce)
{
    parity_report_opts_t ctx = report_ctx(p, reproduce);
    return parity_report_json(p->op, &p->res, 1, &ctx);
}

/* ---- number formats ------------------------------------------------------------------------ */

/* out[i] = the value x[i] becomes in format `fmt` ("bf16", "e4m3fn", "custom:m=T,e=W", ...),
 * bits[i] its code (either may be NULL). mode 0 nearest-even, 1 toward zero, 2 stochastic
 * (seeded: one draw per finite nonzero input). saturate: -1 the format's default, 0 overflow to
 * inf (NaN in FN formats), 1 saturate to the largest finite value. 0, or -1 with err filled. */
EXPORT int parity_py_round(const char *fmt, int mode, uint64_t seed, int saturate, const double *x,
                           size_t n, double *out, uint32_t *bits, char *err, size_t errlen)
{
    parity_format_t f;
    parity_diag_t diag = {{0}};
    parity_status_t st = parity_format_get(fmt, &f, &diag);
    if (st != PARITY_OK) {
        if (!diag.msg[0])
            snprintf(diag.msg, sizeof diag.msg, "unknown format '%s' (fp32, tf32, bf16, fp16, "
                     "e4m3fn, e5m2 or custom:m=T,e=W)", fmt);
        set_err(err, errlen, diag.msg);
        return -1;
    }
    if (mode < 0 || mode > 2) {
        set_err(err, errlen, "mode must be nearest, toward_zero or stochastic");
        return -1;
    }
    parity_round_opts_t o = parity_format_default_opts(&f);
    o.rounding = (parity_rounding_t)mode;
    if (saturate >= 0) o.saturate_finite = o.saturate_inf = saturate;
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, 0);
    uint32_t *b = bits ? bits : malloc((n ? n : 1) * sizeof *b);
    if (!b) return -1;
    parity_format_encode_array(&f, x, n, &o, mode == 2 ? &rng : NULL, b);
    if (out) parity_format_decode_array(&f, b, n, out);
    if (b != bits) free(b);
    return 0;
}

/* ---- logprobs ------------------------------------------------------------------------------ */

/* Open a dump from a buffer (buf non-NULL; `name` gives the format by extension) or a file. */
static parity_status_t lp_open(const void *buf, size_t len, const char *name,
                               const parity_logprob_read_opts_t *ro, parity_logprob_reader_t **r,
                               parity_diag_t *d)
{
    return buf ? parity_logprob_open_mem(buf, len, name, ro, r, d) : parity_logprob_open(name, ro, r, d);
}

/* Compare dump B with dump A (and A with the floor dump A2 when fname is non-NULL), as
 * `parity logprobs` does. Each dump is a buffer (xbuf non-NULL) or a file named xname. Options
 * in a JSON object: format_a, format_b, slice_by, dtype, k3_alarm, dlogprob_alarm,
 * floor_factor, threads, worst, no_slices, moe (the CLI's flags). Writes the JSON report to
 * json_path and, when html_path is non-NULL, the HTML page; *text gets the text report
 * (malloc'd). Returns the CLI's exit code (0 within alarms, 1 drift) or -1 with err filled. */
EXPORT int parity_py_lp_compare(const void *abuf, size_t alen, const char *aname,
                                const void *bbuf, size_t blen, const char *bname,
                                const void *fbuf, size_t flen, const char *fname,
                                const char *options_json, const char *json_path,
                                const char *html_path, char **text, char *err, size_t errlen)
{
    parity_logprob_cmp_opts_t o = parity_logprob_cmp_default_opts();
    parity_logprob_read_opts_t ro[2];
    memset(ro, 0, sizeof ro);
    cJSON *opt = cJSON_Parse(options_json ? options_json : "{}");
    char dtype[16] = "";
    int rc = -1, moe = 0, k3_set = 0;
    parity_diag_t d = {{0}};
    parity_logprob_reader_t *r[3] = {NULL, NULL, NULL};
    parity_logprob_result_t *res = NULL, *fres = NULL;
    if (!cJSON_IsObject(opt)) {
        set_err(err, errlen, "options: not a JSON object");
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, opt)
    {
        const char *k = it->string;
        if (!strcmp(k, "format_a") || !strcmp(k, "format_b")) {
            if (!cJSON_IsString(it) || parity_logprob_format_from_name(it->valuestring, &ro[k[7] == 'b'].format) != PARITY_OK) {
                snprintf(d.msg, sizeof d.msg, "unknown format '%s' (npy, safetensors, jsonl, "
                         "openai-chat, openai-completions, vllm, sglang)",
                         cJSON_IsString(it) ? it->valuestring : "?");
                set_err(err, errlen, d.msg);
                goto done;
            }
        } else if (!strcmp(k, "slice_by") && cJSON_IsString(it)) {
            ro[0].slice_field = ro[1].slice_field = it->valuestring;
        } else if (!strcmp(k, "dtype") && cJSON_IsString(it)) {
            snprintf(dtype, sizeof dtype, "%s", it->valuestring);
            if (strcmp(dtype, "fp64") && strcmp(dtype, "fp32") && strcmp(dtype, "bf16") && strcmp(dtype, "fp16")) {
                set_err(err, errlen, "dtype must be fp64, fp32, bf16 or fp16");
                goto done;
            }
            o.dtype = dtype;
        } else if (!strcmp(k, "k3_alarm") && cJSON_IsNumber(it) && it->valuedouble >= 0) {
            o.k3_alarm = it->valuedouble;
            k3_set = 1;
        } else if (!strcmp(k, "dlogprob_alarm") && cJSON_IsNumber(it) && it->valuedouble >= 0) {
            o.dlogprob_alarm = it->valuedouble;
        } else if (!strcmp(k, "floor_factor") && cJSON_IsNumber(it) && it->valuedouble >= 1) {
            o.floor_factor = it->valuedouble;
        } else if (!strcmp(k, "threads") && cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble <= 64) {
            o.n_threads = (int)it->valuedouble;
        } else if (!strcmp(k, "worst") && cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble <= 100) {
            o.worst_tokens = (size_t)it->valuedouble;
        } else if (!strcmp(k, "no_slices") && cJSON_IsBool(it)) {
            if (cJSON_IsTrue(it)) o.by_modality = o.by_position = o.by_phase = 0;
        } else if (!strcmp(k, "moe") && cJSON_IsBool(it)) {
            moe = cJSON_IsTrue(it);
        } else {
            snprintf(d.msg, sizeof d.msg, "option '%s': unknown or out of range", k);
            set_err(err, errlen, d.msg);
            goto done;
        }
    }
    if (moe && !k3_set) o.k3_alarm = 1e-1;
    for (int s = 0; s < 2; s++) ro[s].n_threads = o.n_threads;
    if (lp_open(abuf, alen, aname, &ro[0], &r[0], &d) != PARITY_OK ||
        lp_open(bbuf, blen, bname, &ro[1], &r[1], &d) != PARITY_OK ||
        parity_logprob_compare(r[0], r[1], &o, &res, &d) != PARITY_OK) {
        set_err(err, errlen, d.msg);
        goto done;
    }
    if (fname) {
        parity_logprob_close(r[0]);
        r[0] = NULL;
        if (lp_open(abuf, alen, aname, &ro[0], &r[0], &d) != PARITY_OK ||
            lp_open(fbuf, flen, fname, &ro[0], &r[2], &d) != PARITY_OK ||
            parity_logprob_compare(r[0], r[2], &o, &fres, &d) != PARITY_OK) {
            char m[1100];
            snprintf(m, sizeof m, "floor: %s", d.msg);
            set_err(err, errlen, m);
            goto done;
        }
        parity_logprob_result_set_floor(res, fres);
    }
    if (parity_logprob_report_json(res, json_path, &d) != PARITY_OK ||
        (html_path && parity_logprob_report_html(res, html_path, &d) != PARITY_OK)) {
        set_err(err, errlen, d.msg);
        goto done;
    }
    if (text) {
        size_t len = 0;
        FILE *f = open_memstream(text, &len);
        if (f) {
            parity_logprob_report_text(res, f);
            fclose(f);
        }
    }
    rc = parity_logprob_result_exit_code(res);
done:
    cJSON_Delete(opt);
    parity_logprob_result_free(res);
    parity_logprob_result_free(fres);
    for (int s = 0; s < 3; s++) parity_logprob_close(r[s]);
    return rc;
}

/* ---- catalog kernels, for benchmarks that time the Python layer against the CLI ------------- */

static void contiguous_view(parity_abi_tensor_t *t, void *data, int32_t dtype, int32_t ndim,
                            const int64_t *shape, const char *name)
{
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dtype;
    t->ndim = ndim;
    t->name = name;
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->strides[d] = st;
        st *= shape[d];
    }
}

/* Run catalog kernel `name` of op in this process on contiguous arrays given by address, dtype
 * (parity_dtype_t), rank and shape (PARITY_ABI_MAX_DIMS entries per array), outputs in the
 * kernel's out_dtype: a stand-in for a user's function in benchmarks and tests, so the Python
 * layer is timed and checked around the very C code `parity check` runs. Returns the kernel's
 * PARITY_KERNEL_* code, or -1 when op has no such kernel or the arguments do not fit. */
EXPORT int parity_py_run_builtin(const char *op, const char *name, int n_in, void *const *in_data,
                                 const int32_t *in_dtype, const int32_t *in_ndim, const int64_t *in_shape,
                                 int n_out, void *const *out_data, const int32_t *out_ndim,
                                 const int64_t *out_shape, int n_attrs, const char *const *attr_names,
                                 const double *attr_values, int n_threads)
{
    const parity_op_t *o = py_op_find(op);
    if (!o || n_in != o->n_inputs || n_out != o->n_outputs || n_attrs < 0) return -1;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op) != 0 || strcmp(k->name, name) != 0) continue;
        parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
        for (int j = 0; j < n_in; j++) {
            if (in_ndim[j] < 0 || in_ndim[j] > PARITY_ABI_MAX_DIMS) return -1;
            contiguous_view(&in[j], in_data[j], in_dtype[j], in_ndim[j], in_shape + j * PARITY_ABI_MAX_DIMS,
                            o->input_names[j]);
        }
        for (int j = 0; j < n_out; j++) {
            if (out_ndim[j] < 0 || out_ndim[j] > PARITY_ABI_MAX_DIMS) return -1;
            contiguous_view(&out[j], out_data[j], k->out_dtype, out_ndim[j], out_shape + j * PARITY_ABI_MAX_DIMS,
                            o->output_names[j]);
        }
        parity_abi_call_t call;
        memset(&call, 0, sizeof call);
        call.abi_version = PARITY_ABI_VERSION;
        call.struct_size = sizeof call;
        call.op = o->name;
        call.n_inputs = n_in;
        call.n_outputs = n_out;
        call.inputs = in;
        call.outputs = out;
        call.n_attrs = n_attrs;
        call.attr_names = attr_names;
        call.attr_values = attr_values;
        call.seed = 1;
        call.n_threads = n_threads > 0 ? n_threads : 1;
        return k->run(&call);
    }
    return -1;
}

/* The dtype of catalog kernel `name`'s floating-point inputs and outputs ("f32", "bf16"), or
 * NULL when op has no such kernel. */
EXPORT const char *parity_py_builtin_dtype(const char *op, const char *name, int output)
{
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op) == 0 && strcmp(k->name, name) == 0)
            return parity_dtype_name((parity_dtype_t)(output ? k->out_dtype : k->in_dtype));
    }
    return NULL;
}

/* parity.make_values (python/parity/_values.py): the workload generators of workload.h, so a
 * user's test draws the values parity's own workloads are made of. kind < 100: a
 * parity_vals_kind_t, rows x cols doubles (exact, before any rounding) from (seed, stream);
 * 100 + a parity_gamma_kind_t: a norm weight of rows * cols values; 200 + a parity_ids_kind_t:
 * rows * cols token ids in [0, v) (int32, into ids). 0, or -1 with the reason in err. */
EXPORT int parity_py_workload_values(int kind, double scale, int outliers, double factor, uint64_t seed,
                                     uint64_t stream, int64_t rows, int64_t cols, double *out,
                                     double zipf_s, int64_t v, int32_t *ids, char *err, size_t cap)
{
    if (rows < 0 || cols < 0) {
        set_err(err, cap, "negative shape");
        return -1;
    }
    if (kind >= 0 && kind <= PARITY_VALS_SPARSE_POW2) {
        parity_workload_values((parity_vals_kind_t)kind, scale, outliers, factor, seed, stream, 0, rows,
                               cols, out);
        return 0;
    }
    if (kind >= 100 && kind <= 100 + PARITY_GAMMA_NORMAL) {
        parity_workload_gamma((parity_gamma_kind_t)(kind - 100), seed, rows * cols, out);
        return 0;
    }
    if (kind >= 200 && kind <= 200 + PARITY_IDS_TEXT) {
        parity_ids_t scheme = {(parity_ids_kind_t)(kind - 200), zipf_s};
        parity_diag_t diag;
        memset(&diag, 0, sizeof diag);
        if (parity_workload_ids("make_values", scheme, seed, rows * cols, v, ids, &diag) != PARITY_OK) {
            set_err(err, cap, diag.msg[0] ? diag.msg : "cannot draw token ids");
            return -1;
        }
        return 0;
    }
    set_err(err, cap, "unknown value scheme");
    return -1;
}

/* The version CMake's project(VERSION) gives the library: parity.__version__ (one source: the
 * wheel's metadata reads the same project() line, pyproject.toml [tool.scikit-build.metadata]). */
EXPORT const char *parity_py_version(void) { return PARITY_VERSION_STRING; }

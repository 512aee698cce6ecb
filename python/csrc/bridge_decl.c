/* The declared ops of the Python package (parity.Op, python/parity/_declared.py) in the bridge:
 * their registry, their declaration from JSON, the reference called back into Python, given
 * inputs and the baseline rules on their cases. Split from bridge.c (which holds everything else
 * the package calls); bridge_impl.h is what the two share. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/baseline.h"
#include "parity/custom_op.h"
#include "parity/op.h"
#include "parity/verify.h"
#include "python/csrc/bridge_impl.h"

/* ---- declared ops of the Python package (parity.Op) ----------------------------------------
 * A parity.Op becomes a C declared op (custom_op.h parity_custom_op_declare) whose reference is
 * a Python callback, registered here under a key of its own ("NAME#declN": two Op objects of one
 * name may be alive at once), so that every function below that takes an op name -- cases, the
 * judge, the reports -- takes a declared op's key too: a declared op is judged by the very code
 * that judges a built-in one (issue #35). */

/* The Python reference: dtype of the float arguments (F64: the reference; F32: the contract
 * evaluation), the shapes of the inputs then the outputs (each input's and output's ndim come
 * from the declaration, so they are simply concatenated), the data pointers (contiguous,
 * row-major), and the cause classifier's trial (custom_op.h parity_custom_trial_t) as JSON, or
 * NULL for a plain call: {"param": name, "value": v} (the reference gets that attribute at v) or
 * {"intermediate": name, "format": "bf16"|"fp16", "dir": -1|0|1} (parity.intermediate rounds
 * it), *used set to 1 when the reference marked that intermediate. Returns PARITY_KERNEL_OK,
 * _UNSUPPORTED or _ERROR. */
typedef int (*py_ref_fn)(int32_t dtype, const int64_t *shapes, void *const *in, void *const *out,
                         const char *trial, int32_t *used);

#define PY_DECL_MAX_SIZES 16
#define PY_DECL_MAX_ATTRS 16

typedef struct py_decl {
    struct py_decl *next;
    char key[160];
    parity_custom_op_t *op;
    py_ref_fn cb;
    cJSON *json; /* owns every string the declaration points to */
    parity_abi_op_decl_t d;
    parity_abi_op_dim_t dims[PARITY_CUSTOM_MAX_ARGS];
    int64_t sizes[PARITY_CUSTOM_MAX_ARGS][PY_DECL_MAX_SIZES];
    parity_abi_op_input_t in[PARITY_CUSTOM_MAX_ARGS];
    parity_abi_op_output_t out[PARITY_CUSTOM_MAX_ARGS];
    const char *attr_names[PY_DECL_MAX_ATTRS];
    double attr_values[PY_DECL_MAX_ATTRS];
} py_decl_t;

static py_decl_t *py_decls;
static unsigned py_decl_serial;

const parity_op_t *py_op_find(const char *name)
{
    for (const py_decl_t *p = py_decls; p && name; p = p->next)
        if (strcmp(p->key, name) == 0) return parity_custom_op_desc(p->op);
    return parity_op_find(name);
}

static int py_ref_tramp(void *arg, const parity_abi_call_t *call)
{
    const py_decl_t *p = arg;
    int64_t shapes[2 * PARITY_CUSTOM_MAX_ARGS * PARITY_ABI_MAX_DIMS];
    void *in[PARITY_CUSTOM_MAX_ARGS], *out[PARITY_CUSTOM_MAX_ARGS];
    int n = 0;
    for (int i = 0; i < call->n_inputs && i < PARITY_CUSTOM_MAX_ARGS; i++) {
        in[i] = call->inputs[i].data;
        for (int d = 0; d < call->inputs[i].ndim; d++) shapes[n++] = call->inputs[i].shape[d];
    }
    for (int o = 0; o < call->n_outputs && o < PARITY_CUSTOM_MAX_ARGS; o++) {
        out[o] = call->outputs[o].data;
        for (int d = 0; d < call->outputs[o].ndim; d++) shapes[n++] = call->outputs[o].shape[d];
    }
    parity_custom_trial_t *t = parity_custom_trial();
    char trial[160];
    int32_t used = 0;
    if (t && t->param)
        snprintf(trial, sizeof trial, "{\"param\": \"%s\", \"value\": %.17g}", t->param, t->value);
    else if (t && t->intermediate)
        snprintf(trial, sizeof trial, "{\"intermediate\": \"%s\", \"format\": \"%s\", \"dir\": %d}",
                 t->intermediate, t->format ? t->format : "", t->dir);
    int rc = p->cb(call->n_outputs ? call->outputs[0].dtype : PARITY_DT_F64, shapes, in, out,
                   t && (t->param || t->intermediate) ? trial : NULL, &used);
    if (t && used) t->used = 1;
    return rc;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* The names of array `a` (strings) into names[0..cap); the count, or -1 when not strings or
 * too many. */
static int jnames(const cJSON *a, const char **names, int cap)
{
    int n = 0;
    const cJSON *x;
    if (!cJSON_IsArray(a)) return -1;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsString(x) || n >= cap) return -1;
        names[n++] = x->valuestring;
    }
    return n;
}

static void py_decl_free(py_decl_t *p)
{
    if (!p) return;
    parity_custom_op_free(p->op);
    cJSON_Delete(p->json);
    free(p);
}

/* Declare a parity.Op (python/parity/_declared.py builds the JSON: {"name", "description",
 * "multilinear", "dims": [{"name", "sizes": [...], "fixed"}], "inputs": [{"name", "role" (the
 * op_abi.h number), "dims": [...], "vocab"}], "outputs": [{"name", "dims", "reduced"}], "attrs":
 * {name: number}, "params": {name: number} (the refittable parameters), "intermediates":
 * [names], "rounded": {name: format} (intermediates the contract allows rounded)}) with cb its
 * reference. Returns a handle (its key: parity_py_decl_key), or
 * NULL with err filled (the C validation's message). Free with parity_py_decl_free. */
EXPORT void *parity_py_decl_new(const char *json, py_ref_fn cb, char *err, size_t cap)
{
    py_decl_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->cb = cb;
    p->json = cJSON_Parse(json);
    const cJSON *j = p->json, *x;
    const char *bad = NULL;
    if (!cJSON_IsObject(j)) bad = "not a JSON object";
    p->d.struct_size = sizeof p->d;
    p->d.name = j ? jstr(j, "name") : NULL;
    p->d.description = j ? jstr(j, "description") : NULL;
    p->d.flags = j && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "multilinear")) ? PARITY_OP_MULTILINEAR : 0;
    const cJSON *dims = j ? cJSON_GetObjectItemCaseSensitive(j, "dims") : NULL;
    const cJSON *ins = j ? cJSON_GetObjectItemCaseSensitive(j, "inputs") : NULL;
    const cJSON *outs = j ? cJSON_GetObjectItemCaseSensitive(j, "outputs") : NULL;
    const cJSON *attrs = j ? cJSON_GetObjectItemCaseSensitive(j, "attrs") : NULL;
    const cJSON *params = j ? cJSON_GetObjectItemCaseSensitive(j, "params") : NULL;
    const cJSON *inter = j ? cJSON_GetObjectItemCaseSensitive(j, "intermediates") : NULL;
    const cJSON *rounded = j ? cJSON_GetObjectItemCaseSensitive(j, "rounded") : NULL;
    if (!bad && (!p->d.name || !cJSON_IsArray(dims) || !cJSON_IsArray(ins) || !cJSON_IsArray(outs)))
        bad = "name, dims, inputs and outputs are required";
    int n = 0;
    if (!bad) cJSON_ArrayForEach(x, dims) {
        if (n >= PARITY_CUSTOM_MAX_ARGS) { bad = "more dimensions than the engine holds (16)"; break; }
        parity_abi_op_dim_t *dm = &p->dims[n];
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(x, "sizes"), *s;
        dm->struct_size = sizeof *dm;
        dm->name = jstr(x, "name");
        dm->fixed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "fixed"));
        dm->sizes = p->sizes[n];
        cJSON_ArrayForEach(s, sz) {
            if (!cJSON_IsNumber(s) || dm->n_sizes >= PY_DECL_MAX_SIZES) { bad = "a dimension's sizes"; break; }
            p->sizes[n][dm->n_sizes++] = (int64_t)s->valuedouble;
        }
        n++;
    }
    p->d.n_dims = n;
    p->d.dims = p->dims;
    n = 0;
    if (!bad) cJSON_ArrayForEach(x, ins) {
        if (n >= PARITY_CUSTOM_MAX_ARGS) { bad = "more inputs than the engine holds (16)"; break; }
        parity_abi_op_input_t *a = &p->in[n++];
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role");
        a->struct_size = sizeof *a;
        a->name = jstr(x, "name");
        a->role = cJSON_IsNumber(role) ? (int32_t)role->valuedouble : -1;
        a->vocab = jstr(x, "vocab");
        a->ndim = jnames(cJSON_GetObjectItemCaseSensitive(x, "dims"), a->dims, PARITY_ABI_MAX_DIMS);
        if (a->ndim < 0) bad = "an input's dims (at most 8 names)";
    }
    p->d.n_inputs = n;
    p->d.inputs = p->in;
    n = 0;
    if (!bad) cJSON_ArrayForEach(x, outs) {
        if (n >= PARITY_CUSTOM_MAX_ARGS) { bad = "more outputs than the engine holds (16)"; break; }
        parity_abi_op_output_t *a = &p->out[n++];
        a->struct_size = sizeof *a;
        a->name = jstr(x, "name");
        a->ndim = jnames(cJSON_GetObjectItemCaseSensitive(x, "dims"), a->dims, PARITY_ABI_MAX_DIMS);
        a->n_reduced = jnames(cJSON_GetObjectItemCaseSensitive(x, "reduced"), a->reduced, PARITY_ABI_MAX_DIMS);
        if (a->ndim < 0 || a->n_reduced < 0) bad = "an output's dims or reduced (at most 8 names)";
    }
    p->d.n_outputs = n;
    p->d.outputs = p->out;
    n = 0;
    if (!bad && attrs) cJSON_ArrayForEach(x, attrs) {
        if (n >= PY_DECL_MAX_ATTRS || !cJSON_IsNumber(x)) { bad = "attrs (at most 16 numbers)"; break; }
        p->attr_names[n] = x->string;
        p->attr_values[n++] = x->valuedouble;
    }
    p->d.n_attrs = n;
    p->d.attr_names = p->attr_names;
    p->d.attr_values = p->attr_values;
    /* The cause classifier's parameters (the float attributes, which the reference gets from
     * Python) and intermediates (parity.intermediate's names): custom_op.h. */
    const char *pnames[PARITY_CUSTOM_MAX_PARAMS], *inames[PARITY_CUSTOM_MAX_INTERMEDIATES];
    const char *rnames[PARITY_CUSTOM_MAX_INTERMEDIATES], *rfmts[PARITY_CUSTOM_MAX_INTERMEDIATES];
    double pvals[PARITY_CUSTOM_MAX_PARAMS];
    int np = 0, ni = 0, nr = 0;
    if (!bad && params) cJSON_ArrayForEach(x, params) {
        if (np >= PARITY_CUSTOM_MAX_PARAMS || !cJSON_IsNumber(x)) { bad = "params (at most 4 numbers)"; break; }
        pnames[np] = x->string;
        pvals[np++] = x->valuedouble;
    }
    if (!bad && inter && (ni = jnames(inter, inames, PARITY_CUSTOM_MAX_INTERMEDIATES)) < 0)
        bad = "intermediates (at most 4 names)";
    if (!bad && rounded) cJSON_ArrayForEach(x, rounded) { /* the contract's rounded intermediates */
        if (nr >= PARITY_CUSTOM_MAX_INTERMEDIATES || !cJSON_IsString(x)) { bad = "rounded (at most 4 formats)"; break; }
        rnames[nr] = x->string;
        rfmts[nr++] = x->valuestring;
    }
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    if (bad) {
        snprintf(err, cap, "declaration: %s", bad);
    } else if (parity_custom_op_declare(&p->d, py_ref_tramp, p, &p->op, &diag) != PARITY_OK ||
               parity_custom_op_params(p->op, np, pnames, pvals, &diag) != PARITY_OK ||
               parity_custom_op_intermediates(p->op, ni, inames, &diag) != PARITY_OK ||
               parity_custom_op_rounded(p->op, nr, rnames, rfmts, &diag) != PARITY_OK) {
        snprintf(err, cap, "%s", diag.msg[0] ? diag.msg : "the declaration is not valid");
    } else {
        snprintf(p->key, sizeof p->key, "%s#decl%u", p->d.name, ++py_decl_serial);
        p->next = py_decls;
        py_decls = p;
        return p;
    }
    py_decl_free(p);
    return NULL;
}

int py_op_is_decl(const parity_op_t *op)
{
    for (const py_decl_t *p = py_decls; p; p = p->next)
        if (parity_custom_op_desc(p->op) == op) return 1;
    return 0;
}

EXPORT const char *parity_py_decl_key(const void *h) { return ((const py_decl_t *)h)->key; }

/* Baseline rule b on outputs outs[0..n) (parity_py_output_wrap tensors) of a declared op's case
 * built at workload "baseline:NAME" (custom_op.h parity_custom_baseline_case). *caught, *pass_fraction,
 * *margin and detail filled. 0, or the negated status. */
EXPORT int parity_py_decl_baseline_judge(const parity_case_t *c, int b, parity_tensor_t **outs, int *caught,
                                         double *pass_fraction, double *margin, char *detail, size_t cap)
{
    int odt[PARITY_OP_MAX_ARGS];
    const void *ou[PARITY_OP_MAX_ARGS];
    if (!c || c->n_outputs > PARITY_OP_MAX_ARGS) return -(int)PARITY_E_INVALID;
    for (int o = 0; o < c->n_outputs; o++) {
        if (!outs[o]) return -(int)PARITY_E_INVALID;
        odt[o] = outs[o]->view.dtype;
        ou[o] = outs[o]->view.data;
    }
    parity_baseline_result_t br;
    memset(&br, 0, sizeof br);
    parity_status_t st = parity_custom_baseline_case(b, c, odt, ou, &br);
    if (st != PARITY_OK) return -(int)st;
    *caught = br.caught;
    *pass_fraction = br.pass_fraction;
    *margin = br.margin;
    snprintf(detail, cap, "%s", br.detail);
    return 0;
}

/* Given inputs (custom_op.h parity_custom_op_given_drawn): a workload `name` of the caller's
 * values, sizes per declared dimension, inputs[i] doubles (float inputs) or int64 (token ids), a
 * float input NULL drawn from its role under the variant `draw` names (NULL or empty: none);
 * name empty: dropped. 0, or -1 with err filled. */
EXPORT int parity_py_decl_given(void *h, const char *name, const int64_t *sizes, const void *const *inputs,
                                const char *draw, char *err, size_t cap)
{
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    if (parity_custom_op_given_drawn(((py_decl_t *)h)->op, name && name[0] ? name : NULL, sizes, inputs,
                                     draw && draw[0] ? draw : NULL, &diag) != PARITY_OK) {
        snprintf(err, cap, "%s", diag.msg[0] ? diag.msg : "out of memory");
        return -1;
    }
    return 0;
}

/* Unregister and free a declaration (every case built from it must be freed first). */
EXPORT void parity_py_decl_free(void *h)
{
    for (py_decl_t **pp = &py_decls; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = ((py_decl_t *)h)->next;
            break;
        }
    py_decl_free(h);
}


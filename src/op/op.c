/* Helpers shared by op implementations: presets and shapes, cases, reference outputs. Calls
 * nothing of ops/ (the ops call these); finding an op by name or index is op_lookup.c. */
#include "parity/op.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/core/parallel.h"

const parity_workload_t *parity_op_find_preset(const parity_op_t *op, const char *name)
{
    for (int i = 0; i < op->n_presets; i++)
        if (strcmp(op->presets[i].name, name) == 0) return &op->presets[i];
    return NULL;
}

/* "NxD or NxDxV": the forms of min..max sizes, for messages. */
static void shape_forms(int min_dims, int max_dims, char *buf, size_t cap)
{
    static const char L[] = "NDVWXYZU";
    char f[2][24];
    for (int k = 0; k < 2; k++) {
        int n = k ? max_dims : min_dims;
        size_t o = 0;
        for (int i = 0; i < n && o + 3 < sizeof f[k]; i++) {
            if (i) f[k][o++] = 'x';
            f[k][o++] = L[i];
        }
        f[k][o] = 0;
    }
    if (min_dims == max_dims) snprintf(buf, cap, "%s", f[0]);
    else snprintf(buf, cap, "%s %s %s", f[0], max_dims == min_dims + 1 ? "or" : "to", f[1]);
}

#define SHAPE_MAX_SIZE INT64_C(2147483648) /* 2^31: no tensor parity builds has more elements */

parity_status_t parity_shape_parse(const char *text, int64_t *dims, int min_dims, int max_dims,
                                   int *n_dims, parity_diag_t *diag)
{
    if (n_dims) *n_dims = 0;
    if (min_dims < 1) min_dims = 1;
    if (max_dims > 8) max_dims = 8;
    char forms[64], want[160];
    shape_forms(min_dims, max_dims, forms, sizeof forms);
    snprintf(want, sizeof want, "expected %s: sizes 1..2^31 in decimal digits joined by 'x'", forms);
    if (!text || !*text) return parity_diag_set(diag, PARITY_E_INVALID, "'' is empty (%s)", want);
    const char *p = text;
    int n = 0;
    for (;;) {
        if (*p < '0' || *p > '9') {
            if (*p == 'x' || !*p)
                return parity_diag_set(diag, PARITY_E_INVALID, "'%s': size %d is empty (%s)", text,
                                       n + 1, want);
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': '%s' is not a size (%s)", text, p,
                                   want);
        }
        const char *digits = p;
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v <= SHAPE_MAX_SIZE) v = v * 10 + (*p - '0'); /* stops growing past 2^31 */
            p++;
        }
        if (v == 0)
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': size %d is 0 (sizes are 1 or more)",
                                   text, n + 1);
        if (v > SHAPE_MAX_SIZE)
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': size %d (%.*s) is above 2^31", text,
                                   n + 1, (int)(p - digits), digits);
        if (n == max_dims)
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': more than %d sizes (%s)", text,
                                   max_dims, want);
        dims[n++] = v;
        if (!*p) break;
        if (*p != 'x')
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': '%s' after %.*s is not part of a "
                                   "shape (%s)", text, p, (int)(p - digits), digits, want);
        p++;
    }
    if (n < min_dims)
        return parity_diag_set(diag, PARITY_E_INVALID, "'%s': %d size%s (%s)", text, n,
                               n == 1 ? "" : "s", want);
    if (n_dims) *n_dims = n;
    return PARITY_OK;
}

parity_status_t parity_op_workload(const parity_op_t *op, const char *name, parity_workload_t *out)
{
    return parity_op_workload_ex(op, name, out, NULL);
}

parity_status_t parity_op_workload_ex(const parity_op_t *op, const char *name, parity_workload_t *out,
                                      parity_diag_t *diag)
{
    char base[40];
    if (!op || !name || !out) return parity_diag_set(diag, PARITY_E_INVALID, "no op or workload");
    const char *at = strchr(name, '@');
    size_t bl = at ? (size_t)(at - name) : strlen(name);
    const parity_workload_t *p = NULL;
    if (bl < sizeof base) {
        memcpy(base, name, bl);
        base[bl] = 0;
        p = parity_op_find_preset(op, base);
    }
    if (!p)
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "op %s has no workload '%.*s' (list them: "
                               "parity ops %s)", op->name, (int)(bl < 200 ? bl : 200), name, op->name);
    *out = *p;
    if (!at) return PARITY_OK;
    int64_t dims[3];
    int got;
    parity_diag_t why;
    if (parity_shape_parse(at + 1, dims, 2, 3, &got, &why) != PARITY_OK)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload '%s': shape %s", name, why.msg);
    long long n = dims[0], d = dims[1], v = got == 3 ? dims[2] : p->v;
    /* A preset without a V dimension (V = 0: rmsnorm, ...) takes NxD as its whole shape. */
    int no_v = got == 2 && p->v == 0;
    if ((double)n * (double)d > 2147483648.0 || (double)v * (double)d > 2147483648.0)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload '%s': %s above 2^31 elements", name,
                               (double)n * (double)d > 2147483648.0 ? "N*D" : "V*D");
    out->n = n;
    out->d = d;
    out->v = v;
    if (no_v) snprintf(out->label, sizeof out->label, "%s@%lldx%lld", base, n, d);
    else snprintf(out->label, sizeof out->label, "%s@%lldx%lldx%lld", base, n, d, v);
    out->name = out->label;
    return PARITY_OK;
}

parity_status_t parity_case_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                  parity_dtype_t in_dtype, parity_case_t **out, parity_diag_t *diag)
{
    *out = NULL;
    parity_case_t *c = calloc(1, sizeof *c);
    if (!c) return PARITY_E_NOMEM;
    c->op = op;
    c->wl = wl;
    c->seed = seed;
    c->in_dtype = in_dtype;
    c->n_inputs = op->n_inputs;
    c->n_outputs = op->n_outputs;
    parity_status_t st = op->build(op, wl, seed, in_dtype, c, diag);
    if (st != PARITY_OK) {
        parity_case_free(c);
        return st;
    }
    *out = c;
    return PARITY_OK;
}

void parity_case_make_call(const parity_case_t *c, parity_abi_tensor_t *in, parity_abi_tensor_t *out,
                           parity_tensor_t *const *outs, int n_threads, uint64_t seed,
                           parity_abi_call_t *call)
{
    for (int i = 0; i < c->n_inputs; i++) in[i] = c->inputs[i]->view;
    for (int i = 0; i < c->n_outputs; i++) out[i] = outs[i]->view;
    memset(call, 0, sizeof *call);
    call->abi_version = PARITY_ABI_VERSION;
    call->struct_size = sizeof *call;
    call->op = c->op->name;
    call->n_inputs = c->n_inputs;
    call->n_outputs = c->n_outputs;
    call->inputs = in;
    call->outputs = out;
    call->n_attrs = c->n_attrs;
    call->attr_names = c->attr_names;
    call->attr_values = c->attr_values;
    call->seed = seed;
    /* 0: every online core (or $PARITY_THREADS), as op.h and verify.h document (issue #40). */
    call->n_threads = n_threads > 0 ? n_threads : parity_num_threads();
}

static void ref_free(parity_ref_output_t *r)
{
    free(r->slot);
    free(r->ref);
    free(r->s_acc);
    free(r->s_up);
    free(r->k);
    free(r->row_key);
    free(r->s_op);
    free(r->s_sym);
    free(r->s_up2);
}

void parity_case_free(parity_case_t *c)
{
    if (!c) return;
    if (c->op && c->op->free_priv) c->op->free_priv(c);
    for (int i = 0; i < PARITY_OP_MAX_ARGS; i++) {
        parity_tensor_free(c->inputs[i]);
        ref_free(&c->ref[i]);
    }
    free(c->owned_wl);
    free(c);
}

void *parity_calloc_faulted(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
#ifdef MADV_POPULATE_WRITE
    size_t bytes = n * size; /* calloc checked the product */
    long pg = sysconf(_SC_PAGESIZE);
    if (p && pg > 0) {
        /* The whole pages inside the block, whatever its size: one system call against two
         * faults and an interprocessor interrupt per fresh page, so no size threshold. A block
         * from the heap that calloc wrote has its pages present, and this only walks them.
         * Advisory: an older kernel skips it. */
        uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
        uintptr_t e = ((uintptr_t)p + bytes) & ~((uintptr_t)pg - 1);
        if (e > a) parity_madvise_parallel((void *)a, e - a, MADV_POPULATE_WRITE);
    }
#endif
    return p;
}

parity_status_t parity_ref_output_alloc(parity_ref_output_t *r, const char *name,
                                        const char *row_kind, int64_t rows, int64_t cols,
                                        int sparse, int64_t n_slots, int with_s_up)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->row_kind = row_kind;
    r->rows = rows;
    r->cols = cols;
    r->n_slots = sparse ? n_slots : rows;
    size_t ne = (size_t)r->n_slots * (size_t)cols;
    if (sparse && !(r->slot = malloc((size_t)rows * sizeof *r->slot))) return PARITY_E_NOMEM;
    r->ref = parity_calloc_faulted(ne, sizeof *r->ref);
    r->s_acc = parity_calloc_faulted(ne, sizeof *r->s_acc);
    r->k = calloc(r->n_slots ? (size_t)r->n_slots : 1, sizeof *r->k);
    if (with_s_up) r->s_up = parity_calloc_faulted(ne, sizeof *r->s_up);
    if (!r->ref || !r->s_acc || !r->k || (with_s_up && !r->s_up)) return PARITY_E_NOMEM;
    return PARITY_OK;
}

void parity_store_f64(parity_tensor_t *t, const double *src)
{
    int64_t n = parity_tensor_numel(&t->view);
    if (t->view.dtype == PARITY_DT_F32) {
        float *p = t->view.data;
        for (int64_t i = 0; i < n; i++) p[i] = (float)src[i];
    } else { /* encodes from double directly: no double rounding through fp32 */
        for (int64_t i = 0; i < n; i++) parity_tensor_set(&t->view, i, src[i]);
    }
}

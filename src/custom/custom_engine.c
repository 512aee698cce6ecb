/* Declared ops in the one check engine (issue #35): a declared op (op_abi.h) becomes an ordinary
 * op descriptor (parity_op_t), its workloads ordinary presets, its cases ordinary parity_case_t,
 * so that a kernel of a declared op is run and judged by the very code that runs and judges a
 * kernel of a built-in op (src/verify/check.c): the forked child with a parent-side deadline
 * (a kernel that blocks or ignores signals is killed: "timeout"), 4 KiB guards on both sides of
 * every output and input, NaN prefill, the decoy into the judged buffers, the call on the judged
 * buffers holding other contents, the bit-for-bit rerun, the shape neighbours, input digests, the
 * judge (verify.c: the error model, or the declared op's measured floor as an explicit
 * per-element tolerance, parity_ref_output_t.tol) and the diagnosis (check.c's, through the
 * descriptor's emulate). What stays declared-op specific: building the case from the roles
 * (custom_op.c), the reference and the floor (custom_tol.c), and which dimension the shape
 * neighbours move.
 * Deliberately not here: the report's layout (src/verify/report.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/baseline.h"
#include "src/custom/custom_impl.h"
#include "src/format/format_fast.h"
#include "src/verify/verify_internal.h"

/* The diagnosis's budgets (check.c picks the rows): the reference evaluated once per term of the
 * reduction on the whole inputs, and the terms of the diagnosis rows held for the emulations. */
#define TERM_BUDGET (1LL << 28) /* k x (input + output elements) the slice evaluation may touch */
#define TERMS_KEPT (1LL << 24)  /* terms held: 128 MiB of doubles */


static parity_custom_op_t *op_of(const parity_op_t *d)
{
    return (parity_custom_op_t *)(void *)((char *)d - offsetof(parity_custom_op_t, desc));
}


/* The declared workload a preset (or a shape neighbour derived from one: "base@31x0x0", whose n
 * is the size of nbr_dim) stands for, into *out. 0: none of that name. */
static int find_workload(const parity_custom_op_t *op, const parity_workload_t *wl, custom_workload_t *out)
{
    const char *at = strchr(wl->name, '@');
    size_t len = at ? (size_t)(at - wl->name) : strlen(wl->name);
    const custom_workload_t *src = NULL;
    if (op->given_wl.name[0] && strcmp(op->given_wl.name, wl->name) == 0) { /* given values, by full name */
        *out = op->given_wl;
        return 1;
    }
    for (int w = 0; w < op->n_wl && !src; w++)
        if (strlen(op->wl[w].name) == len && strncmp(op->wl[w].name, wl->name, len) == 0) src = &op->wl[w];
    for (int b = 0; b < PARITY_N_BASELINES && !src; b++)
        if (strlen(op->bl_wl[b].name) == len && strncmp(op->bl_wl[b].name, wl->name, len) == 0)
            src = &op->bl_wl[b];
    if (!src) return 0;
    *out = *src;
    if (at) { /* a shape neighbour: another size of one dimension, its own draws */
        out->size[op->nbr_dim] = wl->n;
        out->production = 0;
        if (out->variant == CV_GIVEN) out->variant = CV_BASE; /* given values have one size */
        snprintf(out->name, sizeof out->name, "%s", wl->name);
    }
    return 1;
}

/* Output o of case cc as the judge reads it. Multilinear reduction: verify.c's error model (k,
 * s_acc, m_up; s_up = s_acc when each term is rounded). Otherwise: the floor as an explicit
 * tolerance, s_acc = |ref| (the scale of the row errors the report's correlation uses). own: the
 * parity_case_t takes ref and s_acc (it frees them); else they are borrowed, and
 * ref_output_release frees what this allocated. */
static int ref_output(custom_case_t *cc, int o, int own, parity_ref_output_t *R)
{
    const parity_custom_op_t *op = cc->op;
    memset(R, 0, sizeof *R);
    R->name = op->out[o].name;
    R->row_kind = "row";
    R->rows = R->n_slots = cc->rows[o];
    R->cols = cc->cols[o];
    R->ref = cc->ref[o];
    R->k = malloc((size_t)(R->rows > 0 ? R->rows : 1) * sizeof *R->k);
    if (!R->k) return -1;
    for (int64_t r = 0; r < R->rows; r++) R->k[r] = cc->k[o];
    if (cc->s_acc[o]) {
        R->s_acc = cc->s_acc[o];
        R->m_up = cc->m_up[o];
        if (R->m_up > 0) {
            if (!(R->s_up = malloc((size_t)cc->n_out[o] * sizeof *R->s_up))) return -1;
            memcpy(R->s_up, cc->s_acc[o], (size_t)cc->n_out[o] * sizeof *R->s_up);
        }
        if (own) cc->s_acc[o] = NULL; /* the case's now; the diagnosis reads it through the case */
    } else {
        if (!(R->s_acc = malloc((size_t)cc->n_out[o] * sizeof *R->s_acc))) return -1;
        for (int64_t j = 0; j < cc->n_out[o]; j++) R->s_acc[j] = isfinite(cc->ref[o][j]) ? fabs(cc->ref[o][j]) : 0;
        R->tol = cc->tol[o];
    }
    if (own) cc->ref[o] = NULL;
    return 0;
}

static void ref_output_release(const custom_case_t *cc, int o, parity_ref_output_t *R)
{
    free(R->k);
    free(R->s_up);
    if (R->s_acc != cc->s_acc[o]) free(R->s_acc);
}

double custom_judge_max_q(const custom_case_t *c, const float *const *outputs)
{
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    for (int o = 0; o < c->op->n_out; o++) {
        parity_ref_output_t R;
        parity_abi_tensor_t t;
        if (ref_output((custom_case_t *)c, o, 0, &R) != 0) {
            ref_output_release(c, o, &R);
            return INFINITY; /* no memory: never a pass */
        }
        custom_tensor(c->op, &c->op->out[o], c->wl->size, (void *)outputs[o], PARITY_DT_F32, &t);
        parity_judge_output(&R, &t, PARITY_DT_F32, o, &res, NULL);
        ref_output_release(c, o, &R);
    }
    return res.max_q;
}

static void free_priv(parity_case_t *c)
{
    desc_priv_t *p = c->priv;
    if (!p) return;
    custom_case_free(&p->cc);
    free(p->terms);
    free(p);
    c->priv = NULL;
}

static parity_status_t build(const parity_op_t *d, const parity_workload_t *wl, uint64_t seed,
                             parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    parity_custom_op_t *op = op_of(d);
    desc_priv_t *p = calloc(1, sizeof *p);
    if (!p) return PARITY_E_NOMEM;
    c->priv = p; /* freed by free_priv, also when this fails */
    if (!find_workload(op, wl, &p->wl))
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "op %s has no workload %s", d->name, wl->name);
    custom_case_t *cc = &p->cc;
    cc->op = op;
    cc->wl = &p->wl;
    cc->dtype = dt;
    parity_status_t st = custom_case_inputs(cc, seed, diag);
    if (st == PARITY_OK) st = custom_case_reference(cc, diag);
    if (st != PARITY_OK) return st;
    c->n_attrs = op->d->n_attrs;
    for (int a = 0; a < c->n_attrs; a++) {
        c->attr_names[a] = op->d->attr_names[a];
        c->attr_values[a] = op->d->attr_values[a];
    }
    for (int i = 0; i < op->n_in; i++) {
        int fl = custom_is_float_role(op->role[i]);
        parity_abi_tensor_t v;
        custom_tensor(op, &op->in[i], p->wl.size, NULL, fl ? dt : PARITY_DT_I64, &v);
        c->inputs[i] = parity_tensor_new(op->in[i].name, (parity_dtype_t)v.dtype, v.ndim, v.shape);
        if (!c->inputs[i]) return PARITY_E_NOMEM;
        memcpy(c->inputs[i]->view.data, fl ? cc->store[i] : (void *)cc->ids[i], c->inputs[i]->nbytes);
    }
    for (int o = 0; o < op->n_out; o++) {
        parity_abi_tensor_t v;
        custom_tensor(op, &op->out[o], p->wl.size, NULL, PARITY_DT_F32, &v);
        c->out_ndim[o] = v.ndim;
        memcpy(c->out_shape[o], v.shape, sizeof v.shape);
        if (ref_output(cc, o, 1, &c->ref[o]) != 0) return PARITY_E_NOMEM;
    }
    return PARITY_OK;
}

/* The diagnosis's emulation (op.h): for an output with a multilinear reduction its terms are the
 * reference on slices of the reduced dimensions (custom_for_each_term), summed in acc's format
 * and order as parity_format_sum would; otherwise there are no terms to emulate. */
typedef struct {
    const int64_t *rows;
    int64_t n_rows, cols;
    int o;
    double *T;
} take_t;

static int take(void *ctx, int64_t t, double *const *out)
{
    take_t *s = ctx;
    int64_t n = s->n_rows * s->cols;
    for (int64_t q = 0; q < s->n_rows; q++)
        for (int64_t j = 0; j < s->cols; j++)
            s->T[t * n + q * s->cols + j] = (float)out[s->o][s->rows[q] * s->cols + j]; /* fp32 terms */
    return 0;
}

static parity_status_t emulate(const parity_case_t *c, int o, const parity_format_t *acc,
                               parity_sum_order_t order, const int64_t *rows, int64_t n_rows, double *dst)
{
    desc_priv_t *p = c->priv;
    const custom_case_t *cc = &p->cc;
    const parity_custom_op_t *op = cc->op;
    if (!(op->multilinear && op->n_red[o] > 0)) return PARITY_E_INVALID;
    int64_t k = cc->k[o], cols = cc->cols[o], n = n_rows * cols, touched = cc->n_out[o];
    for (int i = 0; i < op->n_in; i++) touched += cc->n_in[i];
    if ((double)k * (double)touched > (double)TERM_BUDGET || (double)k * (double)n > (double)TERMS_KEPT)
        return PARITY_E_INVALID; /* too long to emulate here */
    if (!p->terms || p->t_out != o || p->t_rows != rows || p->t_n != n) {
        free(p->terms);
        p->terms = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *p->terms);
        if (!p->terms) return PARITY_E_NOMEM;
        take_t tt = {rows, n_rows, cols, o, p->terms};
        if (custom_for_each_term(cc, o, take, &tt) != 0) {
            free(p->terms);
            p->terms = NULL;
            return PARITY_E_FORMAT;
        }
        p->t_out = o;
        p->t_rows = rows;
        p->t_n = n;
        p->t_k = k;
    }
    return parity_format_sum_fast_cols(acc, p->terms, k, n, order, dst) ? PARITY_E_NOMEM : PARITY_OK;
}

/* The baseline rules of a declared op (op.h baseline_workload / baseline_judge): each rule's own
 * inputs at the base sizes (the bl_presets), the rules that do not apply said so, the judgement
 * parity_custom_baseline_case's. */
static parity_status_t bl_workload(const parity_op_t *d, int b, const parity_workload_t **wl, uint64_t *seed,
                                   char *why, size_t cap)
{
    const parity_custom_op_t *op = op_of(d);
    int reduced[PARITY_CUSTOM_MAX_ARGS];
    char w[200];
    for (int o = 0; o < op->n_out; o++) reduced[o] = op->n_red[o] > 0;
    if (b < 0 || b >= PARITY_N_BASELINES) return PARITY_E_INVALID;
    if (!parity_custom_baseline_applies(b, op->n_out, reduced, op->multilinear, w, sizeof w)) {
        if (why && cap) snprintf(why, cap, "%s", w);
        return PARITY_E_NOTFOUND;
    }
    *wl = &op->bl_presets[b];
    if (seed) *seed = parity_custom_baseline_seed(b);
    return PARITY_OK;
}

static parity_status_t bl_judge(int b, const parity_case_t *c, parity_tensor_t *const *outs,
                                parity_baseline_result_t *br)
{
    int odt[PARITY_OP_MAX_ARGS];
    const void *ou[PARITY_OP_MAX_ARGS];
    for (int o = 0; o < c->n_outputs && o < PARITY_OP_MAX_ARGS; o++) {
        odt[o] = outs[o]->view.dtype;
        ou[o] = outs[o]->view.data;
    }
    return parity_custom_baseline_case(b, c, odt, ou, br);
}

parity_status_t custom_desc_init(parity_custom_op_t *op, parity_diag_t *diag)
{
    const parity_abi_op_decl_t *d = op->d;
    if (op->n_in > PARITY_OP_MAX_ARGS || op->n_out > PARITY_OP_MAX_ARGS || d->n_attrs > 4)
        return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: the check engine takes at most %d inputs, %d "
                               "outputs and 4 attributes (it declares %d, %d and %d)", d->name, PARITY_OP_MAX_ARGS,
                               PARITY_OP_MAX_ARGS, op->n_in, op->n_out, d->n_attrs);
    parity_op_t *x = &op->desc;
    memset(x, 0, sizeof *x);
    x->name = d->name;
    x->summary = d->description ? d->description : "";
    x->n_inputs = op->n_in;
    x->n_outputs = op->n_out;
    for (int i = 0; i < op->n_in && i < PARITY_OP_MAX_ARGS; i++) {
        x->input_names[i] = op->in[i].name;
        x->input_is_float[i] = custom_is_float_role(op->role[i]);
    }
    for (int o = 0; o < op->n_out && o < PARITY_OP_MAX_ARGS; o++) x->output_names[o] = op->out[o].name;
    x->faithful_accumulator = "fp32";
    x->declared = 1;
    int any_red = 0;
    for (int o = 0; o < op->n_out; o++) any_red |= op->n_red[o] > 0;
    x->no_diagnosis = !any_red ? "no reduction declared"
                    : !op->multilinear ? "the declared reduction is not multilinear (no terms to emulate)"
                                       : NULL;
    x->baseline_workload = bl_workload;
    x->baseline_judge = bl_judge;
    snprintf(op->error_model, sizeof op->error_model, "declared op: %s",
             op->multilinear ? "the error model of its multilinear reductions, the empirical floor elsewhere"
                             : "the empirical floor (docs/custom-ops.md)");
    x->error_model = op->error_model;
    x->presets = op->presets;
    x->n_presets = op->n_wl;
    x->build = build;
    x->emulate = emulate;
    x->free_priv = free_priv;
    /* The shape neighbours move the first dimension the odd workload may move (a fixed one, an
     * even rotary head dimension, stays): a kernel tuned to one size of it fails the others. */
    op->nbr_dim = 0;
    for (int i = op->n_dims - 1; i >= 0; i--)
        if (!op->fixed[i]) op->nbr_dim = i;
    for (int w = 0; w < op->n_wl; w++) {
        parity_workload_t *p = &op->presets[w];
        memset(p, 0, sizeof *p);
        p->name = op->wl[w].name;
        p->summary = "";
        p->n = op->wl[w].size[op->nbr_dim]; /* d = v = 0: the neighbours change nothing else */
        p->production = op->wl[w].production;
    }
    for (int b = 0; b < PARITY_N_BASELINES; b++) { /* a plain run each: no probes on them */
        snprintf(op->bl_wl[b].name, sizeof op->bl_wl[b].name, "baseline:%s", parity_baseline_name(b));
        op->bl_wl[b].variant = custom_baseline_variant(b);
        op->bl_wl[b].production = 1;
        memcpy(op->bl_wl[b].size, op->wl[0].size, sizeof op->bl_wl[b].size); /* the base sizes */
        parity_workload_t *p = &op->bl_presets[b];
        memset(p, 0, sizeof *p);
        p->name = op->bl_wl[b].name;
        p->summary = "";
        p->n = op->bl_wl[b].size[op->nbr_dim];
        p->production = 1;
    }
    /* The cause classifier's parameters (custom_cause.c): the declared attributes, until
     * parity_custom_op_params names others (a host language's, which the declaration lacks). */
    op->n_params = d->n_attrs < PARITY_CUSTOM_MAX_PARAMS ? d->n_attrs : PARITY_CUSTOM_MAX_PARAMS;
    for (int a = 0; a < op->n_params; a++) {
        snprintf(op->param_name[a], sizeof op->param_name[a], "%s", d->attr_names[a] ? d->attr_names[a] : "");
        op->param_value[a] = d->attr_values[a];
    }
    custom_cause_init(op);
    return PARITY_OK;
}

/* The public constructors (custom_op.h): the declaration parsed (custom_op.c), then made a
 * descriptor of the check engine, here above the parts the descriptor calls. */
static parity_status_t as_engine_op(parity_status_t st, parity_custom_op_t **out, parity_diag_t *diag)
{
    if (st == PARITY_OK) st = custom_desc_init(*out, diag);
    if (st != PARITY_OK) {
        parity_custom_op_free(*out); /* NULL-safe: the declaration's memory and its plugin handle */
        *out = NULL;
    }
    return st;
}

parity_status_t parity_custom_op_load(const char *path, const char *name, parity_custom_op_t **out,
                                      parity_diag_t *diag)
{
    return as_engine_op(custom_op_load(path, name, out, diag), out, diag);
}

parity_status_t parity_custom_op_declare(const parity_abi_op_decl_t *decl, parity_custom_ref_fn ref, void *arg,
                                         parity_custom_op_t **out, parity_diag_t *diag)
{
    return as_engine_op(custom_op_declare(decl, ref, arg, out, diag), out, diag);
}

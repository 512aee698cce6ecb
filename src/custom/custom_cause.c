/* Declared ops in the diagnosis's cause classifier (issue #36; docs/custom-ops.md "Causes",
 * docs/error-model.md "Cause"): a declared op names its refittable parameters (its attributes,
 * or parity_custom_op_params') and the intermediates its reference marks
 * (parity_custom_op_intermediates) once, and its descriptor gets what a built-in op's declares in
 * C: params[] / param_ref (the reference re-run with one parameter at a trial value) and one ROUNDED variant per intermediate with variant_ref (the reference re-run with that
 * intermediate rounded to bf16 or fp16). The fits themselves are the check engine's
 * (src/verify/check_cause.c, check_variant.c), the same as for the built-in ops.
 * Deliberately not here: the reference call itself (custom_tol.c, custom_op.c), the trial state
 * (custom_trial.c), the rounded intermediates' tolerance (custom_tol.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "src/custom/custom_impl.h"

static parity_custom_op_t *op_of(const parity_op_t *d)
{
    return (parity_custom_op_t *)(void *)((char *)d - offsetof(parity_custom_op_t, desc));
}

/* The case's reference re-run under trial t, output o's rows[0..n) into ref, s_acc and s_up (as
 * custom_engine.c's ref_output forms them: a multilinear reduction's s_acc the reference on
 * |inputs| under the same trial, s_up = s_acc where terms are rounded; elsewhere s_acc = |ref|).
 * PARITY_E_UNSUPPORTED: t rounds an intermediate the reference never marked on this case. */
static parity_status_t rerun(const parity_case_t *c, int o, parity_custom_trial_t *t, const int64_t *rows,
                             int64_t n, double *ref, double *s_acc, double *s_up)
{
    const custom_case_t *cc = custom_case_of(c);
    const parity_custom_op_t *op = cc->op;
    int model = op->multilinear && op->n_red[o] > 0;
    double *outs[PARITY_CUSTOM_MAX_ARGS] = {0}, *sums[PARITY_CUSTOM_MAX_ARGS] = {0};
    double *absv[PARITY_CUSTOM_MAX_ARGS] = {0};
    parity_status_t st = PARITY_E_NOMEM;
    for (int q = 0; q < op->n_out; q++)
        if (!(outs[q] = malloc((size_t)(cc->n_out[q] ? cc->n_out[q] : 1) * sizeof(double))) ||
            (model && !(sums[q] = malloc((size_t)(cc->n_out[q] ? cc->n_out[q] : 1) * sizeof(double)))))
            goto done;
    for (int i = 0; model && i < op->n_in; i++) {
        if (!custom_is_float_role(op->role[i])) continue;
        if (!(absv[i] = malloc((size_t)(cc->n_in[i] ? cc->n_in[i] : 1) * sizeof(double)))) goto done;
        for (int64_t j = 0; j < cc->n_in[i]; j++) absv[i][j] = fabs(cc->exact[i][j]);
    }
    t->used = 0;
    parity_custom_trial_t *prev = custom_trial_enter(t);
    int rc = custom_reference(cc, PARITY_DT_F64, NULL, outs);
    if (!rc && model) rc = custom_reference(cc, PARITY_DT_F64, absv, sums);
    custom_trial_enter(prev);
    st = rc ? PARITY_E_FORMAT : t->intermediate && !t->used ? PARITY_E_UNSUPPORTED : PARITY_OK;
    int64_t cols = cc->cols[o];
    for (int64_t q = 0; st == PARITY_OK && q < n; q++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t x = q * cols + j, y = rows[q] * cols + j;
            ref[x] = outs[o][y];
            s_acc[x] = model ? fabs(sums[o][y]) : isfinite(outs[o][y]) ? fabs(outs[o][y]) : 0;
            if (s_up) s_up[x] = s_acc[x];
        }
done:
    for (int q = 0; q < PARITY_CUSTOM_MAX_ARGS; q++) {
        free(outs[q]);
        free(sums[q]);
        free(absv[q]);
    }
    return st;
}

static parity_status_t param_ref(const parity_case_t *c, int o, int which, double value, const int64_t *rows,
                                 int64_t n, double *ref, double *s_acc, double *s_up)
{
    const parity_custom_op_t *op = op_of(c->op);
    if (which < 0 || which >= op->n_params || !isfinite(value)) return PARITY_E_UNSUPPORTED;
    parity_custom_trial_t t = {op->param_name[which], value, NULL, NULL, 0, 0};
    return rerun(c, o, &t, rows, n, ref, s_acc, s_up);
}

static parity_status_t variant_ref(const parity_case_t *c, int o, int which, const parity_format_t *fmt, int dir,
                                   const int64_t *rows, int64_t n, double *ref, double *s_acc, double *s_up)
{
    const parity_custom_op_t *op = op_of(c->op);
    if (which < 0 || which >= op->n_inter || !fmt) return PARITY_E_UNSUPPORTED;
    parity_custom_trial_t t = {NULL, 0, op->inter_name[which], fmt->name, dir, 0};
    return rerun(c, o, &t, rows, n, ref, s_acc, s_up);
}

void custom_cause_init(parity_custom_op_t *op)
{
    parity_op_t *x = &op->desc;
    memset(x->params, 0, sizeof x->params);
    for (int p = 0; p < op->n_params && p < PARITY_OP_MAX_PARAMS; p++) {
        x->params[p].name = op->param_name[p];
        x->params[p].value = op->param_value[p]; /* 0 or less: not refit (op.h) */
    }
    x->param_value = NULL; /* one value for every case: the declared one */
    x->param_ref = op->n_params > 0 ? param_ref : NULL;
    memset(x->variants, 0, sizeof x->variants);
    for (int v = 0; v < op->n_inter && v < PARITY_CUSTOM_MAX_INTERMEDIATES; v++) {
        x->variants[v].kind = PARITY_VARIANT_ROUNDED;
        x->variants[v].what = op->inter_what[v];
        x->variants[v].per_row = 0; /* nothing says one value per row: nearest only */
    }
    x->variant_ref = op->n_inter > 0 ? variant_ref : NULL;
}

static int name_ok(const char *s, size_t cap) { return s && s[0] && strlen(s) < cap; }

parity_status_t parity_custom_op_params(parity_custom_op_t *op, int n, const char *const *names,
                                        const double *values, parity_diag_t *diag)
{
    if (!op || n < 0 || n > PARITY_CUSTOM_MAX_PARAMS || (n && (!names || !values)))
        return parity_diag_set(diag, PARITY_E_INVALID, "parameters: at most %d", PARITY_CUSTOM_MAX_PARAMS);
    for (int p = 0; p < n; p++)
        if (!name_ok(names[p], 16)) /* op.h: a parameter's name has at most 15 characters */
            return parity_diag_set(diag, PARITY_E_INVALID, "parameter %d: a name of 1 to 15 characters", p);
    for (int p = 0; p < n; p++) {
        snprintf(op->param_name[p], sizeof op->param_name[p], "%s", names[p]);
        op->param_value[p] = values[p];
    }
    op->n_params = n;
    custom_cause_init(op);
    return PARITY_OK;
}

parity_status_t parity_custom_op_intermediates(parity_custom_op_t *op, int n, const char *const *names,
                                               parity_diag_t *diag)
{
    if (!op || n < 0 || n > PARITY_CUSTOM_MAX_INTERMEDIATES || (n && !names))
        return parity_diag_set(diag, PARITY_E_INVALID, "intermediates: at most %d", PARITY_CUSTOM_MAX_INTERMEDIATES);
    for (int v = 0; v < n; v++)
        if (!name_ok(names[v], 32))
            return parity_diag_set(diag, PARITY_E_INVALID, "intermediate %d: a name of 1 to 31 characters", v);
    for (int v = 0; v < n; v++) {
        snprintf(op->inter_name[v], sizeof op->inter_name[v], "%s", names[v]);
        snprintf(op->inter_what[v], sizeof op->inter_what[v], "the intermediate %s", names[v]);
    }
    op->n_inter = n;
    custom_cause_init(op);
    return PARITY_OK;
}

parity_status_t parity_custom_op_rounded(parity_custom_op_t *op, int n, const char *const *names,
                                         const char *const *formats, parity_diag_t *diag)
{
    if (!op || n < 0 || n > PARITY_CUSTOM_MAX_INTERMEDIATES || (n && (!names || !formats)))
        return parity_diag_set(diag, PARITY_E_INVALID, "rounded intermediates: at most %d", PARITY_CUSTOM_MAX_INTERMEDIATES);
    for (int v = 0; v < n; v++) {
        if (!name_ok(names[v], 32))
            return parity_diag_set(diag, PARITY_E_INVALID, "rounded intermediate %d: a name of 1 to 31 characters", v);
        if (!formats[v] || (strcmp(formats[v], "bf16") != 0 && strcmp(formats[v], "fp16") != 0))
            return parity_diag_set(diag, PARITY_E_INVALID, "rounded intermediate %s: format %s (bf16 or fp16)",
                                   names[v], formats[v] ? formats[v] : "(none)");
    }
    for (int v = 0; v < n; v++) {
        snprintf(op->rounded_name[v], sizeof op->rounded_name[v], "%s", names[v]);
        snprintf(op->rounded_fmt[v], sizeof op->rounded_fmt[v], "%s", formats[v]);
    }
    op->n_rounded = n;
    return PARITY_OK;
}

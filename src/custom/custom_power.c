/* The power self-test of a declared op in C (custom_op.h, docs/custom-ops.md "The power
 * self-test"): generic mutants built from the plugin's own reference, judged by the tolerance the
 * declaration gives, so a user learns what that tolerance catches before trusting it. The same
 * mutants as python/parity/custom_power.py, except that a C reference computes only in F64/F32:
 * where Python evaluates the reference with every numpy op in bf16/fp16 ("bf16-math"), C rounds
 * the fp32 evaluation once to bf16/fp16 ("bf16-out"), the least any such evaluation does.
 * Deliberately not here: running kernels (mutants are outputs), the table's layout
 * (programs/cmd_power_declared.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/custom/custom_impl.h"
#include "parity/format.h"
#include "parity/tensor.h"

typedef struct {
    custom_case_t *c;
    int have32;                         /* the reference evaluates in F32 */
    double *out[PARITY_CUSTOM_MAX_ARGS]; /* scratch outputs, n_out[o] doubles each */
} pw_t;

/* The reference in fp32 on vals (NULL: the case's inputs) into out: the plugin's F32 evaluation,
 * or, for an fp64-only reference, its F64 value rounded once to fp32 (the inputs' change, which
 * is what the mutants built on this measure, dominates either way). */
static int eval32(pw_t *p, double *const *vals, double **out)
{
    const custom_case_t *c = p->c;
    int rc = p->have32 ? custom_reference(c, PARITY_DT_F32, vals, out) : custom_reference(c, PARITY_DT_F64, vals, out);
    if (!rc && !p->have32)
        for (int o = 0; o < c->op->n_out; o++)
            for (int64_t j = 0; j < c->n_out[o]; j++) out[o][j] = (float)out[o][j];
    return rc;
}

/* A sequential accumulator in fmt over output o's reduced dimensions, with fp32 terms: for a
 * multilinear op the reference on one slice of the reduced dimensions (every float input carrying
 * them zeroed elsewhere) is that slice's term, so acc = fmt(acc + fp32(term_t)), t = 0..k-1 in C
 * order, is what a kernel with that accumulator computes (as custom_power.py's _seq_accum). */
typedef struct {
    const custom_case_t *c;
    int o;
    const parity_format_t *fmt;
    parity_round_opts_t ro;
    double *acc;
} seq_t;

static int seq_step(void *ctx, int64_t t, double *const *out)
{
    seq_t *s = ctx;
    (void)t;
    for (int64_t j = 0; j < s->c->n_out[s->o]; j++)
        s->acc[j] = parity_format_round(s->fmt, s->acc[j] + (double)(float)out[s->o][j], &s->ro, NULL);
    return 0;
}

static int seq_accum(pw_t *p, int o, const parity_format_t *fmt, double *acc)
{
    seq_t s = {p->c, o, fmt, parity_format_default_opts(fmt), acc};
    for (int64_t j = 0; j < p->c->n_out[o]; j++) acc[j] = 0;
    return custom_for_each_term(p->c, o, seq_step, &s);
}

static void row(parity_custom_power_row_t *r, const char *m, const char *wl, const char *desc, const char *why)
{
    memset(r, 0, sizeof *r);
    snprintf(r->mutant, sizeof r->mutant, "%s", m);
    snprintf(r->workload, sizeof r->workload, "%s", wl);
    snprintf(r->description, sizeof r->description, "%s", desc ? desc : "");
    r->applies = why == NULL;
    if (why) snprintf(r->why_not, sizeof r->why_not, "%s", why);
}

/* Judge mutant outputs (doubles) as an fp32 output into r. */
static int judge(const custom_case_t *c, double *const *y, parity_custom_power_row_t *r)
{
    void *f[PARITY_CUSTOM_MAX_ARGS] = {0};
    int ok = 1;
    for (int o = 0; o < c->op->n_out; o++) {
        float *v = f[o] = malloc((size_t)c->n_out[o] * sizeof(float) + 1);
        if (!v) {
            ok = 0;
            break;
        }
        for (int64_t j = 0; j < c->n_out[o]; j++) v[j] = (float)y[o][j];
    }
    if (ok) { /* the check engine's judge (custom_engine.c), as for a kernel's outputs */
        r->err_over_tol = custom_judge_max_q(c, (const float *const *)f);
        r->caught = r->err_over_tol > 1;
    }
    for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(f[o]);
    return ok ? 0 : -1;
}

typedef struct {
    double *y[PARITY_CUSTOM_MAX_ARGS];
} outs_t;

static int outs_alloc(const custom_case_t *c, outs_t *m)
{
    memset(m, 0, sizeof *m);
    for (int o = 0; o < c->op->n_out; o++)
        if (!(m->y[o] = malloc((size_t)c->n_out[o] * sizeof(double) + 8))) return -1;
    return 0;
}
static void outs_free(outs_t *m)
{
    for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(m->y[o]);
}

/* The seven mutants on one case: rows[0..PARITY_CUSTOM_N_MUTANTS). */
static parity_status_t mutants(pw_t *p, parity_custom_power_row_t *rows, parity_diag_t *diag)
{
    custom_case_t *c = p->c;
    const parity_custom_op_t *op = c->op;
    const char *wl = c->wl->name;
    int first_nd = op->out[0].ndim, any_red = 0;
    for (int o = 0; o < op->n_out; o++) any_red |= op->n_red[o] > 0;
    int model = op->multilinear && any_red;
    outs_t good, m;
    parity_format_t fb, fh, fl;
    const char *lname = c->dtype == PARITY_DT_F32 ? "tf32" : c->dtype == PARITY_DT_F16 ? "e5m2" : "e4m3fn";
    if (outs_alloc(c, &good) || outs_alloc(c, &m) || parity_format_get("bf16", &fb, NULL) ||
        parity_format_get("fp16", &fh, NULL) || parity_format_get(lname, &fl, NULL)) {
        outs_free(&good);
        outs_free(&m);
        return PARITY_E_NOMEM;
    }
    parity_status_t st = PARITY_OK;
    int rc = 0;
    /* control */
    if (p->have32 || !model) {
        row(&rows[0], "control", wl, "the reference in fp32 (a faithful evaluation: must pass)", NULL);
        rc = eval32(p, NULL, good.y);
    } else {
        row(&rows[0], "control", wl, "a sequential fp32 accumulator over the declared reduction (the reference "
            "has no fp32 evaluation; a faithful kernel: must pass)", NULL);
        parity_format_t f32;
        parity_format_get("fp32", &f32, NULL);
        for (int o = 0; o < op->n_out && !rc; o++) rc = seq_accum(p, o, &f32, good.y[o]);
    }
    if (!rc) rc = judge(c, good.y, &rows[0]);
    /* the narrow accumulators, or the narrow results */
    for (int h = 0; h < 2 && !rc; h++) {
        const parity_format_t *f = h ? &fh : &fb;
        parity_custom_power_row_t *r = &rows[1 + h];
        if (model) {
            row(r, h ? "fp16-accum" : "bf16-accum", wl, h ? "sequential fp16 accumulator over the declared "
                "reduction, fp32 terms" : "sequential bf16 accumulator over the declared reduction, fp32 terms",
                NULL);
            for (int o = 0; o < op->n_out && !rc; o++) {
                if (op->n_red[o]) rc = seq_accum(p, o, f, m.y[o]);
                else memcpy(m.y[o], good.y[o], (size_t)c->n_out[o] * sizeof(double));
            }
        } else {
            row(r, h ? "fp16-out" : "bf16-out", wl, h ? "the reference in fp32, its result rounded to fp16" :
                "the reference in fp32, its result rounded to bf16", NULL);
            parity_round_opts_t ro = parity_format_default_opts(f);
            for (int o = 0; o < op->n_out; o++)
                for (int64_t j = 0; j < c->n_out[o]; j++) m.y[o][j] = parity_format_round(f, good.y[o][j], &ro, NULL);
        }
        if (!rc) rc = judge(c, m.y, r);
    }
    /* inputs one format lower, and inputs with the reduced dimensions' last index zeroed */
    for (int v = 0; v < 2 && !rc; v++) {
        parity_custom_power_row_t *r = &rows[3 + v * 3];
        if (v == 1 && !any_red) {
            row(r, "tail-dropped", wl, NULL, "no reduction declared");
            continue;
        }
        char desc[160] = "", dims[64] = "";
        for (int d = 0; v == 1 && d < op->n_dims; d++) {
            int used = 0;
            for (int o = 0; o < op->n_out; o++)
                for (int t = 0; t < op->n_red[o]; t++) used |= op->red[o][t] == d;
            if (used) snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%s", dims[0] ? "/" : "", op->dim_name[d]);
        }
        if (v == 0) snprintf(desc, sizeof desc, "float inputs rounded to %s, then fp32 math", lname);
        else snprintf(desc, sizeof desc, "the last index of %s dropped (its inputs zeroed)", dims);
        row(r, v ? "tail-dropped" : "inputs-lower", wl, desc, NULL);
        double *vals[PARITY_CUSTOM_MAX_ARGS] = {0};
        parity_round_opts_t ro = parity_format_default_opts(&fl);
        ro.saturate_finite = ro.saturate_inf = c->dtype == PARITY_DT_BF16; /* e4m3fn: large values stay finite */
        for (int i = 0; i < op->n_in && !rc; i++) {
            if (!custom_is_float_role(op->role[i])) continue;
            if (!(vals[i] = malloc((size_t)c->n_in[i] * sizeof(double)))) {
                rc = -1;
                break;
            }
            for (int64_t j = 0; j < c->n_in[i]; j++) {
                double x = c->exact[i][j];
                if (v == 0) x = parity_format_round(&fl, x, &ro, NULL);
                else
                    for (int o = 0; o < op->n_out; o++)
                        for (int t = 0; t < op->n_red[o]; t++) {
                            int d = op->red[o][t];
                            if (custom_coord(c, &op->in[i], j, d) == c->wl->size[d] - 1) x = 0;
                        }
                vals[i][j] = x;
            }
        }
        if (!rc) rc = eval32(p, vals, m.y);
        if (!rc) rc = judge(c, m.y, r);
        for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) free(vals[i]);
    }
    /* the first output's last row / last column left zero */
    for (int v = 0; v < 2 && !rc; v++) {
        parity_custom_power_row_t *r = &rows[4 + v];
        const char *name = op->out[0].name;
        int64_t cols = c->cols[0];
        if (v == 0 ? first_nd < 2 : !(first_nd >= 1 && cols > 1)) {
            char why[96];
            snprintf(why, sizeof why, v == 0 ? "output %s has no rows" : "output %s has one column", name);
            row(r, v ? "col-dropped" : "row-dropped", wl, NULL, why);
            continue;
        }
        char desc[160];
        snprintf(desc, sizeof desc, v == 0 ? "the last row of %s left zero" : "the last column of %s left zero", name);
        row(r, v ? "col-dropped" : "row-dropped", wl, desc, NULL);
        for (int o = 0; o < op->n_out; o++) memcpy(m.y[o], good.y[o], (size_t)c->n_out[o] * sizeof(double));
        int64_t nrow = first_nd >= 2 ? c->wl->size[op->out[0].dim[first_nd - 2]] : 1;
        for (int64_t j = 0; j < c->n_out[0]; j++)
            if (v == 0 ? (j / cols) % nrow == nrow - 1 : j % cols == cols - 1) m.y[0][j] = 0;
        rc = judge(c, m.y, r);
    }
    if (rc)
        st = parity_diag_set(diag, rc < 0 ? PARITY_E_NOMEM : PARITY_E_FORMAT, "op %s, workload %s: the power "
                             "self-test could not evaluate the reference (rc %d)", op->d->name, wl, rc);
    outs_free(&good);
    outs_free(&m);
    return st;
}

parity_status_t parity_custom_power(const parity_custom_op_t *op, int dtype, const parity_custom_opts_t *opts,
                                    parity_custom_power_row_t *rows, int cap, int *n_rows, parity_diag_t *diag)
{
    *n_rows = 0;
    if (dtype != PARITY_DT_F32 && dtype != PARITY_DT_BF16 && dtype != PARITY_DT_F16)
        return parity_diag_set(diag, PARITY_E_INVALID, "power: inputs f32, bf16 or f16 (dtype %d)", dtype);
    int found = 0;
    for (int w = 0; w < op->n_wl; w++) {
        const custom_workload_t *wl = &op->wl[w];
        if (opts->workload ? strcmp(opts->workload, wl->name) != 0 : (opts->quick && wl->production)) continue;
        found = 1;
        if (*n_rows + PARITY_CUSTOM_N_MUTANTS > cap)
            return parity_diag_set(diag, PARITY_E_INVALID, "power: %d rows do not hold every workload", cap);
        custom_case_t c;
        memset(&c, 0, sizeof c);
        c.op = op;
        c.wl = wl;
        c.dtype = dtype;
        pw_t p;
        memset(&p, 0, sizeof p);
        p.c = &c;
        parity_status_t st = custom_case_inputs(&c, opts->seed, diag);
        if (!st) st = custom_case_reference(&c, diag);
        for (int o = 0; !st && o < op->n_out; o++)
            if (!(p.out[o] = malloc((size_t)c.n_out[o] * sizeof(double) + 8))) st = PARITY_E_NOMEM;
        if (!st) {
            p.have32 = custom_reference(&c, PARITY_DT_F32, NULL, p.out) == PARITY_KERNEL_OK;
            st = mutants(&p, rows + *n_rows, diag);
        }
        if (!st) *n_rows += PARITY_CUSTOM_N_MUTANTS;
        for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(p.out[o]);
        custom_case_free(&c);
        if (st) return st;
    }
    if (!found)
        return parity_diag_set(diag, PARITY_E_INVALID, "op %s has no workload %s", op->d->name,
                               opts->workload ? opts->workload : "(all production, and --quick)");
    return PARITY_OK;
}

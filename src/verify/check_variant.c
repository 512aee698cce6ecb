/* check_variant: the diagnosis's causes found by recomputing the op's fp64 reference with one of
 * the variants its descriptor declares (op.h variants, variant_ref; docs/error-model.md "Cause"):
 * an intermediate rounded to bf16 or fp16 (intermediate-rounding), an input ignored
 * (ignored-input), subnormal inputs flushed to zero (flush-to-zero), ties at a top-k boundary
 * broken by another rule, row by row (tie), a wrong index or selection (structural), a switch of
 * the op set the other way (parameter). A variant is named when the
 * kernel is within the faithful tolerance of its reference on every sampled element while it is
 * not of the op's; and the elementwise match of whichever cause was named. Called from check.c's
 * diagnose after the accumulator rule and the other fits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/verify/check_impl.h"
#include "src/verify/verify_impl.h"

double parity_variant_round(const parity_format_t *f, double x, int dir)
{
    if (dir == 0 || !isfinite(x) || x == 0) return parity_format_round(f, x, NULL, NULL);
    parity_round_opts_t tz = parity_format_default_opts(f);
    tz.rounding = PARITY_ROUND_TOWARD_ZERO;
    double t = parity_format_round(f, x, &tz, NULL); /* the neighbour on zero's side of x */
    if (t == x) return x;
    /* the other neighbour: one spacing of x's binade away from zero */
    double o = t + (x > 0 ? 1 : -1) * parity_format_ulp(f, x);
    return (dir < 0) == (x > 0) ? t : o;
}

void check_view_f64(parity_abi_tensor_t *view, const double *vals, int64_t n, int64_t cols)
{
    memset(view, 0, sizeof *view);
    view->data = (void *)vals;
    view->dtype = PARITY_DT_F64;
    view->ndim = 2;
    view->shape[0] = n;
    view->shape[1] = cols;
    view->strides[0] = cols;
    view->strides[1] = 1;
}

double check_fit_q(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                   parity_dtype_t odt, const double *ref, const double *s_acc, const double *s_up,
                   double *row_q, int64_t *within)
{
    check_rows_ref_t f = {ref, s_acc, s_up, NULL, 0, NULL};
    return check_fit_q_ex(R, rows, n, vals, odt, &f, row_q, within);
}

double check_match(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                   parity_dtype_t odt, const check_rows_ref_t *f)
{
    size_t ne = (size_t)n * (size_t)R->cols;
    double *q0 = malloc((ne ? ne : 1) * sizeof *q0), *q1 = malloc((ne ? ne : 1) * sizeof *q1), m = NAN;
    check_rows_ref_t f0 = {NULL, NULL, NULL, NULL, 0, q0}, f1 = *f;
    f1.elem_q = q1;
    if (q0 && q1 && !isnan(check_fit_q_ex(R, rows, n, vals, odt, &f0, NULL, NULL)) &&
        !isnan(check_fit_q_ex(R, rows, n, vals, odt, &f1, NULL, NULL))) {
        int64_t dep = 0, rep = 0;
        for (size_t x = 0; x < ne; x++)
            if (q0[x] > 1) {
                dep++;
                rep += q1[x] <= 1;
            }
        m = dep ? (double)rep / (double)dep : NAN;
    }
    free(q0);
    free(q1);
    return m;
}

double check_fit_q_ex(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                      parity_dtype_t odt, const check_rows_ref_t *f, double *row_q, int64_t *within)
{
    const double *ref = f->ref, *s_acc = f->s_acc, *s_up = f->s_up, *s_sym = f->s_sym;
    /* elem_q: every element a row of its own (the tolerance is per element either way) */
    int64_t nr = f->elem_q ? n * R->cols : n, nc = f->elem_q ? 1 : R->cols;
    if (f->elem_q) row_q = f->elem_q;
    parity_ref_output_t R2;
    memset(&R2, 0, sizeof R2);
    R2.name = R->name;
    R2.row_kind = R->row_kind;
    R2.rows = nr;
    R2.cols = nc;
    R2.n_slots = nr;
    R2.m_up = R->m_up;
    R2.u_op = R->u_op;
    R2.b_up = R->b_up;
    size_t ne = (size_t)n * (size_t)R->cols;
    R2.ref = malloc(ne * sizeof(double));
    R2.s_acc = malloc(ne * sizeof(double));
    R2.s_up = R->s_up ? malloc(ne * sizeof(double)) : NULL;
    R2.s_op = R->s_op ? malloc(ne * sizeof(double)) : NULL;
    R2.s_sym = R->s_sym ? malloc(ne * sizeof(double)) : NULL;
    double *tol = R->tol ? malloc(ne * sizeof(double)) : NULL;
    R2.tol = tol;
    R2.k = malloc((size_t)(nr ? nr : 1) * sizeof(int64_t));
    double *rq = row_q ? row_q : malloc((size_t)(nr ? nr : 1) * sizeof(double));
    double q = NAN;
    if (!R2.ref || !R2.s_acc || (R->s_up && !R2.s_up) || (R->s_op && !R2.s_op) ||
        (R->s_sym && !R2.s_sym) || (R->tol && !tol) || !R2.k || !rq)
        goto done;
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            size_t x = (size_t)r * (size_t)R->cols + (size_t)j, y = (size_t)slot * (size_t)R->cols + (size_t)j;
            R2.k[f->elem_q ? (int64_t)x : r] = f->k > 0 ? f->k : R->k[slot];
            R2.ref[x] = ref ? ref[x] : R->ref[y];
            R2.s_acc[x] = s_acc ? s_acc[x] : R->s_acc[y];
            if (R2.s_up) R2.s_up[x] = s_up ? s_up[x] : R->s_up[y];
            if (R2.s_op) R2.s_op[x] = R->s_op[y];
            if (R2.s_sym) R2.s_sym[x] = s_sym ? s_sym[x] : R->s_sym[y];
            if (tol) tol[x] = R->tol[y];
        }
    }
    double *tp = parity_judge_tolerances(&R2, odt, PARITY_DT_F32);
    if (!tp) goto done;
    parity_abi_tensor_t view;
    check_view_f64(&view, vals, nr, nc);
    parity_judge_row_q(&R2, &view, tp, rq, within);
    free(tp);
    q = 0;
    for (int64_t r = 0; r < nr; r++) q = rq[r] > q || isnan(rq[r]) ? rq[r] : q;
done:
    free(R2.ref);
    free(R2.s_acc);
    free(R2.s_up);
    free(R2.s_op);
    free(R2.s_sym);
    free(tol);
    free(R2.k);
    if (rq != row_q) free(rq);
    return q;
}

/* One variant's reference on the rows, in ref/sa/su (n * cols each; su may be NULL). For a
 * per-row intermediate, each row takes whichever neighbour (below or above its exact value) fits
 * the kernel better there; for a tie rule (PARITY_VARIANT_TIE: dir -1 the op's rule, +1 the
 * other), whichever rule fits the row better (a kernel whose ties fall either way, row by row).
 * pick (n, or NULL), for those two-way variants: 1 where the row's two references differ and
 * the +1 one was taken, 0 where they differ and the -1 one was, -1 where they are the same.
 * Returns the max err/tol against it and the elements within (NaN: the op does not apply it to
 * this output, or no memory). */
typedef struct {
    const parity_case_t *c;
    int o;
    const int64_t *rows;
    int64_t n;
    const double *vals;
    parity_dtype_t odt;
} fit_t;

static double variant_fit(const fit_t *f, int v, const parity_format_t *fmt, double *ref, double *sa,
                          double *su, int64_t *within, int *pick)
{
    const parity_op_t *op = f->c->op;
    const parity_ref_output_t *R = &f->c->ref[f->o];
    int kind = op->variants[v].kind;
    int two = (kind == PARITY_VARIANT_ROUNDED && op->variants[v].per_row) || kind == PARITY_VARIANT_TIE;
    if (op->variant_ref(f->c, f->o, v, fmt, two ? -1 : 0, f->rows, f->n, ref, sa, su) != PARITY_OK)
        return NAN;
    if (!two) return check_fit_q(R, f->rows, f->n, f->vals, f->odt, ref, sa, su, NULL, within);
    size_t ne = (size_t)f->n * (size_t)R->cols, rb = (size_t)R->cols * sizeof(double);
    double *b = malloc(ne * 3 * sizeof(double) + (size_t)f->n * 2 * sizeof(double));
    if (!b) return NAN;
    double *ref2 = b, *sa2 = b + ne, *su2 = su ? b + 2 * ne : NULL, *q1 = b + 3 * ne, *q2 = q1 + f->n;
    double q = NAN;
    if (op->variant_ref(f->c, f->o, v, fmt, 1, f->rows, f->n, ref2, sa2, su2) == PARITY_OK &&
        !isnan(check_fit_q(R, f->rows, f->n, f->vals, f->odt, ref, sa, su, q1, NULL)) &&
        !isnan(check_fit_q(R, f->rows, f->n, f->vals, f->odt, ref2, sa2, su2, q2, NULL))) {
        /* A row decides (pick 0 or 1) where its two references are not within the faithful
         * tolerance of each other: the +1 one judged against the -1 one. */
        double *qd = pick ? malloc((size_t)f->n * sizeof *qd) : NULL;
        if (qd && isnan(check_fit_q(R, f->rows, f->n, ref2, f->odt, ref, sa, su, qd, NULL))) {
            free(qd);
            qd = NULL;
        }
        for (int64_t r = 0; r < f->n; r++) {
            size_t x = (size_t)r * (size_t)R->cols;
            if (pick) pick[r] = qd && qd[r] > 1 ? q2[r] < q1[r] : -1;
            if (!(q2[r] < q1[r])) continue;
            memcpy(ref + x, ref2 + x, rb);
            memcpy(sa + x, sa2 + x, rb);
            if (su) memcpy(su + x, su2 + x, rb);
        }
        free(qd);
        q = check_fit_q(R, f->rows, f->n, f->vals, f->odt, ref, sa, su, NULL, within);
    }
    free(b);
    return q;
}

/* The detail of a TIE cause: the sampled rows whose tie decided (the two rules' references not
 * within the faithful tolerance of each other there), which rule each took, at most a dozen row
 * numbers (a row sampled twice counted once). */
static void tie_detail(const parity_op_t *op, int v, const int64_t *rows, int64_t n, const int *pick,
                       char *dst, size_t cap)
{
    int64_t other = 0, own = 0, uniq = 0;
    char list[96] = "";
    size_t len = 0;
    for (int64_t r = 0; r < n; r++) {
        int dup = 0;
        for (int64_t s = 0; s < r && !dup; s++) dup = rows[s] == rows[r];
        if (dup) continue;
        uniq++;
        if (pick[r] < 0) continue;
        other += pick[r] == 1;
        own += pick[r] == 0;
        if (other + own <= 12 && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld%s", len ? ", " : "",
                                    (long long)rows[r], pick[r] ? "" : " (the op's)");
    }
    if (other + own > 12 && len < sizeof list) snprintf(list + len, sizeof list - len, ", ...");
    if (own)
        snprintf(dst, cap,
                 "%s on %lld of the %lld sampled rows whose tie there decides, the op's rule on the "
                 "other %lld (either way, row by row: rows %s)",
                 op->variants[v].what, (long long)other, (long long)(other + own), (long long)own, list);
    else
        snprintf(dst, cap, "%s: %lld of the %lld sampled rows ha%s a tie there that decides (row%s %s)",
                 op->variants[v].what, (long long)other, (long long)uniq, other > 1 ? "ve" : "s",
                 other > 1 ? "s" : "", list);
}

/* A discrete PARAMETER variant names a switch of the op: its name is the what's first word, and
 * where the case has an attribute of that name with the value 0 or 1, the other value is the
 * one the kernel used. *attr: that attribute's index, or -1. */
static int switch_attr(const parity_case_t *c, const char *what)
{
    size_t l = strcspn(what, " (:,");
    for (int a = 0; a < c->n_attrs && a < 4; a++)
        if (c->attr_names[a] && strlen(c->attr_names[a]) == l && !strncmp(c->attr_names[a], what, l) &&
            (c->attr_values[a] == 0 || c->attr_values[a] == 1))
            return a;
    return -1;
}

void check_cause_variants(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                          const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    const parity_op_t *op = c->op;
    const parity_ref_output_t *R = &c->ref[o];
    if (!op->variant_ref || !op->variants[0].what || n <= 0) return;
    fit_t f = {c, o, rows, n, vals, odt};
    double q_full = check_fit_q(R, rows, n, vals, odt, NULL, NULL, NULL, NULL, NULL);
    if (!(q_full > 1)) return;
    size_t ne = (size_t)n * (size_t)R->cols;
    double *b = malloc(ne * 3 * sizeof(double));
    if (!b) return;
    static const char *const FMTS[] = {"bf16", "fp16"};
    double best = INFINITY;
    int best_v = -1, best_f = -1;
    int64_t best_within = 0;
    for (int v = 0; v < PARITY_OP_MAX_VARIANTS && op->variants[v].what; v++) {
        int rounded = op->variants[v].kind == PARITY_VARIANT_ROUNDED;
        for (int fi = 0; fi < (rounded ? 2 : 1); fi++) {
            parity_format_t fmt;
            if (rounded && parity_format_get(FMTS[fi], &fmt, NULL) != PARITY_OK) continue;
            int64_t within = 0;
            double q = variant_fit(&f, v, rounded ? &fmt : NULL, b, b + ne, R->s_up ? b + 2 * ne : NULL,
                                   &within, NULL);
            if (q < best) {
                best = q;
                best_v = v;
                best_f = rounded ? fi : -1;
                best_within = within;
            }
        }
    }
    int kind = best_v >= 0 ? op->variants[best_v].kind : 0;
    int *pick = kind == PARITY_VARIANT_TIE && best <= 1 ? malloc((size_t)n * sizeof *pick) : NULL;
    if (pick && isnan(variant_fit(&f, best_v, NULL, b, b + ne, R->s_up ? b + 2 * ne : NULL, NULL, pick))) {
        free(pick);
        pick = NULL;
    }
    free(b);
    if (!(best <= 1) || (kind == PARITY_VARIANT_TIE && !pick)) return;
    d->cause = kind == PARITY_VARIANT_ROUNDED      ? PARITY_CAUSE_INTERMEDIATE_ROUNDING
               : kind == PARITY_VARIANT_IGNORED    ? PARITY_CAUSE_IGNORED_INPUT
               : kind == PARITY_VARIANT_FLUSHED    ? PARITY_CAUSE_FLUSH_TO_ZERO
               : kind == PARITY_VARIANT_TIE        ? PARITY_CAUSE_TIE
               : kind == PARITY_VARIANT_STRUCTURAL ? PARITY_CAUSE_STRUCTURAL
                                                   : PARITY_CAUSE_PARAMETER;
    snprintf(d->var_what, sizeof d->var_what, "%s", op->variants[best_v].what);
    snprintf(d->var_format, sizeof d->var_format, "%s", best_f >= 0 ? FMTS[best_f] : "");
    d->var_q = best;
    d->var_q_full = q_full;
    d->has_match = 1;
    d->match = (double)best_within / (double)ne;
    char what[200];
    int a = kind == PARITY_VARIANT_PARAMETER ? switch_attr(c, op->variants[best_v].what) : -1;
    if (pick) tie_detail(op, best_v, rows, n, pick, what, sizeof what);
    else if (a >= 0)
        snprintf(what, sizeof what, "%s set the other way (%s = %g; the op's is %g)",
                 op->variants[best_v].what, c->attr_names[a], 1 - c->attr_values[a], c->attr_values[a]);
    else
        snprintf(what, sizeof what, "%s%s%s", op->variants[best_v].what, best_f >= 0 ? " rounded to " : "",
                 best_f >= 0 ? FMTS[best_f] : "");
    free(pick);
    if (kind == PARITY_VARIANT_PARAMETER) { /* diagnosis.parameter: the switch's two values */
        snprintf(d->param_name, sizeof d->param_name, "%s", a >= 0 ? c->attr_names[a] : "");
        d->param_fitted = a >= 0 ? 1 - c->attr_values[a] : NAN;
        d->param_op = a >= 0 ? c->attr_values[a] : NAN;
        d->param_q_fitted = best;
        d->param_q_op = q_full;
    }
    if (snprintf(d->detail, sizeof d->detail,
                 "%s reproduces the outputs: on the %lld sampled rows max err/tol %.3g against "
                 "the reference recomputed so, %.3g against the op's",
                 what, (long long)n, best, q_full) >= (int)sizeof d->detail)
        d->detail[sizeof d->detail - 2] = '.'; /* cut short: say so */
}

void check_cause_at(check_fit_fn fit, const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                    const double *vals, parity_dtype_t odt, const parity_abi_tensor_t *out,
                    int64_t worst_row, parity_diagnosis_t *d)
{
    const parity_ref_output_t *R = &c->ref[o];
    int have = worst_row < 0 || worst_row >= R->rows || (R->slot && R->slot[worst_row] < 0);
    for (int64_t r = 0; r < n && !have; r++) have = rows[r] == worst_row;
    if (have || check_fit_q(R, rows, n, vals, odt, NULL, NULL, NULL, NULL, NULL) > 1) {
        fit(c, o, rows, n, vals, odt, d);
        return;
    }
    /* The sampled rows are all within tolerance (a tie on a few rows of many, an update lost on
     * one element in 10^4): the worst element's row joins them, so that what the judge saw is
     * what the fit must explain. */
    int64_t *rows2 = malloc((size_t)(n + 1) * sizeof *rows2);
    double *vals2 = malloc((size_t)(n + 1) * (size_t)R->cols * sizeof *vals2);
    if (rows2 && vals2) {
        memcpy(rows2, rows, (size_t)n * sizeof *rows2);
        memcpy(vals2, vals, (size_t)n * (size_t)R->cols * sizeof *vals2);
        rows2[n] = worst_row;
        for (int64_t j = 0; j < R->cols; j++)
            vals2[(size_t)n * (size_t)R->cols + (size_t)j] = parity_tensor_get(out, worst_row * R->cols + j);
        fit(c, o, rows2, n + 1, vals2, odt, d);
    }
    free(rows2);
    free(vals2);
}

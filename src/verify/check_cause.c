/* check_cause: the diagnosis's fits that name a cause by recomputing the op's fp64 reference on the
 * diagnosis rows (docs/error-model.md, "Cause"): the op's parameter refit (op.h param_ref) and
 * dropped terms of each sum (op.h terms_ref). Each reads only the case, the sampled rows and the
 * kernel's values on them, and sets the cause in d when its fit reproduces the kernel within the
 * faithful tolerance; called from check.c's diagnose after the accumulator rule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/verify/check_impl.h"
#include "src/verify/verify_impl.h"

/* ---- the parameter refit (op.h params, param_ref; docs/error-model.md "Cause") ---- */

typedef struct {
    const parity_case_t *c;
    int o, which;
    const int64_t *rows;
    int64_t n;
    const double *vals; /* the kernel's values on the rows, n * cols */
    parity_dtype_t odt;
    double *ref, *sa, *su; /* n * cols each (su NULL without s_up): the last reference evaluated */
} refit_t;

/* The reference of the rows with the parameter at v into f->ref/sa/su, and the RMS of (kernel -
 * reference) / s_acc over them; NaN: the op could not recompute (or does not for this output). */
static double refit_rms(refit_t *f, double v)
{
    const parity_ref_output_t *R = &f->c->ref[f->o];
    if (f->c->op->param_ref(f->c, f->o, f->which, v, f->rows, f->n, f->ref, f->sa, f->su) != PARITY_OK)
        return NAN;
    double s = 0;
    int64_t m = 0, ne = f->n * R->cols;
    for (int64_t i = 0; i < ne; i++) {
        if (!(f->sa[i] > 0)) continue;
        double e = (f->vals[i] - f->ref[i]) / f->sa[i];
        s += e * e;
        m++;
    }
    return m ? sqrt(s / (double)m) : (ne ? 0 : NAN);
}

/* The rows' max err/tol, as the judge forms it, against the reference with the parameter at v
 * (within: the elements within the tolerance, may be NULL). */
static double refit_q(refit_t *f, double v, int64_t *within)
{
    if (isnan(refit_rms(f, v))) return NAN;
    return check_fit_q(&f->c->ref[f->o], f->rows, f->n, f->vals, f->odt, f->ref, f->sa, f->su, NULL,
                       within);
}

/* The nuisance fit: the op's reference (parameter at p0) times one factor a, plus b times the
 * parameter's first-order direction at p0 (the reference's change per relative change of the
 * parameter), a and b by least squares in the weights 1/s_acc^2 (b = 0: the factor alone).
 * Returns the rows' max err/tol against that; NaN on failure. Where it reproduces the rows, they
 * say only that the output moved as a small change of the parameter would move it, a statement
 * every bug of the same first-order shape shares (eps outside the sqrt on rows of nearly equal
 * mean squares), or that it is scaled as a whole: the parameter is not singled out. */
#define REFIT_DIR_STEP 1e-3
static double nuisance_q(refit_t *f, double p0, int with_dir)
{
    const parity_ref_output_t *R = &f->c->ref[f->o];
    size_t ne = (size_t)f->n * (size_t)R->cols;
    double *b = malloc(ne * 4 * sizeof(double)), q = NAN;
    if (!b) return NAN;
    double *r0 = b, *s0 = b + ne, *u0 = b + 2 * ne, *g = b + 3 * ne;
    if (isnan(refit_rms(f, p0))) goto done;
    memcpy(r0, f->ref, ne * sizeof(double));
    memcpy(s0, f->sa, ne * sizeof(double));
    if (f->su) memcpy(u0, f->su, ne * sizeof(double));
    memset(g, 0, ne * sizeof(double));
    if (with_dir) {
        if (isnan(refit_rms(f, p0 * (1 + REFIT_DIR_STEP)))) goto done;
        for (size_t i = 0; i < ne; i++) g[i] = (f->ref[i] - r0[i]) / REFIT_DIR_STEP;
    }
    double aa = 0, ab = 0, bb = 0, ya = 0, yb = 0;
    for (size_t i = 0; i < ne; i++) {
        if (!(s0[i] > 0)) continue;
        double w = 1.0 / (s0[i] * s0[i]);
        aa += w * r0[i] * r0[i];
        ab += w * r0[i] * g[i];
        bb += w * g[i] * g[i];
        ya += w * f->vals[i] * r0[i];
        yb += w * f->vals[i] * g[i];
    }
    double det = aa * bb - ab * ab, ca = aa > 0 ? ya / aa : 1, cb = 0;
    if (with_dir && bb > 0 && det > 1e-12 * aa * bb) {
        ca = (ya * bb - yb * ab) / det;
        cb = (aa * yb - ab * ya) / det;
    }
    for (size_t i = 0; i < ne; i++) {
        f->ref[i] = ca * r0[i] + cb * g[i];
        f->sa[i] = fabs(ca) * s0[i];
        if (f->su) f->su[i] = fabs(ca) * u0[i];
    }
    q = check_fit_q(R, f->rows, f->n, f->vals, f->odt, f->ref, f->sa, f->su, NULL, NULL);
done:
    free(b);
    return q;
}

/* One parameter's fit: a log-scale grid over three decades either side of the op's value p0
 * (and "none" where the parameter allows it), then golden-section search around the grid's best,
 * minimizing refit_rms. fitted: INFINITY for none. */
#define REFIT_DECADES 3.0
#define REFIT_STEP 0.125
static double refit_search(refit_t *f, double p0, int none_ok, double *best_rms)
{
    double best_t = 0, best = INFINITY;
    for (double t = -REFIT_DECADES; t <= REFIT_DECADES + 1e-9; t += REFIT_STEP) {
        double e = refit_rms(f, p0 * pow(10, t));
        if (e < best) {
            best = e;
            best_t = t;
        }
    }
    *best_rms = best;
    if (!isfinite(best)) return NAN;
    const double gr = 0.6180339887498949;
    double a = best_t - REFIT_STEP, b = best_t + REFIT_STEP;
    double x1 = b - gr * (b - a), x2 = a + gr * (b - a);
    double f1 = refit_rms(f, p0 * pow(10, x1)), f2 = refit_rms(f, p0 * pow(10, x2));
    for (int it = 0; it < 40; it++) {
        if (f1 < f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - gr * (b - a);
            f1 = refit_rms(f, p0 * pow(10, x1));
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + gr * (b - a);
            f2 = refit_rms(f, p0 * pow(10, x2));
        }
    }
    double tf = 0.5 * (a + b), fitted = p0 * pow(10, tf);
    if (fmin(f1, f2) <= best)
        *best_rms = fmin(f1, f2);
    else
        fitted = p0 * pow(10, best_t);
    if (none_ok) {
        double e = refit_rms(f, INFINITY);
        if (e < *best_rms) {
            *best_rms = e;
            fitted = INFINITY;
        }
    }
    return fitted;
}

/* The integer resolution of a PARITY_PARAM_INTEGER fit: the nearest integer reproduces the rows
 * and values REFIT_INT_RES either side of it do not, so the rows pin the parameter to that
 * integer (a bug that scales the output by an arbitrary factor lands that close to an integer
 * with odds of about 2 REFIT_INT_RES). */
#define REFIT_INT_RES 0.1
/* How much more closely (max err/tol) the fitted parameter must reproduce the rows than the
 * nuisance fit where both are within the tolerance: a residual the nuisance leaves at twice the
 * fitted parameter's (which sits at the kernel's own rounding noise) is systematic, one at about
 * the same size is noise the rows cannot attribute. */
#define REFIT_MARGIN 2.0

/* Fit each parameter the op declares to the kernel's values on the diagnosis rows and name the
 * best-fitting one (least RMS) among those whose fit singles it out: the kernel within the
 * faithful tolerance of the reference recomputed with the fitted value (max err/tol <= 1) and
 * not of the op's; not within it of the nuisance fit either (nuisance_q: the op's reference
 * times one factor plus the parameter's first-order direction), except for an integer
 * parameter, which must be resolved to an integer instead, and a parameter that is itself a
 * factor on the output (PARITY_PARAM_FACTOR), named as one. */
void check_cause_parameter(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    const parity_op_t *op = c->op;
    const parity_ref_output_t *R = &c->ref[o];
    if (!op->param_ref || !op->params[0].name || n <= 0) return;
    size_t ne = (size_t)n * (size_t)R->cols;
    double *buf = malloc(ne * 3 * sizeof(double));
    if (!buf) return;
    refit_t f = {c, o, 0, rows, n, vals, odt, buf, buf + ne, R->s_up ? buf + 2 * ne : NULL};
    int best_i = -1;
    double best_rms = INFINITY, best_fit = NAN, best_p0 = NAN, best_qf = NAN, best_qo = NAN;
    int64_t best_within = 0;
    for (int i = 0; i < PARITY_OP_MAX_PARAMS && op->params[i].name; i++) {
        int fl = op->params[i].flags;
        double p0 = op->param_value ? op->param_value(c, i) : op->params[i].value, rms = NAN;
        if (!(p0 > 0) || !isfinite(p0)) continue;
        f.which = i;
        double fitted = refit_search(&f, p0, (fl & PARITY_PARAM_NONE) != 0, &rms);
        if (isnan(fitted) || !(rms < best_rms)) continue;
        if (fl & PARITY_PARAM_INTEGER) fitted = nearbyint(fitted);
        int64_t within = 0;
        double q_op = refit_q(&f, p0, NULL), q_fit = refit_q(&f, fitted, &within);
        if (!(q_fit <= 1) || !(q_op > 1) || fitted == p0) continue;
        if (fl & PARITY_PARAM_INTEGER) {
            if (refit_q(&f, fitted - REFIT_INT_RES, NULL) <= 1 || refit_q(&f, fitted + REFIT_INT_RES, NULL) <= 1)
                continue;
        } else if (!(fl & PARITY_PARAM_FACTOR)) {
            double nq = fmin(nuisance_q(&f, p0, 0), nuisance_q(&f, p0, 1));
            if (!(nq > 1 || nq >= REFIT_MARGIN * q_fit)) continue;
        }
        best_i = i;
        best_rms = rms;
        best_fit = fitted;
        best_p0 = p0;
        best_qf = q_fit;
        best_qo = q_op;
        best_within = within;
    }
    free(buf);
    if (best_i < 0) return;
    const char *nm = op->params[best_i].name;
    int fl = op->params[best_i].flags;
    d->cause = PARITY_CAUSE_PARAMETER;
    snprintf(d->param_name, sizeof d->param_name, "%s", nm);
    d->param_fitted = best_fit;
    d->param_op = best_p0;
    d->param_q_fitted = best_qf;
    d->param_q_op = best_qo;
    d->has_match = 1;
    d->match = (double)best_within / (double)ne;
    char fit[64], extra[96] = "";
    if (isinf(best_fit))
        snprintf(fit, sizeof fit, "%s none (not applied)", nm);
    else if (fl & PARITY_PARAM_INTEGER)
        snprintf(fit, sizeof fit, "%s \xe2\x89\x88 %.0f", nm, best_fit);
    else
        snprintf(fit, sizeof fit, "%s \xe2\x89\x88 %.3g", nm, best_fit);
    if (fl & PARITY_PARAM_FACTOR)
        snprintf(extra, sizeof extra, ", a whole-output factor of %.4g on %s", best_fit / best_p0, R->name);
    else if (fl & PARITY_PARAM_INTEGER)
        snprintf(extra, sizeof extra, ", resolved to the integer (%.0f \xc2\xb1 %.1f do not)", best_fit,
                 REFIT_INT_RES);
    snprintf(d->detail, sizeof d->detail,
             "%s reproduces the outputs (the op's %s is %.6g)%s: on the %lld sampled rows max err/tol "
             "%.3g against the reference recomputed with it, %.3g with the op's",
             fit, nm, best_p0, extra, (long long)n, best_qf, best_qo);
}

/* ---- dropped terms (op.h terms_ref; docs/error-model.md "Cause") ---- */

/* The rows' max err/tol, as the judge forms it, against the reference with the terms summed in
 * part/pabs/psq (n * cols, or NULL: none) left out of every element (twice = 0) or counted twice
 * (twice = 1); kk terms then make each sum. */
static double dropped_maxq(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, const double *part,
                           const double *pabs, const double *psq, int twice, int64_t kk,
                           int64_t *within)
{
    size_t ne = (size_t)n * (size_t)R->cols;
    double *b = malloc(ne * 4 * sizeof(double));
    if (!b) return NAN;
    double *ref = b, *sa = b + ne, *su = R->s_up ? b + 2 * ne : NULL, *ss = R->s_sym ? b + 3 * ne : NULL;
    /* a term counted twice is 2x: its |.| adds once more, its square three times more */
    double sg = twice ? 1 : -1, sq = twice ? 3 : -1;
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            size_t x = (size_t)r * (size_t)R->cols + (size_t)j, y = (size_t)slot * (size_t)R->cols + (size_t)j;
            ref[x] = R->ref[y] + sg * (part ? part[x] : 0);
            sa[x] = fmax(0, R->s_acc[y] + sg * (pabs ? pabs[x] : 0));
            /* s_up: the terms' own rounding (fp32 products), also summed over the remaining terms */
            if (su) su[x] = fmax(0, R->s_up[y] + sg * (R->s_up[y] > 0 && pabs ? pabs[x] : 0));
            if (ss) {
                double v = R->s_sym[y] * R->s_sym[y] + sq * (psq ? psq[x] : 0);
                ss[x] = v > 0 ? sqrt(v) : 0;
            }
        }
    }
    check_rows_ref_t f = {ref, sa, su, ss, kk, NULL};
    double q = check_fit_q_ex(R, rows, n, vals, odt, &f, NULL, within);
    free(b);
    return q;
}

/* The best fit so far: terms [from, to) dropped or counted twice, s its weighted sum of squares. */
typedef struct {
    int64_t from, to;
    int twice;
    double s;
} terms_fit_t;

static void terms_consider(terms_fit_t *b, const double *part, const double *acc, const double *w,
                           size_t ne, int64_t from, int64_t to, int twice)
{
    double s = 0, sg = twice ? -1 : 1;
    for (size_t x = 0; x < ne; x++) {
        double e = (part[x] + sg * acc[x]) * w[x];
        s += e * e;
    }
    if (s < b->s) {
        b->s = s;
        b->from = from;
        b->to = to;
        b->twice = twice;
    }
}

/* Search the output's K-term sums for a block of terms dropped or counted twice: the tails
 * [K - t, K) and leading blocks [0, t), t = 1 .. K - 1, one term added at a time (each t costs
 * n * cols), and the overlap a last tile of W = 2, 4, 8, ... < K terms clamped to [K - W, K)
 * without masking counts twice, [K - W, K - K mod W) (K not a multiple of W; each costs its
 * length). Keeps the one whose reference fits the kernel best (RMS of the error over the full
 * sum|terms|; the smallest block among equals, dropped before twice). Sets DROPPED_TERMS or
 * DUPLICATED_TERMS when it reproduces the rows within the faithful tolerance (max err/tol <= 1)
 * while the full reference does not. */
void check_cause_dropped(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                         const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    const parity_op_t *op = c->op;
    const parity_ref_output_t *R = &c->ref[o];
    if (!op->terms_ref || n <= 0 || !R->k) return;
    int64_t K = R->k[R->slot ? R->slot[rows[0]] : rows[0]];
    for (int64_t q = 1; q < n; q++)
        if (R->k[R->slot ? R->slot[rows[q]] : rows[q]] != K) return; /* one K for all rows only */
    if (K < 2) return;
    size_t ne = (size_t)n * (size_t)R->cols;
    double *buf = calloc(ne * 4, sizeof(double));
    if (!buf) return;
    double *part = buf, *pabs = buf + ne, *psq = buf + 2 * ne, *res0 = buf + 3 * ne;
    /* res0: the kernel's error against the full reference, weighted by the full sum|terms| */
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            size_t x = (size_t)r * (size_t)R->cols + (size_t)j, y = (size_t)slot * (size_t)R->cols + (size_t)j;
            res0[x] = R->s_acc[y] > 0 ? 1.0 / R->s_acc[y] : 0;
            part[x] = vals[x] - R->ref[y]; /* kernel - reference; + dropped part as t grows */
        }
    }
    terms_fit_t best = {0, 0, 0, INFINITY};
    double *acc = malloc(ne * sizeof(double));
    for (int head = 0; head < 2 && acc; head++) {
        memset(acc, 0, ne * sizeof(double));
        for (int64_t t = 1; t < K; t++) {
            int64_t term = head ? t - 1 : K - t;
            if (op->terms_ref(c, o, term, term + 1, rows, n, acc, pabs, psq) != PARITY_OK) break;
            for (int twice = 0; twice < 2; twice++)
                terms_consider(&best, part, acc, res0, ne, head ? 0 : K - t, head ? t : K, twice);
        }
    }
    for (int64_t W = 2; W < K && acc; W *= 2) {
        if (K % W == 0) continue;
        memset(acc, 0, ne * sizeof(double));
        if (op->terms_ref(c, o, K - W, K - K % W, rows, n, acc, pabs, psq) != PARITY_OK) break;
        terms_consider(&best, part, acc, res0, ne, K - W, K - K % W, 1);
    }
    free(acc);
    memset(pabs, 0, ne * sizeof(double));
    memset(psq, 0, ne * sizeof(double));
    if (best.to > best.from) {
        int64_t t = best.to - best.from, within = 0;
        double q_full = dropped_maxq(R, rows, n, vals, odt, NULL, NULL, NULL, 0, K, NULL), q_drop = NAN;
        memset(part, 0, ne * sizeof(double));
        if (q_full > 1 && op->terms_ref(c, o, best.from, best.to, rows, n, part, pabs, psq) == PARITY_OK)
            q_drop = dropped_maxq(R, rows, n, vals, odt, part, pabs, psq, best.twice,
                                  best.twice ? K + t : K - t, &within);
        if (q_full > 1 && q_drop <= 1) {
            d->cause = best.twice ? PARITY_CAUSE_DUPLICATED_TERMS : PARITY_CAUSE_DROPPED_TERMS;
            d->drop_from = best.from;
            d->drop_to = best.to;
            d->drop_of = K;
            d->drop_q = q_drop;
            d->drop_q_full = q_full;
            d->has_match = 1;
            d->match = (double)within / (double)ne;
            if (best.twice)
                snprintf(d->detail, sizeof d->detail,
                         "terms [%lld, %lld) of the %lld terms of each %s sum counted twice%s: on "
                         "the %lld sampled rows max err/tol %.3g against the reference with them "
                         "twice, %.3g with each once",
                         (long long)best.from, (long long)best.to, (long long)K, R->name,
                         best.to < K ? " (a last tile clamped to end at K, its overlap unmasked)" : "",
                         (long long)n, q_drop, q_full);
            else
                snprintf(d->detail, sizeof d->detail,
                         "the %s %lld of the %lld terms of each %s sum dropped (terms [%lld, %lld)): on "
                         "the %lld sampled rows max err/tol %.3g against the reference without them, "
                         "%.3g with all",
                         best.from ? "last" : "first", (long long)t, (long long)K, R->name,
                         (long long)best.from, (long long)best.to, (long long)n, q_drop, q_full);
        }
    }
    free(buf);
}

/* The refit causes in their order: a parameter, dropped terms (both here), a declared variant
 * (check_variant.c, which calls nothing of this file). */
void check_cause_refits(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                        const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    snprintf(d->output, sizeof d->output, "%s", c->ref[o].name);
    for (int e = 0; e < PARITY_N_EMU; e++) d->emu_err[e] = NAN;
    d->eff_bits = NAN;
    check_cause_parameter(c, o, rows, n, vals, odt, d);
    if (d->cause == PARITY_CAUSE_NONE) check_cause_dropped(c, o, rows, n, vals, odt, d);
    if (d->cause == PARITY_CAUSE_NONE) check_cause_variants(c, o, rows, n, vals, odt, d);
    d->available = d->cause != PARITY_CAUSE_NONE;
}

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

/* ---- the parameter refit (op.h param_ref; docs/error-model.md "Cause") ---- */

typedef struct {
    const parity_case_t *c;
    int o;
    const int64_t *rows;
    const double *vals; /* the kernel's values on the rows, n * cols */
    parity_dtype_t odt;
    parity_ref_output_t R2; /* the rows' reference with the parameter at the value evaluated */
    int64_t within;         /* with maxq: the elements within the tolerance (err/tol <= 1) */
} refit_t;

/* RMS of (kernel - reference) / s_acc over the rows with the parameter at v; with maxq, also the
 * rows' max err/tol exactly as the judge forms it for a reference with that parameter. scale:
 * with scale_fit, the reference is first multiplied by the one factor that fits the kernel best
 * (least squares in the same weights), the whole output scaled instead of the parameter changed.
 * NaN: the op could not recompute, or no memory. */
static double refit_eval(refit_t *f, double v, int scale_fit, double *maxq)
{
    parity_ref_output_t *R = &f->R2;
    if (f->c->op->param_ref(f->c, f->o, v, f->rows, R->rows, R->ref, R->s_acc, R->s_up) != PARITY_OK)
        return NAN;
    double s = 0;
    int64_t m = 0, ne = R->rows * R->cols;
    if (scale_fit) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < ne; i++) {
            if (!(R->s_acc[i] > 0)) continue;
            double w = 1.0 / (R->s_acc[i] * R->s_acc[i]);
            num += w * f->vals[i] * R->ref[i];
            den += w * R->ref[i] * R->ref[i];
        }
        double sc = den > 0 ? num / den : 1;
        for (int64_t i = 0; i < ne; i++) {
            R->ref[i] *= sc;
            R->s_acc[i] *= fabs(sc);
            if (R->s_up) R->s_up[i] *= fabs(sc);
        }
    }
    for (int64_t i = 0; i < ne; i++) {
        if (!(R->s_acc[i] > 0)) continue;
        double e = (f->vals[i] - R->ref[i]) / R->s_acc[i];
        s += e * e;
        m++;
    }
    if (maxq) {
        double *tp = parity_judge_tolerances(R, f->odt, PARITY_DT_F32);
        double *rq = malloc((size_t)(R->rows ? R->rows : 1) * sizeof *rq);
        parity_abi_tensor_t view;
        check_view_f64(&view, f->vals, R->rows, R->cols);
        f->within = 0;
        *maxq = NAN;
        if (tp && rq) {
            parity_judge_row_q(R, &view, tp, rq, &f->within);
            *maxq = 0;
            for (int64_t r = 0; r < R->rows; r++) *maxq = rq[r] > *maxq || isnan(rq[r]) ? rq[r] : *maxq;
        }
        free(rq);
        free(tp);
    }
    return m ? sqrt(s / (double)m) : 0;
}

/* Fit the op's parameter to the kernel's values on the diagnosis rows: a log-scale grid over
 * three decades either side of the op's value, then golden-section search around the grid's
 * best, minimizing refit_eval's RMS. Sets the PARAMETER cause when the fitted value reproduces
 * the rows within the faithful tolerance (max err/tol <= 1), the op's value does not, and no
 * single factor on the op's reference does either. */
#define REFIT_DECADES 3.0
#define REFIT_STEP 0.125
void check_cause_parameter(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    const parity_op_t *op = c->op;
    const parity_ref_output_t *R = &c->ref[o];
    if (!op->param_name || !op->param_ref || !(op->param_value > 0) || n <= 0) return;
    refit_t f;
    memset(&f, 0, sizeof f);
    f.c = c;
    f.o = o;
    f.rows = rows;
    f.vals = vals;
    f.odt = odt;
    f.R2.name = R->name;
    f.R2.row_kind = R->row_kind;
    f.R2.rows = n;
    f.R2.cols = R->cols;
    f.R2.n_slots = n;
    f.R2.m_up = R->m_up;
    size_t ne = (size_t)n * (size_t)R->cols;
    f.R2.ref = malloc(ne * sizeof(double));
    f.R2.s_acc = malloc(ne * sizeof(double));
    f.R2.s_up = R->s_up ? malloc(ne * sizeof(double)) : NULL;
    f.R2.k = malloc((size_t)n * sizeof(int64_t));
    if (!f.R2.ref || !f.R2.s_acc || (R->s_up && !f.R2.s_up) || !f.R2.k) goto done;
    for (int64_t q = 0; q < n; q++) f.R2.k[q] = R->k[R->slot ? R->slot[rows[q]] : rows[q]];
    double p0 = op->param_value, best_t = 0, best = INFINITY;
    for (double t = -REFIT_DECADES; t <= REFIT_DECADES + 1e-9; t += REFIT_STEP) {
        double e = refit_eval(&f, p0 * pow(10, t), 0, NULL);
        if (e < best) {
            best = e;
            best_t = t;
        }
    }
    if (!isfinite(best)) goto done;
    /* Golden-section search on [best_t - step, best_t + step] (log10 of value / op's). */
    const double gr = 0.6180339887498949;
    double a = best_t - REFIT_STEP, b = best_t + REFIT_STEP;
    double x1 = b - gr * (b - a), x2 = a + gr * (b - a);
    double f1 = refit_eval(&f, p0 * pow(10, x1), 0, NULL), f2 = refit_eval(&f, p0 * pow(10, x2), 0, NULL);
    for (int it = 0; it < 40; it++) {
        if (f1 < f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - gr * (b - a);
            f1 = refit_eval(&f, p0 * pow(10, x1), 0, NULL);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + gr * (b - a);
            f2 = refit_eval(&f, p0 * pow(10, x2), 0, NULL);
        }
    }
    double tf = 0.5 * (a + b);
    if (!(fmin(f1, f2) <= best)) tf = best_t;
    double fitted = p0 * pow(10, tf), q_fit = NAN, q_op = NAN, q_scale = NAN;
    refit_eval(&f, p0, 0, &q_op);
    refit_eval(&f, fitted, 0, &q_fit);
    int64_t within = f.within;
    /* Where one common factor on the op's reference reproduces the rows as well (rows of nearly
     * the same mean square, where any bug that scales r reads as some eps: eps outside the sqrt
     * on odd-d4097), the rows do not single out the parameter: no claim. */
    if (q_fit <= 1 && q_op > 1) refit_eval(&f, p0, 1, &q_scale);
    if (q_fit <= 1 && q_op > 1 && !(q_scale <= 1)) {
        d->cause = PARITY_CAUSE_PARAMETER;
        snprintf(d->param_name, sizeof d->param_name, "%s", op->param_name);
        d->param_fitted = fitted;
        d->param_op = p0;
        d->param_q_fitted = q_fit;
        d->param_q_op = q_op;
        d->has_match = 1;
        d->match = (double)within / (double)ne;
        snprintf(d->detail, sizeof d->detail,
                 "%s \xe2\x89\x88 %.2g reproduces the outputs (the op's %s is %.2g): on the %lld "
                 "sampled rows max err/tol %.3g against the reference recomputed with it, %.3g "
                 "with the op's",
                 op->param_name, fitted, op->param_name, p0, (long long)n, q_fit, q_op);
    }
done:
    free(f.R2.ref);
    free(f.R2.s_acc);
    free(f.R2.s_up);
    free(f.R2.k);
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

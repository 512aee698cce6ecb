/* check_cause_more: two more of the diagnosis's fits (docs/error-model.md "Cause"), called from
 * check.c's diagnose after the accumulator rule and the fits of check_cause.c:
 * - lost terms, element by element (check_cause_lost): a departing element reproduced by its
 *   reference with one of its terms left out (an update lost to a race) or with all of them (an
 *   element never accumulated: a column tail a vectorized loop skipped). The dropped-terms fit
 *   of check_cause.c drops one block of every sum; this one a term of each sum's own choosing.
 * - the accumulator in fp16's own range (check_cause_fp16_range): the six emulations' 11-bit
 *   format has fp32's exponent range, so an fp16 accumulator whose terms or sums leave fp16's
 *   range (below 6.1e-5 its subnormals lose bits, below 6e-8 terms vanish) reads as "beyond
 *   8-bit accumulation"; an emulation in fp16 itself says whether that is all it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/verify/check_cause_more.h"
#include "src/verify/verify_impl.h"

/* RMS of err / sum|terms| over the diagnosis rows, for values vals[n_rows * cols]. */
double check_diag_error(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                         const double *vals, parity_dtype_t out_dt)
{
    double s = 0;
    int64_t m = 0;
    for (int64_t q = 0; q < n; q++) {
        int64_t slot = R->slot ? R->slot[rows[q]] : rows[q];
        for (int64_t j = 0; j < R->cols; j++) {
            double sc = R->s_acc[slot * R->cols + j];
            if (!(sc > 0)) continue;
            double e = (parity_dtype_round(out_dt, vals[q * R->cols + j]) - R->ref[slot * R->cols + j]) / sc;
            s += e * e;
            m++;
        }
    }
    return m ? sqrt(s / (double)m) : 0;
}

/* ---- lost terms, element by element ---- */

/* The largest number of terms a sampled row may have for the search (each term costs one
 * terms_ref call over the sampled rows): beyond it the rows are not searched. */
#define LOST_MAX_TERMS 65536
/* The fraction of the departing elements the fit must reproduce: an element that lost two
 * updates (about 1 in 10^4 of those that lost one, at the catalog's rate) is not reproduced by
 * one term left out; a chance fit of an accumulator's error by one term is rarer still. */
#define LOST_MIN_MATCH 0.9
/* The null: the same search run on the kernel's error mirrored about the reference (2 ref - y).
 * One term of each sum chosen freely is a flexible fit: where a sum has many terms and its
 * tolerance is wide against one term, some term matches any error of a term's size, a rounding
 * error as well as a lost update, and it matches the mirrored error about as often. A lost update
 * is identified only where the kernel's error is matched on at least half of the departing
 * elements more than the mirrored one is (the mirror's share estimates the chance fits);
 * elsewhere the data cannot tell it from an accumulator's error. */
#define LOST_MIN_EXCESS 0.5
/* The fewest one-term elements the claim rests on. Under the null (chance fits at a rate p, the
 * kernel's and the mirror's alike) all k elements fit with probability p^k and the mirror misses
 * enough of them (excess >= 0.5) with probability at most 1; at the worst p = 0.5 that is 1/2 for
 * k = 1, 1/4 for k = 2 and 1/16 for k = 4, which also needs the mirror at 2 of 4 or fewer
 * (11/16): ~4%. k >= 4 keeps a chance claim under 5%. */
#define LOST_MIN_ONE 4

/* For each departing element (q0 > 1) of each of the nv value arrays v[a] (n * cols), the term t
 * of its sum whose removal brings it closest (best[a], bterm[a], babs[a]: |v - (ref - term)|, the
 * term, its |term|). Returns PARITY_OK or the terms_ref status. */
static parity_status_t lost_search(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                                   int64_t kmax, int nv, const double *const *v,
                                   const double *const *q0, double **best, double **bterm,
                                   double **babs, double *one, double *oabs)
{
    const parity_ref_output_t *R = &c->ref[o];
    size_t ne = (size_t)n * (size_t)R->cols;
    for (int a = 0; a < nv; a++)
        for (size_t x = 0; x < ne; x++) best[a][x] = INFINITY;
    for (int64_t t = 0; t < kmax; t++) {
        memset(one, 0, ne * sizeof(double));
        memset(oabs, 0, ne * sizeof(double));
        parity_status_t st = c->op->terms_ref(c, o, t, t + 1, rows, n, one, oabs, NULL);
        if (st != PARITY_OK) return st;
        for (int64_t r = 0; r < n; r++) {
            int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
            if (slot < 0) continue;
            for (int64_t j = 0; j < R->cols; j++) {
                size_t x = (size_t)r * (size_t)R->cols + (size_t)j;
                if (oabs[x] == 0) continue;
                double without = R->ref[(size_t)slot * (size_t)R->cols + (size_t)j] - one[x];
                for (int a = 0; a < nv; a++) {
                    if (!(q0[a][x] > 1)) continue;
                    double e = fabs(v[a][x] - without);
                    if (e < best[a][x]) {
                        best[a][x] = e;
                        bterm[a][x] = one[x];
                        babs[a][x] = oabs[x];
                    }
                }
            }
        }
    }
    return PARITY_OK;
}

/* The columns never accumulated (never[j] = 1): those where vals holds exactly 0 on every
 * sampled row whose reference is not 0 there (a vectorized loop's skipped tail, the same columns
 * on every row), unless that is every column: an output that is 0 everywhere is as well an
 * underflow (an fp16 accumulator of subnormal-scale terms) as terms never added, and the data
 * cannot tell them apart. */
static void never_cols(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                       const double *vals, unsigned char *never)
{
    int64_t n_never = 0, n_live = 0;
    for (int64_t j = 0; j < R->cols; j++) {
        int64_t nz = 0, zero = 0;
        for (int64_t r = 0; r < n; r++) {
            int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
            if (slot < 0 || R->ref[(size_t)slot * (size_t)R->cols + (size_t)j] == 0) continue;
            nz++;
            zero += vals[(size_t)r * (size_t)R->cols + (size_t)j] == 0;
        }
        never[j] = nz > 0 && zero == nz;
        n_never += never[j];
        n_live += nz > 0;
    }
    if (n_never == n_live) memset(never, 0, (size_t)R->cols);
}

/* The references of the departing elements of vals under the lost-terms explanation: without
 * the best term, or without all terms (0) where vals holds exactly 0 in a column never
 * accumulated (never, or NULL: none); the other elements keep the op's. */
static void lost_refs(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                      const double *vals, const double *q0, const double *best,
                      const double *bterm, const double *babs, const unsigned char *never,
                      double *ref, double *sa, double *su)
{
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            size_t x = (size_t)r * (size_t)R->cols + (size_t)j;
            size_t y = slot >= 0 ? (size_t)slot * (size_t)R->cols + (size_t)j : 0;
            ref[x] = slot >= 0 ? R->ref[y] : 0;
            sa[x] = slot >= 0 ? R->s_acc[y] : 0;
            su[x] = slot >= 0 && R->s_up ? R->s_up[y] : 0;
            if (!(q0[x] > 1) || slot < 0) continue;
            if (never && never[j] && vals[x] == 0 && R->ref[y] != 0)
                ref[x] = sa[x] = su[x] = 0;
            else if (isfinite(best[x])) {
                ref[x] -= bterm[x];
                sa[x] = fmax(0, sa[x] - babs[x]);
                if (R->s_up && su[x] > 0) su[x] = fmax(0, su[x] - babs[x]);
            }
        }
    }
}

void check_cause_lost(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                      const double *vals, parity_dtype_t odt, parity_diagnosis_t *d)
{
    const parity_op_t *op = c->op;
    const parity_ref_output_t *R = &c->ref[o];
    if (!op->terms_ref || n <= 0 || !R->k) return;
    int64_t kmax = 0;
    for (int64_t q = 0; q < n; q++) {
        int64_t slot = R->slot ? R->slot[rows[q]] : rows[q];
        if (slot >= 0 && R->k[slot] > kmax) kmax = R->k[slot];
    }
    if (kmax < 1 || kmax > LOST_MAX_TERMS) return;
    size_t ne = (size_t)n * (size_t)R->cols;
    /* per value array a (0 the kernel's, 1 its mirror): q0, best, bterm, babs, q1; then shared */
    enum { PER = 5, SHARED = 6 };
    double *buf = calloc(ne * (2 * PER + SHARED), sizeof(double));
    if (!buf) return;
    double *q0[2], *best[2], *bterm[2], *babs[2], *q1[2];
    for (int a = 0; a < 2; a++) {
        double *p = buf + (size_t)a * PER * ne;
        q0[a] = p;
        best[a] = p + ne;
        bterm[a] = p + 2 * ne;
        babs[a] = p + 3 * ne;
        q1[a] = p + 4 * ne;
    }
    double *sh = buf + 2 * PER * ne;
    double *mirror = sh, *ref = sh + ne, *sa = sh + 2 * ne, *su = sh + 3 * ne, *one = sh + 4 * ne,
           *oabs = sh + 5 * ne;
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            size_t x = (size_t)r * (size_t)R->cols + (size_t)j;
            mirror[x] = slot >= 0 ? 2 * R->ref[(size_t)slot * (size_t)R->cols + (size_t)j] - vals[x]
                                  : vals[x];
        }
    }
    const double *v[2] = {vals, mirror};
    unsigned char *never = calloc((size_t)R->cols, 1);
    if (!never) goto done;
    never_cols(R, rows, n, vals, never);
    int64_t dep[2] = {0, 0};
    for (int a = 0; a < 2; a++) {
        check_rows_ref_t f0 = {NULL, NULL, NULL, NULL, 0, q0[a]};
        if (isnan(check_fit_q_ex(R, rows, n, v[a], odt, &f0, NULL, NULL))) goto done;
        for (size_t x = 0; x < ne; x++) dep[a] += q0[a][x] > 1;
    }
    if (!dep[0]) goto done;
    if (lost_search(c, o, rows, n, kmax, 2, v, (const double *const *)q0, best, bterm, babs, one,
                    oabs) != PARITY_OK)
        goto done;
    int64_t rep[2] = {0, 0}, rep_all = 0, col_lo = -1, col_hi = -1;
    for (int64_t j = 0; j < R->cols; j++)
        if (never[j]) {
            col_lo = col_lo < 0 ? j : col_lo;
            col_hi = j;
        }
    double qmax = 0, qfull = 0;
    for (int a = 0; a < 2; a++) {
        lost_refs(R, rows, n, v[a], q0[a], best[a], bterm[a], babs[a], a == 0 ? never : NULL, ref,
                  sa, su);
        check_rows_ref_t f1 = {ref, sa, R->s_up ? su : NULL, NULL, 0, q1[a]};
        if (isnan(check_fit_q_ex(R, rows, n, v[a], odt, &f1, NULL, NULL))) goto done;
        for (size_t x = 0; x < ne; x++) {
            if (a == 0) {
                qfull = q0[0][x] > qfull ? q0[0][x] : qfull;
                qmax = q1[0][x] > qmax || isnan(q1[0][x]) ? q1[0][x] : qmax;
            }
            if (q0[a][x] > 1 && q1[a][x] <= 1) {
                rep[a]++;
                if (a == 0) rep_all += vals[x] == 0 && never[x % (size_t)R->cols];
            }
        }
    }
    double m = (double)rep[0] / (double)dep[0];
    /* One term of each sum left out is claimed only where it reproduces most of the departing
     * elements (LOST_MIN_MATCH) and at least LOST_MIN_EXCESS of them more than it reproduces the
     * mirrored error, on at least LOST_MIN_ONE elements (on one or two, a chance fit of both
     * with a chance miss of the mirror is not rare); elements that hold 0 need no search. */
    int64_t dep_one = dep[0] - rep_all, rep_one = rep[0] - rep_all;
    double m_one = dep_one > 0 ? (double)rep_one / (double)dep_one : 0;
    double m_null = dep[1] ? (double)rep[1] / (double)dep[1] : 0;
    if (!(m >= LOST_MIN_MATCH)) goto done;
    if (rep_one > 0 && (dep_one < LOST_MIN_ONE || !(m_one - m_null >= LOST_MIN_EXCESS))) goto done;
    d->cause = PARITY_CAUSE_DROPPED_TERMS;
    d->drop_from = d->drop_to = -1; /* element by element: no one block */
    d->drop_of = kmax;
    d->drop_q = qmax;
    d->drop_q_full = qfull;
    d->has_match = 1;
    d->match = m;
    char cols[192] = "", null[128] = "";
    if (rep_one > 0 && rep_all)
        snprintf(cols, sizeof cols, ", %lld with every term left out (never accumulated: columns "
                 "%lld to %lld of %lld hold 0)", (long long)rep_all, (long long)col_lo,
                 (long long)col_hi, (long long)R->cols);
    if (rep_one > 0) {
        snprintf(null, sizeof null, " (the mirrored error, 2 ref - y, is so reproduced for %.0f%%)",
                 100 * m_null);
        snprintf(d->detail, sizeof d->detail,
                 "terms of the %s sums lost element by element: of the %lld elements of the %lld "
                 "sampled rows outside the tolerance, %lld are reproduced with one of their terms "
                 "left out (a lost update)%s%s; max err/tol %.3g against that, %.3g with all terms",
                 R->name, (long long)dep[0], (long long)n, (long long)rep_one, null, cols, qmax,
                 qfull);
    } else
        snprintf(d->detail, sizeof d->detail,
                 "terms of the %s sums never accumulated: of the %lld elements of the %lld sampled "
                 "rows outside the tolerance, %lld hold 0 where the reference does not (columns "
                 "%lld to %lld of %lld); max err/tol %.3g against 0 there, %.3g with all terms",
                 R->name, (long long)dep[0], (long long)n, (long long)rep_all, (long long)col_lo,
                 (long long)col_hi, (long long)R->cols, qmax, qfull);
done:
    free(never);
    free(buf);
}

/* ---- the accumulator in fp16's range ---- */

/* 1.5x: the diagnosis's "same error" (check_verdict.c CAUSE_SAME). */
#define FP16_SAME 1.5

int check_cause_fp16_range(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, const double *emu11,
                           parity_diagnosis_t *d)
{
    const parity_ref_output_t *R = &c->ref[o];
    parity_format_t f;
    if (!c->op->emulate || n <= 0 || parity_format_get("fp16", &f, NULL) != PARITY_OK) return 0;
    size_t ne = (size_t)n * (size_t)R->cols;
    double *e = malloc(ne * 2 * sizeof(double));
    if (!e) return 0;
    double er[2] = {NAN, NAN};
    for (int s = 0; s < 2; s++)
        if (c->op->emulate(c, o, &f, s ? PARITY_SUM_PAIRWISE : PARITY_SUM_SEQUENTIAL, rows, n, e + s * ne) == PARITY_OK)
            er[s] = check_diag_error(R, rows, n, e + s * ne, odt);
    int s = !(er[0] <= er[1]) && er[1] == er[1];
    double cand = d->cand_err, e16 = er[s], e11 = emu11 ? check_diag_error(R, rows, n, emu11, odt) : NAN;
    /* The fp16 emulation gives the kernel's error (within 1.5x), and fp16's range is what makes
     * it: the 11-bit emulation with fp32's range gives 1.5x less. */
    int ok = isfinite(e16) && e16 > 0 && fabs(log2(cand / e16)) <= log2(FP16_SAME) &&
             (isnan(e11) || e16 > FP16_SAME * e11);
    /* ... and it reproduces most departing elements: an error of fp16's size made another way
     * (a flush-to-zero pipeline, whose error is also a loss below a range's bottom) does not. */
    double match = NAN;
    if (ok) {
        check_rows_ref_t fe = {e + s * ne, NULL, NULL, NULL, 0, NULL};
        match = check_match(R, rows, n, vals, odt, &fe);
        ok = match >= CHECK_MATCH_MAJORITY;
    }
    if (ok) {
        d->cause = PARITY_CAUSE_ACCUMULATOR;
        d->beyond = 0;      /* beyond 8-bit accumulation with fp32's range, not with fp16's */
        d->eff_bits = NAN;  /* no bit count of the 11- and 8-bit interpolation applies */
        d->match = match;
        d->has_match = 1;
        snprintf(d->detail, sizeof d->detail,
                 "accumulation in fp16 with its range (fp16 %s, relative error %.3g against the "
                 "kernel's %.3g; the 11-bit emulation with fp32's range gives %.3g: terms and sums "
                 "below fp16's normal range 6.1e-05 lose bits)",
                 s ? "pairwise" : "sequential", e16, cand, e11);
    }
    free(e);
    return ok;
}

/* ---- non-finite outputs ---- */

void check_cause_nonfinite(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                           const double *vals, parity_diagnosis_t *d)
{
    int64_t bad = 0, all = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t slot = R->slot ? R->slot[rows[r]] : rows[r];
        for (int64_t j = 0; j < R->cols; j++) {
            double y = vals[(size_t)r * (size_t)R->cols + (size_t)j];
            double ref = slot >= 0 ? R->ref[(size_t)slot * (size_t)R->cols + (size_t)j] : 0;
            all++;
            bad += !isfinite(y) && isfinite(ref);
        }
    }
    if (!bad) return;
    snprintf(d->output, sizeof d->output, "%s", R->name);
    d->cause = PARITY_CAUSE_UNKNOWN;
    d->eff_bits = NAN;
    for (int e = 0; e < PARITY_N_EMU; e++) d->emu_err[e] = NAN;
    d->available = 1;
    snprintf(d->detail, sizeof d->detail,
             "outputs NaN or Inf where the reference is finite: %lld of the %lld elements of the "
             "%lld sampled rows of %s (an overflow, or an element left unwritten); no emulation "
             "compares with them", (long long)bad, (long long)all, (long long)n, R->name);
}

/* Declared ops: the fp64 reference of a workload and the data its tolerances are formed from.
 * The formulas are the ones docs/custom-ops.md derives (and python/parity/custom.py computes for
 * parity.Op):
 *  - a multilinear op with a declared reduction: the built-in error model itself -- k = product
 *    of the reduced sizes, s_acc = the reference on |inputs|, m_up from the inputs' precision --
 *    handed to verify.c, which forms the tolerance as for every built-in op;
 *  - otherwise the empirical floor: the reference evaluated in fp32 (the plugin's reference
 *    called with F32 tensors), its error against fp64 per row and column, times F = 2 (x sqrt(k)
 *    for a declared non-multilinear reduction), with a 4u|ref| minimum: an explicit per-element
 *    tolerance (parity_ref_output_t.tol) the same judge applies.
 * Deliberately not here: workloads and values (custom_op.c), running and judging kernels (the
 * check engine, through custom_engine.c). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/parallel.h"
#include "src/custom/custom_impl.h"
#include "parity/verify.h"

#define ALPHA 1e-6                 /* as PARITY_ALPHA in verify.c, docs/error-model.md */
#define U32 0x1p-24                /* fp32 unit roundoff */
#define TINY32 0x1p-149            /* fp32 subnormal spacing */
#define FORMULA_FACTOR 2.0         /* sqrt(4 x the roundings): docs/custom-ops.md */
#define MIN_ROUNDINGS 4.0          /* 2-ulp last operation (CUDA's expf/sinf bound) = 4u|y| */

static int dtype_bits(int dt) { return dt == PARITY_DT_BF16 ? 8 : dt == PARITY_DT_F16 ? 11 : 24; }

/* custom_impl.h */
int custom_reference(const custom_case_t *c, int dt, double *const *vals, double **out)
{
    const parity_custom_op_t *op = c->op;
    parity_abi_tensor_t in[PARITY_CUSTOM_MAX_ARGS], ou[PARITY_CUSTOM_MAX_ARGS];
    void *tmp_in[PARITY_CUSTOM_MAX_ARGS] = {0}, *tmp_out[PARITY_CUSTOM_MAX_ARGS] = {0};
    int rc = PARITY_KERNEL_ERROR;
    for (int i = 0; i < op->n_in; i++) {
        if (!custom_is_float_role(op->role[i])) {
            custom_tensor(op, &op->in[i], c->wl->size, c->ids[i], PARITY_DT_I64, &in[i]);
            continue;
        }
        const double *v = vals ? vals[i] : c->exact[i];
        if (dt == PARITY_DT_F32) {
            float *restrict f = tmp_in[i] = malloc((size_t)c->n_in[i] * sizeof *f);
            if (!f) goto done;
            for (int64_t j = 0; j < c->n_in[i]; j++) f[j] = (float)v[j]; /* exact: stored values */
            custom_tensor(op, &op->in[i], c->wl->size, f, dt, &in[i]);
        } else {
            custom_tensor(op, &op->in[i], c->wl->size, (void *)v, dt, &in[i]);
        }
    }
    for (int o = 0; o < op->n_out; o++) {
        void *p = dt == PARITY_DT_F32 ? (tmp_out[o] = malloc((size_t)c->n_out[o] * sizeof(float))) : out[o];
        if (!p) goto done;
        /* NaN-filled: an element it forgets shows */
        if (dt == PARITY_DT_F32)
            for (int64_t j = 0; j < c->n_out[o]; j++) ((float *)p)[j] = NAN;
        else
            for (int64_t j = 0; j < c->n_out[o]; j++) ((double *)p)[j] = NAN;
        custom_tensor(op, &op->out[o], c->wl->size, p, dt, &ou[o]);
    }
    rc = custom_call_reference(op, in, ou);
    if (rc == PARITY_KERNEL_OK && dt == PARITY_DT_F32)
        for (int o = 0; o < op->n_out; o++) {
            const float *restrict t = tmp_out[o];
            double *restrict d = out[o];
            for (int64_t j = 0; j < c->n_out[o]; j++) d[j] = t[j];
        }
done:
    for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) {
        free(tmp_in[i]);
        free(tmp_out[i]);
    }
    return rc;
}

static double **alloc_outs(const custom_case_t *c)
{
    double **o = calloc(PARITY_CUSTOM_MAX_ARGS, sizeof *o);
    for (int i = 0; o && i < c->op->n_out; i++)
        if (!(o[i] = malloc((size_t)c->n_out[i] * sizeof(double)))) {
            for (int j = 0; j < i; j++) free(o[j]);
            free(o);
            return NULL;
        }
    return o;
}
static void free_outs(double **o)
{
    for (int i = 0; o && i < PARITY_CUSTOM_MAX_ARGS; i++) free(o[i]);
    free(o);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The floor's passes over rows (or, for the column sums, over columns), on every core for large
 * outputs: every element's arithmetic and every sum's order are fixed (four interleaved partial
 * sums per row, the column sums in row order), so the tolerances are the same bits for any
 * thread count. Written without branches or divisions per element, so that the compiler
 * vectorizes the loops (an element's err, |ref| and the row's 1/rho). */
typedef struct {
    const double *ref, *got;
    int64_t rows, cols;
    double *sig, *rho, *col, *tol;
    double lam, lam_k, red;
} floor_ctx_t;

static inline double dmax(double a, double b) { return a > b ? a : b; } /* no NaN reaches these */
static inline double dmin(double a, double b) { return a < b ? a : b; }
/* Past fp32's range (2^128) an element is the overflow rule's (verify.c): the floor's statistics
 * leave it out, as they leave out infinities and NaN. A finite fp64 reference up there (a
 * cumulative product on the magnitude workload) would square to infinity in a row's sums, and
 * the row's tolerances would be inf or NaN. */
#define OUT_OF_FP32 0x1p128
static inline double err_of(double got, double ref) /* infinities and NaN: judged by sign */
{
    double e = fabs(got - ref);
    return e < OUT_OF_FP32 ? e : 0.0;
}
static inline double ref_of(double x) { return fabs(x) < OUT_OF_FP32 ? x : 0.0; }

static void floor_rows(void *p, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const floor_ctx_t *f = p;
    const int64_t cols = f->cols;
    for (int64_t r = r0; r < r1; r++) {
        const double *restrict g = f->got + r * cols, *restrict x = f->ref + r * cols;
        double se[4] = {0, 0, 0, 0}, sr[4] = {0, 0, 0, 0};
        int64_t j = 0;
        for (; j + 4 <= cols; j += 4)
            for (int l = 0; l < 4; l++) {
                double e = err_of(g[j + l], x[j + l]), y = ref_of(x[j + l]);
                se[l] += e * e;
                sr[l] += y * y;
            }
        for (; j < cols; j++) {
            double e = err_of(g[j], x[j]), y = ref_of(x[j]);
            se[0] += e * e;
            sr[0] += y * y;
        }
        f->sig[r] = sqrt(((se[0] + se[1]) + (se[2] + se[3])) / (double)cols);
        f->rho[r] = sqrt(((sr[0] + sr[1]) + (sr[2] + sr[3])) / (double)cols);
    }
}

static void floor_cols(void *p, int64_t c0, int64_t c1, int thread)
{
    (void)thread;
    const floor_ctx_t *f = p;
    const int64_t cols = f->cols, rows = f->rows;
    double *restrict col = f->col;
    for (int64_t r = 0; r < rows; r++) {
        if (!(f->rho[r] > 0)) continue;
        const double inv = 1.0 / f->rho[r];
        const double *restrict g = f->got + r * cols, *restrict x = f->ref + r * cols;
        for (int64_t j = c0; j < c1; j++) {
            double q = err_of(g[j], x[j]) * inv;
            col[j] += q * q;
        }
    }
    for (int64_t j = c0; j < c1; j++) col[j] = sqrt(col[j] / (double)rows);
}

static void floor_tol(void *p, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const floor_ctx_t *f = p;
    const int64_t cols = f->cols;
    const double lam = f->lam, red = f->red, *restrict col = f->col;
    for (int64_t r = r0; r < r1; r++) {
        const double rho = f->rho[r], sig = f->sig[r], inv = rho > 0 ? 1.0 / rho : 0.0;
        const double seq_c = f->lam_k * red * U32 * rho; /* times the element's scale */
        const double *restrict g = f->got + r * cols, *restrict x = f->ref + r * cols;
        double *restrict tol = f->tol + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            double e = err_of(g[j], x[j]), ax = fabs(ref_of(x[j]));
            double s = dmax(sig, col[j] * rho);
            double scale = dmax(1.0, ax * inv); /* 1 where rho = 0 (inv = 0) */
            double base = lam * s * scale, seq = seq_c * scale;
            double lifted = dmin(red * base, dmax(base, seq));
            tol[j] = FORMULA_FACTOR * dmax(lifted, 2.0 * e) + MIN_ROUNDINGS * U32 * ax + TINY32;
        }
    }
}

double parity_custom_floor(const double *ref, const double *got, int64_t rows, int64_t cols, int64_t k,
                           double *tol)
{
    int64_t M = rows * cols;
    double *sig = calloc((size_t)rows, sizeof *sig), *rho = calloc((size_t)rows, sizeof *rho);
    double *col = calloc((size_t)cols, sizeof *col), *rel = calloc((size_t)rows, sizeof *rel);
    /* The declared reduction's factor sqrt(k) lifts the measured error scale toward a
     * sequential fp32 sum's, but not past the error model's accumulation term for k terms,
     * lambda_k sqrt(k) u Sigma|terms| (docs/error-model.md), with rho, the row's RMS of the
     * reference, in place of Sigma|terms|. A sequential sum's error stays below it for same-sign
     * terms (u |ref| sqrt(k/3), Sigma|terms| = |ref|) and for random-sign ones (u tau k / sqrt 2
     * for terms of scale tau, and |ref| ~ tau sqrt(k): u |ref| sqrt(k/2)). A reference whose own
     * evaluation already errs at that level (torch's chunked CPU reductions) is not lifted again:
     * F sqrt(k) on top of it counted the reduction twice (an MSE over 2^19 terms got a 45%
     * tolerance). docs/custom-ops.md, "Otherwise: the empirical floor". */
    double red = k > 1 ? sqrt((double)k) : 1.0;
    double F = FORMULA_FACTOR * red;
    if (!sig || !rho || !col || !rel) { /* no memory: a zero tolerance fails loudly, never passes */
        for (int64_t j = 0; j < M; j++) tol[j] = 0;
        goto done;
    }
    floor_ctx_t f = {ref, got, rows, cols, sig, rho, col, tol, 0, 0, red};
    /* One thread below 2^16 elements: the three passes were ~8 ms of a 2M-element case in perf
     * (~1.3 ns per element and pass), so 2^16 elements are ~0.25 ms, the order of a parallel
     * section's start and join (parallel.c: ~60 us for a thread started where the kept pool is
     * busy); above, every core. Only speed depends on it, never the bits (the sums' order is
     * fixed). */
    int nt = M < (1 << 16) ? 1 : 0;
    parity_parallel_for(rows, nt, floor_rows, &f);
    int nlive = 0;
    for (int64_t r = 0; r < rows; r++)
        if (rho[r] > 0) rel[nlive++] = sig[r] / rho[r];
    /* A lucky row (its fp32 evaluation nearly exact) is raised to the median row's sigma/rho:
     * another faithful order is not as lucky (docs/custom-ops.md). */
    if (nlive > 0) {
        qsort(rel, (size_t)nlive, sizeof *rel, cmp_double);
        double med = nlive % 2 ? rel[nlive / 2] : 0.5 * (rel[nlive / 2 - 1] + rel[nlive / 2]);
        for (int64_t r = 0; r < rows; r++) sig[r] = dmax(sig[r], med * rho[r]);
    }
    /* Error scales vary by column (outlier channels, rotary frequencies). */
    parity_parallel_for(cols, cols < 64 ? 1 : nt, floor_cols, &f); /* fewer columns: one thread */
    f.lam = sqrt(2.0 * log(2.0 * (double)(M > 1 ? M : 1) / ALPHA));
    /* the error model's lambda for n = k terms per element (verify.c's union bound) */
    f.lam_k = sqrt(2.0 * log(2.0 * (double)(k > 1 ? k : 1) * (double)(M > 1 ? M : 1) / ALPHA));
    parity_parallel_for(rows, nt, floor_tol, &f);
done:
    free(sig);
    free(rho);
    free(col);
    free(rel);
    return F;
}

static int64_t reduced_k(const custom_case_t *c, int o)
{
    int64_t k = 1;
    for (int j = 0; j < c->op->n_red[o]; j++) k *= c->wl->size[c->op->red[o][j]];
    return k;
}

/* A multilinear op doubles exactly when one float input is doubled (x2 is exact). */
static parity_status_t check_multilinear(custom_case_t *c, parity_diag_t *diag)
{
    const parity_custom_op_t *op = c->op;
    for (int i = 0; i < op->n_in; i++) {
        if (!custom_is_float_role(op->role[i])) continue;
        double *vals[PARITY_CUSTOM_MAX_ARGS] = {0};
        double *two = malloc((size_t)c->n_in[i] * sizeof *two);
        double **r2 = alloc_outs(c);
        if (!two || !r2) {
            free(two);
            free_outs(r2);
            return PARITY_E_NOMEM;
        }
        for (int t = 0; t < op->n_in; t++) vals[t] = c->exact[t];
        for (int64_t j = 0; j < c->n_in[i]; j++) two[j] = 2.0 * c->exact[i][j];
        vals[i] = two;
        int rc = custom_reference(c, PARITY_DT_F64, vals, r2);
        parity_status_t st = PARITY_OK;
        for (int o = 0; !rc && !st && o < op->n_out; o++)
            for (int64_t j = 0; j < c->n_out[o]; j++) {
                double a = r2[o][j], b = 2.0 * c->ref[o][j];
                if (!(fabs(a - b) <= 1e-12 * fabs(b)) && !(isnan(a) && isnan(b))) {
                    st = parity_diag_set(diag, PARITY_E_FORMAT, "op %s: declared PARITY_OP_MULTILINEAR but output "
                                         "%s is not linear in input %s (workload %s): drop the flag to use the "
                                         "empirical floor", op->d->name, op->out[o].name, op->in[i].name,
                                         c->wl->name);
                    break;
                }
            }
        free(two);
        free_outs(r2);
        if (rc) return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: reference failed (rc %d)", op->d->name, rc);
        if (st) return st;
    }
    return PARITY_OK;
}

/* Products of p float inputs of t significand bits are exact in fp32 when p t <= 24; otherwise
 * each term is rounded at most p - 1 times. */
static int m_up_of(const parity_custom_op_t *op, int dtype)
{
    int p = 0;
    for (int i = 0; i < op->n_in; i++) p += custom_is_float_role(op->role[i]);
    return p * dtype_bits(dtype) <= 24 ? 0 : p - 1;
}

void custom_model_text(const parity_custom_op_t *op, const custom_workload_t *wl, int dtype, int o, char *buf,
                       size_t cap)
{
    int64_t k = 1;
    for (int j = 0; j < op->n_red[o]; j++) k *= wl->size[op->red[o][j]];
    if (op->multilinear && op->n_red[o] > 0)
        snprintf(buf, cap, "error-model k=%lld m_up=%d", (long long)k, m_up_of(op, dtype));
    else
        /* a declared reduction's sqrt(k) lift is capped per element (parity_custom_floor) */
        snprintf(buf, cap, op->n_red[o] > 0 ? "empirical-floor F=%.3g lift<=%.3g" : "empirical-floor F=%.3g",
                 FORMULA_FACTOR, sqrt((double)k));
}

parity_status_t custom_case_reference(custom_case_t *c, parity_diag_t *diag)
{
    const parity_custom_op_t *op = c->op;
    for (int o = 0; o < op->n_out; o++) {
        c->n_out[o] = custom_numel(op, &op->out[o], c->wl->size);
        c->cols[o] = op->out[o].ndim ? c->wl->size[op->out[o].dim[op->out[o].ndim - 1]] : 1;
        c->rows[o] = c->n_out[o] / c->cols[o];
        c->k[o] = 1;
        c->ref[o] = malloc((size_t)c->n_out[o] * sizeof(double));
        if (!c->ref[o]) return PARITY_E_NOMEM;
    }
    int rc = custom_reference(c, PARITY_DT_F64, NULL, c->ref);
    if (rc) return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: the reference returned %d on workload %s",
                                   op->d->name, rc, c->wl->name);
    for (int o = 0; o < op->n_out; o++)
        for (int64_t j = 0; j < c->n_out[o]; j++)
            if (isnan(c->ref[o][j]))
                return parity_diag_set(diag, PARITY_E_FORMAT, "op %s, workload %s: the reference gives NaN in %s: "
                                       "it is not defined on these inputs", op->d->name, c->wl->name,
                                       op->out[o].name);
    int need_floor = 0, need_model = 0;
    for (int o = 0; o < op->n_out; o++) {
        if (op->multilinear && op->n_red[o] > 0) need_model = 1;
        else need_floor = 1;
    }
    if (need_model) {
        parity_status_t st = check_multilinear(c, diag);
        if (st) return st;
        /* s_acc = sum |terms| = the reference on |inputs| (every term a product of one element of
         * each float input); products of p inputs of t bits are exact in fp32 when p t <= 24. */
        double *absv[PARITY_CUSTOM_MAX_ARGS] = {0};
        double **s = alloc_outs(c);
        for (int i = 0; s && i < op->n_in; i++) {
            if (!custom_is_float_role(op->role[i])) continue;
            if (!(absv[i] = malloc((size_t)c->n_in[i] * sizeof(double)))) break;
            for (int64_t j = 0; j < c->n_in[i]; j++) absv[i][j] = fabs(c->exact[i][j]);
        }
        rc = s ? custom_reference(c, PARITY_DT_F64, absv, s) : PARITY_KERNEL_ERROR;
        for (int o = 0; !rc && o < op->n_out; o++) {
            if (!(op->multilinear && op->n_red[o] > 0)) continue;
            c->k[o] = reduced_k(c, o);
            c->m_up[o] = m_up_of(op, c->dtype);
            for (int64_t j = 0; j < c->n_out[o]; j++) s[o][j] = fabs(s[o][j]);
            custom_model_text(op, c->wl, c->dtype, o, c->model[o], sizeof c->model[o]);
            c->s_acc[o] = s[o]; /* the error model's, the baselines' (hipDNN's sum |products|), the
                                 * diagnosis's */
            s[o] = NULL;
        }
        for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) free(absv[i]);
        free_outs(s);
        if (rc) return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: reference on |inputs| failed", op->d->name);
    }
    if (need_floor) {
        double **got = alloc_outs(c);
        if (!got) return PARITY_E_NOMEM;
        rc = custom_reference(c, PARITY_DT_F32, NULL, got);
        if (rc) {
            free_outs(got);
            return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: the reference returned %d for F32 tensors: the "
                                   "empirical floor needs the reference evaluated in fp32 (op_abi.h); only "
                                   "outputs with a multilinear reduction can do without", op->d->name, rc);
        }
        for (int o = 0; o < op->n_out; o++) {
            if (op->multilinear && op->n_red[o] > 0) continue;
            int64_t k = op->n_red[o] > 0 ? reduced_k(c, o) : 0;
            if (!(c->tol[o] = malloc((size_t)c->n_out[o] * sizeof(double)))) {
                free_outs(got);
                return PARITY_E_NOMEM;
            }
            (void)parity_custom_floor(c->ref[o], got[o], c->rows[o], c->cols[o], k, c->tol[o]);
            custom_model_text(op, c->wl, c->dtype, o, c->model[o], sizeof c->model[o]);
        }
        free_outs(got);
    }
    return need_floor && op->n_rounded > 0 ? custom_case_rounded_tol(c, diag) : PARITY_OK;
}

/* Coordinate along dimension `dim` of element j of a tensor over dims a (row-major). */
int64_t custom_coord(const custom_case_t *c, const custom_arg_t *a, int64_t j, int dim)
{
    for (int t = a->ndim - 1; t >= 0; t--) {
        int64_t s = c->wl->size[a->dim[t]];
        if (a->dim[t] == dim) return j % s;
        j /= s;
    }
    return -1; /* not carried */
}

/* custom_impl.h: the terms of output o's declared reduction, slice by slice. */
int custom_for_each_term(const custom_case_t *c, int o, int (*fn)(void *ctx, int64_t t, double *const *out),
                         void *ctx)
{
    const parity_custom_op_t *op = c->op;
    int nd = op->n_red[o];
    int64_t k = 1, pos[PARITY_ABI_MAX_DIMS];
    for (int d = 0; d < nd; d++) k *= c->wl->size[op->red[o][d]];
    double *vals[PARITY_CUSTOM_MAX_ARGS] = {0}, *out[PARITY_CUSTOM_MAX_ARGS] = {0};
    int64_t *crd[PARITY_CUSTOM_MAX_ARGS] = {0}; /* per float input: nd coordinates per element (-1: not carried) */
    int rc = 0;
    for (int i = 0; i < op->n_in && !rc; i++) {
        if (!custom_is_float_role(op->role[i])) continue;
        vals[i] = malloc((size_t)c->n_in[i] * sizeof(double) + 8);
        crd[i] = malloc((size_t)c->n_in[i] * (size_t)(nd > 0 ? nd : 1) * sizeof(int64_t) + 8);
        if (!vals[i] || !crd[i]) rc = PARITY_KERNEL_ERROR;
        for (int64_t j = 0; !rc && j < c->n_in[i]; j++)
            for (int d = 0; d < nd; d++) crd[i][j * nd + d] = custom_coord(c, &op->in[i], j, op->red[o][d]);
    }
    for (int q = 0; q < op->n_out && !rc; q++)
        if (!(out[q] = malloc((size_t)c->n_out[q] * sizeof(double) + 8))) rc = PARITY_KERNEL_ERROR;
    for (int64_t t = 0; t < k && !rc; t++) {
        int64_t r = t;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t s = c->wl->size[op->red[o][d]];
            pos[d] = r % s;
            r /= s;
        }
        for (int i = 0; i < op->n_in; i++) {
            if (!vals[i]) continue;
            for (int64_t j = 0; j < c->n_in[i]; j++) {
                int keep = 1;
                for (int d = 0; d < nd && keep; d++) {
                    int64_t x = crd[i][j * nd + d];
                    keep = x < 0 || x == pos[d];
                }
                vals[i][j] = keep ? c->exact[i][j] : 0.0;
            }
        }
        rc = custom_reference(c, PARITY_DT_F64, vals, out);
        if (!rc) rc = fn(ctx, t, out);
    }
    for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) {
        free(vals[i]);
        free(crd[i]);
        free(out[i]);
    }
    return rc;
}

/* custom_impl.h: the tolerance the contract's rounded intermediates add. */
parity_status_t custom_case_rounded_tol(custom_case_t *c, parity_diag_t *diag)
{
    const parity_custom_op_t *op = c->op;
    double *outs[PARITY_CUSTOM_MAX_ARGS] = {0};
    parity_status_t st = PARITY_OK;
    for (int o = 0; o < op->n_out && !st; o++)
        if (!(outs[o] = malloc((size_t)(c->n_out[o] ? c->n_out[o] : 1) * sizeof(double)))) st = PARITY_E_NOMEM;
    for (int v = 0; v < op->n_rounded && !st; v++) {
        /* dev: per element, the larger deviation of the reference with the intermediate rounded to
         * the neighbour below or above (the kernel's own value of it, a few fp32 roundings off the
         * exact one, rounds to one of the two) */
        double *dev[PARITY_CUSTOM_MAX_ARGS] = {0};
        for (int o = 0; o < op->n_out && !st; o++)
            if (c->tol[o] && !(dev[o] = calloc((size_t)(c->n_out[o] ? c->n_out[o] : 1), sizeof(double))))
                st = PARITY_E_NOMEM;
        for (int dir = -1; dir <= 1 && !st; dir += 2) {
            parity_custom_trial_t t = {NULL, 0, op->rounded_name[v], op->rounded_fmt[v], dir, 0};
            parity_custom_trial_t *prev = custom_trial_enter(&t);
            int rc = custom_reference(c, PARITY_DT_F64, NULL, outs);
            custom_trial_enter(prev);
            if (rc) {
                st = parity_diag_set(diag, PARITY_E_FORMAT, "op %s, workload %s: the reference returned %d with the "
                                     "intermediate %s rounded to %s", op->d->name, c->wl->name, rc,
                                     op->rounded_name[v], op->rounded_fmt[v]);
                break;
            }
            if (!t.used) {
                st = parity_diag_set(diag, PARITY_E_FORMAT, "op %s, workload %s: the reference never marks the "
                                     "intermediate %s that the contract allows rounded", op->d->name, c->wl->name,
                                     op->rounded_name[v]);
                break;
            }
            for (int o = 0; o < op->n_out; o++)
                for (int64_t j = 0; dev[o] && j < c->n_out[o]; j++) {
                    double e = fabs(outs[o][j] - c->ref[o][j]);
                    if (isfinite(e) && e > dev[o][j]) dev[o][j] = e; /* an overflow widens nothing */
                }
        }
        for (int o = 0; o < op->n_out; o++) {
            for (int64_t j = 0; !st && dev[o] && j < c->n_out[o]; j++) c->tol[o][j] += dev[o][j];
            free(dev[o]);
        }
    }
    for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(outs[o]);
    return st;
}

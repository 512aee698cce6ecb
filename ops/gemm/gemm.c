/* gemm (C = A·B with A (M,K), B (K,N)) and gemm_bwd (the linear layer's backward: dX = dY·Wᵀ,
 * dW = Xᵀ·dY from X, W, dY): fp64 references and per-element error-model data derived in
 * docs/ops/gemm.md, and an emulation of the K-term accumulation in a chosen format for the
 * diagnosis. Both ops' outputs are products of (transposed) operands, built by one reference
 * and one emulation. gemm's dw-* workloads also give it dW's shape (a long token reduction).
 * Deliberately not here: the kernels (ops/gemm/kernels.c), judging, transposed memory layouts. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/format/format_fast.h"

/* Value streams of the operands (parity_workload_values draws each row from its own rng
 * stream derived from (seed, stream, row), so the values do not depend on threading). They must
 * be small: parity_workload_values seeds row i with ((100 + stream) << 40) ^ i, which keeps only
 * the low 24 bits of the stream. The earlier constants 0x47454d4d41000000 ('GEMMA'...) lost
 * all their distinguishing bits there, so A's row i was B's row i times a constant (X and W, and
 * X and dY when both were N(0,1), likewise): gemm_bwd's diagonal dW[k,k] and dX[i,i] then summed
 * one-signed terms x^2 (found by the symmetric class, whose bound a faithful kernel nearly reached
 * on them: err/tol 0.87; tests/test_verify_sym.c checks that the operands are independent). */
#define GEMM_STREAM_A 0x41u
#define GEMM_STREAM_B 0x42u
#define GEMM_STREAM_W 0x57u

/* ---- workloads ------------------------------------------------------------------------------
 * Shape: the workload's N, D, V are the GEMM's M, K, N (rows of A = tokens in a forward
 * projection, the reduction length, output columns), so `--workload llm-fwd@MxKxN`.
 * Parameters (gemm_params_t, gemm.h): A (M,K) takes the value scheme `a`, N(0,1) or U[0,1) times
 * its scale, with `outliers` seed-chosen K columns (activation channels) times outlier_factor;
 * B (K,N) takes `b`: N(0,1) (weights), U[0,1), or gradient scale: per row of B (per token, in
 * dW = Xᵀ·dY) a magnitude 10^U(-6,-3). */

/* Precision (bits) of a float input dtype: with 2p <= 24 a product of two inputs is exact in
 * fp32, otherwise a faithful kernel rounds it once. */
static int in_precision(parity_dtype_t dt)
{
    return dt == PARITY_DT_BF16 ? 8 : dt == PARITY_DT_F16 ? 11 : dt == PARITY_DT_F32 ? 24 : 53;
}

/* Fill t (rows x cols) with workload values, rounded to t's dtype. */
static void fill(parity_tensor_t *t, parity_vals_kind_t kind, double scale, int outliers,
                 double factor, uint64_t seed, uint64_t stream, double *tmp, int64_t cols)
{
    int64_t rows = t->view.shape[0];
    for (int64_t i = 0; i < rows; i++) {
        parity_workload_values(kind, scale, outliers, factor, seed, stream, i, i + 1, cols, tmp);
        for (int64_t j = 0; j < cols; j++) {
            if (t->view.dtype == PARITY_DT_F32) ((float *)t->view.data)[i * cols + j] = (float)tmp[j];
            else parity_tensor_set(&t->view, i * cols + j, tmp[j]);
        }
    }
}

/* ---- the fp64 reference --------------------------------------------------------------------- */

/* One element: Σ_k a[k]·b[k] with Neumaier's compensation. The products of two inputs of at most
 * 24 bits are exact in double, so the only error is the compensated sum's, about
 * 2^-106·K·Σ|a_k b_k| + 2^-53·|C|: far below every tolerance (docs/ops/gemm.md). s_abs gets
 * Σ|a_k b_k| (a condition number: a plain sum suffices). */
static double dot_ref(const double *a, const double *b, int64_t k, double *s_abs, double *s_sq)
{
    double s = 0, c = 0, sa = 0, sq = 0;
    for (int64_t t = 0; t < k; t++) {
        double p = a[t] * b[t], u = s + p;
        c += fabs(s) >= fabs(p) ? (s - u) + p : (p - u) + s;
        s = u;
        sa += fabs(p);
        sq += p * p;
    }
    *s_abs = sa;
    if (s_sq) *s_sq = sqrt(sq);
    return s + c;
}

void parity_ref_gemm(const double *a, const double *bt, int64_t m, int64_t k, int64_t n,
                     double *c, double *s_abs)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * n + j] = dot_ref(a + i * k, bt + j * k, k, &s_abs[i * n + j], NULL);
}

/* A 2-D input as exact doubles, as is (rows x cols) or transposed (cols x rows). NULL when out
 * of memory. Every supported input dtype is exact in fp32. */
static double *mat_f64(const parity_abi_tensor_t *t, int transpose)
{
    int64_t rows = t->shape[0], cols = t->shape[1];
    double *d = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *d);
    float *row = malloc((size_t)(cols + 1) * sizeof *row);
    if (!d || !row) {
        free(d);
        free(row);
        return NULL;
    }
    for (int64_t i = 0; i < rows; i++) {
        parity_row_to_f32(t, i, row);
        for (int64_t j = 0; j < cols; j++) d[transpose ? j * rows + i : i * cols + j] = row[j];
    }
    free(row);
    return d;
}

typedef struct {
    const double *a, *bt; /* A' (rows, k) and B' transposed (n, k) */
    int64_t k, n;
    parity_ref_output_t *R;
} ref_ctx_t;

static void ref_rows(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    ref_ctx_t *g = p;
    parity_ref_output_t *R = g->R;
    for (int64_t i = b; i < e; i++) {
        R->k[i] = g->k;
        for (int64_t j = 0; j < g->n; j++) {
            int64_t x = i * g->n + j;
            R->ref[x] = dot_ref(g->a + i * g->k, g->bt + j * g->k, g->k, &R->s_acc[x],
                                R->s_sym ? &R->s_sym[x] : NULL);
            /* fp32 inputs: each product is rounded once, |error| <= u|a b|, so s_up = s_acc. */
            if (R->s_up) R->s_up[x] = R->s_acc[x];
        }
    }
}

/* Output `o` of case c is the product A'·B' with A' (rows, k) and B' given transposed (n, k),
 * both exact doubles (NULL: out of memory). Allocates and fills its reference and error-model
 * data; frees a and bt. sym: the workload generates one of the two operands symmetric
 * (parity_vals_symmetric), so every product a_t b_t is: its sign is that operand's fair,
 * independent coin, and fl32 keeps it (rounding commutes with negation); the reference then
 * records s_sym = sqrt(sum (a_t b_t)^2) (docs/ops/gemm.md, "Symmetric products"). */
static parity_status_t ref_product(parity_case_t *c, int o, const char *name, double *a, double *bt,
                                   int64_t rows, int64_t k, int64_t n, int sym)
{
    /* m_up: bf16/fp16 products are exact in fp32 (2p <= 24 bits), fp32 products round once. */
    int m_up = 2 * in_precision(c->in_dtype) <= 24 ? 0 : 1;
    parity_status_t st = a && bt ? parity_ref_output_alloc(&c->ref[o], name, "row", rows, n, 0, 0, m_up)
                                 : PARITY_E_NOMEM;
    if (st == PARITY_OK) {
        c->ref[o].m_up = m_up;
        c->out_ndim[o] = 2;
        c->out_shape[o][0] = rows;
        c->out_shape[o][1] = n;
        if (sym) {
            c->ref[o].s_sym = parity_calloc_faulted((size_t)(rows * n), sizeof *c->ref[o].s_sym);
            if (!c->ref[o].s_sym) st = PARITY_E_NOMEM;
        }
    }
    if (st == PARITY_OK) {
        ref_ctx_t g = {a, bt, k, n, &c->ref[o]};
        parity_parallel_for(rows, 0, ref_rows, &g);
    }
    free(a);
    free(bt);
    return st;
}

static parity_status_t check_args(const parity_workload_t *wl, parity_dtype_t dt, const char *op,
                                  parity_diag_t *diag)
{
    if (wl->n < 1 || wl->d < 1 || wl->v < 1)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: need N, D, V >= 1", wl->name);
    if (dt != PARITY_DT_BF16 && dt != PARITY_DT_F32 && dt != PARITY_DT_F16)
        return parity_diag_set(diag, PARITY_E_UNSUPPORTED, "%s: input dtype must be bf16, fp16 or fp32", op);
    return PARITY_OK;
}

static parity_status_t gemm_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                  parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    const gemm_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    parity_status_t st = check_args(wl, dt, "gemm", diag);
    if (st != PARITY_OK) return st;
    int64_t m = wl->n, k = wl->d, n = wl->v;
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    c->inputs[0] = parity_tensor_new("A", dt, 2, sa);
    c->inputs[1] = parity_tensor_new("B", dt, 2, sb);
    if (!c->inputs[0] || !c->inputs[1]) return PARITY_E_NOMEM;
    double *tmp = malloc((size_t)(k > n ? k : n) * sizeof *tmp);
    if (!tmp) return PARITY_E_NOMEM;
    fill(c->inputs[0], p->a.kind, p->a.scale, p->outliers, p->outlier_factor, seed,
         GEMM_STREAM_A, tmp, k);
    fill(c->inputs[1], p->b.kind, p->b.scale, 0, 1, seed, GEMM_STREAM_B, tmp, n);
    free(tmp);
    return ref_product(c, 0, "C", mat_f64(&c->inputs[0]->view, 0), mat_f64(&c->inputs[1]->view, 1),
                       m, k, n, parity_vals_symmetric(p->a.kind) || parity_vals_symmetric(p->b.kind));
}

/* gemm_bwd: X (M,K) activations, W (K,N) weights, dY (M,N) upstream gradient; dX = dY·Wᵀ (M,K),
 * N terms per element; dW = Xᵀ·dY (K,N), M (token) terms per element. */
static parity_status_t bwd_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    const gemm_bwd_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    parity_status_t st = check_args(wl, dt, "gemm_bwd", diag);
    if (st != PARITY_OK) return st;
    int64_t m = wl->n, k = wl->d, n = wl->v;
    int64_t sx[2] = {m, k}, sw[2] = {k, n}, sy[2] = {m, n};
    c->inputs[0] = parity_tensor_new("X", dt, 2, sx);
    c->inputs[1] = parity_tensor_new("W", dt, 2, sw);
    c->inputs[2] = parity_tensor_new("dY", dt, 2, sy);
    if (!c->inputs[0] || !c->inputs[1] || !c->inputs[2]) return PARITY_E_NOMEM;
    double *tmp = malloc((size_t)(k > n ? k : n) * sizeof *tmp);
    if (!tmp) return PARITY_E_NOMEM;
    fill(c->inputs[0], p->x.kind, p->x.scale, p->outliers, p->outlier_factor, seed,
         GEMM_STREAM_A, tmp, k);
    /* Weights at GPT-2's init scale: their magnitude scales dX only, not its relative error. */
    /* The sparse exact workload makes W sparse too, so that dX is exact (docs/workloads.md). */
    int sparse = p->x.kind == PARITY_VALS_SPARSE_POW2;
    fill(c->inputs[1], sparse ? PARITY_VALS_SPARSE_POW2 : PARITY_VALS_NORMAL, sparse ? 1 : 0.02, 0,
         1, seed, GEMM_STREAM_W, tmp, n);
    fill(c->inputs[2], p->dy.kind, p->dy.scale, 0, 1, seed, GEMM_STREAM_B, tmp, n);
    free(tmp);
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *W = &c->inputs[1]->view,
                              *DY = &c->inputs[2]->view;
    /* dX = dY (M,N) · Wᵀ: B' = Wᵀ (N,K), given transposed = W (K,N) as is. */
    /* W is N(0,1) or sparse +-2^e in every workload: dX's products are always symmetric. */
    st = ref_product(c, 0, "dX", mat_f64(DY, 0), mat_f64(W, 0), m, n, k, 1);
    /* dW = Xᵀ (K,M) · dY (M,N): B' = dY, given transposed = dYᵀ (N,M). */
    if (st == PARITY_OK)
        st = ref_product(c, 1, "dW", mat_f64(X, 1), mat_f64(DY, 1), k, m, n,
                         parity_vals_symmetric(p->x.kind) || parity_vals_symmetric(p->dy.kind));
    return st;
}

/* ---- emulation for the diagnosis ------------------------------------------------------------
 * The fast emulated addition of src/format/format_fast.h (parity_format_sum's results, fast), the
 * N columns of a row side by side (independent chains: the CPU overlaps them). */

/* One row of the emulation, all columns side by side. The products are what a faithful fp32
 * kernel forms: fl32(a·b) (exact for bf16/fp16 inputs). b is B' (k, n) row-major in double. */
typedef struct {
    const parity_fastfmt_t *F;
    const double *a, *b;
    int64_t k, n;
    double *scratch; /* (levels) x n for the pairwise recursion */
} emu_row_t;

static void pair_cols(const emu_row_t *E, int64_t k0, int64_t len, double *out, int level)
{
    int64_t n = E->n;
    if (len == 1) {
        const double *b = E->b + k0 * n;
        for (int64_t j = 0; j < n; j++) out[j] = parity_fast_add(E->F, 0, (double)(float)(E->a[k0] * b[j]));
        return;
    }
    int64_t h = len / 2;
    double *right = E->scratch + (size_t)level * (size_t)n;
    pair_cols(E, k0, h, out, level + 1);
    pair_cols(E, k0 + h, len - h, right, level + 1);
    for (int64_t j = 0; j < n; j++) out[j] = parity_fast_add(E->F, out[j], right[j]);
}

/* Rows `rows` of A'·B' (A' (.., k), B' (k, n), exact doubles; freed here) as a kernel
 * accumulating the k products in `acc` with the given order computes them. */
static parity_status_t emulate_product(double *a, double *b, int64_t k, int64_t n,
                                       const parity_format_t *acc, parity_sum_order_t order,
                                       const int64_t *rows, int64_t n_rows, double *dst)
{
    int levels = 2;
    while (((int64_t)1 << (levels - 2)) < k) levels++;
    double *scratch = malloc((size_t)levels * (size_t)(n > 0 ? n : 1) * sizeof *scratch);
    if (!a || !b || !scratch) {
        free(a);
        free(b);
        free(scratch);
        return PARITY_E_NOMEM;
    }
    parity_fastfmt_t F = parity_fastfmt(acc);
    for (int64_t q = 0; q < n_rows; q++) {
        emu_row_t E = {&F, a + rows[q] * k, b, k, n, scratch};
        double *o = dst + q * n;
        if (order == PARITY_SUM_PAIRWISE) {
            pair_cols(&E, 0, k, o, 0);
            continue;
        }
        for (int64_t j = 0; j < n; j++) o[j] = 0;
        for (int64_t t = 0; t < k; t++)
            for (int64_t j = 0; j < n; j++)
                o[j] = parity_fast_add(&F, o[j], (double)(float)(E.a[t] * b[t * n + j]));
    }
    free(a);
    free(b);
    free(scratch);
    return PARITY_OK;
}

static parity_status_t gemm_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                    double *dst)
{
    if (out != 0) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *A = &c->inputs[0]->view, *B = &c->inputs[1]->view;
    return emulate_product(mat_f64(A, 0), mat_f64(B, 0), A->shape[1], B->shape[1], acc, order,
                           rows, n_rows, dst);
}

static parity_status_t bwd_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *W = &c->inputs[1]->view,
                              *DY = &c->inputs[2]->view;
    int64_t m = X->shape[0], k = X->shape[1], n = W->shape[1];
    if (out == 0) /* dX = dY · Wᵀ: n terms, k columns */
        return emulate_product(mat_f64(DY, 0), mat_f64(W, 1), n, k, acc, order, rows, n_rows, dst);
    if (out == 1) /* dW = Xᵀ · dY: m terms, n columns */
        return emulate_product(mat_f64(X, 1), mat_f64(DY, 0), m, n, acc, order, rows, n_rows, dst);
    return PARITY_E_UNSUPPORTED;
}

/* ---- the terms of the sums, for the diagnosis's dropped-terms cause (op.h terms_ref) ---- */

/* Adds Σ_{t in [from, to)} a(r, t)·b(t, j) over rows r = rows[q] and columns j < cols to sum,
 * and the sums of |.| and (.)² to abs_sum and sq_sum (may be NULL); a(r, t) is element
 * r·ars + t·ats of A, b(t, j) element t·bts + j·bjs of B. The products are exact in double, as
 * dot_ref forms them. */
/* flush: 0 none; FLUSH_INPUTS a and b below fp32's smallest normal count as 0 (denormals are
 * zero); FLUSH_PRODUCTS also a product below it (flush to zero of the fp32 products). */
#define FLUSH_INPUTS 1
#define FLUSH_PRODUCTS 2
static double flushed(double x, int on) { return on && fabs(x) < FLT_MIN ? 0.0 : x; }

static parity_status_t terms_add_flush(const parity_abi_tensor_t *A, int64_t ars, int64_t ats,
                                       const parity_abi_tensor_t *B, int64_t bts, int64_t bjs,
                                       int64_t cols, int64_t from, int64_t to, const int64_t *rows,
                                       int64_t n_rows, double *sum, double *abs_sum, double *sq_sum,
                                       int flush)
{
    double *b = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *b);
    if (!b) return PARITY_E_NOMEM;
    for (int64_t t = from; t < to; t++) {
        for (int64_t j = 0; j < cols; j++) b[j] = flushed(parity_tensor_get(B, t * bts + j * bjs), flush);
        for (int64_t q = 0; q < n_rows; q++) {
            double a = flushed(parity_tensor_get(A, rows[q] * ars + t * ats), flush);
            if (a == 0) continue;
            for (int64_t j = 0; j < cols; j++) {
                double p = flushed(a * b[j], flush == FLUSH_PRODUCTS);
                sum[q * cols + j] += p;
                abs_sum[q * cols + j] += fabs(p);
                if (sq_sum) sq_sum[q * cols + j] += p * p;
            }
        }
    }
    free(b);
    return PARITY_OK;
}

static parity_status_t terms_add(const parity_abi_tensor_t *A, int64_t ars, int64_t ats,
                                 const parity_abi_tensor_t *B, int64_t bts, int64_t bjs,
                                 int64_t cols, int64_t from, int64_t to, const int64_t *rows,
                                 int64_t n_rows, double *sum, double *abs_sum, double *sq_sum)
{
    return terms_add_flush(A, ars, ats, B, bts, bjs, cols, from, to, rows, n_rows, sum, abs_sum,
                           sq_sum, 0);
}

static parity_status_t gemm_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                      const int64_t *rows, int64_t n_rows, double *sum,
                                      double *abs_sum, double *sq_sum)
{
    if (out != 0) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *A = &c->inputs[0]->view, *B = &c->inputs[1]->view;
    int64_t k = A->shape[1], n = B->shape[1];
    if (from < 0 || to > k || from > to) return PARITY_E_UNSUPPORTED;
    /* C[i, j] = Σ_t A[i, t] B[t, j] */
    return terms_add(A, k, 1, B, n, 1, n, from, to, rows, n_rows, sum, abs_sum, sq_sum);
}

static parity_status_t bwd_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                     const int64_t *rows, int64_t n_rows, double *sum,
                                     double *abs_sum, double *sq_sum)
{
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *W = &c->inputs[1]->view,
                              *DY = &c->inputs[2]->view;
    int64_t m = X->shape[0], k = X->shape[1], n = W->shape[1];
    if (out == 0) { /* dX[i, r] = Σ_t dY[i, t] W[r, t]: n terms, k columns */
        if (from < 0 || to > n || from > to) return PARITY_E_UNSUPPORTED;
        return terms_add(DY, n, 1, W, 1, n, k, from, to, rows, n_rows, sum, abs_sum, sq_sum);
    }
    if (out == 1) { /* dW[r, j] = Σ_t X[t, r] dY[t, j]: m terms, n columns */
        if (from < 0 || to > m || from > to) return PARITY_E_UNSUPPORTED;
        return terms_add(X, 1, k, DY, n, 1, n, from, to, rows, n_rows, sum, abs_sum, sq_sum);
    }
    return PARITY_E_UNSUPPORTED;
}

/* ---- presets -------------------------------------------------------------------------------- */

const parity_workload_family_t gemm_family = {
    "gemm", sizeof(gemm_params_t), 4,
    {PARITY_WL_FIELD(gemm_params_t, a, PARITY_WL_VALS, "A (M,K)"),
     PARITY_WL_FIELD(gemm_params_t, b, PARITY_WL_VALS, "B (K,N)"),
     PARITY_WL_FIELD(gemm_params_t, outliers, PARITY_WL_INT, "outlier channels of A (a outlier)"),
     PARITY_WL_FIELD(gemm_params_t, outlier_factor, PARITY_WL_DOUBLE, "their factor")}};

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define GEMM_RANGE(name_, summary_, ...)                                                     \
    {.name = name_, .summary = summary_ "; M=64, K=1031, N=48", .n = 64, .d = 1031, .v = 48, \
     .params = &(const gemm_params_t){__VA_ARGS__}}
static const parity_workload_t GEMM_PRESETS[] = {
    {.name = "llm-fwd",
     .summary = "projection forward: randn hidden states x 0.02 randn weights, M=256 tokens, K=4096, N=64",
     .n = 256, .d = 4096, .v = 64,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_NORMAL, 0.02}}},
    {.name = "odd-k4097",
     .summary = "K=4097 (a tile of 64 plus one): randn x 0.02 randn, M=128, N=64",
     .n = 128, .d = 4097, .v = 64,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_NORMAL, 0.02}}},
    {.name = "odd-k1000",
     .summary = "K=1000 (15 tiles of 64 and 40), randn x 0.02 randn, M=256, N=128",
     .n = 256, .d = 1000, .v = 128,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_NORMAL, 0.02}}},
    {.name = "outlier-ch",
     .summary = "activations with 4 outlier channels (K columns of A) at 80x, LLM.int8-style; M=256, K=4096, N=64",
     .n = 256, .d = 4096, .v = 64,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_OUTLIER, 1},
                           .b = {PARITY_VALS_NORMAL, 0.02}, .outliers = 4, .outlier_factor = 80}},
    {.name = "dw-32k",
     .summary = "weight gradient dW = X^T dY (a 32 x 16 tile): M=32 input features, K=32768 tokens, N=16 output features; dY at gradient scale 1e-3..1e-6 per token",
     .n = 32, .d = 32768, .v = 16,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "dw-varlen",
     .summary = "dW over a packed variable-length batch: K=20011 tokens (no tile divides it), gradient-scale dY, M=32, N=16",
     .n = 32, .d = 20011, .v = 16,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "prod-llama7b-down",
     .summary = "Llama-2-7B MLP down_proj forward: 256 tokens x K=11008 x 256 of its 4096 output columns, 4 outlier channels at 60x",
     .n = 256, .d = 11008, .v = 256, .production = 1,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_OUTLIER, 1},
                           .b = {PARITY_VALS_NORMAL, 0.02}, .outliers = 4, .outlier_factor = 60}},
    /* Structure and range (docs/workloads.md): K = 1031 (16 tiles of 64 and 7) everywhere. */
    GEMM_RANGE("exact",
               "sparse powers of two in A and B (0 or +-2^e, |e| <= 2): every partial sum exact in fp32, a dropped or misplaced term is a gross error",
               .a = {PARITY_VALS_SPARSE_POW2, 1}, .b = {PARITY_VALS_SPARSE_POW2, 1}),
    GEMM_RANGE("x1e-3",
               "llm-fwd's values times 1e-3 (A 1e-3 randn, B 2e-5 randn): tolerances scale with them",
               .a = {PARITY_VALS_NORMAL, 1e-3}, .b = {PARITY_VALS_NORMAL, 2e-5}),
    GEMM_RANGE("x64",
               "unit randn A and B times 64: |C| ~ 1e5, past fp16's 65504 (an fp16 accumulator or epilogue overflows)",
               .a = {PARITY_VALS_NORMAL, 64}, .b = {PARITY_VALS_NORMAL, 64}),
    GEMM_RANGE("near-max",
               "randn A x 2^63, B x 2^52: sum|a b| ~ 2^124, within 2^4 of fp32/bf16 overflow, every partial sum finite",
               .a = {PARITY_VALS_NORMAL, 0x1p63}, .b = {PARITY_VALS_NORMAL, 0x1p52}),
    GEMM_RANGE("subnormal",
               "randn A, B at gradient scale x 1e-35 (1e-38..1e-41 per row): products straddle fp32's smallest normal 2^-126; a flush-to-zero kernel fails here",
               .a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_GRADSCALE, 1e-35}),
};
#undef GEMM_RANGE

static const parity_workload_t GEMM_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn A and B, M=N=128, K=4096, seed 200 (stand-in shape)",
     .n = 128, .d = 4096, .v = 128,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand A and B, square 512 (its level-1 square matmul, scaled from 2048)",
     .n = 512, .d = 512, .v = 512,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_UNIFORM01, 1},
                           .b = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "small randn A and B, 64 x 256 x 64",
     .n = 64, .d = 256, .v = 64,
     .params = &(const gemm_params_t){.a = {PARITY_VALS_NORMAL, 1}, .b = {PARITY_VALS_NORMAL, 1}}},
};

/* Variant 2: the whole fp32 pipeline under flush-to-zero (a CPU with FTZ/DAZ set, as
 * torch.set_flush_denormal(True) or -ffast-math's crtfastmath do): inputs, each fp32 product and
 * each fp32 partial sum flushed, the K terms summed in index order. A flushed partial sum makes
 * the result order-dependent, so no order-free reference exists; the sequential order is the one
 * a CPU loop (and torch's CPU GEMM on these shapes) uses, and a kernel summing in another order
 * is not reproduced by it (its match stays low, the diagnosis says so). */
static void ftz_sequential(const parity_abi_tensor_t *A, const parity_abi_tensor_t *B, int64_t k,
                           int64_t n, const int64_t *rows, int64_t n_rows, double *ref, double *s_acc)
{
    for (int64_t q = 0; q < n_rows; q++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            double abs_sum = 0;
            for (int64_t t = 0; t < k; t++) {
                float a = (float)flushed(parity_tensor_get(A, rows[q] * k + t), 1);
                float b = (float)flushed(parity_tensor_get(B, t * n + j), 1);
                float p = (float)flushed((double)(a * b), 1);
                acc = (float)flushed((double)(acc + p), 1);
                abs_sum += fabs((double)a * (double)b);
            }
            ref[q * n + j] = acc;
            s_acc[q * n + j] = abs_sum;
        }
}

/* The op's variants (op.h variant_ref): C with subnormal inputs flushed to zero (0), and with
 * subnormal products flushed too (1), every term summed exactly; (2) ftz_sequential above. */
static parity_status_t gemm_variant_ref(const parity_case_t *c, int out, int which,
                                        const parity_format_t *fmt, int dir, const int64_t *rows,
                                        int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    if (out != 0 || which < 0 || which > 2) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *A = &c->inputs[0]->view, *B = &c->inputs[1]->view;
    int64_t k = A->shape[1], n = B->shape[1];
    size_t ne = (size_t)n_rows * (size_t)n;
    memset(ref, 0, ne * sizeof *ref);
    memset(s_acc, 0, ne * sizeof *s_acc);
    parity_status_t st = PARITY_OK;
    if (which == 2) ftz_sequential(A, B, k, n, rows, n_rows, ref, s_acc);
    else st = terms_add_flush(A, k, 1, B, n, 1, n, 0, k, rows, n_rows, ref, s_acc, NULL,
                                         which ? FLUSH_PRODUCTS : FLUSH_INPUTS);
    if (s_up) memcpy(s_up, s_acc, ne * sizeof *s_up);
    return st;
}

const parity_op_t parity_op_gemm = {
    .name = "gemm",
    .summary = "matrix multiply C (M,N) = A (M,K) . B (K,N); workload N x D x V = M x K x N "
               "(dX and dW of training are this op with transposed operands)",
    .n_inputs = 2,
    .n_outputs = 1,
    .input_names = {"A", "B"},
    .output_names = {"C"},
    .input_is_float = {1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "C[i,j]: K-term sum of products a_ik b_kj (exact in fp32 for bf16 inputs, one "
                   "rounding for fp32 inputs), any order/blocking/split-K with fp32 partials",
    .presets = GEMM_PRESETS,
    .n_presets = (int)(sizeof GEMM_PRESETS / sizeof GEMM_PRESETS[0]),
    .baseline_workloads = GEMM_BASELINES,
    .wl_family = &gemm_family,
    .catalog = {{parity_catalog_gemm, &parity_catalog_gemm_count}},
    .cost = &parity_cost_gemm,
    .build = gemm_build,
    .emulate = gemm_emulate,
    .free_priv = NULL,
    .terms_ref = gemm_terms_ref,
    .variants = {{PARITY_VARIANT_FLUSHED, "subnormal inputs of A and B flushed to zero", 0},
                 {PARITY_VARIANT_FLUSHED, "subnormal inputs and products flushed to zero", 0},
                 {PARITY_VARIANT_FLUSHED, "subnormal inputs, fp32 products and fp32 partial sums "
                  "flushed to zero (summed in index order)", 0}},
    .variant_ref = gemm_variant_ref,
};

/* gemm_bwd presets. Shape letters: N tokens = M, D = K in-features, V = N out-features; dW's
 * reduction runs over the N tokens, dX's over the V out-features. X takes the value scheme `x`
 * (outlier channels are K columns, i.e. input features), dY takes `dy` (gradient scale per
 * token); W is 0.02·N(0,1). */
#define F(member, type, what) PARITY_WL_FIELD(gemm_bwd_params_t, member, type, what)
const parity_workload_family_t gemm_bwd_family = {
    "gemm_bwd", sizeof(gemm_bwd_params_t), 4,
    {F(x, PARITY_WL_VALS, "activations X (M,K)"),
     F(dy, PARITY_WL_VALS, "upstream gradient dY (M,N)"),
     F(outliers, PARITY_WL_INT, "outlier channels of X (x outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor")}};
#undef F

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define GEMM_BWD_RANGE(name_, summary_, ...)                          \
    {.name = name_, .summary = summary_, .n = 2053, .d = 32, .v = 48, \
     .params = &(const gemm_bwd_params_t){__VA_ARGS__}}
static const parity_workload_t BWD_PRESETS[] = {
    {.name = "train-8k",
     .summary = "8192 tokens, 32 in x 64 out features (a tile of a layer): randn X, gradient-scale dY",
     .n = 8192, .d = 32, .v = 64,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_NORMAL, 1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "train-varlen",
     .summary = "packed variable-length batch: 6007 tokens (no tile divides it), randn X, gradient-scale dY",
     .n = 6007, .d = 32, .v = 64,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_NORMAL, 1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "train-outlier",
     .summary = "4096 tokens, X with 4 outlier input features at 80x, gradient-scale dY, 64 in x 32 out",
     .n = 4096, .d = 64, .v = 32,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_OUTLIER, 1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .outliers = 4, .outlier_factor = 80}},
    {.name = "prod-dw-64k",
     .summary = "64k tokens (16 x 4096) through a 64 x 64 tile of a 7B layer's projection, gradient-scale dY",
     .n = 65536, .d = 64, .v = 64, .production = 1,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_NORMAL, 1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}}},
    /* Structure and range (docs/workloads.md): 2053 tokens (32 tiles of 64 and 5). */
    GEMM_BWD_RANGE("exact",
                   "sparse powers of two in X, W and dY (0 or +-2^e, |e| <= 2): dX and dW exact in fp32; 2053 tokens, 32 in x 48 out",
                   .x = {PARITY_VALS_SPARSE_POW2, 1}, .dy = {PARITY_VALS_SPARSE_POW2, 1}),
    GEMM_BWD_RANGE("x1e-3",
                   "train-8k's values times 1e-3 (X 1e-3 randn, dY 1e-6..1e-9): 2053 tokens, 32 x 48",
                   .x = {PARITY_VALS_NORMAL, 1e-3}, .dy = {PARITY_VALS_GRADSCALE, 1e-3}),
    GEMM_BWD_RANGE("x64",
                   "unit randn X and dY times 64: |dW| ~ 2e5, past fp16's 65504; 2053 tokens, 32 x 48",
                   .x = {PARITY_VALS_NORMAL, 64}, .dy = {PARITY_VALS_NORMAL, 64}),
    GEMM_BWD_RANGE("near-max",
                   "randn X x 2^62, dY x 2^52: dW's sum|x dy| ~ 2^124, within 2^4 of fp32/bf16 overflow; 2053 tokens, 32 x 48",
                   .x = {PARITY_VALS_NORMAL, 0x1p62}, .dy = {PARITY_VALS_NORMAL, 0x1p52}),
    GEMM_BWD_RANGE("subnormal",
                   "randn X, dY at gradient scale x 1e-35 (1e-38..1e-41 per token): dX and dW in fp32's subnormal range; 2053 tokens, 32 x 48",
                   .x = {PARITY_VALS_NORMAL, 1}, .dy = {PARITY_VALS_GRADSCALE, 1e-35}),
};
#undef GEMM_BWD_RANGE

static const parity_workload_t BWD_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn X, W, dY: 1024 tokens, 256 x 256, seed 200 (stand-in shape)",
     .n = 1024, .d = 256, .v = 256,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_NORMAL, 1},
                           .dy = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand X and dY, 512 tokens, 256 x 256",
     .n = 512, .d = 256, .v = 256,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_UNIFORM01, 1},
                           .dy = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "small randn: 64 tokens, 128 x 64",
     .n = 64, .d = 128, .v = 64,
     .params = &(const gemm_bwd_params_t){.x = {PARITY_VALS_NORMAL, 1},
                           .dy = {PARITY_VALS_NORMAL, 1}}},
};

const parity_op_t parity_op_gemm_bwd = {
    .name = "gemm_bwd",
    .summary = "linear layer backward: dX (M,K) = dY.W^T and dW (K,N) = X^T.dY from X (M,K), "
               "W (K,N), dY (M,N); workload N x D x V = tokens x in x out",
    .n_inputs = 3,
    .n_outputs = 2,
    .input_names = {"X", "W", "dY"},
    .output_names = {"dX", "dW"},
    .input_is_float = {1, 1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "dX[i,k]: N-term sum of dY_in W_kn; dW[k,n]: M-term (token) sum of X_ik dY_in; "
                   "products exact for bf16 inputs, one rounding for fp32",
    .presets = BWD_PRESETS,
    .n_presets = (int)(sizeof BWD_PRESETS / sizeof BWD_PRESETS[0]),
    .baseline_workloads = BWD_BASELINES,
    .wl_family = &gemm_bwd_family,
    .catalog = {{parity_catalog_gemm, &parity_catalog_gemm_count}},
    .cost = &parity_cost_gemm_bwd,
    .build = bwd_build,
    .emulate = bwd_emulate,
    .free_priv = NULL,
    .terms_ref = bwd_terms_ref,
};

/* RMSNorm forward and backward as standalone ops, with fp64 references and error-model data.
 * y = x r g with r = (mean x^2 + eps)^-1/2; backward as in ops/embedding/embedding.c's fused op. */
#include <math.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/format/format_fast.h"

static parity_tensor_t *matrix(const char *name, parity_dtype_t dt, int64_t rows, int64_t cols,
                               parity_vals_kind_t kind, double scale, int outliers, double factor,
                               uint64_t seed, uint64_t stream)
{
    int64_t shape[2] = {rows, cols};
    parity_tensor_t *t = parity_tensor_new(name, dt, 2, shape);
    double *buf = malloc((size_t)((rows * cols) > 0 ? rows * cols : 1) * sizeof *buf);
    if (!t || !buf) {
        parity_tensor_free(t);
        free(buf);
        return NULL;
    }
    parity_workload_values(kind, scale, outliers, factor, seed, stream, 0, rows, cols, buf);
    parity_store_f64(t, buf);
    free(buf);
    return t;
}

static parity_tensor_t *gamma_vec(const parity_workload_t *wl, const rms_params_t *p, parity_dtype_t dt,
                                  uint64_t seed)
{
    int64_t shape[1] = {wl->d};
    parity_tensor_t *t = parity_tensor_new("gamma", dt, 1, shape);
    double *g = malloc((size_t)wl->d * sizeof *g);
    if (!t || !g) {
        parity_tensor_free(t);
        free(g);
        return NULL;
    }
    parity_workload_gamma(p->gamma, seed, wl->d, g);
    parity_store_f64(t, g);
    free(g);
    return t;
}

static void set_eps(parity_case_t *c)
{
    c->n_attrs = 1;
    c->attr_names[0] = "eps";
    c->attr_values[0] = PARITY_RMS_EPS;
}

/* ---- rmsnorm_fwd ---- */
static parity_status_t rfwd_build(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                  parity_diag_t *diag)
{
    const rms_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    int64_t n = wl->n, d = wl->d;
    c->inputs[0] = matrix("x", dt, n, d, p->x.kind, p->x.scale, p->outliers, p->outlier_factor, seed, 2);
    c->inputs[1] = gamma_vec(wl, p, dt, seed);
    if (!c->inputs[0] || !c->inputs[1]) return PARITY_E_NOMEM;
    set_eps(c);
    parity_ref_output_t *R = &c->ref[0];
    parity_status_t st = parity_ref_output_alloc(R, "y", "row", n, d, 0, 0, 1);
    if (st != PARITY_OK) return st;
    /* y_j = x_j r g_j: no accumulation into y itself (k = 1); the term carries r's error, about
     * D+4 roundings (sum of squares, mean, eps, sqrt, divide), plus two products: m_up = D+8. */
    R->m_up = d + 8;
    c->out_ndim[0] = 2;
    c->out_shape[0][0] = n;
    c->out_shape[0][1] = d;
    double *x = malloc((size_t)d * sizeof *x), *g = malloc((size_t)d * sizeof *g);
    if (!x || !g) {
        free(x);
        free(g);
        return PARITY_E_NOMEM;
    }
    parity_tensor_to_f64(&c->inputs[1]->view, g);
    for (int64_t i = 0; i < n; i++) {
        double ss = 0;
        for (int64_t k = 0; k < d; k++) {
            x[k] = parity_tensor_get(&c->inputs[0]->view, i * d + k);
            ss += x[k] * x[k];
        }
        double r = 1.0 / sqrt(ss / (double)d + PARITY_RMS_EPS);
        R->k[i] = 1;
        for (int64_t j = 0; j < d; j++) {
            double y = x[j] * r * g[j];
            R->ref[i * d + j] = y;
            R->s_acc[i * d + j] = fabs(y);
            R->s_up[i * d + j] = fabs(y);
        }
    }
    free(x);
    free(g);
    return PARITY_OK;
}

/* The reference of rows[0..n_rows) with eps and the mean's divisor div (the op's: PARITY_RMS_EPS
 * and D), as rfwd_build forms it, with gamma or, for ones, as if gamma were all ones. */
static parity_status_t rfwd_rows_ref(const parity_case_t *c, int out, double eps, double div, int ones,
                                     const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                     double *s_up)
{
    if (out != 0) return PARITY_E_UNSUPPORTED;
    int64_t d = c->inputs[0]->view.shape[1];
    double *x = malloc((size_t)d * 2 * sizeof *x);
    if (!x) return PARITY_E_NOMEM;
    double *g = x + d;
    parity_tensor_to_f64(&c->inputs[1]->view, g);
    for (int64_t j = 0; ones && j < d; j++) g[j] = 1.0;
    for (int64_t q = 0; q < n_rows; q++) {
        double ss = 0;
        for (int64_t k = 0; k < d; k++) {
            x[k] = parity_tensor_get(&c->inputs[0]->view, rows[q] * d + k);
            ss += x[k] * x[k];
        }
        double r = 1.0 / sqrt(ss / div + eps);
        for (int64_t j = 0; j < d; j++) {
            double y = x[j] * r * g[j];
            ref[q * d + j] = y;
            s_acc[q * d + j] = fabs(y);
            if (s_up) s_up[q * d + j] = fabs(y);
        }
    }
    free(x);
    return PARITY_OK;
}

/* The family's parameters (op.h params, param_value): 0 eps, 1 the mean's divisor (D: a kernel
 * with sum(x^2)/(D-1) has D - 1). x is input 0 of the forward, 1 of the backward. */
#define RMS_PARAMS {{"eps", PARITY_RMS_EPS, 0}, {"divisor", 0, PARITY_PARAM_INTEGER}}
static double rms_param_value(const parity_case_t *c, int which)
{
    const parity_abi_tensor_t *x = &c->inputs[c->n_inputs == 2 ? 0 : 1]->view;
    return which == 0 ? PARITY_RMS_EPS : (double)x->shape[1];
}

/* The diagnosis's parameter refit (op.h param_ref): eps or the divisor = value. */
static parity_status_t rfwd_param_ref(const parity_case_t *c, int out, int which, double value,
                                      const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                      double *s_up)
{
    double d = (double)c->inputs[0]->view.shape[1];
    return rfwd_rows_ref(c, out, which == 0 ? value : PARITY_RMS_EPS, which == 1 ? value : d, 0, rows,
                         n_rows, ref, s_acc, s_up);
}

/* The op's variants (op.h variant_ref): 0, gamma ignored (as if all ones). */
static parity_status_t rfwd_variant_ref(const parity_case_t *c, int out, int which,
                                        const parity_format_t *fmt, int dir, const int64_t *rows,
                                        int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    if (which != 0) return PARITY_E_UNSUPPORTED;
    return rfwd_rows_ref(c, out, PARITY_RMS_EPS, (double)c->inputs[0]->view.shape[1], 1, rows, n_rows,
                         ref, s_acc, s_up);
}

/* ---- emulation for the diagnosis ------------------------------------------------------------
 * Rows as the fp32 kernels (ops/rmsnorm/kernels.c, parity_rms_bwd_row_f32) compute them, except for the
 * accumulations, done in `acc` with `order` (parity_format_sum_fast: parity_format_sum's rounding,
 * fast): forward, the D-term sum of squares fl32(x_k^2); backward dx, that sum and the D-term
 * c = Σ fl32(fl32(g_k dy_k) fl32(x_k r)); backward dgamma (rows are channels), the N-term sum of
 * the rows' fl32(dy_j xhat_j) computed by the faithful fp32 backward. The sums are exact in fp32
 * for the diagnosis's formats (at most 24 significant bits, 8 exponent bits). */

/* r = 1/sqrtf(mean x^2 + eps) with the sum of squares in acc; sq: d doubles of scratch. */
static float emu_r(const float *x, int64_t d, const parity_format_t *acc, parity_sum_order_t order,
                   double *sq)
{
    for (int64_t k = 0; k < d; k++) sq[k] = x[k] * x[k];
    float ss = (float)parity_format_sum_fast(acc, sq, d, order);
    return 1.0f / sqrtf(ss / (float)d + (float)PARITY_RMS_EPS);
}

static parity_status_t rfwd_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                    double *dst)
{
    if (out != 0) return PARITY_E_UNSUPPORTED;
    int64_t d = c->inputs[0]->view.shape[1];
    float *x = malloc((size_t)d * 2 * sizeof *x);
    double *sq = malloc((size_t)d * sizeof *sq);
    if (!x || !sq) {
        free(x);
        free(sq);
        return PARITY_E_NOMEM;
    }
    float *g = x + d;
    parity_row_to_f32(&c->inputs[1]->view, 0, g);
    for (int64_t q = 0; q < n_rows; q++) {
        parity_row_to_f32(&c->inputs[0]->view, rows[q], x);
        float r = emu_r(x, d, acc, order, sq);
        for (int64_t j = 0; j < d; j++) dst[q * d + j] = x[j] * r * g[j];
    }
    free(x);
    free(sq);
    return PARITY_OK;
}

#define F(member, type, what) PARITY_WL_FIELD(rms_params_t, member, type, what)
const parity_workload_family_t rms_family = {
    "rmsnorm", sizeof(rms_params_t), 5,
    {F(x, PARITY_WL_VALS, "the input rows x (N,D)"),
     F(dy, PARITY_WL_VALS, "upstream gradient dy (N,D): the backward's"),
     F(outliers, PARITY_WL_INT, "outlier channels of x (x outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor"),
     F(gamma, PARITY_WL_GAMMA, "the norm weight gamma (D)")}};
#undef F

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define RMS_RANGE(name_, summary_, ...)                                                 \
    {.name = name_, .summary = summary_ "; N=1024, D=259", .n = 1024, .d = 259, .v = 0, \
     .params = &(const rms_params_t){.gamma = PARITY_GAMMA_TRAINED, __VA_ARGS__}}
static const parity_workload_t RMS_PRESETS[] = {
    {.name = "unit",
     .summary = "unit normal x and dy, gamma = 1",
     .n = 2048, .d = 512, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_NORMAL, 1}, .dy = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_ONES}},
    {.name = "small-x",
     .summary = "embedding-scale x (0.02): eps matters",
     .n = 2048, .d = 512, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_NORMAL, 0.02},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "outlier",
     .summary = "4 outlier channels in x at 100x, trained gamma",
     .n = 2048, .d = 512, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_OUTLIER, 1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .outliers = 4, .outlier_factor = 100,
                           .gamma = PARITY_GAMMA_TRAINED}},
    {.name = "odd-d4097",
     .summary = "odd hidden size D=4097",
     .n = 257, .d = 4097, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_NORMAL, 0.02},
                           .dy = {PARITY_VALS_GRADSCALE, 1}, .gamma = PARITY_GAMMA_TRAINED}},
    /* Structure and range (docs/workloads.md): D = 259 (2 x 128 + 3). */
    RMS_RANGE("exact",
              "sparse powers of two in x and dy (0 or +-2^e, |e| <= 2), trained gamma",
              .x = {PARITY_VALS_SPARSE_POW2, 1}, .dy = {PARITY_VALS_SPARSE_POW2, 1}),
    RMS_RANGE("x1e-3",
              "unit randn x and dy times 1e-3 (x^2 ~ 1e-6: eps matters), trained gamma",
              .x = {PARITY_VALS_NORMAL, 1e-3}, .dy = {PARITY_VALS_NORMAL, 1e-3}),
    RMS_RANGE("x64",
              "unit randn x and dy times 64, trained gamma",
              .x = {PARITY_VALS_NORMAL, 64}, .dy = {PARITY_VALS_NORMAL, 64}),
    RMS_RANGE("near-max",
              "x = randn x 2^14 (fp16's edge: some |x| > 65504), dy = randn x 2^100",
              .x = {PARITY_VALS_NORMAL, 0x1p14}, .dy = {PARITY_VALS_NORMAL, 0x1p100}),
    RMS_RANGE("subnormal",
              "x = randn x 1e-39 (bf16 subnormals: x^2 underflows, eps decides r), dy at gradient scale x 1e-35",
              .x = {PARITY_VALS_NORMAL, 1e-39}, .dy = {PARITY_VALS_GRADSCALE, 1e-35}),
};
#undef RMS_RANGE

static const parity_workload_t RMS_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "unit randn, gamma = 1, seed 200",
     .n = 4096, .d = 2048, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_NORMAL, 1}, .dy = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_ONES}},
    {.name = "kernelbench",
     .summary = "torch.rand inputs",
     .n = 2048, .d = 1024, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_UNIFORM01, 1},
                           .dy = {PARITY_VALS_UNIFORM01, 1}, .gamma = PARITY_GAMMA_ONES}},
    {.name = "assert_close",
     .summary = "randn inputs and gamma, small shape",
     .n = 512, .d = 256, .v = 0,
     .params = &(const rms_params_t){.x = {PARITY_VALS_NORMAL, 1}, .dy = {PARITY_VALS_NORMAL, 1},
                           .gamma = PARITY_GAMMA_NORMAL}},
};

const parity_op_t parity_op_rmsnorm_fwd = {
    .name = "rmsnorm_fwd",
    .summary = "RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * gamma",
    .n_inputs = 2,
    .n_outputs = 1,
    .input_names = {"x", "gamma"},
    .output_names = {"y"},
    .input_is_float = {1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "y[i,j]: one term carrying ~D+8 roundings (the row's sum of squares)",
    .presets = RMS_PRESETS,
    .n_presets = (int)(sizeof RMS_PRESETS / sizeof RMS_PRESETS[0]),
    .baseline_workloads = RMS_BASELINES,
    .wl_family = &rms_family,
    .catalog = {{parity_catalog_rmsnorm, &parity_catalog_rmsnorm_count}},
    .cost = &parity_cost_rmsnorm_fwd,
    .build = rfwd_build,
    .emulate = rfwd_emulate,
    .free_priv = NULL,
    .params = RMS_PARAMS,
    .param_value = rms_param_value,
    .param_ref = rfwd_param_ref,
    .variants = {{PARITY_VARIANT_IGNORED, "gamma (y computed as if it were all ones)", 0}},
    .variant_ref = rfwd_variant_ref,
};

/* ---- rmsnorm_bwd ---- */

/* Row dx's reference and error-model data (ref, s_acc, s_up: d doubles each, s_up may be NULL)
 * from the row's x, dy, gamma and sum of squares ss, with eps and the mean's divisor div (the
 * op's: PARITY_RMS_EPS and D; a kernel dividing by div divides both means by it); returns
 * r = 1/sqrt(ss/div + eps). */
static double rbwd_dx_row(const double *x, const double *dy, const double *g, int64_t d, double ss,
                          double eps, double div, double *ref, double *sa, double *su)
{
    double r = 1.0 / sqrt(ss / div + eps), cc = 0, ca = 0;
    for (int64_t k = 0; k < d; k++) {
        double t = g[k] * dy[k] * x[k] * r;
        cc += t;
        ca += fabs(t);
    }
    cc /= div;
    ca /= div;
    for (int64_t j = 0; j < d; j++) {
        double xh = x[j] * r, dx = r * (g[j] * dy[j] - xh * cc);
        ref[j] = dx;
        sa[j] = fabs(dx);
        if (su) su[j] = r * (fabs(g[j] * dy[j]) + fabs(xh) * ca);
    }
    return r;
}

/* dx's reference of rows[0..n_rows) with eps and the divisor div, with gamma or, for ones, as if
 * it were all ones. dgamma (a sum over every row) is not recomputed on rows. */
static parity_status_t rbwd_rows_ref(const parity_case_t *c, int out, double eps, double div, int ones,
                                     const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                     double *s_up)
{
    if (out != 0) return PARITY_E_UNSUPPORTED;
    int64_t d = c->inputs[1]->view.shape[1];
    double *x = malloc((size_t)d * 3 * sizeof *x);
    if (!x) return PARITY_E_NOMEM;
    double *dy = x + d, *g = x + 2 * d;
    parity_tensor_to_f64(&c->inputs[2]->view, g);
    for (int64_t j = 0; ones && j < d; j++) g[j] = 1.0;
    for (int64_t q = 0; q < n_rows; q++) {
        double ss = 0;
        for (int64_t k = 0; k < d; k++) {
            x[k] = parity_tensor_get(&c->inputs[1]->view, rows[q] * d + k);
            dy[k] = parity_tensor_get(&c->inputs[0]->view, rows[q] * d + k);
            ss += x[k] * x[k];
        }
        rbwd_dx_row(x, dy, g, d, ss, eps, div, ref + q * d, s_acc + q * d, s_up ? s_up + q * d : NULL);
    }
    free(x);
    return PARITY_OK;
}

/* The op's variants (op.h variant_ref): 0, gamma ignored in dx (as if all ones). */
static parity_status_t rbwd_variant_ref(const parity_case_t *c, int out, int which,
                                        const parity_format_t *fmt, int dir, const int64_t *rows,
                                        int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    if (which != 0) return PARITY_E_UNSUPPORTED;
    return rbwd_rows_ref(c, out, PARITY_RMS_EPS, (double)c->inputs[1]->view.shape[1], 1, rows, n_rows,
                         ref, s_acc, s_up);
}

/* The diagnosis's parameter refit (op.h param_ref) on dx: eps or the divisor = value. */
static parity_status_t rbwd_param_ref(const parity_case_t *c, int out, int which, double value,
                                      const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                      double *s_up)
{
    double d = (double)c->inputs[1]->view.shape[1];
    return rbwd_rows_ref(c, out, which == 0 ? value : PARITY_RMS_EPS, which == 1 ? value : d, 0, rows,
                         n_rows, ref, s_acc, s_up);
}

static parity_status_t rbwd_build(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                  parity_diag_t *diag)
{
    const rms_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    int64_t n = wl->n, d = wl->d;
    c->inputs[0] = matrix("dy", dt, n, d, p->dy.kind, p->dy.scale, 0, 1, seed, 1);
    c->inputs[1] = matrix("x", dt, n, d, p->x.kind, p->x.scale, p->outliers, p->outlier_factor, seed, 2);
    c->inputs[2] = gamma_vec(wl, p, dt, seed);
    if (!c->inputs[0] || !c->inputs[1] || !c->inputs[2]) return PARITY_E_NOMEM;
    set_eps(c);
    parity_ref_output_t *R = &c->ref[0], *G = &c->ref[1];
    parity_status_t st = parity_ref_output_alloc(R, "dx", "row", n, d, 0, 0, 1);
    if (st == PARITY_OK) st = parity_ref_output_alloc(G, "dgamma", "channel", d, 1, 0, 0, 1);
    if (st != PARITY_OK) return st;
    R->m_up = 4 * d + 32; /* derivation: docs/error-model.md, as for the fused op */
    G->m_up = d + 8;
    c->out_ndim[0] = 2;
    c->out_shape[0][0] = n;
    c->out_shape[0][1] = d;
    c->out_ndim[1] = 1;
    c->out_shape[1][0] = d;
    /* Symmetric class (docs/error-model.md): dgamma's N terms dy_ij xhat_ij are odd in the row
     * dy_i and in the row x_i, so a symmetric dy or x makes their signs fair and independent. */
    if (parity_vals_symmetric(p->dy.kind) || parity_vals_symmetric(p->x.kind)) {
        G->s_sym = calloc((size_t)d, sizeof *G->s_sym);
        if (!G->s_sym) return PARITY_E_NOMEM;
    }
    /* Per-term errors across terms (docs/error-model.md): dgamma's N terms dy xhat come from
     * distinct rows; sum c^2 <= (D/4 + 4.5) A^2 <= m_up A^2 and b_up = 7 as for the fused op's
     * dgamma (ops/embedding/embedding.c). dx is one term per element: nothing to split. */
    if (parity_rms_rows_distinct(p->x.kind, p->dy.kind)) {
        G->s_up2 = calloc((size_t)d, sizeof *G->s_up2);
        if (!G->s_up2) return PARITY_E_NOMEM;
        G->b_up = 7;
    }
    double *x = malloc((size_t)d * sizeof *x), *dy = malloc((size_t)d * sizeof *dy),
           *g = malloc((size_t)d * sizeof *g);
    if (!x || !dy || !g) st = PARITY_E_NOMEM;
    if (st == PARITY_OK) parity_tensor_to_f64(&c->inputs[2]->view, g);
    for (int64_t i = 0; st == PARITY_OK && i < n; i++) {
        double ss = 0;
        for (int64_t k = 0; k < d; k++) {
            x[k] = parity_tensor_get(&c->inputs[1]->view, i * d + k);
            dy[k] = parity_tensor_get(&c->inputs[0]->view, i * d + k);
            ss += x[k] * x[k];
        }
        double r = rbwd_dx_row(x, dy, g, d, ss, PARITY_RMS_EPS, (double)d, R->ref + i * d, R->s_acc + i * d,
                               R->s_up + i * d);
        R->k[i] = 1;
        for (int64_t j = 0; j < d; j++) {
            double xh = x[j] * r;
            G->ref[j] += dy[j] * xh;
            G->s_acc[j] += fabs(dy[j] * xh);
            if (G->s_sym) G->s_sym[j] += (dy[j] * xh) * (dy[j] * xh);
            if (G->s_up2) G->s_up2[j] += (dy[j] * xh) * (dy[j] * xh);
        }
    }
    for (int64_t j = 0; st == PARITY_OK && j < d; j++) {
        G->s_up[j] = G->s_acc[j];
        G->k[j] = n;
        if (G->s_sym) G->s_sym[j] = sqrt(G->s_sym[j]);
        if (G->s_up2) G->s_up2[j] = sqrt(G->s_up2[j]);
    }
    free(x);
    free(dy);
    free(g);
    return st;
}

static parity_status_t rbwd_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                    double *dst)
{
    if (out != 0 && out != 1) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *DY = &c->inputs[0]->view, *X = &c->inputs[1]->view;
    int64_t n = X->shape[0], d = X->shape[1];
    float *buf = malloc((size_t)d * 5 * sizeof *buf);
    /* scratch: d doubles for a row's terms; for dgamma also the n_rows channels' N terms */
    double *sq = malloc((size_t)(d + (out == 1 ? n_rows * n : 0)) * sizeof *sq);
    if (!buf || !sq) {
        free(buf);
        free(sq);
        return PARITY_E_NOMEM;
    }
    float *x = buf, *dy = buf + d, *g = buf + 2 * d, *dx = buf + 3 * d, *xdy = buf + 4 * d;
    parity_row_to_f32(&c->inputs[2]->view, 0, g);
    if (out == 1) {
        double *terms = sq + d;
        for (int64_t i = 0; i < n; i++) {
            parity_row_to_f32(X, i, x);
            parity_row_to_f32(DY, i, dy);
            parity_rms_bwd_row_f32(x, dy, g, d, (float)PARITY_RMS_EPS, dx, xdy, 0, 0);
            for (int64_t q = 0; q < n_rows; q++) terms[q * n + i] = xdy[rows[q]];
        }
        for (int64_t q = 0; q < n_rows; q++)
            dst[q] = parity_format_sum_fast(acc, terms + q * n, n, order);
    } else {
        for (int64_t q = 0; q < n_rows; q++) {
            parity_row_to_f32(X, rows[q], x);
            parity_row_to_f32(DY, rows[q], dy);
            float r = emu_r(x, d, acc, order, sq);
            for (int64_t k = 0; k < d; k++) sq[k] = (g[k] * dy[k]) * (x[k] * r);
            float cc = (float)parity_format_sum_fast(acc, sq, d, order) / (float)d;
            for (int64_t j = 0; j < d; j++) dst[q * d + j] = r * (g[j] * dy[j] - (x[j] * r) * cc);
        }
    }
    free(buf);
    free(sq);
    return PARITY_OK;
}

const parity_op_t parity_op_rmsnorm_bwd = {
    .name = "rmsnorm_bwd",
    .summary = "RMSNorm backward: dx (N,D) and dgamma (D)",
    .n_inputs = 3,
    .n_outputs = 2,
    .input_names = {"dy", "x", "gamma"},
    .output_names = {"dx", "dgamma"},
    .input_is_float = {1, 1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "dx[i,j]: one term from ~4D+32 roundings; dgamma[j]: N terms dy*xhat",
    .presets = RMS_PRESETS,
    .n_presets = (int)(sizeof RMS_PRESETS / sizeof RMS_PRESETS[0]),
    .baseline_workloads = RMS_BASELINES,
    .wl_family = &rms_family,
    .catalog = {{parity_catalog_rmsnorm, &parity_catalog_rmsnorm_count}},
    .cost = &parity_cost_rmsnorm_bwd,
    .build = rbwd_build,
    .emulate = rbwd_emulate,
    .free_priv = NULL,
    .params = RMS_PARAMS,
    .param_value = rms_param_value,
    .param_ref = rbwd_param_ref,
    .variants = {{PARITY_VARIANT_IGNORED, "gamma (dx computed as if it were all ones)", 0}},
    .variant_ref = rbwd_variant_ref,
};

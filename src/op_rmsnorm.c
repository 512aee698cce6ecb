/* RMSNorm forward and backward as standalone ops, with fp64 references and error-model data.
 * y = x r g with r = (mean x^2 + eps)^-1/2; backward as in op_embedding.c's fused op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_impl.h"
#include "parallel.h"

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

static parity_tensor_t *gamma_vec(const parity_workload_t *wl, parity_dtype_t dt, uint64_t seed)
{
    int64_t shape[1] = {wl->d};
    parity_tensor_t *t = parity_tensor_new("gamma", dt, 1, shape);
    double *g = malloc((size_t)wl->d * sizeof *g);
    if (!t || !g) {
        parity_tensor_free(t);
        free(g);
        return NULL;
    }
    parity_workload_gamma(wl->gamma, seed, wl->d, g);
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
    (void)op;
    (void)diag;
    int64_t n = wl->n, d = wl->d;
    c->inputs[0] = matrix("x", dt, n, d, wl->x_vals, wl->x_scale, wl->outliers, wl->outlier_factor, seed, 2);
    c->inputs[1] = gamma_vec(wl, dt, seed);
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

static const parity_workload_t RMS_PRESETS[] = {
    {"unit", "unit normal x and dy, gamma = 1", 2048, 512, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"small-x", "embedding-scale x (0.02): eps matters", 2048, 512, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 0.02, PARITY_GAMMA_TRAINED, 0, 0, 0, ""},
    {"outlier", "4 outlier channels in x at 100x, trained gamma", 2048, 512, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_OUTLIER, 1, PARITY_GAMMA_TRAINED, 4, 100, 0, ""},
    {"odd-d4097", "odd hidden size D=4097", 257, 4097, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 0.02, PARITY_GAMMA_TRAINED, 0, 0, 0, ""},
};

static const parity_workload_t RMS_BASELINES[] = {
    {"sol-execbench", "unit randn, gamma = 1, seed 200", 4096, 2048, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"kernelbench", "torch.rand inputs", 2048, 1024, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_UNIFORM01, 1, PARITY_VALS_UNIFORM01, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"assert_close", "randn inputs and gamma, small shape", 512, 256, 0, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_NORMAL, 0, 0, 0, ""},
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
    .build = rfwd_build,
    .emulate = NULL,
    .free_priv = NULL,
};

/* ---- rmsnorm_bwd ---- */
static parity_status_t rbwd_build(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                  parity_diag_t *diag)
{
    (void)op;
    (void)diag;
    int64_t n = wl->n, d = wl->d;
    c->inputs[0] = matrix("dy", dt, n, d, wl->dy_vals, wl->dy_scale, 0, 1, seed, 1);
    c->inputs[1] = matrix("x", dt, n, d, wl->x_vals, wl->x_scale, wl->outliers, wl->outlier_factor, seed, 2);
    c->inputs[2] = gamma_vec(wl, dt, seed);
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
        double r = 1.0 / sqrt(ss / (double)d + PARITY_RMS_EPS), cc = 0, ca = 0;
        for (int64_t k = 0; k < d; k++) {
            double t = g[k] * dy[k] * x[k] * r;
            cc += t;
            ca += fabs(t);
        }
        cc /= (double)d;
        ca /= (double)d;
        R->k[i] = 1;
        for (int64_t j = 0; j < d; j++) {
            double xh = x[j] * r, dx = r * (g[j] * dy[j] - xh * cc);
            R->ref[i * d + j] = dx;
            R->s_acc[i * d + j] = fabs(dx);
            R->s_up[i * d + j] = r * (fabs(g[j] * dy[j]) + fabs(xh) * ca);
            G->ref[j] += dy[j] * xh;
            G->s_acc[j] += fabs(dy[j] * xh);
        }
    }
    for (int64_t j = 0; st == PARITY_OK && j < d; j++) {
        G->s_up[j] = G->s_acc[j];
        G->k[j] = n;
    }
    free(x);
    free(dy);
    free(g);
    return st;
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
    .build = rbwd_build,
    .emulate = NULL,
    .free_priv = NULL,
};

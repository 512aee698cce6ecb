/* A made-up op for tests/cli_toy_op.sh, which adds it to a scratch copy of the tree as the folder
 * ops/toy/ plus one PARITY_OP line in ops/ops.def, and nothing else (docs/architecture.md, "Adding
 * an op"): the op record (inputs, outputs, presets with their parameter family, the fp64
 * reference and error-model data, the diagnosis's emulation), its cost model and its catalog.
 *
 * toy_rowsum: y (N) = the sum of each row of x (N,D). Each y[i] accumulates k = D input terms
 * (exact: m_up = 0), s_acc = sum_j |x_ij|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops_impl.h"

typedef struct {
    parity_vals_t x; /* the rows x (N,D) */
} toy_params_t;

static const parity_workload_family_t toy_family = {
    "toy", sizeof(toy_params_t), 1, {PARITY_WL_FIELD(toy_params_t, x, PARITY_WL_VALS, "the rows x (N,D)")}};

static parity_status_t toy_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    const toy_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    int64_t n = wl->n, d = wl->d, shape[2] = {n, d};
    if (n < 1 || d < 1 || (double)n * (double)d > 1e8)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: need 1 <= N, D and N*D <= 1e8", wl->name);
    double *x = malloc((size_t)(n * d) * sizeof *x);
    c->inputs[0] = parity_tensor_new("x", dt, 2, shape);
    if (!x || !c->inputs[0]) {
        free(x);
        return PARITY_E_NOMEM;
    }
    parity_workload_values(p->x.kind, p->x.scale, 0, 1, seed, 1, 0, n, d, x);
    parity_store_f64(c->inputs[0], x);
    parity_ref_output_t *R = &c->ref[0];
    parity_status_t st = parity_ref_output_alloc(R, "y", "row", n, 1, 0, 0, 0);
    if (st == PARITY_OK) {
        c->out_ndim[0] = 1;
        c->out_shape[0][0] = n;
        for (int64_t i = 0; i < n; i++) { /* the stored inputs, summed in fp64 (compensated) */
            double s = 0, a = 0, comp = 0;
            for (int64_t j = 0; j < d; j++) {
                double v = parity_tensor_get(&c->inputs[0]->view, i * d + j), t = s + v;
                comp += fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s;
                s = t;
                a += fabs(v);
            }
            R->ref[i] = s + comp;
            R->s_acc[i] = a;
            R->k[i] = d;
        }
    }
    free(x);
    return st;
}

static parity_status_t toy_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    (void)out;
    int64_t d = c->inputs[0]->view.shape[1];
    double *x = malloc((size_t)d * sizeof *x);
    if (!x) return PARITY_E_NOMEM;
    for (int64_t q = 0; q < n_rows; q++) {
        for (int64_t j = 0; j < d; j++) x[j] = parity_tensor_get(&c->inputs[0]->view, rows[q] * d + j);
        dst[q] = parity_format_sum(acc, x, (size_t)d, order, 0, NULL, NULL);
    }
    free(x);
    return PARITY_OK;
}

static const parity_workload_t TOY_PRESETS[] = {
    {.name = "unit", .summary = "unit normal rows, D=1000", .n = 256, .d = 1000,
     .params = &(const toy_params_t){.x = {PARITY_VALS_NORMAL, 1}}},
    {.name = "long", .summary = "long rows of gradient-scale values, D=20011", .n = 32, .d = 20011,
     .params = &(const toy_params_t){.x = {PARITY_VALS_GRADSCALE, 1}}},
};

static const parity_workload_t TOY_BASELINES[] = {
    {.name = "sol-execbench", .summary = "randn", .n = 64, .d = 512,
     .params = &(const toy_params_t){.x = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench", .summary = "torch.rand", .n = 64, .d = 512,
     .params = &(const toy_params_t){.x = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close", .summary = "small randn", .n = 16, .d = 128,
     .params = &(const toy_params_t){.x = {PARITY_VALS_NORMAL, 1}}},
};

/* The cost model: read x, write y; D - 1 additions per row. */
static void toy_cost_fn(double n, double d, double v, double bi, double bo,
                        const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)v;
    (void)call;
    c->bytes_read = n * d * bi;
    c->bytes_written = n * bo;
    c->flops = n * (d - 1);
    snprintf(c->formula, sizeof c->formula, "read x N*D*%g B; write y N*%g B; flops N*(D-1)", bi, bo);
}
const parity_cost_model_t parity_cost_toy_rowsum = {toy_cost_fn, 0, 0, 0, 1, -1, -1, 0};

/* The catalog: an fp32 row sum (faithful), a bf16 accumulator and a dropped last term. */
static int toy_run(const parity_abi_call_t *call, int bf16_acc, int drop_last)
{
    const parity_abi_tensor_t *X = &call->inputs[0];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], d = X->shape[1];
    float *row = malloc((size_t)d * sizeof *row);
    if (!row) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, row);
        float s = 0;
        for (int64_t j = 0; j < d - drop_last; j++) s = bf16_acc ? parity_round_bf16(s + row[j]) : s + row[j];
        parity_put_f32(Y, i, s);
    }
    free(row);
    return PARITY_KERNEL_OK;
}
static int toy_fp32(const parity_abi_call_t *c) { return toy_run(c, 0, 0); }
static int toy_bf16(const parity_abi_call_t *c) { return toy_run(c, 1, 0); }
static int toy_drop(const parity_abi_call_t *c) { return toy_run(c, 0, 1); }

static const parity_abi_kernel_t TOY_CATALOG[] = {
    {sizeof(parity_abi_kernel_t), "fp32", "toy_rowsum", "fp32 sequential row sum", 0, PARITY_DT_BF16,
     PARITY_DT_F32, toy_fp32, "faithful"},
    {sizeof(parity_abi_kernel_t), "bf16_acc", "toy_rowsum", "row sum accumulated in bf16", 0,
     PARITY_DT_BF16, PARITY_DT_F32, toy_bf16, "unfaithful"},
    {sizeof(parity_abi_kernel_t), "drop_last", "toy_rowsum", "the last term of each row left out", 0,
     PARITY_DT_BF16, PARITY_DT_F32, toy_drop, "unfaithful"},
};
static const int TOY_CATALOG_COUNT = (int)(sizeof TOY_CATALOG / sizeof TOY_CATALOG[0]);

const parity_op_t parity_op_toy_rowsum = {
    .name = "toy_rowsum",
    .summary = "a made-up op: y (N) = the sum of each row of x (N,D)",
    .n_inputs = 1,
    .n_outputs = 1,
    .input_names = {"x"},
    .output_names = {"y"},
    .input_is_float = {1},
    .faithful_accumulator = "fp32",
    .error_model = "y[i]: k = D input terms, s_acc = sum |x_ij|",
    .presets = TOY_PRESETS,
    .n_presets = (int)(sizeof TOY_PRESETS / sizeof TOY_PRESETS[0]),
    .wl_family = &toy_family,
    .catalog = {{TOY_CATALOG, &TOY_CATALOG_COUNT}},
    .cost = &parity_cost_toy_rowsum,
    .baseline_workloads = TOY_BASELINES,
    .build = toy_build,
    .emulate = toy_emulate,
};

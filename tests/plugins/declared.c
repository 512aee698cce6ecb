/* A plugin that declares ops parity does not ship (op_abi.h) and kernels for them, for
 * tests/cli_declared_ops.sh and docs/custom-ops.md ("In C"):
 *   swiglu_fwd     y = silu(a) * b, elementwise: the empirical floor (its reference computes in
 *                  fp64 or fp32, as the call's tensors say)
 *   gemm_declared  C = A B, a multilinear reduction over K: the built-in error model (its
 *                  reference computes only in fp64)
 *   silu_sum_wrong s = sum_H silu(a), wrongly flagged PARITY_OP_MULTILINEAR: parity refuses it
 *   gather_declared y[n] = E[ids[n]]: token ids (uniform, Zipf and real-text workloads)
 * Kernels: faithful ones and known-bad ones (a bf16 intermediate, a bf16 accumulator, a dropped
 * K tail, a segfault, state kept across calls). Self-contained: only kernel_abi.h/op_abi.h. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parity/op_abi.h"

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) /* round to nearest even (finite inputs) */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float load(const parity_abi_tensor_t *t, int64_t i)
{
    return t->dtype == PARITY_DT_BF16 ? bf16_to_f32(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

static void put(parity_abi_tensor_t *t, int64_t i, float v)
{
    if (t->dtype == PARITY_DT_BF16) ((uint16_t *)t->data)[i] = f32_to_bf16(v);
    else ((float *)t->data)[i] = v;
}

static int64_t numel(const parity_abi_tensor_t *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* ---- swiglu_fwd -------------------------------------------------------------------------- */
static int swiglu_reference(const parity_abi_call_t *c)
{
    int64_t n = numel(&c->inputs[0]);
    if (c->inputs[0].dtype == PARITY_DT_F64) {
        const double *a = c->inputs[0].data, *b = c->inputs[1].data;
        double *y = c->outputs[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
        return PARITY_KERNEL_OK;
    }
    if (c->inputs[0].dtype == PARITY_DT_F32) { /* the same formula in fp32: the contract evaluation */
        const float *a = c->inputs[0].data, *b = c->inputs[1].data;
        float *y = c->outputs[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
        return PARITY_KERNEL_OK;
    }
    return PARITY_KERNEL_UNSUPPORTED;
}

static int swiglu_fp32(const parity_abi_call_t *c) /* x * sigmoid(x): another faithful formula */
{
    for (int64_t i = 0, n = numel(&c->inputs[0]); i < n; i++) {
        float a = load(&c->inputs[0], i), b = load(&c->inputs[1], i);
        put(&c->outputs[0], i, a * (1.0f / (1.0f + expf(-a))) * b);
    }
    return PARITY_KERNEL_OK;
}

static int swiglu_bf16_intermediate(const parity_abi_call_t *c) /* silu(a) stored in bf16, then x b */
{
    for (int64_t i = 0, n = numel(&c->inputs[0]); i < n; i++) {
        float a = load(&c->inputs[0], i), b = load(&c->inputs[1], i);
        put(&c->outputs[0], i, bf16_to_f32(f32_to_bf16(a / (1.0f + expf(-a)))) * b);
    }
    return PARITY_KERNEL_OK;
}

static int swiglu_segfault(const parity_abi_call_t *c)
{
    volatile int *p = NULL;
    (void)c;
    *p = 1;
    return PARITY_KERNEL_OK;
}

static int swiglu_stateful(const parity_abi_call_t *c) /* reuses the first call's silu: the decoy's */
{
    static float cache[1 << 20];
    static int have;
    int64_t n = numel(&c->inputs[0]);
    if (n > (1 << 20)) return PARITY_KERNEL_UNSUPPORTED;
    for (int64_t i = 0; i < n; i++) {
        float a = load(&c->inputs[0], i);
        if (!have) cache[i] = a / (1.0f + expf(-a));
        put(&c->outputs[0], i, cache[i] * load(&c->inputs[1], i));
    }
    have = 1;
    return PARITY_KERNEL_OK;
}

/* ---- gemm_declared ------------------------------------------------------------------------- */
static int gemm_reference(const parity_abi_call_t *c)
{
    if (c->inputs[0].dtype != PARITY_DT_F64) return PARITY_KERNEL_UNSUPPORTED; /* fp64 only */
    const double *A = c->inputs[0].data, *B = c->inputs[1].data;
    double *C = c->outputs[0].data;
    int64_t M = c->inputs[0].shape[0], K = c->inputs[0].shape[1], N = c->inputs[1].shape[1];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += A[m * K + k] * B[k * N + n];
            C[m * N + n] = s;
        }
    return PARITY_KERNEL_OK;
}

static int gemm_run(const parity_abi_call_t *c, int bf16_acc, int64_t drop)
{
    int64_t M = c->inputs[0].shape[0], K = c->inputs[0].shape[1], N = c->inputs[1].shape[1];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float s = 0;
            for (int64_t k = 0; k < K - drop; k++) {
                s += load(&c->inputs[0], m * K + k) * load(&c->inputs[1], k * N + n);
                if (bf16_acc) s = bf16_to_f32(f32_to_bf16(s));
            }
            put(&c->outputs[0], m * N + n, s);
        }
    return PARITY_KERNEL_OK;
}
static int gemm_fp32(const parity_abi_call_t *c) { return gemm_run(c, 0, 0); }
static int gemm_bf16_acc(const parity_abi_call_t *c) { return gemm_run(c, 1, 0); }
static int gemm_ktail_drop(const parity_abi_call_t *c) { return gemm_run(c, 0, 1); }

static int silu_sum_reference(const parity_abi_call_t *c)
{
    if (c->inputs[0].dtype != PARITY_DT_F64) return PARITY_KERNEL_UNSUPPORTED;
    const double *a = c->inputs[0].data;
    double *s = c->outputs[0].data;
    int64_t N = c->inputs[0].shape[0], H = c->inputs[0].shape[1];
    for (int64_t n = 0; n < N; n++) {
        s[n] = 0;
        for (int64_t h = 0; h < H; h++) s[n] += a[n * H + h] / (1.0 + exp(-a[n * H + h]));
    }
    return PARITY_KERNEL_OK;
}

static int silu_sum_fp32(const parity_abi_call_t *c)
{
    int64_t N = c->inputs[0].shape[0], H = c->inputs[0].shape[1];
    for (int64_t n = 0; n < N; n++) {
        float s = 0;
        for (int64_t h = 0; h < H; h++) {
            float a = load(&c->inputs[0], n * H + h);
            s += a / (1.0f + expf(-a));
        }
        put(&c->outputs[0], n, s);
    }
    return PARITY_KERNEL_OK;
}

/* ---- gather_declared: y[n, :] = E[ids[n], :], token ids with a vocabulary ---------------------- */
static int gather_reference(const parity_abi_call_t *c)
{
    const int64_t *ids = c->inputs[0].data;
    int64_t N = c->inputs[0].shape[0], D = c->inputs[1].shape[1];
    if (c->inputs[1].dtype == PARITY_DT_F64) {
        const double *E = c->inputs[1].data;
        double *y = c->outputs[0].data;
        for (int64_t n = 0; n < N; n++) memcpy(y + n * D, E + ids[n] * D, (size_t)D * sizeof *y);
        return PARITY_KERNEL_OK;
    }
    if (c->inputs[1].dtype != PARITY_DT_F32) return PARITY_KERNEL_UNSUPPORTED;
    const float *E = c->inputs[1].data;
    float *y = c->outputs[0].data;
    for (int64_t n = 0; n < N; n++) memcpy(y + n * D, E + ids[n] * D, (size_t)D * sizeof *y);
    return PARITY_KERNEL_OK;
}

static int gather_fp32(const parity_abi_call_t *c)
{
    const int64_t *ids = c->inputs[0].data;
    int64_t N = c->inputs[0].shape[0], D = c->inputs[1].shape[1];
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) put(&c->outputs[0], n * D + d, load(&c->inputs[1], ids[n] * D + d));
    return PARITY_KERNEL_OK;
}

/* ---- the declarations ---------------------------------------------------------------------- */
static const int64_t sz_n[] = {64, 1024}, sz_h[] = {256, 2048};
static const int64_t sz_m[] = {16}, sz_k[] = {512}, sz_nn[] = {8};

#define DIM(nm, arr) {sizeof(parity_abi_op_dim_t), nm, (int32_t)(sizeof arr / sizeof arr[0]), arr, 0}
static const parity_abi_op_dim_t swiglu_dims[] = {DIM("N", sz_n), DIM("H", sz_h)};
static const parity_abi_op_input_t swiglu_in[] = {
    {sizeof(parity_abi_op_input_t), "a", PARITY_ROLE_ACTIVATION, 2, {"N", "H"}, NULL},
    {sizeof(parity_abi_op_input_t), "b", PARITY_ROLE_ACTIVATION, 2, {"N", "H"}, NULL}};
static const parity_abi_op_output_t swiglu_out[] = {{sizeof(parity_abi_op_output_t), "y", 2, {"N", "H"}, 0, {NULL}}};

static const parity_abi_op_dim_t gemm_dims[] = {DIM("M", sz_m), DIM("K", sz_k), DIM("N", sz_nn)};
static const parity_abi_op_input_t gemm_in[] = {
    {sizeof(parity_abi_op_input_t), "A", PARITY_ROLE_ACTIVATION, 2, {"M", "K"}, NULL},
    {sizeof(parity_abi_op_input_t), "B", PARITY_ROLE_WEIGHT, 2, {"K", "N"}, NULL}};
static const parity_abi_op_output_t gemm_out[] = {{sizeof(parity_abi_op_output_t), "C", 2, {"M", "N"}, 1, {"K"}}};

static const int64_t sz_gn[] = {4096}, sz_gv[] = {1024}, sz_gd[] = {8};
static const parity_abi_op_dim_t gather_dims[] = {DIM("N", sz_gn), DIM("V", sz_gv), DIM("D", sz_gd)};
static const parity_abi_op_input_t gather_in[] = {
    {sizeof(parity_abi_op_input_t), "ids", PARITY_ROLE_TOKEN_IDS, 1, {"N"}, "V"},
    {sizeof(parity_abi_op_input_t), "E", PARITY_ROLE_WEIGHT, 2, {"V", "D"}, NULL}};
static const parity_abi_op_output_t gather_out[] = {{sizeof(parity_abi_op_output_t), "y", 2, {"N", "D"}, 0, {NULL}}};

static const parity_abi_op_output_t silu_sum_out[] = {{sizeof(parity_abi_op_output_t), "s", 1, {"N"}, 1, {"H"}}};

static const parity_abi_op_decl_t ops[] = {
    {sizeof(parity_abi_op_decl_t), "swiglu_fwd", "y = silu(a) * b (fused SwiGLU forward)", 0, 2, swiglu_dims, 2,
     swiglu_in, 1, swiglu_out, 0, NULL, NULL, swiglu_reference},
    {sizeof(parity_abi_op_decl_t), "gemm_declared", "C = A B, declared: a multilinear reduction over K",
     PARITY_OP_MULTILINEAR, 3, gemm_dims, 2, gemm_in, 1, gemm_out, 0, NULL, NULL, gemm_reference},
    {sizeof(parity_abi_op_decl_t), "silu_sum_wrong", "sum_H silu(a), wrongly declared multilinear",
     PARITY_OP_MULTILINEAR, 2, swiglu_dims, 1, swiglu_in, 1, silu_sum_out, 0, NULL, NULL, silu_sum_reference},
    {sizeof(parity_abi_op_decl_t), "gather_declared", "y[n] = E[ids[n]] (an embedding lookup: token-id workloads)",
     0, 3, gather_dims, 2, gather_in, 1, gather_out, 0, NULL, NULL, gather_reference}};
static const parity_abi_op_table_t table = {PARITY_OP_ABI_VERSION, sizeof(parity_abi_op_table_t), 4, ops};

#define K(nm, op, desc, in, out, fn) {sizeof(parity_abi_kernel_t), nm, op, desc, 0, in, out, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("fp32", "swiglu_fwd", "fp32, x * sigmoid(x)", PARITY_DT_F32, PARITY_DT_F32, swiglu_fp32),
    K("bf16", "swiglu_fwd", "bf16 in and out, fp32 math", PARITY_DT_BF16, PARITY_DT_BF16, swiglu_fp32),
    K("bf16_intermediate", "swiglu_fwd", "silu(a) rounded to bf16 before x b (the unfused path)", PARITY_DT_BF16,
      PARITY_DT_F32, swiglu_bf16_intermediate),
    K("segfault", "swiglu_fwd", "writes through NULL", PARITY_DT_F32, PARITY_DT_F32, swiglu_segfault),
    K("stateful", "swiglu_fwd", "keeps the first call's silu(a)", PARITY_DT_F32, PARITY_DT_F32, swiglu_stateful),
    K("fp32", "gemm_declared", "fp32 sequential accumulator", PARITY_DT_BF16, PARITY_DT_F32, gemm_fp32),
    K("bf16_acc", "gemm_declared", "bf16 accumulator", PARITY_DT_BF16, PARITY_DT_F32, gemm_bf16_acc),
    K("ktail_drop", "gemm_declared", "drops the last K index", PARITY_DT_BF16, PARITY_DT_F32, gemm_ktail_drop),
    K("fp32", "silu_sum_wrong", "fp32 sequential", PARITY_DT_F32, PARITY_DT_F32, silu_sum_fp32),
    K("fp32", "gather_declared", "row copy", PARITY_DT_F32, PARITY_DT_F32, gather_fp32)};
static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t), "declared",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_op_table_t *parity_op_entry(void) { return &table; }
const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

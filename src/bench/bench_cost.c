/* Cost models: per op, the bytes that must move and the floating-point operations that must
 * happen for one invocation at a given shape. They are lower bounds on work (compulsory traffic,
 * the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak are lower bounds on time: the speed of light. docs/bench.md derives each line.
 * Deliberately not here: the ceilings (bench_ceil.c) and timing (bench.c). */
#include "parity/bench.h"

#include <stdio.h>
#include <string.h>

#include "parity/tensor.h"

/* N tokens (rows), D hidden size, V vocabulary; bi / bo bytes per floating-point input /
 * output element. Ids are int32 (4 bytes). */
typedef void (*cost_fn)(double n, double d, double v, double bi, double bo, parity_cost_t *c);

/* Fused RMSNorm backward + embedding-gradient scatter-add (ops/embedding/embedding.c):
 * reads dy (N,D), x (N,D), gamma (D), ids (N); writes dE (V,D) -- every row, zero rows too --
 * and dgamma (D). Per token row, reusing g*dy and xhat:
 *   sum x^2: 2D; r = 1/sqrt(ss/D + eps): 4; c = sum(g*dy*xhat)/D with xhat = x*r: 4D + 1;
 *   dx = r*(g*dy - xhat*c): 3D; dgamma += dy*xhat: 2D; dE[id] += dx: D.  Total 12D + 5. */
static void cost_fused(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    c->bytes_read = 2 * n * d * bi + d * bi + 4 * n;
    c->bytes_written = v * d * bo + d * bo;
    c->flops = n * (12 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read dy,x 2*N*D*%g B + gamma D*%g B + ids 4N B; write dE V*D*%g B + dgamma D*%g B; "
             "flops N*(12D+5)", bi, bi, bo, bo);
}

/* Embedding gradient: reads dY (N,D), ids (N); writes dE (V,D); one add per dY element. */
static void cost_ebwd(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    c->bytes_read = n * d * bi + 4 * n;
    c->bytes_written = v * d * bo;
    c->flops = n * d;
    snprintf(c->formula, sizeof c->formula,
             "read dY N*D*%g B + ids 4N B; write dE V*D*%g B; flops N*D", bi, bo);
}

/* Embedding lookup: reads ids and at most min(N, V) distinct rows of E (repeated ids may hit in
 * cache, so only distinct rows are compulsory); writes Y (N,D). No arithmetic. */
static void cost_efwd(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    double rows = n < v ? n : v;
    c->bytes_read = rows * d * bi + 4 * n;
    c->bytes_written = n * d * bo;
    c->flops = 0;
    snprintf(c->formula, sizeof c->formula,
             "read min(N,V) rows of E min(N,V)*D*%g B + ids 4N B; write Y N*D*%g B; flops 0", bi,
             bo);
}

/* RMSNorm forward: reads x (N,D), gamma (D); writes y (N,D).
 * Per row: sum x^2: 2D; r: 4; y = (x*r)*g: 2D.  Total 4D + 4. */
static void cost_rfwd(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    (void)v;
    c->bytes_read = n * d * bi + d * bi;
    c->bytes_written = n * d * bo;
    c->flops = n * (4 * d + 4);
    snprintf(c->formula, sizeof c->formula,
             "read x N*D*%g B + gamma D*%g B; write y N*D*%g B; flops N*(4D+4)", bi, bi, bo);
}

/* RMSNorm backward: the fused op without the scatter: reads dy, x (N,D), gamma (D); writes dx
 * (N,D), dgamma (D); 11D + 5 per row. */
static void cost_rbwd(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    (void)v;
    c->bytes_read = 2 * n * d * bi + d * bi;
    c->bytes_written = n * d * bo + d * bo;
    c->flops = n * (11 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read dy,x 2*N*D*%g B + gamma D*%g B; write dx N*D*%g B + dgamma D*%g B; "
             "flops N*(11D+5)", bi, bi, bo, bo);
}

/* log_softmax (ops/log_softmax/log_softmax.c): reads logits (N,V), writes logprobs (N,V); here d is V.
 * Per element: the max (1 compare), x - m (1), exp (1: a transcendental counts one, a lower
 * bound on its real cost), the sum (1), y = (x - m) - L (1); per row log S (1). 5V + 1. */
static void cost_lsm(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    (void)v;
    c->bytes_read = n * d * bi;
    c->bytes_written = n * d * bo;
    c->flops = n * (5 * d + 1);
    snprintf(c->formula, sizeof c->formula,
             "read logits N*V*%g B; write logprobs N*V*%g B; flops N*(5V+1)", bi, bo);
}

/* Fused cross-entropy forward + backward: reads logits (N,V) and targets (N); writes loss (N)
 * and dlogits (N,V); here d is V. Per element: max, x - m, exp, sum, the scale by 1/S (5); per
 * row log S, 1/S, the loss L - (x_t - m) (2 flops) and the -1 at the target: 5V + 5. */
static void cost_ce(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    (void)v;
    c->bytes_read = n * d * bi + 4 * n;
    c->bytes_written = n * d * bo + n * bo;
    c->flops = n * (5 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read logits N*V*%g B + targets 4N B; write dlogits N*V*%g B + loss N*%g B; "
             "flops N*(5V+5)", bi, bo, bo);
}

/* GEMM (ops/gemm/gemm.c): C (M,N) = A (M,K) . B (K,N); here n = M, d = K, v = N. Each input read
 * once, C written once, one multiply and one add per product: 2MNK (the faithful computation
 * has no reusable products). */
static void cost_gemm(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    c->bytes_read = (n * d + d * v) * bi;
    c->bytes_written = n * v * bo;
    c->flops = 2 * n * d * v;
    snprintf(c->formula, sizeof c->formula,
             "read A M*K*%g B + B K*N*%g B; write C M*N*%g B; flops 2*M*N*K", bi, bi, bo);
}

/* Linear-layer backward (ops/gemm/gemm.c): X (M,K), W (K,N), dY (M,N) -> dX (M,K) = dY.W^T and
 * dW (K,N) = X^T.dY; n = M tokens, d = K, v = N. Two GEMMs of 2MNK each. */
static void cost_gemm_bwd(double n, double d, double v, double bi, double bo, parity_cost_t *c)
{
    c->bytes_read = (n * d + d * v + n * v) * bi;
    c->bytes_written = (n * d + d * v) * bo;
    c->flops = 4 * n * d * v;
    snprintf(c->formula, sizeof c->formula,
             "read X M*K*%g B + W K*N*%g B + dY M*N*%g B; write dX M*K*%g B + dW K*N*%g B; "
             "flops 4*M*N*K", bi, bi, bi, bo, bo);
}

/* Where N, D and V live in an op's call: N = shape[0] of input n_in, D = shape[1] of input d_in,
 * V = shape[v_axis] of output v_out or input v_in (-1: none). */
typedef struct {
    const char *op;
    cost_fn fn;
    int n_in, d_in, v_in, v_out;
    int v_axis;
} cost_entry_t;

static const cost_entry_t COSTS[] = {
    {"embedding_rmsnorm_bwd", cost_fused, 0, 0, -1, 0, 0},
    {"embedding_bwd", cost_ebwd, 0, 0, -1, 0, 0},
    {"embedding_fwd", cost_efwd, 1, 0, 0, -1, 0},
    {"rmsnorm_fwd", cost_rfwd, 0, 0, -1, -1, 0},
    {"rmsnorm_bwd", cost_rbwd, 0, 0, -1, -1, 0},
    {"log_softmax", cost_lsm, 0, 0, -1, -1, 0},   /* d = V (the logits' columns) */
    {"cross_entropy", cost_ce, 0, 0, -1, -1, 0},
    {"gemm", cost_gemm, 0, 0, 1, -1, 1},           /* M, K from A; N = B's columns */
    {"gemm_bwd", cost_gemm_bwd, 0, 0, 1, -1, 1},   /* M, K from X; N = W's columns */
};

static const cost_entry_t *find_cost(const char *op)
{
    for (size_t i = 0; op && i < sizeof COSTS / sizeof COSTS[0]; i++)
        if (strcmp(COSTS[i].op, op) == 0) return &COSTS[i];
    return NULL;
}

parity_status_t parity_bench_cost_shape(const char *op, int64_t n, int64_t d, int64_t v,
                                        parity_dtype_t in_dt, parity_dtype_t out_dt,
                                        parity_cost_t *out)
{
    if (!op || !out || n < 0 || d < 0 || v < 0) return PARITY_E_INVALID;
    const cost_entry_t *e = find_cost(op);
    if (!e) return PARITY_E_NOTFOUND;
    size_t bi = parity_dtype_size(in_dt), bo = parity_dtype_size(out_dt);
    if (bi == 0 || bo == 0) return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    e->fn((double)n, (double)d, (double)v, (double)bi, (double)bo, out);
    out->bytes = out->bytes_read + out->bytes_written;
    out->flop_dtype = "fp32";
    return PARITY_OK;
}

parity_status_t parity_bench_cost_call(const parity_abi_call_t *call, parity_cost_t *out)
{
    if (!call || !out || !call->op) return PARITY_E_INVALID;
    const cost_entry_t *e = find_cost(call->op);
    if (!e) return PARITY_E_NOTFOUND;
    if (e->n_in >= call->n_inputs || e->d_in >= call->n_inputs || e->v_in >= call->n_inputs ||
        e->v_out >= call->n_outputs || call->n_outputs < 1)
        return PARITY_E_INVALID;
    const parity_abi_tensor_t *tn = &call->inputs[e->n_in], *td = &call->inputs[e->d_in];
    if (tn->ndim < 1 || td->ndim < 2) return PARITY_E_INVALID;
    int64_t n = tn->shape[0], d = td->shape[1], v = 0;
    if (e->v_out >= 0 && call->outputs[e->v_out].ndim > e->v_axis)
        v = call->outputs[e->v_out].shape[e->v_axis];
    if (e->v_in >= 0 && call->inputs[e->v_in].ndim > e->v_axis) v = call->inputs[e->v_in].shape[e->v_axis];
    /* The floating-point input dtype is the D-carrying input's; the output's is output 0's. */
    return parity_bench_cost_shape(call->op, n, d, v, (parity_dtype_t)td->dtype,
                                   (parity_dtype_t)call->outputs[0].dtype, out);
}

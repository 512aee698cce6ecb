/* Cost models of the gemm family's ops (gemm, gemm_bwd): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* GEMM (ops/gemm/gemm.c): C (M,N) = A (M,K) . B (K,N); here n = M, d = K, v = N. Each input read
 * once, C written once, one multiply and one add per product: 2MNK (the faithful computation
 * has no reusable products). */
static void cost_gemm(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    c->bytes_read = (n * d + d * v) * bi;
    c->bytes_written = n * v * bo;
    c->flops = 2 * n * d * v;
    snprintf(c->formula, sizeof c->formula,
             "read A M*K*%g B + B K*N*%g B; write C M*N*%g B; flops 2*M*N*K", bi, bi, bo);
}

/* Linear-layer backward (ops/gemm/gemm.c): X (M,K), W (K,N), dY (M,N) -> dX (M,K) = dY.W^T and
 * dW (K,N) = X^T.dY; n = M tokens, d = K, v = N. Two GEMMs of 2MNK each. */
static void cost_gemm_bwd(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    c->bytes_read = (n * d + d * v + n * v) * bi;
    c->bytes_written = (n * d + d * v) * bo;
    c->flops = 4 * n * d * v;
    snprintf(c->formula, sizeof c->formula,
             "read X M*K*%g B + W K*N*%g B + dY M*N*%g B; write dX M*K*%g B + dW K*N*%g B; "
             "flops 4*M*N*K", bi, bi, bi, bo, bo);
}

const parity_cost_model_t parity_cost_gemm = {cost_gemm, 0, 0, 0, 1, 1, -1, 1};
const parity_cost_model_t parity_cost_gemm_bwd = {cost_gemm_bwd, 0, 0, 0, 1, 1, -1, 1};

/* Cost models of the rmsnorm family's ops (rmsnorm_fwd, rmsnorm_bwd): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* RMSNorm forward: reads x (N,D), gamma (D); writes y (N,D).
 * Per row: sum x^2: 2D; r: 4; y = (x*r)*g: 2D.  Total 4D + 4. */
static void cost_rfwd(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    (void)v;
    c->bytes_read = n * d * bi + d * bi;
    c->bytes_written = n * d * bo;
    c->flops = n * (4 * d + 4);
    snprintf(c->formula, sizeof c->formula,
             "read x N*D*%g B + gamma D*%g B; write y N*D*%g B; flops N*(4D+4)", bi, bi, bo);
}

/* RMSNorm backward: the fused op without the scatter: reads dy, x (N,D), gamma (D); writes dx
 * (N,D), dgamma (D); 11D + 5 per row. */
static void cost_rbwd(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    (void)v;
    c->bytes_read = 2 * n * d * bi + d * bi;
    c->bytes_written = n * d * bo + d * bo;
    c->flops = n * (11 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read dy,x 2*N*D*%g B + gamma D*%g B; write dx N*D*%g B + dgamma D*%g B; "
             "flops N*(11D+5)", bi, bi, bo, bo);
}

const parity_cost_model_t parity_cost_rmsnorm_fwd = {cost_rfwd, 0, 0, 0, 1, -1, -1, 0};
const parity_cost_model_t parity_cost_rmsnorm_bwd = {cost_rbwd, 0, 0, 0, 1, -1, -1, 0};

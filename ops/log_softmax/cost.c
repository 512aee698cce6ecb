/* Cost models of the log_softmax family's ops (log_softmax, cross_entropy): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* log_softmax (ops/log_softmax/log_softmax.c): reads logits (N,V), writes logprobs (N,V); here d is V.
 * Per element: the max (1 compare), x - m (1), exp (1: a transcendental counts one, a lower
 * bound on its real cost), the sum (1), y = (x - m) - L (1); per row log S (1). 5V + 1. */
static void cost_lsm(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
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
static void cost_ce(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    (void)v;
    c->bytes_read = n * d * bi + 4 * n;
    c->bytes_written = n * d * bo + n * bo;
    c->flops = n * (5 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read logits N*V*%g B + targets 4N B; write dlogits N*V*%g B + loss N*%g B; "
             "flops N*(5V+5)", bi, bo, bo);
}

const parity_cost_model_t parity_cost_log_softmax = {cost_lsm, 0, 0, 0, 1, -1, -1, 0};
const parity_cost_model_t parity_cost_cross_entropy = {cost_ce, 0, 0, 0, 1, -1, -1, 0};

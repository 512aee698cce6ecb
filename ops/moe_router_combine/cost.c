/* Cost models of the moe_router_combine family's ops (moe_router_combine, moe_router_combine_bwd): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* MoE router + combine (ops/moe_router_combine/moe_router_combine.c): router_logits (N,E),
 * expert_out (N,E,D) -> out (N,D), gates (N,E); the workload's n = N, d = D, v = E, k the call's
 * attribute (without a call, k = 1: a lower bound). Compulsory reads: the logits and only the k
 * selected experts' rows (a faithful kernel need not touch the others). Per token: the softmax
 * over E (max, x - m, exp, sum, divide: 5E), renormalisation over the k (2k), the combine
 * sum_j w_j y_j (2kD); the top-k selection is comparisons, not counted. */
static void cost_mrc(double n, double d, double v, double bi, double bo,
                     const parity_abi_call_t *call, parity_cost_t *c)
{
    double k = call ? parity_call_attr(call, "k", 1) : 1;
    c->bytes_read = n * v * bi + n * k * d * bi;
    c->bytes_written = n * d * bo + n * v * bo;
    c->flops = n * (5 * v + 2 * k + 2 * k * d);
    snprintf(c->formula, sizeof c->formula,
             "read logits N*E*%g B + k=%g selected expert rows N*k*D*%g B; write out N*D*%g B + "
             "gates N*E*%g B; flops N*(5E+2k+2kD)", bi, k, bi, bo, bo);
}

/* Its backward (ops/moe_router_combine/moe_router_combine_bwd.c): router_logits (N,E),
 * expert_out (N,E,D), dout (N,D) -> d_expert_out (N,E,D, every row written, zeros where
 * unselected), d_logits (N,E); n = N, d = D, v = E, k as for the forward. Per token: the forward
 * softmax and renormalisation recomputed (5E + 2k), dw_j = dout.y_j (2kD), d_expert_out_j =
 * w_j dout (kD), the softmax backward g = sum_j w_j dw_j (2k) and dlogit_e = p_e (dp_e - g) (2E). */
static void cost_mrc_bwd(double n, double d, double v, double bi, double bo,
                         const parity_abi_call_t *call, parity_cost_t *c)
{
    double k = call ? parity_call_attr(call, "k", 1) : 1;
    c->bytes_read = n * v * bi + n * k * d * bi + n * d * bi;
    c->bytes_written = n * v * d * bo + n * v * bo;
    c->flops = n * (7 * v + 4 * k + 3 * k * d);
    snprintf(c->formula, sizeof c->formula,
             "read logits N*E*%g B + k=%g selected expert rows N*k*D*%g B + dout N*D*%g B; write "
             "d_expert_out N*E*D*%g B + d_logits N*E*%g B; flops N*(7E+4k+3kD)", bi, k, bi, bi,
             bo, bo);
}

const parity_cost_model_t parity_cost_moe_router_combine = {cost_mrc, 0, 0, 1, 2, 0, -1, 1};
const parity_cost_model_t parity_cost_moe_router_combine_bwd = {cost_mrc_bwd, 0, 0, 1, 2, 0, -1, 1};

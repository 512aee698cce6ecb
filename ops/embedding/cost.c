/* Cost models of the embedding family's ops (embedding_rmsnorm_bwd, embedding_bwd, embedding_fwd): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* Fused RMSNorm backward + embedding-gradient scatter-add (ops/embedding/embedding.c):
 * reads dy (N,D), x (N,D), gamma (D), ids (N); writes dE (V,D) -- every row, zero rows too --
 * and dgamma (D). Per token row, reusing g*dy and xhat:
 *   sum x^2: 2D; r = 1/sqrt(ss/D + eps): 4; c = sum(g*dy*xhat)/D with xhat = x*r: 4D + 1;
 *   dx = r*(g*dy - xhat*c): 3D; dgamma += dy*xhat: 2D; dE[id] += dx: D.  Total 12D + 5. */
static void cost_fused(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    c->bytes_read = 2 * n * d * bi + d * bi + 4 * n;
    c->bytes_written = v * d * bo + d * bo;
    c->flops = n * (12 * d + 5);
    snprintf(c->formula, sizeof c->formula,
             "read dy,x 2*N*D*%g B + gamma D*%g B + ids 4N B; write dE V*D*%g B + dgamma D*%g B; "
             "flops N*(12D+5)", bi, bi, bo, bo);
}

/* Embedding gradient: reads dY (N,D), ids (N); writes dE (V,D); one add per dY element. */
static void cost_ebwd(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    c->bytes_read = n * d * bi + 4 * n;
    c->bytes_written = v * d * bo;
    c->flops = n * d;
    snprintf(c->formula, sizeof c->formula,
             "read dY N*D*%g B + ids 4N B; write dE V*D*%g B; flops N*D", bi, bo);
}

/* Embedding lookup: reads ids and at most min(N, V) distinct rows of E (repeated ids may hit in
 * cache, so only distinct rows are compulsory); writes Y (N,D). No arithmetic. */
static void cost_efwd(double n, double d, double v, double bi, double bo,
                  const parity_abi_call_t *call, parity_cost_t *c)
{
    (void)call;
    double rows = n < v ? n : v;
    c->bytes_read = rows * d * bi + 4 * n;
    c->bytes_written = n * d * bo;
    c->flops = 0;
    snprintf(c->formula, sizeof c->formula,
             "read min(N,V) rows of E min(N,V)*D*%g B + ids 4N B; write Y N*D*%g B; flops 0", bi,
             bo);
}

const parity_cost_model_t parity_cost_embedding_rmsnorm_bwd = {cost_fused, 0, 0, 0, 1, -1, 0, 0};
const parity_cost_model_t parity_cost_embedding_bwd = {cost_ebwd, 0, 0, 0, 1, -1, 0, 0};
const parity_cost_model_t parity_cost_embedding_fwd = {cost_efwd, 1, 0, 0, 1, 0, -1, 0};

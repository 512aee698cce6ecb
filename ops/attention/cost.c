/* Cost models of the attention family's ops (attention_fwd, attention_bwd): the bytes that must move and the
 * floating-point operations that must happen for one invocation, lower bounds on work (compulsory
 * traffic, the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak bound the time from below: the speed of light of parity bench (src/bench/). N, D, V
 * are the op's workload dimensions; bi / bo bytes per floating-point input / output element; ids
 * are int32 (4 bytes). docs/bench.md lists the models. */
#include <stdio.h>

#include "ops/ops_impl.h"

/* Attention forward (ops/attention/attention.c): Q, K, V (H,T,Dh) -> O (H,T,Dh), LSE (H,T) fp32;
 * the workload's n = T, d = Dh, v = H. P = the (query, key) pairs attended: H*T*(T+1)/2 causal,
 * H*T^2 otherwise (the call's attribute "causal"; without a call, causal: the smaller, so the
 * model stays a lower bound). Per pair: the score q.k (2Dh), its scale (1), the running max (1),
 * exp (1), the sum (1), p*v (2Dh): 4Dh + 4; per query row: log S + m (2) and O / S (Dh). The
 * faithful (online) computation reuses nothing else. Q, K, V read once, O and LSE written once. */
static void cost_att(double n, double d, double v, double bi, double bo,
                     const parity_abi_call_t *call, parity_cost_t *c)
{
    int causal = call ? parity_call_attr(call, "causal", 1) != 0 : 1;
    double pairs = causal ? v * n * (n + 1) / 2 : v * n * n;
    c->bytes_read = 3 * v * n * d * bi;
    c->bytes_written = v * n * d * bo + v * n * 4;
    c->flops = pairs * (4 * d + 4) + v * n * (d + 2);
    snprintf(c->formula, sizeof c->formula,
             "read Q,K,V 3*H*T*Dh*%g B; write O H*T*Dh*%g B + LSE 4*H*T B; flops P*(4Dh+4) + "
             "H*T*(Dh+2), P = %s", bi, bo, causal ? "H*T*(T+1)/2 (causal)" : "H*T^2");
}

/* Attention backward (ops/attention/attention_bwd.c): Q, K, V, O, dO (H,T,Dh) and LSE (H,T) fp32
 * -> dQ, dK, dV (H,T,Dh); n = T, d = Dh, v = H; P pairs as for the forward. Per query row:
 * D_i = dO_i.O_i (2Dh). Per pair: the score recomputed (2Dh + 1), p = exp(s - LSE) (2),
 * dV += p dO (2Dh), dP = dO.v (2Dh), dS = p (dP - D_i) (2), dQ += dS k (2Dh), dK += dS q (2Dh):
 * 10Dh + 5. Every input read once, every gradient written once. */
static void cost_att_bwd(double n, double d, double v, double bi, double bo,
                         const parity_abi_call_t *call, parity_cost_t *c)
{
    int causal = call ? parity_call_attr(call, "causal", 1) != 0 : 1;
    double pairs = causal ? v * n * (n + 1) / 2 : v * n * n;
    c->bytes_read = 5 * v * n * d * bi + v * n * 4;
    c->bytes_written = 3 * v * n * d * bo;
    c->flops = pairs * (10 * d + 5) + v * n * 2 * d;
    snprintf(c->formula, sizeof c->formula,
             "read Q,K,V,O,dO 5*H*T*Dh*%g B + LSE 4*H*T B; write dQ,dK,dV 3*H*T*Dh*%g B; "
             "flops P*(10Dh+5) + 2*H*T*Dh, P = %s", bi, bo, causal ? "H*T*(T+1)/2 (causal)" : "H*T^2");
}

const parity_cost_model_t parity_cost_attention_fwd = {cost_att, 0, 1, 0, 2, 0, -1, 0};
const parity_cost_model_t parity_cost_attention_bwd = {cost_att_bwd, 0, 1, 0, 2, 0, -1, 0};

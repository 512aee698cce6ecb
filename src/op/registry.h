/* Internal: the registry of the ops parity ships, as the library reads it. The library's modules
 * (src/op, src/kernel, src/bench) know the ops only through these calls; the op folders implement
 * them (ops/registry.c, from ops/ops.def), so nothing under src/ includes ops/ (docs/architecture.md,
 * "Layers"). */
#ifndef PARITY_OP_REGISTRY_H
#define PARITY_OP_REGISTRY_H

#include "parity/bench.h"
#include "parity/kernel_abi.h"
#include "parity/op.h"

/* An op's cost model: bytes that must move and flops that must happen for one invocation
 * (src/bench/bench_cost.c applies it; docs/bench.md derives each). */
typedef struct parity_cost_model {
    /* The cost at the op's workload shape (n, d, v as its presets define them) with bi / bo bytes
     * per floating-point input / output element; attributes from `call`, or the defaults the model
     * documents when call is NULL. */
    void (*fn)(double n, double d, double v, double bi, double bo, const parity_abi_call_t *call,
               parity_cost_t *c);
    /* Where n, d, v live in a call: n = shape[n_axis] of input n_in, d = shape[d_axis] of input
     * d_in (whose dtype is the floating-point input dtype), v = shape[v_axis] of output v_out or
     * input v_in (-1: none). */
    int n_in, n_axis, d_in, d_axis, v_in, v_out, v_axis;
} parity_cost_model_t;

/* The ops, in ops/ops.def's order: parity_registry_op(i) for i in [0, parity_registry_op_count()).
 * Each op record carries the rest: its presets and their family (wl_family), its catalog tables
 * and its cost model (op->cost, a parity_cost_model_t). */
int parity_registry_op_count(void);
const parity_op_t *parity_registry_op(int i);

#endif

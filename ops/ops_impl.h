/* Internal: the ops parity ships (ops/ops.def): the op descriptors, their cost models and catalog
 * tables, declared once from the list; the families' shared pieces (ops/<family>/<family>.h) and
 * the helpers every catalog kernel uses (src/kernel/kernel_util.h). An op folder's files include
 * this header; docs/architecture.md says what goes where. */
#ifndef PARITY_OPS_IMPL_H
#define PARITY_OPS_IMPL_H

#include <stdint.h>

#include "parity/bench.h"
#include "parity/kernel_abi.h"
#include "parity/op.h"
#include "src/kernel/kernel_util.h"

/* An op's cost model: bytes that must move and flops that must happen for one invocation
 * (src/bench/bench_cost.c applies it; docs/bench.md derives each). */
typedef struct {
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

#define PARITY_OP(family, name)                                                                    \
    extern const parity_op_t parity_op_##name;                                                     \
    extern const parity_cost_model_t parity_cost_##name;
#define PARITY_CATALOG(family, name)                                                               \
    extern const parity_abi_kernel_t parity_catalog_##name[];                                      \
    extern const int parity_catalog_##name##_count;
#include "ops/ops.def"

#include "ops/attention/attention.h"
#include "ops/gemm/gemm.h"
#include "ops/log_softmax/log_softmax.h"
#include "ops/moe_router_combine/moe_router_combine.h"
#include "ops/rmsnorm/rmsnorm.h"

#endif

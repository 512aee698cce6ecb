/* Internal: the ops parity ships (ops/ops.def): the op records and their cost models, declared
 * once from the list; the shipped families' shared pieces (ops/<family>/<family>.h: their
 * workload parameter structs and catalog tables; a new family's files include its own header) and
 * the helpers every catalog kernel uses (src/kernel/kernel_util.h). An op folder's files include
 * this header; docs/architecture.md says what goes where. */
#ifndef PARITY_OPS_IMPL_H
#define PARITY_OPS_IMPL_H

#include <stdint.h>

#include "parity/bench.h"
#include "parity/kernel_abi.h"
#include "parity/op.h"
#include "src/kernel/kernel_util.h"
#include "src/op/registry.h"

/* parity_cost_model_t and the registry the library reads: src/op/registry.h. */

#define PARITY_OP(family, name)                                                                    \
    extern const parity_op_t parity_op_##name;                                                     \
    extern const parity_cost_model_t parity_cost_##name;
#include "ops/ops.def"

#include "ops/attention/attention.h"
#include "ops/gemm/gemm.h"
#include "ops/log_softmax/log_softmax.h"
#include "ops/moe_router_combine/moe_router_combine.h"
#include "ops/rmsnorm/rmsnorm.h"

#endif

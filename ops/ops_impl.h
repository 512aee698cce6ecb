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
#include "src/op/registry.h"

/* parity_cost_model_t and the registry the library reads: src/op/registry.h. */

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

/* The registry the library reads (src/op/registry.h), made from ops/ops.def: the one place above
 * the library that lists every op. Each op record carries the rest (its presets, catalog tables
 * and cost model), so an op is one folder and one PARITY_OP line. */
#include "ops/ops_impl.h"

static const parity_op_t *const OPS[] = {
#define PARITY_OP(family, name) &parity_op_##name,
#include "ops/ops.def"
};

int parity_registry_op_count(void) { return (int)(sizeof OPS / sizeof OPS[0]); }

const parity_op_t *parity_registry_op(int i)
{
    return i >= 0 && i < parity_registry_op_count() ? OPS[i] : NULL;
}

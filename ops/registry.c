/* The registry the library reads (src/op/registry.h), made from ops/ops.def: the one place above
 * the library that lists every op, its cost model and its catalog tables. */
#include "ops/ops_impl.h"

static const parity_op_t *const OPS[] = {
#define PARITY_OP(family, name) &parity_op_##name,
#include "ops/ops.def"
};

static const parity_cost_model_t *const COSTS[] = {
#define PARITY_OP(family, name) &parity_cost_##name,
#include "ops/ops.def"
};

static const struct {
    const parity_abi_kernel_t *k;
    const int *n;
} CATALOGS[] = {
#define PARITY_CATALOG(family, name) {parity_catalog_##name, &parity_catalog_##name##_count},
#include "ops/ops.def"
};

int parity_registry_op_count(void) { return (int)(sizeof OPS / sizeof OPS[0]); }

const parity_op_t *parity_registry_op(int i)
{
    return i >= 0 && i < parity_registry_op_count() ? OPS[i] : NULL;
}

const parity_cost_model_t *parity_registry_cost(int i)
{
    return i >= 0 && i < parity_registry_op_count() ? COSTS[i] : NULL;
}

int parity_registry_catalog_count(void) { return (int)(sizeof CATALOGS / sizeof CATALOGS[0]); }

const parity_abi_kernel_t *parity_registry_catalog(int t, int *n)
{
    if (t < 0 || t >= parity_registry_catalog_count()) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = *CATALOGS[t].n;
    return CATALOGS[t].k;
}

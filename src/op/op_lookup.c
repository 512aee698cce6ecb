/* Finding the ops parity ships, by index or by name (parity/op.h), through the registry that
 * ops/registry.c implements. Split from op.c: the ops call op.c's helpers, so op.c must not call
 * the registry that calls the ops; this file is above both. */
#include "parity/op.h"

#include <string.h>

#include "src/op/registry.h"

/* The registry, in ops/ops.def's order (ops/registry.c). */
int parity_op_count(void) { return parity_registry_op_count(); }

const parity_op_t *parity_op_at(int i)
{
    return parity_registry_op(i);
}

const parity_op_t *parity_op_find(const char *name)
{
    for (int i = 0; i < parity_op_count(); i++)
        if (strcmp(parity_registry_op(i)->name, name) == 0) return parity_registry_op(i);
    return NULL;
}

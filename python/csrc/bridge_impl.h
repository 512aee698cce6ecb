/* Internals shared by the Python bridge's files: bridge.c (ops, cases, the judge, reports,
 * formats) and bridge_decl.c (the declared ops of the Python package, parity.Op). Not installed. */
#ifndef PARITY_PY_BRIDGE_IMPL_H
#define PARITY_PY_BRIDGE_IMPL_H

#include "parity/op.h"

#define EXPORT __attribute__((visibility("default")))

/* The op registered under name: a declared op's key ("NAME#declN", bridge_decl.c) first, else a
 * built-in op's name; NULL when neither. */
const parity_op_t *py_op_find(const char *name);
/* 1 when op is the descriptor of a declared op of the Python package (bridge_decl.c). */
int py_op_is_decl(const parity_op_t *op);

#endif

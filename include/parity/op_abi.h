/* Declared ops: the versioned extension of the plugin ABI (kernel_abi.h) by which a C plugin
 * declares an op parity does not ship -- named dimensions, inputs with a role each, outputs,
 * scalar attributes, an fp64 reference and optionally the reductions -- so that
 * `parity check --op-plugin FILE.so` judges kernels of that op (docs/custom-ops.md, "In C").
 * A plugin that declares ops exports, beside (or instead of) parity_plugin_entry,
 *     const parity_abi_op_table_t *parity_op_entry(void);
 * Kernels of a declared op are ordinary parity_abi_kernel_t entries (kernel_abi.h) whose `op`
 * names the declared op; they may live in the same shared object or in another one.
 * Compatibility rules as kernel_abi.h: op_abi_version says which version of this header the
 * plugin was built against; every struct starts with struct_size, fields are only appended,
 * enum values only appended. Self-contained but for kernel_abi.h; C89/C++ compatible. */
#ifndef PARITY_OP_ABI_H
#define PARITY_OP_ABI_H

#include <stdint.h>

#include "parity/kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_OP_ABI_VERSION 1u
#define PARITY_OP_ENTRY_SYMBOL "parity_op_entry"

/* What an input's values look like: parity builds each workload's values from the role
 * (docs/custom-ops.md, "Roles"; the same roles as parity.Input). Append only. */
typedef enum {
    PARITY_ROLE_TOKEN_IDS = 0,   /* int64 ids in [0, size of the `vocab` dimension) */
    PARITY_ROLE_ACTIVATION = 1,  /* N(0,1); outlier channels in the outlier-ch workload */
    PARITY_ROLE_GRADIENT = 2,    /* N(0,1) x 10^U(-6,-3) per row */
    PARITY_ROLE_WEIGHT = 3,      /* 0.02 N(0,1) */
    PARITY_ROLE_NORM_WEIGHT = 4, /* 1 + 0.1 N(0,1) */
    PARITY_ROLE_LOGITS = 5,      /* 3 N(0,1), two confident tokens per row at 15 + N(0,1) */
    PARITY_ROLE_MASK = 6         /* 0/1, P(1) = 0.9, in the float input dtype */
} parity_role_t;

/* One named dimension and the sizes it takes: sizes[0] makes the base workloads, the largest a
 * production-sized one (when it differs). fixed: the "odd" workload leaves it alone (an even
 * rotary head dimension). */
typedef struct {
    uint32_t struct_size;
    const char *name;
    int32_t n_sizes;
    const int64_t *sizes;
    int32_t fixed;
} parity_abi_op_dim_t;

typedef struct {
    uint32_t struct_size;
    const char *name;
    int32_t role;                          /* parity_role_t */
    int32_t ndim;                          /* 0..PARITY_ABI_MAX_DIMS */
    const char *dims[PARITY_ABI_MAX_DIMS]; /* dimension names, outermost first */
    const char *vocab;                     /* token ids: the dimension bounding them (NULL: "V") */
} parity_abi_op_input_t;

typedef struct {
    uint32_t struct_size;
    const char *name;
    int32_t ndim;
    const char *dims[PARITY_ABI_MAX_DIMS];
    /* The input dimensions summed into this output (none: n_reduced 0). With
     * PARITY_OP_MULTILINEAR they select the built-in error model; otherwise they widen the
     * empirical floor by sqrt(k) (docs/custom-ops.md, "Tolerances"). */
    int32_t n_reduced;
    const char *reduced[PARITY_ABI_MAX_DIMS];
} parity_abi_op_output_t;

/* Op flags. */
#define PARITY_OP_MULTILINEAR 0x1u /* linear in each float input separately (GEMM, einsums):
                                      parity verifies it on every workload */

/* The reference. It is called with a parity_abi_call_t (kernel_abi.h) whose float inputs are
 * all F64 or all F32 (token ids I64) and whose outputs have the inputs' float dtype; it computes
 * in that dtype. F64 is the reference; F32 is the contract evaluation the empirical floor
 * measures (the reference's own formula in fp32). A reference that computes only in F64 returns
 * PARITY_KERNEL_UNSUPPORTED for F32: then every output needs a multilinear reduction (whose
 * error model needs no contract evaluation). Must not keep state between calls. */
typedef struct {
    uint32_t struct_size;
    const char *name;        /* [A-Za-z0-9_.-]+, distinct from the built-in ops' names */
    const char *description; /* one line */
    uint32_t flags;          /* PARITY_OP_* */
    int32_t n_dims;
    const parity_abi_op_dim_t *dims;
    int32_t n_inputs;
    const parity_abi_op_input_t *inputs;
    int32_t n_outputs;
    const parity_abi_op_output_t *outputs;
    int32_t n_attrs; /* scalar attributes passed to the reference and to kernels, by name */
    const char *const *attr_names;
    const double *attr_values;
    int (*reference)(const parity_abi_call_t *call); /* PARITY_KERNEL_OK / _UNSUPPORTED / _ERROR */
} parity_abi_op_decl_t;

typedef struct {
    uint32_t op_abi_version; /* PARITY_OP_ABI_VERSION the plugin was compiled against */
    uint32_t struct_size;    /* sizeof(parity_abi_op_table_t) */
    int32_t n_ops;
    const parity_abi_op_decl_t *ops; /* n_ops entries, ops[0].struct_size bytes apart */
} parity_abi_op_table_t;

typedef const parity_abi_op_table_t *(*parity_op_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

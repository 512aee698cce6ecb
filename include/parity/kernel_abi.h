/* The versioned C ABI between parity and candidate kernels. A plugin (a shared object) exports
 *     const parity_abi_plugin_t *parity_plugin_entry(void);
 * returning a table of kernels. parity's built-in catalog uses the very same structs, so a
 * plugin kernel and a catalog kernel are judged by one code path.
 *
 * Compatibility rules: abi_version says which version of this header the plugin was built
 * against; struct_size lets either side add fields at the end without breaking the other (a
 * reader never touches a field beyond struct_size). Enum values are only ever appended.
 * This header is self-contained (no other parity header), C89/C++ compatible. */
#ifndef PARITY_KERNEL_ABI_H
#define PARITY_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_ABI_VERSION 1u
#define PARITY_ABI_MAX_DIMS 8
#define PARITY_PLUGIN_ENTRY_SYMBOL "parity_plugin_entry"

/* Element types. Values are part of the ABI: append only. */
typedef enum {
    PARITY_DT_F64 = 0,
    PARITY_DT_F32 = 1,
    PARITY_DT_BF16 = 2, /* stored as uint16 bit patterns */
    PARITY_DT_F16 = 3,  /* stored as uint16 bit patterns */
    PARITY_DT_I32 = 4,
    PARITY_DT_I64 = 5,
    PARITY_DT_U8 = 6,
    PARITY_DT_E4M3FN = 7, /* stored as uint8 bit patterns */
    PARITY_DT_E5M2 = 8
} parity_dtype_t;

/* A strided view of an n-dimensional array. strides are in elements, not bytes. */
typedef struct {
    void *data;
    int32_t dtype; /* parity_dtype_t */
    int32_t ndim;
    int64_t shape[PARITY_ABI_MAX_DIMS];
    int64_t strides[PARITY_ABI_MAX_DIMS];
    const char *name; /* the op's name for this argument, e.g. "dy", "dE" */
} parity_abi_tensor_t;

/* One invocation of a kernel. Inputs and outputs come in the order the op declares them
 * (`parity ops` lists them). Outputs must be fully written by the kernel: parity pre-fills them
 * with sentinels and never zeroes them for you. Inputs must not be modified. */
typedef struct {
    uint32_t abi_version; /* PARITY_ABI_VERSION of the harness */
    uint32_t struct_size; /* sizeof(parity_abi_call_t) of the harness */
    const char *op;       /* op name, e.g. "embedding_rmsnorm_bwd" */
    int32_t n_inputs;
    int32_t n_outputs;
    const parity_abi_tensor_t *inputs;
    parity_abi_tensor_t *outputs;
    /* Scalar attributes of the op (e.g. "eps"), by name. */
    int32_t n_attrs;
    const char *const *attr_names;
    const double *attr_values;
    uint64_t seed;     /* for kernels that use randomness (e.g. stochastic rounding) */
    int32_t n_threads; /* how many CPU threads the kernel may use (>= 1) */
} parity_abi_call_t;

/* Kernel flags. */
#define PARITY_KERNEL_NONDETERMINISTIC 0x1u /* results may differ bit-wise between runs */

/* Return codes of parity_abi_kernel_t.run. */
#define PARITY_KERNEL_OK 0
#define PARITY_KERNEL_UNSUPPORTED 1 /* this shape/dtype is not handled: verdict "unsupported" */
#define PARITY_KERNEL_ERROR 2       /* any other failure */

typedef struct {
    uint32_t struct_size;    /* sizeof(parity_abi_kernel_t) the plugin was built with */
    const char *name;        /* unique within the plugin, [A-Za-z0-9_.-]+ */
    const char *op;          /* the op it implements */
    const char *description; /* one line: what it does / which real bug it models */
    uint32_t flags;          /* PARITY_KERNEL_* */
    int32_t in_dtype;        /* dtype of the op's floating-point inputs (F32 or BF16, ...) */
    int32_t out_dtype;       /* dtype of the op's floating-point outputs */
    int (*run)(const parity_abi_call_t *call);
    /* Built-in catalog only (plugins leave NULL/0): the verdict the kernel is known to deserve,
     * "faithful" or "unfaithful". */
    const char *expected;
} parity_abi_kernel_t;

typedef struct {
    uint32_t abi_version; /* PARITY_ABI_VERSION the plugin was compiled against */
    uint32_t struct_size; /* sizeof(parity_abi_plugin_t) */
    const char *name;
    int32_t n_kernels;
    const parity_abi_kernel_t *kernels;
} parity_abi_plugin_t;

typedef const parity_abi_plugin_t *(*parity_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

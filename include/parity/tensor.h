/* Tensors: dtypes, strided views (parity_abi_tensor_t from kernel_abi.h) and owned buffers.
 * Owned buffers live in shared anonymous memory so that a kernel run in a child process writes
 * where the parent can read, and carry guard regions before and after the data, filled with a
 * known pattern, so a write out of bounds is detected after the run.
 * Deliberately not here: arithmetic, broadcasting, anything a kernel would do. */
#ifndef PARITY_TENSOR_H
#define PARITY_TENSOR_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/tensor.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/kernel_abi.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element; 0 for an unknown dtype. */
size_t parity_dtype_size(parity_dtype_t dt);
/* "f32", "bf16", ... (static); "?" for unknown. */
const char *parity_dtype_name(parity_dtype_t dt);
/* Parse "f32"/"fp32"/"float32", "bf16"/"bfloat16", "f16"/"fp16", "f64", "i32", "i64", ... */
parity_status_t parity_dtype_from_name(const char *name, parity_dtype_t *out);
/* 1 for floating-point dtypes. */
int parity_dtype_is_float(parity_dtype_t dt);

/* An owned, contiguous (row-major) tensor with guard regions. */
typedef struct {
    parity_abi_tensor_t view; /* view.data points into the mapping, after the front guard */
    void *map;                /* the whole mapping */
    size_t map_bytes;
    size_t nbytes;            /* data bytes */
    size_t guard_bytes;       /* bytes of guard before and after the data */
    char name[48];
} parity_tensor_t;

#define PARITY_GUARD_BYTES 4096
#define PARITY_GUARD_BYTE 0xA5

/* Allocate a zero-filled row-major tensor in shared memory with guards, its pages faulted in
 * (MADV_POPULATE_WRITE, advisory). name is copied.
 * Returns NULL on allocation failure or bad arguments. Free with parity_tensor_free (NULL ok). */
parity_tensor_t *parity_tensor_new(const char *name, parity_dtype_t dt, int ndim,
                                   const int64_t *shape);
void parity_tensor_free(parity_tensor_t *t);
/* A pooled buffer: t (NULL ok) re-shaped in place as (name, dt, shape) when its mapping is large
 * enough, else t freed and a new tensor returned whose pages are all faulted in at once
 * (MADV_POPULATE_WRITE). The data keeps whatever was there (callers prefill); guards are re-filled.
 * Returns NULL on bad arguments or allocation failure (t is then freed). Added for check's
 * buffer pools (docs/check-speed.md). */
parity_tensor_t *parity_tensor_reuse(parity_tensor_t *t, const char *name, parity_dtype_t dt,
                                     int ndim, const int64_t *shape);
int64_t parity_tensor_numel(const parity_abi_tensor_t *v);
/* 1 if both guard regions still hold PARITY_GUARD_BYTE everywhere. */
int parity_tensor_guards_ok(const parity_tensor_t *t);
/* Re-fill the guard regions. */
void parity_tensor_reset_guards(parity_tensor_t *t);
/* A 64-bit digest of the data bytes (for "did the kernel modify its inputs"): any changed bit
 * changes it, and so do two sign flips that FNV-1a over words (used before) cancelled; two
 * different buffers share a digest with probability about 2^-64. About memory speed. */
uint64_t parity_tensor_hash(const parity_tensor_t *t);

/* Element i (row-major logical index of a contiguous tensor) as an exact double. */
double parity_tensor_get(const parity_abi_tensor_t *v, int64_t i);
/* Store x rounded to the tensor's dtype (nearest-even for floats; truncation for ints). */
void parity_tensor_set(parity_abi_tensor_t *v, int64_t i, double x);
/* Fill every element with a sentinel: NaN for float dtypes (a quiet NaN bit pattern), -1 for
 * integers. */
void parity_tensor_fill_nan(parity_tensor_t *t);
/* x rounded to dtype (nearest-even, the dtype's default saturation); integers unchanged. */
double parity_dtype_round(parity_dtype_t dt, double x);
/* Convert a whole contiguous tensor to doubles (exact), out has numel entries. */
void parity_tensor_to_f64(const parity_abi_tensor_t *v, double *out);

#ifdef __cplusplus
}
#endif
#endif

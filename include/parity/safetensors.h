/* safetensors: a general reader and writer of the safetensors format (huggingface/safetensors:
 * 8-byte little-endian header length N, N bytes of JSON header, then the byte buffer). The
 * header is parsed with cJSON and every tensor's offsets are validated against the file size
 * before anything is read. Format notes and limits: docs/safetensors.md.
 * Deliberately not here: any interpretation of what the tensors mean (logprob.h does that). */
#ifndef PARITY_SAFETENSORS_H
#define PARITY_SAFETENSORS_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/safetensors.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Values are only ever appended. */
typedef enum {
    PARITY_SAFETENSORS_F64 = 0,
    PARITY_SAFETENSORS_F32 = 1,
    PARITY_SAFETENSORS_BF16 = 2,
    PARITY_SAFETENSORS_F16 = 3,
    PARITY_SAFETENSORS_I32 = 4,
    PARITY_SAFETENSORS_I64 = 5,
    PARITY_SAFETENSORS_U8 = 6,
    PARITY_SAFETENSORS_I8 = 7,
    PARITY_SAFETENSORS_BOOL = 8,
    PARITY_SAFETENSORS_I16 = 9
} parity_safetensors_dtype_t;

#define PARITY_SAFETENSORS_MAX_DIMS 8
/* The header may not exceed 100 MB (the limit of the reference implementation). */
#define PARITY_SAFETENSORS_MAX_HEADER ((uint64_t)100000000)

/* "F64", "BF16", ...; NULL for an unknown value. */
const char *parity_safetensors_dtype_name(parity_safetensors_dtype_t dt);
/* Bytes per element (1, 2, 4 or 8); 0 for an unknown value. */
size_t parity_safetensors_dtype_size(parity_safetensors_dtype_t dt);
/* Name -> dtype; PARITY_E_NOTFOUND for names this module does not handle. */
parity_status_t parity_safetensors_dtype_from_name(const char *name,
                                                   parity_safetensors_dtype_t *out);

/* One tensor of an open file. Owned by the file; valid until parity_safetensors_close. */
typedef struct {
    const char *name;
    parity_safetensors_dtype_t dtype;
    int ndim;                          /* 0 (a scalar) .. PARITY_SAFETENSORS_MAX_DIMS */
    uint64_t shape[PARITY_SAFETENSORS_MAX_DIMS];
    uint64_t numel;                    /* product of shape (1 for a scalar) */
    uint64_t offset;                   /* absolute byte offset of the data in the file */
    uint64_t nbytes;                   /* numel * dtype size (validated) */
} parity_safetensors_tensor_t;

typedef struct parity_safetensors_file parity_safetensors_file_t;

/* Open and validate a file: the header length against the file size, the JSON, every dtype,
 * shape (numel * size must not overflow and must equal end - begin), and data_offsets (inside
 * the byte buffer, non-overlapping). The file is mapped read-only; no tensor data is read.
 * On error *out is NULL and diag names the file, the field and the offset/expectation:
 * PARITY_E_IO (cannot open/map), PARITY_E_FORMAT (malformed), PARITY_E_NOMEM,
 * PARITY_E_INVALID (NULL path/out). Free with parity_safetensors_close. */
parity_status_t parity_safetensors_open(const char *path, parity_safetensors_file_t **out,
                                        parity_diag_t *diag);
/* The same over a caller's buffer, which must outlive the file object (not copied). `name`
 * is used in messages (may be NULL: "<memory>"). */
parity_status_t parity_safetensors_open_mem(const void *buf, size_t len, const char *name,
                                            parity_safetensors_file_t **out, parity_diag_t *diag);
void parity_safetensors_close(parity_safetensors_file_t *f); /* NULL is a no-op */

/* Tensors in header order (the JSON object order of the file). */
size_t parity_safetensors_count(const parity_safetensors_file_t *f);
const parity_safetensors_tensor_t *parity_safetensors_tensor(const parity_safetensors_file_t *f,
                                                             size_t i); /* NULL past end */
const parity_safetensors_tensor_t *parity_safetensors_find(const parity_safetensors_file_t *f,
                                                           const char *name); /* or NULL */
/* A string value of "__metadata__", or NULL. */
const char *parity_safetensors_metadata(const parity_safetensors_file_t *f, const char *key);
/* Number of metadata entries and the i-th (key, value); PARITY_E_INVALID past the end. */
size_t parity_safetensors_metadata_count(const parity_safetensors_file_t *f);
parity_status_t parity_safetensors_metadata_at(const parity_safetensors_file_t *f, size_t i,
                                               const char **key, const char **value);

/* A read-only view of the tensor's raw little-endian bytes inside the mapping (valid until
 * close). May be unaligned for its dtype: use memcpy or the read functions below. */
const void *parity_safetensors_view(const parity_safetensors_file_t *f,
                                    const parity_safetensors_tensor_t *t);
/* Copy raw bytes [byte_off, byte_off + n) of the tensor into dst (caller-owned). Reading past
 * the tensor's end is PARITY_E_INVALID. */
parity_status_t parity_safetensors_read_raw(const parity_safetensors_file_t *f,
                                            const parity_safetensors_tensor_t *t, uint64_t byte_off,
                                            void *dst, size_t n);
/* Convert elements [first, first + n) to double (integers exactly when |v| <= 2^53, bf16/f16
 * exactly, bool as 0/1). PARITY_E_INVALID for a range past the end or NULL dst with n > 0. */
parity_status_t parity_safetensors_read_f64(const parity_safetensors_file_t *f,
                                            const parity_safetensors_tensor_t *t, uint64_t first,
                                            size_t n, double *dst);
/* Convert integer (or bool) elements to int64. PARITY_E_INVALID for float dtypes. */
parity_status_t parity_safetensors_read_i64(const parity_safetensors_file_t *f,
                                            const parity_safetensors_tensor_t *t, uint64_t first,
                                            size_t n, int64_t *dst);
/* Decode one little-endian element of dtype dt at p (any alignment): floats exactly to double,
 * integers to double (exact when |v| <= 2^53), bool as 0/1. Shared by every reader of raw
 * tensor bytes (safetensors and npy). */
double parity_safetensors_decode_f64(parity_safetensors_dtype_t dt, const void *p);
/* Integer or bool element to int64 (bool as 0/1); -1 for a float dtype. */
int parity_safetensors_decode_i64(parity_safetensors_dtype_t dt, const void *p, int64_t *out);
/* Release the pages of [byte_off, byte_off + n) of a file-backed mapping from memory (they are
 * re-read on the next access): lets a streaming reader keep its resident set bounded. A no-op
 * for memory buffers. */
void parity_safetensors_release(const parity_safetensors_file_t *f, uint64_t byte_off, uint64_t n);

/* ------------------------------------------------------------------------------------------ */
/* Writing.                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* One tensor to write: data holds numel * size bytes, little-endian, row-major. */
typedef struct {
    const char *name;
    parity_safetensors_dtype_t dtype;
    int ndim;
    const uint64_t *shape;  /* ndim entries (NULL when ndim == 0) */
    const void *data;
} parity_safetensors_entry_t;

/* Write the tensors (in the given order, data packed in that order, each aligned to 8 bytes by
 * padding the header with spaces as the reference writer does) and optional metadata pairs
 * meta_kv[2*i], meta_kv[2*i+1] into path atomically: a temporary file next to it is written,
 * flushed and renamed over path. PARITY_E_INVALID for duplicate or empty names, NULL data with
 * numel > 0, ndim outside 0..8, or an unknown dtype; PARITY_E_IO when writing fails (the
 * temporary is removed and path is untouched). */
parity_status_t parity_safetensors_write(const char *path,
                                         const parity_safetensors_entry_t *entries, size_t n,
                                         const char *const *meta_kv, size_t nmeta,
                                         parity_diag_t *diag);

#ifdef __cplusplus
}
#endif

/* The names before issue #40 (parity/deprecated.h), for one release. */
#define PARITY_SAFETENSORS_H_DECLARED
#include "parity/deprecated.h"
#endif

/* The check's on-disk cache of noise floors (docs/check-speed.md): the floor of a workload is the
 * largest err/tol of the catalog's faithful fp32 variants on it, a function of the op, the
 * workload, the seed, the floor kernels and this build of parity only, so it is computed once and
 * kept. Deliberately not here: verdicts (a cached floor is printed, never judged against). */
#ifndef PARITY_CHECK_CACHE_H
#define PARITY_CHECK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "parity/op.h"

/* parity_check_cache_default_dir is public (verify.h). */

/* The full key of a floor: everything its value depends on, as text. The build of parity (its
 * version and a hash of the loaded file holding the catalog and the error model) is part of it,
 * so a rebuilt parity never reads an older build's floors. Returns 0, or -1 when the build
 * cannot be identified (then nothing may be cached). */
int check_floor_key(char *buf, size_t cap, const parity_op_t *op, const parity_workload_t *wl,
                    uint64_t seed, const parity_abi_kernel_t *const *floor_k, int n_floor,
                    int n_threads);

/* 1 and *q set when dir holds a well-formed entry for exactly this key; 0 otherwise (missing,
 * truncated, corrupt or another key's file: all are misses, never trusted). */
int check_cache_get(const char *dir, const char *key, double *q);
/* Write the entry atomically (a temporary file in dir, then rename). 0, or -1 when it could not
 * be written (the check goes on; the next run recomputes). */
int check_cache_put(const char *dir, const char *key, double q);

#endif

/* Internal: a minimal parallel-for over [0, n) in contiguous chunks, with pthreads.
 * Deterministic: each chunk's work must not depend on which thread runs it. */
#ifndef PARITY_PARALLEL_H
#define PARITY_PARALLEL_H

#include <stdint.h>

typedef void (*parity_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Split [0, n) into n_threads contiguous chunks and run fn on each (n_threads <= 0: all cores,
 * at most 64). Returns the number of threads used. */
int parity_parallel_for(int64_t n, int n_threads, parity_range_fn fn, void *ctx);
/* Number of online CPUs (>= 1), or $PARITY_THREADS when set. */
int parity_num_threads(void);

#endif

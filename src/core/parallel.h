/* Internal: a minimal parallel-for over [0, n) in contiguous chunks, with pthreads.
 * Deterministic: each chunk's work must not depend on which thread runs it. */
#ifndef PARITY_PARALLEL_H
#define PARITY_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

typedef void (*parity_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Split [0, n) into n_threads contiguous chunks and run fn on each (n_threads <= 0: all cores,
 * at most 64). Returns the number of threads used. */
int parity_parallel_for(int64_t n, int n_threads, parity_range_fn fn, void *ctx);
/* Items split into shares, one per thread, taken first by their owner in order and then, when
 * the owner is done, by any other thread (a thread slowed down, by the host or by a longer
 * item, does not hold the others up at the end of a section, and a thread keeps to its own
 * share while all are busy, so data it produced earlier is still in its cache). Share t is
 * items [bound[t], bound[t + 1]). Each item is taken exactly once. */
typedef struct {
    struct {
        int64_t next, end;
        char pad[48]; /* one cache line per share */
    } s[64];
    int nt;
} parity_steal_t;

/* bound has nt + 1 entries, non-decreasing; nt <= 64 */
void parity_steal_init(parity_steal_t *st, int nt, const int64_t *bound);
/* Shares [n t / nt, n (t + 1) / nt). */
void parity_steal_init_even(parity_steal_t *st, int nt, int64_t n);
/* The next item for thread t (its own share first), or -1 when none is left. */
int64_t parity_steal_next(parity_steal_t *st, int t);

/* madvise(addr, len, advice) in pieces of 32 MiB on every core (one call when len is under two
 * pieces). For MADV_POPULATE_*: faulting in hundreds of MB of shared memory is kernel work that
 * two threads share (two 268 MB mappings: 0.19 s one after the other, 0.12 s side by side; one
 * 411 MB mapping in halves: 0.15 s against 0.11 s), while the other cores waited. addr page-aligned.
 * Advisory, as madvise: errors are ignored. */
void parity_madvise_parallel(void *addr, size_t len, int advice);

/* Number of online CPUs (>= 1), or $PARITY_THREADS when set. */
int parity_num_threads(void);

#endif

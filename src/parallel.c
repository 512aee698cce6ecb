/* A minimal deterministic parallel-for with pthreads. */
#include "parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    parity_range_fn fn;
    void *ctx;
    int64_t begin, end;
    int thread;
} job_t;

static void *trampoline(void *p)
{
    job_t *j = p;
    j->fn(j->ctx, j->begin, j->end, j->thread);
    return NULL;
}

int parity_num_threads(void)
{
    const char *env = getenv("PARITY_THREADS");
    if (env && atoi(env) > 0) return atoi(env) > 64 ? 64 : atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int parity_parallel_for(int64_t n, int n_threads, parity_range_fn fn, void *ctx)
{
    if (n_threads <= 0) n_threads = parity_num_threads();
    if (n_threads > 64) n_threads = 64;
    if (n < n_threads) n_threads = n > 0 ? (int)n : 1;
    if (n_threads == 1) {
        fn(ctx, 0, n, 0);
        return 1;
    }
    pthread_t th[64];
    job_t jobs[64];
    int started[64] = {0};
    for (int t = 0; t < n_threads; t++) {
        jobs[t] = (job_t){fn, ctx, n * t / n_threads, n * (t + 1) / n_threads, t};
        started[t] = t > 0 && pthread_create(&th[t], NULL, trampoline, &jobs[t]) == 0;
    }
    /* Thread 0's chunk runs here; a chunk whose thread failed to start runs here too. */
    for (int t = 0; t < n_threads; t++)
        if (!started[t]) trampoline(&jobs[t]);
    for (int t = 1; t < n_threads; t++)
        if (started[t]) pthread_join(th[t], NULL);
    return n_threads;
}

/* A minimal deterministic parallel-for with pthreads. */
#include "src/core/parallel.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* Workers kept between calls: starting and joining a thread costs ~60 us here, and the logprob
 * comparison runs one parallel section per batch (dozens to thousands per file). One call at a
 * time uses the pool; a call made while it is busy (from another thread, or from inside a
 * worker) starts its own threads as before. Chunks and thread indices are the same either way,
 * so results do not change. */
static struct {
    pthread_mutex_t use; /* held by the call that owns the pool */
    pthread_mutex_t mu;  /* the fields below */
    pthread_cond_t go, done;
    int nworkers;        /* started: thread indices 1..nworkers */
    uint64_t gen;        /* job number */
    uint64_t born[64];   /* gen when worker w started: it runs only later jobs */
    job_t jobs[64];
    int nt, pending;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0, {0}, {{0}}, 0, 0};

static _Thread_local int in_worker;

static void *worker(void *p)
{
    int w = (int)(intptr_t)p;
    in_worker = 1;
    pthread_mutex_lock(&pool.mu);
    uint64_t seen = pool.born[w];
    for (;;) {
        while (pool.gen == seen) pthread_cond_wait(&pool.go, &pool.mu);
        seen = pool.gen;
        if (w >= pool.nt) continue;
        job_t j = pool.jobs[w];
        pthread_mutex_unlock(&pool.mu);
        j.fn(j.ctx, j.begin, j.end, j.thread);
        pthread_mutex_lock(&pool.mu);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A child of fork() (parity forks to run candidate kernels) has none of the workers: it starts
 * with an empty pool. */
static void pool_atfork_child(void)
{
    pthread_mutex_init(&pool.use, NULL);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.go, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.nworkers = 0;
    pool.pending = 0;
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static void pool_init(void) { pthread_atfork(NULL, NULL, pool_atfork_child); }

/* Run the chunks on the pool; 0 when it cannot (busy, or the workers fail to start). */
static int pool_run(int64_t n, int n_threads, parity_range_fn fn, void *ctx)
{
    pthread_once(&pool_once, pool_init);
    if (in_worker || pthread_mutex_trylock(&pool.use) != 0) return 0;
    pthread_mutex_lock(&pool.mu);
    while (pool.nworkers < n_threads - 1) {
        pthread_t th;
        pthread_attr_t at;
        int ok = pthread_attr_init(&at) == 0;
        if (ok) {
            pool.born[pool.nworkers + 1] = pool.gen;
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&th, &at, worker, (void *)(intptr_t)(pool.nworkers + 1)) == 0;
            pthread_attr_destroy(&at);
        }
        if (!ok) break;
        pool.nworkers++;
    }
    if (pool.nworkers < n_threads - 1) {
        pthread_mutex_unlock(&pool.mu);
        pthread_mutex_unlock(&pool.use);
        return 0;
    }
    for (int t = 0; t < n_threads; t++) pool.jobs[t] = (job_t){fn, ctx, n * t / n_threads, n * (t + 1) / n_threads, t};
    pool.nt = n_threads;
    pool.pending = n_threads - 1;
    pool.gen++;
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    fn(ctx, pool.jobs[0].begin, pool.jobs[0].end, 0);
    pthread_mutex_lock(&pool.mu);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
    return 1;
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
    if (pool_run(n, n_threads, fn, ctx)) return n_threads;
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

void parity_steal_init(parity_steal_t *st, int nt, const int64_t *bound)
{
    st->nt = nt;
    for (int t = 0; t < nt; t++) {
        st->s[t].next = bound[t];
        st->s[t].end = bound[t + 1];
    }
}

void parity_steal_init_even(parity_steal_t *st, int nt, int64_t n)
{
    st->nt = nt;
    for (int t = 0; t < nt; t++) {
        st->s[t].next = n * t / nt;
        st->s[t].end = n * (t + 1) / nt;
    }
}

int64_t parity_steal_next(parity_steal_t *st, int t)
{
    for (int k = 0; k < st->nt; k++) {
        int u = (t + k) % st->nt;
        if (__atomic_load_n(&st->s[u].next, __ATOMIC_RELAXED) >= st->s[u].end) continue;
        int64_t i = __atomic_fetch_add(&st->s[u].next, 1, __ATOMIC_RELAXED);
        if (i < st->s[u].end) return i;
    }
    return -1;
}

/* ---- madvise in pieces ---- */

typedef struct {
    char *a;
    size_t len, piece;
    int advice;
} madv_t;

static void madv_range(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const madv_t *m = ctx;
    size_t off = (size_t)b * m->piece, end = (size_t)e * m->piece;
    if (end > m->len) end = m->len;
    if (end > off) (void)madvise(m->a + off, end - off, m->advice);
}

void parity_madvise_parallel(void *addr, size_t len, int advice)
{
    /* 32 MiB: a multiple of every page size, about 10 ms of faulting at the 2.7 GB/s measured for
     * shared memory here (thread start-up is 60 us); a mapping under two pieces is one call. */
    const size_t piece = (size_t)32 << 20;
    if (len < 2 * piece) {
        (void)madvise(addr, len, advice);
        return;
    }
    madv_t m = {addr, len, piece, advice};
    parity_parallel_for((int64_t)((len + piece - 1) / piece), 0, madv_range, &m);
}

/* The direct comparison of two plain dense dumps (npy or safetensors with the same rows and
 * columns): each thread reads its rows of both files and compares them at once, with no batch
 * of sequences and no pairing map; the results are run()'s (logprob_compare.c) bit for bit. The
 * only user of the dense reader's row-level internals (logprob_dense_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_cmp_impl.h"
#include "src/logprob/logprob_dense_impl.h"
#include "src/core/parallel.h"

/* Two plain dense dumps (npy/safetensors without mask, modality, phase or top-k) with the same
 * number of rows: row i pairs with row i, so each thread reads its rows of both files and
 * compares them at once, in its own buffers (no batch of sequences, no pairing map). The
 * result is what run() gives: the same pairs in the same order, the same entries applied in
 * the same order; a bad value is reported as run() reports it (A's batch before B's).
 * The threads claim rows a few at a time (a slow or interrupted thread does not hold the
 * others up at the end of a batch), and thread 0 first applies the previous batch's pairs, in
 * order, while the others start on this one: the serial part overlaps the parallel one. Which
 * thread compares a row does not matter: a pair's entries are its own, the threads' sketches
 * and counts are order-free. */
typedef struct {
    cmp_t *c;
    pair_t *pairs;
    uint64_t row0, ord0;
    size_t n, grain;
    size_t next; /* the first unclaimed row (atomic) */
    parity_status_t *st[2];
    uint64_t *bad[2];
    int *why[2];
    const pair_t *prev; /* the previous batch, applied by thread 0 */
    size_t nprev;
    int nomem;
} djob_t;

static void djob_fn(void *ctx, int64_t b, int64_t e, int t)
{
    (void)b;
    (void)e;
    djob_t *j = ctx;
    cmp_t *c = j->c;
    thr_t *T = &c->th[t];
    if (t == 0 && j->nprev) {
        for (size_t i = 0; i < j->nprev && !j->nomem; i++) lp_cmp_apply_pair(c, &j->prev[i], &j->nomem);
        for (size_t i = 0; i < j->nprev; i++) lp_cmp_account_pair(c, &j->prev[i]);
    }
    for (;;) {
        /* guided: the claim shrinks with what is left (a quarter of a thread's share, at most
         * grain rows), so that the threads finish a batch close together */
        size_t i0 = __atomic_load_n(&j->next, __ATOMIC_RELAXED), g;
        do {
            if (i0 >= j->n) return;
            g = (j->n - i0) / (4 * (size_t)c->nthreads);
            g = g < 1 ? 1 : g > j->grain ? j->grain : g;
        } while (!__atomic_compare_exchange_n(&j->next, &i0, i0 + g, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        size_t i1 = i0 + g;
        lp_dense_populate(c->ra, j->row0 + i0, i1 - i0);
        lp_dense_populate(c->rb, j->row0 + i0, i1 - i0);
        for (size_t i = i0; i < i1; i++) {
            uint64_t row = j->row0 + i;
            j->st[0][i] = lp_dense_row(c->ra, row, &T->da, &j->bad[0][i], &j->why[0][i]);
            j->st[1][i] = lp_dense_row(c->rb, row, &T->db, &j->bad[1][i], &j->why[1][i]);
            if (j->st[0][i] || j->st[1][i]) continue;
            pair_t *p = &j->pairs[i];
            lp_cmp_set_pair(p, &T->da, &T->db);
            p->ord = j->ord0 + i;
            lp_cmp_pair(c, t, p);
            p->a = p->b = NULL; /* the buffers are the thread's, reused for its next row */
        }
    }
}

int lp_cmp_direct_ok(const cmp_t *c)
{
    return c->ordinal && !c->o.by_field && lp_dense_direct_ok(c->ra) && lp_dense_direct_ok(c->rb) &&
           c->ra->nrows == c->rb->nrows && c->ra->ncols == c->rb->ncols && c->ra->ordinal == 0 &&
           c->rb->ordinal == 0;
}

parity_status_t lp_cmp_run_direct(cmp_t *c, parity_diag_t *d)
{
    parity_logprob_reader_t *ra = c->ra, *rb = c->rb;
    /* 4x the general path's batch: here a batch holds no token data, only the pairs' entries,
     * and fewer batches mean fewer thread starts (measured 5% on 4M tokens) */
    size_t M = 4 * c->o.batch_tokens / (size_t)ra->ncols;
    if (M < 2 * (size_t)c->nthreads) M = 2 * (size_t)c->nthreads;
    if (M > 65536) M = 65536;
    if (M > ra->nrows) M = ra->nrows > 0 ? (size_t)ra->nrows : 1;
    /* claims of at most ~16k tokens (a batch of 4 x 64k tokens is at least 16 claims), fewer
     * rows as the batch runs out (djob_fn) */
    size_t grain = ((size_t)1 << 14) / (size_t)ra->ncols;
    if (grain < 1) grain = 1;
    pair_t *pairs[2] = {calloc(M, sizeof(pair_t)), calloc(M, sizeof(pair_t))};
    parity_status_t *st = calloc(2 * M, sizeof *st);
    uint64_t *bad = calloc(2 * M, sizeof *bad);
    int *why = calloc(2 * M, sizeof *why);
    parity_status_t out = PARITY_OK;
    size_t nprev = 0;
    int cur = 0, nomem = 0;
    if (!pairs[0] || !pairs[1] || !st || !bad || !why) {
        out = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
        goto done;
    }
    while (ra->ordinal < ra->nrows) {
        uint64_t left = ra->nrows - ra->ordinal;
        size_t n = left < M ? (size_t)left : M;
        djob_t job = {c,   pairs[cur], ra->ordinal,      c->npair_seen, n,          grain, 0,
                      {st, st + M},    {bad, bad + M},   {why, why + M}, pairs[!cur], nprev, 0};
        int nt = n * ra->ncols < 65536 ? 1 : c->nthreads;
        parity_parallel_for(nt, nt, djob_fn, &job);
        nprev = 0; /* applied */
        for (int side = 0; side < 2 && !out; side++)
            for (size_t i = 0; i < n; i++)
                if (job.st[side][i]) {
                    out = lp_dense_row_error(side ? rb : ra, ra->ordinal + i, job.bad[side][i], job.why[side][i], d);
                    break;
                }
        if (out) break;
        nomem = job.nomem;
        for (int t = 0; t < c->nthreads; t++)
            if (c->th[t].nomem) nomem = 1;
        if (nomem) break;
        c->npair_seen += n;
        c->res->counts.n_seq_a += n;
        c->res->counts.n_seq_b += n;
        lp_dense_consume(ra, n);
        lp_dense_consume(rb, n);
        nprev = n;
        cur = !cur;
    }
    /* the last batch */
    for (size_t i = 0; i < nprev && !nomem; i++) lp_cmp_apply_pair(c, &pairs[!cur][i], &nomem);
    if (!nomem)
        for (size_t i = 0; i < nprev; i++) lp_cmp_account_pair(c, &pairs[!cur][i]);
    if (nomem && !out) out = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    c->eof[0] = c->eof[1] = 1;
done:
    lp_cmp_free_pairs(pairs[0], pairs[0] ? M : 0);
    lp_cmp_free_pairs(pairs[1], pairs[1] ? M : 0);
    free(st);
    free(bad);
    free(why);
    return out;
}

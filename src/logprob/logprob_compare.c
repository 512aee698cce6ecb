/* Comparing two logprob dumps, the driver: the options, reading a batch of each side (two JSONL
 * dumps parsed in one parallel section), pairing sequences by request id (or by order) through
 * a map of the ones still waiting for their other side, comparing the pairs in parallel
 * (logprob_pair.c) and applying them in stream order (logprob_slices.c), or the direct path
 * for two plain dense dumps (logprob_direct.c); then the result (logprob_result.c: floor and
 * verdicts; reports: logprob_report.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_cmp_impl.h"
#include "src/core/parallel.h"

parity_logprob_cmp_opts_t parity_logprob_cmp_default_opts(void)
{
    parity_logprob_cmp_opts_t o;
    memset(&o, 0, sizeof o);
    o.by_modality = o.by_position = o.by_phase = 1;
    o.k3_alarm = 1e-3;
    o.dlogprob_alarm = 5e-2;
    o.floor_factor = 3.0;
    o.worst_tokens = 10;
    /* 2^16 tokens: the batch's buffers (about 23 bytes per token and side, two batches held)
     * stay in cache and their pages are touched once; 2^20 spent a fifth of the CPU time in
     * page faults and cache misses on first touch */
    o.batch_tokens = (size_t)1 << 16;
    return o;
}

/* The pairs of a batch: thread t's share is pairs [n t / T, n (t + 1) / T), which it parsed
 * (JSONL) when the files list requests alike; then it helps with the others' (a pair's result
 * does not depend on the thread). */
typedef struct {
    cmp_t *c;
    pair_t *pairs;
    parity_steal_t st;
} job_t;

static void job_fn(void *ctx, int64_t b, int64_t e, int t)
{
    (void)b;
    (void)e;
    job_t *j = ctx;
    int64_t i;
    while ((i = parity_steal_next(&j->st, t)) >= 0) lp_cmp_pair(j->c, t, &j->pairs[i]);
}

/* ---- pairing ------------------------------------------------------------------------------ */

static uint64_t hstr(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_grow(map_t *m)
{
    size_t nb = m->nb ? m->nb * 2 : 1024;
    node_t **b = calloc(nb, sizeof *b);
    if (!b) return -1;
    for (size_t i = 0; i < m->nb; i++)
        for (node_t *x = m->b[i], *nx; x; x = nx) {
            nx = x->next;
            size_t h = hstr(x->key) & (nb - 1);
            x->next = b[h];
            b[h] = x;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
    return 0;
}

static int map_put(map_t *m, parity_logprob_seq_t *s, const char *key)
{
    if (m->n + 1 > m->nb && map_grow(m)) return -1;
    node_t *x = malloc(sizeof *x);
    if (!x) return -1;
    if (!(x->key = strdup(key))) {
        free(x);
        return -1;
    }
    size_t h = hstr(key) & (m->nb - 1);
    x->s = s;
    x->next = m->b[h];
    m->b[h] = x;
    m->n++;
    return 0;
}

static parity_logprob_seq_t *map_take(map_t *m, const char *id)
{
    if (!m->nb) return NULL;
    size_t h = hstr(id) & (m->nb - 1);
    for (node_t **p = &m->b[h]; *p; p = &(*p)->next)
        if (!strcmp((*p)->key, id)) {
            node_t *x = *p;
            parity_logprob_seq_t *s = x->s;
            *p = x->next;
            free(x->key);
            free(x);
            m->n--;
            return s;
        }
    return NULL;
}

static void seq_destroy(parity_logprob_seq_t *s)
{
    parity_logprob_seq_free(s);
    free(s);
}

/* Keep a compared sequence's buffers for a later batch (no fresh pages per batch); the pool
 * holds at most what two batches read. */
static void seq_recycle(cmp_t *c, parity_logprob_seq_t *s)
{
    if (c->npool == c->poolcap && c->poolcap < 2 * 2 * 65536) {
        size_t nc = c->poolcap ? c->poolcap * 2 : 256;
        parity_logprob_seq_t **p = realloc(c->pool, nc * sizeof *p);
        if (p) {
            c->pool = p;
            c->poolcap = nc;
        }
    }
    if (c->npool < c->poolcap) c->pool[c->npool++] = s;
    else seq_destroy(s);
}

static void map_free(map_t *m)
{
    for (size_t i = 0; i < m->nb; i++)
        for (node_t *x = m->b[i], *nx; x; x = nx) {
            nx = x->next;
            seq_destroy(x->s);
            free(x->key);
            free(x);
        }
    free(m->b);
}

static const char *match_key(cmp_t *c, const parity_logprob_seq_t *s, char *buf, size_t cap)
{
    if (!c->ordinal) return s->id;
    snprintf(buf, cap, "#%llu", (unsigned long long)s->ordinal);
    return buf;
}

static const char *coarser(const char *x, const char *y)
{
    /* JSON carries decimal text that engines print from fp32 */
    if (!strcmp(x, "text")) x = "fp32";
    if (!strcmp(y, "text")) y = "fp32";
    return lp_unit_roundoff(x) >= lp_unit_roundoff(y) ? x : y;
}

/* The batch buffer of one side, for up to *M sequences. */
static parity_status_t batch_prep(cmp_t *c, int side, size_t *Mout, parity_diag_t *d)
{
    parity_logprob_reader_t *r = side ? c->rb : c->ra;
    size_t M = 1024;
    if (r->fmt == PARITY_LOGPROB_NPY || r->fmt == PARITY_LOGPROB_SAFETENSORS)
        M = r->ncols ? c->o.batch_tokens / (size_t)r->ncols : 1024;
    if (M < 1) M = 1;
    /* enough rows for every thread to have a pair (pairs are compared in parallel) */
    if (M < 2 * (size_t)c->nthreads) M = 2 * (size_t)c->nthreads;
    if (M > 65536) M = 65536;
    if (!c->buf[side] || c->bufn[side] < M) {
        parity_logprob_seq_t *b = realloc(c->buf[side], M * sizeof *b);
        if (!b) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
        for (size_t i = c->bufn[side]; i < M; i++) parity_logprob_seq_init(&b[i]);
        c->buf[side] = b;
        c->bufn[side] = M;
    }
    *Mout = M;
    return PARITY_OK;
}

/* The got sequences read into the side's buffer, taken out as individually owned sequences. */
static parity_status_t batch_take(cmp_t *c, int side, size_t got, parity_logprob_seq_t ***out, size_t *n,
                                  parity_diag_t *d)
{
    if (got == 0) {
        c->eof[side] = 1;
        return PARITY_OK;
    }
    parity_logprob_seq_t **v = malloc(got * sizeof *v);
    if (!v) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    for (size_t i = 0; i < got; i++) {
        if (c->npool) {
            v[i] = c->pool[--c->npool];
        } else {
            v[i] = malloc(sizeof **v);
            if (!v[i]) {
                for (size_t j = 0; j < i; j++) seq_destroy(v[j]);
                free(v);
                return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
            }
            parity_logprob_seq_init(v[i]);
        }
        parity_logprob_seq_t old = *v[i];
        *v[i] = c->buf[side][i]; /* take ownership; the slot gets a recycled sequence's buffers */
        c->buf[side][i] = old;
    }
    if (side) c->res->counts.n_seq_b += got;
    else c->res->counts.n_seq_a += got;
    *out = v;
    *n = got;
    return PARITY_OK;
}

static parity_status_t read_batch(cmp_t *c, int side, parity_logprob_seq_t ***out, size_t *n, parity_diag_t *d)
{
    parity_logprob_reader_t *r = side ? c->rb : c->ra;
    *n = 0;
    if (c->eof[side]) return PARITY_OK;
    size_t M, got = 0;
    parity_status_t st = batch_prep(c, side, &M, d);
    if (!st) st = parity_logprob_next_batch(r, c->buf[side], M, &got, d);
    return st ? st : batch_take(c, side, got, out, n, d);
}

static int is_jsonl(const parity_logprob_reader_t *r)
{
    return r->fmt != PARITY_LOGPROB_NPY && r->fmt != PARITY_LOGPROB_SAFETENSORS;
}

/* A batch of each side; two JSONL dumps have their lines parsed in one parallel section. On an
 * error nothing is returned (*va and *vb stay NULL). */
static parity_status_t read_batches(cmp_t *c, parity_logprob_seq_t ***va, size_t *na, parity_logprob_seq_t ***vb, size_t *nb,
                                    parity_diag_t *d)
{
    parity_status_t st;
    *va = *vb = NULL;
    *na = *nb = 0;
    if (c->eof[0] || c->eof[1] || !is_jsonl(c->ra) || !is_jsonl(c->rb)) {
        if ((st = read_batch(c, 0, va, na, d))) return st;
        if ((st = read_batch(c, 1, vb, nb, d))) {
            for (size_t i = 0; i < *na; i++) seq_destroy((*va)[i]);
            free(*va);
            *va = NULL;
            *na = 0;
        }
        return st;
    }
    size_t Ma, Mb, ga = 0, gb = 0;
    if ((st = batch_prep(c, 0, &Ma, d)) || (st = batch_prep(c, 1, &Mb, d))) return st;
    if ((st = lp_jsonl_next2(c->ra, c->buf[0], Ma, &ga, c->rb, c->buf[1], Mb, &gb, d))) return st;
    if ((st = batch_take(c, 0, ga, va, na, d))) return st;
    if ((st = batch_take(c, 1, gb, vb, nb, d))) {
        for (size_t i = 0; i < *na; i++) seq_destroy((*va)[i]);
        free(*va);
        *va = NULL;
        *na = 0;
    }
    return st;
}

static parity_status_t run(cmp_t *c, parity_diag_t *d)
{
    if (lp_cmp_direct_ok(c)) return lp_cmp_run_direct(c, d);
    parity_status_t st = PARITY_OK;
    pair_t *pairs = NULL;
    size_t npairs = 0, pcap = 0;
    while (!c->eof[0] || !c->eof[1]) {
        parity_logprob_seq_t **va = NULL, **vb = NULL;
        size_t na = 0, nb = 0;
        if ((st = read_batches(c, &va, &na, &vb, &nb, d))) break;
        lp_cmp_map_mods(c);
        npairs = 0;
        if (pcap < na + nb) {
            pair_t *p = realloc(pairs, (na + nb) * sizeof *p);
            if (!p) {
                st = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
                for (size_t i = 0; i < na; i++) seq_destroy(va[i]);
                for (size_t i = 0; i < nb; i++) seq_destroy(vb[i]);
                free(va);
                free(vb);
                break;
            }
            memset(p + pcap, 0, (na + nb - pcap) * sizeof *p);
            pairs = p;
            pcap = na + nb;
        }
        char kb[32];
        for (size_t i = 0; i < na; i++) {
            parity_logprob_seq_t *o = map_take(&c->pend[1], match_key(c, va[i], kb, sizeof kb));
            if (o) lp_cmp_set_pair(&pairs[npairs++], va[i], o);
            else if (map_put(&c->pend[0], va[i], match_key(c, va[i], kb, sizeof kb))) st = PARITY_E_NOMEM;
        }
        for (size_t i = 0; i < nb; i++) {
            parity_logprob_seq_t *o = map_take(&c->pend[0], match_key(c, vb[i], kb, sizeof kb));
            if (o) lp_cmp_set_pair(&pairs[npairs++], o, vb[i]);
            else if (map_put(&c->pend[1], vb[i], match_key(c, vb[i], kb, sizeof kb))) st = PARITY_E_NOMEM;
        }
        free(va);
        free(vb);
        if (st) {
            parity_diag_set(d, st, "out of memory");
            break;
        }
        for (size_t i = 0; i < npairs; i++)
            pairs[i].field_slice = lp_cmp_field_slice(c, pairs[i].a->field ? pairs[i].a->field : pairs[i].b->field);
        for (size_t i = 0; i < npairs; i++) pairs[i].ord = c->npair_seen++;
        job_t job;
        job.c = c;
        job.pairs = pairs;
        size_t toks = 0;
        for (size_t i = 0; i < npairs; i++) toks += pairs[i].a->n;
        /* in parallel from 8192 tokens (~0.4 ms of work; a section costs ~10 us with the pool) */
        int nt = toks < 8192 ? 1 : c->nthreads;
        if ((size_t)nt > npairs) nt = npairs > 0 ? (int)npairs : 1;
        parity_steal_init_even(&job.st, nt, (int64_t)npairs);
        parity_parallel_for(nt, nt, job_fn, &job);
        int nomem = 0;
        for (size_t i = 0; i < npairs && !nomem; i++) lp_cmp_apply_pair(c, &pairs[i], &nomem);
        for (int t = 0; t < c->nthreads; t++)
            if (c->th[t].nomem) nomem = 1;
        if (nomem) st = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
        for (size_t i = 0; i < npairs; i++) {
            pair_t *p = &pairs[i];
            lp_cmp_account_pair(c, p);
            seq_recycle(c, p->a);
            seq_recycle(c, p->b);
        }
        if (st) break;
    }
    lp_cmp_free_pairs(pairs, pcap);
    c->res->counts.n_only_a = c->pend[0].n;
    c->res->counts.n_only_b = c->pend[1].n;
    return st;
}

/* An input error when there is nothing to compare (logprob.h, parity_logprob_compare): a verdict on
 * no tokens would read as a result. */
static parity_status_t nothing_to_compare(const parity_logprob_result_t *R, parity_diag_t *d)
{
    const parity_logprob_counts_t *n = &R->counts;
    if (!n->n_seq_a || !n->n_seq_b)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: empty dump: no sequences, nothing to compare",
                               n->n_seq_a ? R->name_b : R->name_a);
    if (!n->n_pairs)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "no sequence in common: %s has %llu sequences and %s %llu, none with the same "
                               "request id (sequences pair by id, or by order when a dump has none: "
                               "docs/logprobs.md, \"Alignment\")",
                               R->name_a, (unsigned long long)n->n_seq_a, R->name_b, (unsigned long long)n->n_seq_b);
    if (!n->n_tokens_compared && !n->n_diverged)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s vs %s: nothing to compare: no token of the %llu paired sequences has a logprob on "
                               "both sides (%llu tokens absent on a side: null or masked)",
                               R->name_a, R->name_b, (unsigned long long)n->n_pairs,
                               (unsigned long long)n->n_tokens_absent);
    return PARITY_OK;
}

parity_status_t parity_logprob_compare(parity_logprob_reader_t *a, parity_logprob_reader_t *b, const parity_logprob_cmp_opts_t *opts,
                                       parity_logprob_result_t **out, parity_diag_t *diag)
{
    if (!a || !b || !out) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs compare: NULL argument");
    *out = NULL;
    cmp_t *c = calloc(1, sizeof *c);
    parity_logprob_result_t *R = calloc(1, sizeof *R);
    if (!c || !R) {
        free(c);
        free(R);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    c->o = opts ? *opts : parity_logprob_cmp_default_opts();
    if (!c->o.batch_tokens) c->o.batch_tokens = (size_t)1 << 16;
    if (c->o.worst_tokens > MAX_WORST) c->o.worst_tokens = MAX_WORST;
    c->ra = a;
    c->rb = b;
    c->res = R;
    c->dopts = parity_metrics_dist_default_opts();
    c->ordinal = a->ordinal_ids || b->ordinal_ids;
    c->field_name = a->slice_field ? a->slice_field : b->slice_field;
    if (!c->field_name) c->o.by_field = 0;
    else c->o.by_field = 1;
    c->nthreads = c->o.n_threads > 0 ? c->o.n_threads : parity_num_threads();
    if (c->nthreads > 64) c->nthreads = 64;
    R->opts = c->o;
    snprintf(R->name_a, sizeof R->name_a, "%s", a->name);
    snprintf(R->name_b, sizeof R->name_b, "%s", b->name);
    R->fmt_a = a->fmt;
    R->fmt_b = b->fmt;
    snprintf(R->dtype, sizeof R->dtype, "%s", c->o.dtype ? c->o.dtype : coarser(a->dtype, b->dtype));
    c->unit = lp_unit_roundoff(R->dtype);
    R->o_dtype = R->dtype;
    lp_cmp_init_names(c);
    c->overall_from_pos = c->o.by_position;
    for (int b = 0; b < NPOS; b++)
        if (c->sl_pos[b] < 0) c->overall_from_pos = 0;
    lp_cmp_hist_init();
    parity_status_t st = PARITY_OK;
    for (int t = 0; t < c->nthreads && !st; t++) {
        c->th[t].slots = calloc(MAX_SLICES, sizeof(slot_t *));
        c->th[t].worst = calloc(MAX_WORST + 1, sizeof(parity_logprob_token_t));
        c->th[t].worstd = calloc(MAX_WORST + 1, sizeof(double));
        c->th[t].worstp = calloc(MAX_WORST + 1, sizeof(uint64_t));
        if (!c->th[t].slots || !c->th[t].worst || !c->th[t].worstd || !c->th[t].worstp)
            st = parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    if (!st) st = run(c, diag);
    if (!st) st = nothing_to_compare(R, diag);
    if (!st) {
        lp_cmp_finish(c);
        if (!R->slices || !R->fl) st = parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    R->counts.bytes_a = a->len;
    R->counts.bytes_b = b->len;
    for (int t = 0; t < c->nthreads; t++) {
        thr_t *T = &c->th[t];
        if (T->slots)
            for (int i = 0; i < MAX_SLICES; i++)
                if (T->slots[i]) {
                    parity_metrics_dist_free(T->slots[i]->own);
                    free(T->slots[i]->sb);
                    free(T->slots[i]);
                }
        free(T->slots);
        free(T->worst);
        free(T->worstd);
        free(T->worstp);
        free(T->a);
        free(T->b);
        parity_logprob_seq_free(&T->da);
        parity_logprob_seq_free(&T->db);
        free(T->rec.lr);
        free(T->rec.k3);
        free(T->rec.rm1);
        free(T->rec.w);
        free(T->rec.adp);
        free(T->rec.pa);
        free(T->rec.pb);
        free(T->rec.cls);
        free(T->rec.fast);
        free(T->pos);
        free(T->p);
        free(T->hastop);
        free(T->ph);
        free(T->md);
        free(T->ida);
        free(T->idb);
        free(T->sa);
        free(T->sb);
    }
    for (int i = 0; i < MAX_SLICES; i++)
        if (c->gs[i]) {
            parity_metrics_dist_free(c->gs[i]->d);
            free(c->gs[i]);
        }
    for (size_t i = 0; i < c->npool; i++) seq_destroy(c->pool[i]);
    free(c->pool);
    for (int s = 0; s < 2; s++) {
        map_free(&c->pend[s]);
        for (size_t i = 0; i < c->bufn[s]; i++) parity_logprob_seq_free(&c->buf[s][i]);
        free(c->buf[s]);
    }
    free(c);
    if (st) {
        parity_logprob_result_free(R);
        return st;
    }
    *out = R;
    return PARITY_OK;
}

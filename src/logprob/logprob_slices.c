/* The comparison's slices (logprob_compare.c drives it): the registry of slice names (overall,
 * phases, position buckets, modalities, --slice-by values), each slice's accumulators (the
 * stream-order one fed serially from the pairs' entry logs, the threads' order-free sketches
 * and histogram counts), how a run of a pair's tokens enters a slice, and the merge of it all
 * into the result's per-slice summaries and analytic floor at the end. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_cmp_impl.h"
#include "src/core/parallel.h"

/* ---- slice registry ---------------------------------------------------------------------- */

static int reg_slice(cmp_t *c, const char *name)
{
    for (int i = 0; i < c->nnames; i++)
        if (!strcmp(c->names[i], name)) return i;
    if (c->nnames >= MAX_SLICES) return -1;
    snprintf(c->names[c->nnames], sizeof c->names[0], "%s", name);
    return c->nnames++;
}

void lp_cmp_init_names(cmp_t *c)
{
    reg_slice(c, "overall");
    c->sl_prefill = c->o.by_phase ? reg_slice(c, "phase=prefill") : -1;
    c->sl_decode = c->o.by_phase ? reg_slice(c, "phase=decode") : -1;
    for (int b = 0; b < NPOS; b++) {
        char nm[64];
        uint64_t lo = b == 0 ? 0 : (uint64_t)16 << (b - 1), hi = b == 0 ? 15 : ((uint64_t)16 << b) - 1;
        if (b == NPOS - 1) snprintf(nm, sizeof nm, "pos=%llu-", (unsigned long long)lo);
        else snprintf(nm, sizeof nm, "pos=%llu-%llu", (unsigned long long)lo, (unsigned long long)hi);
        c->sl_pos[b] = c->o.by_position ? reg_slice(c, nm) : -1;
    }
}

/* Map every modality name of both readers to a slice (names agree across the two files). */
void lp_cmp_map_mods(cmp_t *c)
{
    parity_logprob_reader_t *rd[2] = {c->ra, c->rb};
    for (int s = 0; s < 2; s++)
        for (uint16_t m = 1; m < 256; m++) {
            const char *nm = parity_logprob_reader_modality(rd[s], m);
            if (!nm) break;
            if (c->modmap[s][m] != 0) continue;
            char b[96];
            snprintf(b, sizeof b, "modality=%.80s", nm);
            int i = c->o.by_modality ? reg_slice(c, b) : -1;
            c->modmap[s][m] = i < 0 ? -1 : i;
        }
}

int lp_cmp_field_slice(cmp_t *c, const char *v)
{
    if (!c->o.by_field) return -1;
    char b[96];
    snprintf(b, sizeof b, "%.20s=%.60s", c->field_name ? c->field_name : "field", v ? v : "(none)");
    int i = reg_slice(c, b);
    if (i < 0) {
        snprintf(b, sizeof b, "%.20s=(other)", c->field_name ? c->field_name : "field");
        i = reg_slice(c, b);
    }
    return i;
}

/* ---- per-thread accumulation ------------------------------------------------------------ */

/* The stream-order accumulator of slice i: created by the serial apply, or by thread 0 (the
 * only thread that touches these during the parallel part) for its sketches. */
static slot_t *gslot(cmp_t *c, int i)
{
    if (!c->gs[i]) {
        slot_t *s = calloc(1, sizeof *s);
        if (!s || parity_metrics_dist_new(&c->dopts, &s->d) != PARITY_OK) {
            free(s);
            return NULL;
        }
        c->gs[i] = s;
    }
    return c->gs[i];
}

static tslot_t *tslot(cmp_t *c, int t, int i)
{
    tslot_t **sp = &c->th[t].slots[i];
    if (!*sp) {
        tslot_t *s = calloc(1, sizeof *s);
        if (!s) goto fail;
        if (t == 0) {
            slot_t *g = gslot(c, i);
            if (!g) goto fail;
            metrics_dist_sketches(g->d, &s->q_dlp, &s->q_dp);
        } else {
            if (parity_metrics_dist_new(&c->dopts, &s->own) != PARITY_OK) goto fail;
            metrics_dist_sketches(s->own, &s->q_dlp, &s->q_dp);
        }
        /* 256 KiB, of which only the pages the values reach get mapped (calloc) */
        if (!(s->sb = calloc(2 * (size_t)QS_NBINS, sizeof *s->sb))) goto fail;
        *sp = s;
        return s;
    fail:
        if (s) parity_metrics_dist_free(s->own);
        free(s);
        c->th[t].nomem = 1;
        return NULL;
    }
    return *sp;
}

/* The report's histogram of delta: 4 bins per decade over [1e-9, 10), the first and last open,
 * each a union of the |log r| quantile sketch's bins (128 per binade) so that the bin comes
 * from the sketch insert's own index (metrics_shist_t): a |delta| in the sketch's binned range
 * [2^-64, 2^64) goes to bin floor((log10 L + 9) 4), clamped to [0, HBINS), where L is the
 * lower edge of its sketch bin. So bin b holds the values whose sketch bin starts in
 * [10^(b/4 - 9), 10^((b+1)/4 - 9)): the edges are the decimal ones rounded up to the sketch's
 * grid, within 2^-7 relative. */
static uint8_t hist_map[QS_NBINS];
static pthread_once_t hist_once = PTHREAD_ONCE_INIT;

static int hist_of_sketch_bin(size_t i)
{
    uint64_t u = ((uint64_t)i + ((uint64_t)QS_EXP_LO << QS_BITS)) << (52 - QS_BITS);
    double L;
    memcpy(&L, &u, sizeof L);
    double l = (log10(L) + 9.0) * 4.0;
    return l < 0 ? 0 : l >= HBINS ? HBINS - 1 : (int)l;
}

/* The bin is non-decreasing in the sketch bin (L grows with it): the first sketch bin of each
 * histogram bin by bisection (~600 log10 calls, not one per sketch bin), then fill. */
static void hist_init(void)
{
    size_t start = 0;
    for (int b = 0; b < HBINS; b++) {
        size_t lo = start, hi = QS_NBINS; /* first sketch bin whose histogram bin is > b */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (hist_of_sketch_bin(mid) > b) hi = mid;
            else lo = mid + 1;
        }
        for (size_t i = start; i < lo; i++) hist_map[i] = (uint8_t)b;
        start = lo;
    }
}

/* One delta = b - a into the histogram counts (tokens outside the SIMD blocks): as the blocks
 * do for finite pairs; both -inf (NaN) counts as zero (the same logprob), one -inf as the
 * largest |delta| of its sign. */
static void hist_one(uint64_t *hc, double d)
{
    size_t stride = 2 * HBINS + 1, b;
    double a = fabs(d);
    if (a == 0 || a != a) {
        b = 2 * HBINS;
    } else {
        size_t bin;
        if (a < 0x1p-64) bin = 0;
        else if (a >= 0x1p64) bin = HBINS - 1;
        else {
            uint64_t u;
            memcpy(&u, &a, sizeof u);
            bin = hist_map[(u >> (52 - QS_BITS)) - ((uint64_t)QS_EXP_LO << QS_BITS)];
        }
        b = (d > 0 ? HBINS : 0) + bin;
    }
    hc[3 * stride + b]++;
}

/* Tokens [i0, i1) of the gathered arrays enter slice si (a run of tokens sharing it): the
 * order-free parts go to the thread's sketches and counts now, the rest is logged in the pair's
 * entries, in the order parity_metrics_dist_add_prepped / _add_seq_prepped, add_topk, add_topk_kl
 * and the floor sums of a serial run would apply it. The sequence sum of log r and the floor
 * sums are the blocks' sums combined in order (compensated), plus the tokens outside blocks;
 * with as_seq the run enters as a sequence; rs (when not NULL) collects the run's runsum_t. */
void lp_cmp_add_run(cmp_t *c, int t, pair_t *pr, int si, size_t i0, size_t i1, int as_seq, runsum_t *rs_out)
{
    if (si < 0 || i1 <= i0) return;
    thr_t *T = &c->th[t];
    tslot_t *s = tslot(c, t, si);
    if (!s) return;
    size_t n = i1 - i0;
    entry_t *e;
    const metrics_soa_t *rec = &T->rec;
    const uint8_t *fast = rec->fast;
    const double *ga = T->ga, *gb = T->gb;
    const metrics_shist_t h = {hist_map, HBINS, s->hc, s->sb};
    runsum_t rs = {{0, 0}, 0, 0.0};
    parity_csum_t fls = {0, 0}, flq = {0, 0};
    double flmx = s->fl_max;
    for (size_t i = i0; i < i1;) {
        /* the block: up to 256 fast tokens, to the first slow one (memchr scans 32+ bytes at once) */
        size_t lim = i1 - i < 256 ? i1 - i : 256;
        const uint8_t *z = memchr(fast + i, 0, lim);
        size_t j = z ? (size_t)(z - fast) : i + lim;
        if (!(e = new_entry(pr, si, j > i ? E_BLK : E_TOK))) goto nomem;
        if (j > i) {
            metrics_blk_t *b = &e->u.blk;
            metrics_dist_block_stats_soa(rec, i, j - i, c->dopts.iw_low, c->dopts.iw_high, s->q_dlp,
                                         s->q_dp, &h, ga + i, c->unit, b);
            parity_csum_t k = {-b->s[S_K1], -b->c[S_K1]}, f = {b->fs, 0}, q = {b->fs2, 0};
            metrics_csum_merge(&rs.slr, &k);
            rs.nf += j - i;
            if (b->mdl > rs.mx) rs.mx = b->mdl;
            metrics_csum_merge(&fls, &f);
            metrics_csum_merge(&flq, &q);
            if (b->fmx > flmx) flmx = b->fmx;
            i = j;
        } else {
            parity_dist_tok_t *tk = &e->u.tok;
            metrics_soa_get(rec, i, tk);
            metrics_dist_token_sketch(s->q_dlp, s->q_dp, tk);
            double a = ga[i], bb = gb[i];
            hist_one(s->hc, bb - a);
            if (tk->cls == 0) { /* a finite pair */
                metrics_csum_add(&rs.slr, tk->lr);
                rs.nf++;
                if (fabs(bb - a) > rs.mx) rs.mx = fabs(bb - a);
            }
            double fm = c->unit * ((isfinite(a) ? fabs(a) : 0.0) + 1.0);
            metrics_csum_add(&fls, fm);
            metrics_csum_add(&flq, fm * fm);
            if (fm > flmx) flmx = fm;
            i++;
        }
    }
    s->fl_max = flmx;
    if (as_seq) {
        if (!(e = new_entry(pr, si, E_SEQ))) goto nomem;
        e->u.seq.n = n;
        e->u.seq.nf = rs.nf;
        e->u.seq.slr = metrics_csum_value(&rs.slr);
    }
    if (rs_out) {
        metrics_csum_merge(&rs_out->slr, &rs.slr);
        rs_out->nf += rs.nf;
        if (rs.mx > rs_out->mx) rs_out->mx = rs.mx;
    }
    if (T->K) {
        /* only tokens that have top-k on both sides */
        size_t j = i0;
        while (j < i1) {
            while (j < i1 && !T->hastop[j]) j++;
            size_t k0 = j;
            while (j < i1 && T->hastop[j]) j++;
            if (j > k0) {
                if (!(e = new_entry(pr, si, E_TOPK))) goto nomem;
                e->u.topk.i0 = k0;
                e->u.topk.i1 = j;
            }
        }
    }
    if (!(e = new_entry(pr, si, E_FL))) goto nomem;
    e->u.fl.s0 = fls;
    e->u.fl.q0 = flq;
    e->u.fl.s1 = e->u.fl.q1 = (parity_csum_t){0, 0};
    e->u.fl.n = n;
    return;
nomem:
    T->nomem = 1;
}

/* Apply a pair's entries to the slices' stream-order accumulators (serial, in pair order). */
void lp_cmp_apply_pair(cmp_t *c, const pair_t *pr, int *nomem)
{
    for (size_t k = 0; k < pr->ne; k++) {
        const entry_t *e = &pr->e[k];
        slot_t *g = gslot(c, e->slice);
        if (!g) {
            *nomem = 1;
            return;
        }
        switch (e->type) {
        case E_BLK: metrics_dist_block_apply(g->d, &e->u.blk); break;
        case E_TOK: metrics_dist_token_ordered(g->d, &e->u.tok); break;
        case E_SEQ: metrics_dist_seq_enter(g->d, e->u.seq.n, e->u.seq.nf, e->u.seq.slr); break;
        case E_TOPK:
            for (size_t i = e->u.topk.i0; i < e->u.topk.i1; i++) metrics_dist_topk_one(g->d, pr->t1[i], pr->ov[i]);
            for (size_t i = e->u.topk.i0; i < e->u.topk.i1; i++) metrics_dist_tkl_one(g->d, pr->tkl[i]);
            break;
        case E_FL:
            metrics_csum_merge(&g->fl_s, &e->u.fl.s0);
            metrics_csum_merge(&g->fl_s, &e->u.fl.s1);
            metrics_csum_merge(&g->fl_s2, &e->u.fl.q0);
            metrics_csum_merge(&g->fl_s2, &e->u.fl.q1);
            g->fl_n += e->u.fl.n;
            break;
        }
    }
}

void lp_cmp_hist_init(void)
{
    pthread_once(&hist_once, hist_init);
}

static void slot_merge(slot_t *acc, const slot_t *s)
{
    parity_metrics_dist_merge(acc->d, s->d);
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < HBINS; b++) acc->hist[g][b] += s->hist[g][b];
    acc->hist_zero += s->hist_zero;
    parity_metrics_csum_merge(&acc->fl_s, &s->fl_s);
    parity_metrics_csum_merge(&acc->fl_s2, &s->fl_s2);
    if (s->fl_max > acc->fl_max) acc->fl_max = s->fl_max;
    acc->fl_n += s->fl_n;
}

typedef struct {
    double d;
    uint64_t ord;
    const parity_logprob_token_t *w;
} wcand_t;

static int wcand_cmp(const void *x, const void *y)
{
    const wcand_t *a = x, *b = y;
    if (a->d != b->d) return a->d > b->d ? -1 : 1;
    if (a->ord != b->ord) return a->ord < b->ord ? -1 : 1;
    return (a->w->position > b->w->position) - (a->w->position < b->w->position);
}

/* Slice i's stream-order accumulator completed with the threads' order-free parts (the
 * histogram counts are integers, exact in any order). */
static void finish_merge(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    cmp_t *c = ctx;
    for (int64_t i = b; i < e; i++) {
        slot_t *g = c->gs[i];
        if (!g) continue;
        for (int t = 0; t < c->nthreads; t++) {
            tslot_t *ts = c->th[t].slots[i];
            if (!ts) continue;
            /* the blocks' signed bins into the thread's |log r| sketch and counts first */
            metrics_shist_fold(ts->q_dlp, &(metrics_shist_t){hist_map, HBINS, ts->hc, ts->sb});
            if (ts->own) {
                struct parity_qsketch *q_dlp, *q_dp;
                metrics_dist_sketches(g->d, &q_dlp, &q_dp);
                (void)parity_metrics_qsketch_merge(q_dlp, ts->q_dlp);
                (void)parity_metrics_qsketch_merge(q_dp, ts->q_dp);
            }
            for (int l = 0; l < 4; l++) {
                const uint64_t *hc = ts->hc + l * (2 * HBINS + 1);
                for (int sg = 0; sg < 2; sg++)
                    for (int k = 0; k < HBINS; k++) g->hist[sg][k] += (double)hc[sg * HBINS + k];
                g->hist_zero += (double)hc[2 * HBINS];
            }
            if (ts->fl_max > g->fl_max) g->fl_max = ts->fl_max;
        }
    }
}

/* Slice i's summary into report slice at[i] (-1: none). */
typedef struct {
    cmp_t *c;
    const int *at;
} fin_job_t;

static void finish_summary(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    fin_job_t *j = ctx;
    cmp_t *c = j->c;
    parity_logprob_result_t *R = c->res;
    for (int64_t i = b; i < e; i++) {
        if (j->at[i] < 0) continue;
        slot_t *acc = c->gs[i];
        parity_logprob_slice_t *S = &R->slices[j->at[i]];
        snprintf(S->name, sizeof S->name, "%s", c->names[i]);
        double *F = R->fl[j->at[i]].v;
        for (int k = 0; k < LP_NF; k++) F[k] = NAN;
        if (!acc) continue;
        parity_metrics_dist_summary(acc->d, &S->m);
        memcpy(S->hist, acc->hist, sizeof S->hist);
        S->hist_zero = acc->hist_zero;
        /* Analytic floor (docs/logprob-metrics.md): independent roundings to the dtype,
         * each uniform within +-u*m, m = |a| + 1; delta is triangular on [-2um, 2um]. */
        double n = (double)acc->fl_n;
        if (n > 0) {
            double ms = parity_metrics_csum_value(&acc->fl_s) / n;
            double m2 = parity_metrics_csum_value(&acc->fl_s2) / n;
            F[LP_F_MAX_ABS] = 2.0 * acc->fl_max;
            F[LP_F_MEAN_ABS] = (2.0 / 3.0) * ms;
            F[LP_F_P50] = (2.0 - sqrt(2.0)) * ms;
            F[LP_F_P99] = 1.8 * sqrt(m2);
            F[LP_F_P999] = (2.0 - 2.0 * sqrt(0.001)) * sqrt(m2);
            F[LP_F_K1] = sqrt((2.0 / 3.0) * m2 / n);
            F[LP_F_K2] = m2 / 3.0;
            F[LP_F_K3] = m2 / 3.0;
            F[LP_F_CHI2] = (2.0 / 3.0) * m2;
        }
    }
}

void lp_cmp_finish(cmp_t *c)
{
    parity_logprob_result_t *R = c->res;
    R->slices = calloc((size_t)c->nnames, sizeof *R->slices);
    R->fl = calloc((size_t)c->nnames, sizeof *R->fl);
    int *at = malloc((size_t)(c->nnames > 0 ? c->nnames : 1) * sizeof *at);
    if (!R->slices || !R->fl || !at) {
        free(at);
        return;
    }
    /* the slices are independent: in parallel (a few hundred KiB of sketch bins each) */
    int nt = c->nnames > 1 ? c->nthreads : 1;
    parity_parallel_for(c->nnames, nt, finish_merge, c);
    if (c->overall_from_pos && c->gs[0])
        for (int b = 0; b < NPOS; b++) {
            slot_t *s = c->gs[c->sl_pos[b]];
            if (s) slot_merge(c->gs[0], s);
        }
    for (int i = 0; i < c->nnames; i++) at[i] = c->gs[i] || i == 0 ? (int)R->nslices++ : -1;
    fin_job_t fj = {c, at};
    parity_parallel_for(c->nnames, nt, finish_summary, &fj);
    free(at);
    R->floor_kind = 1;
    /* worst tokens: the W largest |delta| of the whole stream (ties: the earlier token), from
     * the threads' lists, then ordered by |delta| desc and id (stably) */
    size_t W = c->o.worst_tokens, nc = 0;
    for (int t = 0; t < c->nthreads; t++) nc += c->th[t].nworst;
    wcand_t *cand = nc ? malloc(nc * sizeof *cand) : NULL;
    if (nc && !cand) return;
    nc = 0;
    for (int t = 0; t < c->nthreads; t++)
        for (size_t i = 0; i < c->th[t].nworst; i++)
            cand[nc++] = (wcand_t){c->th[t].worstd[i], c->th[t].worstp[i], &c->th[t].worst[i]};
    if (nc) qsort(cand, nc, sizeof *cand, wcand_cmp);
    for (size_t k = 0; k < nc && k < W; k++) {
        double dd = cand[k].d;
        const parity_logprob_token_t *w = cand[k].w;
        size_t pos = R->nworst++;
        while (pos > 0 && (R->worstd[pos - 1] < dd ||
                           (R->worstd[pos - 1] == dd && strcmp(R->worst[pos - 1].id, w->id) > 0))) {
            R->worst[pos] = R->worst[pos - 1];
            R->worstd[pos] = R->worstd[pos - 1];
            pos--;
        }
        R->worst[pos] = *w;
        R->worstd[pos] = dd;
    }
    free(cand);
}

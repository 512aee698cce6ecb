/* Comparing two logprob dumps: pairing sequences by request id, tokens by position with a
 * token-id check, per-slice metric accumulation (through the metrics module) in parallel,
 * the noise floor (measured or analytic) and the verdicts. Reports: logprob_report.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logprob_cmp_impl.h"
#include "logprob_dense_impl.h"
#include "parallel.h"

parity_lp_cmp_opts_t parity_lp_cmp_default_opts(void)
{
    parity_lp_cmp_opts_t o;
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

const char *parity_lp_verdict_name(parity_lp_verdict_t v)
{
    switch (v) {
    case PARITY_LP_OK: return "ok";
    case PARITY_LP_ABOVE_FLOOR: return "above-floor";
    case PARITY_LP_ALARM: return "alarm";
    case PARITY_LP_EMPTY: return "empty";
    }
    return "?";
}

/* ---- slice registry ---------------------------------------------------------------------- */

static int reg_slice(cmp_t *c, const char *name)
{
    for (int i = 0; i < c->nnames; i++)
        if (!strcmp(c->names[i], name)) return i;
    if (c->nnames >= MAX_SLICES) return -1;
    snprintf(c->names[c->nnames], sizeof c->names[0], "%s", name);
    return c->nnames++;
}

static int pos_bucket(uint64_t p)
{
    /* [0,16) is bucket 0, then powers of two: [16,32) 1, [32,64) 2, ...: floor(log2 p) - 3 */
    if (p < 16) return 0;
    int b = 63 - __builtin_clzll(p) - 3;
    return b < NPOS - 1 ? b : NPOS - 1;
}

static void init_names(cmp_t *c)
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
static void map_mods(cmp_t *c)
{
    parity_lp_reader_t *rd[2] = {c->ra, c->rb};
    for (int s = 0; s < 2; s++)
        for (uint16_t m = 1; m < 256; m++) {
            const char *nm = parity_lp_reader_modality(rd[s], m);
            if (!nm) break;
            if (c->modmap[s][m] != 0) continue;
            char b[96];
            snprintf(b, sizeof b, "modality=%.80s", nm);
            int i = c->o.by_modality ? reg_slice(c, b) : -1;
            c->modmap[s][m] = i < 0 ? -1 : i;
        }
}

static int field_slice(cmp_t *c, const char *v)
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

static entry_t *new_entry(pair_t *pr, int si, int type)
{
    if (pr->ne == pr->ecap) {
        size_t c = pr->ecap ? pr->ecap * 2 : 64;
        entry_t *e = realloc(pr->e, c * sizeof *e);
        if (!e) return NULL;
        pr->e = e;
        pr->ecap = c;
    }
    entry_t *e = &pr->e[pr->ne++];
    e->slice = (int16_t)si;
    e->type = (uint8_t)type;
    return e;
}

/* What the runs of a pair add up over the pair: the compensated sum of log r over its finite
 * pairs and their count (its sequence statistics), and the largest |delta| of a finite pair
 * (whether the worst-token scan must look at its tokens). */
typedef struct {
    parity_csum_t slr;
    uint64_t nf;
    double mx;
} runsum_t;

/* Tokens [i0, i1) of the gathered arrays enter slice si (a run of tokens sharing it): the
 * order-free parts go to the thread's sketches and counts now, the rest is logged in the pair's
 * entries, in the order parity_metrics_dist_add_prepped / _add_seq_prepped, add_topk, add_topk_kl
 * and the floor sums of a serial run would apply it. The sequence sum of log r and the floor
 * sums are the blocks' sums combined in order (compensated), plus the tokens outside blocks;
 * with as_seq the run enters as a sequence; rs (when not NULL) collects the run's runsum_t. */
static void add_run(cmp_t *c, int t, pair_t *pr, int si, size_t i0, size_t i1, int as_seq, runsum_t *rs_out)
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
static void apply_pair(cmp_t *c, const pair_t *pr, int *nomem)
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

static int grow_thr(thr_t *T, size_t n, size_t K)
{
    if (n > T->cap) {
        size_t c = n * 2;
        double *a = realloc(T->a, c * 8), *b;
        if (!a) return -1;
        T->a = a;
        if (!(b = realloc(T->b, c * 8))) return -1;
        T->b = b;
        double **rd[7] = {&T->rec.lr, &T->rec.k3, &T->rec.rm1, &T->rec.w, &T->rec.adp, &T->rec.pa, &T->rec.pb};
        for (int k = 0; k < 7; k++) {
            double *x = realloc(*rd[k], c * sizeof *x);
            if (!x) return -1;
            *rd[k] = x;
        }
        uint8_t *u8 = realloc(T->rec.cls, c);
        if (!u8) return -1;
        T->rec.cls = u8;
        if (!(u8 = realloc(T->rec.fast, c))) return -1;
        T->rec.fast = u8;
        int *pi = realloc(T->pos, c * sizeof(int));
        if (!pi) return -1;
        T->pos = pi;
        uint64_t *pp = realloc(T->p, c * 8);
        if (!pp) return -1;
        T->p = pp;
        uint8_t *ht = realloc(T->hastop, c), *ph;
        if (!ht) return -1;
        T->hastop = ht;
        if (!(ph = realloc(T->ph, c))) return -1;
        T->ph = ph;
        int *md = realloc(T->md, c * sizeof(int));
        if (!md) return -1;
        T->md = md;
        T->cap = c;
    }
    if (K && n * K > T->topcap) {
        size_t c = n * K * 2;
        int32_t *x = realloc(T->ida, c * 4), *y;
        if (!x) return -1;
        T->ida = x;
        if (!(y = realloc(T->idb, c * 4))) return -1;
        T->idb = y;
        double *u = realloc(T->sa, c * 8), *v;
        if (!u) return -1;
        T->sa = u;
        if (!(v = realloc(T->sb, c * 8))) return -1;
        T->sb = v;
        T->topcap = c;
    }
    return 0;
}

static void esc(char *dst, size_t cap, const char *s)
{
    size_t o = 0;
    if (!s) s = "";
    for (; *s && o + 5 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\n') dst[o++] = '\\', dst[o++] = 'n';
        else if (ch == '\t') dst[o++] = '\\', dst[o++] = 't';
        else if (ch < 32 || ch == 127) o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
        else dst[o++] = (char)ch;
    }
    dst[o] = 0;
}

/* Token i's id for the report: -1 for a token without one (no id or text: the direct path
 * leaves those keys unwritten; text only: the key is a hash, meaningless to a reader, who gets
 * the text instead). */
static int64_t seq_key(const parity_lp_seq_t *s, size_t i)
{
    return (s->flags[i] & (PARITY_LP_KEY_NONE | PARITY_LP_KEY_TEXT)) ? -1 : s->key[i];
}

/* Keep the thread's W largest |delta| (ties: the earlier token in the stream; a thread sees its
 * pairs in stream order). */
static void worst_add(cmp_t *c, thr_t *T, const parity_lp_seq_t *sa, const parity_lp_seq_t *sb, size_t i,
                      uint64_t ord)
{
    size_t W = c->o.worst_tokens;
    if (!W) return;
    double d = fabs(sb->lp[i] - sa->lp[i]);
    if (d != d) d = INFINITY;
    if (T->nworst == W && !(d > T->worstd[W - 1])) return;
    size_t pos = T->nworst < W ? T->nworst++ : W - 1;
    while (pos > 0 && T->worstd[pos - 1] < d) {
        T->worst[pos] = T->worst[pos - 1];
        T->worstd[pos] = T->worstd[pos - 1];
        T->worstp[pos] = T->worstp[pos - 1];
        pos--;
    }
    parity_lp_token_t *w = &T->worst[pos];
    T->worstd[pos] = d;
    T->worstp[pos] = ord;
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", sa->id);
    w->position = i;
    w->key_a = seq_key(sa, i);
    w->key_b = seq_key(sb, i);
    w->lp_a = sa->lp[i];
    w->lp_b = sb->lp[i];
    const parity_lp_seq_t *ts = parity_lp_seq_text(sa, i) ? sa : sb;
    esc(w->text, sizeof w->text, parity_lp_seq_text(ts, i));
    if (parity_lp_seq_text(ts, i)) {
        char buf[400] = "";
        size_t lo = i >= 4 ? i - 4 : 0, hi = i + 3 < ts->n ? i + 3 : ts->n - 1;
        for (size_t j = lo; j <= hi; j++) {
            const char *tx = parity_lp_seq_text(ts, j);
            size_t L = strlen(buf);
            if (L + 40 >= sizeof buf) break;
            snprintf(buf + L, sizeof buf - L, j == i ? "[%.30s]" : "%.30s", tx ? tx : "?");
        }
        esc(w->context, sizeof w->context, buf);
    }
    uint16_t ma = parity_lp_seq_mod(sa, i), m = ma ? ma : parity_lp_seq_mod(sb, i);
    const char *mn = parity_lp_reader_modality(ma ? c->ra : c->rb, m);
    snprintf(w->slice_mod, sizeof w->slice_mod, "%s", mn ? mn : "");
}

/* Compare one pair: divergence check, gather present tokens, accumulate per slice. */
static void do_pair(cmp_t *c, int t, pair_t *pr)
{
    thr_t *T = &c->th[t];
    const parity_lp_seq_t *sa = pr->a, *sb = pr->b;
    size_t n = sa->n < sb->n ? sa->n : sb->n;
    size_t lim = n, nscan = n;
    pr->div = 0;
    uint64_t unkeyed = 0; /* a local: pr->unkeyed++ in the loop is a store per token */
    /* in the same pass: whether the pair is dense (see below) up to the divergence */
    uint8_t fand = 0xff, forr = 0;
    unsigned mor = 0;
    const uint8_t *fla = sa->flags, *flb = sb->flags;
    /* a plain sequence's mod[] is not written (no modality anywhere in it) */
    const uint16_t *ma = sa->plain ? NULL : sa->mod, *mb = sb->plain ? NULL : sb->mod;
    const int64_t *ka = sa->key, *kb = sb->key;
    if (n > 0 && sa->plain && sb->plain) {
        /* every token alike on each side (dense readers): one comparability test, and the keys
         * compared by memcmp, the first mismatch looked for only when there is one */
        uint8_t fa = fla[0], fb = flb[0];
        int comparable = !((fa | fb) & PARITY_LP_KEY_NONE) & ((fa & PARITY_LP_KEY_TEXT) == (fb & PARITY_LP_KEY_TEXT));
        if (comparable && memcmp(ka, kb, n * sizeof *ka) != 0) {
            lim = 0;
            while (ka[lim] == kb[lim]) lim++;
            pr->div = 1;
        }
        unkeyed = comparable ? 0 : lim;
        fand = fa & fb;
        forr = fa | fb;
        nscan = 0; /* the loop below has nothing left to do */
    }
    for (size_t i = 0; i < nscan; i++) {
        uint8_t fa = fla[i], fb = flb[i];
        int comparable = !((fa | fb) & PARITY_LP_KEY_NONE) & ((fa & PARITY_LP_KEY_TEXT) == (fb & PARITY_LP_KEY_TEXT));
        if (comparable && ka[i] != kb[i]) {
            lim = i;
            pr->div = 1;
            break;
        }
        unkeyed += (uint64_t)!comparable;
        fand &= fa & fb;
        forr |= fa | fb;
        mor |= (ma ? (unsigned)ma[i] : 0u) | (mb ? (unsigned)mb[i] : 0u);
    }
    pr->unkeyed += unkeyed;
    if (!pr->div && sa->n != sb->n) pr->div = 1;
    pr->divpos = lim;
    pr->n_a = sa->n;
    pr->n_b = sb->n;
    if (pr->div) {
        parity_lp_divergence_t *v = &pr->dv;
        memset(v, 0, sizeof *v);
        snprintf(v->id, sizeof v->id, "%s", sa->id);
        v->position = lim;
        v->key_a = lim < sa->n ? seq_key(sa, lim) : INT64_MIN;
        v->key_b = lim < sb->n ? seq_key(sb, lim) : INT64_MIN;
        esc(v->text_a, sizeof v->text_a, parity_lp_seq_text(sa, lim));
        esc(v->text_b, sizeof v->text_b, parity_lp_seq_text(sb, lim));
        v->n_a = sa->n;
        v->n_b = sb->n;
    }
    size_t K = sa->k > sb->k ? sa->k : sb->k;
    if (grow_thr(T, lim + 1, K)) {
        T->nomem = 1;
        return;
    }
    T->K = (sa->k && sb->k) ? K : 0;
    if (T->K && lim + 1 > pr->tcap) {
        size_t cp = (lim + 1) * 2;
        double *ov = realloc(pr->ov, cp * sizeof *ov), *tk;
        if (ov) pr->ov = ov;
        tk = ov ? realloc(pr->tkl, cp * sizeof *tk) : NULL;
        if (tk) pr->tkl = tk;
        uint8_t *t1 = tk ? realloc(pr->t1, cp) : NULL;
        if (!t1) {
            T->nomem = 1;
            return;
        }
        pr->t1 = t1;
        pr->tcap = cp;
    }
    size_t W = c->o.worst_tokens, m = 0;
    pr->ne = 0;
    const double *lpa = sa->lp, *lpb = sb->lp;
    /* Dense pair (the common case for npy/safetensors and parity's JSONL): every position
     * present on both sides, no phase, no modality, no top-k. Then the gathered arrays are the
     * sequences' own and the position slices' runs follow from the indices. */
    int dense = !T->K && (fand & PARITY_LP_PRESENT) && !(forr & (PARITY_LP_PREFILL | PARITY_LP_DECODE)) && !mor;
    T->dense = dense;
    /* worst-token threshold in a local: the candidates must beat the current W-th */
    double wthr = T->nworst < W ? -1.0 : W ? T->worstd[W - 1] : 0.0;
    if (dense) {
        T->ga = lpa;
        T->gb = lpb;
        m = lim; /* the worst tokens: after the runs, which give the pair's largest |delta| */
    } else {
    /* locals: the stores below would otherwise make the compiler reload every pointer */
    double *restrict GA = T->a, *restrict GB = T->b;
    int *restrict GPOS = T->pos, *restrict GMD = T->md;
    uint8_t *restrict GPH = T->ph, *restrict GHT = T->hastop;
    const int *mm0 = c->modmap[0], *mm1 = c->modmap[1];
    T->ga = GA;
    T->gb = GB;
    uint64_t absent = 0;
    for (size_t i = 0; i < lim; i++) {
        if (!(fla[i] & PARITY_LP_PRESENT) || !(flb[i] & PARITY_LP_PRESENT)) {
            absent++;
            continue;
        }
        double a = lpa[i], b = lpb[i];
        GA[m] = a;
        GB[m] = b;
        GPOS[m] = pos_bucket(i);
        uint8_t f = fla[i] | flb[i];
        GPH[m] = (f & PARITY_LP_PREFILL) ? 1 : (f & PARITY_LP_DECODE) ? 2 : 0;
        uint16_t am = sa->plain ? 0 : sa->mod[i], bm = sb->plain ? 0 : sb->mod[i];
        int md = am ? mm0[am] : bm ? mm1[bm] : -1;
        GMD[m] = md;
        GHT[m] = 0;
        if (T->K) {
            int32_t *ia = T->ida + m * K, *ib = T->idb + m * K;
            double *xa = T->sa + m * K, *xb = T->sb + m * K;
            int any = 0;
            for (size_t j = 0; j < K; j++) {
                ia[j] = j < sa->k ? sa->top_id[i * sa->k + j] : -1;
                ib[j] = j < sb->k ? sb->top_id[i * sb->k + j] : -1;
                any |= ia[j] >= 0 && ib[j] >= 0;
                xa[j] = xb[j] = -INFINITY;
            }
            /* truncated KL over S = ids in both lists (any partition gives a lower bound) */
            size_t s = 0;
            for (size_t j = 0; j < sb->k; j++) {
                int32_t id = sb->top_id[i * sb->k + j];
                if (id < 0) continue;
                for (size_t q = 0; q < sa->k; q++)
                    if (sa->top_id[i * sa->k + q] == id) {
                        xa[s] = sa->top_lp[i * sa->k + q];
                        xb[s] = sb->top_lp[i * sb->k + j];
                        s++;
                        break;
                    }
            }
            GHT[m] = (uint8_t)any;
            if (any) {
                /* what parity_metrics_dist_add_topk / _add_topk_kl compute for this token */
                pr->t1[m] = ia[0] >= 0 && ia[0] == ib[0];
                pr->ov[m] = parity_metrics_topk_overlap(ia, ib, K);
                pr->tkl[m] = parity_metrics_topk_kl(xa, xb, K);
            }
        }
        if (W && fabs(b - a) > wthr && isfinite(a) && isfinite(b)) {
            worst_add(c, T, sa, sb, i, pr->ord);
            wthr = T->nworst < W ? -1.0 : T->worstd[W - 1];
        }
        m++;
    }
    pr->absent += absent;
    }
    pr->compared = m;
    metrics_prep_soa(T->ga, T->gb, m, &T->rec);
    if (m == 0 && n == 0) {
        /* still a sequence: counts as empty in the overall sequence statistics */
    }
    /* overall and the --slice-by slice take the whole sequence; with overall_from_pos the
     * position slices partition the tokens and overall's token statistics are their merge
     * (finish): only the sequence enters overall, from the position runs' sums */
    runsum_t prs = {{0, 0}, 0, 0.0};
    if (!c->overall_from_pos) add_run(c, t, pr, 0, 0, m, 1, &prs);
    if (c->o.by_field) add_run(c, t, pr, pr->field_slice, 0, m, 1, NULL);
    /* token slices: runs of equal slice */
    for (int kind = 0; kind < 3; kind++) {
        size_t i = 0;
        while (i < m) {
            int si;
            size_t j = i + 1;
            if (kind == 0 && dense) {
                /* positions are the indices: the run ends at the next bucket boundary */
                int b = pos_bucket(i);
                si = c->sl_pos[b];
                j = b == NPOS - 1 ? m : b == 0 ? 16 : (size_t)16 << b;
                if (j > m) j = m;
            } else if (kind == 0) {
                si = c->sl_pos[T->pos[i]];
                while (j < m && T->pos[j] == T->pos[i]) j++;
            } else if (dense) {
                break; /* no phase, no modality: no runs */
            } else if (kind == 1) {
                si = T->ph[i] == 1 ? c->sl_prefill : T->ph[i] == 2 ? c->sl_decode : -1;
                while (j < m && T->ph[j] == T->ph[i]) j++;
            } else {
                si = T->md[i];
                while (j < m && T->md[j] == T->md[i]) j++;
            }
            add_run(c, t, pr, si, i, j, 0, kind == 0 && c->overall_from_pos ? &prs : NULL);
            i = j;
        }
    }
    if (c->overall_from_pos && m > 0) {
        entry_t *e = new_entry(pr, 0, E_SEQ);
        if (!e) {
            T->nomem = 1;
            return;
        }
        e->u.seq.n = m;
        e->u.seq.nf = prs.nf;
        e->u.seq.slr = metrics_csum_value(&prs.slr);
    }
    /* dense pairs: the worst tokens; once W tokens are kept most pairs have nothing above the
     * threshold, which the runs' largest |delta| shows without a look per token */
    if (dense && W && (T->nworst < W || prs.mx > wthr))
        for (size_t i = 0; i < m; i++) {
            double a = lpa[i], b = lpb[i];
            if (fabs(b - a) > wthr && isfinite(a) && isfinite(b)) {
                worst_add(c, T, sa, sb, i, pr->ord);
                wthr = T->nworst < W ? -1.0 : T->worstd[W - 1];
            }
        }
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
    while ((i = parity_steal_next(&j->st, t)) >= 0) do_pair(j->c, t, &j->pairs[i]);
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

static int map_put(map_t *m, parity_lp_seq_t *s, const char *key)
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

static parity_lp_seq_t *map_take(map_t *m, const char *id)
{
    if (!m->nb) return NULL;
    size_t h = hstr(id) & (m->nb - 1);
    for (node_t **p = &m->b[h]; *p; p = &(*p)->next)
        if (!strcmp((*p)->key, id)) {
            node_t *x = *p;
            parity_lp_seq_t *s = x->s;
            *p = x->next;
            free(x->key);
            free(x);
            m->n--;
            return s;
        }
    return NULL;
}

static void seq_destroy(parity_lp_seq_t *s)
{
    parity_lp_seq_free(s);
    free(s);
}

/* Keep a compared sequence's buffers for a later batch (no fresh pages per batch); the pool
 * holds at most what two batches read. */
static void seq_recycle(cmp_t *c, parity_lp_seq_t *s)
{
    if (c->npool == c->poolcap && c->poolcap < 2 * 2 * 65536) {
        size_t nc = c->poolcap ? c->poolcap * 2 : 256;
        parity_lp_seq_t **p = realloc(c->pool, nc * sizeof *p);
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

static const char *match_key(cmp_t *c, const parity_lp_seq_t *s, char *buf, size_t cap)
{
    if (!c->ordinal) return s->id;
    snprintf(buf, cap, "#%llu", (unsigned long long)s->ordinal);
    return buf;
}

double lp_unit_roundoff(const char *dtype)
{
    if (!dtype) return ldexp(1, -24);
    if (!strcmp(dtype, "bf16")) return ldexp(1, -8);
    if (!strcmp(dtype, "fp16")) return ldexp(1, -11);
    if (!strcmp(dtype, "fp64")) return ldexp(1, -53);
    if (!strcmp(dtype, "tf32")) return ldexp(1, -11);
    return ldexp(1, -24); /* fp32, and JSON text (engines print fp32 values) */
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
    parity_lp_reader_t *r = side ? c->rb : c->ra;
    size_t M = 1024;
    if (r->fmt == PARITY_LP_NPY || r->fmt == PARITY_LP_SAFETENSORS)
        M = r->ncols ? c->o.batch_tokens / (size_t)r->ncols : 1024;
    if (M < 1) M = 1;
    /* enough rows for every thread to have a pair (pairs are compared in parallel) */
    if (M < 2 * (size_t)c->nthreads) M = 2 * (size_t)c->nthreads;
    if (M > 65536) M = 65536;
    if (!c->buf[side] || c->bufn[side] < M) {
        parity_lp_seq_t *b = realloc(c->buf[side], M * sizeof *b);
        if (!b) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
        for (size_t i = c->bufn[side]; i < M; i++) parity_lp_seq_init(&b[i]);
        c->buf[side] = b;
        c->bufn[side] = M;
    }
    *Mout = M;
    return PARITY_OK;
}

/* The got sequences read into the side's buffer, taken out as individually owned sequences. */
static parity_status_t batch_take(cmp_t *c, int side, size_t got, parity_lp_seq_t ***out, size_t *n,
                                  parity_diag_t *d)
{
    if (got == 0) {
        c->eof[side] = 1;
        return PARITY_OK;
    }
    parity_lp_seq_t **v = malloc(got * sizeof *v);
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
            parity_lp_seq_init(v[i]);
        }
        parity_lp_seq_t old = *v[i];
        *v[i] = c->buf[side][i]; /* take ownership; the slot gets a recycled sequence's buffers */
        c->buf[side][i] = old;
    }
    if (side) c->res->counts.n_seq_b += got;
    else c->res->counts.n_seq_a += got;
    *out = v;
    *n = got;
    return PARITY_OK;
}

static parity_status_t read_batch(cmp_t *c, int side, parity_lp_seq_t ***out, size_t *n, parity_diag_t *d)
{
    parity_lp_reader_t *r = side ? c->rb : c->ra;
    *n = 0;
    if (c->eof[side]) return PARITY_OK;
    size_t M, got = 0;
    parity_status_t st = batch_prep(c, side, &M, d);
    if (!st) st = parity_lp_next_batch(r, c->buf[side], M, &got, d);
    return st ? st : batch_take(c, side, got, out, n, d);
}

static int is_jsonl(const parity_lp_reader_t *r)
{
    return r->fmt != PARITY_LP_NPY && r->fmt != PARITY_LP_SAFETENSORS;
}

/* A batch of each side; two JSONL dumps have their lines parsed in one parallel section. On an
 * error nothing is returned (*va and *vb stay NULL). */
static parity_status_t read_batches(cmp_t *c, parity_lp_seq_t ***va, size_t *na, parity_lp_seq_t ***vb, size_t *nb,
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

/* A pair in a reused slot: its entry and top-k buffers are kept. */
static void set_pair(pair_t *p, parity_lp_seq_t *a, parity_lp_seq_t *b)
{
    p->a = a;
    p->b = b;
    p->field_slice = -1;
    p->div = 0;
    p->divpos = 0;
    p->compared = p->absent = p->unkeyed = 0;
    p->ne = 0;
}

/* A compared pair into the counts and the divergence list (serial, in pair order). */
static void account_pair(cmp_t *c, const pair_t *p)
{
    parity_lp_result_t *R = c->res;
    R->counts.n_pairs++;
    R->counts.n_tokens_compared += p->compared;
    R->counts.n_tokens_absent += p->absent;
    R->counts.n_unkeyed += p->unkeyed;
    if (p->div) {
        uint64_t mx = p->n_a > p->n_b ? p->n_a : p->n_b;
        R->counts.n_diverged++;
        R->counts.n_tokens_after_divergence += mx - p->divpos;
        if (R->ndiv < MAX_DIV) R->div[R->ndiv++] = p->dv;
    }
}

static void free_pairs(pair_t *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(pairs[i].e);
        free(pairs[i].ov);
        free(pairs[i].tkl);
        free(pairs[i].t1);
    }
    free(pairs);
}

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
        for (size_t i = 0; i < j->nprev && !j->nomem; i++) apply_pair(c, &j->prev[i], &j->nomem);
        for (size_t i = 0; i < j->nprev; i++) account_pair(c, &j->prev[i]);
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
            set_pair(p, &T->da, &T->db);
            p->ord = j->ord0 + i;
            do_pair(c, t, p);
            p->a = p->b = NULL; /* the buffers are the thread's, reused for its next row */
        }
    }
}

static int direct_ok(const cmp_t *c)
{
    return c->ordinal && !c->o.by_field && lp_dense_direct_ok(c->ra) && lp_dense_direct_ok(c->rb) &&
           c->ra->nrows == c->rb->nrows && c->ra->ncols == c->rb->ncols && c->ra->ordinal == 0 &&
           c->rb->ordinal == 0;
}

static parity_status_t run_direct(cmp_t *c, parity_diag_t *d)
{
    parity_lp_reader_t *ra = c->ra, *rb = c->rb;
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
    for (size_t i = 0; i < nprev && !nomem; i++) apply_pair(c, &pairs[!cur][i], &nomem);
    if (!nomem)
        for (size_t i = 0; i < nprev; i++) account_pair(c, &pairs[!cur][i]);
    if (nomem && !out) out = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    c->eof[0] = c->eof[1] = 1;
done:
    free_pairs(pairs[0], pairs[0] ? M : 0);
    free_pairs(pairs[1], pairs[1] ? M : 0);
    free(st);
    free(bad);
    free(why);
    return out;
}

static parity_status_t run(cmp_t *c, parity_diag_t *d)
{
    if (direct_ok(c)) return run_direct(c, d);
    parity_status_t st = PARITY_OK;
    pair_t *pairs = NULL;
    size_t npairs = 0, pcap = 0;
    while (!c->eof[0] || !c->eof[1]) {
        parity_lp_seq_t **va = NULL, **vb = NULL;
        size_t na = 0, nb = 0;
        if ((st = read_batches(c, &va, &na, &vb, &nb, d))) break;
        map_mods(c);
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
            parity_lp_seq_t *o = map_take(&c->pend[1], match_key(c, va[i], kb, sizeof kb));
            if (o) set_pair(&pairs[npairs++], va[i], o);
            else if (map_put(&c->pend[0], va[i], match_key(c, va[i], kb, sizeof kb))) st = PARITY_E_NOMEM;
        }
        for (size_t i = 0; i < nb; i++) {
            parity_lp_seq_t *o = map_take(&c->pend[0], match_key(c, vb[i], kb, sizeof kb));
            if (o) set_pair(&pairs[npairs++], o, vb[i]);
            else if (map_put(&c->pend[1], vb[i], match_key(c, vb[i], kb, sizeof kb))) st = PARITY_E_NOMEM;
        }
        free(va);
        free(vb);
        if (st) {
            parity_diag_set(d, st, "out of memory");
            break;
        }
        for (size_t i = 0; i < npairs; i++)
            pairs[i].field_slice = field_slice(c, pairs[i].a->field ? pairs[i].a->field : pairs[i].b->field);
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
        for (size_t i = 0; i < npairs && !nomem; i++) apply_pair(c, &pairs[i], &nomem);
        for (int t = 0; t < c->nthreads; t++)
            if (c->th[t].nomem) nomem = 1;
        if (nomem) st = parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
        for (size_t i = 0; i < npairs; i++) {
            pair_t *p = &pairs[i];
            account_pair(c, p);
            seq_recycle(c, p->a);
            seq_recycle(c, p->b);
        }
        if (st) break;
    }
    free_pairs(pairs, pcap);
    c->res->counts.n_only_a = c->pend[0].n;
    c->res->counts.n_only_b = c->pend[1].n;
    return st;
}

/* An input error when there is nothing to compare (logprob.h, parity_lp_compare): a verdict on
 * no tokens would read as a result. */
static parity_status_t nothing_to_compare(const parity_lp_result_t *R, parity_diag_t *d)
{
    const parity_lp_counts_t *n = &R->counts;
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
    const parity_lp_token_t *w;
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
    parity_lp_result_t *R = c->res;
    for (int64_t i = b; i < e; i++) {
        if (j->at[i] < 0) continue;
        slot_t *acc = c->gs[i];
        parity_lp_slice_t *S = &R->slices[j->at[i]];
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

static void finish(cmp_t *c)
{
    parity_lp_result_t *R = c->res;
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
        const parity_lp_token_t *w = cand[k].w;
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

parity_status_t parity_lp_compare(parity_lp_reader_t *a, parity_lp_reader_t *b, const parity_lp_cmp_opts_t *opts,
                                  parity_lp_result_t **out, parity_diag_t *diag)
{
    if (!a || !b || !out) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs compare: NULL argument");
    *out = NULL;
    cmp_t *c = calloc(1, sizeof *c);
    parity_lp_result_t *R = calloc(1, sizeof *R);
    if (!c || !R) {
        free(c);
        free(R);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    c->o = opts ? *opts : parity_lp_cmp_default_opts();
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
    init_names(c);
    c->overall_from_pos = c->o.by_position;
    for (int b = 0; b < NPOS; b++)
        if (c->sl_pos[b] < 0) c->overall_from_pos = 0;
    pthread_once(&hist_once, hist_init);
    parity_status_t st = PARITY_OK;
    for (int t = 0; t < c->nthreads && !st; t++) {
        c->th[t].slots = calloc(MAX_SLICES, sizeof(slot_t *));
        c->th[t].worst = calloc(MAX_WORST + 1, sizeof(parity_lp_token_t));
        c->th[t].worstd = calloc(MAX_WORST + 1, sizeof(double));
        c->th[t].worstp = calloc(MAX_WORST + 1, sizeof(uint64_t));
        if (!c->th[t].slots || !c->th[t].worst || !c->th[t].worstd || !c->th[t].worstp)
            st = parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    if (!st) st = run(c, diag);
    if (!st) st = nothing_to_compare(R, diag);
    if (!st) {
        finish(c);
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
        parity_lp_seq_free(&T->da);
        parity_lp_seq_free(&T->db);
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
        for (size_t i = 0; i < c->bufn[s]; i++) parity_lp_seq_free(&c->buf[s][i]);
        free(c->buf[s]);
    }
    free(c);
    if (st) {
        parity_lp_result_free(R);
        return st;
    }
    *out = R;
    return PARITY_OK;
}

void parity_lp_result_free(parity_lp_result_t *r)
{
    if (!r) return;
    free(r->slices);
    free(r->fl);
    free(r);
}

/* ---- floor and verdicts ------------------------------------------------------------------ */

double lp_metric(const parity_dist_summary_t *m, int k)
{
    switch (k) {
    case LP_F_MAX_ABS: return m->abs_dlogprob_max;
    case LP_F_MEAN_ABS: return m->abs_dlogprob_mean;
    case LP_F_P50: return m->abs_dlogprob_p50;
    case LP_F_P99: return m->abs_dlogprob_p99;
    case LP_F_P999: return m->abs_dlogprob_p999;
    case LP_F_K1: return fabs(m->k1_mean);
    case LP_F_K2: return m->k2_mean;
    case LP_F_K3: return m->k3_mean;
    case LP_F_CHI2: return m->chi2_mean;
    case LP_F_DPROB_MAX: return m->abs_dprob_max;
    case LP_F_DPROB_MEAN: return m->abs_dprob_mean;
    case LP_F_DLOGPPL: return m->dlogppl_max_abs;
    case LP_F_TKL: return m->tkl_mean;
    }
    return NAN;
}

const char *lp_metric_name(int k)
{
    static const char *n[LP_NF] = {"max_abs_dlogprob", "mean_abs_dlogprob", "p50_abs_dlogprob", "p99_abs_dlogprob",
                                   "p999_abs_dlogprob", "abs_k1", "k2", "k3", "chi2_mean", "max_abs_dprob",
                                   "mean_abs_dprob", "max_abs_dlogppl", "tkl_mean"};
    return k >= 0 && k < LP_NF ? n[k] : "";
}

parity_status_t parity_lp_result_set_floor(parity_lp_result_t *r, parity_lp_result_t *floor)
{
    if (!r || !floor) return PARITY_E_INVALID;
    for (size_t i = 0; i < r->nslices; i++) {
        double *F = r->fl[i].v;
        const parity_lp_slice_t *fs = NULL;
        for (size_t j = 0; j < floor->nslices; j++)
            if (!strcmp(floor->slices[j].name, r->slices[i].name)) fs = &floor->slices[j];
        for (int k = 0; k < LP_NF; k++) F[k] = fs && fs->m.n_finite ? lp_metric(&fs->m, k) : NAN;
    }
    r->floor_kind = 2;
    snprintf(r->name_floor, sizeof r->name_floor, "%s", floor->name_b);
    return PARITY_OK;
}

parity_lp_verdict_t parity_lp_result_verdict(const parity_lp_result_t *r, size_t i)
{
    if (!r || i >= r->nslices) return PARITY_LP_EMPTY;
    const parity_dist_summary_t *m = &r->slices[i].m;
    if (m->n_finite == 0 && m->n_invalid == 0 && m->n_inf_mismatch == 0) return PARITY_LP_EMPTY;
    if (m->n_inf_mismatch || m->n_invalid) return PARITY_LP_ALARM;
    const double *F = r->fl[i].v;
    double fac = r->opts.floor_factor;
    /* A metric is "explained by the floor" when it is within factor x floor. */
    int k3_above = !(m->k3_mean <= fac * F[LP_F_K3]);
    int max_above = !(m->abs_dlogprob_max <= fac * F[LP_F_MAX_ABS]);
    int mean_above = !(m->abs_dlogprob_mean <= fac * F[LP_F_MEAN_ABS]);
    if ((m->k3_mean > r->opts.k3_alarm && k3_above) || (m->abs_dlogprob_max > r->opts.dlogprob_alarm && max_above))
        return PARITY_LP_ALARM;
    if (k3_above || mean_above) return PARITY_LP_ABOVE_FLOOR;
    return PARITY_LP_OK;
}

int parity_lp_result_exit_code(const parity_lp_result_t *r)
{
    if (!r) return PARITY_EXIT_INPUT;
    if (r->counts.n_diverged || r->counts.n_only_a || r->counts.n_only_b) return PARITY_EXIT_VERDICT;
    for (size_t i = 0; i < r->nslices; i++)
        if (parity_lp_result_verdict(r, i) == PARITY_LP_ALARM) return PARITY_EXIT_VERDICT;
    return PARITY_EXIT_OK;
}

size_t parity_lp_result_nslices(const parity_lp_result_t *r)
{
    return r ? r->nslices : 0;
}

const parity_lp_slice_t *parity_lp_result_slice(const parity_lp_result_t *r, size_t i)
{
    return r && i < r->nslices ? &r->slices[i] : NULL;
}

size_t parity_lp_result_nworst(const parity_lp_result_t *r)
{
    return r ? r->nworst : 0;
}

const parity_lp_token_t *parity_lp_result_worst(const parity_lp_result_t *r, size_t i)
{
    return r && i < r->nworst ? &r->worst[i] : NULL;
}

size_t parity_lp_result_ndiv(const parity_lp_result_t *r)
{
    return r ? r->ndiv : 0;
}

const parity_lp_divergence_t *parity_lp_result_div(const parity_lp_result_t *r, size_t i)
{
    return r && i < r->ndiv ? &r->div[i] : NULL;
}

const parity_lp_counts_t *parity_lp_result_counts(const parity_lp_result_t *r)
{
    return r ? &r->counts : NULL;
}

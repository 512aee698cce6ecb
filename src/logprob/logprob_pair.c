/* Comparing one pair of sequences (one request, A and B), in any thread: the token-id check
 * up to the first divergence, gathering the tokens present on both sides with their position,
 * phase, modality and top-k quantities, the runs of tokens that enter each slice
 * (logprob_slices.c), the worst tokens; and a pair's life in the serial part (its slot reused,
 * its counts and divergence into the result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_cmp_impl.h"

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
static int64_t seq_key(const parity_logprob_seq_t *s, size_t i)
{
    return (s->flags[i] & (PARITY_LOGPROB_KEY_NONE | PARITY_LOGPROB_KEY_TEXT)) ? -1 : s->key[i];
}

/* (d, ord, position) ranks before (d2, ord2, position2): larger |delta| first, ties by the
 * pair's place in the stream, then the position. A total order on the stream's tokens, so every
 * thread keeps the same candidates whatever pairs work stealing hands it, in whatever order, and
 * the merged list is the same for any thread count. */
static int worst_before(double d, uint64_t ord, size_t pos, double d2, uint64_t ord2, size_t pos2)
{
    if (d != d2) return d > d2;
    if (ord != ord2) return ord < ord2;
    return pos < pos2;
}

/* Whether a token of |delta| d in the pair of stream place ord may enter the thread's list: above
 * the W-th kept, or tied with it from an earlier pair (a later position of the same pair loses
 * the tie). Equal deltas are common (identical dumps: all zero), so the tie test stays cheap. */
static inline int worst_cand(const thr_t *T, size_t W, double d, double wthr, uint64_t ord)
{
    return d > wthr || (d == wthr && T->nworst == W && ord < T->worstp[W - 1]);
}

/* Keep the thread's W first tokens in worst_before's order. */
static void worst_add(cmp_t *c, thr_t *T, const parity_logprob_seq_t *sa, const parity_logprob_seq_t *sb, size_t i,
                      uint64_t ord)
{
    size_t W = c->o.worst_tokens;
    if (!W) return;
    double d = fabs(sb->lp[i] - sa->lp[i]);
    if (d != d) d = INFINITY;
    if (T->nworst == W &&
        !worst_before(d, ord, i, T->worstd[W - 1], T->worstp[W - 1], T->worst[W - 1].position))
        return;
    size_t pos = T->nworst < W ? T->nworst++ : W - 1;
    while (pos > 0 && worst_before(d, ord, i, T->worstd[pos - 1], T->worstp[pos - 1],
                                   T->worst[pos - 1].position)) {
        T->worst[pos] = T->worst[pos - 1];
        T->worstd[pos] = T->worstd[pos - 1];
        T->worstp[pos] = T->worstp[pos - 1];
        pos--;
    }
    parity_logprob_token_t *w = &T->worst[pos];
    T->worstd[pos] = d;
    T->worstp[pos] = ord;
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", sa->id);
    w->position = i;
    w->key_a = seq_key(sa, i);
    w->key_b = seq_key(sb, i);
    w->lp_a = sa->lp[i];
    w->lp_b = sb->lp[i];
    const parity_logprob_seq_t *ts = parity_logprob_seq_text(sa, i) ? sa : sb;
    esc(w->text, sizeof w->text, parity_logprob_seq_text(ts, i));
    if (parity_logprob_seq_text(ts, i)) {
        char buf[400] = "";
        size_t lo = i >= 4 ? i - 4 : 0, hi = i + 3 < ts->n ? i + 3 : ts->n - 1;
        for (size_t j = lo; j <= hi; j++) {
            const char *tx = parity_logprob_seq_text(ts, j);
            size_t L = strlen(buf);
            if (L + 40 >= sizeof buf) break;
            snprintf(buf + L, sizeof buf - L, j == i ? "[%.30s]" : "%.30s", tx ? tx : "?");
        }
        esc(w->context, sizeof w->context, buf);
    }
    uint16_t ma = parity_logprob_seq_mod(sa, i), m = ma ? ma : parity_logprob_seq_mod(sb, i);
    const char *mn = parity_logprob_reader_modality(ma ? c->ra : c->rb, m);
    snprintf(w->slice_mod, sizeof w->slice_mod, "%s", mn ? mn : "");
}

/* Compare one pair: divergence check, gather present tokens, accumulate per slice. */
void lp_cmp_pair(cmp_t *c, int t, pair_t *pr)
{
    thr_t *T = &c->th[t];
    const parity_logprob_seq_t *sa = pr->a, *sb = pr->b;
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
        int comparable = !((fa | fb) & PARITY_LOGPROB_KEY_NONE) & ((fa & PARITY_LOGPROB_KEY_TEXT) == (fb & PARITY_LOGPROB_KEY_TEXT));
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
        int comparable = !((fa | fb) & PARITY_LOGPROB_KEY_NONE) & ((fa & PARITY_LOGPROB_KEY_TEXT) == (fb & PARITY_LOGPROB_KEY_TEXT));
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
        parity_logprob_divergence_t *v = &pr->dv;
        memset(v, 0, sizeof *v);
        snprintf(v->id, sizeof v->id, "%s", sa->id);
        v->position = lim;
        v->key_a = lim < sa->n ? seq_key(sa, lim) : INT64_MIN;
        v->key_b = lim < sb->n ? seq_key(sb, lim) : INT64_MIN;
        esc(v->text_a, sizeof v->text_a, parity_logprob_seq_text(sa, lim));
        esc(v->text_b, sizeof v->text_b, parity_logprob_seq_text(sb, lim));
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
    int dense = !T->K && (fand & PARITY_LOGPROB_PRESENT) && !(forr & (PARITY_LOGPROB_PREFILL | PARITY_LOGPROB_DECODE)) && !mor;
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
        if (!(fla[i] & PARITY_LOGPROB_PRESENT) || !(flb[i] & PARITY_LOGPROB_PRESENT)) {
            absent++;
            continue;
        }
        double a = lpa[i], b = lpb[i];
        GA[m] = a;
        GB[m] = b;
        GPOS[m] = pos_bucket(i);
        uint8_t f = fla[i] | flb[i];
        GPH[m] = (f & PARITY_LOGPROB_PREFILL) ? 1 : (f & PARITY_LOGPROB_DECODE) ? 2 : 0;
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
        if (W && worst_cand(T, W, fabs(b - a), wthr, pr->ord) && isfinite(a) && isfinite(b)) {
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
    if (!c->overall_from_pos) lp_cmp_add_run(c, t, pr, 0, 0, m, 1, &prs);
    if (c->o.by_field) lp_cmp_add_run(c, t, pr, pr->field_slice, 0, m, 1, NULL);
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
            lp_cmp_add_run(c, t, pr, si, i, j, 0, kind == 0 && c->overall_from_pos ? &prs : NULL);
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
    if (dense && W && (T->nworst < W || worst_cand(T, W, prs.mx, wthr, pr->ord)))
        for (size_t i = 0; i < m; i++) {
            double a = lpa[i], b = lpb[i];
            if (worst_cand(T, W, fabs(b - a), wthr, pr->ord) && isfinite(a) && isfinite(b)) {
                worst_add(c, T, sa, sb, i, pr->ord);
                wthr = T->nworst < W ? -1.0 : T->worstd[W - 1];
            }
        }
}

/* A pair in a reused slot: its entry and top-k buffers are kept. */
void lp_cmp_set_pair(pair_t *p, parity_logprob_seq_t *a, parity_logprob_seq_t *b)
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
void lp_cmp_account_pair(cmp_t *c, const pair_t *p)
{
    parity_logprob_result_t *R = c->res;
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

void lp_cmp_free_pairs(pair_t *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(pairs[i].e);
        free(pairs[i].ov);
        free(pairs[i].tkl);
        free(pairs[i].t1);
    }
    free(pairs);
}

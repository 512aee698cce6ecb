/* bisect: two captures compared module by module (docs/bisect.md). Per module in execution
 * order: the drift of B's outputs against A's (relative L2, max |diff|, the dump comparators'
 * 1 - 2<a,b>/(|a|^2+|b|^2)), the drift of its inputs, the error B's module INTRODUCED -- measured
 * when B carries replays of its modules on A's recorded inputs, else estimated as the growth of
 * relative drift from input to output -- and the rest, inherited; the floor of the introduced
 * error from a repeat of A's side or from A against the fp64 golden; routing flips; modality
 * slices. The first module whose introduced error exceeds floor_factor x its floor is the answer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/bisect.h"

void parity_bisect_opts_default(parity_bisect_opts_t *o)
{
    memset(o, 0, sizeof *o);
    /* docs/bisect.md, "Departing": two same-kind noises give a ratio of relative L2s that
     * concentrates at 1 (spread ~ 1/sqrt(elements)); 2 means the module's own error has at least
     * sqrt(2^2 - 1) = 1.7x the noise's RMS on top of it. */
    o->floor_factor = 2.0;
    /* SGLang's and vLLM's dump comparators flag a layer above 1e-3 of this metric. */
    o->flat_threshold = 1e-3;
}

static const char *lbl(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

/* Sums over a module's output (or input) tensors: |a|^2, |b|^2, |b - a|^2, <a,b>, max|b - a|. */
typedef struct {
    double aa, bb, dd, ab, mx;
} sums_t;

/* An integer tensor (token ids, positions, indices: I64, I32, ..., BOOL in a PyTorch capture) is
 * not a value with a rounding error: its difference is an index mismatch, not a drift, and its
 * magnitude would dilute the relative L2 of the float tensors beside it. */
static int is_int(const parity_capture_tensor_t *t)
{
    return t->dtype[0] && t->dtype[0] != 'F' && strcmp(t->dtype, "BF16");
}

/* Elements of integer tensor pairs that differ (both sides integer), over n tensors. */
static size_t int_diffs(const parity_capture_tensor_t *a, const parity_capture_tensor_t *b, int n,
                        const char **first)
{
    size_t d = 0;
    for (int k = 0; k < n; k++) {
        if (!is_int(&a[k]) || !is_int(&b[k])) continue;
        size_t dk = 0;
        for (size_t i = 0; i < a[k].rows * a[k].width; i++) dk += a[k].v[i] != b[k].v[i];
        if (dk && !d) *first = a[k].tensor;
        d += dk;
    }
    return d;
}

/* Sums over the float tensors only (integer pairs are skipped: is_int). */
static void acc(sums_t *s, const parity_capture_tensor_t *a, const parity_capture_tensor_t *b,
                int n, size_t row_lo, size_t row_hi, const char *const *modality, const char *slice)
{
    for (int k = 0; k < n; k++) {
        if (is_int(&a[k]) && is_int(&b[k])) continue;
        size_t w = a[k].width, rows = a[k].rows;
        for (size_t r = 0; r < rows; r++) {
            if (slice && (r < row_lo || r >= row_hi || strcmp(modality[r], slice))) continue;
            const double *x = a[k].v + r * w, *y = b[k].v + r * w;
            for (size_t j = 0; j < w; j++) {
                double d = y[j] - x[j];
                s->aa += x[j] * x[j], s->bb += y[j] * y[j], s->dd += d * d, s->ab += x[j] * y[j];
                if (fabs(d) > s->mx || isnan(d)) s->mx = isnan(d) ? INFINITY : fabs(d);
            }
        }
    }
}

static double rel(const sums_t *s)
{
    if (s->dd == 0) return 0;
    if (s->aa == 0) return INFINITY;
    return sqrt(s->dd) / sqrt(s->aa);
}

static double rel_of(const parity_capture_tensor_t *a, const parity_capture_tensor_t *b, int n)
{
    sums_t s = {0, 0, 0, 0, 0};
    acc(&s, a, b, n, 0, 0, NULL, NULL);
    return rel(&s);
}

/* The introduced error of x's module m against reference capture ref: measured from x's replay
 * on ref's inputs when x was replayed on ref, else the drift growth input -> output. */
static double introduced(const parity_capture_t *x, const parity_capture_t *ref, size_t m,
                         int *replayed)
{
    const parity_capture_module_t *xm = &x->mod[m], *rm = &ref->mod[m];
    if (xm->n_replay && x->replay_of && ref->id && !strcmp(x->replay_of, ref->id)) {
        *replayed = 1;
        return rel_of(rm->out, xm->replay, rm->n_out);
    }
    *replayed = 0;
    double dout = rel_of(rm->out, xm->out, rm->n_out);
    if (rm->n_in == 0) return dout;
    double din = rel_of(rm->in, xm->in, rm->n_in);
    return dout > din ? dout - din : 0.0;
}

/* Captures that can be compared: the same model, the same module names in the same order, the
 * same tensor counts and shapes. A module whose kind differs (B swapped one implementation for
 * another: a fused or bf16 RMSNorm class in place of the trainer's) is compared all the same: its
 * index is left in *kind_diff (the first one; -1 when none) for a note. */
static parity_status_t compatible(const parity_capture_t *a, const parity_capture_t *x,
                                  const char *an, const char *xn, long *kind_diff, parity_diag_t *diag)
{
    *kind_diff = -1;
    if (strcmp(a->model, x->model))
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "captures of different models: %s is '%s', %s is '%s'", an, a->model,
                               xn, x->model);
    size_t n = a->n_mod < x->n_mod ? a->n_mod : x->n_mod;
    for (size_t i = 0; i <= n; i++) {
        if (i == n) {
            if (a->n_mod == x->n_mod) break;
            const parity_capture_t *longer = a->n_mod > x->n_mod ? a : x;
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "module %zu: '%s' is only in %s (%s has %zu modules, %s %zu)", i,
                                   longer->mod[i].name, longer == a ? an : xn, an, a->n_mod, xn, x->n_mod);
        }
        const parity_capture_module_t *p = &a->mod[i], *q = &x->mod[i];
        if (strcmp(p->name, q->name))
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "module %zu: %s has '%s', %s has '%s' (captures of different modules)",
                                   i, an, p->name, xn, q->name);
        if (strcmp(p->kind, q->kind) && *kind_diff < 0) *kind_diff = (long)i;
        if (p->n_in != q->n_in || p->n_out != q->n_out)
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "module '%s': %d inputs and %d outputs in %s, %d and %d in %s",
                                   p->name, p->n_in, p->n_out, an, q->n_in, q->n_out, xn);
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < (s ? p->n_out : p->n_in); k++) {
                const parity_capture_tensor_t *u = s ? &p->out[k] : &p->in[k];
                const parity_capture_tensor_t *v = s ? &q->out[k] : &q->in[k];
                if (u->rows != v->rows || u->width != v->width)
                    return parity_diag_set(diag, PARITY_E_FORMAT,
                                           "module '%s': tensor '%s' is (%zu, %zu) in %s, (%zu, %zu) in %s",
                                           p->name, u->tensor, u->rows, u->width, an, v->rows, v->width, xn);
            }
    }
    return PARITY_OK;
}

static int add_flip(parity_bisect_result_t *res, const parity_bisect_flip_t *f)
{
    if (res->n_flips == res->cap_flips) {
        size_t nc = res->cap_flips ? 2 * res->cap_flips : 64;
        parity_bisect_flip_t *n = realloc(res->flips, nc * sizeof *n);
        if (!n) return -1;
        res->flips = n, res->cap_flips = nc;
    }
    res->flips[res->n_flips++] = *f;
    return 0;
}

static int cmp_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Routing flips of module m: tokens whose top-k expert set differs between A and B. */
static int flips(const parity_capture_t *a, const parity_capture_t *b, size_t m,
                 parity_bisect_result_t *res)
{
    const parity_capture_module_t *p = &a->mod[m], *q = &b->mod[m];
    if (!p->topk || !q->topk || p->topk != q->topk || p->route_rows != q->route_rows || p->topk > 16)
        return 0;
    int K = p->topk, E = p->experts;
    double pr[256];
    for (size_t r = 0; r < p->route_rows; r++) {
        const int32_t *ia = p->route_ids + r * (size_t)K, *ib = q->route_ids + r * (size_t)K;
        int same = 1;
        for (int i = 0; i < K && same; i++) {
            int found = 0;
            for (int j = 0; j < K; j++) found |= ia[i] == ib[j];
            same = found;
        }
        if (same) continue;
        parity_bisect_flip_t f;
        memset(&f, 0, sizeof f);
        f.module = p->name, f.row = r, f.k = K, f.margin = NAN, f.token = r;
        for (size_t s = 0; s < a->n_seq; s++)
            if (r >= a->seq_start[s] && r < a->seq_start[s] + a->seq_len[s])
                f.seq = s, f.token = r - a->seq_start[s];
        memcpy(f.a, ia, (size_t)K * sizeof *ia);
        memcpy(f.b, ib, (size_t)K * sizeof *ib);
        if (p->route_probs && E > K && E <= 256) {
            memcpy(pr, p->route_probs + r * (size_t)E, (size_t)E * sizeof *pr);
            qsort(pr, (size_t)E, sizeof *pr, cmp_desc);
            f.margin = pr[K - 1] - pr[K];
        }
        if (add_flip(res, &f) != 0) return -1;
    }
    return 0;
}

static double score(const parity_bisect_module_t *m)
{
    if (m->floor > 0) return m->introduced / m->floor;
    return m->introduced > 0 ? INFINITY : 0;
}

/* 1 when module x ranks before module y: larger introduced / floor, then larger introduced,
 * then earlier. */
static int ranks_before(const parity_bisect_result_t *res, size_t x, size_t y)
{
    const parity_bisect_module_t *p = &res->mod[x], *q = &res->mod[y];
    double sp = score(p), sq = score(q);
    if (sp != sq) return sp > sq;
    if (p->introduced != q->introduced) return p->introduced > q->introduced;
    return x < y;
}

/* 1 when module `name` is nested in module `parent` (PyTorch's dotted paths: "layers.1.attn" in
 * "layers.1"; the C model's modules are not nested). */
static int nested_in(const char *name, const char *parent)
{
    size_t n = strlen(parent);
    return !strncmp(name, parent, n) && name[n] == '.';
}

/* Nested modules: a parent starts before its children and its replay runs them, so it introduces
 * (and its output carries) what a changed child introduces. From module i, on to its first
 * descendant in execution order that is flagged too (departs; or, for the flat walk, over the
 * threshold), until none is: the innermost flagged module. */
static long innermost(const parity_bisect_result_t *res, long i, int flat, double thr)
{
    for (long j = i + 1; j < (long)res->n_mod; j++) {
        const parity_bisect_module_t *m = &res->mod[j];
        if (nested_in(m->name, res->mod[i].name) && (flat ? m->cos_metric > thr : m->departs)) i = j;
    }
    return i;
}

static void note(parity_bisect_result_t *res, const char *s)
{
    size_t n = strlen(res->note);
    snprintf(res->note + n, sizeof res->note - n, "%s%s", n ? "\n" : "", s);
}

parity_status_t parity_bisect(const parity_bisect_opts_t *o, parity_bisect_result_t *res,
                              parity_diag_t *diag)
{
    memset(res, 0, sizeof *res);
    res->first = res->flat_first = -1;
    const parity_capture_t *A = o->a, *B = o->b, *F = o->floor, *G = o->golden;
    const char *an = lbl(o->name_a, "A"), *bn = lbl(o->name_b, "B");
    long kd = -1, kd_other = -1;
    parity_status_t st = compatible(A, B, an, bn, &kd, diag);
    if (st == PARITY_OK && F) st = compatible(A, F, an, lbl(o->name_floor, "the floor run"), &kd_other, diag);
    if (st == PARITY_OK && G) {
        /* the golden is the same model in fp64: the model name may say so; modules must match */
        st = compatible(A, G, an, lbl(o->name_golden, "the golden run"), &kd_other, diag);
    }
    if (st != PARITY_OK) return st;
    if (kd >= 0) {
        char l[300];
        snprintf(l, sizeof l, "module '%.80s' is a '%.60s' in A, a '%.60s' in B (another implementation, "
                 "compared as the same module)", A->mod[kd].name, A->mod[kd].kind, B->mod[kd].kind);
        note(res, l);
    }
    size_t n = A->n_mod;
    res->n_mod = n;
    res->mod = calloc(n ? n : 1, sizeof *res->mod);
    res->rank = calloc(n ? n : 1, sizeof *res->rank);
    if (!res->mod || !res->rank) return parity_diag_set(diag, PARITY_E_NOMEM, "bisect: out of memory");
    if (B->n_mod && B->mod[0].n_replay && !(B->replay_of && A->id && !strcmp(B->replay_of, A->id)))
        note(res, "B's replays were run on another capture's inputs, not A's: introduced errors are "
                  "estimated from drift growth (capture B again with --replay A)");
    if (!F && !G)
        note(res, "no floor (--floor A2 or --golden G): any introduced difference departs");
    int a_on_g = 0;
    const char *int_first = NULL, *int_mod = NULL;
    size_t int_n = 0, int_mods = 0;
    for (size_t i = 0; i < n; i++) {
        parity_bisect_module_t *m = &res->mod[i];
        const parity_capture_module_t *am = &A->mod[i], *bm = &B->mod[i];
        m->name = am->name, m->kind = am->kind;
        sums_t so = {0, 0, 0, 0, 0};
        acc(&so, am->out, bm->out, am->n_out, 0, 0, NULL, NULL);
        m->drift_out = rel(&so);
        m->max_abs_out = so.mx;
        m->cos_metric = so.aa + so.bb > 0 ? 1.0 - 2.0 * so.ab / (so.aa + so.bb) : 0.0;
        m->drift_in = am->n_in ? rel_of(am->in, bm->in, am->n_in) : 0.0;
        const char *ti = NULL, *to = NULL;
        size_t ni = int_diffs(am->in, bm->in, am->n_in, &ti), no = int_diffs(am->out, bm->out, am->n_out, &to);
        if (ni + no && !int_mods++) int_first = ti ? ti : to, int_mod = am->name, int_n = ni ? ni : no;
        m->introduced = introduced(B, A, i, &m->replayed);
        if (m->replayed) {
            /* B's module on B's inputs vs on A's inputs, relative to A's output's size */
            sums_t sr = {0, 0, 0, 0, 0}, sa = {0, 0, 0, 0, 0};
            acc(&sr, bm->replay, bm->out, am->n_out, 0, 0, NULL, NULL);
            acc(&sa, am->out, am->out, am->n_out, 0, 0, NULL, NULL);
            m->inherited = sr.dd == 0 ? 0 : sa.aa > 0 ? sqrt(sr.dd / sa.aa) : INFINITY;
        } else {
            m->inherited = m->drift_out > m->introduced ? m->drift_out - m->introduced : 0.0;
        }
        int fr = 0;
        m->drift_golden_a = m->drift_golden_b = NAN;
        if (F) {
            m->floor = introduced(F, A, i, &fr), m->floor_source = 1;
        } else if (G) {
            m->floor = introduced(A, G, i, &fr), m->floor_source = 2;
            a_on_g |= fr;
        }
        if (G) {
            m->drift_golden_a = rel_of(G->mod[i].out, am->out, am->n_out);
            m->drift_golden_b = rel_of(G->mod[i].out, bm->out, am->n_out);
        }
        m->departs = m->introduced > 0 && !(m->introduced <= o->floor_factor * m->floor);
        if (m->departs && res->first < 0) res->first = (long)i;
        if (m->cos_metric > o->flat_threshold && res->flat_first < 0) res->flat_first = (long)i;
        if (A->modality) {
            for (size_t r = 0; r < A->rows && m->n_slices < 4; r++) {
                int seen = 0;
                for (int s = 0; s < m->n_slices; s++) seen |= !strcmp(m->slice_name[s], A->modality[r]);
                if (!seen) snprintf(m->slice_name[m->n_slices++], 16, "%s", A->modality[r]);
            }
            int rows_ok = 1;
            for (int k = 0; k < am->n_out; k++) rows_ok &= am->out[k].rows == A->rows;
            for (int s = 0; s < m->n_slices; s++) {
                sums_t ss = {0, 0, 0, 0, 0};
                if (rows_ok)
                    acc(&ss, am->out, bm->out, am->n_out, 0, A->rows, (const char *const *)A->modality,
                        m->slice_name[s]);
                m->slice_drift[s] = rows_ok ? rel(&ss) : NAN;
            }
        }
        if (flips(A, B, i, res) != 0) return parity_diag_set(diag, PARITY_E_NOMEM, "bisect: out of memory");
        res->rank[i] = i;
    }
    if (res->first >= 0) {
        long outer = res->first;
        res->first = innermost(res, outer, 0, 0);
        if (res->first != outer) {
            char l[300];
            snprintf(l, sizeof l, "'%.80s' departs first in execution order, through '%.80s' nested in it "
                     "(its replay runs its children): the innermost departing module is the answer",
                     res->mod[outer].name, res->mod[res->first].name);
            note(res, l);
        }
    }
    if (res->flat_first >= 0) res->flat_first = innermost(res, res->flat_first, 1, o->flat_threshold);
    if (int_mods) {
        char l[400];
        snprintf(l, sizeof l,
                 "integer tensors (ids, indices) differ in %zu module%s, first '%s' in module '%s' (%zu "
                 "elements): compared for equality, not as drift%s",
                 int_mods, int_mods == 1 ? "" : "s", int_first, int_mod, int_n,
                 int_mod == A->mod[0].name ? " (the first module: the captures ran on different inputs?)" : "");
        note(res, l);
    }
    if (G && !a_on_g)
        note(res, "the golden floor is estimated (A was not captured with --replay G)");
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, no global state */
        for (size_t j = i; j > 0 && ranks_before(res, res->rank[j], res->rank[j - 1]); j--) {
            size_t t = res->rank[j];
            res->rank[j] = res->rank[j - 1], res->rank[j - 1] = t;
        }
    return PARITY_OK;
}

void parity_bisect_result_free(parity_bisect_result_t *res)
{
    if (!res) return;
    free(res->mod);
    free(res->rank);
    free(res->flips);
    memset(res, 0, sizeof *res);
}

/* Reading the rows of a dense logprob dump (npy or safetensors, opened by logprob_npy.c) into
 * sequences: the general loop over any dtype and layout, the vectorised fast path for the common
 * layouts, batches read in parallel, the message for a value that is not a logprob, and giving
 * back the pages of rows consumed. The dispatcher reads batches (lp_dense_next); the direct
 * comparison (logprob_direct.c) reads single rows through logprob_dense_impl.h, the only other
 * way into this unit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/logprob/logprob_dense_impl.h"
#include "src/core/parallel.h"

static double dense_f64(const lp_dense_t *a, uint64_t idx)
{
    return parity_safetensors_decode_f64(a->dt, a->base + idx * a->es);
}

/* Integers exactly; a float-typed id/mask array is converted through double (INT64_MIN when not
 * representable). */
static int64_t dense_i64(const lp_dense_t *a, uint64_t idx)
{
    int64_t v;
    if (parity_safetensors_decode_i64(a->dt, a->base + idx * a->es, &v) == 0) return v;
    double d = dense_f64(a, idx);
    return d == d && fabs(d) < 9e18 ? (int64_t)d : INT64_MIN;
}

typedef struct {
    parity_logprob_reader_t *r;
    parity_logprob_seq_t *seqs;
    uint64_t row0;
    parity_status_t *st;
    uint64_t *bad; /* element index of the first bad value per row */
    int *why;      /* 1 not a logprob (lp_bad_value), 2 modality out of range, 3 top logprob not one, 4 nomem */
} dense_job_t;

/* An integer dtype the fast rows read directly (a mask or phase of another dtype, a float mask
 * say, takes the general loop). */
static int fast_int_dt(int dt)
{
    return dt == PARITY_SAFETENSORS_U8 || dt == PARITY_SAFETENSORS_I8 || dt == PARITY_SAFETENSORS_BOOL || dt == PARITY_SAFETENSORS_I16 ||
           dt == PARITY_SAFETENSORS_I32 || dt == PARITY_SAFETENSORS_I64;
}

/* The common layouts: fp32 or fp64 logprobs contiguous along a row (C order), token ids int32
 * or int64 contiguous or absent, a mask and a phase (a trainer's dump: padding, the prompt)
 * contiguous in an integer dtype or absent, no modality or top-k. The same values, flags and
 * first error as the general loop of dense_rows, without a dtype switch per element. */
static int dense_fast_ok(const parity_logprob_reader_t *r)
{
    if (r->mod.present || r->topk) return 0;
    if (r->lp.cs != 1 || (r->lp.dt != PARITY_SAFETENSORS_F32 && r->lp.dt != PARITY_SAFETENSORS_F64)) return 0;
    if (r->tok.present && (r->tok.cs != 1 || (r->tok.dt != PARITY_SAFETENSORS_I32 && r->tok.dt != PARITY_SAFETENSORS_I64))) return 0;
    if (r->mask.present && (r->mask.cs != 1 || !fast_int_dt(r->mask.dt))) return 0;
    if (r->phase.present && (r->phase.cs != 1 || !fast_int_dt(r->phase.dt))) return 0;
    return 1;
}

/* The flags of a row with a mask and/or a phase (as the general loop sets them): present where
 * the mask is nonzero, prefill where the phase is 1, decode where it is 2. */
static void row_flags(const parity_logprob_reader_t *r, uint64_t row, uint8_t *fl, size_t n)
{
    /* one loop per dtype, each of which vectorises (HF attention masks are int64): element q of
     * row `base` as v, then `stmt` */
#define ROW_LOOP(T, base, stmt)                                                                         \
    for (size_t q = 0; q < n; q++) {                                                                   \
        T v;                                                                                           \
        memcpy(&v, (base) + q * sizeof v, sizeof v);                                                   \
        stmt;                                                                                          \
    }
#define ROW_BY_DTYPE(dt, base, stmt)                                                                    \
    switch (dt) {                                                                                      \
    case PARITY_SAFETENSORS_I64: ROW_LOOP(int64_t, base, stmt) break;                                           \
    case PARITY_SAFETENSORS_I32: ROW_LOOP(int32_t, base, stmt) break;                                           \
    case PARITY_SAFETENSORS_I16: ROW_LOOP(int16_t, base, stmt) break;                                           \
    case PARITY_SAFETENSORS_I8: ROW_LOOP(int8_t, base, stmt) break;                                             \
    default: ROW_LOOP(uint8_t, base, stmt) break; /* u8, bool */                                       \
    }
    memset(fl, PARITY_LOGPROB_PRESENT, n);
    if (r->mask.present) {
        const unsigned char *m = r->mask.base + row * r->mask.rs * r->mask.es;
        ROW_BY_DTYPE(r->mask.dt, m, fl[q] = (uint8_t)((v != 0) * PARITY_LOGPROB_PRESENT))
    }
    if (r->phase.present) {
        const unsigned char *ph = r->phase.base + row * r->phase.rs * r->phase.es;
        ROW_BY_DTYPE(r->phase.dt, ph, fl[q] |= (uint8_t)((v == 1) * PARITY_LOGPROB_PREFILL | (v == 2) * PARITY_LOGPROB_DECODE))
    }
#undef ROW_BY_DTYPE
#undef ROW_LOOP
}

/* -O3 on top of the project's -O2 (GCC's -O2 vectorizer takes no loop that needs an epilogue):
 * the conversions below then run two to four elements per instruction. No floating-point
 * semantics change (no fast-math, no contraction); clang vectorizes them at -O2. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void dense_row_fast(const parity_logprob_reader_t *r, uint64_t row, parity_logprob_seq_t *s, parity_status_t *st,
                           uint64_t *bad, int *why, int nokeys)
{
    size_t n = (size_t)r->ncols;
    const unsigned char *lp = r->lp.base + row * r->lp.rs * r->lp.es;
    double *out = s->lp;
    size_t p = 0;
    /* Convert the whole row with a branch-free check (the loop vectorises), then, only when
     * something may not be a logprob, find the first element that is not (lp_bad_value) as the
     * general loop would. */
    int badv = 0;
    unsigned allow = r->opts.allow;
    /* By the bits (a floating-point comparison would not vectorize under -ftrapping-math): a
     * value whose bits read as a signed integer exceed those of the slack is positive beyond
     * it (+inf and positive NaNs included; the ordering of non-negative IEEE values is that of
     * their bits), and |bits| above +inf's is a NaN of either sign. With --allow positive the
     * bound is the largest finite value instead (only +inf and NaN are then suspects). */
    if (r->lp.dt == PARITY_SAFETENSORS_F32) {
        float sl = allow & PARITY_LOGPROB_ALLOW_POSITIVE ? 3.40282347e38f : (float)PARITY_LOGPROB_POSITIVE_SLACK;
        int32_t lim;
        memcpy(&lim, &sl, 4);
        uint32_t acc = 0;
        for (size_t q = 0; q < n; q++) {
            float f;
            uint32_t u;
            int32_t i;
            memcpy(&f, lp + q * 4, 4);
            memcpy(&u, lp + q * 4, 4);
            memcpy(&i, lp + q * 4, 4);
            acc |= (uint32_t)(i > lim) | (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
            out[q] = (double)f;
        }
        badv = acc != 0;
    } else {
        double sl = allow & PARITY_LOGPROB_ALLOW_POSITIVE ? 1.79769313486231570815e308 : PARITY_LOGPROB_POSITIVE_SLACK;
        int64_t lim;
        memcpy(&lim, &sl, 8);
        uint64_t acc = 0;
        for (size_t q = 0; q < n; q++) {
            uint64_t u;
            int64_t i;
            memcpy(&u, lp + q * 8, 8);
            memcpy(&i, lp + q * 8, 8);
            acc |= (uint64_t)(i > lim) | (uint64_t)((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull);
            memcpy(&out[q], &u, 8);
        }
        badv = acc != 0;
    }
    int flagged = r->mask.present || r->phase.present;
    if (flagged) row_flags(r, row, s->flags, n);
    /* the first value of a present position that is not a logprob (a masked one may hold
     * anything); a suspect row may hold none (a NaN under --allow nonfinite) */
    if (!badv) p = n;
    else if (!flagged)
        while (p < n && !lp_bad_value(out[p], allow)) p++;
    else
        while (p < n && (!(s->flags[p] & PARITY_LOGPROB_PRESENT) || !lp_bad_value(out[p], allow))) p++;
    if (p < n) {
        *st = PARITY_E_FORMAT;
        *bad = row * r->lp.rs + p;
        *why = 1;
        return;
    }
    if (flagged) {
        if (r->tok.present) {
            const unsigned char *tk = r->tok.base + row * r->tok.rs * r->tok.es;
            if (r->tok.dt == PARITY_SAFETENSORS_I64) memcpy(s->key, tk, n * 8);
            else
                for (p = 0; p < n; p++) {
                    int32_t v;
                    memcpy(&v, tk + p * 4, 4);
                    s->key[p] = v;
                }
        } else {
            for (p = 0; p < n; p++) {
                if (!nokeys) s->key[p] = -1;
                s->flags[p] |= PARITY_LOGPROB_KEY_NONE;
            }
        }
        memset(s->mod, 0, n * sizeof *s->mod);
        memset(s->text, 0xff, n * sizeof *s->text); /* UINT32_MAX: no text */
        /* trailing masked positions are padding, not part of the sequence */
        while (s->n > 0 && !(s->flags[s->n - 1] & PARITY_LOGPROB_PRESENT)) s->n--;
        return;
    }
    if (r->tok.present) {
        const unsigned char *tk = r->tok.base + row * r->tok.rs * r->tok.es;
        if (r->tok.dt == PARITY_SAFETENSORS_I32)
            for (p = 0; p < n; p++) {
                int32_t v;
                memcpy(&v, tk + p * 4, 4);
                s->key[p] = v;
            }
        else
            memcpy(s->key, tk, n * 8);
        memset(s->flags, PARITY_LOGPROB_PRESENT, n);
    } else {
        if (!nokeys) /* (lp_dense_row leaves them: its caller reads no key of a KEY_NONE token) */
            for (p = 0; p < n; p++) s->key[p] = -1;
        memset(s->flags, PARITY_LOGPROB_PRESENT | PARITY_LOGPROB_KEY_NONE, n);
    }
    s->plain = 1; /* no modality, no text: mod[] and text[] stay unwritten */
}

/* Row `row` into s, as lp_dense_next returns it; *st is PARITY_OK or the error with *bad, *why
 * (see lp_dense_row_error). */
static void dense_one(const parity_logprob_reader_t *r, uint64_t row, parity_logprob_seq_t *s, parity_status_t *st,
                      uint64_t *bad, int *why, int fast)
{
    lp_seq_reset(s);
    *st = PARITY_OK;
    char idb[32];
    snprintf(idb, sizeof idb, "%llu", (unsigned long long)row);
    if (lp_seq_set_str(&s->id, idb) || lp_seq_reserve(s, (size_t)r->ncols, (size_t)r->topk)) {
        *st = PARITY_E_NOMEM;
        *why = 4;
        return;
    }
    s->ordinal = row;
    s->n = (size_t)r->ncols;
    if (fast) {
        dense_row_fast(r, row, s, st, bad, why, fast == 2);
        return;
    }
    for (uint64_t p = 0; p < r->ncols; p++) {
        uint64_t idx = row * r->lp.rs + p * r->lp.cs;
        uint8_t fl = PARITY_LOGPROB_PRESENT;
        if (r->mask.present && dense_f64(&r->mask, row * r->mask.rs + p * r->mask.cs) == 0) fl = 0;
        double v = dense_f64(&r->lp, idx);
        if (fl && lp_bad_value(v, r->opts.allow)) {
            *st = PARITY_E_FORMAT;
            *bad = idx;
            *why = 1;
            return;
        }
        s->lp[p] = v;
        if (r->tok.present) {
            s->key[p] = dense_i64(&r->tok, row * r->tok.rs + p * r->tok.cs);
        } else {
            s->key[p] = -1;
            fl |= PARITY_LOGPROB_KEY_NONE;
        }
        s->mod[p] = 0;
        if (r->mod.present) {
            int64_t m = dense_i64(&r->mod, row * r->mod.rs + p * r->mod.cs);
            if (m < 0 || m >= (int64_t)r->nmods) {
                *st = PARITY_E_FORMAT;
                *bad = row * r->mod.rs + p * r->mod.cs;
                *why = 2;
                return;
            }
            s->mod[p] = (uint16_t)(m + 1);
        }
        if (r->phase.present) {
            int64_t ph = dense_i64(&r->phase, row * r->phase.rs + p * r->phase.cs);
            fl |= ph == 1 ? PARITY_LOGPROB_PREFILL : ph == 2 ? PARITY_LOGPROB_DECODE : 0;
        }
        s->flags[p] = fl;
        s->text[p] = UINT32_MAX;
        for (uint64_t k = 0; k < r->topk; k++) {
            uint64_t ti = row * r->top_id.rs + p * r->top_id.cs + k * r->top_id.ks;
            int64_t id = dense_i64(&r->top_id, ti);
            double tv = dense_f64(&r->top_lp, ti);
            if (id >= 0 && lp_bad_value(tv, r->opts.allow)) {
                *st = PARITY_E_FORMAT;
                *bad = ti;
                *why = 3;
                return;
            }
            s->top_id[p * r->topk + k] = id >= 0 && id <= INT32_MAX ? (int32_t)id : -1;
            s->top_lp[p * r->topk + k] = tv;
        }
    }
    /* trailing masked positions are padding, not part of the sequence */
    while (s->n > 0 && !(s->flags[s->n - 1] & PARITY_LOGPROB_PRESENT)) s->n--;
}

static void dense_rows(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    dense_job_t *j = ctx;
    const parity_logprob_reader_t *r = j->r;
    int fast = dense_fast_ok(r);
    for (int64_t i = b; i < e; i++)
        dense_one(r, j->row0 + (uint64_t)i, &j->seqs[i], &j->st[i], &j->bad[i], &j->why[i], fast);
}

int lp_dense_direct_ok(const parity_logprob_reader_t *r)
{
    return (r->fmt == PARITY_LOGPROB_NPY || r->fmt == PARITY_LOGPROB_SAFETENSORS) && r->ncols > 0 && dense_fast_ok(r);
}

parity_status_t lp_dense_row(const parity_logprob_reader_t *r, uint64_t row, parity_logprob_seq_t *s, uint64_t *bad,
                             int *why)
{
    parity_status_t st;
    dense_one(r, row, s, &st, bad, why, 2);
    return st;
}

parity_status_t lp_dense_next(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d)
{
    uint64_t left = r->nrows - r->ordinal;
    size_t n = left < max ? (size_t)left : max;
    if (n == 0 || r->ncols == 0) {
        /* rows of length 0 still count as sequences */
        for (size_t i = 0; i < n; i++) {
            lp_seq_reset(&seqs[i]);
            char idb[32];
            snprintf(idb, sizeof idb, "%llu", (unsigned long long)(r->ordinal + i));
            if (lp_seq_set_str(&seqs[i].id, idb)) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
            seqs[i].ordinal = r->ordinal + i;
        }
        r->ordinal += n;
        *got = n;
        return PARITY_OK;
    }
    parity_status_t *st = calloc(n, sizeof *st);
    uint64_t *bad = calloc(n, sizeof *bad);
    int *why = calloc(n, sizeof *why);
    if (!st || !bad || !why) {
        free(st);
        free(bad);
        free(why);
        return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    }
    dense_job_t job = {r, seqs, r->ordinal, st, bad, why};
    int nt = r->opts.n_threads;
    if (n * r->ncols < 65536) nt = 1;
    parity_parallel_for((int64_t)n, nt, dense_rows, &job);
    parity_status_t out = PARITY_OK;
    size_t ok = n;
    for (size_t i = 0; i < n; i++)
        if (st[i]) {
            ok = i;
            out = lp_dense_row_error(r, r->ordinal + i, bad[i], why[i], d);
            break;
        }
    lp_dense_consume(r, ok);
    *got = ok;
    free(st);
    free(bad);
    free(why);
    return out;
}

parity_status_t lp_dense_row_error(const parity_logprob_reader_t *r, uint64_t row, uint64_t bad, int why,
                                   parity_diag_t *d)
{
    const lp_dense_t *a = why == 2 ? &r->mod : why == 3 ? &r->top_lp : &r->lp;
    uint64_t off = a->file_off + bad * a->es;
    if (why == 4) return parity_diag_set(d, PARITY_E_NOMEM, "%s: out of memory", r->name);
    if (why == 2)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset %llu: modality value out of range 0..%zu in sequence %llu",
                               r->name, (unsigned long long)off, r->nmods ? r->nmods - 1 : 0, (unsigned long long)row);
    /* the value again, to say what is wrong with it */
    double v = dense_f64(a, bad);
    /* element (row, pos[, j]) is at row rs + pos cs + j ks (dense_set): C or Fortran order */
    uint64_t pos = a->ks == 1 ? (bad % a->rs) / a->cs : (bad / a->cs) % r->ncols;
    char why_s[200];
    lp_bad_describe(why_s, sizeof why_s, v, lp_bad_value(v, r->opts.allow), 1);
    const char *field = r->st ? (why == 3 ? "top_logprobs" : "logprobs") : "";
    if (r->st) { /* safetensors: the tensor's own name (logprobs, log_probs, ...) */
        for (size_t i = 0; i < parity_safetensors_count(r->st); i++) {
            const parity_safetensors_tensor_t *t = parity_safetensors_tensor(r->st, i);
            if (r->base + t->offset == a->base) field = t->name;
        }
    }
    return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset %llu: %s%s%s%s of sequence %llu, position %llu %s", r->name,
                           (unsigned long long)off, field[0] ? "tensor '" : "", field, field[0] ? "': " : "",
                           why == 3 ? "top logprob" : "logprob", (unsigned long long)row, (unsigned long long)pos,
                           why_s);
}

void lp_dense_populate(const parity_logprob_reader_t *r, uint64_t row0, uint64_t n)
{
#ifdef MADV_POPULATE_READ
    /* Map the pages of rows [row0, row0 + n) in one call instead of a fault per few pages (the
     * file is mapped; consumed pages are given back, so each is mapped once). Advisory: a
     * kernel without it (before Linux 5.14) returns EINVAL and the pages fault in as before. */
    if (!r->mapped || r->lp.ks != 1) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    const lp_dense_t *arrs[] = {&r->lp, &r->tok, &r->mask, &r->phase};
    for (size_t a = 0; a < sizeof arrs / sizeof *arrs; a++) {
        const lp_dense_t *x = arrs[a];
        if (!x->present || x->base < r->base || x->base >= r->base + r->len) continue;
        uint64_t b = x->file_off + row0 * x->rs * x->es, e = x->file_off + (row0 + n) * x->rs * x->es;
        b = b / (uint64_t)pg * (uint64_t)pg;
        if (e > r->len) e = r->len;
        if (e > b) (void)madvise((void *)(r->base + b), (size_t)(e - b), MADV_POPULATE_READ);
    }
#else
    (void)r;
    (void)row0;
    (void)n;
#endif
}

void lp_dense_consume(parity_logprob_reader_t *r, uint64_t n)
{
    r->ordinal += n;
    /* Give back the pages of the rows consumed (C order only; they are contiguous), 1 MiB of
     * logprobs at a time (fewer calls: each takes the address-space lock the reading threads'
     * page faults need) and from the page the previous release stopped in, so no page is kept. */
    if (!r->mapped || r->lp.ks != 1) return;
    uint64_t row_bytes = r->lp.rs * r->lp.es, eof = r->ordinal >= r->nrows;
    if (!eof && (r->ordinal - r->rel_row) * row_bytes < ((uint64_t)1 << 20)) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    lp_dense_t *arrs[] = {&r->lp, &r->tok, &r->mask, &r->mod, &r->phase, &r->top_id, &r->top_lp};
    for (size_t k = 0; k < sizeof arrs / sizeof *arrs; k++) {
        lp_dense_t *x = arrs[k];
        if (!x->present || x->base < r->base || x->base >= r->base + r->len) continue;
        uint64_t b = x->file_off + r->rel_row * x->rs * x->es, e = x->file_off + r->ordinal * x->rs * x->es;
        b = b / (uint64_t)pg * (uint64_t)pg;
        e = eof ? (e + (uint64_t)pg - 1) / (uint64_t)pg * (uint64_t)pg : e / (uint64_t)pg * (uint64_t)pg;
        if (e > r->len) e = r->len;
        if (e > b) madvise((void *)(r->base + b), (size_t)(e - b), MADV_DONTNEED);
    }
    r->rel_row = r->ordinal;
}

/* logprob_rl: what the mismatch between two logprob dumps of the same weights does to one
 * GRPO/PPO step, with A = the trainer's logprobs and B = the rollout engine's (which sampled the
 * tokens): the KL-penalty estimate k3 with the policy's logprobs taken from either side (both
 * are pure bias: the weights are the same), the fraction of tokens whose importance ratio
 * r = pi_train / pi_rollout leaves PPO's clip range, and truncated importance weights (TIS).
 * Definitions and sources: docs/logprob-metrics.md, "RL effects". Self-contained: it reads the
 * two dumps again with the readers and pairs them as parity_logprob_compare does (request id, then
 * position up to the first token-id divergence); it holds both dumps' logprobs in memory.
 * Not here: the main report (logprob_compare.c), whose JSON it never touches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/logprob_rl.h"

#define MAX_SLICES 64

/* Neumaier's compensated sum: every mean below is of up to billions of terms. */
typedef struct {
    double s, c;
} csum_t;

static void cs_add(csum_t *a, double x)
{
    double t = a->s + x;
    if (fabs(a->s) >= fabs(x)) a->c += (a->s - t) + x;
    else a->c += (x - t) + a->s;
    a->s = t;
}

static double cs_val(const csum_t *a)
{
    return a->s + a->c;
}

typedef struct {
    char name[96];
    uint64_t n, n_low, n_high, n_capped;
    csum_t k3r, k3t, k3ti, w, w2, iw;
    double w_max;
} acc_t;

struct parity_logprob_rl_result {
    parity_logprob_rl_opts_t opts;
    size_t n;
    acc_t acc[MAX_SLICES];
    parity_logprob_rl_slice_t out[MAX_SLICES];
    uint64_t n_pairs, n_skipped, n_diverged;
};

parity_logprob_rl_opts_t parity_logprob_rl_default_opts(void)
{
    parity_logprob_rl_opts_t o = {0.2, 2.0};
    return o;
}

/* One owned copy of a sequence: id, and per token key, logprob, flags, modality. */
typedef struct {
    char *id;
    uint64_t ord;
    size_t n;
    int64_t *key;
    double *lp;
    uint8_t *flags;
    uint16_t *mod;
} seq_t;

static void seqs_free(seq_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i].id);
        free(s[i].key);
        free(s[i].lp);
        free(s[i].flags);
        free(s[i].mod);
    }
    free(s);
}

static parity_status_t read_all(parity_logprob_reader_t *r, seq_t **out, size_t *nout,
                                parity_diag_t *diag)
{
    enum { BATCH = 64 };
    parity_logprob_seq_t b[BATCH];
    for (int i = 0; i < BATCH; i++) parity_logprob_seq_init(&b[i]);
    seq_t *v = NULL;
    size_t n = 0, cap = 0;
    parity_status_t st = PARITY_OK;
    for (;;) {
        size_t got = 0;
        st = parity_logprob_next_batch(r, b, BATCH, &got, diag);
        if (st != PARITY_OK || got == 0) break;
        for (size_t i = 0; i < got; i++) {
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 64;
                seq_t *nv = realloc(v, nc * sizeof *nv);
                if (!nv) {
                    st = parity_diag_set(diag, PARITY_E_NOMEM, "rl: out of memory");
                    goto done;
                }
                v = nv, cap = nc;
            }
            seq_t *s = &v[n++];
            memset(s, 0, sizeof *s);
            s->n = b[i].n, s->ord = b[i].ordinal;
            s->id = strdup(b[i].id ? b[i].id : "");
            s->key = malloc((s->n + 1) * sizeof *s->key);
            s->lp = malloc((s->n + 1) * sizeof *s->lp);
            s->flags = malloc(s->n + 1);
            s->mod = malloc((s->n + 1) * sizeof *s->mod);
            if (!s->id || !s->key || !s->lp || !s->flags || !s->mod) {
                st = parity_diag_set(diag, PARITY_E_NOMEM, "rl: out of memory");
                goto done;
            }
            memcpy(s->key, b[i].key, s->n * sizeof *s->key);
            memcpy(s->lp, b[i].lp, s->n * sizeof *s->lp);
            memcpy(s->flags, b[i].flags, s->n);
            for (size_t t = 0; t < s->n; t++) s->mod[t] = parity_logprob_seq_mod(&b[i], t);
        }
    }
done:
    for (int i = 0; i < BATCH; i++) parity_logprob_seq_free(&b[i]);
    *out = v, *nout = n;
    return st;
}

static int by_id(const void *a, const void *b)
{
    const seq_t *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->ord < y->ord ? -1 : x->ord > y->ord);
}

static acc_t *slice(parity_logprob_rl_result_t *R, const char *name)
{
    for (size_t i = 0; i < R->n; i++)
        if (!strcmp(R->acc[i].name, name)) return &R->acc[i];
    if (R->n == MAX_SLICES) return NULL;
    acc_t *a = &R->acc[R->n++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    return a;
}

/* One token with lr = log r = a - b (finite). */
static void acc_token(acc_t *a, const parity_logprob_rl_opts_t *o, double lr)
{
    double r = exp(lr), em1 = expm1(lr), emm1 = expm1(-lr);
    cs_add(&a->k3r, em1 - lr);         /* (r - 1) - log r */
    cs_add(&a->k3t, emm1 + lr);        /* (1/r - 1) + log r */
    cs_add(&a->k3ti, r * lr - em1);    /* r ((1/r - 1) + log r) = 1 - r + r log r */
    double w = r < o->tis_cap ? r : o->tis_cap;
    cs_add(&a->w, w);
    cs_add(&a->w2, w * w);
    cs_add(&a->iw, r);
    a->w_max = w > a->w_max ? w : a->w_max;
    a->n++;
    a->n_low += r < 1 - o->clip_eps;
    a->n_high += r > 1 + o->clip_eps;
    a->n_capped += r > o->tis_cap;
}

parity_status_t parity_logprob_rl_compute(parity_logprob_reader_t *ra, parity_logprob_reader_t *rb,
                                          const parity_logprob_rl_opts_t *opts, parity_logprob_rl_result_t **out,
                                          parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!ra || !rb || !out) return parity_diag_set(diag, PARITY_E_INVALID, "rl: NULL argument");
    parity_logprob_rl_opts_t o = opts ? *opts : parity_logprob_rl_default_opts();
    if (!(o.clip_eps > 0 && o.clip_eps < 1) || !(o.tis_cap >= 1) || isinf(o.tis_cap))
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "rl: clip epsilon %g must be in (0, 1) and the TIS cap %g finite >= 1",
                               o.clip_eps, o.tis_cap);
    parity_logprob_rl_result_t *R = calloc(1, sizeof *R);
    if (!R) return parity_diag_set(diag, PARITY_E_NOMEM, "rl: out of memory");
    R->opts = o;
    slice(R, "overall");
    seq_t *A = NULL, *B = NULL;
    size_t na = 0, nb = 0;
    parity_status_t st = read_all(ra, &A, &na, diag);
    if (st == PARITY_OK) st = read_all(rb, &B, &nb, diag);
    if (st != PARITY_OK) goto done;
    qsort(A, na, sizeof *A, by_id);
    qsort(B, nb, sizeof *B, by_id);
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        int c = strcmp(A[i].id, B[j].id);
        if (c < 0) { i++; continue; }
        if (c > 0) { j++; continue; }
        const seq_t *a = &A[i++], *b = &B[j++];
        R->n_pairs++;
        size_t n = a->n < b->n ? a->n : b->n;
        for (size_t t = 0; t < n; t++) {
            if (a->key[t] != b->key[t]) {
                R->n_diverged++;
                break;
            }
            if (!(a->flags[t] & PARITY_LOGPROB_PRESENT) || !(b->flags[t] & PARITY_LOGPROB_PRESENT)) continue;
            double lr = a->lp[t] - b->lp[t];
            if (!isfinite(lr) || fabs(lr) > 700) {
                R->n_skipped++;
                continue;
            }
            acc_token(&R->acc[0], &o, lr);
            const char *mn = parity_logprob_reader_modality(ra, a->mod[t]);
            if (mn) {
                char name[96];
                snprintf(name, sizeof name, "modality=%s", mn);
                acc_t *s = slice(R, name);
                if (s) acc_token(s, &o, lr);
            }
        }
    }
    for (size_t k = 0; k < R->n; k++) {
        const acc_t *a = &R->acc[k];
        parity_logprob_rl_slice_t *s = &R->out[k];
        double n = (double)a->n;
        snprintf(s->name, sizeof s->name, "%s", a->name);
        s->n_tokens = a->n;
        if (a->n == 0) {
            s->k3_rollout = s->k3_trainer = s->k3_trainer_is = s->clip_frac_low = NAN;
            s->clip_frac_high = s->clip_frac = s->tis_mean = s->tis_max = s->tis_frac_capped = NAN;
            s->tis_ess = s->iw_mean = NAN;
            continue;
        }
        s->k3_rollout = cs_val(&a->k3r) / n;
        s->k3_trainer = cs_val(&a->k3t) / n;
        s->k3_trainer_is = cs_val(&a->k3ti) / n;
        s->clip_frac_low = (double)a->n_low / n;
        s->clip_frac_high = (double)a->n_high / n;
        s->clip_frac = (double)(a->n_low + a->n_high) / n;
        s->tis_mean = cs_val(&a->w) / n;
        s->tis_max = a->w_max;
        s->tis_frac_capped = (double)a->n_capped / n;
        double sw = cs_val(&a->w), sw2 = cs_val(&a->w2);
        s->tis_ess = sw2 > 0 ? sw * sw / (n * sw2) : NAN;
        s->iw_mean = cs_val(&a->iw) / n;
    }
done:
    seqs_free(A, na);
    seqs_free(B, nb);
    if (st != PARITY_OK) {
        free(R);
        return st;
    }
    *out = R;
    return PARITY_OK;
}

void parity_logprob_rl_result_free(parity_logprob_rl_result_t *r)
{
    free(r);
}

size_t parity_logprob_rl_nslices(const parity_logprob_rl_result_t *r)
{
    return r ? r->n : 0;
}

const parity_logprob_rl_slice_t *parity_logprob_rl_slice(const parity_logprob_rl_result_t *r, size_t i)
{
    return r && i < r->n ? &r->out[i] : NULL;
}

parity_status_t parity_logprob_rl_report_text(const parity_logprob_rl_result_t *r, FILE *f)
{
    if (!r || !f) return PARITY_E_INVALID;
    fprintf(f, "\nRL effects of the mismatch (A = trainer, B = rollout that sampled the tokens; "
               "r = pi_A / pi_B; docs/logprob-metrics.md):\n");
    fprintf(f, "  PPO clip range [1-%g, 1+%g]; truncated importance weights min(r, %g)\n",
            r->opts.clip_eps, r->opts.clip_eps, r->opts.tis_cap);
    fprintf(f, "  %-22s %9s %11s %11s %11s %8s %8s %8s %9s %8s %8s\n", "slice", "tokens",
            "k3 rollout", "k3 trainer", "k3 tr. IS", "clip", "clip lo", "clip hi", "TIS mean",
            "capped", "TIS ESS");
    for (size_t i = 0; i < r->n; i++) {
        const parity_logprob_rl_slice_t *s = &r->out[i];
        fprintf(f, "  %-22s %9llu %11.3e %11.3e %11.3e %8.4f %8.4f %8.4f %9.6f %8.4f %8.5f\n",
                s->name, (unsigned long long)s->n_tokens, s->k3_rollout, s->k3_trainer,
                s->k3_trainer_is, s->clip_frac, s->clip_frac_low, s->clip_frac_high, s->tis_mean,
                s->tis_frac_capped, s->tis_ess);
    }
    fprintf(f, "  (%llu request pairs, %llu diverged, %llu non-finite or |log r| > 700 tokens "
               "skipped; the same weights on both sides, so every k3 here is bias)\n",
            (unsigned long long)r->n_pairs, (unsigned long long)r->n_diverged,
            (unsigned long long)r->n_skipped);
    return PARITY_OK;
}

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void jnum(FILE *f, const char *k, double v, int last)
{
    if (isfinite(v)) fprintf(f, "\"%s\": %.17g%s", k, v, last ? "" : ", ");
    else fprintf(f, "\"%s\": null%s", k, last ? "" : ", ");
}

parity_status_t parity_logprob_rl_report_json(const parity_logprob_rl_result_t *r, const char *path,
                                              parity_diag_t *diag)
{
    if (!r || !path) return parity_diag_set(diag, PARITY_E_INVALID, "rl json: NULL argument");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot write", tmp);
    fprintf(f, "{\"schema\": \"parity.logprobs.rl/1\", \"clip_eps\": %.17g, \"tis_cap\": %.17g, "
               "\"n_pairs\": %llu, \"n_diverged\": %llu, \"n_skipped\": %llu, \"slices\": [",
            r->opts.clip_eps, r->opts.tis_cap, (unsigned long long)r->n_pairs,
            (unsigned long long)r->n_diverged, (unsigned long long)r->n_skipped);
    for (size_t i = 0; i < r->n; i++) {
        const parity_logprob_rl_slice_t *s = &r->out[i];
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        jstr(f, s->name);
        fprintf(f, ", \"n_tokens\": %llu, ", (unsigned long long)s->n_tokens);
        jnum(f, "k3_rollout", s->k3_rollout, 0);
        jnum(f, "k3_trainer", s->k3_trainer, 0);
        jnum(f, "k3_trainer_is", s->k3_trainer_is, 0);
        jnum(f, "clip_frac", s->clip_frac, 0);
        jnum(f, "clip_frac_low", s->clip_frac_low, 0);
        jnum(f, "clip_frac_high", s->clip_frac_high, 0);
        jnum(f, "tis_mean", s->tis_mean, 0);
        jnum(f, "tis_max", s->tis_max, 0);
        jnum(f, "tis_frac_capped", s->tis_frac_capped, 0);
        jnum(f, "tis_ess", s->tis_ess, 0);
        jnum(f, "iw_mean", s->iw_mean, 1);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return parity_diag_set(diag, PARITY_E_IO, "%s: write failed", path);
    }
    return PARITY_OK;
}

/* Opening a logprob dump: mapping, format detection, the sequence buffers and the modality
 * table. The parsing itself lives in logprob_npy.c (npy, safetensors) and logprob_jsonl.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/logprob/logprob_impl.h"

static const char *fmt_names[] = {"auto", "npy", "safetensors", "jsonl", "openai-chat",
                                  "openai-completions", "vllm", "sglang"};

const char *parity_lp_format_name(parity_lp_format_t f)
{
    return (unsigned)f < sizeof fmt_names / sizeof *fmt_names ? fmt_names[f] : "unknown";
}

parity_status_t parity_lp_format_from_name(const char *name, parity_lp_format_t *out)
{
    if (!name || !out) return PARITY_E_INVALID;
    for (size_t i = 0; i < sizeof fmt_names / sizeof *fmt_names; i++)
        if (!strcmp(name, fmt_names[i])) {
            *out = (parity_lp_format_t)i;
            return PARITY_OK;
        }
    return PARITY_E_NOTFOUND;
}

parity_status_t parity_lp_allow_from_names(const char *names, unsigned *allow)
{
    if (!names || !allow) return PARITY_E_INVALID;
    for (const char *p = names;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 8 && !strncmp(p, "positive", 8)) *allow |= PARITY_LP_ALLOW_POSITIVE;
        else if (n == 9 && !strncmp(p, "nonfinite", 9)) *allow |= PARITY_LP_ALLOW_NONFINITE;
        else return PARITY_E_NOTFOUND;
        if (!e) return PARITY_OK;
        p = e + 1;
    }
}

const char *lp_bad_describe(char *buf, size_t cap, double v, int why, int relaxable_nonfinite)
{
    if (why == LP_BAD_POSITIVE)
        snprintf(buf, cap,
                 "is %+.9g, positive beyond rounding (a logprob is <= 0; up to +2^-14 = %.2g is fp32 rounding "
                 "of log_softmax, docs/logprobs.md; --allow positive reads it as given)",
                 v, PARITY_LP_POSITIVE_SLACK);
    else
        snprintf(buf, cap, "is %s (a logprob is finite or -inf%s)", why == LP_BAD_NAN ? "NaN" : "+inf",
                 relaxable_nonfinite ? "; --allow nonfinite reads it as given" : "");
    return buf;
}

void parity_lp_seq_init(parity_lp_seq_t *s)
{
    if (s) memset(s, 0, sizeof *s);
}

void parity_lp_seq_free(parity_lp_seq_t *s)
{
    if (!s) return;
    free(s->id);
    free(s->field);
    free(s->key);
    free(s->lp);
    free(s->flags);
    free(s->mod);
    free(s->text);
    free(s->tbuf);
    free(s->top_id);
    free(s->top_lp);
    memset(s, 0, sizeof *s);
}

const char *parity_lp_seq_text(const parity_lp_seq_t *s, size_t i)
{
    if (!s || i >= s->n || s->plain || !s->text || s->text[i] == UINT32_MAX) return NULL;
    return s->tbuf + s->text[i];
}

uint16_t parity_lp_seq_mod(const parity_lp_seq_t *s, size_t i)
{
    if (!s || i >= s->n || s->plain || !s->mod) return 0;
    return s->mod[i];
}

void lp_seq_reset(parity_lp_seq_t *s)
{
    s->n = 0;
    s->plain = 0;
    s->tlen = 0;
    s->k = 0;
    s->line = 0;
    free(s->field);
    s->field = NULL;
}

static int grow(void **p, size_t n, size_t es)
{
    void *q = realloc(*p, n * es);
    if (!q) return -1;
    *p = q;
    return 0;
}

parity_status_t lp_seq_reserve(parity_lp_seq_t *s, size_t n, size_t k)
{
    if (n > s->cap) {
        size_t c = n < 64 ? 64 : n;
        if (grow((void **)&s->key, c, 8) || grow((void **)&s->lp, c, 8) || grow((void **)&s->flags, c, 1) ||
            grow((void **)&s->mod, c, 2) || grow((void **)&s->text, c, 4))
            return PARITY_E_NOMEM;
        s->cap = c;
    }
    if (k && n > SIZE_MAX / 8 / k) return PARITY_E_NOMEM;
    if (n * k > s->topcap) {
        if (grow((void **)&s->top_id, n * k, 4) || grow((void **)&s->top_lp, n * k, 8)) return PARITY_E_NOMEM;
        s->topcap = n * k;
    }
    s->k = k;
    return PARITY_OK;
}

uint32_t lp_seq_add_text(parity_lp_seq_t *s, const char *t, size_t len)
{
    if (!t || s->tlen + len + 1 >= UINT32_MAX) return UINT32_MAX;
    if (s->tlen + len + 1 > s->tcap) {
        size_t c = (s->tlen + len + 1) * 2;
        if (grow((void **)&s->tbuf, c, 1)) return UINT32_MAX;
        s->tcap = c;
    }
    uint32_t off = (uint32_t)s->tlen;
    memcpy(s->tbuf + s->tlen, t, len);
    s->tbuf[s->tlen + len] = 0;
    s->tlen += len + 1;
    return off;
}

parity_status_t lp_seq_set_str(char **dst, const char *src)
{
    free(*dst);
    *dst = NULL;
    if (!src) return PARITY_OK;
    *dst = strdup(src);
    return *dst ? PARITY_OK : PARITY_E_NOMEM;
}

uint16_t lp_intern_mod(parity_lp_reader_t *r, const char *name)
{
    if (!name || !name[0]) return 0;
    uint16_t out = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 1; i <= r->nmods; i++)
        if (!strcmp(r->mods[i], name)) {
            out = (uint16_t)i;
            break;
        }
    if (!out && r->nmods < LP_MAX_MODS) {
        char *c = strdup(name);
        if (c) {
            r->mods[++r->nmods] = c;
            out = (uint16_t)r->nmods;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return out;
}

static uint64_t fnv1a(const char *t, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)t[i]) * 1099511628211ull;
    return h;
}

int64_t lp_text_key(const char *t, size_t len)
{
    return (int64_t)(fnv1a(t, len) & ((1ull << 62) - 1));
}

int32_t lp_text_id(const char *t, size_t len)
{
    return (int32_t)(fnv1a(t, len) & 0x7fffffffu);
}

void lp_release(parity_lp_reader_t *r, size_t upto)
{
    if (!r->mapped) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    size_t e = upto / (size_t)pg * (size_t)pg;
    /* Release in steps of at least 8 MiB to keep the syscall count low. */
    if (e > r->released + ((size_t)8 << 20)) {
        madvise((void *)(r->base + r->released), e - r->released, MADV_DONTNEED);
        r->released = e;
    }
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static parity_status_t open_common(parity_lp_reader_t *r, parity_lp_reader_t **out, parity_diag_t *d)
{
    parity_lp_format_t f = r->opts.format;
    if (f == PARITY_LP_AUTO) {
        if (r->len >= 6 && !memcmp(r->base, "\x93NUMPY", 6)) f = PARITY_LP_NPY;
        else if (ends_with(r->name, ".npy")) f = PARITY_LP_NPY;
        else if (ends_with(r->name, ".safetensors")) f = PARITY_LP_SAFETENSORS;
        else if (r->len >= 9 && r->base[8] == '{' && r->base[0] != '{') f = PARITY_LP_SAFETENSORS;
        else f = PARITY_LP_JSONL; /* the JSON shape is detected from the first record */
    }
    /* JSON shapes are told apart by the first record (logprob_jsonl.c) unless forced. */
    r->fmt = f == PARITY_LP_JSONL && r->opts.format == PARITY_LP_AUTO ? PARITY_LP_AUTO : f;
    parity_status_t st;
    if (f == PARITY_LP_NPY) st = lp_npy_open(r, d);
    else if (f == PARITY_LP_SAFETENSORS) st = lp_st_open(r, d);
    else st = lp_jsonl_open(r, d);
    if (st == PARITY_OK && r->fmt == PARITY_LP_AUTO) r->fmt = PARITY_LP_JSONL;
    if (st != PARITY_OK) {
        parity_lp_close(r);
        return st;
    }
    *out = r;
    return PARITY_OK;
}

static parity_lp_reader_t *new_reader(const char *name, const parity_lp_read_opts_t *opts)
{
    parity_lp_reader_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    if (opts) r->opts = *opts;
    if (!r->opts.max_line) r->opts.max_line = (size_t)256 << 20;
    r->name = strdup(name ? name : "<memory>");
    r->slice_field = r->opts.slice_field ? strdup(r->opts.slice_field) : NULL;
    r->opts.slice_field = r->slice_field;
    r->dtype = "text";
    if (!r->name || (opts && opts->slice_field && !r->slice_field)) {
        parity_lp_close(r);
        return NULL;
    }
    return r;
}

parity_status_t parity_lp_open_mem(const void *buf, size_t len, const char *name,
                                   const parity_lp_read_opts_t *opts, parity_lp_reader_t **out,
                                   parity_diag_t *diag)
{
    if (!out || (!buf && len)) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs: NULL argument");
    *out = NULL;
    parity_lp_reader_t *r = new_reader(name, opts);
    if (!r) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    r->base = buf;
    r->len = len;
    return open_common(r, out, diag);
}

parity_status_t parity_lp_open(const char *path, const parity_lp_read_opts_t *opts,
                               parity_lp_reader_t **out, parity_diag_t *diag)
{
    if (!path || !out) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_IO, "%s: not a regular file", path);
    }
    parity_lp_reader_t *r = new_reader(path, opts);
    if (!r) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    r->len = (size_t)sb.st_size;
    if (r->len) {
        void *m = mmap(NULL, r->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            parity_lp_close(r);
            return parity_diag_set(diag, PARITY_E_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        madvise(m, r->len, MADV_SEQUENTIAL);
        r->base = m;
        r->mapped = 1;
    }
    close(fd);
    return open_common(r, out, diag);
}

void parity_lp_close(parity_lp_reader_t *r)
{
    if (!r) return;
    parity_st_close(r->st);
    if (r->mapped && r->base) munmap((void *)r->base, r->len);
    for (int i = 0; i < 2; i++)
        if (r->side_base[i]) munmap((void *)r->side_base[i], r->side_len[i]);
    for (size_t i = 1; i <= r->nmods; i++) free(r->mods[i]);
    pthread_mutex_destroy(&r->mu);
    free(r->slice_field);
    free(r->name);
    free(r);
}

parity_status_t parity_lp_next_batch(parity_lp_reader_t *r, parity_lp_seq_t *seqs, size_t max,
                                     size_t *got, parity_diag_t *diag)
{
    if (!r || !got || (!seqs && max)) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs: NULL argument");
    *got = 0;
    if (max == 0) return PARITY_OK;
    if (r->fmt == PARITY_LP_NPY || r->fmt == PARITY_LP_SAFETENSORS) return lp_dense_next(r, seqs, max, got, diag);
    return lp_jsonl_next(r, seqs, max, got, diag);
}

parity_lp_format_t parity_lp_reader_format(const parity_lp_reader_t *r)
{
    return r ? r->fmt : PARITY_LP_AUTO;
}

const char *parity_lp_reader_modality(const parity_lp_reader_t *r, uint16_t i)
{
    return r && i >= 1 && i <= r->nmods ? r->mods[i] : NULL;
}

const char *parity_lp_reader_dtype(const parity_lp_reader_t *r)
{
    return r ? r->dtype : "text";
}

const char *parity_lp_reader_name(const parity_lp_reader_t *r)
{
    return r ? r->name : "";
}

/* The logprob readers' dispatcher: opening a dump (mapping the file), telling its format, handing
 * it to the reader of that format (logprob_npy.c opens npy and safetensors, logprob_dense.c
 * reads their rows, logprob_jsonl.c the JSON shapes), closing it, and the public names of
 * formats and relaxations. It sits above the readers and nothing below calls it back: the
 * helpers they share are in logprob_record.c (the graph: logprob_impl.h). */
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

const char *parity_logprob_format_name(parity_logprob_format_t f)
{
    return (unsigned)f < sizeof fmt_names / sizeof *fmt_names ? fmt_names[f] : "unknown";
}

parity_status_t parity_logprob_format_from_name(const char *name, parity_logprob_format_t *out)
{
    if (!name || !out) return PARITY_E_INVALID;
    for (size_t i = 0; i < sizeof fmt_names / sizeof *fmt_names; i++)
        if (!strcmp(name, fmt_names[i])) {
            *out = (parity_logprob_format_t)i;
            return PARITY_OK;
        }
    return PARITY_E_NOTFOUND;
}

parity_status_t parity_logprob_allow_from_names(const char *names, unsigned *allow)
{
    if (!names || !allow) return PARITY_E_INVALID;
    for (const char *p = names;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 8 && !strncmp(p, "positive", 8)) *allow |= PARITY_LOGPROB_ALLOW_POSITIVE;
        else if (n == 9 && !strncmp(p, "nonfinite", 9)) *allow |= PARITY_LOGPROB_ALLOW_NONFINITE;
        else return PARITY_E_NOTFOUND;
        if (!e) return PARITY_OK;
        p = e + 1;
    }
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static parity_status_t open_common(parity_logprob_reader_t *r, parity_logprob_reader_t **out, parity_diag_t *d)
{
    parity_logprob_format_t f = r->opts.format;
    if (f == PARITY_LOGPROB_AUTO) {
        if (r->len >= 6 && !memcmp(r->base, "\x93NUMPY", 6)) f = PARITY_LOGPROB_NPY;
        else if (ends_with(r->name, ".npy")) f = PARITY_LOGPROB_NPY;
        else if (ends_with(r->name, ".safetensors")) f = PARITY_LOGPROB_SAFETENSORS;
        else if (r->len >= 9 && r->base[8] == '{' && r->base[0] != '{') f = PARITY_LOGPROB_SAFETENSORS;
        else f = PARITY_LOGPROB_JSONL; /* the JSON shape is detected from the first record */
    }
    /* JSON shapes are told apart by the first record (logprob_jsonl.c) unless forced. */
    r->fmt = f == PARITY_LOGPROB_JSONL && r->opts.format == PARITY_LOGPROB_AUTO ? PARITY_LOGPROB_AUTO : f;
    parity_status_t st;
    if (f == PARITY_LOGPROB_NPY) st = lp_npy_open(r, d);
    else if (f == PARITY_LOGPROB_SAFETENSORS) st = lp_st_open(r, d);
    else st = lp_jsonl_open(r, d);
    if (st == PARITY_OK && r->fmt == PARITY_LOGPROB_AUTO) r->fmt = PARITY_LOGPROB_JSONL;
    if (st != PARITY_OK) {
        parity_logprob_close(r);
        return st;
    }
    *out = r;
    return PARITY_OK;
}

static parity_logprob_reader_t *new_reader(const char *name, const parity_logprob_read_opts_t *opts)
{
    parity_logprob_reader_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    if (opts) r->opts = *opts;
    if (!r->opts.max_line) r->opts.max_line = (size_t)256 << 20;
    r->name = strdup(name ? name : "<memory>");
    r->slice_field = r->opts.slice_field ? strdup(r->opts.slice_field) : NULL;
    r->opts.slice_field = r->slice_field;
    r->dtype = "text";
    if (!r->name || (opts && opts->slice_field && !r->slice_field)) {
        parity_logprob_close(r);
        return NULL;
    }
    return r;
}

parity_status_t parity_logprob_open_mem(const void *buf, size_t len, const char *name,
                                        const parity_logprob_read_opts_t *opts, parity_logprob_reader_t **out,
                                        parity_diag_t *diag)
{
    if (!out || (!buf && len)) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs: NULL argument");
    *out = NULL;
    parity_logprob_reader_t *r = new_reader(name, opts);
    if (!r) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    r->base = buf;
    r->len = len;
    return open_common(r, out, diag);
}

parity_status_t parity_logprob_open(const char *path, const parity_logprob_read_opts_t *opts,
                                    parity_logprob_reader_t **out, parity_diag_t *diag)
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
    parity_logprob_reader_t *r = new_reader(path, opts);
    if (!r) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    r->len = (size_t)sb.st_size;
    if (r->len) {
        void *m = mmap(NULL, r->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            parity_logprob_close(r);
            return parity_diag_set(diag, PARITY_E_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        madvise(m, r->len, MADV_SEQUENTIAL);
        r->base = m;
        r->mapped = 1;
    }
    close(fd);
    return open_common(r, out, diag);
}

void parity_logprob_close(parity_logprob_reader_t *r)
{
    if (!r) return;
    parity_safetensors_close(r->st);
    if (r->mapped && r->base) munmap((void *)r->base, r->len);
    for (int i = 0; i < 2; i++)
        if (r->side_base[i]) munmap((void *)r->side_base[i], r->side_len[i]);
    for (size_t i = 1; i <= r->nmods; i++) free(r->mods[i]);
    pthread_mutex_destroy(&r->mu);
    free(r->slice_field);
    free(r->name);
    free(r);
}

parity_status_t parity_logprob_next_batch(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max,
                                          size_t *got, parity_diag_t *diag)
{
    if (!r || !got || (!seqs && max)) return parity_diag_set(diag, PARITY_E_INVALID, "logprobs: NULL argument");
    *got = 0;
    if (max == 0) return PARITY_OK;
    if (r->fmt == PARITY_LOGPROB_NPY || r->fmt == PARITY_LOGPROB_SAFETENSORS) return lp_dense_next(r, seqs, max, got, diag);
    return lp_jsonl_next(r, seqs, max, got, diag);
}

parity_logprob_format_t parity_logprob_reader_format(const parity_logprob_reader_t *r)
{
    return r ? r->fmt : PARITY_LOGPROB_AUTO;
}

const char *parity_logprob_reader_modality(const parity_logprob_reader_t *r, uint16_t i)
{
    return r && i >= 1 && i <= r->nmods ? r->mods[i] : NULL;
}

const char *parity_logprob_reader_dtype(const parity_logprob_reader_t *r)
{
    return r ? r->dtype : "text";
}

const char *parity_logprob_reader_name(const parity_logprob_reader_t *r)
{
    return r ? r->name : "";
}

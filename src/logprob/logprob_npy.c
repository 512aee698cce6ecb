/* Opening dense logprob dumps: .npy (format versions 1-3, with optional sidecars X.mask.npy and
 * X.tokens.npy) and safetensors (named tensors logprobs, token_ids, mask, modality, phase,
 * top_ids, top_logprobs), into the reader's dense views (lp_dense_t). Every declared shape is
 * checked against the bytes actually present before any element is touched; nothing is
 * allocated at a declared size. Reading the rows: logprob_dense.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/logprob/logprob_impl.h"

typedef struct {
    int dt;
    int fortran;
    int ndim;
    uint64_t shape[3];
    uint64_t data_off;
} npy_hdr_t;

/* Parse the header of a .npy image (numpy/lib/format.py: magic, version, little-endian header
 * length, a Python dict literal with 'descr', 'fortran_order', 'shape'). */
static parity_status_t npy_parse(const unsigned char *b, size_t len, const char *fn, npy_hdr_t *h,
                                 parity_diag_t *d)
{
    memset(h, 0, sizeof *h);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset 0: not a .npy file (magic \\x93NUMPY expected)", fn);
    int major = b[6];
    uint64_t hl, ho;
    if (major == 1) {
        hl = (uint64_t)b[8] | (uint64_t)b[9] << 8;
        ho = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset 8: truncated header length", fn);
        hl = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
        ho = 12;
    } else {
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset 6: npy format version %d, expected 1, 2 or 3", fn, major);
    }
    if (hl > len - ho)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: offset 8: header length %llu but only %zu bytes follow", fn,
                               (unsigned long long)hl, len - (size_t)ho);
    char hdr[4096];
    if (hl >= sizeof hdr)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset 8: header of %llu bytes is too long (max 4095)",
                               fn, (unsigned long long)hl);
    memcpy(hdr, b + ho, hl);
    hdr[hl] = 0;
    h->data_off = ho + hl;
    const char *p = strstr(hdr, "'descr'");
    const char *q;
    char descr[16] = {0};
    if (!p || !(p = strchr(p + 7, '\'')) || !(q = strchr(p + 1, '\'')) || q - p - 1 >= (long)sizeof descr)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset %llu: header has no 'descr' string", fn,
                               (unsigned long long)ho);
    memcpy(descr, p + 1, (size_t)(q - p - 1));
    static const struct {
        const char *s;
        int dt;
    } dts[] = {{"<f8", PARITY_SAFETENSORS_F64}, {"<f4", PARITY_SAFETENSORS_F32}, {"<f2", PARITY_SAFETENSORS_F16}, {"<i8", PARITY_SAFETENSORS_I64},
               {"<i4", PARITY_SAFETENSORS_I32}, {"<i2", PARITY_SAFETENSORS_I16}, {"|i1", PARITY_SAFETENSORS_I8},  {"|u1", PARITY_SAFETENSORS_U8},
               {"|b1", PARITY_SAFETENSORS_BOOL}};
    h->dt = -1;
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
        if (!strcmp(descr, dts[i].s)) h->dt = dts[i].dt;
    if (h->dt < 0)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: header: descr '%s' is not supported (expected little-endian <f8, "
                               "<f4, <f2, <i8, <i4, <i2, |i1, |u1 or |b1)",
                               fn, descr);
    p = strstr(hdr, "'fortran_order'");
    if (!p) return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: no 'fortran_order'", fn);
    p += 15;
    while (*p == ' ' || *p == ':') p++;
    if (!strncmp(p, "True", 4)) h->fortran = 1;
    else if (strncmp(p, "False", 5))
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: fortran_order must be True or False", fn);
    p = strstr(hdr, "'shape'");
    if (!p || !(p = strchr(p, '(')))
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: no 'shape' tuple", fn);
    p++;
    uint64_t numel = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (*p < '0' || *p > '9')
            return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: bad 'shape' tuple", fn);
        char *e;
        errno = 0;
        unsigned long long v = strtoull(p, &e, 10);
        if (errno || v > LP_MAX_DIM)
            return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: shape dimension %s is absurd", fn, p);
        if (h->ndim >= 3)
            return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: more than 3 dimensions", fn);
        h->shape[h->ndim++] = v;
        if (v && numel > UINT64_MAX / 8 / v)
            return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: shape overflows", fn);
        numel *= v;
        p = e;
    }
    uint64_t need = numel * parity_safetensors_dtype_size((parity_safetensors_dtype_t)h->dt);
    if (need != len - h->data_off)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: offset %llu: shape declares %llu data bytes but the file has %llu "
                               "after the header%s",
                               fn, (unsigned long long)h->data_off, (unsigned long long)need,
                               (unsigned long long)(len - h->data_off),
                               need > len - h->data_off ? " (truncated?)" : "");
    return PARITY_OK;
}

/* Set a dense view of an [S, P] (or [P], or [S, P, K] for top-k) array. */
static void dense_set(lp_dense_t *a, const unsigned char *base, uint64_t file_off, int dt, int fortran,
                      uint64_t S, uint64_t P, uint64_t K)
{
    a->base = base;
    a->file_off = file_off;
    a->dt = dt;
    a->es = parity_safetensors_dtype_size((parity_safetensors_dtype_t)dt);
    a->present = 1;
    if (!fortran) {
        a->ks = 1;
        a->cs = K;
        a->rs = P * K;
    } else {
        a->rs = 1;
        a->cs = S;
        a->ks = S * P;
    }
}

static const char *dtype_name(int dt)
{
    switch (dt) {
    case PARITY_SAFETENSORS_F64: return "fp64";
    case PARITY_SAFETENSORS_F32: return "fp32";
    case PARITY_SAFETENSORS_BF16: return "bf16";
    case PARITY_SAFETENSORS_F16: return "fp16";
    default: return "int";
    }
}

static int is_float(int dt)
{
    return dt == PARITY_SAFETENSORS_F64 || dt == PARITY_SAFETENSORS_F32 || dt == PARITY_SAFETENSORS_BF16 || dt == PARITY_SAFETENSORS_F16;
}

static void intern_default_mods(parity_logprob_reader_t *r, const char *names)
{
    /* Modality value v maps to table index v + 1: names from the comma-separated list, the
     * decimal value otherwise. The list is walked once; past its end a decimal "v" differs from
     * every other decimal and from every "name#u", so it is checked against the entries made
     * while the list lasted only (lp_intern_mod searches the whole table: 254 such searches
     * made every open quadratic, 90% of fuzz_lp_safetensors' time under instrumentation). */
    char buf[64];
    const char *p = names; /* the v-th name of the list; NULL past its end */
    size_t listed = 0;     /* table entries 1..listed were made while the list lasted */
    for (int v = 0; v < LP_MAX_MODS - 1; v++) {
        const char *nm = p;
        size_t nl = 0;
        if (p) {
            const char *e = strchr(p, ',');
            nl = e ? (size_t)(e - p) : strlen(p);
            p = e ? e + 1 : NULL;
        }
        if (nm && nl > 0 && nl < sizeof buf) {
            memcpy(buf, nm, nl);
            buf[nl] = 0;
        } else {
            snprintf(buf, sizeof buf, "%d", v);
        }
        int direct = !nm; /* past the list: appended, unless a listed entry equals it */
        for (size_t i = 1; direct && i <= listed; i++) direct = strcmp(r->mods[i], buf) != 0;
        if (direct) {
            char *c = strdup(buf);
            if (c) r->mods[++r->nmods] = c;
        } else if (lp_intern_mod(r, buf) != (uint16_t)(v + 1)) {
            char b2[96]; /* a duplicate name: make it unique so indices stay v + 1 */
            snprintf(b2, sizeof b2, "%s#%d", buf, v);
            lp_intern_mod(r, b2);
        }
        if (nm) listed = r->nmods;
        if (r->nmods != (size_t)(v + 1)) break;
    }
}

static parity_status_t map_sidecar(parity_logprob_reader_t *r, int slot, const char *suffix, lp_dense_t *arr,
                                   parity_diag_t *d)
{
    size_t nl = strlen(r->name);
    if (nl < 4 || strcmp(r->name + nl - 4, ".npy")) return PARITY_OK;
    char path[4096];
    if (nl - 4 + strlen(suffix) >= sizeof path) return PARITY_OK;
    memcpy(path, r->name, nl - 4);
    memcpy(path + nl - 4, suffix, strlen(suffix) + 1);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return PARITY_OK; /* no sidecar */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size == 0) {
        close(fd);
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: empty or unreadable", path);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return parity_diag_set(d, PARITY_E_IO, "%s: cannot map", path);
    r->side_base[slot] = m;
    r->side_len[slot] = (size_t)sb.st_size;
    npy_hdr_t h;
    parity_status_t st = npy_parse(m, (size_t)sb.st_size, path, &h, d);
    if (st) return st;
    uint64_t S = h.ndim == 2 ? h.shape[0] : 1, P = h.ndim == 2 ? h.shape[1] : h.shape[0];
    if (h.ndim < 1 || h.ndim > 2 || S != r->nrows || P != r->ncols)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: header: shape does not match %s ([%llu, %llu] expected)", path,
                               r->name, (unsigned long long)r->nrows, (unsigned long long)r->ncols);
    dense_set(arr, (const unsigned char *)m + h.data_off, h.data_off, h.dt, h.fortran, S, P, 1);
    return PARITY_OK;
}

parity_status_t lp_npy_open(parity_logprob_reader_t *r, parity_diag_t *d)
{
    npy_hdr_t h;
    parity_status_t st = npy_parse(r->base, r->len, r->name, &h, d);
    if (st) return st;
    if (!is_float(h.dt) || h.ndim < 1 || h.ndim > 2)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: header: logprobs must be a 1-D or 2-D [sequences, positions] float "
                               "array, got %d-D %s",
                               r->name, h.ndim, dtype_name(h.dt));
    r->nrows = h.ndim == 2 ? h.shape[0] : 1;
    r->ncols = h.ndim == 2 ? h.shape[1] : h.shape[0];
    r->dtype = dtype_name(h.dt);
    r->ordinal_ids = 1;
    dense_set(&r->lp, r->base + h.data_off, h.data_off, h.dt, h.fortran, r->nrows, r->ncols, 1);
    if ((st = map_sidecar(r, 0, ".mask.npy", &r->mask, d))) return st;
    if ((st = map_sidecar(r, 1, ".tokens.npy", &r->tok, d))) return st;
    if (r->tok.present && is_float(r->tok.dt))
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: tokens sidecar must hold integers", r->name);
    return PARITY_OK;
}

static const parity_safetensors_tensor_t *find_any(parity_safetensors_file_t *f, const char *const *names)
{
    for (; *names; names++) {
        const parity_safetensors_tensor_t *t = parity_safetensors_find(f, *names);
        if (t) return t;
    }
    return NULL;
}

parity_status_t lp_st_open(parity_logprob_reader_t *r, parity_diag_t *d)
{
    parity_status_t st = parity_safetensors_open_mem(r->base, r->len, r->name, &r->st, d);
    if (st) return st;
    static const char *const n_lp[] = {"logprobs", "logprob", "token_logprobs", "log_probs", NULL};
    static const char *const n_tok[] = {"token_ids", "tokens", "input_ids", NULL};
    static const char *const n_mask[] = {"mask", "attention_mask", "loss_mask", NULL};
    static const char *const n_mod[] = {"modality", NULL};
    static const char *const n_ph[] = {"phase", NULL};
    static const char *const n_ti[] = {"top_ids", "top_token_ids", NULL};
    static const char *const n_tl[] = {"top_logprobs", NULL};
    const parity_safetensors_tensor_t *t = find_any(r->st, n_lp);
    if (!t)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: no tensor named 'logprobs' (or logprob, token_logprobs, log_probs)", r->name);
    if (!is_float((int)t->dtype) || t->ndim < 1 || t->ndim > 2)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: tensor '%s': expected a 1-D or 2-D float tensor, got %d-D %s", r->name,
                               t->name, t->ndim, parity_safetensors_dtype_name(t->dtype));
    r->nrows = t->ndim == 2 ? t->shape[0] : 1;
    r->ncols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    r->dtype = dtype_name((int)t->dtype);
    r->ordinal_ids = 1;
    dense_set(&r->lp, r->base + t->offset, t->offset, (int)t->dtype, 0, r->nrows, r->ncols, 1);
    const char *const *lists[] = {n_tok, n_mask, n_mod, n_ph};
    lp_dense_t *arrs[] = {&r->tok, &r->mask, &r->mod, &r->phase};
    for (int i = 0; i < 4; i++) {
        const parity_safetensors_tensor_t *u = find_any(r->st, lists[i]);
        if (!u) continue;
        if (u->ndim != t->ndim || u->shape[0] != t->shape[0] || (t->ndim == 2 && u->shape[1] != t->shape[1]))
            return parity_diag_set(d, PARITY_E_FORMAT,
                                   "%s: tensor '%s': shape must equal that of '%s' ([%llu, %llu])", r->name,
                                   u->name, t->name, (unsigned long long)r->nrows, (unsigned long long)r->ncols);
        if (i != 1 && is_float((int)u->dtype))
            return parity_diag_set(d, PARITY_E_FORMAT, "%s: tensor '%s': expected an integer dtype, got %s",
                                   r->name, u->name, parity_safetensors_dtype_name(u->dtype));
        dense_set(arrs[i], r->base + u->offset, u->offset, (int)u->dtype, 0, r->nrows, r->ncols, 1);
    }
    if (r->mod.present) intern_default_mods(r, parity_safetensors_metadata(r->st, "modality_names"));
    const parity_safetensors_tensor_t *ti = find_any(r->st, n_ti), *tl = find_any(r->st, n_tl);
    if (ti || tl) {
        if (!ti || !tl || ti->ndim != t->ndim + 1 || tl->ndim != ti->ndim ||
            memcmp(ti->shape, tl->shape, sizeof ti->shape) || ti->shape[0] != t->shape[0] ||
            (t->ndim == 2 && ti->shape[1] != t->shape[1]) || is_float((int)ti->dtype) || !is_float((int)tl->dtype) ||
            ti->shape[ti->ndim - 1] == 0 || ti->shape[ti->ndim - 1] > 4096)
            return parity_diag_set(d, PARITY_E_FORMAT,
                                   "%s: top_ids (integer) and top_logprobs (float) must both be present, "
                                   "shaped like logprobs plus a last dimension k in 1..4096",
                                   r->name);
        r->topk = ti->shape[ti->ndim - 1];
        dense_set(&r->top_id, r->base + ti->offset, ti->offset, (int)ti->dtype, 0, r->nrows, r->ncols, r->topk);
        dense_set(&r->top_lp, r->base + tl->offset, tl->offset, (int)tl->dtype, 0, r->nrows, r->ncols, r->topk);
    }
    return PARITY_OK;
}

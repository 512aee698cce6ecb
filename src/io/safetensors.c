/* safetensors reader (mmap + cJSON header, every offset validated against the file size before
 * use) and atomic writer. Does not interpret tensors; see logprob_npy.c for the logprob view. */
#include "parity/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct parity_safetensors_file {
    const unsigned char *base; /* whole file */
    size_t len;
    int mapped;                /* base is our mmap */
    char *name;
    parity_safetensors_tensor_t *t;
    size_t nt;
    char **meta;               /* 2 * nmeta strings */
    size_t nmeta;
    char *names;               /* tensor names, NUL-separated */
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [PARITY_SAFETENSORS_F64] = {"F64", 8}, [PARITY_SAFETENSORS_F32] = {"F32", 4}, [PARITY_SAFETENSORS_BF16] = {"BF16", 2},
    [PARITY_SAFETENSORS_F16] = {"F16", 2}, [PARITY_SAFETENSORS_I32] = {"I32", 4}, [PARITY_SAFETENSORS_I64] = {"I64", 8},
    [PARITY_SAFETENSORS_U8] = {"U8", 1},   [PARITY_SAFETENSORS_I8] = {"I8", 1},   [PARITY_SAFETENSORS_BOOL] = {"BOOL", 1},
    [PARITY_SAFETENSORS_I16] = {"I16", 2},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

const char *parity_safetensors_dtype_name(parity_safetensors_dtype_t dt)
{
    return (unsigned)dt < NDTYPES ? dtypes[dt].name : NULL;
}

size_t parity_safetensors_dtype_size(parity_safetensors_dtype_t dt)
{
    return (unsigned)dt < NDTYPES ? dtypes[dt].size : 0;
}

parity_status_t parity_safetensors_dtype_from_name(const char *name, parity_safetensors_dtype_t *out)
{
    if (!name || !out) return PARITY_E_INVALID;
    for (size_t i = 0; i < NDTYPES; i++)
        if (!strcmp(name, dtypes[i].name)) {
            *out = (parity_safetensors_dtype_t)i;
            return PARITY_OK;
        }
    return PARITY_E_NOTFOUND;
}

static uint64_t rd_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A JSON number that is a non-negative integer below 2^53 (exact in a double). */
static int json_u64(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

typedef struct {
    uint64_t b, e;
    size_t i;
} span_t;

static int cmp_span(const void *x, const void *y)
{
    const span_t *a = x, *b = y;
    return a->b < b->b ? -1 : a->b > b->b ? 1 : (a->e < b->e ? -1 : a->e > b->e);
}

void parity_safetensors_close(parity_safetensors_file_t *f)
{
    if (!f) return;
    if (f->mapped && f->base) munmap((void *)f->base, f->len);
    if (f->meta)
        for (size_t i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->t);
    free(f->names);
    free(f->name);
    free(f);
}

static parity_status_t parse(parity_safetensors_file_t *f, parity_diag_t *d)
{
    const char *fn = f->name;
    if (f->len < 8)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: offset 0: file has %zu bytes, expected at least 8 (header length)",
                               fn, f->len);
    uint64_t hlen = rd_u64le(f->base);
    if (hlen > PARITY_SAFETENSORS_MAX_HEADER)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: offset 0: header length %llu exceeds the 100 MB limit", fn,
                               (unsigned long long)hlen);
    if (hlen < 2 || hlen > f->len - 8)
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s: offset 0: header length %llu, but the file has %zu bytes after "
                               "the length field",
                               fn, (unsigned long long)hlen, f->len - 8);
    const char *h = (const char *)f->base + 8;
    if (h[0] != '{')
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset 8: header must be a JSON object", fn);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        size_t off = end ? (size_t)(end - h) + 8 : 8;
        const char *ep = cJSON_GetErrorPtr();
        if (!end && ep && ep >= h && ep <= h + hlen) off = (size_t)(ep - h) + 8;
        cJSON_Delete(root);
        return parity_diag_set(d, PARITY_E_FORMAT, "%s: offset %zu: header is not valid JSON", fn, off);
    }
    /* Anything after the JSON inside the header must be padding (spaces). */
    if (end)
        for (const char *p = end; p < h + hlen; p++)
            if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r' && *p != '\0') {
                cJSON_Delete(root);
                return parity_diag_set(d, PARITY_E_FORMAT,
                                       "%s: offset %zu: unexpected bytes after the header JSON", fn,
                                       (size_t)(p - h) + 8);
            }
    uint64_t buf_len = f->len - 8 - hlen;
    uint64_t buf_off = 8 + hlen;
    size_t n = 0, names_len = 0;
    for (cJSON *it = root->child; it; it = it->next) {
        if (!it->string) continue;
        if (!strcmp(it->string, "__metadata__")) continue;
        n++;
        names_len += strlen(it->string) + 1;
    }
    parity_status_t st = PARITY_OK;
    span_t *spans = NULL;
    f->t = calloc(n ? n : 1, sizeof *f->t);
    f->names = malloc(names_len ? names_len : 1);
    spans = calloc(n ? n : 1, sizeof *spans);
    if (!f->t || !f->names || !spans) {
        st = PARITY_E_NOMEM;
        goto out;
    }
    char *np = f->names;
    for (cJSON *it = root->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it) || f->meta) {
                st = parity_diag_set(d, PARITY_E_FORMAT,
                                     "%s: header: __metadata__ must be one object (given twice or not an object)", fn);
                goto out;
            }
            size_t m = 0;
            for (cJSON *kv = it->child; kv; kv = kv->next) m++;
            f->meta = calloc(2 * m + 1, sizeof *f->meta);
            if (!f->meta) {
                st = PARITY_E_NOMEM;
                goto out;
            }
            for (cJSON *kv = it->child; kv; kv = kv->next) {
                if (!cJSON_IsString(kv)) {
                    st = parity_diag_set(d, PARITY_E_FORMAT,
                                         "%s: header: __metadata__.%s must be a string", fn, kv->string);
                    goto out;
                }
                f->meta[2 * f->nmeta] = strdup(kv->string);
                f->meta[2 * f->nmeta + 1] = strdup(kv->valuestring);
                f->nmeta++;
                if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1]) {
                    st = PARITY_E_NOMEM;
                    goto out;
                }
            }
            continue;
        }
        parity_safetensors_tensor_t *t = &f->t[f->nt];
        size_t nl = strlen(it->string) + 1;
        memcpy(np, it->string, nl);
        t->name = np;
        np += nl;
        if (!cJSON_IsObject(it)) {
            st = parity_diag_set(d, PARITY_E_FORMAT, "%s: header: tensor '%s' must be an object", fn, t->name);
            goto out;
        }
        cJSON *jd = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        cJSON *js = cJSON_GetObjectItemCaseSensitive(it, "shape");
        cJSON *jo = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(jd) || parity_safetensors_dtype_from_name(jd->valuestring, &t->dtype) != PARITY_OK) {
            st = parity_diag_set(d, PARITY_E_FORMAT,
                                 "%s: header: tensor '%s': dtype %s%s%s, expected one of F64 F32 BF16 "
                                 "F16 I64 I32 I16 I8 U8 BOOL",
                                 fn, t->name, cJSON_IsString(jd) ? "'" : "",
                                 cJSON_IsString(jd) ? jd->valuestring : "missing",
                                 cJSON_IsString(jd) ? "'" : "");
            goto out;
        }
        if (!cJSON_IsArray(js) || cJSON_GetArraySize(js) > PARITY_SAFETENSORS_MAX_DIMS) {
            st = parity_diag_set(d, PARITY_E_FORMAT,
                                 "%s: header: tensor '%s': shape must be an array of at most %d "
                                 "non-negative integers",
                                 fn, t->name, PARITY_SAFETENSORS_MAX_DIMS);
            goto out;
        }
        uint64_t numel = 1;
        int overflow = 0;
        t->ndim = 0;
        for (cJSON *e = js->child; e; e = e->next) {
            uint64_t v;
            if (json_u64(e, &v) != 0) {
                st = parity_diag_set(d, PARITY_E_FORMAT,
                                     "%s: header: tensor '%s': shape entries must be non-negative integers",
                                     fn, t->name);
                goto out;
            }
            t->shape[t->ndim++] = v;
            if (v && numel > UINT64_MAX / v) overflow = 1;
            numel *= v;
        }
        size_t es = parity_safetensors_dtype_size(t->dtype);
        if (overflow || numel > UINT64_MAX / es) {
            st = parity_diag_set(d, PARITY_E_FORMAT, "%s: header: tensor '%s': shape overflows 64 bits",
                                 fn, t->name);
            goto out;
        }
        t->numel = numel;
        t->nbytes = numel * es;
        uint64_t b, e;
        if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || json_u64(jo->child, &b) != 0 ||
            json_u64(jo->child->next, &e) != 0 || e < b) {
            st = parity_diag_set(d, PARITY_E_FORMAT,
                                 "%s: header: tensor '%s': data_offsets must be [begin, end] with "
                                 "0 <= begin <= end",
                                 fn, t->name);
            goto out;
        }
        if (e > buf_len) {
            st = parity_diag_set(d, PARITY_E_FORMAT,
                                 "%s: header: tensor '%s': data_offsets end %llu is past the byte "
                                 "buffer (%llu bytes from offset %llu): truncated file?",
                                 fn, t->name, (unsigned long long)e, (unsigned long long)buf_len,
                                 (unsigned long long)buf_off);
            goto out;
        }
        if (e - b != t->nbytes) {
            st = parity_diag_set(d, PARITY_E_FORMAT,
                                 "%s: header: tensor '%s': data_offsets span %llu bytes, expected "
                                 "%llu (%llu elements of %s)",
                                 fn, t->name, (unsigned long long)(e - b), (unsigned long long)t->nbytes,
                                 (unsigned long long)numel, parity_safetensors_dtype_name(t->dtype));
            goto out;
        }
        t->offset = buf_off + b;
        spans[f->nt] = (span_t){b, e, f->nt};
        f->nt++;
    }
    qsort(spans, f->nt, sizeof *spans, cmp_span);
    for (size_t i = 1; i < f->nt; i++)
        if (spans[i].b < spans[i - 1].e) {
            st = parity_diag_set(d, PARITY_E_FORMAT, "%s: header: tensors '%s' and '%s' overlap", fn,
                                 f->t[spans[i - 1].i].name, f->t[spans[i].i].name);
            goto out;
        }
    for (size_t i = 1; i < f->nt; i++)
        for (size_t j = 0; j < i && i < 4096; j++)
            if (!strcmp(f->t[i].name, f->t[j].name)) {
                st = parity_diag_set(d, PARITY_E_FORMAT, "%s: header: tensor '%s' appears twice", fn,
                                     f->t[i].name);
                goto out;
            }
out:
    free(spans);
    cJSON_Delete(root);
    return st;
}

static parity_status_t open_common(parity_safetensors_file_t *f, parity_safetensors_file_t **out, parity_diag_t *d)
{
    parity_status_t st = parse(f, d);
    if (st == PARITY_E_NOMEM) parity_diag_set(d, st, "%s: out of memory reading the header", f->name);
    if (st != PARITY_OK) {
        parity_safetensors_close(f);
        return st;
    }
    *out = f;
    return PARITY_OK;
}

parity_status_t parity_safetensors_open_mem(const void *buf, size_t len, const char *name,
                                            parity_safetensors_file_t **out, parity_diag_t *diag)
{
    if (!out || (!buf && len)) return parity_diag_set(diag, PARITY_E_INVALID, "safetensors: NULL argument");
    *out = NULL;
    parity_safetensors_file_t *f = calloc(1, sizeof *f);
    if (!f) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    f->base = buf;
    f->len = len;
    f->name = strdup(name ? name : "<memory>");
    if (!f->name) {
        free(f);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    return open_common(f, out, diag);
}

parity_status_t parity_safetensors_open(const char *path, parity_safetensors_file_t **out, parity_diag_t *diag)
{
    if (!path || !out) return parity_diag_set(diag, PARITY_E_INVALID, "safetensors: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_IO, "%s: not a regular file", path);
    }
    parity_safetensors_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(path))) {
        free(f);
        close(fd);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    f->len = (size_t)sb.st_size;
    if (f->len > 0) {
        void *m = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            parity_safetensors_close(f);
            return parity_diag_set(diag, PARITY_E_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        f->base = m;
        f->mapped = 1;
    }
    close(fd);
    return open_common(f, out, diag);
}

size_t parity_safetensors_count(const parity_safetensors_file_t *f)
{
    return f ? f->nt : 0;
}

const parity_safetensors_tensor_t *parity_safetensors_tensor(const parity_safetensors_file_t *f, size_t i)
{
    return f && i < f->nt ? &f->t[i] : NULL;
}

const parity_safetensors_tensor_t *parity_safetensors_find(const parity_safetensors_file_t *f, const char *name)
{
    if (!f || !name) return NULL;
    for (size_t i = 0; i < f->nt; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *parity_safetensors_metadata(const parity_safetensors_file_t *f, const char *key)
{
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
    return NULL;
}

size_t parity_safetensors_metadata_count(const parity_safetensors_file_t *f)
{
    return f ? f->nmeta : 0;
}

parity_status_t parity_safetensors_metadata_at(const parity_safetensors_file_t *f, size_t i, const char **key,
                                               const char **value)
{
    if (!f || i >= f->nmeta) return PARITY_E_INVALID;
    if (key) *key = f->meta[2 * i];
    if (value) *value = f->meta[2 * i + 1];
    return PARITY_OK;
}

const void *parity_safetensors_view(const parity_safetensors_file_t *f, const parity_safetensors_tensor_t *t)
{
    if (!f || !t) return NULL;
    return f->base + t->offset;
}

parity_status_t parity_safetensors_read_raw(const parity_safetensors_file_t *f, const parity_safetensors_tensor_t *t,
                                            uint64_t byte_off, void *dst, size_t n)
{
    if (!f || !t || (!dst && n) || byte_off > t->nbytes || n > t->nbytes - byte_off)
        return PARITY_E_INVALID;
    if (n) memcpy(dst, f->base + t->offset + byte_off, n);
    return PARITY_OK;
}

/* Exact widening conversions of the 16-bit float formats (every bf16/f16 value is a double). */
static double bf16_to_f64(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static double f16_to_f64(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(m + 1024, e - 25);
    return s ? -v : v;
}

double parity_safetensors_decode_f64(parity_safetensors_dtype_t dt, const void *src)
{
    const unsigned char *p = src;
    switch (dt) {
    case PARITY_SAFETENSORS_F64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case PARITY_SAFETENSORS_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case PARITY_SAFETENSORS_BF16:
    case PARITY_SAFETENSORS_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return dt == PARITY_SAFETENSORS_BF16 ? bf16_to_f64(h) : f16_to_f64(h);
    }
    default: {
        int64_t v = 0;
        parity_safetensors_decode_i64(dt, p, &v);
        return (double)v;
    }
    }
}

int parity_safetensors_decode_i64(parity_safetensors_dtype_t dt, const void *src, int64_t *out)
{
    const unsigned char *p = src;
    switch (dt) {
    case PARITY_SAFETENSORS_I64: memcpy(out, p, 8); return 0;
    case PARITY_SAFETENSORS_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        *out = v;
        return 0;
    }
    case PARITY_SAFETENSORS_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        *out = v;
        return 0;
    }
    case PARITY_SAFETENSORS_I8: *out = (int8_t)p[0]; return 0;
    case PARITY_SAFETENSORS_U8: *out = p[0]; return 0;
    case PARITY_SAFETENSORS_BOOL: *out = p[0] != 0; return 0;
    default: return -1;
    }
}

parity_status_t parity_safetensors_read_f64(const parity_safetensors_file_t *f, const parity_safetensors_tensor_t *t,
                                            uint64_t first, size_t n, double *dst)
{
    if (!f || !t || (!dst && n) || first > t->numel || n > t->numel - first) return PARITY_E_INVALID;
    size_t es = parity_safetensors_dtype_size(t->dtype);
    const unsigned char *p = f->base + t->offset + first * es;
    if (t->dtype == PARITY_SAFETENSORS_F64) {
        memcpy(dst, p, n * 8);
        return PARITY_OK;
    }
    for (size_t i = 0; i < n; i++) dst[i] = parity_safetensors_decode_f64(t->dtype, p + i * es);
    return PARITY_OK;
}

parity_status_t parity_safetensors_read_i64(const parity_safetensors_file_t *f, const parity_safetensors_tensor_t *t,
                                            uint64_t first, size_t n, int64_t *dst)
{
    if (!f || !t || (!dst && n) || first > t->numel || n > t->numel - first) return PARITY_E_INVALID;
    size_t es = parity_safetensors_dtype_size(t->dtype);
    const unsigned char *p = f->base + t->offset + first * es;
    for (size_t i = 0; i < n; i++, p += es)
        if (parity_safetensors_decode_i64(t->dtype, p, &dst[i]) != 0) return PARITY_E_INVALID;
    return PARITY_OK;
}

void parity_safetensors_release(const parity_safetensors_file_t *f, uint64_t byte_off, uint64_t n)
{
    if (!f || !f->mapped || byte_off >= f->len) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uint64_t b = (byte_off + (uint64_t)pg - 1) / (uint64_t)pg * (uint64_t)pg;
    uint64_t e = byte_off + n > f->len ? f->len : byte_off + n;
    e = e / (uint64_t)pg * (uint64_t)pg;
    if (e > b) madvise((void *)(f->base + b), (size_t)(e - b), MADV_DONTNEED);
}

/* ------------------------------------------------------------------------------------------ */

static parity_status_t write_all(FILE *fp, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, fp) == n ? PARITY_OK : PARITY_E_IO;
}

parity_status_t parity_safetensors_write(const char *path, const parity_safetensors_entry_t *entries, size_t n,
                                         const char *const *meta_kv, size_t nmeta, parity_diag_t *diag)
{
    if (!path || (!entries && n) || (!meta_kv && nmeta))
        return parity_diag_set(diag, PARITY_E_INVALID, "safetensors write: NULL argument");
    cJSON *root = cJSON_CreateObject();
    if (!root) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    parity_status_t st = PARITY_OK;
    char *hdr = NULL, *tmp = NULL;
    FILE *fp = NULL;
    if (nmeta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (size_t i = 0; m && i < nmeta; i++)
            if (!meta_kv[2 * i] || !meta_kv[2 * i + 1] ||
                !cJSON_AddStringToObject(m, meta_kv[2 * i], meta_kv[2 * i + 1])) {
                st = parity_diag_set(diag, PARITY_E_INVALID, "%s: metadata entry %zu is NULL", path, i);
                goto out;
            }
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const parity_safetensors_entry_t *e = &entries[i];
        size_t es = parity_safetensors_dtype_size(e->dtype);
        if (!e->name || !e->name[0] || !strcmp(e->name, "__metadata__") || es == 0 || e->ndim < 0 ||
            e->ndim > PARITY_SAFETENSORS_MAX_DIMS || (e->ndim > 0 && !e->shape)) {
            st = parity_diag_set(diag, PARITY_E_INVALID, "%s: tensor %zu: bad name, dtype or shape", path, i);
            goto out;
        }
        if (cJSON_GetObjectItemCaseSensitive(root, e->name)) {
            st = parity_diag_set(diag, PARITY_E_INVALID, "%s: tensor '%s' given twice", path, e->name);
            goto out;
        }
        uint64_t numel = 1;
        for (int k = 0; k < e->ndim; k++) {
            if (e->shape[k] && numel > UINT64_MAX / e->shape[k] / es) {
                st = parity_diag_set(diag, PARITY_E_INVALID, "%s: tensor '%s': shape overflows", path, e->name);
                goto out;
            }
            numel *= e->shape[k];
        }
        if (numel && !e->data) {
            st = parity_diag_set(diag, PARITY_E_INVALID, "%s: tensor '%s': NULL data", path, e->name);
            goto out;
        }
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        cJSON *sh = cJSON_CreateArray();
        cJSON *of = cJSON_CreateArray();
        if (!t || !sh || !of) {
            cJSON_Delete(sh);
            cJSON_Delete(of);
            st = PARITY_E_NOMEM;
            goto out;
        }
        cJSON_AddStringToObject(t, "dtype", parity_safetensors_dtype_name(e->dtype));
        for (int k = 0; k < e->ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e->shape[k]));
        cJSON_AddItemToObject(t, "shape", sh);
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        off += numel * es;
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToObject(t, "data_offsets", of);
    }
    hdr = cJSON_PrintUnformatted(root);
    if (!hdr) {
        st = PARITY_E_NOMEM;
        goto out;
    }
    size_t hl = strlen(hdr);
    size_t pad = (8 - (hl % 8)) % 8; /* the byte buffer starts 8-aligned */
    size_t tl = strlen(path) + 32;
    tmp = malloc(tl);
    if (!tmp) {
        st = PARITY_E_NOMEM;
        goto out;
    }
    snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
    fp = fopen(tmp, "wb");
    if (!fp) {
        st = parity_diag_set(diag, PARITY_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char lenb[8];
    uint64_t L = hl + pad;
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)(L >> (8 * i));
    static const char spaces[8] = "        ";
    st = write_all(fp, lenb, 8);
    if (!st) st = write_all(fp, hdr, hl);
    if (!st) st = write_all(fp, spaces, pad);
    for (size_t i = 0; !st && i < n; i++) {
        uint64_t numel = 1;
        for (int k = 0; k < entries[i].ndim; k++) numel *= entries[i].shape[k];
        st = write_all(fp, entries[i].data, (size_t)(numel * parity_safetensors_dtype_size(entries[i].dtype)));
    }
    if (!st && fflush(fp) != 0) st = PARITY_E_IO;
    if (!st && fsync(fileno(fp)) != 0 && errno != EINVAL) st = PARITY_E_IO;
    if (fclose(fp) != 0) st = PARITY_E_IO;
    fp = NULL;
    if (!st && rename(tmp, path) != 0) st = PARITY_E_IO;
    if (st) {
        parity_diag_set(diag, PARITY_E_IO, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
    }
out:
    if (fp) {
        fclose(fp);
        remove(tmp);
    }
    if (st == PARITY_E_NOMEM) parity_diag_set(diag, st, "%s: out of memory", path);
    free(tmp);
    cJSON_free(hdr);
    cJSON_Delete(root);
    return st;
}

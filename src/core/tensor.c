/* Owned tensors in shared anonymous memory with guard regions; dtype helpers. */
#include "parity/tensor.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "parity/format.h"
#include "src/core/internal.h"
#include "src/core/parallel.h"

size_t parity_dtype_size(parity_dtype_t dt)
{
    switch (dt) {
    case PARITY_DT_F64: case PARITY_DT_I64: return 8;
    case PARITY_DT_F32: case PARITY_DT_I32: return 4;
    case PARITY_DT_BF16: case PARITY_DT_F16: return 2;
    case PARITY_DT_U8: case PARITY_DT_E4M3FN: case PARITY_DT_E5M2: return 1;
    }
    return 0;
}

const char *parity_dtype_name(parity_dtype_t dt)
{
    switch (dt) {
    case PARITY_DT_F64: return "f64";
    case PARITY_DT_F32: return "f32";
    case PARITY_DT_BF16: return "bf16";
    case PARITY_DT_F16: return "f16";
    case PARITY_DT_I32: return "i32";
    case PARITY_DT_I64: return "i64";
    case PARITY_DT_U8: return "u8";
    case PARITY_DT_E4M3FN: return "e4m3fn";
    case PARITY_DT_E5M2: return "e5m2";
    }
    return "?";
}

parity_status_t parity_dtype_from_name(const char *name, parity_dtype_t *out)
{
    static const struct { const char *n; parity_dtype_t dt; } names[] = {
        {"f64", PARITY_DT_F64}, {"fp64", PARITY_DT_F64}, {"float64", PARITY_DT_F64},
        {"f32", PARITY_DT_F32}, {"fp32", PARITY_DT_F32}, {"float32", PARITY_DT_F32},
        {"bf16", PARITY_DT_BF16}, {"bfloat16", PARITY_DT_BF16},
        {"f16", PARITY_DT_F16}, {"fp16", PARITY_DT_F16}, {"float16", PARITY_DT_F16},
        {"i32", PARITY_DT_I32}, {"int32", PARITY_DT_I32}, {"i64", PARITY_DT_I64},
        {"int64", PARITY_DT_I64}, {"u8", PARITY_DT_U8}, {"uint8", PARITY_DT_U8},
        {"e4m3fn", PARITY_DT_E4M3FN}, {"float8_e4m3fn", PARITY_DT_E4M3FN},
        {"e5m2", PARITY_DT_E5M2}, {"float8_e5m2", PARITY_DT_E5M2},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].n) == 0) {
            *out = names[i].dt;
            return PARITY_OK;
        }
    return PARITY_E_NOTFOUND;
}

int parity_dtype_is_float(parity_dtype_t dt)
{
    return dt == PARITY_DT_F64 || dt == PARITY_DT_F32 || dt == PARITY_DT_BF16 ||
           dt == PARITY_DT_F16 || dt == PARITY_DT_E4M3FN || dt == PARITY_DT_E5M2;
}

int64_t parity_tensor_numel(const parity_abi_tensor_t *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
    return n;
}

/* Data bytes of a contiguous tensor, or 0 with *ok = 0 on bad arguments or overflow. */
static size_t tensor_bytes(parity_dtype_t dt, int ndim, const int64_t *shape, int *ok)
{
    size_t es = parity_dtype_size(dt);
    *ok = 0;
    if (es == 0 || ndim < 0 || ndim > PARITY_ABI_MAX_DIMS) return 0;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return 0;
        if (shape[i] && n > SIZE_MAX / 16 / (size_t)shape[i]) return 0;
        n *= (size_t)shape[i];
    }
    *ok = 1;
    return n * es;
}

/* Point t's view at its mapping as a (name, dt, shape) tensor of nbytes data bytes (which fit). */
static void tensor_shape(parity_tensor_t *t, const char *name, parity_dtype_t dt, int ndim,
                         const int64_t *shape, size_t nbytes)
{
    t->nbytes = nbytes;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    t->view.data = (char *)t->map + t->guard_bytes;
    t->view.dtype = dt;
    t->view.ndim = ndim;
    t->view.name = t->name;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->view.shape[i] = shape[i];
        t->view.strides[i] = stride;
        stride *= shape[i];
    }
    parity_tensor_reset_guards(t);
}

static parity_tensor_t *tensor_map(const char *name, parity_dtype_t dt, int ndim,
                                   const int64_t *shape, int populate)
{
    int ok;
    size_t nbytes = tensor_bytes(dt, ndim, shape, &ok);
    if (!ok) return NULL;
    parity_tensor_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->guard_bytes = PARITY_GUARD_BYTES;
    t->map_bytes = nbytes + 2 * t->guard_bytes;
    t->map = mmap(NULL, t->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t->map == MAP_FAILED) {
        free(t);
        return NULL;
    }
#ifdef MADV_POPULATE_WRITE
    /* Fault every page in, writable, within one system call (one pass of page clearing, no trap
     * per 4 KiB page later): a buffer reused across many runs then pays its faults once, where a
     * fresh mapping per run paid them per run (docs/check-speed.md). Not MAP_POPULATE: on a
     * shared mapping it maps pages read-only, and the first write still traps. Advisory. */
    if (populate) parity_madvise_parallel(t->map, t->map_bytes, MADV_POPULATE_WRITE);
#else
    (void)populate;
#endif
    tensor_shape(t, name, dt, ndim, shape, nbytes);
    return t;
}

parity_tensor_t *parity_tensor_new(const char *name, parity_dtype_t dt, int ndim,
                                   const int64_t *shape)
{
    /* Faulted in at once too: every caller fills what it allocates (inputs are generated into
     * them), and one populate call costs a third of first-touch faults page by page (a check's
     * inputs and decoy inputs were 3-5% of its CPU in page faults: docs/check-speed.md). */
    return tensor_map(name, dt, ndim, shape, 1);
}

parity_tensor_t *parity_tensor_reuse(parity_tensor_t *t, const char *name, parity_dtype_t dt,
                                     int ndim, const int64_t *shape)
{
    int ok;
    size_t nbytes = tensor_bytes(dt, ndim, shape, &ok);
    if (!ok) {
        parity_tensor_free(t);
        return NULL;
    }
    if (t && nbytes + 2 * t->guard_bytes <= t->map_bytes) {
        /* The bytes after the new end that earlier, larger uses wrote are left as they are: the
         * back guard is re-filled right after the data, which is all a guard check reads. */
        tensor_shape(t, name, dt, ndim, shape, nbytes);
        return t;
    }
    parity_tensor_free(t);
    return tensor_map(name, dt, ndim, shape, 1);
}

void parity_tensor_free(parity_tensor_t *t)
{
    if (!t) return;
    munmap(t->map, t->map_bytes);
    free(t);
}

void parity_tensor_reset_guards(parity_tensor_t *t)
{
    memset(t->map, PARITY_GUARD_BYTE, t->guard_bytes);
    memset((char *)t->view.data + t->nbytes, PARITY_GUARD_BYTE, t->guard_bytes);
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char b)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != b) return 0;
    return 1;
}

int parity_tensor_guards_ok(const parity_tensor_t *t)
{
    return all_bytes(t->map, t->guard_bytes, PARITY_GUARD_BYTE) &&
           all_bytes((const unsigned char *)t->view.data + t->nbytes, t->guard_bytes,
                     PARITY_GUARD_BYTE);
}

uint64_t parity_tensor_hash(const parity_tensor_t *t)
{
    /* The digest of the data bytes (src/core/digest.c): any changed bit changes it, and so do two
     * flips of bit 63 of two words, which FNV-1a over words (used before) cancelled. */
    return parity_digest64(t->view.data, t->nbytes);
}

/* Formats of the narrow dtypes, looked up once (the lookup parses names: too slow per element). */
static parity_format_t FMT_BF16, FMT_F16, FMT_E4M3, FMT_E5M2;
static pthread_once_t fmt_once = PTHREAD_ONCE_INIT;
static void fmt_init(void)
{
    parity_format_get("bf16", &FMT_BF16, NULL);
    parity_format_get("fp16", &FMT_F16, NULL);
    parity_format_get("e4m3fn", &FMT_E4M3, NULL);
    parity_format_get("e5m2", &FMT_E5M2, NULL);
}

static const parity_format_t *fmt_of(parity_dtype_t dt)
{
    pthread_once(&fmt_once, fmt_init);
    return dt == PARITY_DT_BF16 ? &FMT_BF16 : dt == PARITY_DT_F16 ? &FMT_F16
         : dt == PARITY_DT_E4M3FN ? &FMT_E4M3 : &FMT_E5M2;
}

/* double -> bf16, nearest-even, in one rounding. Normal bf16 range: round the double's
 * significand at bf16's last bit in integer space (no double rounding through fp32); the rounded
 * value has 8 significant bits, so its bf16 code is the double's sign, its exponent rebiased
 * (1023 -> 127) and the top 7 bits of its fraction (a carry out of the fraction has already
 * incremented the exponent). Elsewhere (subnormal, overflow edge, NaN): the general encoder. */
static inline int bf16_fast_range(double x)
{
    double ax = fabs(x);
    return ax >= 0x1p-126 && ax < 0x1.fep127;
}

static inline uint16_t bf16_fast(double x)
{
    uint64_t b;
    memcpy(&b, &x, 8);
    b += 0x00000FFFFFFFFFFFULL + ((b >> 45) & 1); /* 52 - 7 = 45 bits dropped */
    return (uint16_t)(((b >> 48) & 0x8000u) | ((((b >> 52) & 0x7ffu) - 896u) << 7) |
                      ((b >> 45) & 0x7fu));
}

static uint16_t bf16_general(double x)
{
    const parity_format_t *f = fmt_of(PARITY_DT_BF16);
    parity_round_opts_t o = parity_format_default_opts(f);
    return (uint16_t)parity_format_encode(f, x, &o, NULL);
}

static uint16_t bf16_from_double(double x)
{
    return bf16_fast_range(x) ? bf16_fast(x) : bf16_general(x);
}

/* n doubles to bf16: the fast path on every element (integer operations only: two at a time in
 * SSE2 registers where the target has them, as every x86-64 does), then the general encoder on
 * those outside its range, if any: the same bits (tests/test_check_fill.c holds it to the general
 * encoder). */
static void bf16_store(uint16_t *restrict p, const double *restrict x, int64_t n)
{
    int other = 0;
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128d lo = _mm_set1_pd(0x1p-126), hi = _mm_set1_pd(0x1.fep127);
    const __m128i absm = _mm_set1_epi64x(0x7FFFFFFFFFFFFFFFLL), half = _mm_set1_epi64x(0x00000FFFFFFFFFFFLL),
                  one = _mm_set1_epi64x(1), sgn = _mm_set1_epi64x(0x8000), e11 = _mm_set1_epi64x(0x7ff),
                  bias = _mm_set1_epi64x(896), m7 = _mm_set1_epi64x(0x7f);
    for (; i + 4 <= n; i += 4) {
        __m128i w[2];
        int ok = 3;
        for (int h = 0; h < 2; h++) {
            __m128i b = _mm_loadu_si128((const __m128i *)(x + i + 2 * h));
            __m128d ax = _mm_castsi128_pd(_mm_and_si128(b, absm));
            ok &= _mm_movemask_pd(_mm_and_pd(_mm_cmpge_pd(ax, lo), _mm_cmplt_pd(ax, hi)));
            b = _mm_add_epi64(b, _mm_add_epi64(half, _mm_and_si128(_mm_srli_epi64(b, 45), one)));
            __m128i s = _mm_and_si128(_mm_srli_epi64(b, 48), sgn);
            __m128i e = _mm_slli_epi64(_mm_sub_epi64(_mm_and_si128(_mm_srli_epi64(b, 52), e11), bias), 7);
            __m128i m = _mm_and_si128(_mm_srli_epi64(b, 45), m7);
            w[h] = _mm_or_si128(_mm_or_si128(s, e), m); /* a code in the low 16 bits of each lane */
        }
        other |= ok != 3;
        /* the four codes (16-bit words 0 and 4 of each register) into 64 bits */
        __m128i a = _mm_shufflelo_epi16(_mm_shuffle_epi32(w[0], _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
        __m128i c = _mm_shufflelo_epi16(_mm_shuffle_epi32(w[1], _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
        uint32_t lo2 = (uint32_t)_mm_cvtsi128_si32(a), hi2 = (uint32_t)_mm_cvtsi128_si32(c);
        memcpy(p + i, &lo2, 4);
        memcpy(p + i + 2, &hi2, 4);
    }
#endif
    for (; i < n; i++) {
        other |= !bf16_fast_range(x[i]);
        p[i] = bf16_fast(x[i]);
    }
    if (other)
        for (i = 0; i < n; i++)
            if (!bf16_fast_range(x[i])) p[i] = bf16_general(x[i]);
}

void parity_tensor_store_f64(parity_abi_tensor_t *v, int64_t start, const double *x, int64_t n)
{
    /* The per-element parity_tensor_set, without a call and a dtype switch per element (input
     * generation stores hundreds of millions of them on production shapes): the same bits. */
    if (v->dtype == PARITY_DT_BF16) {
        bf16_store((uint16_t *)v->data + start, x, n);
    } else if (v->dtype == PARITY_DT_F32) {
        float *p = (float *)v->data + start;
        for (int64_t i = 0; i < n; i++) p[i] = (float)x[i];
    } else {
        for (int64_t i = 0; i < n; i++) parity_tensor_set(v, start + i, x[i]);
    }
}

double parity_tensor_get(const parity_abi_tensor_t *v, int64_t i)
{
    switch ((parity_dtype_t)v->dtype) {
    case PARITY_DT_F64: return ((const double *)v->data)[i];
    case PARITY_DT_F32: return ((const float *)v->data)[i];
    case PARITY_DT_BF16: return parity_bf16_to_fp32_1(((const uint16_t *)v->data)[i]);
    case PARITY_DT_F16: return parity_format_decode(fmt_of(PARITY_DT_F16), ((const uint16_t *)v->data)[i]);
    case PARITY_DT_E4M3FN: case PARITY_DT_E5M2:
        return parity_format_decode(fmt_of((parity_dtype_t)v->dtype), ((const uint8_t *)v->data)[i]);
    case PARITY_DT_I32: return ((const int32_t *)v->data)[i];
    case PARITY_DT_I64: return (double)((const int64_t *)v->data)[i];
    case PARITY_DT_U8: return ((const uint8_t *)v->data)[i];
    }
    return NAN;
}

void parity_tensor_set(parity_abi_tensor_t *v, int64_t i, double x)
{
    switch ((parity_dtype_t)v->dtype) {
    case PARITY_DT_F64: ((double *)v->data)[i] = x; return;
    case PARITY_DT_F32: ((float *)v->data)[i] = (float)x; return;
    case PARITY_DT_BF16: ((uint16_t *)v->data)[i] = bf16_from_double(x); return;
    case PARITY_DT_F16: {
        const parity_format_t *f = fmt_of(PARITY_DT_F16);
        parity_round_opts_t o = parity_format_default_opts(f);
        ((uint16_t *)v->data)[i] = (uint16_t)parity_format_encode(f, x, &o, NULL);
        return;
    }
    case PARITY_DT_E4M3FN: case PARITY_DT_E5M2: {
        const parity_format_t *f = fmt_of((parity_dtype_t)v->dtype);
        parity_round_opts_t o = parity_format_default_opts(f);
        ((uint8_t *)v->data)[i] = (uint8_t)parity_format_encode(f, x, &o, NULL);
        return;
    }
    case PARITY_DT_I32: ((int32_t *)v->data)[i] = (int32_t)x; return;
    case PARITY_DT_I64: ((int64_t *)v->data)[i] = (int64_t)x; return;
    case PARITY_DT_U8: ((uint8_t *)v->data)[i] = (uint8_t)x; return;
    }
}

/* p[0..n) = w. The prefill writes every output before every run (hundreds of MB on the large
 * vocabularies): on x86 a string store (fast-string microcode: whole-line writes without reading
 * the line first) measured 2x the rate of a vectorized loop here (824 MB: 0.27 s against 0.5-0.7 s,
 * docs/check-speed.md); elsewhere the loop. The bytes are the same either way. */
static void fill_u32(uint32_t *p, size_t n, uint32_t w)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __asm__ volatile("rep stosl" : "+D"(p), "+c"(n) : "a"(w) : "memory");
#else
    for (size_t i = 0; i < n; i++) p[i] = w;
#endif
}

/* n elements of a 2-byte pattern h: pairs as 32-bit words, then the odd one. */
static void fill_u16(uint16_t *p, size_t n, uint16_t h)
{
    size_t i = 0;
    if (((uintptr_t)p & 3) != 0 && n > 0) p[i++] = h; /* to a 4-byte boundary */
    size_t pairs = (n - i) / 2;
    fill_u32((uint32_t *)(void *)(p + i), pairs, (uint32_t)h << 16 | h);
    for (i += 2 * pairs; i < n; i++) p[i] = h;
}

/* Large fp32 and 16-bit prefills in chunks on every core (the same bytes: each chunk is the
 * pattern; chunk borders fall on whole elements). */
typedef struct {
    void *p;
    size_t n, es;
    uint32_t w;
} fill_job_t;

/* 4 Mi elements per chunk (16 MB of fp32, a few milliseconds of stores); a fill of at most two
 * chunks stays on one thread, where starting others would cost about what it saves. */
enum { FILL_CHUNK = 1 << 22 };

static void fill_chunks(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const fill_job_t *f = ctx;
    for (int64_t k = b; k < e; k++) {
        size_t i = (size_t)k * FILL_CHUNK, m = f->n - i < FILL_CHUNK ? f->n - i : FILL_CHUNK;
        if (f->es == 4) fill_u32((uint32_t *)f->p + i, m, f->w);
        else fill_u16((uint16_t *)f->p + i, m, (uint16_t)f->w);
    }
}

static int fill_parallel(void *p, size_t n, size_t es, uint32_t w)
{
    if (n <= 2 * (size_t)FILL_CHUNK) return 0;
    fill_job_t f = {p, n, es, w};
    parity_parallel_for((int64_t)((n + FILL_CHUNK - 1) / FILL_CHUNK), 0, fill_chunks, &f);
    return 1;
}

void parity_tensor_fill_nan(parity_tensor_t *t)
{
    int64_t n = parity_tensor_numel(&t->view);
    switch ((parity_dtype_t)t->view.dtype) {
    case PARITY_DT_F64: for (int64_t i = 0; i < n; i++) ((double *)t->view.data)[i] = NAN; break;
    case PARITY_DT_F32: { /* the quiet NaN 0x7fc00000 that NAN stores */
        float nan = NAN;
        uint32_t w;
        memcpy(&w, &nan, sizeof w);
        if (!fill_parallel(t->view.data, (size_t)n, 4, w)) fill_u32(t->view.data, (size_t)n, w);
        break;
    }
    case PARITY_DT_BF16:
        if (!fill_parallel(t->view.data, (size_t)n, 2, 0x7fc0)) fill_u16(t->view.data, (size_t)n, 0x7fc0);
        break;
    case PARITY_DT_F16:
        if (!fill_parallel(t->view.data, (size_t)n, 2, 0x7e00)) fill_u16(t->view.data, (size_t)n, 0x7e00);
        break;
    case PARITY_DT_E4M3FN: memset(t->view.data, 0x7f, t->nbytes); break;
    case PARITY_DT_E5M2: memset(t->view.data, 0x7e, t->nbytes); break;
    default: memset(t->view.data, 0xff, t->nbytes); break;
    }
}

void parity_tensor_to_f64(const parity_abi_tensor_t *v, double *out)
{
    int64_t n = parity_tensor_numel(v);
    if (v->dtype == PARITY_DT_F32) {
        const float *p = v->data;
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
    } else if (v->dtype == PARITY_DT_BF16) {
        const uint16_t *p = v->data;
        for (int64_t i = 0; i < n; i++) out[i] = parity_bf16_to_fp32_1(p[i]);
    } else {
        for (int64_t i = 0; i < n; i++) out[i] = parity_tensor_get(v, i);
    }
}

double parity_dtype_round(parity_dtype_t dt, double x)
{
    switch (dt) {
    case PARITY_DT_F64: return x;
    case PARITY_DT_F32: return (float)x;
    case PARITY_DT_BF16: return parity_bf16_to_fp32_1(bf16_from_double(x));
    case PARITY_DT_F16: case PARITY_DT_E4M3FN: case PARITY_DT_E5M2: {
        const parity_format_t *f = fmt_of(dt);
        parity_round_opts_t o = parity_format_default_opts(f);
        return parity_format_round(f, x, &o, NULL);
    }
    default: return x;
    }
}

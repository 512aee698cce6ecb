/* Built-in catalog for the embedding family: faithful variants (orders and blockings a real
 * kernel uses) and mutants that model real bugs. Each entry states its expected verdict.
 * These are candidates, judged like any plugin: they go through the same ABI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"

/* How a fused/scatter kernel accumulates dE. */
typedef enum {
    ACC_F32 = 0,
    ACC_BF16,     /* the incident: dE accumulated in bf16 (atomicAdd on a bf16 buffer) */
    ACC_BF16_SR,  /* bf16 with stochastic rounding */
    ACC_F16,      /* fp16 accumulator */
} acc_t;

typedef enum { ORDER_SEQ = 0, ORDER_SHUFFLED, ORDER_SORTED, ORDER_PAIRWISE } order_t;

typedef struct {
    acc_t acc;
    order_t order;
    int drop;         /* drop 1 in 10^4 additions (a race that loses updates) */
    int eps_outside;  /* 1/(sqrt(ms) + eps) */
    int ignore_gamma; /* gamma ignored in dx */
    int tail128;      /* columns beyond the last multiple of 128 are never accumulated */
    int no_zero;      /* accumulates into dE without zeroing it first */
    int rsqrt_low;    /* r 2 ulp low on every row: a biased rsqrt intrinsic (faithful) */
} cfg_t;

/* The row backward's r mode of a configuration (ops/rmsnorm/rmsnorm.h). */
static inline int r_mode(const cfg_t *cfg)
{
    return cfg->eps_outside ? PARITY_RMS_R_EPS_OUTSIDE
                            : cfg->rsqrt_low ? PARITY_RMS_R_LOW_2ULP : PARITY_RMS_R_EXACT;
}

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline float round_f16(float x)
{
    return (float)parity_dtype_round(PARITY_DT_F16, x); /* the format is looked up once */
}

static inline float round_bf16_sr(float x, uint64_t *state)
{
    /* Stochastic rounding as GPU kernels do it: add 16 random bits below bf16's last bit, then
     * truncate. Round up happens with probability (x - down) / (up - down). */
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) == 0x7f800000u) return x;
    *state = mix64(*state + 0x9e3779b97f4a7c15ULL);
    b += (uint32_t)(*state & 0xffffu);
    b &= 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}

static inline float acc_add(const cfg_t *cfg, float a, float t, uint64_t *rs)
{
    switch (cfg->acc) {
    case ACC_F32: return a + t;
    case ACC_BF16: return parity_round_bf16(a + t);
    case ACC_BF16_SR: return round_bf16_sr(a + t, rs);
    case ACC_F16: return round_f16(a + round_f16(t));
    }
    return a + t;
}

static float load_out(const parity_abi_tensor_t *o, int64_t i)
{
    if (o->dtype == PARITY_DT_BF16) return parity_bf16_to_fp32_1(((const uint16_t *)o->data)[i]);
    return ((const float *)o->data)[i];
}

/* Columns [jb, je) of row i of a 2-D input in fp32 (what parity_row_to_f32 gives for them). */
static void cols_to_f32(const parity_abi_tensor_t *t, int64_t i, int64_t jb, int64_t je, float *out)
{
    int64_t d = t->shape[t->ndim - 1];
    if (t->dtype == PARITY_DT_F32)
        memcpy(out, (const float *)t->data + i * d + jb, (size_t)(je - jb) * sizeof *out);
    else if (t->dtype == PARITY_DT_BF16)
        parity_bf16_to_fp32((const uint16_t *)t->data + i * d + jb, out, (size_t)(je - jb));
    else
        for (int64_t j = jb; j < je; j++) out[j - jb] = (float)parity_tensor_get(t, i * d + j);
}

/* One call of the shared body below. The catalog's scatter kernels use call->n_threads with
 * bits that do not depend on it: thread t owns the dE rows [vb[t], vb[t + 1]) (shares of about
 * N / threads tokens each) and accumulates each of its elements over the tokens in the kernel's
 * order, as one thread does, so every element sees the same float operations in the same order;
 * dgamma is split by columns, each column's sum again in token order. Stochastic rounding
 * advances one random state per addition in the global order: one thread. */
typedef struct {
    const cfg_t *cfg;
    int fused, in_place;
    const parity_abi_tensor_t *dy, *x;
    parity_abi_tensor_t *dE;
    const int32_t *ids;        /* in [0, V) (scatter_kernel checks) */
    int64_t n, d, v, dlim;
    float eps;
    float *acc;                /* the V x D fp32 rows of dE (dE itself when it is fp32) */
    const float *gr;           /* gamma in fp32 (fused) */
    const int64_t *perm;       /* the order tokens are accumulated in */
    const int64_t *vb;         /* thread t owns dE rows [vb[t], vb[t + 1]) */
    float *rr;                 /* each token's r (fused), for the dgamma pass */
    float *dgacc;
    uint64_t seed;
    int failed;                /* a thread could not allocate its scratch */
} sk_t;

/* dx of token i into dx (and r into rr[i]); with fused = 0, dx is dy. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static inline void sk_dx(sk_t *k, int64_t i, float *xr, float *dyr, float *dx)
{
    parity_row_to_f32(k->dy, i, dyr);
    if (k->fused) {
        parity_row_to_f32(k->x, i, xr);
        k->rr[i] = parity_rms_bwd_row_f32(xr, dyr, k->gr, k->d, k->eps, dx, NULL,
                                          k->cfg->ignore_gamma, r_mode(k->cfg));
    } else {
        memcpy(dx, dyr, (size_t)k->d * sizeof *dx);
    }
}

/* dx of the four tokens tok[] into dx + a d (and their r into rr[]), as four sk_dx calls would:
 * parity_rms_bwd_rows4_f32 (fused only). xr and dyr have room for four rows. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void sk_dx4(sk_t *k, const int64_t tok[4], float *xr, float *dyr, float *dx)
{
    const float *xs[4], *ys[4];
    float *os[4], r[4];
    for (int a = 0; a < 4; a++) {
        parity_row_to_f32(k->dy, tok[a], dyr + a * k->d);
        parity_row_to_f32(k->x, tok[a], xr + a * k->d);
        xs[a] = xr + a * k->d;
        ys[a] = dyr + a * k->d;
        os[a] = dx + a * k->d;
    }
    parity_rms_bwd_rows4_f32(xs, ys, k->gr, k->d, k->eps, os, r, k->cfg->ignore_gamma, r_mode(k->cfg));
    for (int a = 0; a < 4; a++) k->rr[tok[a]] = r[a];
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void sk_rows(void *p, int64_t tb, int64_t te, int thread)
{
    (void)thread;
    sk_t *k = p;
    const cfg_t *cfg = k->cfg;
    int64_t n = k->n, d = k->d, dlim = k->dlim;
    const int32_t *ids = k->ids;
    const int64_t *perm = k->perm;
    float *acc = k->acc;
    float *row = malloc((size_t)d * 12 * sizeof *row);
    if (!row) {
        __atomic_store_n(&k->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    float *xr = row, *dyr = row + 4 * d, *dx = row + 8 * d; /* four rows each */
    const int plain = cfg->acc == ACC_F32 && !cfg->drop;
    for (int64_t t = tb; t < te; t++) {
        int64_t v0 = k->vb[t], v1 = k->vb[t + 1];
        uint64_t rs = k->seed;
        if (!k->in_place) {
            for (int64_t e = v0 * d; e < v1 * d; e++) acc[e] = cfg->no_zero ? load_out(k->dE, e) : 0.0f;
        } else if (!cfg->no_zero) {
            memset(acc + v0 * d, 0, (size_t)(v1 - v0) * (size_t)d * sizeof *acc); /* +0.0f */
        }
        if (cfg->order == ORDER_PAIRWISE) {
            /* Per id segment: compute all dx rows, then a pairwise fp32 tree per column. */
            float *seg = NULL, *col = NULL;
            int64_t cap = 0;
            for (int64_t s0 = 0; s0 < n;) {
                int64_t s1 = s0, id = ids[perm[s0]];
                while (s1 < n && ids[perm[s1]] == id) s1++;
                int64_t h = s1 - s0;
                if (id < v0 || id >= v1) {
                    s0 = s1;
                    continue;
                }
                if (h > cap) {
                    cap = h;
                    free(seg);
                    free(col);
                    seg = malloc((size_t)h * (size_t)d * sizeof *seg);
                    col = malloc((size_t)h * sizeof *col);
                    if (!seg || !col) {
                        __atomic_store_n(&k->failed, 1, __ATOMIC_RELAXED);
                        break;
                    }
                }
                for (int64_t q = 0; q < h; q++) {
                    sk_dx(k, perm[s0 + q], xr, dyr, dx);
                    memcpy(seg + q * d, dx, (size_t)d * sizeof *dx);
                }
                float *dst = acc + id * d;
                for (int64_t j = 0; j < dlim; j++) {
                    for (int64_t q = 0; q < h; q++) col[q] = seg[q * d + j];
                    dst[j] += parity_pairwise_f32(col, h);
                }
                s0 = s1;
            }
            free(seg);
            free(col);
        } else {
            /* The share's tokens in the kernel's order, four at a time: their dx rows computed
             * side by side (sk_dx4), then added one after the other as before. */
            for (int64_t q = 0; q < n;) {
                int64_t tok[4];
                int m = 0;
                while (q < n && m < 4) {
                    int64_t i = perm[q++];
                    if (ids[i] >= v0 && ids[i] < v1) tok[m++] = i;
                }
                if (m == 4 && k->fused) {
                    sk_dx4(k, tok, xr, dyr, dx);
                } else {
                    for (int a = 0; a < m; a++) sk_dx(k, tok[a], xr, dyr, dx + a * d);
                }
                for (int a = 0; a < m; a++) {
                    int64_t i = tok[a];
                    const float *dxa = dx + a * d;
                    float *dst = acc + (int64_t)ids[i] * d;
                    if (plain) { /* acc_add's fp32 case, no lost updates: vectorized, same adds */
                        for (int64_t j = 0; j < dlim; j++) dst[j] += dxa[j];
                        continue;
                    }
                    for (int64_t j = 0; j < dlim; j++) {
                        if (cfg->drop && mix64(((uint64_t)i << 32) ^ (uint64_t)j ^ 0xd20bULL) % 10000 == 0)
                            continue; /* a lost update */
                        dst[j] = acc_add(cfg, dst[j], dxa[j], &rs);
                    }
                }
            }
        }
        if (!k->in_place)
            for (int64_t e = v0 * d; e < v1 * d; e++) parity_put_f32(k->dE, e, acc[e]);
    }
    free(row);
}

/* dgamma over columns [jb, je): fp32, in blocks of 256 tokens reduced sequentially, as a two-stage
 * GPU reduction does; every catalog kernel computes it the same faithful way. Its terms are
 * dy_ij xhat_ij with xhat_ij = x_ij r_i, as parity_rms_bwd_row_f32 computes them. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void sk_dgamma(void *p, int64_t jb, int64_t je, int thread)
{
    (void)thread;
    sk_t *k = p;
    int64_t w = je - jb, lim = (k->dlim < je ? k->dlim : je) - jb;
    if (w <= 0) return;
    float *buf = calloc((size_t)w * 3, sizeof *buf);
    if (!buf) {
        __atomic_store_n(&k->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    float *part = buf, *xf = buf + w, *dyf = buf + 2 * w;
    for (int64_t i = 0; i < k->n; i++) {
        cols_to_f32(k->x, i, jb, je, xf);
        cols_to_f32(k->dy, i, jb, je, dyf);
        float r = k->rr[i];
        for (int64_t j = 0; j < lim; j++) {
            float xh = xf[j] * r;
            part[j] += dyf[j] * xh;
        }
        if ((i + 1) % 256 == 0 || i + 1 == k->n)
            for (int64_t j = 0; j < w; j++) {
                k->dgacc[jb + j] += part[j];
                part[j] = 0.0f;
            }
    }
    free(buf);
}

/* The shared body of every fused (and, with fused = 0, plain scatter) catalog kernel: the order,
 * the threads' vocabulary shares, then sk_rows and sk_dgamma. Those two are compiled at GCC -O3:
 * the configuration's branches hoisted out of the loops and the element-wise ones vectorized,
 * each element's operations unchanged (no sum is reordered, no contraction): the same bits. */
static int scatter_kernel(const parity_abi_call_t *call, const cfg_t *cfg, int fused)
{
    sk_t k;
    memset(&k, 0, sizeof k);
    k.cfg = cfg;
    k.fused = fused;
    k.dy = &call->inputs[0];
    k.x = fused ? &call->inputs[1] : NULL;
    const parity_abi_tensor_t *g = fused ? &call->inputs[2] : NULL;
    const parity_abi_tensor_t *ids_t = &call->inputs[fused ? 3 : 1];
    k.dE = &call->outputs[0];
    parity_abi_tensor_t *dg = fused ? &call->outputs[1] : NULL;
    int64_t n = k.n = k.dy->shape[0], d = k.d = k.dy->shape[1], v = k.v = k.dE->shape[0];
    k.ids = ids_t->data;
    k.eps = (float)parity_call_attr(call, "eps", PARITY_RMS_EPS);
    k.dlim = cfg->tail128 ? d / 128 * 128 : d;
    k.seed = call->seed;
    int nt = call->n_threads > 1 ? (call->n_threads < 64 ? call->n_threads : 64) : 1;
    if (cfg->acc == ACC_BF16_SR) nt = 1;
    if (nt > v) nt = v > 1 ? (int)v : 1;

    /* fp32 rows of dE: the output itself when it is fp32 (the same float operations in the same
     * order, so the same bits, without a V x D scratch to fault in and copy: most of a floor run's
     * time on the large-vocabulary workloads, docs/check-speed.md), else a scratch rounded at the
     * end. */
    k.in_place = k.dE->dtype == PARITY_DT_F32;
    k.acc = k.in_place ? k.dE->data : malloc((size_t)v * (size_t)d * sizeof *k.acc);
    float *gr = fused ? malloc((size_t)d * sizeof *gr) : NULL;
    float *rr = fused ? malloc((size_t)(n ? n : 1) * sizeof *rr) : NULL;
    float *dgacc = calloc((size_t)d, sizeof *dgacc);
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    int64_t *cnt = calloc((size_t)v + 1, sizeof *cnt), vb[65];
    int ok = k.acc && (!fused || (gr && rr)) && dgacc && perm && cnt;
    if (ok) {
        if (fused) parity_row_to_f32(g, 0, gr);
        for (int64_t i = 0; i < n; i++) perm[i] = i;
        for (int64_t i = 0; i < n && ok; i++) ok = k.ids[i] >= 0 && k.ids[i] < v;
    }
    if (ok) { /* ids in [0, V): an id outside is an error, not a write out of bounds */
        for (int64_t i = 0; i < n; i++) cnt[k.ids[i] + 1]++;
        for (int64_t r = 0; r < v; r++) cnt[r + 1] += cnt[r];
        /* thread t's share: the ids whose tokens are the t-th 1/nt of all, by count */
        vb[0] = 0;
        for (int t = 1, r = 0; t <= nt; t++) {
            while (t < nt && r < v && cnt[r] * nt < n * t) r++;
            vb[t] = t < nt ? r : v;
        }
        if (cfg->order == ORDER_SHUFFLED) { /* the order atomics might give: a seeded permutation */
            uint64_t st = call->seed ^ 0x5eedULL;
            for (int64_t i = n - 1; i > 0; i--) {
                st = mix64(st + 1);
                int64_t j = (int64_t)(st % (uint64_t)(i + 1));
                int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
            }
        } else if (cfg->order == ORDER_SORTED || cfg->order == ORDER_PAIRWISE) {
            /* stable counting sort of positions by id: segmented reduction order */
            for (int64_t i = 0; i < n; i++) perm[cnt[k.ids[i]]++] = i;
        }
        k.gr = gr;
        k.rr = rr;
        k.dgacc = dgacc;
        k.perm = perm;
        k.vb = vb;
        parity_parallel_for(nt, nt, sk_rows, &k);
        if (fused && !k.failed) {
            parity_parallel_for(d, nt, sk_dgamma, &k);
            for (int64_t j = 0; j < d; j++) parity_put_f32(dg, j, dgacc[j]);
        }
        ok = !k.failed;
    }
    if (!k.in_place) free(k.acc);
    free(gr); free(rr); free(dgacc); free(perm); free(cnt);
    return ok ? PARITY_KERNEL_OK : PARITY_KERNEL_ERROR;
}

/* ---- entries ---- */
#define FUSED(fn, ...)                                                  \
    static int fn(const parity_abi_call_t *call)                        \
    {                                                                   \
        static const cfg_t cfg = {__VA_ARGS__};                         \
        return scatter_kernel(call, &cfg, 1);                           \
    }
#define SCATTER(fn, ...)                                                \
    static int fn(const parity_abi_call_t *call)                        \
    {                                                                   \
        static const cfg_t cfg = {__VA_ARGS__};                         \
        return scatter_kernel(call, &cfg, 0);                           \
    }

FUSED(f_fp32_seq, .acc = ACC_F32)
FUSED(f_fp32_shuffled, .acc = ACC_F32, .order = ORDER_SHUFFLED)
FUSED(f_fp32_sorted, .acc = ACC_F32, .order = ORDER_SORTED)
FUSED(f_fp32_pairwise, .acc = ACC_F32, .order = ORDER_PAIRWISE)
FUSED(f_bf16_accum, .acc = ACC_BF16)
FUSED(f_fp16_accum, .acc = ACC_F16)
FUSED(f_bf16_accum_sr, .acc = ACC_BF16_SR)
FUSED(f_dropped, .acc = ACC_F32, .drop = 1)
FUSED(f_eps_outside, .acc = ACC_F32, .eps_outside = 1)
FUSED(f_gamma_ignored, .acc = ACC_F32, .ignore_gamma = 1)
FUSED(f_tail128, .acc = ACC_F32, .tail128 = 1)
FUSED(f_no_zero, .acc = ACC_F32, .no_zero = 1)
FUSED(f_rsqrt_low, .acc = ACC_F32, .rsqrt_low = 1)
SCATTER(s_fp32_seq, .acc = ACC_F32)
SCATTER(s_fp32_shuffled, .acc = ACC_F32, .order = ORDER_SHUFFLED)
SCATTER(s_fp32_pairwise, .acc = ACC_F32, .order = ORDER_PAIRWISE)
SCATTER(s_bf16_accum, .acc = ACC_BF16)
SCATTER(s_fp16_accum, .acc = ACC_F16)
SCATTER(s_dropped, .acc = ACC_F32, .drop = 1)
SCATTER(s_tail128, .acc = ACC_F32, .tail128 = 1)

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}
/* A kernel that zeroes dE (or its fp32 scratch) before it accumulates, and stores dgamma once at
 * the end: every output element is written before it is read. */
#define KZ(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, PARITY_KERNEL_WRITES_OUTPUTS_FIRST, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32
#define FUSED_OP "embedding_rmsnorm_bwd"

const parity_abi_kernel_t parity_catalog_embedding[] = {
    KZ("fp32_seq", FUSED_OP, "fp32 accumulation in token order: the plain faithful kernel", BF, F32, f_fp32_seq, "faithful"),
    KZ("fp32_shuffled", FUSED_OP, "fp32 accumulation in a shuffled order, as fp32 atomics give", BF, F32, f_fp32_shuffled, "faithful"),
    KZ("fp32_sorted", FUSED_OP, "sort tokens by id, fp32 segmented reduction (deterministic GPU kernels)", BF, F32, f_fp32_sorted, "faithful"),
    KZ("fp32_pairwise", FUSED_OP, "per-row pairwise (tree) fp32 reduction", BF, F32, f_fp32_pairwise, "faithful"),
    K("bf16_out", FUSED_OP, "fp32 accumulator, outputs rounded once to bf16", BF, BF, f_fp32_seq, "faithful"),
    K("bf16_accum", FUSED_OP, "THE INCIDENT: dE accumulated in bf16 (atomicAdd into a bf16 dE)", BF, BF, f_bf16_accum, "unfaithful"),
    K("fp16_accum", FUSED_OP, "dE accumulated in fp16 (half atomics): 11-bit sums, underflow below 6e-5", BF, F32, f_fp16_accum, "unfaithful"),
    K("bf16_accum_sr", FUSED_OP, "bf16 accumulation with stochastic rounding: unbiased but 8-bit noisy", BF, F32, f_bf16_accum_sr, "unfaithful"),
    K("dropped_updates", FUSED_OP, "a race that loses 1 in 10^4 additions (non-atomic read-modify-write)", BF, F32, f_dropped, "unfaithful"),
    K("eps_outside_sqrt", FUSED_OP, "r = 1/(sqrt(mean x^2) + eps) instead of 1/sqrt(mean x^2 + eps)", BF, F32, f_eps_outside, "unfaithful"),
    K("gamma_ignored", FUSED_OP, "dx computed as if gamma were 1 (invisible when gamma == 1)", BF, F32, f_gamma_ignored, "unfaithful"),
    K("tail_d128", FUSED_OP, "vectorized by 128 columns, the tail D % 128 never accumulated", BF, F32, f_tail128, "unfaithful"),
    K("no_zero_init", FUSED_OP, "accumulates into dE without zeroing it (assumes a pre-zeroed output)", BF, F32, f_no_zero, "unfaithful"),
    KZ("rsqrt_2ulp_low", FUSED_OP, "fp32, r = rsqrt 2 ulp low on every row (CUDA rsqrtf's documented bound, one sign): a shared bias", BF, F32, f_rsqrt_low, "faithful"),
    KZ("fp32_seq", "embedding_bwd", "fp32 accumulation in token order", BF, F32, s_fp32_seq, "faithful"),
    KZ("fp32_shuffled", "embedding_bwd", "fp32 in a shuffled order, as fp32 atomics give", BF, F32, s_fp32_shuffled, "faithful"),
    KZ("fp32_pairwise", "embedding_bwd", "per-row pairwise fp32 reduction", BF, F32, s_fp32_pairwise, "faithful"),
    K("bf16_out", "embedding_bwd", "fp32 accumulator, output rounded once to bf16", BF, BF, s_fp32_seq, "faithful"),
    K("bf16_accum", "embedding_bwd", "dE accumulated in bf16 (the incident's accumulator)", BF, BF, s_bf16_accum, "unfaithful"),
    K("fp16_accum", "embedding_bwd", "dE accumulated in fp16", BF, F32, s_fp16_accum, "unfaithful"),
    K("dropped_updates", "embedding_bwd", "a race that loses 1 in 10^4 additions", BF, F32, s_dropped, "unfaithful"),
    K("tail_d128", "embedding_bwd", "the tail D % 128 never accumulated", BF, F32, s_tail128, "unfaithful"),
};
const int parity_catalog_embedding_count =
    (int)(sizeof parity_catalog_embedding / sizeof parity_catalog_embedding[0]);

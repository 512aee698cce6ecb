/* Built-in catalog for the embedding family: faithful variants (orders and blockings a real
 * kernel uses) and mutants that model real bugs. Each entry states its expected verdict.
 * These are candidates, judged like any plugin: they go through the same ABI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"

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

/* Pairwise fp32 sum of t[0..n) (leaves of one element). */
static float load_out(const parity_abi_tensor_t *o, int64_t i)
{
    if (o->dtype == PARITY_DT_BF16) return parity_bf16_to_fp32_1(((const uint16_t *)o->data)[i]);
    return ((const float *)o->data)[i];
}

/* The shared body of every fused (and, with fused = 0, plain scatter) catalog kernel. GCC -O3:
 * the configuration's branches hoisted out of the loops and the element-wise ones vectorized,
 * each element's operations unchanged (no sum is reordered, no contraction): the same bits. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static int scatter_kernel(const parity_abi_call_t *call, const cfg_t *cfg, int fused)
{
    const parity_abi_tensor_t *dy = &call->inputs[0];
    const parity_abi_tensor_t *x = fused ? &call->inputs[1] : NULL;
    const parity_abi_tensor_t *g = fused ? &call->inputs[2] : NULL;
    const parity_abi_tensor_t *ids_t = &call->inputs[fused ? 3 : 1];
    parity_abi_tensor_t *dE = &call->outputs[0];
    parity_abi_tensor_t *dg = fused ? &call->outputs[1] : NULL;
    int64_t n = dy->shape[0], d = dy->shape[1], v = dE->shape[0];
    const int32_t *ids = ids_t->data;
    float eps = (float)parity_call_attr(call, "eps", PARITY_RMS_EPS);
    int64_t dlim = cfg->tail128 ? d / 128 * 128 : d;
    uint64_t rs = call->seed;

    /* fp32 rows of dE: the output itself when it is fp32 (the same float operations in the same
     * order, so the same bits, without a V x D scratch to fault in and copy: most of a floor run's
     * time on the large-vocabulary workloads, docs/check-speed.md), else a scratch rounded at the
     * end. */
    int in_place = dE->dtype == PARITY_DT_F32;
    float *acc = in_place ? dE->data : malloc((size_t)v * (size_t)d * sizeof *acc);
    float *row = malloc((size_t)d * 5 * sizeof *row);
    float *dgacc = calloc((size_t)d, sizeof *dgacc);
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    if (!acc || !row || !dgacc || !perm) {
        if (!in_place) free(acc);
        free(row); free(dgacc); free(perm);
        return PARITY_KERNEL_ERROR;
    }
    if (!in_place) {
        for (int64_t i = 0; i < v * d; i++) acc[i] = cfg->no_zero ? load_out(dE, i) : 0.0f;
    } else if (!cfg->no_zero) {
        memset(acc, 0, (size_t)v * (size_t)d * sizeof *acc); /* +0.0f, as the loop stored */
    }
    float *xr = row, *dyr = row + d, *gr = row + 2 * d, *dx = row + 3 * d, *xdy = row + 4 * d;
    if (fused) parity_row_to_f32(g, 0, gr);

    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (cfg->order == ORDER_SHUFFLED) { /* the order atomics might give: a seeded permutation */
        uint64_t st = call->seed ^ 0x5eedULL;
        for (int64_t i = n - 1; i > 0; i--) {
            st = mix64(st + 1);
            int64_t j = (int64_t)(st % (uint64_t)(i + 1));
            int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
    } else if (cfg->order == ORDER_SORTED || cfg->order == ORDER_PAIRWISE) {
        /* stable counting sort of positions by id: segmented reduction order */
        int64_t *cnt = calloc((size_t)v + 1, sizeof *cnt);
        if (!cnt) { if (!in_place) free(acc); free(row); free(dgacc); free(perm); return PARITY_KERNEL_ERROR; }
        for (int64_t i = 0; i < n; i++) cnt[ids[i] + 1]++;
        for (int64_t r = 0; r < v; r++) cnt[r + 1] += cnt[r];
        for (int64_t i = 0; i < n; i++) perm[cnt[ids[i]]++] = i;
        free(cnt);
    }

    if (cfg->order == ORDER_PAIRWISE) {
        /* Per id segment: compute all dx rows, then a pairwise fp32 tree per column. */
        float *seg = NULL, *col = NULL;
        int64_t cap = 0;
        for (int64_t s0 = 0; s0 < n;) {
            int64_t s1 = s0;
            while (s1 < n && ids[perm[s1]] == ids[perm[s0]]) s1++;
            int64_t h = s1 - s0;
            if (h > cap) {
                cap = h;
                free(seg); free(col);
                seg = malloc((size_t)h * (size_t)d * sizeof *seg);
                col = malloc((size_t)h * sizeof *col);
                if (!seg || !col) { free(seg); free(col); if (!in_place) free(acc); free(row); free(dgacc); free(perm); return PARITY_KERNEL_ERROR; }
            }
            for (int64_t t = 0; t < h; t++) {
                int64_t i = perm[s0 + t];
                parity_row_to_f32(dy, i, dyr);
                if (fused) {
                    parity_row_to_f32(x, i, xr);
                    parity_rms_bwd_row_f32(xr, dyr, gr, d, eps, dx, xdy, cfg->ignore_gamma, r_mode(cfg));
                } else {
                    memcpy(dx, dyr, (size_t)d * sizeof *dx);
                }
                memcpy(seg + t * d, dx, (size_t)d * sizeof *dx);
            }
            float *dst = acc + (int64_t)ids[perm[s0]] * d;
            for (int64_t j = 0; j < dlim; j++) {
                for (int64_t t = 0; t < h; t++) col[t] = seg[t * d + j];
                dst[j] += parity_pairwise_f32(col, h);
            }
            s0 = s1;
        }
        free(seg); free(col);
    } else {
        for (int64_t q = 0; q < n; q++) {
            int64_t i = perm[q];
            parity_row_to_f32(dy, i, dyr);
            if (fused) {
                parity_row_to_f32(x, i, xr);
                parity_rms_bwd_row_f32(xr, dyr, gr, d, eps, dx, xdy, cfg->ignore_gamma, r_mode(cfg));
            } else {
                memcpy(dx, dyr, (size_t)d * sizeof *dx);
            }
            float *dst = acc + (int64_t)ids[i] * d;
            for (int64_t j = 0; j < dlim; j++) {
                if (cfg->drop && mix64(((uint64_t)i << 32) ^ (uint64_t)j ^ 0xd20bULL) % 10000 == 0)
                    continue; /* a lost update */
                dst[j] = acc_add(cfg, dst[j], dx[j], &rs);
            }
        }
    }
    if (fused) {
        /* dgamma: fp32, in blocks of 256 rows reduced sequentially, as a two-stage GPU reduction
         * does; every catalog kernel computes it the same faithful way. */
        float *part = calloc((size_t)d, sizeof *part);
        if (!part) { if (!in_place) free(acc); free(row); free(dgacc); free(perm); return PARITY_KERNEL_ERROR; }
        for (int64_t i = 0; i < n; i++) {
            parity_row_to_f32(x, i, xr);
            parity_row_to_f32(dy, i, dyr);
            parity_rms_bwd_row_f32(xr, dyr, gr, d, eps, NULL, xdy, cfg->ignore_gamma, r_mode(cfg));
            for (int64_t j = 0; j < dlim; j++) part[j] += xdy[j];
            if ((i + 1) % 256 == 0 || i + 1 == n) {
                for (int64_t j = 0; j < d; j++) {
                    dgacc[j] += part[j];
                    part[j] = 0.0f;
                }
            }
        }
        free(part);
        for (int64_t j = 0; j < d; j++) parity_put_f32(dg, j, dgacc[j]);
    }
    if (!in_place) {
        for (int64_t i = 0; i < v * d; i++) parity_put_f32(dE, i, acc[i]);
        free(acc);
    }
    free(row); free(dgacc); free(perm);
    return PARITY_KERNEL_OK;
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
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32
#define FUSED_OP "embedding_rmsnorm_bwd"

const parity_abi_kernel_t parity_catalog_embedding[] = {
    K("fp32_seq", FUSED_OP, "fp32 accumulation in token order: the plain faithful kernel", BF, F32, f_fp32_seq, "faithful"),
    K("fp32_shuffled", FUSED_OP, "fp32 accumulation in a shuffled order, as fp32 atomics give", BF, F32, f_fp32_shuffled, "faithful"),
    K("fp32_sorted", FUSED_OP, "sort tokens by id, fp32 segmented reduction (deterministic GPU kernels)", BF, F32, f_fp32_sorted, "faithful"),
    K("fp32_pairwise", FUSED_OP, "per-row pairwise (tree) fp32 reduction", BF, F32, f_fp32_pairwise, "faithful"),
    K("bf16_out", FUSED_OP, "fp32 accumulator, outputs rounded once to bf16", BF, BF, f_fp32_seq, "faithful"),
    K("bf16_accum", FUSED_OP, "THE INCIDENT: dE accumulated in bf16 (atomicAdd into a bf16 dE)", BF, BF, f_bf16_accum, "unfaithful"),
    K("fp16_accum", FUSED_OP, "dE accumulated in fp16 (half atomics): 11-bit sums, underflow below 6e-5", BF, F32, f_fp16_accum, "unfaithful"),
    K("bf16_accum_sr", FUSED_OP, "bf16 accumulation with stochastic rounding: unbiased but 8-bit noisy", BF, F32, f_bf16_accum_sr, "unfaithful"),
    K("dropped_updates", FUSED_OP, "a race that loses 1 in 10^4 additions (non-atomic read-modify-write)", BF, F32, f_dropped, "unfaithful"),
    K("eps_outside_sqrt", FUSED_OP, "r = 1/(sqrt(mean x^2) + eps) instead of 1/sqrt(mean x^2 + eps)", BF, F32, f_eps_outside, "unfaithful"),
    K("gamma_ignored", FUSED_OP, "dx computed as if gamma were 1 (invisible when gamma == 1)", BF, F32, f_gamma_ignored, "unfaithful"),
    K("tail_d128", FUSED_OP, "vectorized by 128 columns, the tail D % 128 never accumulated", BF, F32, f_tail128, "unfaithful"),
    K("no_zero_init", FUSED_OP, "accumulates into dE without zeroing it (assumes a pre-zeroed output)", BF, F32, f_no_zero, "unfaithful"),
    K("rsqrt_2ulp_low", FUSED_OP, "fp32, r = rsqrt 2 ulp low on every row (CUDA rsqrtf's documented bound, one sign): a shared bias", BF, F32, f_rsqrt_low, "faithful"),
    K("fp32_seq", "embedding_bwd", "fp32 accumulation in token order", BF, F32, s_fp32_seq, "faithful"),
    K("fp32_shuffled", "embedding_bwd", "fp32 in a shuffled order, as fp32 atomics give", BF, F32, s_fp32_shuffled, "faithful"),
    K("fp32_pairwise", "embedding_bwd", "per-row pairwise fp32 reduction", BF, F32, s_fp32_pairwise, "faithful"),
    K("bf16_out", "embedding_bwd", "fp32 accumulator, output rounded once to bf16", BF, BF, s_fp32_seq, "faithful"),
    K("bf16_accum", "embedding_bwd", "dE accumulated in bf16 (the incident's accumulator)", BF, BF, s_bf16_accum, "unfaithful"),
    K("fp16_accum", "embedding_bwd", "dE accumulated in fp16", BF, F32, s_fp16_accum, "unfaithful"),
    K("dropped_updates", "embedding_bwd", "a race that loses 1 in 10^4 additions", BF, F32, s_dropped, "unfaithful"),
    K("tail_d128", "embedding_bwd", "the tail D % 128 never accumulated", BF, F32, s_tail128, "unfaithful"),
};
const int parity_catalog_embedding_count =
    (int)(sizeof parity_catalog_embedding / sizeof parity_catalog_embedding[0]);

/* An optimized faithful CPU kernel for embedding_rmsnorm_bwd, so that `parity bench` ranks
 * something real: threads, blocking, vectorizable inner loops, fp32 accumulation, and bits that
 * do not depend on the thread count or on thread timing.
 *   phase 1  per token: r = 1/sqrt(mean x^2 + eps) and c = mean(g*dy*xhat) with fixed 16-lane
 *            sums; dgamma partials per fixed block of TB tokens (sequential inside a block),
 *            reduced over blocks in order.
 *   sort     counting sort of positions by id (stable: each id's positions in ascending order).
 *   phase 2  threads take blocks of VB vocabulary rows; each row of dE is owned by one thread,
 *            so no atomics: dx is recomputed from (x, dy, r, c) for each hit and added in fp32, in
 *            token order, DB columns at a time; rows without hits are zero-filled.
 * Work items are fixed-size blocks grabbed dynamically, so load balance follows the Zipf-skewed
 * hits while every output element is computed by the same operations in the same order.
 * Deliberately not here: FMA contraction or fast-math (-ffp-contract=off stays), non-temporal
 * stores (they are x86-specific; the bandwidth probe does not use them either). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"

#define TB 256 /* tokens per dgamma partial (fixed: the reduction order never depends on threads) */
#define VB 32  /* vocabulary rows per phase-2 work item */
#define DB 512 /* columns per accumulator block (2 KiB of fp32: stays in L1) */
#define L 16   /* lanes of the fixed-order row sums */

#if defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

typedef struct {
    const void *dy, *x;
    int bf16; /* inputs are bf16 (else fp32) */
    const float *g;
    const int32_t *ids;
    int64_t n, d, v;
    float eps;
    float *r, *c;         /* [n] per-token scalars */
    float *part;          /* [n_tb * d] dgamma partials */
    int64_t n_tb;
    const int64_t *off;   /* [v + 1] segment offsets into perm */
    const int64_t *perm;  /* [n] positions sorted by id, stable */
    void *dE;
    int out_bf16;
    float *scratch;       /* per thread: 2*d + DB floats */
    int64_t scratch_stride;
    atomic_llong next;    /* next work item */
    int64_t n_items;
} ctx_t;

static inline float bf16f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Row i of a (N, D) input, columns [j0, j0 + m), into fp32. */
HOT static void load_row(const ctx_t *k, const void *src, int64_t i, int64_t j0, int64_t m,
                         float *restrict out)
{
    if (k->bf16) {
        const uint16_t *restrict p = (const uint16_t *)src + i * k->d + j0;
        for (int64_t j = 0; j < m; j++) out[j] = bf16f(p[j]);
    } else {
        memcpy(out, (const float *)src + i * k->d + j0, (size_t)m * sizeof *out);
    }
}

/* Sum of a[j] * b[j] over j < d in 16 fixed lanes, lanes combined pairwise. */
HOT static float dot16(const float *restrict a, const float *restrict b, int64_t d)
{
    float s[L] = {0};
    int64_t j = 0;
    for (; j + L <= d; j += L)
        for (int l = 0; l < L; l++) s[l] += a[j + l] * b[j + l];
    for (int l = 0; j < d; j++, l++) s[l] += a[j] * b[j];
    for (int w = L / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] = s[l] + s[l + w];
    return s[0];
}

/* Phase 1, one block of TB tokens: r, c per token, and the block's dgamma partial. */
HOT static void phase1_block(ctx_t *k, int64_t b, float *restrict xf, float *restrict dyf)
{
    int64_t d = k->d, i0 = b * TB, i1 = i0 + TB < k->n ? i0 + TB : k->n;
    float *restrict part = k->part + b * d;
    const float *restrict g = k->g;
    memset(part, 0, (size_t)d * sizeof *part);
    for (int64_t i = i0; i < i1; i++) {
        load_row(k, k->x, i, 0, d, xf);
        load_row(k, k->dy, i, 0, d, dyf);
        float ss = dot16(xf, xf, d);
        float r = 1.0f / sqrtf(ss / (float)d + k->eps);
        /* xf becomes xhat = x*r, dyf keeps dy; the c terms are (g*dy)*xhat as the reference. */
        for (int64_t j = 0; j < d; j++) xf[j] = xf[j] * r;
        float s[L] = {0};
        int64_t j = 0;
        for (; j + L <= d; j += L)
            for (int l = 0; l < L; l++) s[l] += (g[j + l] * dyf[j + l]) * xf[j + l];
        for (int l = 0; j < d; j++, l++) s[l] += (g[j] * dyf[j]) * xf[j];
        for (int w = L / 2; w >= 1; w /= 2)
            for (int l = 0; l < w; l++) s[l] = s[l] + s[l + w];
        k->r[i] = r;
        k->c[i] = s[0] / (float)d;
        for (int64_t q = 0; q < d; q++) part[q] += dyf[q] * xf[q];
    }
}

static void phase1(void *p, int64_t lo, int64_t hi, int t)
{
    (void)lo; (void)hi;
    ctx_t *k = p;
    float *xf = k->scratch + (int64_t)t * k->scratch_stride, *dyf = xf + k->d;
    for (;;) {
        int64_t b = (int64_t)atomic_fetch_add(&k->next, 1);
        if (b >= k->n_tb) break;
        phase1_block(k, b, xf, dyf);
    }
}

/* dx for one hit, columns [j0, j0+m), added to acc: acc += r*(g*dy - (x*r)*c). */
HOT static void add_dx(const ctx_t *k, int64_t i, int64_t j0, int64_t m, float *restrict acc)
{
    const float r = k->r[i], c = k->c[i];
    const float *restrict g = k->g + j0;
    if (k->bf16) {
        const uint16_t *restrict xp = (const uint16_t *)k->x + i * k->d + j0;
        const uint16_t *restrict dp = (const uint16_t *)k->dy + i * k->d + j0;
        for (int64_t j = 0; j < m; j++) {
            float xh = bf16f(xp[j]) * r;
            acc[j] += r * (g[j] * bf16f(dp[j]) - xh * c);
        }
    } else {
        const float *restrict xp = (const float *)k->x + i * k->d + j0;
        const float *restrict dp = (const float *)k->dy + i * k->d + j0;
        for (int64_t j = 0; j < m; j++) {
            float xh = xp[j] * r;
            acc[j] += r * (g[j] * dp[j] - xh * c);
        }
    }
}

HOT static void store_block(const ctx_t *k, int64_t row, int64_t j0, int64_t m,
                            const float *restrict acc)
{
    if (k->out_bf16) {
        uint16_t *o = (uint16_t *)k->dE + row * k->d + j0;
        for (int64_t j = 0; j < m; j++) o[j] = parity_fp32_to_bf16_1(acc[j]);
    } else {
        memcpy((float *)k->dE + row * k->d + j0, acc, (size_t)m * sizeof *acc);
    }
}

static void zero_rows(const ctx_t *k, int64_t r0, int64_t r1)
{
    size_t es = k->out_bf16 ? 2 : 4;
    if (r1 > r0) memset((char *)k->dE + (size_t)(r0 * k->d) * es, 0, (size_t)((r1 - r0) * k->d) * es);
}

static void phase2(void *p, int64_t lo, int64_t hi, int t)
{
    (void)lo; (void)hi;
    ctx_t *k = p;
    float *acc = k->scratch + (int64_t)t * k->scratch_stride + 2 * k->d;
    for (;;) {
        int64_t b = (int64_t)atomic_fetch_add(&k->next, 1);
        if (b >= k->n_items) break;
        int64_t v0 = b * VB, v1 = v0 + VB < k->v ? v0 + VB : k->v;
        int64_t zr = v0; /* start of the current run of rows without hits */
        for (int64_t row = v0; row < v1; row++) {
            int64_t s0 = k->off[row], s1 = k->off[row + 1];
            if (s0 == s1) continue;
            zero_rows(k, zr, row);
            zr = row + 1;
            for (int64_t j0 = 0; j0 < k->d; j0 += DB) {
                int64_t m = k->d - j0 < DB ? k->d - j0 : DB;
                memset(acc, 0, (size_t)m * sizeof *acc);
                for (int64_t s = s0; s < s1; s++) add_dx(k, k->perm[s], j0, m, acc);
                store_block(k, row, j0, m, acc);
            }
        }
        zero_rows(k, zr, v1);
    }
}

static int contiguous2(const parity_abi_tensor_t *t)
{
    return t->ndim == 2 && t->strides[1] == 1 && t->strides[0] == t->shape[1];
}

static int fast_fused(const parity_abi_call_t *call)
{
    if (call->n_inputs < 4 || call->n_outputs < 2) return PARITY_KERNEL_ERROR;
    const parity_abi_tensor_t *dy = &call->inputs[0], *x = &call->inputs[1], *g = &call->inputs[2],
                              *ids = &call->inputs[3];
    parity_abi_tensor_t *dE = &call->outputs[0], *dg = &call->outputs[1];
    int in_ok = (dy->dtype == PARITY_DT_BF16 || dy->dtype == PARITY_DT_F32) && x->dtype == dy->dtype;
    int out_ok = (dE->dtype == PARITY_DT_F32 || dE->dtype == PARITY_DT_BF16) && dg->dtype == dE->dtype;
    if (!in_ok || !out_ok || !contiguous2(dy) || !contiguous2(x) || !contiguous2(dE) ||
        ids->dtype != PARITY_DT_I32 || dE->shape[1] != dy->shape[1] || x->shape[0] != dy->shape[0])
        return PARITY_KERNEL_UNSUPPORTED;
    ctx_t k;
    memset(&k, 0, sizeof k);
    k.dy = dy->data;
    k.x = x->data;
    k.bf16 = dy->dtype == PARITY_DT_BF16;
    k.ids = ids->data;
    k.n = dy->shape[0];
    k.d = dy->shape[1];
    k.v = dE->shape[0];
    k.eps = (float)parity_call_attr(call, "eps", PARITY_RMS_EPS);
    k.dE = dE->data;
    k.out_bf16 = dE->dtype == PARITY_DT_BF16;
    int nt = call->n_threads > 0 ? call->n_threads : 1;
    if (nt > 64) nt = 64;
    k.n_tb = (k.n + TB - 1) / TB;
    k.scratch_stride = 2 * k.d + DB + 16;
    size_t nn = (size_t)(k.n ? k.n : 1), dd = (size_t)(k.d ? k.d : 1);
    float *g32 = malloc(dd * sizeof *g32);
    float *rc = malloc(2 * nn * sizeof *rc);
    float *part = malloc((size_t)(k.n_tb ? k.n_tb : 1) * dd * sizeof *part);
    float *scratch = malloc((size_t)nt * (size_t)k.scratch_stride * sizeof *scratch);
    int64_t *off = calloc((size_t)k.v + 2, sizeof *off);
    int64_t *perm = malloc(nn * sizeof *perm);
    float *dgacc = calloc(dd, sizeof *dgacc);
    int rc_ = PARITY_KERNEL_OK;
    if (!g32 || !rc || !part || !scratch || !off || !perm || !dgacc) {
        rc_ = PARITY_KERNEL_ERROR;
        goto done;
    }
    parity_row_to_f32(g, 0, g32);
    k.g = g32;
    k.r = rc;
    k.c = rc + nn;
    k.part = part;
    k.scratch = scratch;
    for (int64_t i = 0; i < k.n; i++)
        if (k.ids[i] < 0 || k.ids[i] >= k.v) {
            rc_ = PARITY_KERNEL_ERROR; /* an id outside the table */
            goto done;
        }

    /* Phase 1: per-token scalars and dgamma partials. */
    atomic_store(&k.next, 0);
    parity_parallel_for(nt, nt, phase1, &k);
    for (int64_t b = 0; b < k.n_tb; b++)
        for (int64_t j = 0; j < k.d; j++) dgacc[j] += part[b * k.d + j];
    for (int64_t j = 0; j < k.d; j++) {
        if (k.out_bf16) ((uint16_t *)dg->data)[j] = parity_fp32_to_bf16_1(dgacc[j]);
        else ((float *)dg->data)[j] = dgacc[j];
    }

    /* Counting sort of positions by id. */
    for (int64_t i = 0; i < k.n; i++) off[k.ids[i] + 1]++;
    for (int64_t r = 0; r < k.v; r++) off[r + 1] += off[r];
    for (int64_t i = 0; i < k.n; i++) perm[off[k.ids[i]]++] = i;
    for (int64_t r = k.v; r > 0; r--) off[r] = off[r - 1]; /* the fill advanced every start */
    off[0] = 0;
    k.off = off;
    k.perm = perm;

    /* Phase 2: dE rows, each owned by one thread. */
    k.n_items = (k.v + VB - 1) / VB;
    atomic_store(&k.next, 0);
    parity_parallel_for(nt, nt, phase2, &k);
done:
    free(g32); free(rc); free(part); free(scratch); free(off); free(perm); free(dgacc);
    return rc_;
}

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}

const parity_abi_kernel_t parity_catalog_embedding_fast[] = {
    K("fp32_fast", "embedding_rmsnorm_bwd",
      "optimized: threads over vocabulary blocks after a counting sort (no atomics), D-blocked "
      "vectorized fp32 accumulation, thread-count-independent bits",
      PARITY_DT_BF16, PARITY_DT_F32, fast_fused, "faithful"),
};
const int parity_catalog_embedding_fast_count =
    (int)(sizeof parity_catalog_embedding_fast / sizeof parity_catalog_embedding_fast[0]);

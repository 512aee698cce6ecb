/* Built-in catalog for gemm (C = A·B) and gemm_bwd (dX = dY·Wᵀ, dW = Xᵀ·dY): faithful fp32
 * variants (sequential, K-tiled, split-K with fp32 partials combined in fp32, bf16 output, fp32
 * inputs) and mutants modelling real bugs (split-K workspace in bf16, an fp16 accumulator, a K
 * tail tile dropped or double-counted when K is not a multiple of the tile, dW accumulated over
 * token chunks in a bf16 gradient buffer). One core computes C = A·B from fp32 operand matrices;
 * the backward kernels hand it transposed copies. Single-threaded C loops, vectorizable over the
 * columns of a row; the numerics, not the speed, are the point. The split-K fixup is the one of
 * `parity splitk` (parity_reduce_splitk_combine). */
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "parity/reduce.h"

#define TILE_K 64 /* the K tile of the tiled variants (CUTLASS/Triton BLOCK_K is 32-128) */

typedef enum {
    T_OK = 0,    /* every tile, the partial last one included */
    T_DROP = 1,  /* `for (k0 = 0; k0 + TILE_K <= K; ...)`: the partial last tile never runs */
    T_CLAMP = 2  /* the last tile's window clamped to [K - TILE_K, K) to keep loads in bounds,
                    without masking the overlap: those products are counted twice */
} tail_t;

/* How the K products of each element are accumulated. */
typedef struct {
    int64_t tile;               /* 0: one sequential fp32 sum; else K tiles summed from zero */
    tail_t tail;                /* the partial last tile (tile > 0) */
    int splits;                 /* > 0: split-K with this many splits (tile ignored) */
    parity_reduce_dtype_t partial, combine; /* split-K workspace and fixup formats */
    int fp16_acc;               /* running sum rounded to fp16 after every addition */
    int64_t bf16_chunk;         /* > 0: K in chunks of this many, each chunk's fp32 sum added
                                   into a bf16 buffer (gradient accumulation in bf16) */
} mode_t_;

/* C = A·B with A (m,k), B (k,n) fp32 row-major (exact copies of bf16/fp16/fp32 inputs). */
typedef struct {
    int64_t m, k, n;
    float *a, *b;
} operands_t;

static int alloc_ops(operands_t *o, int64_t m, int64_t k, int64_t n)
{
    o->m = m;
    o->k = k;
    o->n = n;
    o->a = malloc((size_t)(m * k > 0 ? m * k : 1) * sizeof *o->a);
    o->b = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *o->b);
    if (o->a && o->b) return PARITY_KERNEL_OK;
    free(o->a);
    free(o->b);
    return PARITY_KERNEL_ERROR;
}

static void free_ops(operands_t *o)
{
    free(o->a);
    free(o->b);
}

/* A 2-D input as fp32, as is (dst rows x cols) or transposed (dst cols x rows). */
static int to_f32(const parity_abi_tensor_t *t, int transpose, float *dst)
{
    int64_t rows = t->shape[0], cols = t->shape[1];
    if (!transpose) {
        for (int64_t i = 0; i < rows; i++) parity_row_to_f32(t, i, dst + i * cols);
        return PARITY_KERNEL_OK;
    }
    float *row = malloc((size_t)(cols + 1) * sizeof *row);
    if (!row) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < rows; i++) {
        parity_row_to_f32(t, i, row);
        for (int64_t j = 0; j < cols; j++) dst[j * rows + i] = row[j];
    }
    free(row);
    return PARITY_KERNEL_OK;
}

/* Store row i of C (n values) in the output's dtype, rounding once (nearest-even). */
static void store_row(parity_abi_tensor_t *C, int64_t i, const float *row, int64_t n)
{
    if (C->dtype == PARITY_DT_F32) {
        memcpy((float *)C->data + i * n, row, (size_t)n * sizeof *row);
    } else if (C->dtype == PARITY_DT_BF16) {
        parity_fp32_to_bf16(row, (uint16_t *)C->data + i * n, (size_t)n);
    } else {
        for (int64_t j = 0; j < n; j++) parity_tensor_set(C, i * n + j, row[j]);
    }
}

/* acc[j] += a·b[j] over k in [k0, k1), for one row: each element accumulates sequentially in
 * fp32 (the product rounded to fp32 first: the build has -ffp-contract=off, no FMA). With
 * fp16_acc the running sums are rounded to fp16 after every addition. */
static void axpy_range(const operands_t *o, int64_t i, int64_t k0, int64_t k1, float *acc,
                       int fp16_acc, uint16_t *h)
{
    for (int64_t t = k0; t < k1; t++) {
        float a = o->a[i * o->k + t];
        const float *b = o->b + t * o->n;
        for (int64_t j = 0; j < o->n; j++) acc[j] += a * b[j];
        if (fp16_acc) {
            parity_fp32_to_fp16(acc, h, (size_t)o->n);
            parity_fp16_to_fp32(h, acc, (size_t)o->n);
        }
    }
}

/* Sequential (tile = 0), K-tiled (each tile summed from zero in fp32, then added into the row's
 * accumulator, as a kernel that keeps a per-tile MMA result and adds it to C's registers), or
 * chunked into a bf16 buffer. */
static int core_rows(const operands_t *o, parity_abi_tensor_t *C, const mode_t_ *md)
{
    float *acc = calloc((size_t)(2 * o->n + 1), sizeof *acc), *part = acc ? acc + o->n : NULL;
    uint16_t *h = malloc((size_t)(o->n + 1) * sizeof *h);
    if (!acc || !h) {
        free(acc);
        free(h);
        return PARITY_KERNEL_ERROR;
    }
    int64_t tile = md->bf16_chunk > 0 ? md->bf16_chunk : md->tile;
    for (int64_t i = 0; i < o->m; i++) {
        memset(acc, 0, (size_t)o->n * sizeof *acc);
        if (tile == 0) {
            axpy_range(o, i, 0, o->k, acc, md->fp16_acc, h);
        } else {
            for (int64_t k0 = 0; k0 < o->k; k0 += tile) {
                int64_t k1 = k0 + tile;
                if (k1 > o->k) { /* the partial last tile */
                    if (md->tail == T_DROP) break;
                    k1 = o->k;
                    if (md->tail == T_CLAMP) k0 = o->k > tile ? o->k - tile : 0;
                }
                memset(part, 0, (size_t)o->n * sizeof *part);
                axpy_range(o, i, k0, k1, part, 0, h);
                for (int64_t j = 0; j < o->n; j++) acc[j] += part[j];
                if (md->bf16_chunk > 0) /* the gradient buffer is bf16 */
                    for (int64_t j = 0; j < o->n; j++) acc[j] = parity_round_bf16(acc[j]);
            }
        }
        store_row(C, i, acc, o->n);
    }
    free(acc);
    free(h);
    return PARITY_KERNEL_OK;
}

/* Split-K: S contiguous K ranges (parity_reduce_splitk_bounds), each accumulated in fp32 into a
 * workspace of partials (S, M, N); the fixup reduces each element's S partials in split order
 * with the workspace format `partial` and the combine format `combine` (the serial fixup of
 * CUTLASS's split-K, or a second reduction kernel over the workspace). */
static int core_splitk(const operands_t *o, parity_abi_tensor_t *C, const mode_t_ *md)
{
    int S = (int64_t)md->splits > o->k ? (int)o->k : md->splits;
    size_t mn = (size_t)(o->m * o->n);
    float *ws = calloc(mn * (size_t)S + 1, sizeof *ws);
    float *row = malloc((size_t)(o->n + 1) * sizeof *row);
    double p[64];
    if (!ws || !row || S > 64) {
        free(ws);
        free(row);
        return PARITY_KERNEL_ERROR;
    }
    for (int s = 0; s < S; s++) {
        size_t k0, k1;
        parity_reduce_splitk_bounds((size_t)o->k, S, s, &k0, &k1);
        for (int64_t i = 0; i < o->m; i++)
            axpy_range(o, i, (int64_t)k0, (int64_t)k1, ws + (size_t)s * mn + (size_t)(i * o->n), 0, NULL);
    }
    parity_reduce_dtype_t outfmt = C->dtype == PARITY_DT_BF16 ? PARITY_REDUCE_BF16 : PARITY_REDUCE_FP32;
    for (int64_t i = 0; i < o->m; i++) {
        for (int64_t j = 0; j < o->n; j++) {
            for (int s = 0; s < S; s++) p[s] = ws[(size_t)s * mn + (size_t)(i * o->n + j)];
            /* Exact in fp32 (already rounded to outfmt), so store_row rounds nothing again. */
            row[j] = (float)parity_reduce_splitk_combine(p, S, md->partial, md->combine, outfmt);
        }
        store_row(C, i, row, o->n);
    }
    free(ws);
    free(row);
    return PARITY_KERNEL_OK;
}

static int core(const operands_t *o, parity_abi_tensor_t *C, const mode_t_ *md)
{
    return md->splits > 0 ? core_splitk(o, C, md) : core_rows(o, C, md);
}

/* gemm: C = A·B. */
static int run_gemm(const parity_abi_call_t *call, const mode_t_ *md)
{
    const parity_abi_tensor_t *A = &call->inputs[0], *B = &call->inputs[1];
    if (A->ndim != 2 || B->ndim != 2 || A->shape[1] != B->shape[0]) return PARITY_KERNEL_ERROR;
    operands_t o;
    if (alloc_ops(&o, A->shape[0], A->shape[1], B->shape[1]) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    int rc = to_f32(A, 0, o.a);
    if (rc == PARITY_KERNEL_OK) rc = to_f32(B, 0, o.b);
    if (rc == PARITY_KERNEL_OK) rc = core(&o, &call->outputs[0], md);
    free_ops(&o);
    return rc;
}

/* gemm_bwd: inputs X (M,K), W (K,N), dY (M,N); dX = dY·Wᵀ (the mode dx), dW = Xᵀ·dY (dw). */
static int run_bwd(const parity_abi_call_t *call, const mode_t_ *dx, const mode_t_ *dw)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *W = &call->inputs[1], *DY = &call->inputs[2];
    if (X->ndim != 2 || W->ndim != 2 || DY->ndim != 2 || X->shape[1] != W->shape[0] ||
        DY->shape[0] != X->shape[0] || DY->shape[1] != W->shape[1])
        return PARITY_KERNEL_ERROR;
    int64_t m = X->shape[0], k = X->shape[1], n = W->shape[1];
    operands_t o;
    if (alloc_ops(&o, m, n, k) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    int rc = to_f32(DY, 0, o.a); /* dX (M,K) = dY (M,N) · Wᵀ (N,K) */
    if (rc == PARITY_KERNEL_OK) rc = to_f32(W, 1, o.b);
    if (rc == PARITY_KERNEL_OK) rc = core(&o, &call->outputs[0], dx);
    free_ops(&o);
    if (rc != PARITY_KERNEL_OK || alloc_ops(&o, k, m, n) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    rc = to_f32(X, 1, o.a); /* dW (K,N) = Xᵀ (K,M) · dY (M,N): the reduction over tokens */
    if (rc == PARITY_KERNEL_OK) rc = to_f32(DY, 0, o.b);
    if (rc == PARITY_KERNEL_OK) rc = core(&o, &call->outputs[1], dw);
    free_ops(&o);
    return rc;
}

static const mode_t_ SEQ = {0, T_OK, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ TILED = {TILE_K, T_OK, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ SPLIT4 = {0, T_OK, 4, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ SPLIT16 = {0, T_OK, 16, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ SPLIT_BF16 = {0, T_OK, 8, PARITY_REDUCE_BF16, PARITY_REDUCE_BF16, 0, 0};
static const mode_t_ FP16ACC = {0, T_OK, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 1, 0};
static const mode_t_ TAIL_DROP = {TILE_K, T_DROP, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ TAIL_TWICE = {TILE_K, T_CLAMP, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 0};
static const mode_t_ CHUNK_BF16 = {0, T_OK, 0, PARITY_REDUCE_FP32, PARITY_REDUCE_FP32, 0, 1024};

static int g_seq(const parity_abi_call_t *c) { return run_gemm(c, &SEQ); }
static int g_tiled(const parity_abi_call_t *c) { return run_gemm(c, &TILED); }
static int g_splitk4(const parity_abi_call_t *c) { return run_gemm(c, &SPLIT4); }
static int g_splitk16(const parity_abi_call_t *c) { return run_gemm(c, &SPLIT16); }
static int g_splitk_bf16(const parity_abi_call_t *c) { return run_gemm(c, &SPLIT_BF16); }
static int g_fp16_acc(const parity_abi_call_t *c) { return run_gemm(c, &FP16ACC); }
static int g_tail_drop(const parity_abi_call_t *c) { return run_gemm(c, &TAIL_DROP); }
static int g_tail_twice(const parity_abi_call_t *c) { return run_gemm(c, &TAIL_TWICE); }
static int b_seq(const parity_abi_call_t *c) { return run_bwd(c, &SEQ, &SEQ); }
static int b_tiled_splitk(const parity_abi_call_t *c) { return run_bwd(c, &TILED, &SPLIT16); }
static int b_dw_splitk_bf16(const parity_abi_call_t *c) { return run_bwd(c, &TILED, &SPLIT_BF16); }
static int b_dw_chunk_bf16(const parity_abi_call_t *c) { return run_bwd(c, &TILED, &CHUNK_BF16); }
static int b_dw_tail_drop(const parity_abi_call_t *c) { return run_bwd(c, &TILED, &TAIL_DROP); }
static int b_dx_fp16(const parity_abi_call_t *c) { return run_bwd(c, &FP16ACC, &TILED); }

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_gemm[] = {
    K("fp32", "gemm", "sequential fp32 accumulation over K per element (naive loop)", BF, F32, g_seq, "faithful"),
    K("tiled", "gemm", "K tiles of 64 summed from zero in fp32, each added to the fp32 accumulator", BF, F32, g_tiled, "faithful"),
    K("splitk4", "gemm", "split-K, 4 splits: fp32 partials in the workspace, fixup in fp32", BF, F32, g_splitk4, "faithful"),
    K("splitk16", "gemm", "split-K, 16 splits: fp32 partials, fp32 fixup", BF, F32, g_splitk16, "faithful"),
    K("bf16_out", "gemm", "sequential fp32 accumulation, C rounded once to bf16", BF, BF, g_seq, "faithful"),
    K("fp32_in", "gemm", "fp32 inputs (products rounded once), sequential fp32", F32, F32, g_seq, "faithful"),
    K("splitk_bf16", "gemm", "split-K, 8 splits, workspace in the output dtype: partials rounded to bf16 and reduced in bf16", BF, BF, g_splitk_bf16, "unfaithful"),
    K("fp16_acc", "gemm", "fp16 accumulator (HMMA with fp16 C): running sum rounded to fp16 after every add", BF, F32, g_fp16_acc, "unfaithful"),
    K("ktail_drop", "gemm", "K tiles of 64, the partial last tile never runs (assumes K % 64 == 0)", BF, F32, g_tail_drop, "unfaithful"),
    K("ktail_twice", "gemm", "K tiles of 64, the last tile clamped to [K-64, K) without masking: overlap counted twice", BF, F32, g_tail_twice, "unfaithful"),
    K("fp32", "gemm_bwd", "dX and dW by sequential fp32 accumulation", BF, F32, b_seq, "faithful"),
    K("tiled_splitk", "gemm_bwd", "dX K-tiled, dW split-K over tokens (16 splits, fp32 workspace and fixup)", BF, F32, b_tiled_splitk, "faithful"),
    K("bf16_out", "gemm_bwd", "sequential fp32, dX and dW rounded once to bf16", BF, BF, b_seq, "faithful"),
    K("fp32_in", "gemm_bwd", "fp32 inputs, sequential fp32", F32, F32, b_seq, "faithful"),
    K("dw_splitk_bf16", "gemm_bwd", "dW split-K over tokens with the workspace in bf16 (8 splits, bf16 fixup)", BF, BF, b_dw_splitk_bf16, "unfaithful"),
    K("dw_chunks_bf16", "gemm_bwd", "dW accumulated over 1024-token chunks into a bf16 gradient buffer (fp32 within a chunk)", BF, F32, b_dw_chunk_bf16, "unfaithful"),
    K("dw_tail_drop", "gemm_bwd", "dW over token tiles of 64, the partial last tile dropped (assumes tokens % 64 == 0)", BF, F32, b_dw_tail_drop, "unfaithful"),
    K("dx_fp16_acc", "gemm_bwd", "dX with an fp16 accumulator", BF, F32, b_dx_fp16, "unfaithful"),
};
const int parity_catalog_gemm_count = (int)(sizeof parity_catalog_gemm / sizeof parity_catalog_gemm[0]);

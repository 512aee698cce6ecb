/* Built-in catalog for gemm (C = A·B): faithful fp32 variants (sequential, K-tiled, split-K with
 * fp32 partials combined in fp32, bf16 output, fp32 inputs) and mutants modelling real bugs
 * (split-K workspace in bf16, an fp16 accumulator, a K tail tile dropped or double-counted when
 * K is not a multiple of the tile). Single-threaded C loops, vectorizable over the N columns of
 * a row; the numerics, not the speed, are the point. The split-K fixup is the one of
 * `parity splitk` (parity_reduce_splitk_combine). */
#include <stdlib.h>
#include <string.h>

#include "kernel_impl.h"
#include "op_impl.h"
#include "parity/reduce.h"

#define TILE_K 64 /* the K tile of the tiled variants (CUTLASS/Triton BLOCK_K is 32-128) */

typedef enum {
    T_OK = 0,    /* every tile, the partial last one included */
    T_DROP = 1,  /* `for (k0 = 0; k0 + TILE_K <= K; ...)`: the partial last tile never runs */
    T_CLAMP = 2  /* the last tile's window clamped to [K - TILE_K, K) to keep loads in bounds,
                    without masking the overlap: those products are counted twice */
} tail_t;

typedef struct {
    int64_t m, k, n;
    float *a, *b; /* A (M,K), B (K,N) in fp32: exact copies of bf16/fp16/fp32 inputs */
} operands_t;

static int load(const parity_abi_call_t *call, operands_t *o)
{
    const parity_abi_tensor_t *A = &call->inputs[0], *B = &call->inputs[1];
    if (A->ndim != 2 || B->ndim != 2 || A->shape[1] != B->shape[0]) return PARITY_KERNEL_ERROR;
    o->m = A->shape[0];
    o->k = A->shape[1];
    o->n = B->shape[1];
    o->a = malloc((size_t)(o->m * o->k > 0 ? o->m * o->k : 1) * sizeof *o->a);
    o->b = malloc((size_t)(o->k * o->n > 0 ? o->k * o->n : 1) * sizeof *o->b);
    if (!o->a || !o->b) {
        free(o->a);
        free(o->b);
        return PARITY_KERNEL_ERROR;
    }
    for (int64_t i = 0; i < o->m; i++) parity_row_to_f32(A, i, o->a + i * o->k);
    for (int64_t t = 0; t < o->k; t++) parity_row_to_f32(B, t, o->b + t * o->n);
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
 * fp32 (the product rounded to fp32 first: the build has -ffp-contract=off, no FMA). */
static void axpy_range(const operands_t *o, int64_t i, int64_t k0, int64_t k1, float *acc)
{
    for (int64_t t = k0; t < k1; t++) {
        float a = o->a[i * o->k + t];
        const float *b = o->b + t * o->n;
        for (int64_t j = 0; j < o->n; j++) acc[j] += a * b[j];
    }
}

/* Sequential (tile = 0) or K-tiled: each tile summed from zero in fp32, then added into the row's
 * accumulator, as a kernel that keeps a per-tile MMA result and adds it to C's registers. */
static int run_tiled(const parity_abi_call_t *call, int64_t tile, tail_t tail)
{
    operands_t o;
    if (load(call, &o) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    float *acc = calloc((size_t)(2 * o.n + 1), sizeof *acc), *part = acc + o.n;
    if (!acc) {
        free(o.a);
        free(o.b);
        return PARITY_KERNEL_ERROR;
    }
    for (int64_t i = 0; i < o.m; i++) {
        memset(acc, 0, (size_t)o.n * sizeof *acc);
        if (tile == 0) {
            axpy_range(&o, i, 0, o.k, acc);
        } else {
            for (int64_t k0 = 0; k0 < o.k; k0 += tile) {
                int64_t k1 = k0 + tile;
                if (k1 > o.k) { /* the partial last tile */
                    if (tail == T_DROP) break;
                    k1 = o.k;
                    if (tail == T_CLAMP) k0 = o.k > tile ? o.k - tile : 0;
                }
                memset(part, 0, (size_t)o.n * sizeof *part);
                axpy_range(&o, i, k0, k1, part);
                for (int64_t j = 0; j < o.n; j++) acc[j] += part[j];
            }
        }
        store_row(&call->outputs[0], i, acc, o.n);
    }
    free(acc);
    free(o.a);
    free(o.b);
    return PARITY_KERNEL_OK;
}

/* Split-K: S contiguous K ranges (parity_reduce_splitk_bounds), each accumulated in fp32 into a
 * workspace of partials (S, M, N); the fixup reduces each element's S partials in split order
 * with the workspace format `partial` and the combine format `combine` (the serial fixup of
 * CUTLASS's split-K, or a second reduction kernel over the workspace). */
static int run_splitk(const parity_abi_call_t *call, int splits, parity_ar_dtype_t partial,
                      parity_ar_dtype_t combine)
{
    operands_t o;
    if (load(call, &o) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    int S = (int64_t)splits > o.k ? (int)o.k : splits;
    size_t mn = (size_t)(o.m * o.n);
    float *ws = calloc(mn * (size_t)S + 1, sizeof *ws);
    float *row = malloc((size_t)(o.n + 1) * sizeof *row);
    double p[64];
    if (!ws || !row || S > 64) {
        free(ws);
        free(row);
        free(o.a);
        free(o.b);
        return PARITY_KERNEL_ERROR;
    }
    for (int s = 0; s < S; s++) {
        size_t k0, k1;
        parity_reduce_splitk_bounds((size_t)o.k, S, s, &k0, &k1);
        for (int64_t i = 0; i < o.m; i++)
            axpy_range(&o, i, (int64_t)k0, (int64_t)k1, ws + (size_t)s * mn + (size_t)(i * o.n));
    }
    parity_abi_tensor_t *C = &call->outputs[0];
    parity_ar_dtype_t outfmt = C->dtype == PARITY_DT_BF16 ? PARITY_AR_BF16 : PARITY_AR_FP32;
    for (int64_t i = 0; i < o.m; i++) {
        for (int64_t j = 0; j < o.n; j++) {
            for (int s = 0; s < S; s++) p[s] = ws[(size_t)s * mn + (size_t)(i * o.n + j)];
            /* Exact in fp32 (already rounded to outfmt), so store_row rounds nothing again. */
            row[j] = (float)parity_reduce_splitk_combine(p, S, partial, combine, outfmt);
        }
        store_row(C, i, row, o.n);
    }
    free(ws);
    free(row);
    free(o.a);
    free(o.b);
    return PARITY_KERNEL_OK;
}

/* An fp16 accumulator (HMMA with an fp16 C operand, or `acc` declared half): each addition is
 * done in fp32 and the running sum rounded to fp16 (range 6e-8..65504, 11 bits). The result is
 * stored widened to fp32. */
static int run_fp16_acc(const parity_abi_call_t *call)
{
    operands_t o;
    if (load(call, &o) != PARITY_KERNEL_OK) return PARITY_KERNEL_ERROR;
    float *acc = calloc((size_t)(o.n + 1), sizeof *acc);
    uint16_t *h = malloc((size_t)(o.n + 1) * sizeof *h);
    if (!acc || !h) {
        free(acc);
        free(h);
        free(o.a);
        free(o.b);
        return PARITY_KERNEL_ERROR;
    }
    for (int64_t i = 0; i < o.m; i++) {
        memset(acc, 0, (size_t)o.n * sizeof *acc);
        for (int64_t t = 0; t < o.k; t++) {
            float a = o.a[i * o.k + t];
            const float *b = o.b + t * o.n;
            for (int64_t j = 0; j < o.n; j++) acc[j] += a * b[j];
            parity_fp32_to_fp16(acc, h, (size_t)o.n);
            parity_fp16_to_fp32(h, acc, (size_t)o.n);
        }
        store_row(&call->outputs[0], i, acc, o.n);
    }
    free(acc);
    free(h);
    free(o.a);
    free(o.b);
    return PARITY_KERNEL_OK;
}

static int g_seq(const parity_abi_call_t *c) { return run_tiled(c, 0, T_OK); }
static int g_tiled(const parity_abi_call_t *c) { return run_tiled(c, TILE_K, T_OK); }
static int g_splitk4(const parity_abi_call_t *c) { return run_splitk(c, 4, PARITY_AR_FP32, PARITY_AR_FP32); }
static int g_splitk16(const parity_abi_call_t *c) { return run_splitk(c, 16, PARITY_AR_FP32, PARITY_AR_FP32); }
static int g_splitk_bf16(const parity_abi_call_t *c) { return run_splitk(c, 8, PARITY_AR_BF16, PARITY_AR_BF16); }
static int g_fp16_acc(const parity_abi_call_t *c) { return run_fp16_acc(c); }
static int g_tail_drop(const parity_abi_call_t *c) { return run_tiled(c, TILE_K, T_DROP); }
static int g_tail_twice(const parity_abi_call_t *c) { return run_tiled(c, TILE_K, T_CLAMP); }

#define K(name, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, "gemm", desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_gemm[] = {
    K("fp32", "sequential fp32 accumulation over K per element (naive loop)", BF, F32, g_seq, "faithful"),
    K("tiled", "K tiles of 64 summed from zero in fp32, each added to the fp32 accumulator", BF, F32, g_tiled, "faithful"),
    K("splitk4", "split-K, 4 splits: fp32 partials in the workspace, fixup in fp32", BF, F32, g_splitk4, "faithful"),
    K("splitk16", "split-K, 16 splits: fp32 partials, fp32 fixup", BF, F32, g_splitk16, "faithful"),
    K("bf16_out", "sequential fp32 accumulation, C rounded once to bf16", BF, BF, g_seq, "faithful"),
    K("fp32_in", "fp32 inputs (products rounded once), sequential fp32", F32, F32, g_seq, "faithful"),
    K("splitk_bf16", "split-K, 8 splits, workspace in the output dtype: partials rounded to bf16 and reduced in bf16", BF, BF, g_splitk_bf16, "unfaithful"),
    K("fp16_acc", "fp16 accumulator (HMMA with fp16 C): running sum rounded to fp16 after every add", BF, F32, g_fp16_acc, "unfaithful"),
    K("ktail_drop", "K tiles of 64, the partial last tile never runs (assumes K % 64 == 0)", BF, F32, g_tail_drop, "unfaithful"),
    K("ktail_twice", "K tiles of 64, the last tile clamped to [K-64, K) without masking: overlap counted twice", BF, F32, g_tail_twice, "unfaithful"),
};
const int parity_catalog_gemm_count = (int)(sizeof parity_catalog_gemm / sizeof parity_catalog_gemm[0]);

/* model_math: the arithmetic primitives every forward path is built from -- rounding to the
 * path's dtypes, GEMM with split-K and row-parallel tensor parallelism (its all-reduce), SwiGLU
 * -- shared by the dense forward (model_forward.c), the MoE FFN (model_moe_run.c) and the vision
 * encoder (model_vision.c). Split from model_forward.c so that the MoE FFN, which the forward
 * calls, does not call back into it. Doubles rounded explicitly to the path's dtypes, as
 * model_forward.c's header explains. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/reduce.h"
#include "src/model/model_impl.h"

/* ------------------------------------------------------------------------------------------ */
/* Rounding                                                                                   */
/* ------------------------------------------------------------------------------------------ */

double model_rnd(const parity_model_runner_t *r, parity_model_dtype_t d, double x)
{
    switch (d) {
    case PARITY_MODEL_FP64:
        return x;
    case PARITY_MODEL_FP32:
        return (double)(float)x;
    case PARITY_MODEL_BF16: {
        /* Fast path when x is already an fp32 value (the usual case: fp32 math then a bf16
         * store); otherwise round the double directly, never via fp32 (double rounding). */
        float f = (float)x;
        if ((double)f == x) return (double)parity_round_bf16(f);
        return parity_format_round(&r->fmt_bf16, x, NULL, NULL);
    }
    case PARITY_MODEL_FP16: {
        float f = (float)x;
        if ((double)f == x) {
            uint16_t h;
            parity_fp32_to_fp16(&f, &h, 1);
            parity_fp16_to_fp32(&h, &f, 1);
            return (double)f;
        }
        return parity_format_round(&r->fmt_fp16, x, NULL, NULL);
    }
    }
    return x;
}

/* The dtype of in-op math (norms, softmax, RoPE, SiLU, all-reduce adds): fp64 for the
 * reference, fp32 for every other path (the bf16acc mutant only changes GEMM accumulation). */
parity_model_dtype_t model_cmp_dtype(const parity_model_runner_t *r)
{
    return r->p.storage == PARITY_MODEL_FP64 ? PARITY_MODEL_FP64 : PARITY_MODEL_FP32;
}
#define rnd model_rnd
#define cmp_dtype model_cmp_dtype

#define C(x) rnd(r, cd, (x))          /* in-op math result */
#define ST(x) rnd(r, r->p.storage, (x)) /* a value stored between ops */

double model_exp(parity_model_dtype_t cd, double x)
{
    return cd == PARITY_MODEL_FP64 ? exp(x) : (double)expf((float)x);
}

double model_sqrt(parity_model_dtype_t cd, double x)
{
    return cd == PARITY_MODEL_FP64 ? sqrt(x) : (double)sqrtf((float)x);
}
#define c_exp model_exp

/* GEMM accumulation: acc + p rounded once to the accumulator dtype. For bf16 the sum is formed
 * exactly (2Sum) and rounded once, since rounding the double sum to bf16 could double-round. */
static double gadd(const parity_model_runner_t *r, double acc, double p)
{
    if (r->p.accum == PARITY_MODEL_BF16) {
        /* Fast path: when the double sum is exact (2Sum error 0) and well inside bf16's normal
         * range, round it to 8 significant bits, ties to even, on its bits; else the library's
         * exact emulated addition. */
        double s = acc + p, bb = s - acc, e = (acc - (s - bb)) + (p - bb);
        double as = fabs(s);
        if (e == 0 && as >= 0x1p-120 && as < 0x1p120) {
            uint64_t u;
            memcpy(&u, &s, sizeof u);
            u += (((uint64_t)1 << 44) - 1) + ((u >> 45) & 1);
            u &= ~(((uint64_t)1 << 45) - 1);
            memcpy(&s, &u, sizeof s);
            return s;
        }
        if (s == 0 && e == 0) return s;
        return parity_format_add(&r->fmt_bf16, acc, p, NULL, NULL);
    }
    return rnd(r, r->p.accum, acc + p);
}

/* ------------------------------------------------------------------------------------------ */
/* GEMM with split-K and row-parallel tensor parallelism                                      */
/* ------------------------------------------------------------------------------------------ */

/* Split count of one GEMM. An explicit splitkS wins (a batch-invariant kernel). With batchB and
 * no splitk, a heuristic in the spirit of cuBLAS/Triton split-K selection on a scaled-down
 * machine: output tiles of 16x16 over 16 "SMs"; when the tiles cannot fill the machine, K is
 * split until they do, with at least 16 terms per part and at most 8 parts. */
static int gemm_splits(const parity_model_runner_t *r, size_t rows, int N, int K)
{
    int s = 1;
    if (r->p.splitk > 0) {
        s = r->p.splitk;
    } else if (r->p.batch > 0) {
        size_t tiles = ((rows + 15) / 16) * (((size_t)N + 15) / 16);
        if (tiles < 16) {
            s = (int)((16 + tiles - 1) / tiles);
            if (s > K / 16) s = K / 16;
            if (s > 8) s = 8;
        }
    }
    if (s > K) s = K;
    return s < 1 ? 1 : s;
}

uint64_t model_split_signature(const parity_model_runner_t *r, size_t rows)
{
    /* Every GEMM shape of the forward: (N, K, row-parallel): wq, wk/wv, wo, w1/w3, w2, wcls. */
    const int shapes[6][3] = {{r->D, r->D, 0}, {r->kvd, r->D, 0}, {r->D, r->D, 1},
                              {r->F, r->D, 0}, {r->D, r->F, 1},   {r->V, r->D, 0}};
    uint64_t sig = 0;
    for (int i = 0; i < 6; i++) {
        int R = shapes[i][2] && r->p.tp > 1 ? r->p.tp : 1, K = shapes[i][1];
        for (int k = 0; k < R; k++) {
            int k0 = (int)((long)K * k / R), k1 = (int)((long)K * (k + 1) / R);
            sig = sig * 31 + (uint64_t)gemm_splits(r, rows, shapes[i][0], k1 - k0);
        }
    }
    return sig;
}

/* sum_{k in [k0,k1)} w[k] x[k] in s contiguous near-equal parts, each accumulated from 0 in k
 * order, the parts then added in order (a split-K GEMM with a serial fixup). Products are
 * formed in the compute dtype (exact for bf16/fp16 inputs in fp32, as tensor cores do). */
static double local_dot(const parity_model_runner_t *r, const double *w, const double *x, int k0,
                        int k1, int s)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    double total = 0;
    int K = k1 - k0;
    for (int j = 0; j < s; j++) {
        int a = k0 + (int)((long)K * j / s), b = k0 + (int)((long)K * (j + 1) / s);
        double acc = 0;
        for (int k = a; k < b; k++) acc = gadd(r, acc, C(w[k] * x[k]));
        total = j == 0 ? acc : gadd(r, total, acc);
    }
    return total;
}

/* The all-reduce of a row-parallel GEMM's R partials (part, R x N rank-major, each already rounded
 * to the hop dtype) into out[0..N): the reduce module's orders (src/reduce/reduce.c, the same code
 * as `parity allreduce`), the adds in the compute dtype, every value sent over a hop -- and the
 * result -- rounded to the hop dtype. The model's dtypes and algorithms map one to one. */
static parity_status_t model_allreduce(const parity_model_runner_t *r, const double *part, int R,
                                       int N, double *out)
{
    static const parity_reduce_dtype_t DT[] = {
        [PARITY_MODEL_FP64] = PARITY_REDUCE_FP64, [PARITY_MODEL_FP32] = PARITY_REDUCE_FP32,
        [PARITY_MODEL_BF16] = PARITY_REDUCE_BF16, [PARITY_MODEL_FP16] = PARITY_REDUCE_FP16};
    static const parity_reduce_algo_t ALGO[] = {[PARITY_MODEL_AR_RING] = PARITY_REDUCE_RING,
                                            [PARITY_MODEL_AR_TREE] = PARITY_REDUCE_TREE,
                                            [PARITY_MODEL_AR_ONESHOT] = PARITY_REDUCE_ONESHOT};
    parity_reduce_spec_t s = {ALGO[r->p.allreduce], R, DT[r->p.hop], DT[cmp_dtype(r)], 1};
    return parity_reduce_allreduce(&s, part, (size_t)N, out);
}

/* out[i] = ST(sum_k W[i*K + k] x[k]) for i in [0, N). A row-parallel GEMM under tpR splits K
 * into R contiguous near-equal slices (one per rank; with R dividing n_heads the wo slices are
 * whole heads), each rank's partial is rounded to the hop dtype, then all-reduced. */
void model_gemm(parity_model_runner_t *r, double *out, const double *W, const double *x, int N,
                int K, size_t rows, int row_parallel)
{
    int R = row_parallel && r->p.tp > 1 ? r->p.tp : 1;
    int s[8];
    for (int k = 0; k < R; k++) {
        int k0 = (int)((long)K * k / R), k1 = (int)((long)K * (k + 1) / R);
        s[k] = gemm_splits(r, rows, N, k1 - k0);
    }
    if (R == 1) {
        for (int i = 0; i < N; i++) out[i] = ST(local_dot(r, W + (size_t)i * (size_t)K, x, 0, K, s[0]));
        return;
    }
    double *part = r->arpart; /* R x N, rank-major; N <= D for every row-parallel GEMM */
    for (int i = 0; i < N; i++) {
        const double *w = W + (size_t)i * (size_t)K;
        for (int k = 0; k < R; k++) {
            int k0 = (int)((long)K * k / R), k1 = (int)((long)K * (k + 1) / R);
            part[(size_t)k * (size_t)N + (size_t)i] = rnd(r, r->p.hop, local_dot(r, w, x, k0, k1, s[k]));
        }
    }
    /* The spec is valid by construction (R <= 8, dtypes and algorithm mapped), so this cannot fail. */
    (void)model_allreduce(r, part, R, N, out);
    for (int i = 0; i < N; i++) out[i] = ST(out[i]);
}

/* SwiGLU as run.c: val *= 1 / (1 + exp(-val)); val *= w3 x. The fused act-and-mul kernel of a
 * serving MoE (vLLM silu_and_mul) keeps silu(h1) in the compute dtype: one rounding at the end. */
void model_swiglu(const parity_model_runner_t *r, double *hb, const double *hb2, int n,
                  int fused_act)
{
    parity_model_dtype_t cd = cmp_dtype(r);
    for (int i = 0; i < n; i++) {
        double h1 = hb[i];
        double sg = C(1.0 / C(1.0 + C(c_exp(cd, -h1))));
        double g = C(h1 * sg);
        if (!fused_act) g = ST(g);
        hb[i] = ST(C(g * hb2[i]));
    }
}

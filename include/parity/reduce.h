/* Reduction-order simulators: an all-reduce of R rank-local tensors under ring (NCCL's and Open
 * MPI's chunk conventions, several channels), tree, recursive doubling, Rabenseifner, basic linear
 * and one-shot fixed order, with optional per-hop rounding; the rank-local inputs from workloads
 * (including real GEMM partial sums); the drift between two setups; split-K GEMM drift.
 * Every result is exact emulation: each addition is computed in the accumulation format and the
 * value each hop carries is rounded to the hop format (docs/reduce.md says which library does
 * what). Deliberately not here: communication, threads, the MPI engine (mpi/). */
#ifndef PARITY_REDUCE_H
#define PARITY_REDUCE_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/reduce.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_REDUCE_RING = 0,         /* NCCL ring: each channel's slice is cut into R contiguous
                                       chunks; chunk c starts at rank c+1, travels c+2, ...,
                                       ends at c */
    PARITY_REDUCE_TREE = 1,         /* pairwise halving: sum[lo,hi) = sum[lo,mid) + sum[mid,hi),
                                       mid = lo + (hi-lo+1)/2 (the model module's tree) */
    PARITY_REDUCE_RD = 2,           /* Open MPI recursive doubling (coll_tuned algorithm 3):
                                       butterfly over p' = 2^floor(log2 R) virtual ranks, the
                                       first 2(R-p') ranks pre-added in pairs (2i, 2i+1) */
    PARITY_REDUCE_ONESHOT = 3,      /* every rank reads all partials and sums ranks 0..R-1 in order
                                       in the accumulator, rounding once at the end */
    PARITY_REDUCE_LINEAR = 4,       /* Open MPI basic linear (algorithm 1): reduce to rank 0 adding
                                       ranks, ..., 0 in that order, then broadcast */
    PARITY_REDUCE_MPI_RING = 5,     /* Open MPI ring (algorithms 4 and 5): R blocks, the first N % R
                                       of ceil(N/R) elements; block b starts at rank b, ends at b-1;
                                       N < R falls back to recursive doubling */
    PARITY_REDUCE_RABENSEIFNER = 6  /* Open MPI Rabenseifner (algorithm 6): reduce-scatter by
                                       recursive halving + allgather. Per element the same
                                       butterfly as recursive doubling; N < p' falls back to
                                       basic linear */
} parity_reduce_algo_t;

/* Number formats an all-reduce carries (hop) and adds in (acc). */
typedef enum {
    PARITY_REDUCE_FP64 = 0, /* no rounding at all (doubles) */
    PARITY_REDUCE_FP32 = 1,
    PARITY_REDUCE_BF16 = 2,
    PARITY_REDUCE_FP16 = 3
} parity_reduce_dtype_t;

/* One all-reduce setup. */
typedef struct {
    parity_reduce_algo_t algo;
    int ranks;                  /* R, 1..PARITY_REDUCE_MAX_RANKS */
    parity_reduce_dtype_t hop;  /* the rank-local tensors, every value sent over a hop and the
                                   output are rounded to this format */
    parity_reduce_dtype_t acc;  /* each addition is computed in this format (default fp32, or
                                   fp64 when hop is fp64), then rounded to hop */
    int channels;               /* ring only: the tensor is cut into this many contiguous slices,
                                   each reduced by its own ring (NCCL channels); default 1 */
} parity_reduce_spec_t;

#define PARITY_REDUCE_MAX_RANKS 64

/* Parses "ALGO:R[:HOP][:acc=DTYPE][:chC]": ALGO ring | tree | rd | oneshot | linear | mpi_ring |
 * rabenseifner (aliases: recursive_doubling, segmented_ring = mpi_ring, basic_linear = linear,
 * ompi:N for Open MPI's coll_tuned_allreduce_algorithm number N in 1, 3, 4, 5, 6), R 1..64, HOP
 * fp64 | fp32 | bf16 | fp16 (default fp32), C 1..64. Example "ring:8:bf16:ch2".
 * Returns PARITY_OK or PARITY_E_INVALID with diag naming the token and what was expected. */
parity_status_t parity_reduce_spec_parse(const char *text, parity_reduce_spec_t *out,
                                         parity_diag_t *diag);
/* Canonical text of a spec ("ring:8:bf16", "ring:8:bf16:acc=bf16:ch2"); parsing it gives it back.
 * Always NUL-terminated when cap > 0. */
void parity_reduce_spec_str(const parity_reduce_spec_t *s, char *buf, size_t cap);
const char *parity_reduce_algo_name(parity_reduce_algo_t a);
const char *parity_reduce_dtype_name(parity_reduce_dtype_t d);
/* The value x rounded to dtype d (nearest-even; fp64 returns x). */
double parity_reduce_round(parity_reduce_dtype_t d, double x);

/* The all-reduce of part (R x n, rank-major: part[r*n + i] is rank r's element i, each already in
 * the hop format) into out[0..n): the value every rank ends with. The ring conventions make the
 * result depend on i's position, hence n. PARITY_E_INVALID for NULLs or a bad spec. */
parity_status_t parity_reduce_allreduce(const parity_reduce_spec_t *s, const double *part, size_t n,
                                        double *out);
/* The same for one element: p[0..R) its partials on ranks 0..R-1, i its index of n. */
double parity_reduce_allreduce1(const parity_reduce_spec_t *s, const double *p, size_t i, size_t n);

/* 1 when two specs give bit-identical results for every input of n elements by construction
 * (same per-element order and formats: equal specs, rd and rabenseifner when n >= p', mpi_ring and
 * rd when n < R, any algorithm at R == 1 with equal formats...), else 0. */
int parity_reduce_same_order(const parity_reduce_spec_t *a, const parity_reduce_spec_t *b,
                             size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Inputs: each output element is the sum of K terms; rank r of R holds the sum of its         */
/* contiguous near-equal slice [K*r/R, K*(r+1)/R), accumulated in order in fp32 (as a GEMM     */
/* does), then rounded to the hop format. So the same logical tensor can be all-reduced over   */
/* 8 ranks or over 4.                                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
    PARITY_REDUCE_W_PARTIAL = 0,   /* real row-parallel GEMM partials: term k of element i is
                                  bf16(W[i,k]) * bf16(x[k]), W ~ N(0, 1/K), x activations with
                                  outlier channels (x8 on 1% of k): partial sums that cancel */
    PARITY_REDUCE_W_NORMAL = 1,    /* terms N(0, 1) */
    PARITY_REDUCE_W_GRADSCALE = 2, /* terms N(0, 1) * 10^U(-6,-3) per element (DP gradients) */
    PARITY_REDUCE_W_OUTLIER = 3,   /* terms N(0, 1), 1% of elements x100 */
    PARITY_REDUCE_W_INTPROBE = 4   /* integers in [-4, 4]: every order gives the exact sum */
} parity_reduce_workload_t;

parity_status_t parity_reduce_workload_parse(const char *name, parity_reduce_workload_t *out);
const char *parity_reduce_workload_name(parity_reduce_workload_t w);

/* part (R x n rank-major) for ranks R and hop format hop; ref[0..n) (may be NULL) the exact sum of
 * all K terms (correctly rounded to double). k is K (>= R; for partial default 4096). Terms of
 * element i are a pure function of (workload, seed, i, k). PARITY_E_INVALID for bad arguments,
 * PARITY_E_NOMEM. */
parity_status_t parity_reduce_inputs(parity_reduce_workload_t w, uint64_t seed, size_t n, size_t k,
                                     int ranks, parity_reduce_dtype_t hop, double *part,
                                     double *ref);

/* ------------------------------------------------------------------------------------------ */
/* Drift between two results.                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    size_t n;
    size_t n_differ;        /* elements whose values differ (NaN vs NaN counts as equal) */
    double frac_differ;
    double max_ulp, mean_ulp, p50_ulp, p90_ulp, p99_ulp; /* |a - b| in ulps of the ulp format
                                                            at max(|b|, rel_floor) */
    uint64_t ulp_hist[6];   /* |a-b| in ulps: 0, (0,1], (1,2], (2,4], (4,8], > 8 */
    double max_abs, max_rel, mean_rel; /* rel: |a - b| / max(|b|, rel_floor) */
    double nmse;            /* sum (a-b)^2 / sum b^2 */
    double rel_floor;       /* 1e-3 * rms(b): keeps near-cancelled elements from dominating */
} parity_reduce_drift_t;

/* Drift of a against b in ulps of format ulp_fmt (fp64 is counted in fp32 ulps).
 * PARITY_E_INVALID for NULLs, PARITY_E_NOMEM. */
parity_status_t parity_reduce_drift(const double *a, const double *b, size_t n,
                                    parity_reduce_dtype_t ulp_fmt, parity_reduce_drift_t *out);

/* ------------------------------------------------------------------------------------------ */
/* Split-K GEMM.                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* out[i] = the dot product of element i's K partial-workload terms (bf16 x bf16, exact in fp32)
 * with K cut into `splits` contiguous near-equal parts, each accumulated in order in fp32, each
 * part rounded to `partial` (fp32 or bf16: the workspace format), the parts added in order in
 * fp32 (a serial fixup), the result rounded to `outfmt`. ref[i] (may be NULL) the exact dot
 * product. splits 1..K. */
parity_status_t parity_reduce_splitk(uint64_t seed, size_t n, size_t k, int splits,
                                     parity_reduce_dtype_t partial, parity_reduce_dtype_t outfmt,
                                     double *out, double *ref);

/* The pieces of a split-K GEMM that parity_reduce_splitk and the gemm catalog
 * (ops/gemm/kernels.c) share. Split s of `splits` (0 <= s < splits <= k) covers the contiguous
 * terms [k0, k1) = [k*s/splits, k*(s+1)/splits). */
void parity_reduce_splitk_bounds(size_t k, int splits, int s, size_t *k0, size_t *k1);
/* The fixup of one output element: the partial sums p[0..splits) in split order, each rounded to
 * the workspace format `partial`, added in order with each addition rounded to `combine`, the
 * result rounded to `outfmt` (fp32 / fp32: a faithful split-K; bf16 / bf16: the "workspace in
 * the output dtype" bug). Formats fp32, bf16 or fp16 (fp64: no rounding). */
double parity_reduce_splitk_combine(const double *p, int splits, parity_reduce_dtype_t partial,
                                    parity_reduce_dtype_t combine, parity_reduce_dtype_t outfmt);

#ifdef __cplusplus
}
#endif

/* The names before issue #40 (parity/deprecated.h), for one release. */
#define PARITY_REDUCE_H_DECLARED
#include "parity/deprecated.h"
#endif

/* Internal: the GEMM family's shared pieces (ops/gemm/gemm.c). */
#ifndef PARITY_OPS_GEMM_H
#define PARITY_OPS_GEMM_H

#include <stdint.h>

#include "parity/kernel_abi.h"
#include "parity/workload.h"

/* The family's workload parameters: gemm's A (M,K) and B (K,N), gemm_bwd's X (M,K) and dY (M,N)
 * (its W is N(0,1) x 0.02, sparse where X is); the workload's N, D, V are M, K, N. */
typedef struct {
    parity_vals_t a;       /* A (M,K) */
    parity_vals_t b;       /* B (K,N) */
    int outliers;          /* outlier channels of A (a.kind PARITY_VALS_OUTLIER) */
    double outlier_factor; /* their factor */
} gemm_params_t;
typedef struct {
    parity_vals_t x;       /* activations X (M,K) */
    parity_vals_t dy;      /* upstream gradient dY (M,N) */
    int outliers;          /* outlier channels of X (x.kind PARITY_VALS_OUTLIER) */
    double outlier_factor; /* their factor */
} gemm_bwd_params_t;
extern const parity_workload_family_t gemm_family, gemm_bwd_family;

/* The family's catalog table (kernels.c). */
extern const parity_abi_kernel_t parity_catalog_gemm[];
extern const int parity_catalog_gemm_count;

/* The fp64 reference C (m,n) = A (m,k) . B with B given transposed (n,k); s_abs = sum |a b|. */
void parity_ref_gemm(const double *a, const double *bt, int64_t m, int64_t k, int64_t n, double *c,
                     double *s_abs);

#endif

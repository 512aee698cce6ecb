/* Internal: the GEMM family's shared pieces (ops/gemm/gemm.c). */
#ifndef PARITY_OPS_GEMM_H
#define PARITY_OPS_GEMM_H

#include <stdint.h>

/* The fp64 reference C (m,n) = A (m,k) . B with B given transposed (n,k); s_abs = sum |a b|. */
void parity_ref_gemm(const double *a, const double *bt, int64_t m, int64_t k, int64_t n, double *c,
                     double *s_abs);

#endif

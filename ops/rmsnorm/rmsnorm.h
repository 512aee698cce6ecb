/* Internal: the RMSNorm family's shared pieces (ops/rmsnorm/rmsnorm.c), which the embedding
 * family's fused op and kernels use too. */
#ifndef PARITY_OPS_RMSNORM_H
#define PARITY_OPS_RMSNORM_H

#include <stdint.h>

#include "parity/workload.h"
#include "src/kernel/rms_row.h"

/* The family's workload parameters (rmsnorm_fwd and rmsnorm_bwd share their presets; the forward
 * reads no dy): N rows of D. `parity ops rmsnorm_bwd --workloads` prints them. */
typedef struct {
    parity_vals_t x;           /* the input rows x (N,D) */
    parity_vals_t dy;          /* upstream gradient dy (N,D), the backward's */
    int outliers;              /* outlier channels of x (x.kind PARITY_VALS_OUTLIER) */
    double outlier_factor;     /* their factor */
    parity_gamma_kind_t gamma; /* the norm weight (D) */
} rms_params_t;
extern const parity_workload_family_t rms_family;

/* The family's catalog table (kernels.c). */
extern const parity_abi_kernel_t parity_catalog_rmsnorm[];
extern const int parity_catalog_rmsnorm_count;

/* Per-term errors across terms (op.h s_up2; docs/error-model.md, "Per-term errors across
 * terms") need the terms of an element to come from distinct roundings of distinct values. A
 * continuous generator gives every token row its own x and dy, so each row's sum x^2, r, c and
 * products are rounded from values no other row shares. A discrete one does not: integer or
 * sparse-power x rows share sum x^2 (a few hundred values), hence r and its roundings, and
 * g_j dy_ij repeats across rows with the same integer dy; those errors can add linearly. */
static inline int parity_rms_rows_distinct(parity_vals_kind_t x, parity_vals_kind_t dy)
{
    return parity_vals_continuous(x) && parity_vals_continuous(dy);
}

#endif

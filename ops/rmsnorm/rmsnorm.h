/* Internal: the RMSNorm family's shared pieces (ops/rmsnorm/rmsnorm.c), which the embedding
 * family's fused op and kernels use too. */
#ifndef PARITY_OPS_RMSNORM_H
#define PARITY_OPS_RMSNORM_H

#include <stdint.h>

/* RMSNorm's epsilon for every op of the family (as llama2.c / Llama use). */
#define PARITY_RMS_EPS 1e-5

/* The textbook fp32 RMSNorm backward of one row, as a faithful kernel computes it:
 * sequential fp32 sums, r = 1/sqrtf(mean(x^2) + eps), c = mean(g*dy*xhat),
 * dx_j = r*(g_j*dy_j - xhat_j*c). xhat_dy (optional) receives dy_j*xhat_j (dgamma's terms).
 * ignore_gamma / eps_outside model two mutants (0 for the faithful computation). */
void parity_rms_bwd_row_f32(const float *x, const float *dy, const float *g, int64_t d, float eps,
                            float *dx, float *xhat_dy, int ignore_gamma, int eps_outside);

#endif

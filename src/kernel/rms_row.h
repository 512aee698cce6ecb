/* Internal: the faithful fp32 RMSNorm row backward (src/kernel/rms_row.c), shared by the RMSNorm
 * and embedding families' kernels and emulations (ops/) and the training probe (src/train). */
#ifndef PARITY_KERNEL_RMS_ROW_H
#define PARITY_KERNEL_RMS_ROW_H

#include <stdint.h>

/* RMSNorm's epsilon for every op of the family (as llama2.c / Llama use). */
#define PARITY_RMS_EPS 1e-5

/* How the row backward forms r (its last argument). */
#define PARITY_RMS_R_EXACT 0       /* r = 1/sqrtf(mean(x^2) + eps), correctly rounded steps */
#define PARITY_RMS_R_EPS_OUTSIDE 1 /* the mutant r = 1/(sqrtf(mean(x^2)) + eps) */
#define PARITY_RMS_R_LOW_2ULP 2    /* faithful: r 2 ulp below the exact mode's, an rsqrt intrinsic
                                      at its documented error bound (CUDA rsqrtf: 2 ulp), always
                                      on the same side: a bias every row shares */

/* The textbook fp32 RMSNorm backward of one row, as a faithful kernel computes it:
 * sequential fp32 sums, r = 1/sqrtf(mean(x^2) + eps), c = mean(g*dy*xhat),
 * dx_j = r*(g_j*dy_j - xhat_j*c). xhat_dy (optional) receives dy_j*xhat_j (dgamma's terms).
 * ignore_gamma models a mutant (0 for the faithful computation); r_mode is a PARITY_RMS_R_*.
 * Returns r (a function of x, d, eps and r_mode alone); with dx NULL, c is not computed. */
float parity_rms_bwd_row_f32(const float *x, const float *dy, const float *g, int64_t d, float eps,
                             float *dx, float *xhat_dy, int ignore_gamma, int r_mode);
/* The same for four rows at once (dx of each, r of each), bit for bit as four calls with
 * xhat_dy NULL: the sums of the four rows run side by side (tests/test_check_fill.c). */
void parity_rms_bwd_rows4_f32(const float *const x[4], const float *const dy[4], const float *g,
                              int64_t d, float eps, float *const dx[4], float r[4],
                              int ignore_gamma, int r_mode);

#endif

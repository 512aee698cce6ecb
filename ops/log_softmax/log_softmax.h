/* Internal: the log-softmax family's shared pieces (ops/log_softmax/log_softmax.c). */
#ifndef PARITY_OPS_LOG_SOFTMAX_H
#define PARITY_OPS_LOG_SOFTMAX_H

#include <stdint.h>

#include "parity/format.h"
#include "parity/kernel_abi.h"
#include "parity/workload.h"

/* The family's workload parameters (log_softmax and cross_entropy share their presets): N rows of
 * V logits (the workload's d is unused). `parity ops log_softmax --workloads` prints them. */
typedef struct {
    parity_ids_t targets;  /* the rows' targets over [0, V) (real text: GPT-2 ids mod V) */
    parity_vals_t logits;  /* base logits, before the peaks and spikes */
    int peaks;             /* columns per row set to U[peak - 5, peak + 5] (trained LMs put a few
                              tokens at 20-30); in every other row the first sits at the target */
    double peak;           /* their level */
    int spike_rows;        /* 1: each row, with probability 1/8, gets one logit at spike + U[0, 10) */
    double spike;          /* that logit's level (110: fp32's exp overflows past 88.7) */
} lsm_params_t;
extern const parity_workload_family_t lsm_family;

/* The family's catalog table (kernels.c). */
extern const parity_abi_kernel_t parity_catalog_log_softmax[];
extern const int parity_catalog_log_softmax_count;

/* fp64 reference of one row; any output pointer may be NULL. */
void parity_ref_log_softmax_row(const double *x, int64_t v, int32_t target, double *logp,
                                double *dlogits, double *loss, double *cond);

/* The same with a variant of the op applied (op.h variant_ref) when fmt is non-NULL: the row's
 * sum of exps (which LSM_VAR_SUM) or its log (LSM_VAR_LOG) rounded to fmt as dir says
 * (parity_variant_round); LSM_VAR_SUM_LOG: the sum so and then its log rounded to fmt (nearest),
 * torch 1.13's CPU log_softmax on bf16 input, which keeps both in the input's dtype (checked bit
 * for bit against it: 0 of 3.2 million elements differ); LSM_VAR_LOGP: those and then every
 * log-probability rounded to fmt (nearest), the loss and dlogits = exp(logprob) - onehot made
 * from them (torch's cross_entropy on bf16 logits: nll of a bf16 log_softmax, its backward
 * exp(output) - onehot rounded once; checked bit for bit against torch 1.13 on parity's `text`
 * inputs: 0 of 25.7 million dlogits differ). */
#define LSM_VAR_SUM 0
#define LSM_VAR_LOG 1
#define LSM_VAR_SUM_LOG 2
#define LSM_VAR_LOGP 3
/* cross_entropy only, without a format: the target's one-hot ignored (dlogits = the softmax). */
#define LSM_VAR_NO_ONEHOT 4
void parity_ref_log_softmax_row_rounded(const double *x, int64_t v, int32_t target, double *logp,
                                        double *dlogits, double *loss, double *cond,
                                        const parity_format_t *fmt, int which, int dir);

#endif

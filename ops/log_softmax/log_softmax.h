/* Internal: the log-softmax family's shared pieces (ops/log_softmax/log_softmax.c). */
#ifndef PARITY_OPS_LOG_SOFTMAX_H
#define PARITY_OPS_LOG_SOFTMAX_H

#include <stdint.h>

#include "parity/format.h"

/* fp64 reference of one row; any output pointer may be NULL. */
void parity_ref_log_softmax_row(const double *x, int64_t v, int32_t target, double *logp,
                                double *dlogits, double *loss, double *cond);

/* The same with a variant of the op applied (op.h variant_ref) when fmt is non-NULL: the row's
 * sum of exps (which LSM_VAR_SUM) or its log (LSM_VAR_LOG) rounded to fmt as dir says
 * (parity_variant_round). */
#define LSM_VAR_SUM 0
#define LSM_VAR_LOG 1
void parity_ref_log_softmax_row_rounded(const double *x, int64_t v, int32_t target, double *logp,
                                        double *dlogits, double *loss, double *cond,
                                        const parity_format_t *fmt, int which, int dir);

#endif

/* Internal: the log-softmax family's shared pieces (ops/log_softmax/log_softmax.c). */
#ifndef PARITY_OPS_LOG_SOFTMAX_H
#define PARITY_OPS_LOG_SOFTMAX_H

#include <stdint.h>

/* fp64 reference of one row; any output pointer may be NULL. */
void parity_ref_log_softmax_row(const double *x, int64_t v, int32_t target, double *logp,
                                double *dlogits, double *loss, double *cond);

#endif

/* Internal: tensor helpers beyond the public tensor.h (src/core/tensor.c). */
#ifndef PARITY_TENSOR_IMPL_H
#define PARITY_TENSOR_IMPL_H

#include <stdint.h>

#include "parity/kernel_abi.h"

/* x[0..n) stored into v's elements [start, start + n), each rounded to v's dtype as
 * parity_tensor_set does (tensor.c). */
void parity_tensor_store_f64(parity_abi_tensor_t *v, int64_t start, const double *x, int64_t n);

#endif

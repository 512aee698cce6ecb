/* Internal: helpers shared by the catalog kernels of all op families (src/kernel/kernel_util.c). */
#ifndef PARITY_KERNEL_UTIL_H
#define PARITY_KERNEL_UTIL_H

#include <stdint.h>

#include "parity/kernel_abi.h"

/* Internal flag of catalog kernels (never read from a plugin: only the catalog's faithful
 * variants run as the noise floor, src/verify/check_floor.c): the kernel writes every element of
 * each output before it reads any, so what the outputs held before the call cannot reach its
 * result, and the floor skips their NaN prefill (tests/test_check_fill.c checks the claim). */
#define PARITY_KERNEL_WRITES_OUTPUTS_FIRST 0x80000000u

/* Read row i of a (rows, D) float tensor (f32 or bf16 or f16) into fp32 (exact). */
void parity_row_to_f32(const parity_abi_tensor_t *t, int64_t i, float *out);
/* The catalog kernels' output store: element i of a bf16 output gets v rounded to nearest-even,
 * of an f32 one v itself. */
void parity_put_f32(parity_abi_tensor_t *o, int64_t i, float v);
/* Pairwise (tree) fp32 sum of v[0..n): halves split at n/2, 0 for n = 0. */
float parity_pairwise_f32(const float *v, int64_t n);

/* Find the index of an input/output argument of an ABI call by name (-1 if absent). */
int parity_call_input(const parity_abi_call_t *call, const char *name);
int parity_call_output(const parity_abi_call_t *call, const char *name);
double parity_call_attr(const parity_abi_call_t *call, const char *name, double dflt);

#endif

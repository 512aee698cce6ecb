/* Other verifiers' rules, each applied as its authors apply it, to compare parity's judgement
 * with theirs on the same kernels (docs/baselines.md cites each rule's source): SOL-ExecBench's
 * 99% rule, KernelBench's allclose, torch.testing.assert_close defaults, FlashAttention's
 * "at most twice the error of the PyTorch implementation in the input dtype", Composable
 * Kernel's check_err with get_relative/absolute_threshold, hipDNN's dynamic tolerance
 * (gamma_2K or 6 sigma sqrt(2K) u, times the sum of |products|) and FlashInfer's
 * atol = C * max|ref|. Each rule comes with its input scheme (a workload and a fixed seed).
 * Deliberately not here: running kernels (check.c runs them, then asks a rule for its verdict). */
#ifndef PARITY_BASELINE_H
#define PARITY_BASELINE_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/baseline.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include "parity/op.h"
#include "parity/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rule indices, in the order of the matrix (PARITY_N_BASELINES of them, verify.h). */
typedef enum {
    PARITY_BASE_SOL_EXECBENCH = 0,
    PARITY_BASE_KERNELBENCH = 1,
    PARITY_BASE_ASSERT_CLOSE = 2,
    PARITY_BASE_FLASH_ATTN = 3,
    PARITY_BASE_CK = 4,
    PARITY_BASE_HIPDNN = 5,
    PARITY_BASE_FLASHINFER = 6
} parity_baseline_id_t;

/* Name ("sol-execbench", ..., "flashinfer") and one-line rule of b; NULL when b is out of range. */
const char *parity_baseline_name(int b);
const char *parity_baseline_rule(int b);
/* Index of the rule called name, or -1. */
int parity_baseline_find(const char *name);

/* The input scheme of rule b for op: *wl points at a workload that stays valid for the life of
 * the process (the op's own baseline_workloads for the first three rules, a derived one for the
 * others), *seed the rule's fixed seed. PARITY_E_INVALID for a bad b, PARITY_E_NOTFOUND when the
 * op declares no baseline workloads. */
parity_status_t parity_baseline_workload(const parity_op_t *op, int b, const parity_workload_t **wl,
                                         uint64_t *seed);

/* Rule b's verdict on outputs outs[0..c->n_outputs) of case c (a case built on rule b's
 * workload and seed, though any case is accepted). The outputs may be any float dtype; the
 * rules that compare with a reference in the output dtype round parity's fp64 reference to
 * outs[0]'s dtype. br is filled: name, rule, ran = 1, caught, pass_fraction (the elements within
 * the rule's bound), margin (max |err| / allowed over the elements; > 1 somewhere when caught by
 * an element-wise rule) and a detail line. PARITY_E_INVALID on bad arguments, PARITY_E_NOMEM. */
parity_status_t parity_baseline_judge(int b, const parity_case_t *c, parity_tensor_t *const *outs,
                                      parity_baseline_result_t *br);

#ifdef __cplusplus
}
#endif
#endif

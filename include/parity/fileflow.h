/* The file-based flow for kernels written in any framework: `parity gen` writes an op's inputs
 * for a workload and seed to safetensors (with the metadata that identifies them), the user's
 * code produces the outputs anywhere (PyTorch, Triton, CUDA), and `parity compare` judges them
 * with the same tolerances, floor and diagnosis as `parity check`.
 * Deliberately not here: reading arbitrary user tensors without parity's metadata (the inputs
 * must come from `parity gen`, so the reference is known to match them). */
#ifndef PARITY_FILEFLOW_H
#define PARITY_FILEFLOW_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/fileflow.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write op's inputs for (workload, seed) in dtype `dt` (the dtype of the floating-point inputs,
 * f32 or bf16) to `path`, atomically. Metadata keys: parity.op, parity.workload, parity.seed,
 * parity.dtype, parity.version, parity.attr.<name>, parity.output.<name>.shape ("V,D").
 * op and wl are borrowed for the call only. */
parity_status_t parity_gen_inputs(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, const char *path,
                                  parity_diag_t *diag);

/* Write case c's fp64 reference to `path` (safetensors, atomically), with the same metadata as its
 * inputs file: per output NAME a dense F64 tensor NAME of the output's shape (rows without terms
 * are 0), NAME.sum_abs, the error model's s_acc (the sum of |terms| accumulated into each
 * element), and NAME.sum_up, its s_up (the terms' own absolute condition; 0 where terms are exact
 * inputs). For cross-checking the reference against another implementation (tests/
 * oracle_references.py) and for users' own metrics. PARITY_E_NOMEM, PARITY_E_IO. */
parity_status_t parity_case_save_reference(const parity_case_t *c, const char *path,
                                           parity_diag_t *diag);

/* Rebuild the case (inputs and fp64 reference) described by an inputs file from parity_gen_inputs
 * and verify that every input tensor in the file is byte-identical to the regenerated one, so the
 * reference matches what the user's code read. expect_op may be NULL. On PARITY_OK *out is a new
 * case owned by the caller: free it with parity_case_free (it points to the built-in op, which
 * lives as long as the library); on error *out is untouched. Errors name the file and
 * the field: PARITY_E_IO, PARITY_E_FORMAT (missing metadata/tensor, wrong dtype or shape, bytes
 * that differ), PARITY_E_NOTFOUND (unknown op/workload in the metadata), PARITY_E_INVALID (the
 * file is for another op than expect_op). */
parity_status_t parity_case_load(const char *inputs_path, const parity_op_t *expect_op,
                                 parity_case_t **out, parity_diag_t *diag);

/* Read outputs for case c from a safetensors file: one tensor per op output name, with the
 * output's shape, dtype F32, BF16, F16 or F64 (all outputs the same dtype). outs (caller storage
 * of c->n_outputs entries) gets new tensors owned by the caller, each freed with
 * parity_tensor_free, independent of c and of the file; *dt gets the dtype. */
parity_status_t parity_outputs_load(const parity_case_t *c, const char *path, parity_tensor_t **outs,
                                    parity_dtype_t *dt, parity_diag_t *diag);
/* Write outputs (as a kernel produced them) to a safetensors file, atomically. Borrows c and
 * outs for the call only. */
parity_status_t parity_outputs_save(const parity_case_t *c, parity_tensor_t *const *outs,
                                    const char *path, parity_diag_t *diag);

/* Run kernel kr on case c in a child process (timeout in seconds), with n_threads 1. outs (caller
 * storage of c->n_outputs entries) gets new tensors, owned by the caller and freed with
 * parity_tensor_free, whatever the verdict (on PARITY_E_NOMEM the ones made so far, the rest
 * NULL). *verdict is PARITY_VERDICT_NOT_JUDGED when the kernel ran and returned OK -- its outputs
 * are not judged: pass them to parity_compare_run -- or the failure verdict (crashed, timeout,
 * unsupported, ...) with detail[0..detail_len) saying why. */
parity_status_t parity_run_kernel(parity_case_t *c, const parity_kernel_ref_t *kr, double timeout_s,
                                  parity_tensor_t **outs, parity_verdict_t *verdict, char *detail,
                                  size_t detail_len);

/* Judge outputs of case c as `parity check` judges a kernel's. res is caller storage (a stack
 * struct is fine), overwritten: it gets one workload result in res->wl, a malloc'd array of one
 * entry that the caller releases with free(res->wl) -- never parity_check_results_free(res, 1),
 * which would also free res itself. res->kr = kr is borrowed: keep kr (and its kernel list)
 * alive while res is read. res->wl[0].verdict is PARITY_VERDICT_NOT_JUDGED until the judgement
 * ran, so a result of a call that failed never reads as faithful. kr names the candidate in the
 * report (its k->out_dtype must be the outputs' dtype). c, outs and opts are borrowed for the
 * call only. */
parity_status_t parity_compare_run(parity_case_t *c, parity_tensor_t *const *outs,
                                   const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                   parity_kernel_result_t *res);

#ifdef __cplusplus
}
#endif
#endif

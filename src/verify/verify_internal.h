/* The verify module's interface to the modules above it: bench (the isolated timed run, the
 * judgement of its outputs), power (the judge), custom (the judge for declared ops) and the
 * Python bridge (judging outputs produced outside parity). Those include this header, never
 * verify's private ones (src/verify/verify_impl.h, check_impl.h: tests/cli_layers.sh checks).
 * The shared internals below every module (clock, child wait, digests) are src/core/internal.h's.
 * Not a public header: libparity.so does not export these names. */
#ifndef PARITY_VERIFY_INTERNAL_H
#define PARITY_VERIFY_INTERNAL_H

#include <stddef.h>

#include "parity/verify.h"

/* ---- isolated runs (isolate.c) -------------------------------------------------------------- */

/* Run k on call in a child process with a time limit. When decoy is non-NULL the child first
 * runs k on it (results ignored), so state a kernel keeps across calls is exposed. Returns
 * PARITY_VERDICT_FAITHFUL when the kernel ran and returned OK (judged later), else the verdict
 * with detail filled. */
parity_verdict_t parity_run_isolated(const parity_abi_kernel_t *k, const parity_abi_call_t *decoy,
                                     const parity_abi_call_t *call, double timeout_s, char *detail,
                                     size_t detail_len, double *seconds);
/* A step the child runs after the decoy and before the judged call (check_anticache.c: a call
 * on the judged buffers with other contents, the calls at smaller shape neighbours; bench.c: the
 * timed runs, the child's whole work). Returns 0 to go on to the judged call,
 * PARITY_CHILD_STEP_DONE to end the child there ("ran"), else the child's exit status: 64 the
 * kernel declined, 65 it returned an error, PARITY_CHILD_STEP_MODIFIED + i it changed input i
 * during the step. */
#define PARITY_CHILD_STEP_DONE 1
#define PARITY_CHILD_STEP_MODIFIED 66
typedef int (*parity_child_step_fn)(void *ctx, const parity_abi_kernel_t *k,
                                    const parity_abi_call_t *call);
parity_verdict_t parity_run_isolated_step(const parity_abi_kernel_t *k, const parity_abi_call_t *decoy,
                                          parity_child_step_fn step, void *step_ctx,
                                          const parity_abi_call_t *call, double timeout_s,
                                          char *detail, size_t detail_len, double *seconds);

/* ---- the judge (verify.c, check.c) ----------------------------------------------------------- */

/* Judge one output of a run (verify.c): fills res's max_q, max_qd, rows, nan count, worst, and
 * per-row errors for the hit correlation (row_err may be NULL). */
void parity_judge_output(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                         parity_dtype_t acc_dtype, int out_index, parity_wl_result_t *res,
                         double *row_err);
/* Judge every output of case c (verify.c): verdict unfaithful when an element exceeds its
 * tolerance (res is accumulated into; the caller sets its verdict to faithful first). */
void parity_judge_case(const parity_case_t *c, parity_tensor_t *const *o, parity_wl_result_t *res);

/* Fill output t with reference R rounded to t's dtype (the rerun's prefill: an element a
 * kernel leaves unwritten then differs from the NaN-prefilled first run). */
void parity_fill_reference(parity_tensor_t *t, const parity_ref_output_t *R);

/* ---- outputs produced outside parity (check.c), a kernel's verdict (check_verdict.c) --------- */

/* Judge outputs produced outside parity for case c (borrowed): floor, judgement, diagnosis. */
parity_status_t parity_compare_case(parity_case_t *c, parity_tensor_t *const *outs,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_wl_result_t *res);
/* The same, diagnosing every small workload (diagnose_all 1, parity compare) or only an
 * unfaithful one (0, as parity check). */
parity_status_t parity_compare_case_diag(parity_case_t *c, parity_tensor_t *const *outs,
                                         const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                         int diagnose_all, parity_wl_result_t *res);

/* The overall verdict, worst workload and diagnosed workload of kr from its kr->n_wl workload
 * results, as `parity check` reports them (the Python package's checks use it too). */
void parity_kernel_result_finish(parity_kernel_result_t *kr);

#endif

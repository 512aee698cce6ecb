/* Internal pieces of verify shared by check.c and compare (file-based flow). */
#ifndef PARITY_VERIFY_IMPL_H
#define PARITY_VERIFY_IMPL_H

#include <sys/types.h>

#include <stddef.h>

#include "parity/verify.h"

double parity_now(void);

/* The parent's side of a forked child: a descriptor that becomes readable when the child ends
 * (pidfd_open, Linux 5.3), or -1 where there is none (then parity_child_wait sleeps and polls). */
int parity_child_fd(pid_t pid);
/* Waits up to max_s seconds for child pid to end. 1: it ended (*status as waitpid sets it); 0: it
 * is still running; -1: waitpid failed. With fd >= 0 it returns as soon as the child ends; without,
 * it sleeps in steps that grow from *sleep_us (start it at 200) to 20 ms. */
int parity_child_wait(pid_t pid, int fd, int *status, double max_s, long *sleep_us);
/* Run k on call in a child process with a time limit. When decoy is non-NULL the child first
 * runs k on it (results ignored), so state a kernel keeps across calls is exposed. Returns
 * PARITY_VERDICT_FAITHFUL when the kernel ran and returned OK (judged later), else the verdict
 * with detail filled. */
parity_verdict_t parity_run_isolated(const parity_abi_kernel_t *k, const parity_abi_call_t *decoy,
                                     const parity_abi_call_t *call, double timeout_s, char *detail,
                                     size_t detail_len, double *seconds);
/* Fill this process's page tables for c's inputs (read) and outputs (write) in one system call
 * each (advisory), as a child does before its kernel runs. */
void parity_populate_call(const parity_abi_call_t *c);
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
void parity_tolerance(const parity_ref_output_t *R, int64_t slot, int64_t j, double u_acc,
                      double tiny_acc, double u_out, double tiny_out, double lambda, double *tol_p,
                      double *tol_d);
void parity_judge_output(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                         parity_dtype_t acc_dtype, int out_index, parity_wl_result_t *res,
                         double *row_err);
double parity_hit_correlation(const parity_ref_output_t *R, const double *row_err);
/* The probabilistic tolerance of every element with terms (n_slots x cols, slot-major; free()),
 * exactly as parity_judge_output forms it for an output of dtype out_dt; NULL: no memory. */
double *parity_judge_tolerances(const parity_ref_output_t *R, parity_dtype_t out_dt,
                                parity_dtype_t acc_dt);
/* The max_q parity_judge_output would give out (of the dtype tp was made for), from those
 * tolerances: for judging several outputs of one case where only max_q counts (the floor's
 * variants, check_floor.c). NaN: no memory. */
double parity_judge_max_q(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                          const double *tp);
/* Per row r of out (dense rows): row_q[r], the largest q of its elements, exactly as
 * parity_judge_max_q forms it from tp; *within (may be NULL) += the elements with q <= 1. One
 * thread (the diagnosis's few rows). */
void parity_judge_row_q(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                        const double *tp, double *row_q, int64_t *within);

/* Judge outputs produced outside parity for case c (borrowed): floor, judgement, diagnosis. */
parity_status_t parity_compare_case(parity_case_t *c, parity_tensor_t *const *outs,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_wl_result_t *res);
/* The same, diagnosing every small workload (diagnose_all 1, parity compare) or only an
 * unfaithful one (0, as parity check). */
parity_status_t parity_compare_case_diag(parity_case_t *c, parity_tensor_t *const *outs,
                                         const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                         int diagnose_all, parity_wl_result_t *res);

/* Judge every output of case c (verify.c): verdict unfaithful when an element exceeds its
 * tolerance (res is accumulated into; the caller sets its verdict to faithful first). */
void parity_judge_case(const parity_case_t *c, parity_tensor_t *const *o, parity_wl_result_t *res);

/* Fill output t with reference R rounded to t's dtype (the rerun's prefill: an element a
 * kernel leaves unwritten then differs from the NaN-prefilled first run). */
void parity_fill_reference(parity_tensor_t *t, const parity_ref_output_t *R);

/* The overall verdict, worst workload and diagnosed workload of kr from its kr->n_wl workload
 * results, as `parity check` reports them (the Python package's checks use it too). */
void parity_kernel_result_finish(parity_kernel_result_t *kr);

/* The diagnosis's conclusions from d->cand_err and d->emu_err[] (filled by the caller): the
 * closest emulation, the effective accumulator bits, beyond / masked, available = 1. One
 * definition for every op (check.c's diagnose(); declared ops reach it through their
 * descriptor's emulate, src/custom/custom_engine.c). */
void parity_diagnosis_classify(parity_diagnosis_t *d);

#endif

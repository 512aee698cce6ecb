/* Internal interface between the units of a check (check.c: what one kernel on one workload, one
 * floor or one baseline costs) and the grid that schedules them (check_grid.c: jobs, ranks, the
 * floor cache). A unit's result depends on its inputs only, never on which worker ran it or what
 * ran before on that worker: that is what makes reports byte-identical for any --jobs and any
 * number of MPI ranks. */
#ifndef PARITY_CHECK_IMPL_H
#define PARITY_CHECK_IMPL_H

#include "parity/verify.h"

/* The faithful catalog variants whose spread is the noise floor (fp32 outputs). */
#define CHECK_N_FLOOR_KERNELS 3

typedef struct check_worker check_worker_t;
check_worker_t *check_worker_new(void);
void check_worker_free(check_worker_t *w);

/* The floor kernels of op (at most CHECK_N_FLOOR_KERNELS into fk); returns how many. */
int check_floor_kernels(const parity_op_t *op, const parity_abi_kernel_t **fk);

/* The largest err/tol of fk[0..nf) on wl (-1 when none was judged); *complete = 0 when one of
 * them did not run to a judgement (timeout, crash): such a floor is shown but never cached. */
parity_status_t check_unit_floor(check_worker_t *w, const parity_op_t *op,
                                 const parity_workload_t *wl, const parity_check_opts_t *opts,
                                 const parity_abi_kernel_t *const *fk, int nf, double *floor_q,
                                 int *complete, parity_diag_t *diag);

/* Floor variants fk[0..nf) (same input dtype) on case c into the pooled outputs o, one after
 * another in one child process (check_floor.c). Returns how many were used: judged ones have
 * judged[i] = 1 and q[i]; the last used one failed when it is not judged (then the rest were not
 * run, and *modified says whether it changed an input). */
int check_floor_child(const parity_case_t *c, parity_tensor_t *const *o,
                      const parity_abi_kernel_t *const *fk, int nf, const parity_check_opts_t *opts,
                      double *q, int *judged, int *modified);

/* Kernel kr on workload wl: r is filled (floor_q left at -1: the grid sets it). Diagnosis runs on
 * an unfaithful workload, or on every small one with diagnose_all. */
parity_status_t check_unit_kernel(check_worker_t *w, const parity_op_t *op,
                                  const parity_workload_t *wl, const parity_check_opts_t *opts,
                                  const parity_kernel_ref_t *kr, int diagnose_all,
                                  parity_wl_result_t *r, parity_diag_t *diag);

/* Baseline verifier b's rule on kr. */
parity_status_t check_unit_baseline(check_worker_t *w, const parity_op_t *op, int b,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_baseline_result_t *br, parity_diag_t *diag);
/* Re-point br's name and rule at this process's static strings (after results crossed a process
 * boundary, where the pointers meant another address space). */
void check_baseline_names(int b, parity_baseline_result_t *br);

#endif

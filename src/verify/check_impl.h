/* Internal interface between the units of a check (check.c: what one kernel on one workload, one
 * floor or one baseline costs) and the grid that schedules them (check_grid.c: jobs, ranks, the
 * floor cache). A unit's result depends on its inputs only, never on which worker ran it or what
 * ran before on that worker: that is what makes reports byte-identical for any --jobs and any
 * number of MPI ranks. Private to the verify module (its .c files under src/verify/, and
 * white-box tests); the modules above verify include src/verify/verify_internal.h. */
#ifndef PARITY_CHECK_IMPL_H
#define PARITY_CHECK_IMPL_H

#include "parity/verify.h"
#include "src/core/internal.h"
#include "src/verify/verify_internal.h"

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
 * run, and *modified says whether it changed an input). in_hash: the hashes of c's inputs as they
 * are now (each variant's inputs are held to them). */
int check_floor_child(const parity_case_t *c, parity_tensor_t *const *o, const uint64_t *in_hash,
                      const parity_abi_kernel_t *const *fk, int nf, const parity_check_opts_t *opts,
                      double *q, int *judged, int *modified);

/* Kernel kr on workload wl: r is filled (floor_q left at -1: the grid sets it). Diagnosis runs on
 * an unfaithful workload, or on every small one with diagnose_all. */
parity_status_t check_unit_kernel(check_worker_t *w, const parity_op_t *op,
                                  const parity_workload_t *wl, const parity_check_opts_t *opts,
                                  const parity_kernel_ref_t *kr, int diagnose_all,
                                  parity_wl_result_t *r, parity_diag_t *diag);

/* ---- caching probes (check_anticache.c) ---- */

/* The child step of a judged run with the decoy (parity_run_isolated_step): one call on the
 * judged call's own buffers holding other contents, then the judged contents restored bit for
 * bit (in place: the change is undone, so an element the kernel changed stays changed and the
 * caller's input hashes show it); the outputs keep what it wrote. ctx is the case
 * (const parity_case_t *). Returns 0. */
int check_same_buffers_step(void *ctx, const parity_abi_kernel_t *k, const parity_abi_call_t *call);

/* The rerun (outputs o2, after the decoy and the call on the judged buffers) of a kernel whose
 * first run, alone, was judged faithful into res, differs from it (or the kernel is declared
 * nondeterministic): judged, are o2 wrong? Then the decoy alone (its outputs buffers of its own;
 * NULL: none could be had, the probe is not named) is tried to name the probe, res
 * takes the stale run's judgement with verdict "stale-cache", and the return is 1 (2 when an
 * input changed meanwhile: the caller rebuilds the case). 0: o2 are within tolerance. */
int check_stale_outputs(const parity_case_t *c, const parity_abi_kernel_t *k, parity_tensor_t **o2,
                        const parity_abi_call_t *call2, const parity_abi_call_t *decoy,
                        const parity_check_opts_t *opts, parity_wl_result_t *res);

/* The shape-neighbour cases a worker keeps for its current workload. */
typedef struct check_nbr check_nbr_t;
check_nbr_t *check_nbr_new(void);
void check_nbr_free(check_nbr_t *nb);
/* kr at N0 - 1, N0, N0 + 1 tokens (small shapes derived from wl) in one child, each judged; on a
 * failure r's verdict and detail say so ("stale-cache" when the failing call is faithful alone).
 * r is left alone when the sequence passes or the kernel declines those shapes. PARITY_E_NOMEM
 * when the outputs cannot be allocated. */
parity_status_t check_neighbours(check_nbr_t *nb, const parity_op_t *op, const parity_workload_t *wl,
                                 const parity_check_opts_t *opts, const parity_kernel_ref_t *kr,
                                 parity_wl_result_t *r);

/* One plain judged run of kr on (wl, seed) -- isolated, guarded, inputs verified, no probes (the
 * baseline rules' run): r is filled; when it ran to outputs (faithful or unfaithful) outs[i] are
 * the worker's buffers holding them and *c the case, both valid until the worker's next unit. */
parity_status_t check_unit_plain(check_worker_t *w, const parity_op_t *op, const parity_workload_t *wl,
                                 uint64_t seed, const parity_check_opts_t *opts,
                                 const parity_kernel_ref_t *kr, parity_wl_result_t *r,
                                 parity_tensor_t **outs, const parity_case_t **c, parity_diag_t *diag);

/* Baseline verifier b's rule on kr. */
parity_status_t check_unit_baseline(check_worker_t *w, const parity_op_t *op, int b,
                                    const parity_kernel_ref_t *kr, const parity_check_opts_t *opts,
                                    parity_baseline_result_t *br, parity_diag_t *diag);
/* Re-point br's name and rule at this process's static strings (after results crossed a process
 * boundary, where the pointers meant another address space). */
void check_baseline_names(int b, parity_baseline_result_t *br);

/* The diagnosis's cause fits on output o of case c over the n diagnosis rows, vals[n * cols] the
 * kernel's values there in its output dtype odt (check_cause.c; docs/error-model.md "Cause"):
 * the op's parameter refit (PARITY_CAUSE_PARAMETER; ops without param_ref: nothing), and a
 * dropped tail or leading block of each sum's terms (PARITY_CAUSE_DROPPED_TERMS; ops without
 * terms_ref: nothing). Each leaves d as it is unless its fit reproduces the kernel. */
void check_cause_parameter(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);
void check_cause_dropped(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                         const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);

/* The variants the op declares (op.h variants, variant_ref; check_variant.c): the op's reference
 * recomputed with an intermediate rounded to bf16 or fp16, an input ignored or subnormal inputs
 * flushed; the best-fitting one is named (INTERMEDIATE_ROUNDING, IGNORED_INPUT, FLUSH_TO_ZERO,
 * with d->match) when it reproduces the kernel on every sampled element within the faithful
 * tolerance while the op's reference does not. Leaves d as it is otherwise. */
void check_cause_variants(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                          const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);
/* A fit of the diagnosis over sampled rows (check_cause_variants, check_cause_lost). */
typedef void (*check_fit_fn)(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                             const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);
/* fit, with the worst element's row worst_row of output tensor out added to the rows where none
 * of them is outside the faithful tolerance (a tie decided on a few rows, a lost update). */
void check_cause_at(check_fit_fn fit, const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                    const double *vals, parity_dtype_t odt, const parity_abi_tensor_t *out,
                    int64_t worst_row, parity_diagnosis_t *d);
/* The diagnosis of an output without an accumulator emulation (a declared op without a
 * multilinear reduction; check_cause.c): the fits that recompute the op's reference only --
 * parameter, dropped terms, variants, the first that names a cause -- and d->available only when
 * one does (no accumulator figures: d->emu_err NaN). */
void check_cause_refits(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                        const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);
/* view: a 2-D f64 tensor view of vals (n x cols, row-major), as the judge reads outputs. */
void check_view_f64(parity_abi_tensor_t *view, const double *vals, int64_t n, int64_t cols);
/* A reference for given rows (each array n * cols; NULL: the output's own for those rows) and the
 * terms k of every element (0: the output's own); elem_q (n * cols, or NULL) receives each
 * element's err/tol (then check_fit_q_ex's row_q is not used). */
typedef struct {
    const double *ref, *s_acc, *s_up, *s_sym;
    int64_t k;
    double *elem_q;
} check_rows_ref_t;
/* diagnosis.match (verify.h): of the sampled elements outside the faithful tolerance of the
 * output's reference (err/tol > 1), the fraction within the tolerance of the cause's reference or
 * emulation f (err/tol <= 1 against it). NaN: none outside, or no memory. */
double check_match(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                   parity_dtype_t odt, const check_rows_ref_t *f);
/* check_fit_q with s_sym and k too. */
double check_fit_q_ex(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                      parity_dtype_t odt, const check_rows_ref_t *f, double *row_q, int64_t *within);
/* The max err/tol of the kernel's values vals (n * cols) on the sampled rows rows[0..n) of R,
 * against ref with s_acc and s_up (each n * cols; NULL: R's own for those rows), the tolerance
 * formed as the judge forms it for output dtype odt; row_q (n, may be NULL) gets each row's and
 * *within (may be NULL) += the elements with err/tol <= 1. NaN: no memory. */
double check_fit_q(const parity_ref_output_t *R, const int64_t *rows, int64_t n, const double *vals,
                   parity_dtype_t odt, const double *ref, const double *s_acc, const double *s_up,
                   double *row_q, int64_t *within);

#endif

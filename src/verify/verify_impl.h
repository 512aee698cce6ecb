/* Private to the verify module (its .c files under src/verify/; white-box tests may include it
 * too): the judge's pieces that the check's units, the cause fits, the floor and the file flow
 * share. The modules above verify (bench, power, custom, the Python bridge) include
 * src/verify/verify_internal.h instead, which this header includes; the shared internals (clock,
 * child wait, digests) are src/core/internal.h's, included here for verify's own files. */
#ifndef PARITY_VERIFY_IMPL_H
#define PARITY_VERIFY_IMPL_H

#include <stddef.h>

#include "parity/verify.h"
#include "src/core/internal.h"
#include "src/verify/verify_internal.h"

/* Fill this process's page tables for c's inputs (read) and outputs (write) in one system call
 * each (advisory), as a child does before its kernel runs. */
void parity_populate_call(const parity_abi_call_t *c);
void parity_tolerance(const parity_ref_output_t *R, int64_t slot, int64_t j, double u_acc,
                      double tiny_acc, double u_out, double tiny_out, double lambda, double *tol_p,
                      double *tol_d);
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

/* The diagnosis's conclusions from d->cand_err and d->emu_err[] (filled by the caller): the
 * closest emulation, the effective accumulator bits, beyond / masked, available = 1. One
 * definition for every op (check.c's diagnose(); declared ops reach it through their
 * descriptor's emulate, src/custom/custom_engine.c). */
void parity_diagnosis_classify(parity_diagnosis_t *d);

#endif

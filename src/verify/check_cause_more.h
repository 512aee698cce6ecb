/* The diagnosis's fits of check_cause_more.c (docs/error-model.md "Cause"). */
#ifndef PARITY_CHECK_CAUSE_MORE_H
#define PARITY_CHECK_CAUSE_MORE_H

#include "src/verify/check_impl.h"

/* An emulation that fits the error's size "reproduces the elements" where its diagnosis.match
 * (the share of the departing elements it holds within the faithful tolerance) is at least a
 * half: half the elements or more, where a chance fit of the error's size reproduces few (the MoE
 * router's bf16_softmax read as an accumulator: 0.004-0.013; docs/error-model.md "Cause"). Below
 * it the later fits may override an accumulator word (check.c diagnose), and the fp16-range fit
 * names nothing. */
#define CHECK_MATCH_MAJORITY 0.5

/* Lost terms element by element (op.h terms_ref): names DROPPED_TERMS when at least 90% of the
 * sampled elements outside the tolerance are reproduced with one of their terms left out, or
 * with all of them where the kernel holds 0. */
void check_cause_lost(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                      const double *vals, parity_dtype_t odt, parity_diagnosis_t *d);
/* An fp16 accumulator whose error fp16's range makes (the 11-bit emulation emu11, with fp32's
 * range, does not give it): names ACCUMULATOR and returns 1. */
int check_cause_fp16_range(const parity_case_t *c, int o, const int64_t *rows, int64_t n,
                           const double *vals, parity_dtype_t odt, const double *emu11,
                           parity_diagnosis_t *d);
/* The diagnosis's error measure: RMS of (vals rounded to out_dt - reference) / sum|terms| over
 * the rows' elements whose sum|terms| is > 0 (check.c diagnose). */
double check_diag_error(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                        const double *vals, parity_dtype_t out_dt);

/* Outputs that hold NaN or Inf where the reference is finite: names UNKNOWN with the count
 * (said plainly; no emulation compares with them). */
void check_cause_nonfinite(const parity_ref_output_t *R, const int64_t *rows, int64_t n,
                           const double *vals, parity_diagnosis_t *d);

#endif

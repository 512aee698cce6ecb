/* Internal pieces of `parity bench` shared by bench.c (timing) and bench_judge.c (judging what is
 * timed). */
#ifndef PARITY_BENCH_IMPL_H
#define PARITY_BENCH_IMPL_H

#include "parity/bench.h"

/* Read the ceilings cache file at path into c (bench_ceil.c): 0, or -1 for anything that is not
 * a complete file of parity-ceilings 1 with positive bandwidths and compute peaks (a miss: the
 * ceilings are measured again). Public to this module for its fuzz target (fuzz_caches). */
int bench_ceilings_cache_read(const char *path, parity_ceilings_t *c);

/* Flip the sign bit of every element of the call's first floating-point input (bench_judge.c). */
void bench_flip_first_float(const parity_abi_call_t *call);

/* What every timed call of a kernel must return: its outputs from two judged runs, each the first
 * call of a fresh process, on the case's inputs (judged against the fp64 reference) and on the
 * sign-flipped inputs the timing alternates with. */
typedef struct {
    const parity_case_t *c;
    parity_tensor_t *const *outs; /* the timed call's outputs (shared memory) */
    int nondet;                   /* PARITY_KERNEL_NONDETERMINISTIC: judge, do not compare bits */
    void *exp[2][PARITY_OP_MAX_ARGS]; /* [0] sign-flipped inputs, [1] the case's inputs */
} bench_expect_t;

/* The first timed call whose outputs were not what the judged runs gave (filled in the child). */
typedef struct {
    int32_t run;       /* 0-based over warm-up and timed calls; -1: none differed */
    int32_t output;    /* which output */
    int32_t judged;    /* 1: q and nan_count are the judgement of that call (case inputs) */
    double q;          /* its err/tol */
    int64_t nan_count;
} bench_mismatch_t;

/* Run k twice on call (outputs outs of case c), each alone in a child, and keep the outputs.
 * Returns PARITY_VERDICT_FAITHFUL, or the verdict of the judged run (unfaithful, crashed, ...)
 * with detail; e is then empty. */
parity_verdict_t bench_expect_build(const parity_case_t *c, const parity_abi_kernel_t *k,
                                    parity_tensor_t *const *outs, const parity_abi_call_t *call,
                                    double timeout_s, bench_expect_t *e, char *detail, size_t len);
void bench_expect_free(bench_expect_t *e);
/* In the timing child, after call r (run r sees the flipped inputs when r is even): 0 when its
 * outputs are the expected ones, else 1 with m filled. */
int bench_expect_check(const bench_expect_t *e, int r, bench_mismatch_t *m);

/* parity_bench_time_kernel with every call's outputs NaN-prefilled and checked against e
 * (NULL: not checked): m[0] the first call that differed, m[1] the first of those on the case's
 * inputs (judged); run = -1 when none. */
parity_verdict_t bench_time_kernel_judged(const parity_abi_kernel_t *k, const parity_abi_call_t *call,
                                          const parity_time_opts_t *o, const bench_expect_t *e,
                                          double *times, bench_mismatch_t m[2], char *detail,
                                          size_t detail_len);

/* The row's judgement of its timed calls from e's mismatches m (bench_judge.c): sets
 * timed_outputs, and on a mismatch the verdict and check_detail. */
void bench_row_judge(parity_bench_row_t *row, const parity_case_t *c, const bench_mismatch_t m[2],
                     int warmup);

#endif

/* Running candidate kernels against an op's references over workloads, and judging them.
 * Each run happens in a child process (crash, hang, error -> a verdict, never a dead harness),
 * with guard regions around outputs and inputs, input checksums, a NaN-sentinel run and a
 * reference-prefilled rerun (unwritten outputs and nondeterminism show), per-row judgement
 * against error-model tolerances (docs/error-model.md), diagnosis by emulation, and the rules
 * of other verifiers for comparison (docs/baselines.md). */
#ifndef PARITY_VERIFY_H
#define PARITY_VERIFY_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/verify.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

/* parity_verdict_t, PARITY_VERDICT_NOT_JUDGED and parity_verdict_name: parity/verdict.h
 * (shared with the stable header parity/parity.h). */

typedef struct {
    char output[32];
    int64_t row, row_key, col, k;
    double got, ref, err, tol;
    double q; /* err / tol */
} parity_worst_t;

/* Diagnosis: which emulated accumulator the candidate's error resembles. */
#define PARITY_N_EMU 6
typedef struct {
    int available;
    char output[32];
    double cand_err;                /* RMS of err / sum|terms| over the diagnosis rows */
    double emu_err[PARITY_N_EMU];   /* the same for each emulation */
    int closest;                    /* index into parity_emu_names */
    double eff_bits;                /* effective accumulator precision (bits), interpolated */
    int beyond;                     /* 1: error larger than 8-bit accumulation explains */
    int masked;                     /* 1: after rounding to the output dtype, 8- and 24-bit
                                     * accumulation differ by < 2x on these rows: unresolvable */
    int zero_written;               /* 1: the worst element's terms are all zero (s_acc = 0,
                                     * so 0 in the reference: an unselected expert, a token row
                                     * no id hits, zero inputs) and it holds a nonzero value: a
                                     * structural error (a wrong index or selection, an output
                                     * written that should stay 0), which no accumulator
                                     * explains whatever the sampled rows show */
    int64_t worst_terms;            /* terms of the workload's worst element (set before
                                     * parity_diagnosis_classify; 0: not known) */
    /* The cause (issue #36, first slice; docs/error-model.md "Cause"): ACCUMULATOR when an
     * emulated accumulator explains the error, UNKNOWN when none does (a bit count outside
     * [0, 53], the error beyond 8-bit accumulation or no larger than a faithful fp32
     * accumulator's, output rounding that hides the accumulator, emulations that disagree,
     * one-term elements no emulation fits closely, a structural error). eff_bits is NaN when the
     * accumulator model gives no bit count. detail: the sentence, with the measured figures. */
    int cause;                      /* parity_cause_t */
    char detail[320];
    /* PARAMETER (an op with a declared parameter, op.h param_name): the op's parameter refit on
     * the sampled rows reproduces the kernel within the faithful tolerance there (max err/tol
     * <= 1 against the reference recomputed with param_fitted) while the op's value does not
     * (param_q_op > 1). Set only with that cause. */
    char param_name[16];
    double param_fitted, param_op, param_q_fitted, param_q_op;
    /* DROPPED_TERMS (an op with terms_ref, op.h): the reference with terms [drop_from, drop_to)
     * of drop_of left out reproduces the kernel on the sampled rows within the faithful
     * tolerance (max err/tol drop_q <= 1) while the full reference does not (drop_q_full > 1).
     * Set only with that cause. */
    int64_t drop_from, drop_to, drop_of;
    double drop_q, drop_q_full;
    /* INTERMEDIATE_ROUNDING, IGNORED_INPUT, FLUSH_TO_ZERO (an op with variants, op.h): the
     * reference recomputed with the op's variant var_what (rounded to var_format for an
     * intermediate) reproduces the kernel on the sampled rows within the faithful tolerance (max
     * err/tol var_q <= 1) while the op's reference does not (var_q_full > 1). Set only with
     * those causes. */
    char var_what[64], var_format[8];
    double var_q, var_q_full;
    /* Of the sampled rows' elements outside the faithful tolerance of the op's reference (err/tol
     * > 1), the fraction the named cause's emulation or reference reproduces within it (err/tol
     * <= 1 against that), has_match 1; 0 where no cause was named or it has no elementwise
     * emulation (unknown). */
    int has_match;
    double match;
} parity_diagnosis_t;
typedef enum { PARITY_CAUSE_NONE = 0, PARITY_CAUSE_ACCUMULATOR, PARITY_CAUSE_UNKNOWN,
               PARITY_CAUSE_PARAMETER, PARITY_CAUSE_DROPPED_TERMS,
               PARITY_CAUSE_INTERMEDIATE_ROUNDING, PARITY_CAUSE_IGNORED_INPUT,
               PARITY_CAUSE_FLUSH_TO_ZERO, PARITY_CAUSE_DUPLICATED_TERMS, PARITY_CAUSE_TIE,
               PARITY_CAUSE_STRUCTURAL } parity_cause_t;
#define PARITY_N_CAUSES 11
extern const char *const parity_cause_names[PARITY_N_CAUSES]; /* "", "accumulator", "unknown",
    "parameter", "dropped-terms", "intermediate-rounding", "ignored-input", "flush-to-zero",
    "duplicated-terms", "tie", "structural" */
extern const char *const parity_emu_names[PARITY_N_EMU];
extern const int parity_emu_bits[PARITY_N_EMU];

typedef struct {
    char workload[48];
    int production;
    parity_verdict_t verdict;
    char detail[256];
    double max_q;      /* max err / probabilistic tolerance over every output element */
    double max_qd;     /* max err / deterministic (worst-case) bound */
    double floor_q;    /* max_q of the faithful catalog variants on this workload (noise floor);
                          < 0 if not measured */
    double lambda;     /* the probabilistic bound's lambda used */
    int64_t rows_judged, rows_failed, nan_count;
    int64_t max_hits;
    double hit_corr;   /* Pearson r of log(hits) vs log(row error), NaN if undefined */
    parity_worst_t worst;
    /* The failing rows with the largest err/tol, worst first (each with its worst element). */
#define PARITY_N_WORST_ROWS 5
    parity_worst_t worst_rows[PARITY_N_WORST_ROWS];
    int n_worst_rows;
    parity_diagnosis_t diag;
    double seconds;    /* kernel wall time of the first run */
    int64_t sym_elements; /* elements judged under the symmetric reduction class's tolerance
                             (sharper than the general one there; op.h s_sym) */
    int64_t perterm_elements; /* elements whose per-term error term was the split one
                                 (op.h s_up2; sharper than gamma~_{m_up} s_up there) */
} parity_wl_result_t;

/* The baseline rules (include/parity/baseline.h, docs/baselines.md). */
#define PARITY_N_BASELINES 7
typedef struct parity_baseline_result {
    const char *name; /* "sol-execbench", "kernelbench", "assert_close", "flash-attn", "ck",
                         "hipdnn", "flashinfer" */
    const char *rule;
    int ran;
    int caught;       /* the baseline rejected the kernel */
    double pass_fraction;
    char detail[160];
    double margin;    /* max |err| / allowed over the elements (0 when the kernel did not run) */
} parity_baseline_result_t;

typedef struct {
    const parity_kernel_ref_t *kr;
    parity_verdict_t verdict;
    int n_wl;
    parity_wl_result_t *wl;
    int worst_wl;   /* index of the workload that decided the verdict / had the largest q */
    int diag_wl;    /* workload whose diagnosis is reported (-1: none) */
    parity_baseline_result_t base[PARITY_N_BASELINES];
} parity_kernel_result_t;

typedef struct {
    uint64_t seed;
    int quick;              /* skip production-sized workloads */
    const char *workload;   /* one workload ("text", "text@NxD[xV]"), or NULL for the suite */
    /* --shape: run the selected presets at N x D (x V when > 0) and, to catch kernels tuned to
     * one shape, at (N+1) x (D+1) and (N-1) x (D-1) as well. 0: the presets' own shapes. */
    int64_t shape_n, shape_d, shape_v;
    int baselines;          /* also run the baseline verifiers */
    int noise_floor;        /* measure the faithful variants' spread (default 1) */
    double timeout_s;       /* per kernel run */
    /* Threads a kernel may use (passed in the call as n_threads): N > 0 exactly N; 0 all cores
     * (the online CPUs up to 64, or $PARITY_THREADS when set). parity_check_opts_default: 1.
     * The floor's faithful variants get all cores or n_threads, the more (docs/check-speed.md). */
    int n_threads;
    void (*progress)(void *ctx, const char *msg);
    void *progress_ctx;
} parity_check_opts_t;

void parity_check_opts_default(parity_check_opts_t *o);

/* Check every kernel of `kernels` on op. *results gets a new array of kernels->n entries owned by
 * the caller: free it with parity_check_results_free(*results, kernels->n), which frees each
 * entry's wl array and the array itself (never call it on a single caller-owned struct:
 * fileflow.h's parity_compare_run result is freed with free(res.wl)). Borrowed pointers in the
 * results: results[k].kr points into kernels->items, which parity_kernel_resolve reallocs when it
 * appends, so read kr only while the list lives and nothing is appended to it (copy the label
 * first otherwise); base[].name and base[].rule are static strings. On error *results is not
 * set. Returns PARITY_OK when the check ran (whatever the verdicts), or an
 * error (bad workload name -> PARITY_E_NOTFOUND, missing data -> PARITY_E_IO) with diag set.
 * Diagnosis (wl[].diag, diag_wl) is filled for the workloads where a kernel is unfaithful only
 * (since 2026-12; parity_check_run_ex with diagnose_all for every small workload). */
parity_status_t parity_check_run(const parity_op_t *op, const parity_kernel_list_t *kernels,
                                 const parity_check_opts_t *opts, parity_kernel_result_t **results,
                                 parity_diag_t *diag);
void parity_check_results_free(parity_kernel_result_t *r, int n);

/* How a check is carried out (docs/check-speed.md). Added beside parity_check_opts_t (whose
 * layout is unchanged) so existing callers keep working; parity_check_run is parity_check_run_ex
 * with parity_check_exec_default. Nothing here changes a verdict, and only diagnose_all changes
 * the report (it adds diagnoses): the report is byte-identical for any jobs, ranks and cache. */
typedef struct {
    int jobs;              /* worker processes sharing this process's units (1: none forked) */
    const char *cache_dir; /* folder of the noise-floor cache, or NULL for none */
    int diagnose_all;      /* also diagnose workloads a kernel passes (default: failing only) */
    /* The grid of units (each floor, each kernel x workload, each baseline x kernel) is split
     * over n_ranks processes: this one runs the units u with u % n_ranks == rank. With
     * n_ranks > 1, or_all must OR n bytes at buf bitwise across all ranks, in place, on every
     * rank (MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_BYTE, MPI_BOR)), returning 0 on success;
     * every rank then returns the same results. Only rank 0 reads and writes the cache. */
    int rank, n_ranks;
    int (*or_all)(void *ctx, void *buf, size_t n);
    void *or_ctx;
} parity_check_exec_t;

/* The default folder of the floor cache: $XDG_CACHE_HOME/parity (when absolute), else
 * $HOME/.cache/parity, into buf. Returns 0, or -1 when neither is set or the path does not fit
 * (then run without a cache). The folder is created on the first write. */
int parity_check_cache_default_dir(char *buf, size_t cap);

/* jobs 1, no cache, failing-only diagnosis, one rank. */
void parity_check_exec_default(parity_check_exec_t *x);

/* parity_check_run carried out as exec says. Same results and errors as parity_check_run, plus
 * PARITY_E_INVALID for a bad exec (jobs < 1, rank outside [0, n_ranks), n_ranks > 1 without
 * or_all) and PARITY_E_IO when a worker process or the exchange between ranks failed. */
parity_status_t parity_check_run_ex(const parity_op_t *op, const parity_kernel_list_t *kernels,
                                    const parity_check_opts_t *opts, const parity_check_exec_t *exec,
                                    parity_kernel_result_t **results, parity_diag_t *diag);

/* The bounds themselves, exposed for tests and docs.
 * gamma_n(u) = n u / (1 - n u) (Higham, ASNA 2nd ed., Lemma 3.1); +inf when n u >= 1. */
double parity_gamma(double n, double u);
/* Probabilistic: exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1 (Higham & Mary 2019, Thm 2.4). */
double parity_gamma_prob(double n, double u, double lambda);
/* lambda such that a union bound over `elements` outputs, each with a failure probability
 * 2 n exp(-lambda^2 (1-u)^2 / 2) (Higham & Mary), stays below alpha. */
double parity_lambda(double n, double elements, double alpha);

#ifdef __cplusplus
}
#endif
#endif

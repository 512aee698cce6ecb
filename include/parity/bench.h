/* Speed, scored only for faithful kernels: per-op cost models (bytes that must move, flops that
 * must happen), machine ceilings (memory bandwidth, peak flop rate; cached per machine), the
 * speed-of-light time of a workload, timing of kernels, and the SOL-ExecBench score against a
 * baseline kernel. `parity bench` runs `check` first; kernels that are not faithful get a time
 * but no score. docs/bench.md derives the cost models and describes the JSON report.
 * Deliberately not here: judging kernels (verify.h). The ceilings describe a "device" so that a
 * GPU path can fill them from its own probes; today only the CPU probe exists. */
#ifndef PARITY_BENCH_H
#define PARITY_BENCH_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/bench.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stdint.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/status.h"
#include "parity/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cost model ---------------------------------------------------------------------------- */

/* Compulsory work of one op invocation: every input byte the op must read once, every output
 * byte it must write once (no write-allocate, no re-reads), and the floating-point operations of
 * the faithful computation (an add, a multiply, a divide or a square root count 1 each). */
typedef struct {
    double bytes_read, bytes_written, bytes; /* bytes = read + written */
    double flops;
    const char *flop_dtype; /* precision of the arithmetic: "fp32" */
    char formula[256];      /* the model in words, e.g. "read dy,x 2*N*D*2B ..." */
} parity_cost_t;

/* The cost of `op` at shape N x D (x V) -- the op's workload dimensions -- with floating-point
 * inputs of in_dt and outputs of out_dt (ids are int32). Every op parity ships has a model
 * (ops/<family>/cost.c); attributes take their lower-bound defaults (top-k 1, causal).
 * PARITY_E_NOTFOUND for an unknown op, PARITY_E_INVALID for a negative size or a NULL argument. */
parity_status_t parity_bench_cost_shape(const char *op, int64_t n, int64_t d, int64_t v,
                                        parity_dtype_t in_dt, parity_dtype_t out_dt,
                                        parity_cost_t *out);
/* The same, with N, D, V, the dtypes and the attributes read from a call (as parity builds it). */
parity_status_t parity_bench_cost_call(const parity_abi_call_t *call, parity_cost_t *out);

/* ---- machine ceilings ---------------------------------------------------------------------- */

typedef struct {
    char device[16];     /* "cpu" (a GPU path adds "cuda") */
    char model[128];     /* CPU model name */
    int cores;           /* online CPUs */
    int threads;         /* threads the probes used */
    int64_t llc_bytes;   /* last-level cache (0: unknown) */
    int64_t array_bytes; /* bytes per STREAM array */
    double copy_gbs, triad_gbs; /* best of the repetitions, STREAM counting (no write-allocate) */
    double copy_spread, triad_spread; /* (worst - best) / best over the repetitions */
    double bw_gbs;                    /* the bandwidth ceiling: max(copy, triad) */
    double peak_gflops_f32, peak_gflops_f64; /* independent multiply-add chains, all threads */
    double seconds;                   /* how long the measurement took */
    int from_cache;                   /* 1: read from the cache file */
    char cache_path[512];             /* where the cache lives ("" if none usable) */
} parity_ceilings_t;

typedef struct {
    int n_threads;       /* 0: all cores */
    int64_t array_bytes; /* 0: 4 x LLC, at least 64 MiB, at most a twelfth of available memory */
    int reps;            /* repetitions of each probe (0: 5) */
    int remeasure;       /* ignore the cache (the new figures still replace it) */
    int use_cache;       /* read/write the per-machine cache file */
} parity_ceiling_opts_t;

void parity_ceiling_opts_default(parity_ceiling_opts_t *o);

/* Measure the ceilings (STREAM-like copy and triad, fp32/fp64 peak) or, when o->use_cache and
 * not o->remeasure, read them from $XDG_CACHE_HOME/parity (or ~/.cache/parity) keyed by CPU model,
 * core count, threads (and a forced array size). An unwritable or unreadable cache is never an error (cache_path is then
 * empty). PARITY_E_NOMEM when the probe arrays cannot be allocated. */
parity_status_t parity_bench_ceilings(const parity_ceiling_opts_t *o, parity_ceilings_t *out,
                                      parity_diag_t *diag);

/* The STREAM probes alone, on caller-chosen sizes (tests measure copy kernels against them):
 * best GB/s of `reps` repetitions of a[i] = b[i] (copy, 2 x 8 bytes per element) or
 * a[i] = b[i] + s * c[i] (triad, 3 x 8 bytes) over n doubles per array with n_threads threads. */
double parity_bench_stream_copy(double *a, const double *b, int64_t n, int n_threads, int reps);
double parity_bench_stream_triad(double *a, const double *b, const double *c, int64_t n,
                                 int n_threads, int reps);

/* Speed of light: max(bytes / bandwidth, flops / peak) in seconds (peak of the cost's
 * flop_dtype; fp32 unless it says "fp64"). */
double parity_bench_sol(const parity_cost_t *cost, const parity_ceilings_t *ceil);

/* SOL-ExecBench's score S = 1 / (1 + (t_k - t_sol) / (t_b - t_sol)): 0.5 for the baseline, 1 at
 * the speed of light, towards 0 for slow kernels. NaN when undefined (t_b <= t_sol or a
 * non-positive time). */
double parity_bench_score(double t_k, double t_sol, double t_b);

/* Median, best and worst of n times (n >= 1; the array is sorted in place). */
void parity_bench_stats(double *t, int n, double *median, double *best, double *worst);

/* ---- timing -------------------------------------------------------------------------------- */

typedef struct {
    int warmup;        /* untimed runs first (default 2) */
    int runs;          /* timed runs (default 10) */
    int n_threads;     /* passed in the call (0: all cores) */
    double timeout_s;  /* for the whole timing of one kernel (default 300) */
    int64_t scrub_bytes; /* buffer written between runs to evict caches (0: 2 x LLC, >= 64 MiB;
                            < 0: no scrub) */
} parity_time_opts_t;

void parity_time_opts_default(parity_time_opts_t *o);

/* Time kernel k on `call` in a child process: `warmup` untimed runs, then `runs` timed ones. Before
 * each run the floating-point inputs are regenerated (each run flips the sign of the first
 * floating-point input, exactly, so nothing can be remembered from the last run) and a scrub
 * buffer evicts the caches; only k->run is timed. times[] gets `runs` seconds. Returns
 * PARITY_VERDICT_FAITHFUL when every run returned OK (meaning "ran"), else CRASHED / TIMEOUT /
 * UNSUPPORTED with detail. The call's inputs in the parent are untouched. */
parity_verdict_t parity_bench_time_kernel(const parity_abi_kernel_t *k, const parity_abi_call_t *call,
                                          const parity_time_opts_t *o, double *times,
                                          char *detail, size_t detail_len);

/* ---- the whole bench ----------------------------------------------------------------------- */

typedef struct {
    const char *workload;   /* the timed workload (NULL: "text" if the op has it, else the
                               first preset) */
    const char *baseline;   /* spec of the baseline kernel (NULL: the op's first catalog kernel
                               expected faithful, e.g. builtin:fp32_seq) */
    parity_check_opts_t check; /* the gate; default: quick suite, no noise floor */
    parity_time_opts_t time;
    parity_ceiling_opts_t ceil;
    uint64_t seed;
    void (*progress)(void *ctx, const char *msg);
    void *progress_ctx;
} parity_bench_opts_t;

void parity_bench_opts_default(parity_bench_opts_t *o);

typedef struct {
    const parity_kernel_ref_t *kr;
    int is_baseline;
    int added_baseline;  /* the baseline was not among the kernels asked for */
    parity_verdict_t verdict; /* from the check */
    char verdict_wl[48];      /* the workload that decided a failed verdict ("" if faithful) */
    char check_detail[256];   /* the check's one-line reason for a failed verdict */
    int timed;           /* 1: times are valid */
    char time_detail[256]; /* why not timed */
    double t_median, t_best, t_worst; /* seconds */
    double gbs, gflops;  /* achieved, from the median and the cost model */
    double frac_sol;     /* t_sol / t_median */
    int scored;
    double score;        /* NaN when not scored */
    /* What is timed is judged (docs/bench.md): 1 every warm-up and timed call returned the outputs
     * of the judged runs (bit for bit; within tolerance for nondeterministic kernels), 0 one did
     * not (verdict and check_detail then say which), -1 not compared (not faithful in the check,
     * or not timed). */
    int timed_outputs;
} parity_bench_row_t;

typedef struct {
    const parity_op_t *op;
    parity_workload_t wl; /* the timed workload */
    int64_t n, d, v;
    parity_cost_t cost;
    parity_ceilings_t ceil;
    double t_sol;
    int n_threads;
    int runs, warmup;
    uint64_t seed;
    int n_rows;
    parity_bench_row_t *rows;
    int baseline_row;    /* -1: no usable baseline (not faithful or not timed) */
    char check_workloads[256]; /* what the check ran: "quick suite", "text", ... */
    parity_kernel_list_t extra; /* owns the baseline when it was not among the kernels */
    parity_kernel_ref_t *refs;  /* owns the rows' kernel refs */
} parity_bench_result_t;

/* Check then time every kernel of `kernels` (and the baseline) on op. PARITY_OK when the bench
 * ran (whatever the verdicts); errors as parity_check_run, plus PARITY_E_NOTFOUND when the op has
 * no cost model or the baseline does not resolve. Free with parity_bench_result_free. */
parity_status_t parity_bench_run(const parity_op_t *op, const parity_kernel_list_t *kernels,
                                 const parity_bench_opts_t *o, parity_bench_result_t *res,
                                 parity_diag_t *diag);
void parity_bench_result_free(parity_bench_result_t *res);

#ifdef __cplusplus
}
#endif
#endif

/* libparity's stable C API (docs/c-api.md): check candidate kernels of a built-in op and read
 * the verdicts, through opaque handles and accessor functions, so a program built against this
 * header keeps working when libparity's internal structs change (a new baseline, a new field).
 * Every name here starts with parity_check_ (options and reports), parity_verdict_ (verdict.h),
 * parity_version_ (version.h) or parity_status_ / parity_diag_ (status.h).
 *
 * Ownership, for every function below: a pointer returned by a *_new or *_run function is owned
 * by the caller and released by the matching *_free (NULL is fine there); every const char *
 * returned by an accessor is owned by the object it was read from (or is static) and valid until
 * that object is freed; the caller never frees it. Arguments are borrowed for the call only
 * (strings are copied where kept).
 *
 * The experimental part: the per-module headers (verify.h, op.h, kernel.h, fileflow.h, ...) with
 * today's struct layouts (parity_check_opts_t, parity_kernel_result_t, ...). Their layouts change
 * between releases (docs/c-api.md), so a program that uses them links libparity statically and
 * says so by defining PARITY_STATIC_LINKING_ONLY before including any parity header (without it,
 * each of them is an #error); this header then includes them too (zstd's
 * ZSTD_STATIC_LINKING_ONLY model). */
#ifndef PARITY_PARITY_H
#define PARITY_PARITY_H

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"
#include "parity/verdict.h"
#include "parity/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options of a check ---- */

typedef struct parity_check_options parity_check_options_t;

/* New options with the defaults of `parity check`: seed 1, every preset workload (production
 * sizes included), the noise floor measured, no baselines, timeout 120 s per kernel run,
 * 1 thread. NULL when out of memory. Free with parity_check_options_free. */
parity_check_options_t *parity_check_options_new(void);
void parity_check_options_free(parity_check_options_t *o);

/* Setters: PARITY_OK, or PARITY_E_INVALID (o NULL, or a value out of range, which is then not
 * applied). */
parity_status_t parity_check_options_set_seed(parity_check_options_t *o, uint64_t seed);
/* quick != 0: skip the production-sized workloads (`--quick`). */
parity_status_t parity_check_options_set_quick(parity_check_options_t *o, int quick);
/* One workload ("unit", "unit@64x32", as `--workload`), copied; NULL: the op's presets. */
parity_status_t parity_check_options_set_workload(parity_check_options_t *o, const char *workload);
/* on != 0: measure the faithful variants' spread (the noise floor; default on). */
parity_status_t parity_check_options_set_noise_floor(parity_check_options_t *o, int on);
/* on != 0: also run the public verifiers' rules (docs/baselines.md; default off). */
parity_status_t parity_check_options_set_baselines(parity_check_options_t *o, int on);
/* Seconds per kernel run, > 0 (default 120). */
parity_status_t parity_check_options_set_timeout(parity_check_options_t *o, double seconds);
/* Threads a kernel may use (passed in the call as n_threads): N in 1..1024 exactly N, 0 all
 * cores (the online CPUs up to 64, or $PARITY_THREADS when set). Default 1. */
parity_status_t parity_check_options_set_threads(parity_check_options_t *o, int n_threads);

/* ---- running a check and reading its report ---- */

typedef struct parity_check_report parity_check_report_t;

/* Check the kernels that specs[0..n_specs) name on the built-in op `op` ("rmsnorm_fwd"; `parity
 * ops` lists them), each spec as `parity check --kernel` takes it: "builtin:NAME",
 * "builtin:all", "PATH.so" or "PATH.so:NAME". o NULL: the defaults of parity_check_options_new.
 * On PARITY_OK (the check ran, whatever the verdicts) *out is a new report owned by the caller,
 * freed with parity_check_report_free. On error *out is NULL and diag (may be NULL) says why:
 * PARITY_E_INVALID (bad arguments), PARITY_E_NOTFOUND (unknown op, kernel or workload),
 * PARITY_E_IO / PARITY_E_FORMAT (a plugin that cannot be loaded, missing data), PARITY_E_NOMEM. */
parity_status_t parity_check_report_run(const char *op, const char *const *specs, int n_specs,
                                        const parity_check_options_t *o,
                                        parity_check_report_t **out, parity_diag_t *diag);
void parity_check_report_free(parity_check_report_t *r);

/* The op's name. */
const char *parity_check_report_op(const parity_check_report_t *r);
/* How many kernels were checked (every kernel every spec named, in order). */
int parity_check_report_n_kernels(const parity_check_report_t *r);
/* Kernel k's label ("builtin:fp32", "./libmine.so:fast"); NULL when k is out of range. */
const char *parity_check_report_kernel_label(const parity_check_report_t *r, int k);
/* Kernel k's overall verdict: the first verdict other than faithful in workload order, else
 * PARITY_VERDICT_FAITHFUL. PARITY_VERDICT_NOT_JUDGED when k is out of range. */
parity_verdict_t parity_check_report_verdict(const parity_check_report_t *r, int k);
/* The workloads kernel k ran on (the same for every kernel); 0 when k is out of range. */
int parity_check_report_n_workloads(const parity_check_report_t *r, int k);
/* Workload w of kernel k: its name ("unit", "unit@64x32"), its verdict, the largest error over
 * tolerance of any element (the JSON report's max_err_over_tol; > 1 fails), the detail line of
 * a failure ("" when none). Out of range: NULL, PARITY_VERDICT_NOT_JUDGED, NaN, NULL. */
const char *parity_check_report_workload_name(const parity_check_report_t *r, int k, int w);
parity_verdict_t parity_check_report_workload_verdict(const parity_check_report_t *r, int k, int w);
double parity_check_report_workload_max_err_over_tol(const parity_check_report_t *r, int k, int w);
const char *parity_check_report_workload_detail(const parity_check_report_t *r, int k, int w);

#ifdef __cplusplus
}
#endif

#ifdef PARITY_STATIC_LINKING_ONLY
/* The experimental part: today's struct layouts, which change between releases. */
#include "parity/fileflow.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"
#endif

#endif

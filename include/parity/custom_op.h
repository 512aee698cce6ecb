/* Declared ops in C: loading an op a plugin declares through op_abi.h, building its workloads
 * from the inputs' roles, deriving per-element tolerances from the declaration (the built-in
 * error model for a multilinear reduction, otherwise the empirical floor) and judging a kernel
 * on them in a child process. The same specification as the Python package's parity.Op
 * (docs/custom-ops.md); `parity check --op-plugin FILE.so` is its CLI.
 * Deliberately not here: the report's layout (programs/cmd_check_declared.c), the built-in ops'
 * harness (verify.h), the catalog noise floor and the diagnosis (a declared op has no catalog). */
#ifndef PARITY_CUSTOM_OP_H
#define PARITY_CUSTOM_OP_H

#include <stdint.h>

#include "parity/kernel_abi.h"
#include "parity/op_abi.h"
#include "parity/status.h"
#include "parity/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_CUSTOM_MAX_ARGS 16 /* inputs, outputs, dimensions of one declared op */
#define PARITY_CUSTOM_MAX_WORKLOADS 8

typedef struct parity_custom_op parity_custom_op_t;

/* Load the declared op `name` (NULL: the plugin's only op) from the shared object at path, which
 * exports parity_op_entry (op_abi.h). The declaration is validated: every dimension an input or
 * output names has sizes, reductions name input dimensions absent from their output, roles and
 * counts in range. Returns PARITY_OK and *out (free with parity_custom_op_free);
 * PARITY_E_IO (cannot load), PARITY_E_FORMAT (no entry, op ABI version from the future, a
 * malformed declaration: diag names the field), PARITY_E_NOTFOUND (no op of that name, or
 * several and name NULL). */
parity_status_t parity_custom_op_load(const char *path, const char *name, parity_custom_op_t **out,
                                      parity_diag_t *diag);
void parity_custom_op_free(parity_custom_op_t *op); /* NULL is fine */

const parity_abi_op_decl_t *parity_custom_op_decl(const parity_custom_op_t *op);
/* The workloads made from the roles (docs/custom-ops.md, "Workloads"): base, zipf (token ids),
 * outlier-ch (activations), odd, magnitude, production (when the largest sizes differ). */
int parity_custom_op_workload_count(const parity_custom_op_t *op);
const char *parity_custom_op_workload_name(const parity_custom_op_t *op, int w);
int parity_custom_op_workload_production(const parity_custom_op_t *op, int w);

/* One workload's judgement of one kernel. */
typedef struct {
    char workload[32];
    int production;
    parity_verdict_t verdict;
    double max_err_over_tol; /* over every output element; 0 when not judged */
    int64_t rows_failed, rows_judged;
    /* the worst element */
    char worst_output[64];
    int64_t worst_index[PARITY_ABI_MAX_DIMS];
    int worst_ndim;
    double got, ref, tol;
    char tolerance[96]; /* which model, per output: "y: empirical-floor F=2" */
    char detail[256];   /* crash signal, modified input, ... */
    double seconds;     /* the judged call */
} parity_custom_result_t;

typedef struct {
    uint64_t seed;   /* every random choice flows from it (default 1) */
    int quick;       /* skip production-sized workloads */
    double timeout;  /* seconds per child run (default 120) */
    const char *workload; /* one workload by name, or NULL for all */
} parity_custom_opts_t;

void parity_custom_opts_default(parity_custom_opts_t *o);

/* Judge kernel k (in_dtype/out_dtype: F32, BF16 or F16) as an implementation of op on the
 * workloads opts selects: for each, inputs from the roles, the fp64 reference, the tolerances,
 * then in a child process a decoy call (float inputs x -2), the judged call (outputs pre-filled
 * with NaN, guard bytes after each), inputs verified unmodified, and on non-production workloads
 * a rerun compared bit for bit. results: caller-owned, PARITY_CUSTOM_MAX_WORKLOADS entries;
 * *n_results is set. Returns PARITY_OK (verdicts are in results, whatever they are);
 * PARITY_E_INVALID (unknown workload, a dtype the harness does not build),
 * PARITY_E_FORMAT (the declaration fails on a workload: reference error or NaN, a multilinear
 * claim that does not hold, no fp32 evaluation where the floor needs one), PARITY_E_NOMEM. */
parity_status_t parity_custom_check(const parity_custom_op_t *op, const parity_abi_kernel_t *k,
                                    const parity_custom_opts_t *opts, parity_custom_result_t *results,
                                    int *n_results, parity_diag_t *diag);

/* The empirical floor for one output viewed as rows x cols (docs/custom-ops.md):
 * ref the fp64 reference, got the contract (fp32) evaluation, k the declared reduction length
 * (0: none), tol[rows*cols] written. Exposed for tests. Returns the factor F used. */
double parity_custom_floor(const double *ref, const double *got, int64_t rows, int64_t cols,
                           int64_t k, double *tol);

#ifdef __cplusplus
}
#endif
#endif

/* Declared ops in C: loading an op a plugin declares through op_abi.h (or declaring one from
 * memory: the Python package's parity.Op), building its workloads from the inputs' roles,
 * deriving per-element tolerances from the declaration (the built-in error model for a
 * multilinear reduction, otherwise the empirical floor). The declared op is an op descriptor of
 * the check engine (parity_custom_op_desc): its kernels are checked by parity_check_run like a
 * built-in op's -- the same isolation, probes, judge, diagnosis, baselines and report
 * (include/parity/report.h); `parity check --op-plugin FILE.so` is its CLI. The same specification
 * as the Python package's parity.Op (docs/custom-ops.md).
 * Deliberately not here: running and judging kernels (src/verify), the catalog noise floor (a
 * declared op has no catalog). */
#ifndef PARITY_CUSTOM_OP_H
#define PARITY_CUSTOM_OP_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/custom_op.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
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

/* The name of role r (op_abi.h parity_role_t: "token_ids", "activation", ...), "?" past the last:
 * the Python package reads the roles in order until "?", so a role added here needs no change
 * there. */
const char *parity_custom_role_name(int r);

/* A reference with a context pointer: what a host language's declared op gives (the Python
 * package's parity.Op, whose reference is a Python function called through the bridge). Called
 * as decl->reference would be, with the same call and the same return codes. */
typedef int (*parity_custom_ref_fn)(void *arg, const parity_abi_call_t *call);

/* The declared op `decl` (caller-owned: it and every string and table it points to must outlive
 * the op) made into an op, validated as parity_custom_op_load validates a plugin's; `ref` (with
 * `arg`), when not NULL, is its reference in place of decl->reference (its name may be a built-in
 * op's: the caller keeps the descriptor apart from the registry). Free with parity_custom_op_free. PARITY_OK; PARITY_E_FORMAT (a malformed
 * declaration: diag names the field); PARITY_E_INVALID; PARITY_E_NOMEM. */
parity_status_t parity_custom_op_declare(const parity_abi_op_decl_t *decl, parity_custom_ref_fn ref, void *arg,
                                         parity_custom_op_t **out, parity_diag_t *diag);

const parity_abi_op_decl_t *parity_custom_op_decl(const parity_custom_op_t *op);
/* The declared op as the check engine sees it: an op descriptor (op.h) whose workloads are the
 * declared op's, whose cases are built from the roles and judged by the engine. Owned by op. */
const parity_op_t *parity_custom_op_desc(const parity_custom_op_t *op);
/* One more workload, named `name`, whose inputs are the caller's values rather than drawn from
 * the roles: sizes[d] per declared dimension (the declaration's order), inputs[i] the values of
 * input i, row-major, float inputs as doubles (each exactly representable in the dtype a case
 * is then built in), token ids as int64; copied. It replaces the previous given workload; a case
 * builds it by name (a preset's name is shadowed). For judging outputs computed on inputs parity
 * did not draw (parity.compare / parity.check of a parity.Op on given arrays). name NULL: the
 * given workload is dropped (a preset it shadowed is the preset again). PARITY_OK;
 * PARITY_E_INVALID (a name empty or over 31 characters, a size out of range); PARITY_E_NOMEM. */
parity_status_t parity_custom_op_given(parity_custom_op_t *op, const char *name, const int64_t *sizes,
                                       const void *const *inputs, parity_diag_t *diag);
/* The same, where float inputs may be left to parity (inputs[i] NULL): drawn from their roles
 * under the variant `draw` names ("base", "outlier-ch" or "magnitude"; the workload of that
 * name's values, at the given sizes) -- parity's value stress on a structure only the caller can
 * give (page tables, offsets: a benchmark problem's own workloads, docs/problems.md). Token ids
 * are always given. draw NULL: every input is given. */
parity_status_t parity_custom_op_given_drawn(parity_custom_op_t *op, const char *name, const int64_t *sizes,
                                             const void *const *inputs, const char *draw, parity_diag_t *diag);

/* ---- the cause classifier's hooks (docs/custom-ops.md, "Causes"; docs/error-model.md "Cause") --
 * A declared op names its refittable parameters and its intermediates once, and the diagnosis's
 * classifier (src/verify/check_cause.c, check_variant.c) re-runs its reference under a trial: one
 * parameter at another value (cause "parameter", the value fitted), or one intermediate rounded
 * to bf16 or fp16 (cause "intermediate-rounding"). */
#define PARITY_CUSTOM_MAX_PARAMS 4
/* Intermediates a declared op may name (parity_custom_op_intermediates) or allow rounded
 * (parity_custom_op_rounded); at most PARITY_OP_MAX_VARIANTS (op.h). */
#define PARITY_CUSTOM_MAX_INTERMEDIATES 4

/* What the reference is being re-run under. param (NULL: none) at value: a C reference reads it
 * as the call's attribute of that name, whose value the engine sets; intermediate (NULL: none)
 * rounded to format ("bf16", "fp16") as dir says (0 nearest-even, -1 the format's neighbour
 * below, +1 above: op.h parity_variant_round). used: set to 1 by whatever rounded the named
 * intermediate (parity_custom_intermediate, or a host language's marker): a re-run that never
 * met it tells the classifier the intermediate does not bear on that case. */
typedef struct {
    const char *param;
    double value;
    const char *intermediate;
    const char *format;
    int dir;
    int used;
} parity_custom_trial_t;

/* The trial of the reference call in progress on this thread, or NULL (a plain call). For host
 * languages' references (the Python bridge passes it to parity.Op's reference). */
parity_custom_trial_t *parity_custom_trial(void);
/* An intermediate value x named `name` of a reference: x itself, or x rounded as the current
 * trial says when the trial rounds that intermediate (in fp64: the rounding of the exact value).
 * For references called in-process (parity_custom_op_declare's ref): a plugin loaded from a
 * shared object has no declaration field for intermediates in op_abi.h and cannot call into the
 * host, so only its attributes are refitted. */
double parity_custom_intermediate(const char *name, double x);
/* The refittable parameters of op: n (at most PARITY_CUSTOM_MAX_PARAMS) names and values,
 * copied; by default a declared op's attributes. For a host language whose attributes the C
 * declaration does not carry (parity.Op's: its reference gets them, the trial's value when a
 * trial sets one). PARITY_OK; PARITY_E_INVALID (n, a name empty or over 15 characters: op.h's
 * limit for a parameter's name). */
parity_status_t parity_custom_op_params(parity_custom_op_t *op, int n, const char *const *names,
                                        const double *values, parity_diag_t *diag);
/* The intermediates op's reference marks (parity_custom_intermediate, parity.intermediate): n
 * (at most PARITY_CUSTOM_MAX_INTERMEDIATES) names, copied; each becomes a ROUNDED variant of the
 * descriptor. PARITY_OK; PARITY_E_INVALID (n, a name empty or over 31 characters). */
parity_status_t parity_custom_op_intermediates(parity_custom_op_t *op, int n, const char *const *names,
                                               parity_diag_t *diag);

/* Intermediates the op's contract allows rounded (issue #37): n (at most PARITY_CUSTOM_MAX_INTERMEDIATES)
 * names the reference marks and the format each may be rounded to ("bf16", "fp16"), copied. The
 * judge then accepts the reference computed with that rounding as well as the exact one: each
 * output judged by the empirical floor gets, per element, max over the two neighbours in the format
 * of |reference with the intermediate rounded there - reference| added to its tolerance (summed
 * over the intermediates; docs/custom-ops.md "Rounded intermediates"). Outputs judged by the error
 * model of a multilinear reduction get nothing. Applies to cases built afterwards. PARITY_OK;
 * PARITY_E_INVALID (n, a name, a format other than bf16 and fp16). */
parity_status_t parity_custom_op_rounded(parity_custom_op_t *op, int n, const char *const *names,
                                         const char *const *formats, parity_diag_t *diag);

/* The workloads made from the roles (docs/custom-ops.md, "Workloads"): base, zipf and text (token
 * ids), outlier-ch (activations), odd, magnitude, production (when the largest sizes differ). */
int parity_custom_op_workload_count(const parity_custom_op_t *op);
const char *parity_custom_op_workload_name(const parity_custom_op_t *op, int w);
int parity_custom_op_workload_production(const parity_custom_op_t *op, int w);

/* The values of input i on workload w for (seed, float dtype F32/BF16/F16), as the kernel gets
 * them: float inputs as exact doubles, token ids as int64 (8 bytes each either way), into
 * out[0..cap) (out NULL: only *n is set, the element count). For tests and tools.
 * PARITY_E_INVALID (indices, cap too small, dtype), PARITY_E_IO (no text corpus), PARITY_E_NOMEM. */
parity_status_t parity_custom_op_input(const parity_custom_op_t *op, int w, int i, uint64_t seed, int dtype,
                                       void *out, int64_t cap, int64_t *n, parity_diag_t *diag);

/* The declaration as one line of JSON (malloc'd; free() it): {"name", "description",
 * "multilinear", "dims": {name: [sizes]}, "fixed": [names], "inputs": [{"name", "role", "dims",
 * "vocab"?}], "outputs": [{"name", "dims", "reduced"}], "attrs": {name: value}}; NULL without
 * memory. What python/parity/custom_plugin.py (parity.Op.from_plugin) builds a parity.Op from. */
char *parity_custom_op_json(const parity_custom_op_t *op);

/* The plugin's reference called on caller arrays: sizes[d] per declared dimension (the
 * declaration's order), float inputs all in dtype (F64 or F32), token ids int64, outputs
 * caller-allocated in dtype, all contiguous row-major. Returns the plugin's code
 * (PARITY_KERNEL_UNSUPPORTED: the reference does not compute in dtype). */
int parity_custom_op_reference(const parity_custom_op_t *op, const int64_t *sizes, int dtype, const void *const *inputs,
                               void *const *outputs);

/* The power self-test's options (parity_custom_power). */
typedef struct {
    uint64_t seed;   /* every random choice flows from it (default 1) */
    int quick;       /* skip production-sized workloads */
    double timeout;  /* unused (the power self-test runs no kernel); kept for the layout */
    const char *workload; /* one workload by name, or NULL for all */
} parity_custom_opts_t;

void parity_custom_opts_default(parity_custom_opts_t *o);

/* The empirical floor for one output viewed as rows x cols (docs/custom-ops.md):
 * ref the fp64 reference, got the contract (fp32) evaluation, k the declared reduction length
 * (0: none), tol[rows*cols] written. Exposed for tests. Returns the largest factor, 2 sqrt(k) (2
 * without a reduction); the sqrt(k) lift is capped per element at the error model's k-term
 * accumulation term (docs/custom-ops.md). */
double parity_custom_floor(const double *ref, const double *got, int64_t rows, int64_t cols,
                           int64_t k, double *tol);

/* ---- the baselines matrix (docs/custom-ops.md, "Baselines") ---------------------------------
 * The seven rules of baseline.h applied to a declared op: each rule's input scheme at the op's
 * base sizes (float inputs torch.randn-like, SOL-ExecBench's with norm weights all ones,
 * torch.rand U[0,1) for KernelBench, integers in [-4,4] for Composable Kernel; masks stay 0/1
 * masks, token ids uniform) with the rule's fixed seed, one plain run of the kernel, then the
 * rule, from the reference, the outputs and (per rule) the term count K, sum |terms| and the
 * plain low-precision implementation. */

/* Whether rule b applies to an op with n_out outputs, reduced[o] != 0 when output o declares a
 * reduction, multilinear the op's PARITY_OP_MULTILINEAR. Every rule applies except hipDNN's,
 * which needs sum |products| per element: only a multilinear reduction on every output gives it.
 * Returns 1, or 0 with why[0..cap) saying why not. */
int parity_custom_baseline_applies(int b, int n_out, const int *reduced, int multilinear, char *why, size_t cap);

/* Rule b on the outputs of one declared-op case given as plain arrays (the C harness and the
 * Python package's parity.Op both call it, so the rules are baseline.c's in both):
 * n_out outputs (at most 8), output o viewed as rows[o] x cols[o]; ref[o] the fp64 reference;
 * k[o] the terms per element (the declared reduction's length, 1 without one; CK's
 * number_of_accumulations defaults to 1); s_acc[o] sum |terms| (NULL or a NULL entry: |ref|);
 * plain[o] the reference evaluated in fp32 on the same inputs (NULL or a NULL entry: none), which
 * rounded to in_dtype is FlashAttention's out_pt (without it, out_pt is ref rounded once to
 * in_dtype, as for the built-in ops without an emulation); outs[o] the kernel's output in
 * out_dtype[o] (the reference is rounded to out_dtype[0] where a rule says so). br filled as parity_baseline_judge fills it. PARITY_E_INVALID, PARITY_E_NOMEM. */
parity_status_t parity_custom_baseline_judge(int b, const char *op_name, int in_dtype, int n_out,
                                             const int64_t *rows, const int64_t *cols, const int64_t *k,
                                             const double *const *ref, const double *const *s_acc,
                                             const double *const *plain, const int *out_dtype, const void *const *outs,
                                             parity_baseline_result_t *br);

/* Rule b on the outputs of a declared op's case pc built at the rule's own workload (the op
 * descriptor's "baseline:NAME" workload, parity_custom_op_desc, with parity_custom_baseline_seed):
 * outs[o] the kernel's output o in out_dtype[o]; the reference, K and sum |terms| are the case's,
 * the plain implementation (flash-attn) its reference evaluated in fp32. The descriptor's
 * baseline_judge (op.h): what the check engine applies after a kernel's plain run, and the Python
 * package after running a function. PARITY_E_INVALID (not a declared op's case, b out of range), PARITY_E_NOMEM. */
parity_status_t parity_custom_baseline_case(int b, const parity_case_t *pc, const int *out_dtype,
                                            const void *const *outs, parity_baseline_result_t *br);

/* Rule b's fixed seed (baseline.c's: SOL-ExecBench 200, KernelBench 42, the others 0). */
uint64_t parity_custom_baseline_seed(int b);

/* ---- the power self-test (docs/custom-ops.md, "The power self-test") -----------------------
 * Generic mutants built from the op's own reference, judged with the tolerance parity derived,
 * as parity.power does for a parity.Op (python/parity/custom_power.py): control (the reference in
 * fp32: must pass), bf16-accum / fp16-accum (a multilinear reduction: a sequential accumulator in
 * that format over the reduced dimensions, fp32 terms) or, otherwise, bf16-out / fp16-out (the
 * fp32 evaluation rounded to that format: a C reference cannot be evaluated in bf16, so this is
 * the one rounding every bf16 evaluation makes at least), inputs-lower (float inputs rounded one
 * format lower: f32 -> tf32, f16 -> e5m2, bf16 -> e4m3fn saturating, then fp32), row-dropped,
 * col-dropped (the first output's last row / column left zero) and tail-dropped (the last index
 * of every reduced dimension dropped, its inputs zeroed). Mutants are outputs, judged as fp32. */
#define PARITY_CUSTOM_N_MUTANTS 7
typedef struct {
    char mutant[16];
    char workload[32];
    char description[160];
    int applies;         /* 0: n/a, why_not says why */
    int caught;          /* err_over_tol > 1 */
    double err_over_tol;
    char why_not[96];
} parity_custom_power_row_t;

/* Every mutant on every workload opts selects (opts->quick, opts->workload, opts->seed), inputs
 * in dtype (F32, BF16 or F16), rows[0..cap) written in (workload, mutant) order, *n_rows set.
 * PARITY_OK; PARITY_E_INVALID (a dtype, cap too small, an unknown workload); PARITY_E_FORMAT (the
 * declaration fails on a workload: a reference error or NaN, a multilinear claim that does not
 * hold, no fp32 evaluation where the floor needs one); PARITY_E_NOMEM. */
parity_status_t parity_custom_power(const parity_custom_op_t *op, int dtype, const parity_custom_opts_t *opts,
                                    parity_custom_power_row_t *rows, int cap, int *n_rows, parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif

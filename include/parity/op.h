/* The op registry: each op declares its inputs and outputs, builds a case (inputs for a workload
 * and seed, plus an fp64 reference with the error-model data every output element needs), and
 * can emulate itself with a chosen accumulator format for diagnosis.
 *
 * Error-model data per output element (docs/error-model.md derives the bounds from it):
 *   k      terms accumulated into the element (an embedding-gradient row: its token's hits)
 *   s_acc  sum of |terms| that are accumulated (the condition of the accumulation)
 *   s_up   sum over those terms of each term's own absolute condition (|error| of a term
 *          computed with m_up roundings is at most gamma_{m_up} of it)
 *   ref    the fp64 reference value
 * Deliberately not here: judging (verify.h), running kernels (kernel.h). */
#ifndef PARITY_OP_H
#define PARITY_OP_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/op.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stdint.h>

#include "parity/format.h"
#include "parity/kernel_abi.h"
#include "parity/status.h"
#include "parity/tensor.h"
#include "parity/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_OP_MAX_ARGS 16

/* Reference and error-model data of one output, viewed as rows x cols. Rows are the unit of
 * judgement (an embedding row, a channel). Row-sparse: rows whose slot is -1 have no terms and
 * must be exactly zero. */
typedef struct {
    const char *name;    /* output name, e.g. "dE" */
    const char *row_kind; /* what a row is: "token", "channel", "row" */
    int64_t rows, cols;
    int64_t *slot;       /* [rows] slot index or -1; NULL means dense (slot == row) */
    int64_t n_slots;
    double *ref;         /* [n_slots * cols] */
    double *s_acc;       /* [n_slots * cols] */
    double *s_up;        /* [n_slots * cols], or NULL when terms are exact inputs */
    int64_t *k;          /* [n_slots] terms per element of the row */
    int64_t m_up;        /* roundings that produce each term (0: terms are inputs) */
    int64_t *row_key;    /* [rows] e.g. token id of the row (NULL: the row index) */
    /* Operand roundings (NULL / 0: none): each of the k accumulated terms x_j may carry one more
     * independent relative rounding of unit u_op, because the op's contract lets a kernel round
     * an operand to a narrower dtype before the product (FlashAttention rounds P~ to the input
     * dtype for P~V). s_op = sqrt(sum x_j^2) per element, the Hoeffding scale of that error;
     * the worst-case bound uses u_op * s_acc instead. docs/error-model.md, "Operand roundings". */
    double *s_op;        /* [n_slots * cols] */
    double u_op;
    /* Symmetric reduction class (NULL: not known symmetric). Filled only where the workload's
     * generator makes the k accumulated terms symmetric: each term's sign an independent fair
     * coin, independent of every magnitude (a product with one N(0,1) factor, a row of dy).
     * s_sym = sqrt(sum x_j^2) of those terms per element. The verdict then also holds the
     * accumulation error to lambda^2 u sqrt(k-1) s_sym (+ a second-order term), which is
     * sharper than gamma~_{k-1} s_acc by about s_acc / (lambda s_sym) ~ sqrt(k) / lambda; it
     * assumes a summation order fixed independently of the terms' signs. docs/error-model.md,
     * "Symmetric reduction class". */
    double *s_sym;       /* [n_slots * cols] */
    /* Per-term errors across terms (NULL: not provided; today's gamma~_{m_up} s_up alone). Filled
     * only where the k terms of an element are computed by distinct roundings of distinct
     * values (distinct token rows of continuous generated data), and where the op has shown that
     * each term's first-order error sum_r c_r delta_r has sum_r c_r^2 <= m_up A^2 (A: the term's
     * absolute condition, what s_up sums). s_up2 = sqrt(sum_i A_i^2) per element. The verdict
     * then also holds the terms' error to lambda u sqrt(m_up) s_up2 (their random part, one
     * martingale over every term's roundings) + (b_up u + m_up u gamma_{m_up}) s_up (what adds
     * linearly: b_up, in units of u per unit of A, is the op's budget for systematic allowances
     * such as an rsqrt intrinsic's 2 ulp; the second term the second-order remainder).
     * docs/error-model.md, "Per-term errors across terms". */
    double *s_up2;       /* [n_slots * cols] */
    double b_up;
    /* An explicit per-element tolerance before the output's rounding (NULL: the error model
     * above). For ops without a closed-form error model: a declared op's empirical floor
     * (docs/custom-ops.md, "Tolerances") is measured, not derived from k and s_acc. The judge
     * then allows tol + the one rounding to a narrower output dtype, as for the error model.
     * Not freed by parity_case_free: the op that sets it owns it (its free_priv). */
    const double *tol;   /* [n_slots * cols] */
} parity_ref_output_t;

struct parity_op;

/* One instantiated problem: inputs for (op, workload, seed, input dtype) and the reference. */
typedef struct {
    const struct parity_op *op;
    const parity_workload_t *wl;
    uint64_t seed;
    parity_dtype_t in_dtype;
    int n_inputs, n_outputs;
    parity_tensor_t *inputs[PARITY_OP_MAX_ARGS];
    int out_ndim[PARITY_OP_MAX_ARGS];
    int64_t out_shape[PARITY_OP_MAX_ARGS][PARITY_ABI_MAX_DIMS];
    parity_ref_output_t ref[PARITY_OP_MAX_ARGS];
    int n_attrs;
    const char *attr_names[4];
    double attr_values[4];
    int rows_are_text_tokens; /* row keys are GPT-2 ids: reports print token text */
    void *priv;               /* op-private data (freed by the op's free_priv) */
    parity_workload_t *owned_wl; /* a workload the case owns (freed with it), or NULL */
} parity_case_t;

struct parity_baseline_result; /* verify.h parity_baseline_result_t */

typedef struct parity_op {
    const char *name;
    const char *summary;
    int n_inputs, n_outputs;
    const char *input_names[PARITY_OP_MAX_ARGS];
    const char *output_names[PARITY_OP_MAX_ARGS];
    /* Which inputs are floating point (converted to the kernel's in_dtype); others are ids. */
    int input_is_float[PARITY_OP_MAX_ARGS];
    const char *faithful_accumulator; /* "fp32" */
    const char *error_model;          /* one line: terms per output and the bound's shape */
    /* Its workloads: the presets (--workload NAME), each carrying a parameter struct of the op's
     * family, which wl_family describes field by field (workload.h; `parity ops OP --workloads`
     * prints them). */
    const parity_workload_t *presets;
    int n_presets;
    const parity_workload_family_t *wl_family;
    /* Its built-in kernels, the catalog `parity kernels OP` lists: tables of its folder's
     * kernels*.c with their counts (a table may hold several ops' kernels; each kernel names its
     * op), in listing order; unused entries NULL. */
#define PARITY_OP_MAX_CATALOGS 2
    struct {
        const parity_abi_kernel_t *table;
        const int *count;
    } catalog[PARITY_OP_MAX_CATALOGS];
    /* Its cost model for `parity bench` (ops/<family>/cost.c; the type is internal: src/op/registry.h),
     * NULL for a declared op. */
    const struct parity_cost_model *cost;
    /* The baseline verifiers' own input schemes for this op (verify.h). */
    const parity_workload_t *baseline_workloads; /* [3]: SOL-ExecBench, KernelBench, assert_close */
    parity_status_t (*build)(const struct parity_op *op, const parity_workload_t *wl,
                             uint64_t seed, parity_dtype_t in_dtype, parity_case_t *c,
                             parity_diag_t *diag);
    /* Compute rows[0..n_rows) of output `out` as a kernel that accumulates in `acc` with the
     * given order would, writing n_rows * cols doubles. Terms are produced as a faithful fp32
     * kernel produces them. */
    parity_status_t (*emulate)(const parity_case_t *c, int out, const parity_format_t *acc,
                               parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                               double *dst);
    void (*free_priv)(parity_case_t *c);
    /* The op's named scalar parameters the diagnosis may refit (issue #36, cause "parameter";
     * docs/error-model.md "Cause"): params[] ends at the first entry whose name is NULL (none:
     * params[0].name NULL). value is the op's value (RMSNorm's eps, 1e-5) unless param_value is
     * set, which gives it per case (attention's scale 1/sqrt(Dh), RMSNorm's divisor D); a value
     * of 0 or less there means the parameter is off in that case (no softcap) and it is not
     * refit. flags: PARITY_PARAM_*. param_ref recomputes the fp64 reference of rows[0..n_rows)
     * of output `out` with parameter `which` set to `value` (INFINITY: "none", for
     * PARITY_PARAM_NONE), the others at the op's, as build does: ref, s_acc and s_up (each
     * n_rows * cols doubles, s_up may be NULL) as build forms them for those rows;
     * PARITY_E_UNSUPPORTED: that parameter does not enter that output (or the op cannot
     * recompute it on rows). */
#define PARITY_OP_MAX_PARAMS 4
    struct {
        const char *name; /* "eps", "scale", "softcap", "divisor" (at most 15 characters) */
        double value;
        int flags;
    } params[PARITY_OP_MAX_PARAMS];
    double (*param_value)(const parity_case_t *c, int which);
    parity_status_t (*param_ref)(const parity_case_t *c, int out, int which, double value,
                                 const int64_t *rows, int64_t n_rows, double *ref, double *s_acc,
                                 double *s_up);
    /* The terms of an output's reduction, for the diagnosis's dropped-terms cause (issue #36,
     * docs/error-model.md "Cause"), or NULL: none. Adds to sum, abs_sum and sq_sum (each n_rows *
     * cols doubles, sq_sum may be NULL) the fp64 sum of terms [from, to) of output `out`'s
     * elements in rows[0..n_rows), of their absolute values and of their squares: the reference
     * with those terms left out is ref - sum, with s_acc - abs_sum (gemm: C's K products, dW's
     * token products, dX's out-feature products). */
    parity_status_t (*terms_ref)(const parity_case_t *c, int out, int64_t from, int64_t to,
                                 const int64_t *rows, int64_t n_rows, double *sum, double *abs_sum,
                                 double *sq_sum);
    /* Variants of the op the diagnosis recomputes to name a cause (issue #36, docs/error-model.md
     * "Cause"), declared once here: an intermediate rounded to a narrower format (the row's sum
     * of exps rounded to bf16), an input ignored (gamma as if all ones), subnormal inputs flushed
     * to zero. variants[] ends at the first entry whose what is NULL. variant_ref recomputes the
     * fp64 reference of rows[0..n_rows) of output `out` as build forms it, but with variant
     * `which` applied: ref, s_acc and s_up (each n_rows * cols doubles, s_up may be NULL). For a
     * PARITY_VARIANT_ROUNDED one, fmt is the format the intermediate is rounded to and dir how:
     * 0 to nearest, -1 to the format's neighbour below the exact value, +1 to the one above
     * (parity_variant_round); fmt NULL and dir 0 for the others. PARITY_E_UNSUPPORTED: the
     * variant does not touch that output. */
#define PARITY_OP_MAX_VARIANTS 8
    struct {
        int kind;         /* parity_variant_kind_t */
        const char *what; /* "the row's sum of exps", "gamma (computed as if all ones)" */
        int per_row;      /* ROUNDED: one intermediate value per output row, so each row's may
                             round to either neighbour (a kernel's fp32 value of it differs from
                             the fp64 one by its own rounding, which can cross a rounding
                             boundary); 0: nearest only */
    } variants[PARITY_OP_MAX_VARIANTS];
    parity_status_t (*variant_ref)(const parity_case_t *c, int out, int which,
                                   const parity_format_t *fmt, int dir, const int64_t *rows,
                                   int64_t n_rows, double *ref, double *s_acc, double *s_up);
    /* A declared op (custom_op.h: a plugin's, or a parity.Op through the Python package) rather
     * than a built-in one: the reports add "custom_op": true. */
    int declared;
    /* Why an unfaithful kernel of this op gets no diagnosis (a declared op without a multilinear
     * reduction: no terms to emulate); the reports say it. NULL: every one is diagnosed. */
    const char *no_diagnosis;
    /* Declared ops: the baseline rules' own workloads and judgement (src/custom/custom_baseline.c;
     * NULL for the built-in ops, whose are baseline.c's). baseline_workload gives rule b's
     * workload and fixed seed, or PARITY_E_NOTFOUND with why[0..cap) saying why the rule does
     * not apply to the op (hipDNN's needs a multilinear reduction). */
    parity_status_t (*baseline_workload)(const struct parity_op *op, int b, const parity_workload_t **wl,
                                         uint64_t *seed, char *why, size_t cap);
    parity_status_t (*baseline_judge)(int b, const parity_case_t *c, parity_tensor_t *const *outs,
                                      struct parity_baseline_result *br); /* verify.h */
} parity_op_t;

typedef enum {
    PARITY_VARIANT_ROUNDED = 1, /* cause intermediate-rounding */
    PARITY_VARIANT_IGNORED,     /* cause ignored-input */
    PARITY_VARIANT_FLUSHED,     /* cause flush-to-zero */
    PARITY_VARIANT_TIE,         /* cause tie: top-k / argmax ties at the boundary broken another way */
    PARITY_VARIANT_STRUCTURAL,  /* cause structural: a wrong index or selection (id + 1, a mask) */
    PARITY_VARIANT_PARAMETER    /* cause parameter, a discrete one: a switch of the op set the other
                                   way (renormalise the top-k weights or not) */
} parity_variant_kind_t;

/* Flags of an op's parameter (parity_op_t params[].flags). */
#define PARITY_PARAM_NONE 1    /* "none" (param_ref's value INFINITY) is a candidate: a softcap
                                  not applied */
#define PARITY_PARAM_INTEGER 2 /* an integer (a divisor): the fit must resolve integers, and the
                                  fitted value is reported rounded to one */
#define PARITY_PARAM_FACTOR 4  /* the parameter only scales the output (dK's final scale): its
                                  fit is a whole-output factor, said so in the detail */

/* x rounded to format f (bf16, fp16) as variant_ref's dir says: 0 nearest-even, -1 the largest
 * value of f at most x, +1 the smallest at least x (x itself where f holds it). */
double parity_variant_round(const parity_format_t *f, double x, int dir);

/* The registry. The ops and their presets are static: never freed, valid for the process;
 * parity_op_find / parity_op_find_preset return NULL for an unknown name. */
int parity_op_count(void);
const parity_op_t *parity_op_at(int i);
const parity_op_t *parity_op_find(const char *name);
const parity_workload_t *parity_op_find_preset(const parity_op_t *op, const char *name);
/* Resolve a workload name: a preset ("text") or a preset at another shape ("text@NxD" or
 * "text@NxDxV", N tokens, D hidden size, V vocabulary; the shape as parity_shape_parse reads
 * it). out->name points into out->label for derived names, so re-point it after copying the
 * struct. PARITY_E_NOTFOUND for an unknown preset, PARITY_E_INVALID for a malformed or absurd
 * shape (trailing characters, an empty or zero size, N*D or V*D above 2^31). The _ex form also
 * writes why into diag: "workload 'text@64x32abc': ...", naming the text as given. */
parity_status_t parity_op_workload(const parity_op_t *op, const char *name, parity_workload_t *out);
parity_status_t parity_op_workload_ex(const parity_op_t *op, const char *name, parity_workload_t *out,
                                      parity_diag_t *diag);

/* The one parser of shapes ("NxD", "NxDxV"), for the library and the CLI alike: min_dims to
 * max_dims (1..8) sizes joined by a lower-case 'x', each a plain decimal integer in 1..2^31
 * (digits only: no sign, blank, hex or empty field; "010" is ten). The sizes go to dims[0..n),
 * their count to *n_dims (may be NULL). PARITY_E_INVALID with the reason in diag ("'64x32abc':
 * 'abc' after 32 is not part of a shape (expected NxD or NxDxV: ...)") for anything else. */
parity_status_t parity_shape_parse(const char *text, int64_t *dims, int min_dims, int max_dims,
                                   int *n_dims, parity_diag_t *diag);

/* Fill an ABI call of case c on outputs outs: in[] and out[] (caller storage of
 * PARITY_OP_MAX_ARGS entries) receive the views the call points to. call->n_threads is n_threads
 * when > 0; 0 (or less) means all cores: the online CPUs up to 64, or $PARITY_THREADS. The call
 * borrows c's attribute arrays, the op's name and in[]/out[]: valid while c, outs and those
 * arrays are. */
void parity_case_make_call(const parity_case_t *c, parity_abi_tensor_t *in, parity_abi_tensor_t *out,
                           parity_tensor_t *const *outs, int n_threads, uint64_t seed,
                           parity_abi_call_t *call);

/* Build a case (calls op->build). On PARITY_OK *out is a new case owned by the caller, released
 * with parity_case_free (NULL ok) together with everything it holds (inputs, references); the
 * case borrows op and wl (c->op, c->wl point to them): wl, often a caller's stack struct from
 * parity_op_workload, must outlive the case. On error *out is NULL. */
parity_status_t parity_case_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                  parity_dtype_t in_dtype, parity_case_t **out,
                                  parity_diag_t *diag);
void parity_case_free(parity_case_t *c);

/* The fp64 embedding-backward reference: row r of dE (r = slot[ids[i]], or ids[i] when slot is
 * NULL) += dY[i, :], and s_abs (optional) += |dY[i, :]|. dY is (N, D) f32, bf16 or f64; dE and
 * s_abs are caller-owned, zeroed, (rows, D) doubles. Each element sums in ascending i whatever
 * n_threads is (0: all cores), so results are deterministic. PARITY_E_INVALID on bad args. */
parity_status_t parity_ref_embedding_bwd(const parity_abi_tensor_t *dy, const int32_t *ids,
                                         const int64_t *slot, double *dE, double *s_abs,
                                         int n_threads);

/* Helpers for op implementations. */
/* calloc, with the pages of a large block faulted in writable at once: a reference array that is
 * read before it is written (`ref[j] += t`) otherwise maps the shared zero page on the read and
 * takes a copy-on-write fault on the write, and in a threaded pass each such fault flushes the
 * other cores' TLBs (an interprocessor interrupt per page; docs/check-speed.md). Same contents. */
void *parity_calloc_faulted(size_t n, size_t size);
parity_status_t parity_ref_output_alloc(parity_ref_output_t *r, const char *name,
                                        const char *row_kind, int64_t rows, int64_t cols,
                                        int sparse, int64_t n_slots, int with_s_up);
/* Store a double array into a float tensor (rounding to its dtype, nearest-even). */
void parity_store_f64(parity_tensor_t *t, const double *src);

#ifdef __cplusplus
}
#endif
#endif

/* Internals shared by the declared-op files: custom_op.c (loading, workloads, values),
 * custom_tol.c (reference calls, what the tolerances need), custom_engine.c (the declared op as
 * a descriptor of the check engine: running and judging are src/verify's). */
#ifndef PARITY_CUSTOM_IMPL_H
#define PARITY_CUSTOM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "parity/custom_op.h"

/* Value variants of a workload: the roles' values (CV_BASE..CV_TEXT), and the baseline
 * verifiers' own input schemes (custom_baseline.c), which ignore the roles of float inputs as
 * those verifiers' tests do: torch.randn (SOL-ExecBench's with norm weights all ones),
 * torch.rand U[0,1), integers in [-4,4] (Composable Kernel). */
enum { CV_BASE, CV_ZIPF, CV_OUTLIER, CV_MAGNITUDE, CV_TEXT, CV_BL_RANDN, CV_BL_SOL, CV_BL_RAND01, CV_BL_INT,
       CV_GIVEN /* the caller's values: parity_custom_op_given */ };

typedef struct {
    char name[32];
    int variant, production;
    int draw; /* CV_GIVEN: the variant of the float inputs the caller leaves to the roles */
    int64_t size[PARITY_CUSTOM_MAX_ARGS]; /* per dimension */
} custom_workload_t;

typedef struct {
    const char *name;
    int ndim, dim[PARITY_ABI_MAX_DIMS];
} custom_arg_t;

struct parity_custom_op {
    /* The op as the check engine sees it (custom_engine.c): an ordinary descriptor whose build
     * makes a case from the declaration, and its workloads as presets (n = the size of the
     * dimension the shape neighbours move, nbr_dim). First, so the descriptor finds its op. */
    parity_op_t desc;
    parity_workload_t presets[PARITY_CUSTOM_MAX_WORKLOADS];
    parity_workload_t bl_presets[PARITY_N_BASELINES]; /* the baseline rules' own inputs */
    custom_workload_t bl_wl[PARITY_N_BASELINES];
    int nbr_dim;
    char error_model[160];
    void *handle;
    const parity_abi_op_decl_t *d;
    parity_custom_ref_fn ref; /* parity_custom_op_declare's reference (NULL: d->reference) */
    void *ref_arg;
    int n_dims;
    const char *dim_name[PARITY_CUSTOM_MAX_ARGS];
    int fixed[PARITY_CUSTOM_MAX_ARGS]; /* the odd workload leaves the dimension alone */
    int n_in, n_out;
    custom_arg_t in[PARITY_CUSTOM_MAX_ARGS], out[PARITY_CUSTOM_MAX_ARGS];
    int role[PARITY_CUSTOM_MAX_ARGS], vocab[PARITY_CUSTOM_MAX_ARGS];
    int n_red[PARITY_CUSTOM_MAX_ARGS], red[PARITY_CUSTOM_MAX_ARGS][PARITY_ABI_MAX_DIMS];
    int multilinear;
    int n_wl;
    custom_workload_t wl[PARITY_CUSTOM_MAX_WORKLOADS];
    /* parity_custom_op_given: one workload of the caller's values (given_wl.name empty: none),
     * float inputs as doubles, token ids as int64, owned here. */
    custom_workload_t given_wl;
    double *given[PARITY_CUSTOM_MAX_ARGS];
    int64_t *given_ids[PARITY_CUSTOM_MAX_ARGS];
    /* The cause classifier's hooks (custom_cause.c; docs/custom-ops.md, "Causes"): the refittable
     * parameters (a plugin's attributes, or parity_custom_op_params') and the intermediates a
     * reference marks (parity_custom_op_intermediates), each a ROUNDED variant of the descriptor. */
    int n_params;
    char param_name[PARITY_CUSTOM_MAX_PARAMS][32];
    double param_value[PARITY_CUSTOM_MAX_PARAMS];
    int n_inter;
    char inter_name[PARITY_CUSTOM_MAX_INTERMEDIATES][32];
    char inter_what[PARITY_CUSTOM_MAX_INTERMEDIATES][64];
    /* Intermediates the contract allows rounded (parity_custom_op_rounded): name and format. */
    int n_rounded;
    char rounded_name[PARITY_CUSTOM_MAX_INTERMEDIATES][32];
    char rounded_fmt[PARITY_CUSTOM_MAX_INTERMEDIATES][8];
};

/* One workload's data: inputs (exact values and storage in the contract dtype), the fp64
 * reference and the per-element tolerance of every output. */
typedef struct {
    const parity_custom_op_t *op;
    const custom_workload_t *wl;
    int dtype; /* the kernel's float input dtype */
    int64_t n_in[PARITY_CUSTOM_MAX_ARGS], n_out[PARITY_CUSTOM_MAX_ARGS];
    int64_t rows[PARITY_CUSTOM_MAX_ARGS], cols[PARITY_CUSTOM_MAX_ARGS]; /* output as rows x last axis */
    double *exact[PARITY_CUSTOM_MAX_ARGS];  /* float inputs: the stored values, exactly */
    int64_t *ids[PARITY_CUSTOM_MAX_ARGS];   /* token-id inputs */
    void *store[PARITY_CUSTOM_MAX_ARGS];    /* float inputs in dtype */
    double *ref[PARITY_CUSTOM_MAX_ARGS];
    double *tol[PARITY_CUSTOM_MAX_ARGS];    /* the empirical floor of the outputs without a
                                               multilinear reduction; NULL elsewhere */
    double *s_acc[PARITY_CUSTOM_MAX_ARGS];  /* sum |terms| (the reference on |inputs|) of the outputs
                                               with a multilinear reduction; NULL elsewhere */
    int64_t k[PARITY_CUSTOM_MAX_ARGS];      /* terms per element of those outputs (1 elsewhere) */
    int m_up[PARITY_CUSTOM_MAX_ARGS];       /* roundings per term of those outputs */
    char model[PARITY_CUSTOM_MAX_ARGS][48];
} custom_case_t;

size_t custom_dtype_size(int dtype);
int custom_is_float_role(int role);
int64_t custom_numel(const parity_custom_op_t *op, const custom_arg_t *a, const int64_t *size);
void custom_tensor(const parity_custom_op_t *op, const custom_arg_t *a, const int64_t *size, void *data,
                   int dtype, parity_abi_tensor_t *t);

/* custom_op.c: inputs of a workload (exact, ids, storage). */
parity_status_t custom_case_inputs(custom_case_t *c, uint64_t seed, parity_diag_t *diag);
void custom_case_free(custom_case_t *c);
double custom_decode(int dtype, const void *data, int64_t i);

/* custom_tol.c: the reference of a case and what its tolerances need: for an output with a
 * multilinear reduction the error model's data (k, m_up, s_acc: verify.c forms the tolerance),
 * otherwise the empirical floor (tol). Judging is the check engine's (custom_engine.c). */
parity_status_t custom_case_reference(custom_case_t *c, parity_diag_t *diag);
/* Output o's tolerance model on workload wl for float inputs in dtype, as the report names it:
 * "error-model k=512 m_up=0", "empirical-floor F=2". */
void custom_model_text(const parity_custom_op_t *op, const custom_workload_t *wl, int dtype, int o, char *buf,
                       size_t cap);
/* The plugin's reference on `vals` (one double array per float input; NULL: the case's exact
 * values) computed in dt (F64, or F32: the contract evaluation); out[o] receives n_out[o] doubles.
 * Returns the plugin's return code (PARITY_KERNEL_UNSUPPORTED: no evaluation in dt). */
int custom_reference(const custom_case_t *c, int dt, double *const *vals, double **out);
/* Call op's reference on tensors in/ou (the op's own counts), as parity calls a kernel: seed 1,
 * one thread, the declared attributes. Its PARITY_KERNEL_* return. */
int custom_call_reference(const parity_custom_op_t *op, parity_abi_tensor_t *in, parity_abi_tensor_t *ou);

/* custom_tol.c: the coordinate along dimension dim of element j of a tensor over dims a (row-major;
 * -1: a does not carry dim); and the k terms of output o's declared reduction (a multilinear op), one slice at a
 * time in C order over the reduced dimensions: fn(ctx, t, out) gets the F64 reference on slice t
 * (every float input carrying a reduced dimension zeroed off the slice), so out[o][e] is term t of
 * element e. Returns 0, or the first non-zero return of the reference or of fn. */
int64_t custom_coord(const custom_case_t *c, const custom_arg_t *a, int64_t j, int dim);
int custom_for_each_term(const custom_case_t *c, int o, int (*fn)(void *ctx, int64_t t, double *const *out),
                         void *ctx);

/* custom_engine.c: the declared op as a descriptor of the check engine (filled at load), and the
 * engine's judge on a declared case's outputs given as fp32 arrays (the power self-test's
 * mutants): the largest err/tol over every output element. */
parity_status_t custom_desc_init(parity_custom_op_t *op, parity_diag_t *diag);
double custom_judge_max_q(const custom_case_t *c, const float *const *outputs);
/* custom_op.c: the declaration loaded and parsed, or declared and parsed, without the engine's
 * descriptor (the public parity_custom_op_load / _declare, custom_engine.c, add it); and the
 * declared case the engine built (parity_case_t.priv): its custom_case_t. */
parity_status_t custom_op_load(const char *path, const char *name, parity_custom_op_t **out,
                               parity_diag_t *diag);
parity_status_t custom_op_declare(const parity_abi_op_decl_t *decl, parity_custom_ref_fn ref, void *arg,
                                  parity_custom_op_t **out, parity_diag_t *diag);
const custom_case_t *custom_case_of(const parity_case_t *c);
/* What a declared case owns beside the parity_case_t: the declared op's own arrays, and the
 * diagnosis rows' terms, evaluated once for the six emulations of one output. */
typedef struct {
    custom_workload_t wl; /* the sizes the case was built at (a shape neighbour's differ) */
    custom_case_t cc;
    int t_out;
    const int64_t *t_rows;
    int64_t t_n, t_k;
    double *terms; /* t_k x (t_n x cols) fp32 terms, term-major */
} desc_priv_t;


/* custom_cause.c: the descriptor's param_* and variants (op.h) from op's parameters and
 * intermediates (called by custom_desc_init and when they change). */
void custom_cause_init(parity_custom_op_t *op);
/* custom_trial.c: the attribute values the reference is called with under the current trial
 * (vals: op->d's, or buf with the trial's parameter set, buf holding d->n_attrs entries); and the
 * trial the references on this thread run under from now on (NULL: none), returning the previous
 * one, to be entered again after. */
const double *custom_trial_attrs(const parity_custom_op_t *op, double *buf);
parity_custom_trial_t *custom_trial_enter(parity_custom_trial_t *t);
/* custom_tol.c: the tolerance the contract's rounded intermediates add (parity_custom_op_rounded), onto case
 * c's empirical floors (c->tol): per element, the largest |reference with the intermediate rounded
 * to either neighbour in its format - reference|, summed over the rounded intermediates.
 * PARITY_E_FORMAT when the reference fails or never marks one of them (diag says which). */
parity_status_t custom_case_rounded_tol(custom_case_t *c, parity_diag_t *diag);

/* custom_baseline.c: the value variant (CV_BL_*) of baseline rule b's inputs. */
int custom_baseline_variant(int b);

#endif

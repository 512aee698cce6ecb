/* Internal: the attention family's shared pieces: the forward's workload generation and fp64 row
 * reference (work: 5k doubles), ops/attention/attention.c; the backward's fp64 reference (one
 * call, any H), ops/attention/attention_bwd.c. */
#ifndef PARITY_OPS_ATTENTION_H
#define PARITY_OPS_ATTENTION_H

#include <stdint.h>

#include "parity/op.h"
#include "parity/workload.h"

/* The family's workload parameters (the backward draws the forward's Q, K, V from the same
 * workload): T tokens, Dh head size, H heads are the workload's n, d, v. `parity ops
 * attention_fwd --workloads` prints them. */
typedef struct {
    parity_vals_t qk;      /* Q and K entries: N(0,1) or U[0,1) times the scale */
    parity_vals_t v;       /* V entries */
    int outliers;          /* outlier channels of Dh, the same in Q and K of a head
                              (qk.kind PARITY_VALS_OUTLIER: massive activations) */
    double outlier_factor; /* their factor */
    int causal;            /* 1: the causal mask */
    double softcap;        /* c of the softcap c tanh(s / c); 0 none */
    int peaks;             /* attended keys per query whose raw score is set to U[peak - 5, peak + 5]
                              by adding a multiple of the key to the query (trained heads put a few
                              keys at scores of 20-30) */
    double peak;           /* their level */
} att_params_t;
extern const parity_workload_family_t att_family;
/* The family's cases (att_cases), each a parameter struct the forward's and the backward's presets
 * share at their own shapes. */
enum {
    ATT_CASE_LONG_CAUSAL,
    ATT_CASE_SOFTCAP,
    ATT_CASE_OUTLIER_CHANNELS,
    ATT_CASE_ODD_T1031,
    ATT_CASE_NEAR_ZERO,
    ATT_CASE_PROD_LLAMA3,
    ATT_CASE_EXACT,
    ATT_CASE_X1E_3,
    ATT_CASE_X64,
    ATT_CASE_NEAR_MAX,
    ATT_CASE_SUBNORMAL,
    ATT_CASE_SOL_EXECBENCH,
    ATT_CASE_KERNELBENCH,
    ATT_CASE_ASSERT_CLOSE,
    ATT_CASE_N
};
extern const att_params_t att_cases[ATT_CASE_N];

/* The family's catalog table (kernels.c). */
extern const parity_abi_kernel_t parity_catalog_attention[];
extern const int parity_catalog_attention_count;

void parity_ref_attention_bwd(const double *Q, const double *K, const double *V, const double *O,
                              const double *dO, const double *LSE, int64_t H, int64_t T, int64_t dh,
                              double scale, double softcap, int causal, double *dQ, double *dK,
                              double *dV);
parity_status_t parity_attention_gen(const parity_workload_t *wl, uint64_t seed, parity_dtype_t dt,
                                     parity_case_t *c, double **Q, double **K, double **V,
                                     parity_diag_t *diag);
void parity_ref_attention_row(const double *q, const double *K, const double *V, int64_t k,
                              int64_t dh, double scale, double softcap, double *o, double *lse,
                              double *o_sacc, double *o_sup, double *lse_sup, double *work);
/* The same with the scores scale·(q·k) given (k values, before the softcap; NULL: computed in
 * fp64): the reference of a kernel whose scores are those (the diagnosis's variants, op.h). */
void parity_ref_attention_row_scores(const double *q, const double *K, const double *V, int64_t k,
                                     int64_t dh, double scale, double softcap, const double *given,
                                     double *o, double *lse, double *o_sacc, double *o_sup,
                                     double *lse_sup, double *work);

/* The family's parameters (op.h params): the softmax scale and the softcap, their values the
 * case's attributes (parity_attention_param_value; a softcap of 0 is off and not refit). */
#define PARITY_ATTENTION_PARAMS {{"scale", 0, 0}, {"softcap", 0, PARITY_PARAM_NONE}}
double parity_attention_param_value(const parity_case_t *c, int which);

#endif

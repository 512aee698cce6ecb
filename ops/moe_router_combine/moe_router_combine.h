/* Internal: the MoE router + combine family's shared pieces: the forward's fp64 reference row,
 * selection margin and row data, ops/moe_router_combine/reference.c; the build counts (c->priv),
 * ops/moe_router_combine/moe_router_combine.c; the backward's fp64 reference row,
 * ops/moe_router_combine/moe_router_combine_bwd.c. */
#ifndef PARITY_OPS_MOE_ROUTER_COMBINE_H
#define PARITY_OPS_MOE_ROUTER_COMBINE_H

#include <stdint.h>

#include "parity/kernel_abi.h"
#include "parity/op.h"
#include "parity/workload.h"

/* The family's workload parameters (the backward draws the forward's inputs from the same
 * workload): N tokens, D hidden size, E experts are the workload's n, d, v. `parity ops
 * moe_router_combine --workloads` prints them. */
typedef struct {
    parity_vals_t logits;     /* router logits (N,E): N(0,1) or U[0,1) times the scale */
    parity_vals_t expert_out; /* expert outputs y (N,E,D) */
    int outliers;             /* the same outlier channels in every expert's output
                                 (expert_out.kind PARITY_VALS_OUTLIER: massive activations) */
    double outlier_factor;    /* their factor */
    double skew;              /* hot experts: each expert's logit gets -skew ln(1 + rank), ranks a
                                 seeded permutation (popularity falls like rank^-skew); 0 none */
    int k;                    /* experts per token */
    int renorm;               /* 1: the top-k weights divided by their sum */
    double ties;              /* fraction of tokens whose (k+1)-th largest logit is set to the
                                 k-th's value (an exact tie at the boundary) */
} mrc_params_t;
extern const parity_workload_family_t mrc_family;
/* The family's cases (mrc_cases), each a parameter struct the forward's and the backward's presets
 * share at their own shapes. */
enum {
    MRC_CASE_MIXTRAL,
    MRC_CASE_SKEWED,
    MRC_CASE_E256_TOP8,
    MRC_CASE_BF16_TIES,
    MRC_CASE_GRAD_SCALE,
    MRC_CASE_OUTLIER_ODD_D,
    MRC_CASE_PROD_DSV3,
    MRC_CASE_EXACT,
    MRC_CASE_X1E_3,
    MRC_CASE_X64,
    MRC_CASE_NEAR_MAX,
    MRC_CASE_SUBNORMAL,
    MRC_CASE_SOL_EXECBENCH,
    MRC_CASE_KERNELBENCH,
    MRC_CASE_ASSERT_CLOSE,
    MRC_CASE_N
};
extern const mrc_params_t mrc_cases[MRC_CASE_N];

/* The family's catalog tables (kernels.c, kernels_bwd.c). */
extern const parity_abi_kernel_t parity_catalog_moe_router_combine[],
    parity_catalog_moe_router_combine_bwd[];
extern const int parity_catalog_moe_router_combine_count, parity_catalog_moe_router_combine_bwd_count;

void parity_ref_mrc_row(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm,
                        int32_t *sel, double *w, double *gates, double *out, double *cond);
/* parity_ref_mrc_row with the selection sel (k experts in rank order) given, not computed: the
 * diagnosis's variants (another tie rule, probabilities rounded) select otherwise. */
void parity_ref_mrc_row_sel(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm,
                            const int32_t *sel, double *w, double *gates, double *out, double *cond);
/* One token's error-model data from its selection, weights, conditions and reference out row
 * (moe_router_combine.c, as the build forms it): out's ref, s_acc, s_up (d each), gates' s_acc and
 * s_up (e each). */
void parity_mrc_row_data(const double *y, int64_t e, int64_t d, int k, const int32_t *sel,
                         const double *w, const double *cond, const double *outr, double *o_ref,
                         double *o_sa, double *o_su, double *g_sa, double *g_su);
/* The forward's diagnosis variants (variants.c; op.h variant_ref). */
parity_status_t parity_mrc_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up);
double parity_mrc_margin(const double *x, int64_t e, double t);
typedef struct {
    int64_t snapped_rows, tied_rows;
} parity_mrc_stats_t;
void parity_ref_mrc_bwd_row(const double *x, const double *y, const double *dout, int64_t e,
                            int64_t d, int k, int renorm, int32_t *sel, double *w, double *q,
                            double *g, double *dlog, double *dexp);

#endif

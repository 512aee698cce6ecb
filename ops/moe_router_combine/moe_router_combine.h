/* Internal: the MoE router + combine family's shared pieces: the forward's fp64 reference row,
 * selection margin and row data, ops/moe_router_combine/reference.c; the build counts (c->priv),
 * ops/moe_router_combine/moe_router_combine.c; the backward's fp64 reference row,
 * ops/moe_router_combine/moe_router_combine_bwd.c. */
#ifndef PARITY_OPS_MOE_ROUTER_COMBINE_H
#define PARITY_OPS_MOE_ROUTER_COMBINE_H

#include <stdint.h>

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

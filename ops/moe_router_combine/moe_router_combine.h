/* Internal: the MoE router + combine family's shared pieces: the forward's fp64 reference row,
 * selection margin and build counts (c->priv), ops/moe_router_combine/moe_router_combine.c; the
 * backward's fp64 reference row, ops/moe_router_combine/moe_router_combine_bwd.c. */
#ifndef PARITY_OPS_MOE_ROUTER_COMBINE_H
#define PARITY_OPS_MOE_ROUTER_COMBINE_H

#include <stdint.h>

void parity_ref_mrc_row(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm,
                        int32_t *sel, double *w, double *gates, double *out, double *cond);
double parity_mrc_margin(const double *x, int64_t e, double t);
typedef struct {
    int64_t snapped_rows, tied_rows;
} parity_mrc_stats_t;
void parity_ref_mrc_bwd_row(const double *x, const double *y, const double *dout, int64_t e,
                            int64_t d, int k, int renorm, int32_t *sel, double *w, double *q,
                            double *g, double *dlog, double *dexp);

#endif

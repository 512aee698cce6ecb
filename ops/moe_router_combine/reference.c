/* moe_router_combine's fp64 reference of one token: the selection by its own definition, the
 * weights, the combine, the selection margin, and a row's error-model data. Split from
 * moe_router_combine.c, whose op descriptor names the diagnosis's variants (variants.c), which
 * recompute this reference: both sit above this file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"

/* ---- the fp64 reference of one token ---------------------------------------------------------
 * Selection: the k largest LOGITS, equal logits by the lower expert id. exp is strictly
 * increasing, so this is the top-k of the exact probabilities with the tie rule of TensorRT-LLM /
 * vLLM / SGLang's topk_softmax kernels (docs/ops/moe_router_combine.md cites them); it never
 * depends on how probabilities round. The reference computes it by its own definition (ref_topk
 * below), sharing no code with the selection that the catalog kernels and the emulator use
 * (parity_moe_topk in src/moe/moe.c), so a bug there cannot hide in the reference too. */

/* Expert j's rank is the number of experts before it in the order (larger logit first, equal
 * logits by lower id); the experts of rank < k are the selection, in rank order. O(E^2) per row,
 * the definition itself. */
static void ref_topk(const double *x, int64_t e, int k, int32_t *sel)
{
    for (int64_t j = 0; j < e; j++) {
        int64_t rank = 0;
        for (int64_t i = 0; i < e; i++) rank += x[i] > x[j] || (x[i] == x[j] && i < j);
        if (rank < k) sel[rank] = (int32_t)j;
    }
}

double parity_mrc_margin(const double *x, int64_t e, double t)
{
    /* A faithful fp32 kernel's computed log-probability of expert j is log p_j + eps_j with
     * |eps_j| <= u(|x_j - m| + ln S + 8) (docs/ops/moe_router_combine.md, "Selection"): two
     * logits further apart than |eps_a| + |eps_b| keep their strict order in any faithful
     * kernel. This returns twice that bound for the logits near t (u = 2^-24). */
    double m = -INFINITY;
    for (int64_t j = 0; j < e; j++) m = x[j] > m ? x[j] : m;
    double ls = log((double)e); /* ln S <= ln E */
    return 2.0 * 0x1p-24 * (2.0 * (fabs(t - m) + ls + 8.0) + 1.0);
}

void parity_ref_mrc_row(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm,
                        int32_t *sel, double *w, double *gates, double *out, double *cond)
{
    ref_topk(x, e, k, sel);
    parity_ref_mrc_row_sel(x, y, e, d, k, renorm, sel, w, gates, out, cond);
}

void parity_ref_mrc_row_sel(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm,
                            const int32_t *sel, double *w, double *gates, double *out, double *cond)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < e; j++) m = x[j] > m ? x[j] : m;
    /* The normaliser: over all E experts, or over the k selected ones when renormalised (then
     * S cancels: w_j = e_j / Σ_sel e_l exactly). Neumaier-compensated, as in log_softmax. */
    int64_t nn = renorm ? k : e;
    double s = 0, c = 0, sd = 0;
    for (int64_t q = 0; q < nn; q++) {
        int64_t j = renorm ? sel[q] : q;
        double dj = x[j] - m, ej = exp(dj), t = s + ej;
        c += fabs(s) >= fabs(ej) ? (s - t) + ej : (ej - t) + s;
        s = t;
        sd += ej * -dj;
    }
    s += c;
    /* Per-weight absolute condition in units of w_j (docs/ops/moe_router_combine.md, "Gates"):
     * |d_j| for the rounding of x_j - m, the weighted |d_l| of the normaliser's terms, ln S twice
     * for exp(x - lse) forms, and 12 for the roundings of the two exps (2 ulp each), the
     * division and a renormalisation of probabilities (three more). */
    double base = sd / s + 2.0 * log(s) + 12.0;
    if (gates)
        for (int64_t j = 0; j < e; j++) gates[j] = 0;
    for (int q = 0; q < k; q++) {
        double dj = x[sel[q]] - m;
        w[q] = exp(dj) / s;
        if (gates) gates[sel[q]] = w[q];
        if (cond) cond[q] = fabs(dj) + base;
    }
    if (out)
        for (int64_t col = 0; col < d; col++) {
            double acc = 0;
            for (int q = 0; q < k; q++) acc += w[q] * y[(int64_t)sel[q] * d + col];
            out[col] = acc; /* k <= E double products and sums: 2^-53 k relative, negligible */
        }
}

/* gates: k = the normaliser's terms, s_acc = w (its relative error scales w), s_up = w*A; zero
 * with zero data elsewhere (an unselected gate must be exactly 0). out: the normaliser's and the
 * combine's accumulations (2 Σ|t|, k = max of both term counts), each term's own error
 * |t|(A + 1). */
void parity_mrc_row_data(const double *y, int64_t e, int64_t d, int k, const int32_t *sel,
                         const double *w, const double *cond, const double *outr, double *o_ref,
                         double *o_sa, double *o_su, double *g_sa, double *g_su)
{
    for (int64_t j = 0; j < e; j++) g_sa[j] = g_su[j] = 0;
    for (int64_t col = 0; col < d; col++) {
        double sa = 0, su = 0;
        for (int q = 0; q < k; q++) {
            double t = fabs(w[q] * y[(int64_t)sel[q] * d + col]);
            sa += t;
            su += t * (cond[q] + 1.0);
        }
        o_ref[col] = outr[col];
        o_sa[col] = 2.0 * sa;
        o_su[col] = su;
    }
    for (int q = 0; q < k; q++) {
        g_sa[sel[q]] = w[q];
        g_su[sel[q]] = w[q] * cond[q];
    }
}

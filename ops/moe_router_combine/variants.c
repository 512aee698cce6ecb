/* moe_router_combine's diagnosis variants (op.h variants[], variant_ref; docs/error-model.md
 * "Cause"): the forward's fp64 reference of given token rows recomputed as a kernel with one of
 * three planted-bug shapes computes it --
 *   0 tie:       top-k ties at the k-th expert broken toward the higher expert id (dir +1; dir -1
 *                is the op's rule, the lower id, so the classifier can let each row go either way)
 *   1 parameter: the renormalisation switch set the other way (renorm 1 where the op's is 0 and
 *                the reverse)
 *   2 rounded:   the router probabilities rounded to fmt (bf16: a softmax in bf16), the
 *                selection made on the rounded values (equal ones by the lower id), and when
 *                renormalised their sum and the weights rounded to fmt too, as a bf16 router does
 * with the error-model data (s_acc, s_up) the build gives the same selection and weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "parity/format.h"

/* The k largest of v (larger first; equal values by the lower id, or the higher with high),
 * in rank order: each index's rank counted, O(E^2), the definition itself. */
static void topk_rule(const double *v, int64_t e, int k, int high, int32_t *sel)
{
    for (int64_t j = 0; j < e; j++) {
        int64_t rank = 0;
        for (int64_t i = 0; i < e; i++) rank += v[i] > v[j] || (v[i] == v[j] && (high ? i > j : i < j));
        if (rank < k) sel[rank] = (int32_t)j;
    }
}

/* Probabilities as a fp32 kernel holds them, rounded to fmt, then the selection on them and the
 * weights (renormalised in fp32 in slot order, the sum and each weight rounded to fmt). */
static void rounded_route(const double *x, int64_t e, int k, int renorm, const parity_format_t *fmt,
                          double *p, int32_t *sel, double *w)
{
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < e; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < e; j++) s += exp(x[j] - m);
    for (int64_t j = 0; j < e; j++) p[j] = parity_variant_round(fmt, (float)(exp(x[j] - m) / s), 0);
    topk_rule(p, e, k, 0, sel);
    for (int q = 0; q < k; q++) w[q] = p[sel[q]];
    if (!renorm) return;
    float rs = 0.0f;
    for (int q = 0; q < k; q++) rs += (float)w[q];
    double rsf = parity_variant_round(fmt, rs, 0);
    for (int q = 0; q < k; q++) w[q] = parity_variant_round(fmt, (float)(w[q] / rsf), 0);
}

parity_status_t parity_mrc_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *Y = &c->inputs[1]->view;
    int64_t e = X->shape[1], d = Y->shape[2];
    int k = (int)c->attr_values[0], renorm = c->attr_values[1] != 0;
    if (which < 0 || which > 2 || (which == 2 && !fmt) || out < 0 || out > 1) return PARITY_E_UNSUPPORTED;
    int rn = which == 1 ? !renorm : renorm;
    /* The build's term count is the op's normaliser's (k or E); a variant with another one has its
     * accumulation part rescaled so that gamma_{n-1} s_acc reads gamma_{n'-1} (first order). */
    int64_t nn = renorm ? k : e, nv = rn ? k : e;
    double scale = nn > 1 ? (double)(nv > 1 ? nv - 1 : 1) / (double)(nn - 1) : 1.0;
    size_t nx = (size_t)e * (5 + (size_t)d) + 4 * (size_t)d + 3 * (size_t)k;
    double *x = malloc(nx * sizeof *x);
    int32_t *sel = malloc((size_t)k * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        return PARITY_E_NOMEM;
    }
    double *y = x + e, *p = y + e * d, *gr = p + e, *gsa = gr + e, *gsu = gsa + e, *outr = gsu + e,
           *ore = outr + d, *osa = ore + d, *osu = osa + d, *w = osu + d, *wx = w + k, *cond = wx + k;
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t i = rows[r];
        for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(X, i * e + j);
        if (out == 0)
            for (int64_t j = 0; j < e * d; j++) y[j] = parity_tensor_get(Y, i * e * d + j);
        if (which == 2) rounded_route(x, e, k, renorm, fmt, p, sel, wx);
        else topk_rule(x, e, k, which == 0 && dir > 0, sel);
        parity_ref_mrc_row_sel(x, out == 0 ? y : NULL, e, out == 0 ? d : 0, k, rn, sel, w, gr,
                               out == 0 ? outr : NULL, cond);
        if (which == 2) { /* the rounded weights replace the exact ones */
            for (int q = 0; q < k; q++) gr[sel[q]] = w[q] = wx[q];
            if (out == 0)
                for (int64_t col = 0; col < d; col++) {
                    double acc = 0;
                    for (int q = 0; q < k; q++) acc += w[q] * y[(int64_t)sel[q] * d + col];
                    outr[col] = acc;
                }
        }
        parity_mrc_row_data(y, e, out == 0 ? d : 0, k, sel, w, cond, outr, ore, osa, osu, gsa, gsu);
        int64_t cols = out == 0 ? d : e;
        const double *sr = out == 0 ? ore : gr, *ss = out == 0 ? osa : gsa, *su = out == 0 ? osu : gsu;
        for (int64_t j = 0; j < cols; j++) {
            ref[r * cols + j] = sr[j];
            s_acc[r * cols + j] = ss[j] * scale;
            if (s_up) s_up[r * cols + j] = su[j];
        }
    }
    free(x);
    free(sel);
    return PARITY_OK;
}

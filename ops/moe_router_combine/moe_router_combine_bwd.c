/* moe_router_combine_bwd: the backward of moe_router_combine (the MoE router's softmax, top-k
 * with the lower-id tie rule, optional renormalisation, and the combine of the selected experts'
 * outputs), with an fp64 reference and the error-model data derived in
 * docs/ops/moe_router_combine.md ("Backward"). Inputs: router_logits (N, E), expert_out
 * (N, E, D) and dout (N, D), the gradient of the combined output. Outputs: d_expert_out
 * (N, E, D) = w_e·dout for the selected experts and exactly 0 for the others, and d_logits (N, E),
 * the gradient through the routing weights (the selection itself is piecewise constant: no
 * gradient). Attributes k and renorm as in the forward.
 * Inputs: logits and expert outputs are the forward's own (its build is called on the same
 * workload, seed and dtype and its inputs taken over), so selection, ties and the near-tie snap
 * are identical to the forward's; dout is drawn here. The workload names are the forward's preset
 * names (its k / renorm table is keyed by them), at smaller shapes: d_expert_out has N·E·D
 * elements with three doubles of reference data each. Shape letters: N tokens (the workload's
 * n), D hidden (d), E experts (v), as in the forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "parity/format.h"
#include "parity/moe.h"

#define MRB_STREAM_DOUT 0x4d52424400000000ull

/* dout: per token a magnitude 10^U(-5,-3) times unit normals (gradient scale; a token's gradient
 * magnitude varies with its loss weight). Its own stream per token row. */
static void dout_row(uint64_t seed, int64_t i, int64_t d, double *o)
{
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, MRB_STREAM_DOUT + (uint64_t)i);
    double mag = pow(10.0, -3.0 - 2.0 * parity_rng_uniform(&rng));
    for (int64_t c = 0; c < d; c++) o[c] = parity_rng_normal(&rng) * mag;
}

/* ---- the fp64 reference of one token ---------------------------------------------------------
 * The forward's reference row gives the selection sel (k experts) and the weights w over it.
 * With q the softmax over the normaliser's set (the k selected when renorm, all E otherwise),
 * g_e = dout·y_e for selected e (0 elsewhere: g~) and G = Σ_{f sel} q_f g_f:
 *   d_expert_out[e] = w_e·dout (selected), 0 (unselected)
 *   d_logits[j]     = q_j (g~_j − G) for j in the normaliser's set, 0 outside it.
 * (∂q_e/∂x_j = q_e(δ_ej − q_j) on the set; docs/ops/moe_router_combine.md derives it.) The
 * D-term dots and the k-term G are plain double sums of exact-input products: relative error
 * ~2^-53·D, negligible against fp32's. dlog, dexp (k × D, slot order), g (E) and q (E) are
 * outputs; sel (k) and w (k) as parity_ref_mrc_row. */
void parity_ref_mrc_bwd_row(const double *x, const double *y, const double *dout, int64_t e,
                            int64_t d, int k, int renorm, int32_t *sel, double *w, double *q,
                            double *g, double *dlog, double *dexp)
{
    parity_ref_mrc_row(x, NULL, e, 0, k, renorm, sel, w, NULL, NULL, NULL);
    /* q over all E (raw probabilities) when not renormalised, compensated as the forward. */
    for (int64_t j = 0; j < e; j++) q[j] = 0;
    if (renorm) {
        for (int r = 0; r < k; r++) q[sel[r]] = w[r];
    } else {
        double m = -INFINITY, s = 0, c = 0;
        for (int64_t j = 0; j < e; j++) m = x[j] > m ? x[j] : m;
        for (int64_t j = 0; j < e; j++) {
            double ej = exp(x[j] - m), t = s + ej;
            c += fabs(s) >= fabs(ej) ? (s - t) + ej : (ej - t) + s;
            s = t;
        }
        s += c;
        for (int64_t j = 0; j < e; j++) q[j] = exp(x[j] - m) / s;
        for (int r = 0; r < k; r++) q[sel[r]] = w[r]; /* identical values, the forward's */
    }
    double G = 0;
    for (int64_t j = 0; j < e; j++) g[j] = 0;
    for (int r = 0; r < k; r++) {
        const double *yr = y + (int64_t)sel[r] * d;
        double acc = 0;
        for (int64_t c = 0; c < d; c++) acc += dout[c] * yr[c];
        g[sel[r]] = acc;
        G += w[r] * acc;
        if (dexp)
            for (int64_t c = 0; c < d; c++) dexp[(int64_t)r * d + c] = w[r] * dout[c];
    }
    for (int64_t j = 0; j < e; j++) dlog[j] = q[j] * (g[j] - G);
}

/* ---- building a case ------------------------------------------------------------------------ */

/* One token's reference and error-model data: d_expert_out's e x d block (de_*) and d_logits'
 * e values (dl_*), as build forms them for selection rule (lower id), renorm, and -- dense, a
 * diagnosis variant -- the unselected experts' d_expert_out given p_j dout (the full softmax's
 * probability, as a backward that multiplies by the unmasked probabilities). sc: scratch of
 * 6 e + d (1 + k) + k doubles, sel: k. */
static void bwd_token(const double *x, const double *y, const double *dout, int64_t e, int64_t d,
                      int k, int renorm, int dense, double *sc, int32_t *sel, double *de_ref,
                      double *de_sa, double *de_su, double *dl_ref, double *dl_sa, double *dl_su)
{
    double *q = sc, *gg = q + e, *dlog = gg + e, *A = dlog + e, *a = A + e, *pf = a + e,
           *dexp = pf + e, *w = dexp + (int64_t)k * d;
    parity_ref_mrc_bwd_row(x, y, dout, e, d, k, renorm, sel, w, q, gg, dlog, dexp);
    /* The forward's per-weight condition A_j (in units of u·w_j), for every expert of the
     * normaliser's set: the forward's formula, whose data only the selected get from
     * parity_ref_mrc_row; computed here for all (docs, "Backward", d_logits). */
    double m = -INFINITY;
    for (int64_t j = 0; j < e; j++) m = x[j] > m ? x[j] : m;
    double s = 0, sd = 0, sf = 0, sdf = 0;
    for (int64_t j = 0; j < e; j++) {
        int in = !renorm;
        for (int r = 0; r < k && !in; r++) in = sel[r] == (int32_t)j;
        double ej = exp(x[j] - m);
        sf += ej;
        sdf += ej * (m - x[j]);
        if (!in) continue;
        s += ej;
        sd += ej * (m - x[j]);
    }
    double base = sd / s + 2.0 * log(s) + 12.0, base_f = sdf / sf + 2.0 * log(sf) + 12.0;
    for (int64_t j = 0; j < e; j++) {
        A[j] = (m - x[j]) + base;
        pf[j] = exp(x[j] - m) / sf;
    }
    int64_t nn = renorm ? k : e; /* the normaliser's terms */
    /* d_expert_out: one weight times one dout element. The weight carries the forward's
     * gate error γ̃_{n−1}·w + u·w·A; the product one rounding. k = n, s_acc = |w dout|,
     * s_up = |w dout|(A + 1). Unselected rows: ref 0, no terms (must be exactly 0). The dense
     * variant's unselected rows: p_j dout, whose normaliser has E terms (s_acc scaled from the
     * row's n - 1 to E - 1, first order) and whose A is the full softmax's. */
    for (int64_t j = 0; j < e; j++) {
        int selj = 0;
        for (int r = 0; r < k; r++) selj |= sel[r] == (int32_t)j;
        double Af = (m - x[j]) + base_f, sce = nn > 1 ? (double)(e - 1) / (double)(nn - 1) : 1.0;
        for (int64_t c = 0; c < d; c++) {
            double v = dense && !selj ? pf[j] * dout[c] : 0;
            de_ref[j * d + c] = v;
            de_sa[j * d + c] = fabs(v) * sce;
            de_su[j * d + c] = fabs(v) * (Af + 1.0);
        }
    }
    /* d_logits: the D-term dots a_f = Σ|dout·y_f|, G's k terms |q_f g_f|, and the weights'
     * errors (docs, "Backward"). K = max(D, n, k): one γ̃ covers the three accumulations. */
    double sq_a = 0, sq_g = 0, sq_ga = 0;
    for (int r = 0; r < k; r++) {
        int64_t j = sel[r];
        const double *yr = y + j * d;
        double aj = 0;
        for (int64_t c = 0; c < d; c++) aj += fabs(dout[c] * yr[c]);
        a[r] = aj;
        sq_a += q[j] * aj;
        sq_g += q[j] * fabs(gg[j]);
        sq_ga += q[j] * fabs(gg[j]) * A[j];
        for (int64_t c = 0; c < d; c++) {
            double t = fabs(w[r] * dout[c]);
            de_ref[j * d + c] = dexp[(int64_t)r * d + c];
            de_sa[j * d + c] = t;
            de_su[j * d + c] = t * (A[j] + 1.0);
        }
    }
    double G = 0;
    for (int r = 0; r < k; r++) G += w[r] * gg[sel[r]];
    for (int64_t j = 0; j < e; j++) {
        double *ra = dl_sa + j, *ru = dl_su + j;
        dl_ref[j] = dlog[j];
        if (q[j] == 0) { /* outside the normaliser's set (renorm, unselected): exactly 0 */
            *ra = *ru = 0;
            continue;
        }
        double aj = 0;
        for (int r = 0; r < k; r++)
            if (sel[r] == (int32_t)j) aj = a[r];
        double diff = fabs(gg[j] - G);
        *ra = q[j] * (diff + aj + sq_a + 2.0 * sq_g);
        *ru = q[j] * (diff * (A[j] + 1.0) + aj + sq_a + sq_g + sq_ga) + fabs(dlog[j]);
    }
}

typedef struct {
    parity_case_t *c;
    int k, renorm;
    int64_t e, d;
    int failed;
} bwd_ctx_t;

static void build_rows(void *p, int64_t b, int64_t end, int thread)
{
    (void)thread;
    bwd_ctx_t *g = p;
    int64_t e = g->e, d = g->d;
    int k = g->k;
    double *x = malloc(((size_t)e * (7 + (size_t)d) + (size_t)d * (2 + (size_t)k) + (size_t)k) * sizeof *x);
    int32_t *sel = malloc((size_t)k * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        g->failed = 1;
        return;
    }
    double *y = x + e, *dout = y + e * d, *sc = dout + d;
    const parity_abi_tensor_t *X = &g->c->inputs[0]->view, *Y = &g->c->inputs[1]->view,
                              *DO = &g->c->inputs[2]->view;
    parity_ref_output_t *DE = &g->c->ref[0], *DL = &g->c->ref[1];
    int64_t nn = g->renorm ? k : e;
    for (int64_t i = b; i < end; i++) {
        for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(X, i * e + j);
        for (int64_t j = 0; j < e * d; j++) y[j] = parity_tensor_get(Y, i * e * d + j);
        for (int64_t c = 0; c < d; c++) dout[c] = parity_tensor_get(DO, i * d + c);
        for (int64_t j = 0; j < e; j++) DE->k[i * e + j] = nn;
        DL->k[i] = nn > d ? nn : d;
        bwd_token(x, y, dout, e, d, k, g->renorm, 0, sc, sel, DE->ref + i * e * d, DE->s_acc + i * e * d,
                  DE->s_up + i * e * d, DL->ref + i * e, DL->s_acc + i * e, DL->s_up + i * e);
    }
    free(x);
    free(sel);
}

/* The diagnosis's variants (op.h variant_ref; docs/error-model.md "Cause"): 0 the unselected
 * experts' d_expert_out given p_j dout (structural: the gradient reaches experts the top-k did
 * not select), 1 the renorm switch set the other way (parameter). Rows of d_expert_out are
 * (token, expert) pairs, of d_logits tokens. */
static parity_status_t mrb_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    if (which < 0 || which > 1 || out < 0 || out > 1 || (which == 0 && out != 0)) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *Y = &c->inputs[1]->view,
                              *DO = &c->inputs[2]->view;
    int64_t e = X->shape[1], d = Y->shape[2];
    int k = (int)c->attr_values[0], renorm = c->attr_values[1] != 0, rn = which == 1 ? !renorm : renorm;
    /* The flipped switch changes the normaliser's term count: s_acc rescaled from the op's
     * n - 1 to the variant's (first order in gamma_{n-1}). */
    int64_t nn = renorm ? k : e, nv = rn ? k : e, kn = nn > d ? nn : d, kv = nv > d ? nv : d;
    double sde = nn > 1 ? (double)(nv > 1 ? nv - 1 : 1) / (double)(nn - 1) : 1.0;
    double sdl = kn > 1 ? (double)(kv > 1 ? kv - 1 : 1) / (double)(kn - 1) : 1.0;
    size_t blk = (size_t)e * (size_t)d;
    double *x = malloc(((size_t)e * (10 + (size_t)d) + 3 * blk + (size_t)d * (2 + (size_t)k) + (size_t)k) *
                       sizeof *x);
    int32_t *sel = malloc((size_t)k * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        return PARITY_E_NOMEM;
    }
    double *y = x + e, *dout = y + blk, *dr = dout + d, *da = dr + blk, *du = da + blk, *lr = du + blk,
           *la = lr + e, *lu = la + e, *sc = lu + e;
    int64_t last = -1;
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t i = out == 0 ? rows[r] / e : rows[r];
        if (i != last) {
            last = i;
            for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(X, i * e + j);
            for (int64_t j = 0; j < e * d; j++) y[j] = parity_tensor_get(Y, i * e * d + j);
            for (int64_t col = 0; col < d; col++) dout[col] = parity_tensor_get(DO, i * d + col);
            bwd_token(x, y, dout, e, d, k, rn, which == 0, sc, sel, dr, da, du, lr, la, lu);
        }
        int64_t cols = out == 0 ? d : e, off = out == 0 ? (rows[r] % e) * d : 0;
        const double *sr = out == 0 ? dr : lr, *ss = out == 0 ? da : la, *su = out == 0 ? du : lu;
        for (int64_t j = 0; j < cols; j++) {
            ref[r * cols + j] = sr[off + j];
            s_acc[r * cols + j] = ss[off + j] * (out == 0 ? sde : sdl);
            if (s_up) s_up[r * cols + j] = su[off + j];
        }
    }
    free(x);
    free(sel);
    return PARITY_OK;
}

static parity_status_t mrb_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    (void)op;
    /* The forward's inputs: same workload, seed and dtype, so the same logits (with its ties and
     * near-tie snap) and expert outputs; its reference is discarded. */
    parity_case_t *fc = NULL;
    parity_status_t st = parity_case_build(&parity_op_moe_router_combine, wl, seed, dt, &fc, diag);
    if (st != PARITY_OK) return st;
    c->inputs[0] = fc->inputs[0];
    c->inputs[1] = fc->inputs[1];
    fc->inputs[0] = fc->inputs[1] = NULL;
    int k = (int)fc->attr_values[0], renorm = fc->attr_values[1] != 0;
    parity_case_free(fc);
    int64_t n = wl->n, d = wl->d, e = wl->v;
    int64_t ds[2] = {n, d};
    c->inputs[2] = parity_tensor_new("dout", dt, 2, ds);
    if (!c->inputs[2]) return PARITY_E_NOMEM;
    {
        double *row = malloc((size_t)d * sizeof *row);
        if (!row) return PARITY_E_NOMEM;
        for (int64_t i = 0; i < n; i++) {
            dout_row(seed, i, d, row);
            for (int64_t col = 0; col < d; col++) parity_tensor_set(&c->inputs[2]->view, i * d + col, row[col]);
        }
        free(row);
    }
    st = parity_ref_output_alloc(&c->ref[0], "d_expert_out", "token-expert", n * e, d, 0, 0, 1);
    if (st == PARITY_OK) st = parity_ref_output_alloc(&c->ref[1], "d_logits", "token", n, e, 0, 0, 1);
    if (st != PARITY_OK) return st;
    /* m_up = 2 as the forward: the first-order bounds are u·(...); γ̃_2 doubles them. */
    c->ref[0].m_up = c->ref[1].m_up = 2;
    c->out_ndim[0] = 3;
    c->out_shape[0][0] = n;
    c->out_shape[0][1] = e;
    c->out_shape[0][2] = d;
    c->out_ndim[1] = 2;
    c->out_shape[1][0] = n;
    c->out_shape[1][1] = e;
    c->n_attrs = 2;
    c->attr_names[0] = "k";
    c->attr_values[0] = k;
    c->attr_names[1] = "renorm";
    c->attr_values[1] = renorm;
    bwd_ctx_t g = {c, k, renorm, e, d, 0};
    parity_parallel_for(n, 0, build_rows, &g);
    return g.failed ? PARITY_E_NOMEM : PARITY_OK;
}

/* ---- diagnosis and parity power: the op recomputed with a chosen accumulator ----------------
 * As the catalog's fp32 kernel forms its terms (kernels_bwd.c, M_FP32: the same selection, expf
 * from the top-1 logit, fp32 products and quotients), with the reduction that makes the output
 * accumulated in `acc` in `order` and the others as the fp32 kernel does them (sequential fp32),
 * as the forward's emulation does: d_expert_out rows (token, expert) = w·dout, whose only
 * reduction is the weights' normaliser (over the k selected when renorm, all E otherwise);
 * d_logits rows (tokens) = q·(g − G), whose long reductions are the D-term dots g = dout·y
 * (K = max(D, n) in the error model; a bf16 bmm for them is the realistic bug, bf16_dot) — the
 * weights and the k-term G = Σ q·g stay fp32. */
static parity_status_t mrb_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *Y = &c->inputs[1]->view,
                              *DO = &c->inputs[2]->view;
    int64_t e = X->shape[1], d = Y->shape[2];
    int k = (int)c->attr_values[0], renorm = c->attr_values[1] != 0;
    parity_round_opts_t o = parity_format_default_opts(acc);
    parity_format_t f32;
    parity_format_get("fp32", &f32, NULL);
    const parity_format_t *fn = out == 0 ? acc : &f32; /* the normaliser's format */
    const parity_round_opts_t *on = out == 0 ? &o : NULL;
    parity_sum_order_t ordn = out == 0 ? order : PARITY_SUM_SEQUENTIAL;
    size_t nt = (size_t)(d > e ? d : e);
    double *x = malloc(((size_t)(3 * e) + nt + (size_t)d + (size_t)k) * sizeof *x);
    int32_t *sel = malloc((size_t)k * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        return PARITY_E_NOMEM;
    }
    double *q = x + e, *g = q + e, *terms = g + e, *dout = terms + nt, *G_terms = dout + d;
    int64_t last = -1; /* d_expert_out rows of one token come together: its weights are reused */
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t i = out == 0 ? rows[r] / e : rows[r];
        if (i != last) {
            last = i;
            for (int64_t j = 0; j < e; j++) x[j] = parity_tensor_get(X, i * e + j);
            for (int64_t col = 0; col < d; col++) dout[col] = parity_tensor_get(DO, i * d + col);
            parity_moe_topk(x, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, sel);
            double m = x[sel[0]];
            size_t nn = 0;
            for (int64_t j = 0; j < e; j++) {
                q[j] = 0;
                g[j] = (float)exp((float)(x[j] - m)); /* ex_j, kept in g until the dots */
            }
            if (renorm)
                for (int s2 = 0; s2 < k; s2++) terms[nn++] = g[sel[s2]];
            else
                for (int64_t j = 0; j < e; j++) terms[nn++] = g[j];
            double s = parity_format_sum(fn, terms, nn, ordn, 0, on, NULL);
            if (renorm)
                for (int s2 = 0; s2 < k; s2++) q[sel[s2]] = (float)(g[sel[s2]] / s);
            else
                for (int64_t j = 0; j < e; j++) q[j] = (float)(g[j] / s);
            for (int64_t j = 0; j < e; j++) g[j] = 0;
        }
        if (out == 0) {
            int64_t j = rows[r] % e;
            int selj = 0;
            for (int s2 = 0; s2 < k; s2++) selj |= sel[s2] == (int32_t)j;
            for (int64_t col = 0; col < d; col++)
                dst[r * d + col] = selj ? (double)(float)(q[j] * dout[col]) : 0.0;
            continue;
        }
        for (int s2 = 0; s2 < k; s2++) {
            int64_t j = sel[s2];
            for (int64_t col = 0; col < d; col++)
                terms[col] = (float)(dout[col] * parity_tensor_get(Y, (i * e + j) * d + col));
            g[j] = (float)parity_format_sum(acc, terms, (size_t)d, order, 0, &o, NULL);
            G_terms[s2] = (float)(q[j] * g[j]);
        }
        double G = (float)parity_format_sum(&f32, G_terms, (size_t)k, PARITY_SUM_SEQUENTIAL, 0, NULL,
                                            NULL);
        for (int64_t j = 0; j < e; j++)
            dst[r * e + j] = q[j] == 0 ? 0.0 : (double)(float)(q[j] * (float)(g[j] - G));
    }
    free(x);
    free(sel);
    return PARITY_OK;
}

/* The forward's presets (the same parameters: the backward builds the forward's case) at shapes
 * that keep d_expert_out's N·E·D small; its production preset prod-dsv3 is left out here
 * (N·E·D = 117M elements of reference data, 2.8 GB). Expert outputs are the forward's y. */
/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define MRB_RANGE(name_, case_, summary_)                                                          \
    {.name = name_, .summary = summary_, .n = 256, .d = 259, .v = 32, .params = &mrc_cases[case_]}
static const parity_workload_t MRB_PRESETS[] = {
    {.name = "mixtral",
     .summary = "Mixtral-like: E=8, top-2 renormalised, randn*2 logits, D=512",
     .n = 512, .d = 512, .v = 8,
     .params = &mrc_cases[MRC_CASE_MIXTRAL]},
    {.name = "skewed",
     .summary = "hot experts: E=64, top-6 raw probabilities (unselected experts get gradient), logit bias -1.2 ln(1 + rank)",
     .n = 256, .d = 128, .v = 64,
     .params = &mrc_cases[MRC_CASE_SKEWED]},
    {.name = "e256-top8",
     .summary = "many experts: E=256, top-8 raw probabilities (DeepSeek-V2 / Qwen2-MoE style)",
     .n = 128, .d = 64, .v = 256,
     .params = &mrc_cases[MRC_CASE_E256_TOP8]},
    {.name = "bf16-ties",
     .summary = "E=128 top-8 renormalised, narrow logits: bf16 ties, 5% forced at the top-k boundary",
     .n = 256, .d = 64, .v = 128,
     .params = &mrc_cases[MRC_CASE_BF16_TIES]},
    {.name = "grad-scale",
     .summary = "E=64 top-4 raw probabilities, gradient-scale expert outputs (1e-6..1e-3), hot experts",
     .n = 256, .d = 128, .v = 64,
     .params = &mrc_cases[MRC_CASE_GRAD_SCALE]},
    {.name = "outlier-odd-d",
     .summary = "E=32 top-4 renormalised, odd D=1027, 6 outlier channels x100 in every expert's output",
     .n = 128, .d = 1027, .v = 32,
     .params = &mrc_cases[MRC_CASE_OUTLIER_ODD_D]},
    /* Structure and range (docs/workloads.md): D = 259, E = 32 top-4. */
    MRB_RANGE("exact", MRC_CASE_EXACT,
              "sparse powers of two as logits and expert outputs (0 or +-2^e, |e| <= 2): massive exact ties in the top-k"),
    MRB_RANGE("x1e-3", MRC_CASE_X1E_3,
              "randn logits and expert outputs times 1e-3 (near-uniform router), raw probabilities"),
    MRB_RANGE("x64", MRC_CASE_X64,
              "randn logits and expert outputs times 64 (one-hot router)"),
    MRB_RANGE("near-max", MRC_CASE_NEAR_MAX,
              "randn*2 logits, expert outputs x 2^120: g = dout.y near 2^110"),
    MRB_RANGE("subnormal", MRC_CASE_SUBNORMAL,
              "randn*2 logits, expert outputs at gradient scale x 1e-35: g and d_logits in fp32's subnormal range"),
};
#undef MRB_RANGE

static const parity_workload_t MRB_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn logits and expert outputs, E=8 top-2 renormalised, seed 200",
     .n = 1024, .d = 256, .v = 8,
     .params = &mrc_cases[MRC_CASE_SOL_EXECBENCH]},
    {.name = "kernelbench",
     .summary = "torch.rand logits and expert outputs (256 x 64 experts x 128), top-8",
     .n = 256, .d = 128, .v = 64,
     .params = &mrc_cases[MRC_CASE_KERNELBENCH]},
    {.name = "assert_close",
     .summary = "small randn: 64 tokens, E=8 top-2, D=64",
     .n = 64, .d = 64, .v = 8,
     .params = &mrc_cases[MRC_CASE_ASSERT_CLOSE]},
};

const parity_op_t parity_op_moe_router_combine_bwd = {
    .name = "moe_router_combine_bwd",
    .summary = "backward of moe_router_combine from logits (N,E), expert_out (N,E,D), dout (N,D): "
               "d_expert_out (N,E,D) = w*dout at selected experts (0 elsewhere), d_logits (N,E) "
               "through the softmax (over the k selected when renorm, over E otherwise); attrs k, renorm",
    .n_inputs = 3,
    .n_outputs = 2,
    .input_names = {"router_logits", "expert_out", "dout"},
    .output_names = {"d_expert_out", "d_logits"},
    .input_is_float = {1, 1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "d_expert_out: the forward gate's error times |dout| + one product; d_logits: "
                   "D-term dots g = dout.y, the k-term G = sum w g, the weights' errors, "
                   "K = max(D, n); selection exact (the forward's)",
    .presets = MRB_PRESETS,
    .n_presets = (int)(sizeof MRB_PRESETS / sizeof MRB_PRESETS[0]),
    .baseline_workloads = MRB_BASELINES,
    .wl_family = &mrc_family,
    .catalog = {{parity_catalog_moe_router_combine_bwd, &parity_catalog_moe_router_combine_bwd_count}},
    .cost = &parity_cost_moe_router_combine_bwd,
    .build = mrb_build,
    .emulate = mrb_emulate,
    .variants = {{PARITY_VARIANT_STRUCTURAL, "d_expert_out of the experts the top-k did not select "
                                             "given p dout (the selection's mask not applied)", 0},
                 {PARITY_VARIANT_PARAMETER, "renorm (the top-k weights divided by their sum)", 0}},
    .variant_ref = mrb_variant_ref,
};

/* moe_router_combine: the MoE router (softmax over E experts, top-k with the lower-id tie rule,
 * optional renormalisation) fused with the combine of the selected experts' outputs, with an fp64
 * reference and the error-model data derived in docs/ops/moe_router_combine.md. Inputs: router
 * logits (N, E) and every expert's output for every token (N, E, D), so a wrong selection shows.
 * Outputs: out (N, D) = Σ_{r selected} w_r·y[i, e_r, :] and the dense gate matrix gates (N, E)
 * (the routing weights, exactly 0 at unselected experts). Attributes: k (top-k), renorm (1:
 * weights divided by their sum, Mixtral / Qwen3-MoE; 0: raw probabilities, Switch / Qwen2-MoE /
 * DeepSeek-V2). Shape letters: N tokens (the workload's n), D hidden (d), E experts (v).
 * The bit-exact routing emulator of src/moe/moe.c supplies the top-k with its tie rule; the catalog
 * (ops/moe_router_combine/kernels.c) uses its softmax, routing and combine. Deliberately not here:
 * sigmoid scoring, grouped (node-limited) routing, capacity limits, the expert MLPs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "parity/format.h"
#include "parity/moe.h"

/* rng streams: one per token row of logits (any split of rows gives the same values), the
 * expert outputs (parity_workload_values, one stream per (token, expert) row), the hot-expert
 * permutation. */
#define MRC_STREAM_ROW 0x4d52430000000000ull
#define MRC_STREAM_Y 0x4d52435900000000ull
#define MRC_STREAM_PERM 0x4d52435000000000ull
#define MRC_MAX_THREADS 64 /* parity_parallel_for uses at most 64 */

/* ---- workloads ------------------------------------------------------------------------------
 * The parameters (mrc_params_t, moe_router_combine.h) of N tokens, D hidden size, E experts (the
 * workload's n, d, v, so "NAME@NxDxE" reshapes a preset): the router logits and expert outputs'
 * values, hot experts, k, renorm and forced ties at the top-k boundary. */

/* Per-expert logit biases (E): 0 without skew. */
static void expert_bias(const mrc_params_t *p, uint64_t seed, int64_t e, double *bias)
{
    for (int64_t j = 0; j < e; j++) bias[j] = 0;
    if (p->skew == 0) return;
    int64_t *perm = malloc((size_t)e * sizeof *perm);
    if (!perm) return; /* unreachable in practice; the build then runs without skew */
    for (int64_t j = 0; j < e; j++) perm[j] = j;
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, MRC_STREAM_PERM);
    for (int64_t j = e - 1; j > 0; j--) { /* Fisher-Yates */
        int64_t q = (int64_t)parity_rng_below(&rng, (uint64_t)j + 1), t = perm[j];
        perm[j] = perm[q];
        perm[q] = t;
    }
    for (int64_t r = 0; r < e; r++) bias[perm[r]] = -p->skew * log(1.0 + (double)r);
    free(perm);
}

/* The fp64 reference of one token (the selection, weights, combine, and the error-model data
 * of a row) is reference.c: the diagnosis's variants (variants.c) recompute it too, below both. */

/* ---- building a case ------------------------------------------------------------------------ */

typedef struct {
    const parity_workload_t *wl;
    const mrc_params_t *pp;
    uint64_t seed;
    int64_t e, d;
    const double *bias;
    parity_case_t *c;
    int failed;
    int64_t snapped[MRC_MAX_THREADS], tied[MRC_MAX_THREADS];
} build_ctx_t;

static double load(const parity_abi_tensor_t *t, int64_t idx)
{
    if (t->dtype == PARITY_DT_F32) return ((const float *)t->data)[idx];
    return parity_tensor_get(t, idx);
}

static void store(parity_abi_tensor_t *t, int64_t idx, double v)
{
    if (t->dtype == PARITY_DT_F32) ((float *)t->data)[idx] = (float)v;
    else parity_tensor_set(t, idx, v);
}

static void build_rows(void *p, int64_t b, int64_t end, int thread)
{
    build_ctx_t *g = p;
    int64_t e = g->e, d = g->d;
    int k = g->pp->k;
    double *x = malloc(((size_t)e * (1 + (size_t)d) + (size_t)d + 2 * (size_t)k) * sizeof *x);
    int32_t *sel = malloc(((size_t)k + 1) * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        g->failed = 1;
        return;
    }
    double *y = x + e, *outr = y + e * d, *w = outr + d, *cond = w + k;
    parity_abi_tensor_t *X = &g->c->inputs[0]->view, *Y = &g->c->inputs[1]->view;
    parity_ref_output_t *O = &g->c->ref[0], *G = &g->c->ref[1];
    for (int64_t i = b; i < end; i++) {
        parity_rng_t rng;
        parity_rng_seed(&rng, g->seed, MRC_STREAM_ROW + (uint64_t)i);
        for (int64_t j = 0; j < e; j++)
            x[j] = parity_workload_draw(g->pp->logits.kind, &rng) * g->pp->logits.scale + g->bias[j];
        if (g->pp->ties > 0 && k < e && parity_rng_uniform(&rng) < g->pp->ties) {
            parity_moe_topk(x, (size_t)e, (size_t)k + 1, PARITY_MOE_TIE_LOWID, sel);
            x[sel[k]] = x[sel[k - 1]]; /* an exact tie at the boundary, in any input dtype */
        }
        for (int64_t j = 0; j < e; j++) { /* store, then read back the exact input value */
            store(X, i * e + j, x[j]);
            x[j] = load(X, i * e + j);
        }
        if (k < e) {
            /* Selection must be decidable by every faithful fp32 kernel: a logit within the
             * margin of the k-th largest t (but not equal) could tie with it or swap with it in
             * fp32 probabilities. Such a logit is set to t (an exact tie, which the tie rule
             * decides); the doc shows this never happens for distinct bf16 logits at |t| above
             * 2^-10 (m) and counts how rarely it happens for fp32 logits. */
            parity_moe_topk(x, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, sel);
            double t = x[sel[k - 1]], mg = parity_mrc_margin(x, e, t);
            /* Below fp32's normal range a probability's roundings are absolute: the exp and the
             * division each move p = e^(x - m) / S by up to half the subnormal spacing 2^-149,
             * so two probabilities within 2 2^-149 of each other may tie or swap in a faithful
             * fp32 kernel whatever their logits say; twice that is a near-tie too (the doc,
             * "Selection": found when the new inputs gave x64 at seed 4 experts 20 and 30 the
             * same fp32 probability of 6 spacings, 4th and 5th of the row). */
            double mx = -INFINITY, sx = 0;
            for (int64_t j = 0; j < e; j++) mx = x[j] > mx ? x[j] : mx;
            for (int64_t j = 0; j < e; j++) sx += exp(x[j] - mx);
            const double sub = 4.0 * 0x1p-149 * sx, et = exp(t - mx);
            int snapped = 0, tied = 0;
            for (int64_t j = 0; j < e; j++) {
                if (x[j] != t && (fabs(x[j] - t) <= mg || fabs(exp(x[j] - mx) - et) <= sub)) {
                    x[j] = t;
                    store(X, i * e + j, t);
                    snapped = 1;
                }
            }
            /* A boundary tie: some unselected expert has the k-th's logit. */
            parity_moe_topk(x, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, sel);
            for (int64_t j = 0; j < e && !tied; j++) {
                int in = 0;
                for (int q = 0; q < k; q++) in |= sel[q] == (int32_t)j;
                tied = !in && x[j] == t;
            }
            g->snapped[thread] += snapped;
            g->tied[thread] += tied;
        }
        parity_workload_values(g->pp->expert_out.kind, g->pp->expert_out.scale, g->pp->outliers,
                               g->pp->outlier_factor, g->seed, MRC_STREAM_Y, i * e, (i + 1) * e, d,
                               y);
        for (int64_t q = 0; q < e * d; q++) {
            store(Y, i * e * d + q, y[q]);
            y[q] = load(Y, i * e * d + q);
        }
        parity_ref_mrc_row(x, y, e, d, k, g->pp->renorm, sel, w, G->ref + i * e, outr, cond);
        int64_t nk = g->pp->renorm ? k : e;
        G->k[i] = nk;
        O->k[i] = nk;
        parity_mrc_row_data(y, e, d, k, sel, w, cond, outr, O->ref + i * d, O->s_acc + i * d,
                            O->s_up + i * d, G->s_acc + i * e, G->s_up + i * e);
    }
    free(x);
    free(sel);
}

static void mrc_free_priv(parity_case_t *c)
{
    free(c->priv);
    c->priv = NULL;
}

static parity_status_t mrc_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    const mrc_params_t *pp = parity_workload_params(wl, op->name, diag);
    if (!pp) return PARITY_E_INVALID;
    int64_t n = wl->n, d = wl->d, e = wl->v;
    if (n < 1 || d < 1 || e < pp->k || e > 4096 || (double)n * (double)e * (double)d > 2147483648.0)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "workload %s: need N, D >= 1, k (%d) <= E <= 4096 and N*E*D <= 2^31",
                               wl->name, pp->k);
    int64_t xs[2] = {n, e}, ys[3] = {n, e, d};
    c->inputs[0] = parity_tensor_new("router_logits", dt, 2, xs);
    c->inputs[1] = parity_tensor_new("expert_out", dt, 3, ys);
    parity_mrc_stats_t *stats = calloc(1, sizeof *stats);
    double *bias = malloc((size_t)e * sizeof *bias);
    c->priv = stats;
    if (!c->inputs[0] || !c->inputs[1] || !stats || !bias) {
        free(bias);
        return PARITY_E_NOMEM;
    }
    parity_status_t st = parity_ref_output_alloc(&c->ref[0], "out", "token", n, d, 0, 0, 1);
    if (st == PARITY_OK) st = parity_ref_output_alloc(&c->ref[1], "gates", "token", n, e, 0, 0, 1);
    if (st == PARITY_OK) {
        /* m_up = 2: the first-order bounds are u·A; gamma_2 doubles them (as log_softmax). */
        c->ref[0].m_up = c->ref[1].m_up = 2;
        c->out_ndim[0] = c->out_ndim[1] = 2;
        c->out_shape[0][0] = c->out_shape[1][0] = n;
        c->out_shape[0][1] = d;
        c->out_shape[1][1] = e;
        c->n_attrs = 2;
        c->attr_names[0] = "k";
        c->attr_values[0] = pp->k;
        c->attr_names[1] = "renorm";
        c->attr_values[1] = pp->renorm;
        expert_bias(pp, seed, e, bias);
        build_ctx_t *g = calloc(1, sizeof *g);
        if (!g) st = PARITY_E_NOMEM;
        else {
            g->wl = wl;
            g->pp = pp;
            g->seed = seed;
            g->e = e;
            g->d = d;
            g->bias = bias;
            g->c = c;
            parity_parallel_for(n, 0, build_rows, g);
            if (g->failed) st = PARITY_E_NOMEM;
            for (int t = 0; t < MRC_MAX_THREADS; t++) {
                stats->snapped_rows += g->snapped[t];
                stats->tied_rows += g->tied[t];
            }
            free(g);
        }
    }
    free(bias);
    return st;
}

/* ---- diagnosis: the op recomputed with a chosen accumulator ---------------------------------
 * out: the reference's selection, weights as a faithful fp32 kernel computes them (fp32
 * softmax of src/moe/moe.c, fp32 renormalisation in slot order), the fp32 products w·y summed in
 * `acc`. gates: the softmax's sum of exps (and the renormalisation's sum) accumulated in `acc`,
 * everything else fp32. */
static parity_status_t mrc_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    const parity_abi_tensor_t *X = &c->inputs[0]->view, *Y = &c->inputs[1]->view;
    int64_t e = X->shape[1], d = Y->shape[2];
    int k = (int)c->attr_values[0], renorm = c->attr_values[1] != 0;
    parity_round_opts_t o = parity_format_default_opts(acc);
    parity_format_t f32;
    parity_format_get("fp32", &f32, NULL);
    double *x = malloc((size_t)(3 * e + 2 * k) * sizeof *x);
    int32_t *sel = malloc((size_t)k * sizeof *sel);
    if (!x || !sel) {
        free(x);
        free(sel);
        return PARITY_E_NOMEM;
    }
    double *ex = x + e, *tmp = ex + e, *w = tmp + e, *terms = w + k;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t i = rows[q];
        double m = -INFINITY;
        for (int64_t j = 0; j < e; j++) {
            x[j] = load(X, i * e + j);
            m = x[j] > m ? x[j] : m;
        }
        parity_moe_topk(x, (size_t)e, (size_t)k, PARITY_MOE_TIE_LOWID, sel);
        for (int64_t j = 0; j < e; j++) ex[j] = (float)exp((float)(x[j] - m));
        double s = out == 1 ? parity_format_sum(acc, ex, (size_t)e, order, 0, &o, NULL)
                            : parity_format_sum(&f32, ex, (size_t)e,
                                                PARITY_SUM_SEQUENTIAL, 0, NULL, NULL);
        for (int q2 = 0; q2 < k; q2++) w[q2] = (float)(ex[sel[q2]] / s);
        if (renorm) {
            double rs = out == 1 ? parity_format_sum(acc, w, (size_t)k, order, 0, &o, NULL)
                                 : parity_format_sum(&f32, w, (size_t)k,
                                                     PARITY_SUM_SEQUENTIAL, 0, NULL, NULL);
            for (int q2 = 0; q2 < k; q2++) w[q2] = (float)(w[q2] / rs);
        }
        if (out == 1) {
            for (int64_t j = 0; j < e; j++) dst[q * e + j] = 0;
            for (int q2 = 0; q2 < k; q2++) dst[q * e + sel[q2]] = w[q2];
            continue;
        }
        for (int64_t col = 0; col < d; col++) {
            for (int q2 = 0; q2 < k; q2++)
                terms[q2] = (float)(w[q2] * load(Y, (i * e + sel[q2]) * d + col));
            dst[q * d + col] = parity_format_sum(acc, terms, (size_t)k, order, 0, &o, NULL);
        }
    }
    free(x);
    free(sel);
    return PARITY_OK;
}

#define F(member, type, what) PARITY_WL_FIELD(mrc_params_t, member, type, what)
const parity_workload_family_t mrc_family = {
    "moe_router_combine", sizeof(mrc_params_t), 8,
    {F(logits, PARITY_WL_VALS, "router logits (N,E)"),
     F(expert_out, PARITY_WL_VALS, "expert outputs y (N,E,D)"),
     F(outliers, PARITY_WL_INT, "outlier channels of every expert's output (expert_out outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor"),
     F(skew, PARITY_WL_DOUBLE, "hot experts: logit bias -skew ln(1 + rank), 0 none"),
     F(k, PARITY_WL_INT, "experts per token"),
     F(renorm, PARITY_WL_INT, "1: the top-k weights renormalised to sum 1"),
     F(ties, PARITY_WL_DOUBLE, "fraction of tokens whose (k+1)-th logit is set to the k-th's")}};
#undef F

/* The family's cases: the forward's presets and the public verifiers' schemes; the backward's
 * presets are the same cases at shapes that keep d_expert_out's N*E*D small. */
const mrc_params_t mrc_cases[MRC_CASE_N] = {
    [MRC_CASE_MIXTRAL] = {.logits = {PARITY_VALS_NORMAL, 2}, .expert_out = {PARITY_VALS_NORMAL, 1},
        .k = 2, .renorm = 1},
    [MRC_CASE_SKEWED] = {.logits = {PARITY_VALS_NORMAL, 1.5},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .skew = 1.2, .k = 6, .renorm = 0},
    [MRC_CASE_E256_TOP8] = {.logits = {PARITY_VALS_NORMAL, 1},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .k = 8, .renorm = 0},
    [MRC_CASE_BF16_TIES] = {.logits = {PARITY_VALS_NORMAL, 0.5},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .k = 8, .renorm = 1, .ties = 0.05},
    [MRC_CASE_GRAD_SCALE] = {.logits = {PARITY_VALS_NORMAL, 2},
        .expert_out = {PARITY_VALS_GRADSCALE, 1}, .skew = 0.8, .k = 4, .renorm = 0},
    [MRC_CASE_OUTLIER_ODD_D] = {.logits = {PARITY_VALS_NORMAL, 2},
        .expert_out = {PARITY_VALS_OUTLIER, 1}, .outliers = 6, .outlier_factor = 100, .k = 4,
        .renorm = 1},
    [MRC_CASE_PROD_DSV3] = {.logits = {PARITY_VALS_NORMAL, 1.5},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .skew = 1.0, .k = 8, .renorm = 1},
    [MRC_CASE_EXACT] = {.logits = {PARITY_VALS_SPARSE_POW2, 1},
        .expert_out = {PARITY_VALS_SPARSE_POW2, 1}, .k = 4, .renorm = 1},
    [MRC_CASE_X1E_3] = {.logits = {PARITY_VALS_NORMAL, 1e-3},
        .expert_out = {PARITY_VALS_NORMAL, 1e-3}, .k = 4, .renorm = 0},
    [MRC_CASE_X64] = {.logits = {PARITY_VALS_NORMAL, 64}, .expert_out = {PARITY_VALS_NORMAL, 64},
        .k = 4, .renorm = 1},
    [MRC_CASE_NEAR_MAX] = {.logits = {PARITY_VALS_NORMAL, 2},
        .expert_out = {PARITY_VALS_NORMAL, 0x1p120}, .k = 4, .renorm = 1},
    [MRC_CASE_SUBNORMAL] = {.logits = {PARITY_VALS_NORMAL, 2},
        .expert_out = {PARITY_VALS_GRADSCALE, 1e-35}, .k = 4, .renorm = 1},
    [MRC_CASE_SOL_EXECBENCH] = {.logits = {PARITY_VALS_NORMAL, 1},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .k = 2, .renorm = 1},
    [MRC_CASE_KERNELBENCH] = {.logits = {PARITY_VALS_UNIFORM01, 1},
        .expert_out = {PARITY_VALS_UNIFORM01, 1}, .k = 8, .renorm = 1},
    [MRC_CASE_ASSERT_CLOSE] = {.logits = {PARITY_VALS_NORMAL, 1},
        .expert_out = {PARITY_VALS_NORMAL, 1}, .k = 2, .renorm = 1},
};

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define MRC_RANGE(name_, case_, summary_)                                                          \
    {.name = name_, .summary = summary_, .n = 512, .d = 259, .v = 32, .params = &mrc_cases[case_]}
static const parity_workload_t MRC_PRESETS[] = {
    {.name = "mixtral",
     .summary = "Mixtral-like: E=8, top-2 renormalised, randn*2 logits, D=1024",
     .n = 1024, .d = 1024, .v = 8,
     .params = &mrc_cases[MRC_CASE_MIXTRAL]},
    {.name = "skewed",
     .summary = "hot experts: E=64, top-6 raw probabilities, logit bias -1.2 ln(1 + rank) (load imbalance)",
     .n = 1024, .d = 256, .v = 64,
     .params = &mrc_cases[MRC_CASE_SKEWED]},
    {.name = "e256-top8",
     .summary = "many experts: E=256, top-8 raw probabilities (DeepSeek-V2 / Qwen2-MoE style), randn logits",
     .n = 512, .d = 128, .v = 256,
     .params = &mrc_cases[MRC_CASE_E256_TOP8]},
    {.name = "bf16-ties",
     .summary = "E=128 top-8 renormalised, narrow logits (0.5 randn): bf16 ties, 5% forced at the top-k boundary",
     .n = 1024, .d = 64, .v = 128,
     .params = &mrc_cases[MRC_CASE_BF16_TIES]},
    {.name = "grad-scale",
     .summary = "E=64 top-4 raw probabilities, gradient-scale expert outputs (1e-6..1e-3), hot experts",
     .n = 1024, .d = 256, .v = 64,
     .params = &mrc_cases[MRC_CASE_GRAD_SCALE]},
    {.name = "outlier-odd-d",
     .summary = "E=32 top-4 renormalised, odd D=1027, 6 outlier channels x100 in every expert's output",
     .n = 512, .d = 1027, .v = 32,
     .params = &mrc_cases[MRC_CASE_OUTLIER_ODD_D]},
    {.name = "prod-dsv3",
     .summary = "DeepSeek-V3-shaped: E=256, top-8 renormalised, D=7168, 64 tokens, hot experts (expert outputs 235 MB in bf16)",
     .n = 64, .d = 7168, .v = 256, .production = 1,
     .params = &mrc_cases[MRC_CASE_PROD_DSV3]},
    /* Structure and range (docs/workloads.md): D = 259, E = 32 top-4 (renormalised but x1e-3). */
    MRC_RANGE("exact", MRC_CASE_EXACT,
              "sparse powers of two as logits and expert outputs (0 or +-2^e, |e| <= 2): massive exact ties in the top-k"),
    MRC_RANGE("x1e-3", MRC_CASE_X1E_3,
              "randn logits and expert outputs times 1e-3 (near-uniform router), raw probabilities"),
    MRC_RANGE("x64", MRC_CASE_X64,
              "randn logits and expert outputs times 64 (one-hot router)"),
    MRC_RANGE("near-max", MRC_CASE_NEAR_MAX,
              "randn*2 logits, expert outputs x 2^120: out within 2^6 of fp32/bf16 overflow"),
    MRC_RANGE("subnormal", MRC_CASE_SUBNORMAL,
              "randn*2 logits, expert outputs at gradient scale x 1e-35 (1e-38..1e-41): out in fp32's subnormal range"),
};
#undef MRC_RANGE

static const parity_workload_t MRC_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn logits and expert outputs, E=8 top-2 renormalised, seed 200",
     .n = 1024, .d = 512, .v = 8,
     .params = &mrc_cases[MRC_CASE_SOL_EXECBENCH]},
    {.name = "kernelbench",
     .summary = "torch.rand logits and expert outputs (512 x 64 experts x 256), top-8",
     .n = 512, .d = 256, .v = 64,
     .params = &mrc_cases[MRC_CASE_KERNELBENCH]},
    {.name = "assert_close",
     .summary = "small randn: 64 tokens, E=8 top-2, D=64",
     .n = 64, .d = 64, .v = 8,
     .params = &mrc_cases[MRC_CASE_ASSERT_CLOSE]},
};

const parity_op_t parity_op_moe_router_combine = {
    .name = "moe_router_combine",
    .summary = "MoE router + combine: softmax over E experts, top-k (ties: lower id), optional "
               "renormalisation; out (N,D) = sum of the k weighted expert outputs, gates (N,E) "
               "dense routing weights (0 where unselected); attrs k, renorm",
    .n_inputs = 2,
    .n_outputs = 2,
    .input_names = {"router_logits", "expert_out"},
    .output_names = {"out", "gates"},
    .input_is_float = {1, 1},
    .faithful_accumulator = "fp32",
    .error_model = "gates[i,e]: normaliser sum (E terms, or k when renormalised) relative error "
                   "times w + u*w*A; out[i,:]: that plus the k-term combine, + u*sum|w y|(A+1); "
                   "selection exact (top-k of the logits, ties to the lower id)",
    .presets = MRC_PRESETS,
    .n_presets = (int)(sizeof MRC_PRESETS / sizeof MRC_PRESETS[0]),
    .baseline_workloads = MRC_BASELINES,
    .wl_family = &mrc_family,
    .catalog = {{parity_catalog_moe_router_combine, &parity_catalog_moe_router_combine_count}},
    .cost = &parity_cost_moe_router_combine,
    .build = mrc_build,
    .emulate = mrc_emulate,
    .free_priv = mrc_free_priv,
    /* The diagnosis's variants (variants.c): another tie rule, the renorm switch flipped, the
     * probabilities rounded (docs/error-model.md "Cause"). */
    .variants = {{PARITY_VARIANT_TIE, "top-k ties at the k-th expert broken toward the higher expert id", 0},
                 {PARITY_VARIANT_PARAMETER, "renorm (the top-k weights divided by their sum)", 0},
                 {PARITY_VARIANT_ROUNDED, "the router probabilities (the selection made on them, "
                                          "renormalised weights and their sum too)", 0}},
    .variant_ref = parity_mrc_variant_ref,
};

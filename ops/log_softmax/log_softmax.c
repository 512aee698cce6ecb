/* log_softmax (logits (N,V) -> logprobs (N,V)) and the fused cross-entropy forward + backward
 * (logits, targets -> loss (N), dlogits (N,V) = softmax - onehot), with fp64 references and the
 * error-model data derived in docs/ops/log_softmax.md. Shape: N rows, V classes (the workload's
 * v; its d is unused). Deliberately not here: the kernels (ops/log_softmax/kernels.c), judging. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "src/core/parallel.h"
#include "src/format/format_fast.h"

/* Streams of the logit generator: one rng per row, so any split of the rows gives the same
 * values; targets and outlier rows from their own streams. */
#define LSM_STREAM_ROW 0x4c534d0000000000ull
#define LSM_STREAM_TARGET 0x4c534d5400000000ull

/* ---- workloads ------------------------------------------------------------------------------
 * The parameters (lsm_params_t, log_softmax.h): base logits N(0,1) or U[0,1) times their scale
 * (trained-LM-like spread), peaks per row, spike rows, targets from real text or uniform. */

static parity_status_t gen_targets(const parity_workload_t *wl, uint64_t seed, int64_t n, int64_t v,
                                   int32_t *t, parity_diag_t *diag)
{
    const lsm_params_t *p = wl->params;
    if (p->targets.kind != PARITY_IDS_TEXT)
        return parity_workload_ids(wl->name, p->targets, seed, n, v, t, diag);
    const int32_t *text;
    size_t tn;
    parity_status_t st = parity_workload_text_ids(&text, &tn, diag);
    if (st != PARITY_OK) return st;
    if (tn == 0) return parity_diag_set(diag, PARITY_E_IO, "workload %s: empty text", wl->name);
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, LSM_STREAM_TARGET);
    size_t off = (size_t)parity_rng_below(&rng, tn);
    for (int64_t i = 0; i < n; i++) t[i] = (int32_t)(text[(off + (size_t)i) % tn] % v);
    return PARITY_OK;
}

/* Row i of the logits as exact doubles (before rounding to the input dtype). */
static void gen_row(const parity_workload_t *wl, uint64_t seed, int64_t i, int64_t v,
                    int32_t target, double *x)
{
    const lsm_params_t *p = wl->params;
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, LSM_STREAM_ROW + (uint64_t)i);
    for (int64_t j = 0; j < v; j++)
        x[j] = parity_workload_draw(p->logits.kind, &rng) * p->logits.scale;
    int at_target = parity_rng_below(&rng, 2) == 0;
    for (int k = 0; k < p->peaks; k++) {
        int64_t col = (k == 0 && at_target) ? target : (int64_t)parity_rng_below(&rng, (uint64_t)v);
        x[col] = p->peak - 5.0 + 10.0 * parity_rng_uniform(&rng);
    }
    if (p->spike_rows && parity_rng_below(&rng, 8) == 0) {
        int64_t col = (int64_t)parity_rng_below(&rng, (uint64_t)v);
        x[col] = p->spike + 10.0 * parity_rng_uniform(&rng);
    }
}

/* ---- the fp64 reference of one row ---------------------------------------------------------- */

void parity_ref_log_softmax_row(const double *x, int64_t v, int32_t target, double *logp,
                                double *dlogits, double *loss, double *cond)
{
    parity_ref_log_softmax_row_rounded(x, v, target, logp, dlogits, loss, cond, NULL, 0, 0);
}

void parity_ref_log_softmax_row_rounded(const double *x, int64_t v, int32_t target, double *logp,
                                        double *dlogits, double *loss, double *cond,
                                        const parity_format_t *fmt, int which, int dir)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < v; j++) m = x[j] > m ? x[j] : m;
    /* e_j = exp(x_j - m) in (0, 1], summed with Neumaier's compensation: the sum's relative
     * error is about 2^-106 V, far below anything judged. */
    double s = 0, c = 0, spd = 0;
    for (int64_t j = 0; j < v; j++) {
        double d = x[j] - m, e = exp(d);
        double t = s + e;
        c += fabs(s) >= fabs(e) ? (s - t) + e : (e - t) + s;
        s = t;
        spd += e * -d; /* Σ e_j |d_j| for Σ p_j |d_j|: a condition number, plain sum suffices */
    }
    s += c;
    if (fmt && which == LSM_VAR_SUM) s = parity_variant_round(fmt, s, dir);
    double L = log(s), pd = spd / s;
    if (fmt && which == LSM_VAR_LOG) L = parity_variant_round(fmt, L, dir);
    if (fmt && (which == LSM_VAR_SUM_LOG || which == LSM_VAR_LOGP)) {
        s = parity_variant_round(fmt, s, dir);
        L = parity_variant_round(fmt, log(s), 0);
    }
    const parity_format_t *yfmt = fmt && which == LSM_VAR_LOGP ? fmt : NULL;
    /* The absolute condition A_j of logprob_j (docs/ops/log_softmax.md, "Per-element
     * condition"): u·A_j bounds every rounding a faithful fp32 kernel makes outside the V-term
     * accumulation of the exps, to first order. */
    double base = fabs(m) + 5.0 * L + 2.0 * pd + 4.0 + 6.0 * (1.0 + log((double)v));
    for (int64_t j = 0; j < v; j++) {
        double d = x[j] - m, y = yfmt ? parity_variant_round(yfmt, d - L, 0) : d - L;
        if (logp) logp[j] = y;
        if (cond) cond[j] = fabs(d) + fabs(y) + base;
        if (dlogits) dlogits[j] = j == target && which != LSM_VAR_NO_ONEHOT ? expm1(y) : exp(y);
    }
    if (loss) *loss = yfmt ? -parity_variant_round(yfmt, x[target] - m - L, 0) : L - (x[target] - m);
}

/* ---- building a case ------------------------------------------------------------------------ */

/* Row x's reference and error-model data (ref, s_acc, s_up: logprobs, or dlogits with ce; the
 * loss's in lref, lsa, lsu with ce), with the variant (fmt, which, dir) applied when fmt is
 * non-NULL. out and cond: v doubles of scratch. */
static void fill_row(const double *x, int64_t v, int32_t t, int ce, const parity_format_t *fmt,
                     int which, int dir, double *out, double *cond, double *ref, double *sa,
                     double *su, double *lref, double *lsa, double *lsu)
{
    double loss = 0;
    parity_ref_log_softmax_row_rounded(x, v, t, ce ? NULL : out, ce ? out : NULL, ce ? &loss : NULL,
                                       cond, fmt, which, dir);
    if (!ce) {
        /* logprob_j: the accumulated sum's relative error is its absolute error (s_acc = 1,
         * k = V); everything else is u·A_j. */
        for (int64_t j = 0; j < v; j++) {
            ref[j] = out[j];
            sa[j] = 1.0;
            if (su) su[j] = cond[j];
        }
        return;
    }
    /* dlogits_j = p_j - [j = t]: p_j carries the sum's relative error (s_acc = p_j) and u·A_j
     * relative from the rest, plus the subtraction of 1 (|dlogits_j|). */
    for (int64_t j = 0; ref && j < v; j++) {
        double pj = out[j] + (j == t && which != LSM_VAR_NO_ONEHOT ? 1.0 : 0.0);
        ref[j] = out[j];
        sa[j] = pj;
        if (su) su[j] = pj * cond[j] + fabs(out[j]);
    }
    if (lref) {
        *lref = loss;
        *lsa = 1.0;
        if (lsu) *lsu = cond[t];
    }
}

typedef struct {
    const parity_workload_t *wl;
    uint64_t seed;
    int64_t v;
    const int32_t *targets;
    parity_case_t *c;
    int ce; /* 1: cross_entropy (loss, dlogits); 0: log_softmax */
    int failed;
} build_ctx_t;

static void build_rows(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    build_ctx_t *g = p;
    int64_t v = g->v;
    double *x = malloc((size_t)v * 3 * sizeof *x);
    if (!x) {
        g->failed = 1;
        return;
    }
    double *out = x + v, *cond = x + 2 * v;
    parity_abi_tensor_t *X = &g->c->inputs[0]->view;
    for (int64_t i = b; i < e; i++) {
        int32_t t = g->targets[i];
        gen_row(g->wl, g->seed, i, v, t, x);
        for (int64_t j = 0; j < v; j++) { /* store, then read back the exact input value */
            int64_t idx = i * v + j;
            if (X->dtype == PARITY_DT_F32) {
                ((float *)X->data)[idx] = (float)x[j];
                x[j] = ((float *)X->data)[idx];
            } else {
                parity_tensor_set(X, idx, x[j]);
                x[j] = parity_tensor_get(X, idx);
            }
        }
        parity_ref_output_t *R = &g->c->ref[g->ce ? 1 : 0];
        R->k[i] = v;
        if (g->ce) g->c->ref[0].k[i] = v;
        fill_row(x, v, t, g->ce, NULL, 0, 0, out, cond, R->ref + i * v, R->s_acc + i * v,
                 R->s_up + i * v, g->ce ? g->c->ref[0].ref + i : NULL,
                 g->ce ? g->c->ref[0].s_acc + i : NULL, g->ce ? g->c->ref[0].s_up + i : NULL);
    }
    free(x);
}

static parity_status_t build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                             parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag, int ce)
{
    if (!parity_workload_params(wl, op->name, diag)) return PARITY_E_INVALID;
    int64_t n = wl->n, v = wl->v;
    if (n < 1 || v < 1 || v > INT32_MAX)
        return parity_diag_set(diag, PARITY_E_INVALID, "workload %s: need N >= 1 and 1 <= V < 2^31",
                               wl->name);
    int64_t shape[2] = {n, v};
    c->inputs[0] = parity_tensor_new("logits", dt, 2, shape);
    if (!c->inputs[0]) return PARITY_E_NOMEM;
    int32_t *targets = NULL;
    parity_tensor_t *tt = NULL;
    if (ce) {
        int64_t tshape[1] = {n};
        tt = c->inputs[1] = parity_tensor_new("targets", PARITY_DT_I32, 1, tshape);
        if (!tt) return PARITY_E_NOMEM;
        targets = tt->view.data;
    } else {
        targets = malloc((size_t)n * sizeof *targets); /* peaks follow the text, as in an LM */
        if (!targets) return PARITY_E_NOMEM;
    }
    parity_status_t st = gen_targets(wl, seed, n, v, targets, diag);
    if (st == PARITY_OK) {
        if (ce) {
            st = parity_ref_output_alloc(&c->ref[0], "loss", "row", n, 1, 0, 0, 1);
            if (st == PARITY_OK) st = parity_ref_output_alloc(&c->ref[1], "dlogits", "row", n, v, 0, 0, 1);
        } else {
            st = parity_ref_output_alloc(&c->ref[0], "logprobs", "row", n, v, 0, 0, 1);
        }
    }
    if (st == PARITY_OK) {
        /* m_up = 2: the first-order bound is u·A_j; gamma_2 ≈ 2u doubles it, which covers the
         * second-order terms and the evaluation orders of docs/ops/log_softmax.md. */
        for (int o = 0; o < (ce ? 2 : 1); o++) c->ref[o].m_up = 2;
        c->out_ndim[0] = ce ? 1 : 2;
        c->out_shape[0][0] = n;
        c->out_shape[0][1] = v;
        if (ce) {
            c->out_ndim[1] = 2;
            c->out_shape[1][0] = n;
            c->out_shape[1][1] = v;
        }
        build_ctx_t g = {wl, seed, v, targets, c, ce, 0};
        parity_parallel_for(n, 0, build_rows, &g);
        if (g.failed) st = PARITY_E_NOMEM;
    }
    if (!ce) free(targets);
    return st;
}

static parity_status_t lsm_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                 parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    return build(op, wl, seed, dt, c, diag, 0);
}

static parity_status_t ce_build(const parity_op_t *op, const parity_workload_t *wl, uint64_t seed,
                                parity_dtype_t dt, parity_case_t *c, parity_diag_t *diag)
{
    return build(op, wl, seed, dt, c, diag, 1);
}

/* ---- emulation for the diagnosis ------------------------------------------------------------
 * Rows as the two-pass fp32 kernel (ops/log_softmax/kernels.c, M_TWO_PASS) computes them, except
 * that the V-term sum of exps is accumulated in `acc` with `order`: m = max, e_j = expf(x_j - m)
 * in fp32, S = the emulated sum (parity_format_sum_fast: parity_format_sum's rounding, fast), then
 * L = logf(S) and every output in fp32. S is exact in fp32 for every format of at most 24
 * significant bits and 8 exponent bits (the diagnosis's bf16, 11-bit and fp32). */
static parity_status_t emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                               parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                               double *dst, int ce)
{
    if (out < 0 || out > ce) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *X = &c->inputs[0]->view;
    int64_t v = X->shape[1];
    const int32_t *tg = ce ? c->inputs[1]->view.data : NULL;
    float *x = malloc((size_t)v * sizeof *x);
    double *e = malloc((size_t)v * sizeof *e);
    if (!x || !e) {
        free(x);
        free(e);
        return PARITY_E_NOMEM;
    }
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t i = rows[q];
        parity_row_to_f32(X, i, x);
        float m = -INFINITY;
        for (int64_t j = 0; j < v; j++) m = x[j] > m ? x[j] : m;
        for (int64_t j = 0; j < v; j++) e[j] = expf(x[j] - m);
        float s = (float)parity_format_sum_fast(acc, e, v, order), L = logf(s);
        if (!ce) {
            for (int64_t j = 0; j < v; j++) dst[q * v + j] = (x[j] - m) - L;
        } else if (out == 0) {
            dst[q] = L - (x[tg[i]] - m);
        } else {
            for (int64_t j = 0; j < v; j++) {
                float p = (float)e[j] / s;
                dst[q * v + j] = j == tg[i] ? p - 1.0f : p;
            }
        }
    }
    free(x);
    free(e);
    return PARITY_OK;
}

static parity_status_t lsm_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                   parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                   double *dst)
{
    return emulate(c, out, acc, order, rows, n_rows, dst, 0);
}

static parity_status_t ce_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                  parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                  double *dst)
{
    return emulate(c, out, acc, order, rows, n_rows, dst, 1);
}

/* The op's variants (op.h; docs/error-model.md "Cause"): the reference of the rows with the row's
 * sum of exps S, or its log L, rounded to fmt as dir says, the rest exact. */
static parity_status_t variant_ref(const parity_case_t *c, int out, int which,
                                   const parity_format_t *fmt, int dir, const int64_t *rows,
                                   int64_t n_rows, double *ref, double *s_acc, double *s_up, int ce)
{
    if (out < 0 || out > ce || (!fmt) != (which == LSM_VAR_NO_ONEHOT)) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *X = &c->inputs[0]->view;
    int64_t v = X->shape[1];
    const int32_t *tg = ce ? c->inputs[1]->view.data : NULL;
    double *x = malloc((size_t)v * 3 * sizeof *x);
    if (!x) return PARITY_E_NOMEM;
    double *o = x + v, *cond = x + 2 * v;
    for (int64_t q = 0; q < n_rows; q++) {
        int64_t i = rows[q];
        for (int64_t j = 0; j < v; j++) x[j] = parity_tensor_get(X, i * v + j);
        int32_t t = tg ? tg[i] : 0;
        if (out == 0 && ce)
            fill_row(x, v, t, 1, fmt, which, dir, o, cond, NULL, NULL, NULL, ref + q, s_acc + q,
                     s_up ? s_up + q : NULL);
        else
            fill_row(x, v, t, ce, fmt, which, dir, o, cond, ref + q * v, s_acc + q * v,
                     s_up ? s_up + q * v : NULL, NULL, NULL, NULL);
    }
    free(x);
    return PARITY_OK;
}

static parity_status_t lsm_variant_ref(const parity_case_t *c, int out, int which,
                                       const parity_format_t *fmt, int dir, const int64_t *rows,
                                       int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    return variant_ref(c, out, which, fmt, dir, rows, n_rows, ref, s_acc, s_up, 0);
}

static parity_status_t ce_variant_ref(const parity_case_t *c, int out, int which,
                                      const parity_format_t *fmt, int dir, const int64_t *rows,
                                      int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    return variant_ref(c, out, which, fmt, dir, rows, n_rows, ref, s_acc, s_up, 1);
}

#define LSM_VARIANTS                                                                              \
    {{PARITY_VARIANT_ROUNDED, "the row's sum of exps", 1},                                        \
     {PARITY_VARIANT_ROUNDED, "the log of the row's sum of exps", 1},                             \
     {PARITY_VARIANT_ROUNDED, "the row's sum of exps and then its log", 1}}
#define CE_VARIANTS                                                                               \
    {{PARITY_VARIANT_ROUNDED, "the row's sum of exps", 1},                                        \
     {PARITY_VARIANT_ROUNDED, "the log of the row's sum of exps", 1},                             \
     {PARITY_VARIANT_ROUNDED, "the row's sum of exps and then its log", 1},                       \
     {PARITY_VARIANT_ROUNDED, "the row's sum of exps, its log and each log-probability (loss and " \
      "dlogits = exp(logprob) - onehot made from them)", 1},                                       \
     {PARITY_VARIANT_IGNORED, "the target's one-hot (dlogits = the softmax: the -1 at the target " \
      "never subtracted)", 0}}

#define F(member, type, what) PARITY_WL_FIELD(lsm_params_t, member, type, what)
const parity_workload_family_t lsm_family = {
    "log_softmax", sizeof(lsm_params_t), 6,
    {F(targets, PARITY_WL_IDS, "the rows' targets over [0, V) (text: GPT-2 ids mod V)"),
     F(logits, PARITY_WL_VALS, "base logits (N,V)"),
     F(peaks, PARITY_WL_INT, "columns per row set to U[peak-5, peak+5], the first at the target in half the rows"),
     F(peak, PARITY_WL_DOUBLE, "their level"),
     F(spike_rows, PARITY_WL_INT, "1: one row in 8 gets one logit at spike + U[0,10)"),
     F(spike, PARITY_WL_DOUBLE, "that logit's level")}};
#undef F

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define LSM_RANGE(name_, summary_, ...)                                                 \
    {.name = name_, .summary = summary_ "; N=256, V=4099", .n = 256, .d = 1, .v = 4099, \
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM}, __VA_ARGS__}}
static const parity_workload_t LSM_PRESETS[] = {
    {.name = "text",
     .summary = "GPT-2 vocabulary, real-text targets, randn*2 logits with 4 peaks at 20-30",
     .n = 512, .d = 1, .v = 50257,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_TEXT},
                           .logits = {PARITY_VALS_NORMAL, 2}, .peaks = 4, .peak = 25}},
    {.name = "odd-v32001",
     .summary = "odd vocabulary V=32001, text targets mod V, randn*3 logits with peaks",
     .n = 512, .d = 1, .v = 32001,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_TEXT},
                           .logits = {PARITY_VALS_NORMAL, 3}, .peaks = 4, .peak = 25}},
    {.name = "outlier-rows",
     .summary = "1 row in 8 has one logit at 110-120 (fp32 exp overflows past 88.7)",
     .n = 256, .d = 1, .v = 32000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 2}, .peaks = 4, .peak = 25,
                           .spike_rows = 1, .spike = 110}},
    {.name = "small-v",
     .summary = "classifier-sized V=1000, randn logits, uniform targets",
     .n = 2048, .d = 1, .v = 1000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 1}}},
    {.name = "prod-llama3",
     .summary = "Llama-3 vocabulary V=128256, N=1024 rows, text targets (reference about 3.5 GB)",
     .n = 1024, .d = 1, .v = 128256, .production = 1,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_TEXT},
                           .logits = {PARITY_VALS_NORMAL, 2}, .peaks = 4, .peak = 25,
                           .spike_rows = 1, .spike = 110}},
    /* Structure and range (docs/workloads.md): V = 4099 (no power of two divides it), no peaks. */
    LSM_RANGE("exact",
              "sparse powers of two as logits (0 or +-2^e, |e| <= 2): massive exact ties",
              .logits = {PARITY_VALS_SPARSE_POW2, 1}),
    LSM_RANGE("x1e-3",
              "randn logits times 1e-3 (a near-uniform softmax)",
              .logits = {PARITY_VALS_NORMAL, 1e-3}),
    LSM_RANGE("x64",
              "randn logits times 64 (exps underflow but for a few per row)",
              .logits = {PARITY_VALS_NORMAL, 64}),
    LSM_RANGE("near-max",
              "randn logits x 2^120: x - max stays below fp32/bf16 overflow, one exp per row is nonzero",
              .logits = {PARITY_VALS_NORMAL, 0x1p120}),
    LSM_RANGE("subnormal",
              "randn logits x 1e-39 (bf16 subnormals): the softmax is uniform to 2^-126",
              .logits = {PARITY_VALS_NORMAL, 1e-39}),
};
#undef LSM_RANGE

static const parity_workload_t LSM_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn logits, uniform targets, seed 200",
     .n = 512, .d = 1, .v = 32000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand logits (16 x 16384)",
     .n = 16, .d = 1, .v = 16384,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "small randn logits",
     .n = 64, .d = 1, .v = 1000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 1}}},
};

static const parity_workload_t CE_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "randn logits, uniform targets, seed 200",
     .n = 512, .d = 1, .v = 32000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand logits (4096 x 10), uniform targets",
     .n = 4096, .d = 1, .v = 10,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "small randn logits",
     .n = 64, .d = 1, .v = 1000,
     .params = &(const lsm_params_t){.targets = {PARITY_IDS_UNIFORM},
                           .logits = {PARITY_VALS_NORMAL, 1}}},
};

const parity_op_t parity_op_log_softmax = {
    .name = "log_softmax",
    .summary = "log-softmax over the last dim: logprobs (N,V) from logits (N,V)",
    .n_inputs = 1,
    .n_outputs = 1,
    .input_names = {"logits"},
    .output_names = {"logprobs"},
    .input_is_float = {1},
    .faithful_accumulator = "fp32",
    .error_model = "logprobs[i,j]: V-term sum of exps (relative error = absolute error) + u*A_ij "
                   "(|x-m|, |y|, |m|, log S, exp/log ulps)",
    .presets = LSM_PRESETS,
    .n_presets = (int)(sizeof LSM_PRESETS / sizeof LSM_PRESETS[0]),
    .baseline_workloads = LSM_BASELINES,
    .wl_family = &lsm_family,
    .catalog = {{parity_catalog_log_softmax, &parity_catalog_log_softmax_count}},
    .cost = &parity_cost_log_softmax,
    .build = lsm_build,
    .emulate = lsm_emulate,
    .free_priv = NULL,
    .variants = LSM_VARIANTS,
    .variant_ref = lsm_variant_ref,
};

const parity_op_t parity_op_cross_entropy = {
    .name = "cross_entropy",
    .summary = "fused cross-entropy forward+backward: loss (N), dlogits (N,V) = softmax - onehot "
               "(upstream gradient 1 per row)",
    .n_inputs = 2,
    .n_outputs = 2,
    .input_names = {"logits", "targets"},
    .output_names = {"loss", "dlogits"},
    .input_is_float = {1, 0},
    .faithful_accumulator = "fp32",
    .error_model = "loss[i]: V-term sum of exps + u*A; dlogits[i,j]: p_j times the sum's relative "
                   "error + u*(p_j A_j + |g_j|)",
    .presets = LSM_PRESETS,
    .n_presets = (int)(sizeof LSM_PRESETS / sizeof LSM_PRESETS[0]),
    .baseline_workloads = CE_BASELINES,
    .wl_family = &lsm_family,
    .catalog = {{parity_catalog_log_softmax, &parity_catalog_log_softmax_count}},
    .cost = &parity_cost_cross_entropy,
    .build = ce_build,
    .emulate = ce_emulate,
    .free_priv = NULL,
    .variants = CE_VARIANTS,
    .variant_ref = ce_variant_ref,
};

/* Built-in catalog for log_softmax and the fused cross_entropy forward+backward: faithful fp32
 * variants (two-pass with max subtraction, online single pass with rescaling, bf16 output) and
 * mutants modelling real bugs (no max subtraction, bf16 intermediates, bf16 sum of exps, the
 * fp32 sum of exps rounded to bf16, a gradient without the -1 at the target, loss as -log(softmax) after softmax underflowed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"

static float bf(float x) { return parity_round_bf16(x); }

typedef enum {
    M_TWO_PASS = 0, /* m = max; S = Σ expf(x - m); L = logf(S); y = (x - m) - L */
    M_ONLINE,       /* one pass: running max with rescale s·expf(m_old - m_new); lse = m + logf(s) */
    M_NO_MAX,       /* S = Σ expf(x): overflows past 88.7, underflows below -103 */
    M_BF16_STEPS,   /* every intermediate (x - m, exp, the running sum, log, y) rounded to bf16 */
    M_BF16_SUM,     /* the sum of exps accumulated in bf16, everything else fp32 */
    M_NO_ONEHOT,    /* cross_entropy: dlogits = softmax (the -1 at the target forgotten) */
    M_LOG_SOFTMAX,  /* cross_entropy: loss = -logf(expf(x_t - m) / S): log(0) = inf far away */
    M_SUM_ROUNDED   /* the fp32 sum of exps rounded once to bf16 (torch's CPU log_softmax on bf16
                       input keeps the row's sum in the input dtype) */
} mode_t_;

/* The row statistics: max m and the sum S of expf(x - m) (for M_NO_MAX: m = 0). */
static void row_stats(const float *x, int64_t v, mode_t_ mode, float *m_out, float *s_out)
{
    float m = -INFINITY, s = 0.0f;
    if (mode == M_ONLINE) {
        for (int64_t j = 0; j < v; j++) {
            if (x[j] > m) {
                s = s * expf(m - x[j]) + 1.0f; /* expf(-inf) = 0 on the first element */
                m = x[j];
            } else {
                s += expf(x[j] - m);
            }
        }
    } else if (mode == M_NO_MAX) {
        m = 0.0f;
        for (int64_t j = 0; j < v; j++) s += expf(x[j]);
    } else {
        for (int64_t j = 0; j < v; j++) m = x[j] > m ? x[j] : m;
        for (int64_t j = 0; j < v; j++) {
            if (mode == M_BF16_STEPS) s = bf(s + bf(expf(bf(x[j] - m))));
            else if (mode == M_BF16_SUM) s = bf(s + expf(x[j] - m));
            else s += expf(x[j] - m);
        }
    }
    *m_out = m;
    *s_out = mode == M_SUM_ROUNDED ? bf(s) : s;
}

static int lsm(const parity_abi_call_t *call, mode_t_ mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0];
    parity_abi_tensor_t *Y = &call->outputs[0];
    int64_t n = X->shape[0], v = X->shape[1];
    float *x = malloc((size_t)v * sizeof *x);
    if (!x) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        float m, s;
        row_stats(x, v, mode, &m, &s);
        float L = logf(s);
        if (mode == M_BF16_STEPS) L = bf(L);
        float lse = m + L;
        for (int64_t j = 0; j < v; j++) {
            float y;
            if (mode == M_ONLINE || mode == M_NO_MAX) y = x[j] - lse;
            else if (mode == M_BF16_STEPS) y = bf(bf(x[j] - m) - L);
            else y = (x[j] - m) - L;
            parity_put_f32(Y, i * v + j, y);
        }
    }
    free(x);
    return PARITY_KERNEL_OK;
}

static int ce(const parity_abi_call_t *call, mode_t_ mode)
{
    const parity_abi_tensor_t *X = &call->inputs[0], *T = &call->inputs[1];
    parity_abi_tensor_t *LO = &call->outputs[0], *G = &call->outputs[1];
    int64_t n = X->shape[0], v = X->shape[1];
    const int32_t *tg = T->data;
    float *x = malloc((size_t)v * sizeof *x);
    if (!x) return PARITY_KERNEL_ERROR;
    for (int64_t i = 0; i < n; i++) {
        parity_row_to_f32(X, i, x);
        int64_t t = tg[i];
        if (t < 0 || t >= v) {
            free(x);
            return PARITY_KERNEL_ERROR;
        }
        float m, s;
        row_stats(x, v, mode == M_ONLINE || mode == M_SUM_ROUNDED ? mode : M_TWO_PASS, &m, &s);
        if (mode == M_ONLINE) {
            /* Liger-style: lse once, loss = lse - x_t, dlogits = expf(x - lse) - onehot. */
            float lse = m + logf(s);
            parity_put_f32(LO, i, lse - x[t]);
            for (int64_t j = 0; j < v; j++) parity_put_f32(G, i * v + j, expf(x[j] - lse) - (j == t ? 1.0f : 0.0f));
            continue;
        }
        float inv = 1.0f / s, L = logf(s);
        if (mode == M_LOG_SOFTMAX) parity_put_f32(LO, i, -logf(expf(x[t] - m) * inv));
        else parity_put_f32(LO, i, L - (x[t] - m));
        for (int64_t j = 0; j < v; j++) {
            float p = expf(x[j] - m) / s;
            parity_put_f32(G, i * v + j, (j == t && mode != M_NO_ONEHOT) ? p - 1.0f : p);
        }
    }
    free(x);
    return PARITY_KERNEL_OK;
}

static int lsm_fp32(const parity_abi_call_t *c) { return lsm(c, M_TWO_PASS); }
static int lsm_online(const parity_abi_call_t *c) { return lsm(c, M_ONLINE); }
static int lsm_nomax(const parity_abi_call_t *c) { return lsm(c, M_NO_MAX); }
static int lsm_bf16(const parity_abi_call_t *c) { return lsm(c, M_BF16_STEPS); }
static int lsm_bf16sum(const parity_abi_call_t *c) { return lsm(c, M_BF16_SUM); }
static int lsm_sumrnd(const parity_abi_call_t *c) { return lsm(c, M_SUM_ROUNDED); }
static int ce_fp32(const parity_abi_call_t *c) { return ce(c, M_TWO_PASS); }
static int ce_sumrnd(const parity_abi_call_t *c) { return ce(c, M_SUM_ROUNDED); }
static int ce_online(const parity_abi_call_t *c) { return ce(c, M_ONLINE); }
static int ce_noonehot(const parity_abi_call_t *c) { return ce(c, M_NO_ONEHOT); }
static int ce_logsm(const parity_abi_call_t *c) { return ce(c, M_LOG_SOFTMAX); }

#define K(name, op, desc, in, out, fn, exp) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, in, out, fn, exp}
#define BF PARITY_DT_BF16
#define F32 PARITY_DT_F32

const parity_abi_kernel_t parity_catalog_log_softmax[] = {
    K("fp32", "log_softmax", "two-pass: max, fp32 sum of expf(x - m), (x - m) - logf(S)", BF, F32, lsm_fp32, "faithful"),
    K("online", "log_softmax", "single pass, running max with rescale, y = x - (m + logf(s))", BF, F32, lsm_online, "faithful"),
    K("fp32_in", "log_softmax", "two-pass fp32 on fp32 logits", F32, F32, lsm_fp32, "faithful"),
    K("bf16_out", "log_softmax", "two-pass fp32, output rounded to bf16", BF, BF, lsm_fp32, "faithful"),
    K("no_max", "log_softmax", "no max subtraction: x - logf(sum expf(x)); expf overflows past 88.7", BF, F32, lsm_nomax, "unfaithful"),
    K("bf16_steps", "log_softmax", "computed in bf16: every intermediate rounded to bf16", BF, BF, lsm_bf16, "unfaithful"),
    K("bf16_sum", "log_softmax", "sum of exps accumulated in bf16", BF, F32, lsm_bf16sum, "unfaithful"),
    K("sum_rounded_bf16", "log_softmax", "fp32 sum of exps rounded to bf16 before its log (torch's CPU log_softmax on bf16 input), bf16 output", BF, BF, lsm_sumrnd, "unfaithful"),
    K("fp32", "cross_entropy", "two-pass: loss = logf(S) - (x_t - m), dlogits = expf(x - m)/S - onehot", BF, F32, ce_fp32, "faithful"),
    K("online", "cross_entropy", "single pass lse (Liger-style): loss = lse - x_t, dlogits = expf(x - lse) - onehot", BF, F32, ce_online, "faithful"),
    K("fp32_in", "cross_entropy", "two-pass fp32 on fp32 logits", F32, F32, ce_fp32, "faithful"),
    K("bf16_out", "cross_entropy", "two-pass fp32, loss and dlogits rounded to bf16", BF, BF, ce_fp32, "faithful"),
    K("no_onehot", "cross_entropy", "dlogits = softmax: the -1 at the target is missing", BF, F32, ce_noonehot, "unfaithful"),
    K("sum_rounded_bf16", "cross_entropy", "fp32 sum of exps rounded to bf16 (kept in the logits' dtype) before the loss and softmax", BF, F32, ce_sumrnd, "unfaithful"),
    K("log_of_softmax", "cross_entropy", "loss = -logf(softmax_t): softmax underflows to 0 far from the max", BF, F32, ce_logsm, "unfaithful"),
};
const int parity_catalog_log_softmax_count =
    (int)(sizeof parity_catalog_log_softmax / sizeof parity_catalog_log_softmax[0]);

/* Judges candidates' outputs against references (see verify.h and docs/error-model.md): the
 * tolerances, the judge's rows, the error model's constants. The runs themselves, isolated in
 * child processes over shared memory, are isolate.c's. */
#include "parity/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/parallel.h"
#include "src/verify/verify_impl.h"

/* The 11-bit emulation keeps fp32's exponent range (custom:m=10,e=8): the emulations then differ
 * in precision only, so error falls monotonically with bits. fp16 itself would also underflow
 * gradient-scale terms, which is a range problem, not a precision one. */
const char *const parity_emu_names[PARITY_N_EMU] = {
    "bf16 sequential", "bf16 pairwise", "11-bit sequential", "11-bit pairwise",
    "fp32 sequential", "fp32 pairwise"};
const int parity_emu_bits[PARITY_N_EMU] = {8, 8, 11, 11, 24, 24};
const char *const parity_cause_names[PARITY_N_CAUSES] = {
    "", "accumulator", "unknown", "parameter", "dropped-terms", "intermediate-rounding",
    "ignored-input", "flush-to-zero", "duplicated-terms", "tie", "structural"};

/* The failure probability we accept for a faithful kernel on one output of one workload. */
#define PARITY_ALPHA 1e-6

const char *parity_verdict_name(parity_verdict_t v)
{
    switch (v) {
    case PARITY_VERDICT_FAITHFUL: return "faithful";
    case PARITY_VERDICT_UNFAITHFUL: return "unfaithful";
    case PARITY_VERDICT_CRASHED: return "crashed";
    case PARITY_VERDICT_TIMEOUT: return "timeout";
    case PARITY_VERDICT_OOB: return "wrote-out-of-bounds";
    case PARITY_VERDICT_MODIFIED_INPUTS: return "modified-inputs";
    case PARITY_VERDICT_NONDETERMINISTIC: return "nondeterministic";
    case PARITY_VERDICT_UNSUPPORTED: return "unsupported";
    case PARITY_VERDICT_STALE_CACHE: return "stale-cache";
    }
    if (v == PARITY_VERDICT_NOT_JUDGED) return "not-judged";
    return "?";
}

void parity_check_opts_default(parity_check_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->noise_floor = 1;
    o->timeout_s = 120;
    o->n_threads = 1; /* the CLI's --threads default; 0 asks for all cores */
}

double parity_gamma(double n, double u)
{
    if (n <= 0) return 0;
    double nu = n * u;
    return nu >= 1 ? INFINITY : nu / (1 - nu);
}

double parity_gamma_prob(double n, double u, double lambda)
{
    if (n <= 0) return 0;
    return expm1(lambda * sqrt(n) * u + n * u * u / (1 - u));
}

double parity_lambda(double n, double elements, double alpha)
{
    /* 2 n exp(-lambda^2/2) * elements <= alpha  =>  lambda = sqrt(2 ln(2 n elements / alpha));
     * the (1-u)^2 factor is folded in by the caller's u << 1 (it changes lambda by < 1e-6). */
    if (n < 1) n = 1;
    if (elements < 1) elements = 1;
    return sqrt(2.0 * log(2.0 * n * elements / alpha));
}

/* ---- judgement ------------------------------------------------------------------------------ */

/* Precision (bits) and unit roundoff of a dtype; min subnormal for the absolute underflow term. */
static void dtype_precision(parity_dtype_t dt, double *u, double *tiny)
{
    switch (dt) {
    case PARITY_DT_F64: *u = 0x1p-53; *tiny = 0x1p-1074; return;
    case PARITY_DT_BF16: *u = 0x1p-8; *tiny = 0x1p-133; return;
    case PARITY_DT_F16: *u = 0x1p-11; *tiny = 0x1p-24; return;
    default: *u = 0x1p-24; *tiny = 0x1p-149; return;
    }
}

/* Tolerance of one element: acc_k is the accumulation term (gamma_{k-1} s_acc or the symmetric
 * class's, below), up the terms' own error (gamma(m_up) s_up, or the split per-term term below;
 * probabilistic or worst-case alike). */
static inline double tol_from(double acc_k, double up, double ref, double under, double u_out,
                              double tiny_out)
{
    double acc = acc_k + up + under;
    /* Output rounding to a narrower dtype: |fl(s) - s| <= u_out |s| <= u_out (|ref| + acc). */
    return acc + u_out * (fabs(ref) + acc) + tiny_out;
}

/* The symmetric reduction class's accumulation term (docs/error-model.md, "Symmetric reduction
 * class"). The computed sum's error is exactly sum over the k-1 internal nodes of the summation
 * tree of delta_node * t_node (t_node: the exact sum of the node's two computed operands,
 * |delta| <= u). Azuma-Hoeffding over the roundings (mean-independent, Higham & Mary's model)
 * with |t_node| <= |s_node| + gamma_{k-1} ||x||_1, and Hoeffding over the generated signs with
 * |s_node| <= lambda ||x_node||_2 <= lambda ||x||_2 on every node (a union bound over the
 * (k-1) M nodes, which the lambda of n >= k-1 terms and M elements already covers), give
 *     |err| <= lambda u sqrt(k-1) (lambda ||x||_2 + gamma_{k-1} ||x||_1).
 * The terms the kernel sums carry up to gamma_{m_up} of their own condition (s_up), so ||x||_2
 * and ||x||_1 of the computed terms are at most s_sym + g_m su and sa + g_m su. */
static inline double sym_acc(double c_row, double lambda, double gk_d, double gm_d, double s2,
                             double sa, double su)
{
    /* c_row = lambda u sqrt(k-1), one per row */
    return c_row * (lambda * (s2 + gm_d * su) + gk_d * (sa + gm_d * su));
}

/* The split per-term term (docs/error-model.md, "Per-term errors across terms"). The k terms of
 * an element come from distinct roundings (distinct token rows), so the first-order error of all
 * of them is one martingale sum_i sum_r c_ir delta_ir with sum_r c_ir^2 <= m_up A_i^2 (A_i: term
 * i's absolute condition; the op derives the count). Azuma-Hoeffding bounds it by
 * lambda u sqrt(m_up) sqrt(sum_i A_i^2) = c_split * s_up2. What is not mean-zero adds linearly:
 * the op's systematic allowances b_up u (an rsqrt intrinsic's 2 ulp, a rounded constant) and the
 * second-order remainder of each term, at most (gamma_m - m u) = m u gamma_m of its A_i; lin is
 * their sum per unit of s_up. The verdict takes the smaller of this and gamma~_m s_up. */
static inline double up_prob(const parity_ref_output_t *R, int64_t e, double gm_p, double su,
                             double c_split, double lin, int *split)
{
    double up = gm_p * su;
    *split = 0;
    if (R->s_up2) {
        double s = lin * su + c_split * R->s_up2[e];
        if (s < up) {
            up = s;
            *split = 1;
        }
    }
    return up;
}

/* The per-unit constants of up_prob for an output: c_split = lambda u sqrt(m_up), lin. */
static void split_consts(const parity_ref_output_t *R, double u, double lambda, double *c_split,
                         double *lin)
{
    double m = (double)R->m_up;
    *c_split = lambda * u * sqrt(m);
    *lin = R->b_up * u + m * u * parity_gamma(m, u);
}

void parity_tolerance(const parity_ref_output_t *R, int64_t slot, int64_t j, double u_acc,
                      double tiny_acc, double u_out, double tiny_out, double lambda, double *tol_p,
                      double *tol_d)
{
    /* Accumulating k terms takes k-1 additions; each term came from m_up roundings. Underflow:
     * each operation may lose up to the accumulator's smallest subnormal spacing. */
    double k = (double)R->k[slot], m = (double)R->m_up;
    int64_t e = slot * R->cols + j;
    double ref = R->ref[e], sa = R->s_acc[e];
    if (R->tol) { /* a measured tolerance (op.h), as elem_tol */
        *tol_p = *tol_d = tol_from(R->tol[e], 0, ref, 0, u_out, tiny_out);
        return;
    }
    double su = R->s_up ? R->s_up[e] : 0;
    double under = (k + m) * tiny_acc;
    double op_d = R->s_op ? R->u_op * sa : 0;
    double op_p = R->s_op ? fmin(lambda * R->u_op * R->s_op[e], op_d) : 0;
    double gk_d = parity_gamma(k - 1, u_acc), gm_d = parity_gamma(m, u_acc);
    double acc_p = parity_gamma_prob(k - 1, u_acc, lambda) * sa;
    if (R->s_sym && k > 1)
        acc_p = fmin(acc_p, sym_acc(lambda * u_acc * sqrt(k - 1), lambda, gk_d, gm_d, R->s_sym[e],
                                    sa, su));
    double c_split, lin;
    int split;
    split_consts(R, u_acc, lambda, &c_split, &lin);
    double up_p = up_prob(R, e, parity_gamma_prob(m, u_acc, lambda), su, c_split, lin, &split);
    *tol_p = tol_from(acc_p, up_p, ref, under + op_p, u_out, tiny_out);
    *tol_d = tol_from(gk_d * sa, gm_d * su, ref, under + op_d, u_out, tiny_out);
}

/* Integer loops only (no floating-point operation changes): let GCC vectorize them at -O3. */
#if defined(__GNUC__) && !defined(__clang__)
#define VERIFY_VECTOR_INT __attribute__((optimize("O3")))
#else
#define VERIFY_VECTOR_INT
#endif

/* 1 if elements [start, start + n) are all zero (either sign): a row without terms. Most rows of
 * a vocabulary-sized output are such rows, and this scan was most of the judge's time when it ran
 * one element per step (docs/check-speed.md). */
VERIFY_VECTOR_INT static int row_all_zero(const parity_abi_tensor_t *out, int64_t start, int64_t n)
{
    if (out->dtype == PARITY_DT_F32) {
        const uint32_t *p = (const uint32_t *)out->data + start;
        uint32_t acc = 0;
        for (int64_t j = 0; j < n; j++) acc |= p[j] & 0x7fffffffu;
        return acc == 0;
    }
    if (out->dtype == PARITY_DT_BF16 || out->dtype == PARITY_DT_F16) {
        const uint16_t *p = (const uint16_t *)out->data + start;
        unsigned acc = 0;
        for (int64_t j = 0; j < n; j++) acc |= p[j] & 0x7fffu;
        return acc == 0;
    }
    for (int64_t j = 0; j < n; j++)
        if (parity_tensor_get(out, start + j) != 0) return 0;
    return 1;
}

/* Insert a failing row's worst element among res's PARITY_N_WORST_ROWS largest err/tol, after
 * those with the same err/tol (the earlier row first). */
static void keep_worst_row(parity_wl_result_t *res, const parity_worst_t *rw)
{
    int pos = res->n_worst_rows;
    while (pos > 0 && res->worst_rows[pos - 1].q < rw->q) pos--;
    if (pos < PARITY_N_WORST_ROWS) {
        int last = res->n_worst_rows < PARITY_N_WORST_ROWS ? res->n_worst_rows : PARITY_N_WORST_ROWS - 1;
        memmove(&res->worst_rows[pos + 1], &res->worst_rows[pos], (size_t)(last - pos) * sizeof *rw);
        res->worst_rows[pos] = *rw;
        if (res->n_worst_rows < PARITY_N_WORST_ROWS) res->n_worst_rows++;
    }
}

/* What every row of one output's judgement shares. */
typedef struct {
    const parity_ref_output_t *R;
    const parity_abi_tensor_t *out;
    double u_acc, tiny_acc, u_out, tiny_out, lambda, m, gm_p, gm_d, c_split, lin;
    double ovf; /* the output dtype's overflow threshold: exact values this large round to inf */
    double *row_err;
    parity_wl_result_t *block; /* one result per block of JUDGE_ROWS rows */
    parity_steal_t steal;      /* which thread judges which block (never what it finds) */
} judge_ctx_t;

/* What a row's elements share: k's gamma factors, the symmetric class's constant, underflow. */
typedef struct {
    int64_t rk;
    double gk_p, gk_d, sym_c, under;
} row_consts_t;

static void row_consts(const judge_ctx_t *jc, int64_t rk, row_consts_t *rc)
{
    rc->rk = rk;
    rc->gk_p = parity_gamma_prob((double)rk - 1, jc->u_acc, jc->lambda);
    rc->gk_d = parity_gamma((double)rk - 1, jc->u_acc);
    rc->sym_c = rk > 1 ? jc->lambda * jc->u_acc * sqrt((double)rk - 1) : 0;
    rc->under = ((double)rk + jc->m) * jc->tiny_acc;
}

/* Element e's tolerance (the probabilistic one; *td the worst-case one) and which bounds were
 * the smaller (*sym, *split): the judge's and parity_judge_tolerances' one definition. */
static inline double elem_tol(const judge_ctx_t *jc, const row_consts_t *rc, int64_t e, double *td,
                              int *sym, int *split)
{
    const parity_ref_output_t *R = jc->R;
    double ref = R->ref[e], sc = R->s_acc[e], su = R->s_up ? R->s_up[e] : 0;
    *sym = *split = 0;
    if (R->tol) { /* a measured tolerance (op.h): only the output's own rounding is added */
        *td = tol_from(R->tol[e], 0, ref, 0, jc->u_out, jc->tiny_out);
        return *td;
    }
    /* Operand roundings: u_op sum|x| <= u_op s_acc always holds (worst case); Hoeffding's
     * lambda u_op sqrt(sum x^2) is smaller when many terms share the sum, larger when one
     * dominates: the verdict takes the smaller (op.h). */
    double op_d = R->s_op ? R->u_op * sc : 0;
    double op_p = R->s_op ? fmin(jc->lambda * R->u_op * R->s_op[e], op_d) : 0;
    /* Symmetric class: both bounds hold under their assumptions; take the smaller. */
    double acc_p = rc->gk_p * sc;
    *sym = 0;
    if (R->s_sym && rc->rk > 1) {
        double a = sym_acc(rc->sym_c, jc->lambda, rc->gk_d, jc->gm_d, R->s_sym[e], sc, su);
        if (a < acc_p) {
            acc_p = a;
            *sym = 1;
        }
    }
    /* Per-term errors: gamma~_m s_up, or the split term where it is smaller. */
    double up_p = up_prob(R, e, jc->gm_p, su, jc->c_split, jc->lin, split);
    *td = tol_from(rc->gk_d * sc, jc->gm_d * su, ref, rc->under + op_d, jc->u_out, jc->tiny_out);
    return tol_from(acc_p, up_p, ref, rc->under + op_p, jc->u_out, jc->tiny_out);
}

/* Output element idx as a double. */
static inline double elem_y(const parity_abi_tensor_t *out, int64_t idx)
{
    if (out->dtype == PARITY_DT_F32) return ((const float *)out->data)[idx];
    if (out->dtype == PARITY_DT_BF16) return parity_bf16_bits_to_f32(((const uint16_t *)out->data)[idx]);
    return parity_tensor_get(out, idx);
}

/* 1 - 2^-40: a quotient err/t below SURE_BELOW x m is below m whatever the roundings of the
 * products (a few ulps), so judge_rows skips its divisions for such elements. */
#define SURE_BELOW (1.0 - 0x1p-40)

/* |y - ref|, and *special when either is not finite: then the error is the quotient too
 * (infinite for NaN, which never matches; for infinities 0 when equal, else infinite). */
static inline double elem_err(double y, double ref, int *special)
{
    *special = isnan(y) || isinf(y) || isinf(ref);
    if (isnan(y)) return INFINITY;
    if (*special) return y == ref ? 0 : INFINITY;
    return fabs(y - ref);
}

/* Where the exact value may lie at or beyond the output dtype's overflow threshold (|ref| + t
 * reaches max + half an ulp, from which round to nearest gives inf), the output has no finite
 * value to match: an infinity of ref's sign is the correctly rounded result, and NaN what any
 * computation in that dtype gives once intermediates overflow (inf - inf). Both are accepted
 * there, nowhere else (docs/error-model.md, "Overflow"). */
static inline int overflow_ok(double ovf, double y, double ref, double t)
{
    return isfinite(ref) && fabs(ref) + t >= ovf && (isnan(y) || (isinf(y) && (y > 0) == (ref > 0)));
}

/* err over tolerance t as the verdict uses it (a zero tolerance: any error is infinitely over). */
static inline double elem_quot(double err, double t, int special)
{
    return special ? err : err == 0 ? 0 : t > 0 ? err / t : INFINITY;
}

/* judge_rows for a dense output with a measured tolerance (a declared op's) and no per-row
 * errors wanted: each row's err/tol in one tight pass, then the row's first largest, which is
 * what the element-by-element loop keeps (the row's worst; the workload's worst when larger;
 * max_qd, which is max_q here: the worst-case tolerance is the same one). The same results, in
 * a quarter of the time (its loop reloaded the output's fields for every element). 0 when no
 * memory for the row's quotients: the caller judges element by element. */
static int judge_rows_tol(const judge_ctx_t *jc, int64_t r0, int64_t r1, parity_wl_result_t *res)
{
    const parity_ref_output_t *R = jc->R;
    const parity_abi_tensor_t *out = jc->out;
    const int64_t cols = R->cols;
    const double u_out = jc->u_out, tiny_out = jc->tiny_out;
    double *q = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *q);
    if (!q) return 0;
    for (int64_t r = r0; r < r1; r++) {
        const double *ref = R->ref + r * cols, *tol = R->tol + r * cols;
        int64_t nan = 0;
        for (int64_t j = 0; j < cols; j++) {
            double y = elem_y(out, r * cols + j), t = tol_from(tol[j], 0, ref[j], 0, u_out, tiny_out);
            int special;
            double err = elem_err(y, ref[j], &special);
            q[j] = special && overflow_ok(jc->ovf, y, ref[j], t) ? 0 : elem_quot(err, t, special);
            nan += isnan(y);
        }
        int64_t a = 0;
        for (int64_t j = 1; j < cols; j++)
            if (q[j] > q[a]) a = j;
        res->nan_count += nan;
        res->rows_judged++;
        if (cols == 0) continue;
        double m = q[a];
        if (m > res->max_qd) res->max_qd = m;
        double y = elem_y(out, r * cols + a), t = tol_from(tol[a], 0, ref[a], 0, u_out, tiny_out);
        int special;
        parity_worst_t rw = {.row = r, .row_key = R->row_key ? R->row_key[r] : r, .col = a, .k = R->k[r], .got = y,
                             .ref = ref[a], .err = elem_err(y, ref[a], &special), .tol = t, .q = m};
        snprintf(rw.output, sizeof rw.output, "%s", R->name);
        if (m > res->worst.q || (res->worst.q == 0 && res->worst.output[0] == 0)) res->worst = rw;
        if (m > 1) {
            res->rows_failed++;
            keep_worst_row(res, &rw);
        }
        if (m > res->max_q) res->max_q = m;
    }
    free(q);
    return 1;
}

/* Rows [r0, r1) of the output into res, in row order. */
static void judge_rows(const judge_ctx_t *jc, int64_t r0, int64_t r1, parity_wl_result_t *res)
{
    const parity_ref_output_t *R = jc->R;
    const parity_abi_tensor_t *out = jc->out;
    double *row_err = jc->row_err;
    if (R->tol && !R->slot && !row_err && judge_rows_tol(jc, r0, r1, res)) return;
    for (int64_t r = r0; r < r1; r++) {
        int64_t slot = R->slot ? R->slot[r] : r;
        double rq = 0, rerr = 0, rscale = 0;
        int64_t rk = slot >= 0 ? R->k[slot] : 0;
        row_consts_t rc;
        row_consts(jc, rk, &rc);
        if (rk > res->max_hits && R->slot) res->max_hits = rk;
        if (slot < 0 && row_all_zero(out, r * R->cols, R->cols)) { /* the common, fast case */
            res->rows_judged++;
            if (row_err) row_err[r] = 0;
            continue;
        }
        parity_worst_t rw; /* this row's worst element */
        memset(&rw, 0, sizeof rw);
        for (int64_t j = 0; j < R->cols; j++) {
            int64_t idx = r * R->cols + j;
            double y = elem_y(out, idx);
            double ref = 0, tp = 0, td = 0;
            if (slot >= 0) {
                int64_t e = slot * R->cols + j;
                ref = R->ref[e];
                int sym, split;
                tp = elem_tol(jc, &rc, e, &td, &sym, &split);
                res->sym_elements += sym;
                res->perterm_elements += split;
                if (row_err) { /* the row's scale is for row_err alone */
                    double sc = R->s_acc[e];
                    rscale = sc > rscale ? sc : rscale;
                }
            }
            int special;
            double err = elem_err(y, ref, &special);
            if (special && overflow_ok(jc->ovf, y, ref, tp)) err = 0, special = 0;
            if (err > rerr) rerr = err;
            /* The common element: its err/tol below the row's largest so far (so below the
             * worst so far) and below the largest worst-case quotient: no division needed, and
             * nothing below changes (the comparisons are strict). */
            if (!special && j > 0 && res->worst.output[0] && err < SURE_BELOW * rq * tp &&
                err < SURE_BELOW * res->max_qd * td)
                continue;
            double q = elem_quot(err, tp, special), qd = td == tp ? q : elem_quot(err, td, special);
            if (isnan(y)) res->nan_count++;
            if (q > rq || j == 0) {
                rw = (parity_worst_t){.row = r, .row_key = R->row_key ? R->row_key[r] : r, .col = j,
                                      .k = rk, .got = y, .ref = ref, .err = err, .tol = tp, .q = q};
                snprintf(rw.output, sizeof rw.output, "%s", R->name);
            }
            if (q > rq) rq = q;
            if (qd > res->max_qd) res->max_qd = qd;
            if (q > res->worst.q || (res->worst.q == 0 && res->worst.output[0] == 0)) {
                res->worst.q = q;
                snprintf(res->worst.output, sizeof res->worst.output, "%s", R->name);
                res->worst.row = r;
                res->worst.row_key = R->row_key ? R->row_key[r] : r;
                res->worst.col = j;
                res->worst.k = rk;
                res->worst.got = y;
                res->worst.ref = ref;
                res->worst.err = err;
                res->worst.tol = tp;
            }
        }
        res->rows_judged++;
        if (rq > 1) { /* keep the PARITY_N_WORST_ROWS failing rows with the largest err/tol */
            res->rows_failed++;
            keep_worst_row(res, &rw);
        }
        if (rq > res->max_q) res->max_q = rq;
        if (row_err) row_err[r] = rscale > 0 ? rerr / rscale : (rerr > 0 ? INFINITY : 0);
    }
}

/* Rows are judged in blocks of JUDGE_ROWS on every core, each block into a result of its own,
 * and the blocks' results are merged in row order as the one loop over all rows would have
 * accumulated them: sums and maxima, the worst element (the first, in row order, with the
 * largest err/tol: a block's replaces the running one only when strictly larger, or when the
 * running one is not set yet) and the failing rows (inserted in row order, ties after earlier
 * rows). The block size is fixed, so the report does not depend on the thread count. */
/* 128 rows: a vocabulary-sized output (50,257 rows) is ~390 blocks, enough to share among any
 * core count; a block's result is ~1.2 KB, small beside the 128 rows' judgement. Only speed
 * depends on it, never the result. */
enum { JUDGE_ROWS = 128 };

/* fn on every core, each call taking blocks [0, nb) from st until none is left (parallel.h), not
 * in fixed halves: the rows with terms, where the judging is, crowd at the low ids of Zipf and
 * real-text workloads (frequent tokens first), so with halves one core judged them while the
 * other scanned zero rows and then waited (seen in a profile of a production check). */
static void steal_blocks(parity_steal_t *st, int64_t nb, parity_range_fn fn, void *ctx)
{
    int nt = parity_num_threads();
    if (nt > nb) nt = (int)nb;
    parity_steal_init_even(st, nt, nb);
    parity_parallel_for(nt, nt, fn, ctx);
}

static void judge_blocks(void *p, int64_t b, int64_t e, int thread)
{
    (void)b;
    (void)e;
    judge_ctx_t *jc = p;
    int64_t k;
    while ((k = parity_steal_next(&jc->steal, thread)) >= 0) {
        int64_t r1 = (k + 1) * JUDGE_ROWS < jc->R->rows ? (k + 1) * JUDGE_ROWS : jc->R->rows;
        judge_rows(jc, k * JUDGE_ROWS, r1, &jc->block[k]);
    }
}

static void judge_merge(parity_wl_result_t *res, const parity_wl_result_t *b)
{
    res->rows_judged += b->rows_judged;
    res->rows_failed += b->rows_failed;
    res->nan_count += b->nan_count;
    res->sym_elements += b->sym_elements;
    res->perterm_elements += b->perterm_elements;
    if (b->max_hits > res->max_hits) res->max_hits = b->max_hits;
    if (b->max_qd > res->max_qd) res->max_qd = b->max_qd;
    if (b->max_q > res->max_q) res->max_q = b->max_q;
    if (b->worst.output[0] &&
        (b->worst.q > res->worst.q || (res->worst.q == 0 && res->worst.output[0] == 0)))
        res->worst = b->worst;
    for (int i = 0; i < b->n_worst_rows; i++) keep_worst_row(res, &b->worst_rows[i]);
}

/* The constants of one output's judgement: precisions of the accumulator and the output, lambda
 * (from the largest term count and the element count), gamma of the terms' own roundings. */
static void judge_setup(judge_ctx_t *jc, const parity_ref_output_t *R, parity_dtype_t out_dt,
                        parity_dtype_t acc_dt)
{
    memset(jc, 0, sizeof *jc);
    jc->R = R;
    dtype_precision(acc_dt, &jc->u_acc, &jc->tiny_acc);
    dtype_precision(out_dt, &jc->u_out, &jc->tiny_out);
    /* max finite + half an ulp: 2^128 (1 - 2^-25) for fp32, 2^128 (1 - 2^-9) for bf16, 65520 for fp16 */
    jc->ovf = out_dt == PARITY_DT_F16 ? 65520.0 : out_dt == PARITY_DT_BF16 ? 0x1p128 * (1 - 0x1p-9)
              : out_dt == PARITY_DT_F64 ? INFINITY : 0x1p128 * (1 - 0x1p-25);
    if (jc->u_out <= jc->u_acc) { /* output as wide as the accumulator: its rounding is in gamma_k */
        jc->u_out = 0;
        jc->tiny_out = 0;
    }
    int64_t kmax = 1;
    for (int64_t s = 0; s < R->n_slots; s++) kmax = R->k[s] > kmax ? R->k[s] : kmax;
    double nmax = (double)(kmax > R->m_up ? kmax : R->m_up);
    jc->lambda = parity_lambda(nmax, (double)R->rows * (double)R->cols, PARITY_ALPHA);
    jc->m = (double)R->m_up;
    jc->gm_p = parity_gamma_prob(jc->m, jc->u_acc, jc->lambda);
    jc->gm_d = parity_gamma(jc->m, jc->u_acc);
    split_consts(R, jc->u_acc, jc->lambda, &jc->c_split, &jc->lin);
}

/* Judge one output of a run. Fills max_q, max_qd, rows, nan count, worst, and per-row errors
 * for the hit correlation (row_err may be NULL). */
void parity_judge_output(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                         parity_dtype_t acc_dtype, int out_index, parity_wl_result_t *res,
                         double *row_err)
{
    judge_ctx_t jc;
    judge_setup(&jc, R, (parity_dtype_t)out->dtype, acc_dtype);
    jc.out = out;
    jc.row_err = row_err;
    if (jc.lambda > res->lambda) res->lambda = jc.lambda;
    int64_t nb = (R->rows + JUDGE_ROWS - 1) / JUDGE_ROWS;
    if (nb > 1) jc.block = calloc((size_t)nb, sizeof *jc.block);
    if (!jc.block) { /* one block, or no memory for more: the rows in one pass */
        judge_rows(&jc, 0, R->rows, res);
        (void)out_index;
        return;
    }
    steal_blocks(&jc.steal, nb, judge_blocks, &jc);
    for (int64_t k = 0; k < nb; k++) judge_merge(res, &jc.block[k]);
    free(jc.block);
    (void)out_index;
}

/* ---- the largest err/tol alone, from tolerances computed once ---------------------------------- */

typedef struct {
    judge_ctx_t jc;
    double *tp;
    const double *tpc;
    double *bmax; /* one maximum per block of JUDGE_ROWS rows */
} tolmax_t;

static void tol_slots(void *p, int64_t b, int64_t e, int thread)
{
    (void)thread;
    tolmax_t *t = p;
    const parity_ref_output_t *R = t->jc.R;
    for (int64_t s = b; s < e; s++) {
        row_consts_t rc;
        row_consts(&t->jc, R->k[s], &rc);
        for (int64_t j = 0; j < R->cols; j++) {
            double td;
            int sym, split;
            t->tp[s * R->cols + j] = elem_tol(&t->jc, &rc, s * R->cols + j, &td, &sym, &split);
        }
    }
}

double *parity_judge_tolerances(const parity_ref_output_t *R, parity_dtype_t out_dt,
                                parity_dtype_t acc_dt)
{
    tolmax_t t;
    judge_setup(&t.jc, R, out_dt, acc_dt);
    size_t ne = (size_t)R->n_slots * (size_t)R->cols;
    t.tp = malloc((ne ? ne : 1) * sizeof *t.tp);
    if (t.tp) parity_parallel_for(R->n_slots, 0, tol_slots, &t);
    return t.tp;
}

/* Blocks of rows, the largest q of each: the q of every element exactly as judge_rows forms it
 * (a row without terms: 0 when all zero, else infinite, as its tolerance is 0). */
static void max_blocks(void *p, int64_t b, int64_t e, int thread)
{
    (void)b;
    (void)e;
    tolmax_t *t = p;
    const parity_ref_output_t *R = t->jc.R;
    const parity_abi_tensor_t *out = t->jc.out;
    int64_t k;
    while ((k = parity_steal_next(&t->jc.steal, thread)) >= 0) {
        int64_t r1 = (k + 1) * JUDGE_ROWS < R->rows ? (k + 1) * JUDGE_ROWS : R->rows;
        double m = 0;
        for (int64_t r = k * JUDGE_ROWS; r < r1; r++) {
            int64_t slot = R->slot ? R->slot[r] : r;
            if (slot < 0) {
                if (!row_all_zero(out, r * R->cols, R->cols)) m = INFINITY;
                continue;
            }
            const double *ref = R->ref + slot * R->cols, *tp = t->tpc + slot * R->cols;
            for (int64_t j = 0; j < R->cols; j++) {
                int special;
                double err = elem_err(elem_y(out, r * R->cols + j), ref[j], &special);
                double q = elem_quot(err, tp[j], special);
                if (q > m) m = q;
            }
        }
        t->bmax[k] = m;
    }
}

double parity_judge_max_q(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                          const double *tp)
{
    tolmax_t t;
    memset(&t, 0, sizeof t);
    t.jc.R = R;
    t.jc.out = out;
    t.tpc = tp;
    int64_t nb = (R->rows + JUDGE_ROWS - 1) / JUDGE_ROWS;
    if (nb < 1) return 0;
    t.bmax = malloc((size_t)nb * sizeof *t.bmax);
    if (!t.bmax) return NAN;
    steal_blocks(&t.jc.steal, nb, max_blocks, &t);
    double m = 0;
    for (int64_t k = 0; k < nb; k++) m = t.bmax[k] > m ? t.bmax[k] : m;
    free(t.bmax);
    return m;
}

void parity_judge_row_q(const parity_ref_output_t *R, const parity_abi_tensor_t *out,
                        const double *tp, double *row_q, int64_t *within)
{
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t slot = R->slot ? R->slot[r] : r;
        double m = 0;
        for (int64_t j = 0; j < R->cols && slot >= 0; j++) {
            int special;
            double err = elem_err(elem_y(out, r * R->cols + j), R->ref[slot * R->cols + j], &special);
            double q = elem_quot(err, tp[slot * R->cols + j], special);
            m = q > m ? q : m;
            if (within) *within += q <= 1;
        }
        row_q[r] = m;
    }
}

/* Pearson r of log(k) and log(row error) over rows with k > 0 and a finite, positive error. */
double parity_hit_correlation(const parity_ref_output_t *R, const double *row_err)
{
    double n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (int64_t r = 0; r < R->rows; r++) {
        int64_t slot = R->slot ? R->slot[r] : r;
        if (slot < 0 || R->k[slot] <= 0 || !(row_err[r] > 0) || isinf(row_err[r])) continue;
        double x = log((double)R->k[slot]), y = log(row_err[r]);
        n++;
        sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
    }
    if (n < 3) return NAN;
    double cov = sxy - sx * sy / n, vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
    if (vx <= 0 || vy <= 0) return NAN;
    return cov / sqrt(vx * vy);
}

/* Judge every output of a case; sets verdict unfaithful when any element exceeds its tolerance.
 * Here, below the check units (check.c) and the caching probes (check_anticache.c) that both judge
 * cases, so neither calls into the other for it. */
void parity_judge_case(const parity_case_t *c, parity_tensor_t *const *o, parity_wl_result_t *res)
{
    double *row_err = NULL;
    for (int i = 0; i < c->n_outputs; i++) {
        const parity_ref_output_t *R = &c->ref[i];
        /* per-row errors: for the hit correlation, which slotted outputs (rows by token) have */
        double *re = (i == 0 && R->slot) ? (row_err = malloc((size_t)R->rows * sizeof *row_err)) : NULL;
        parity_judge_output(R, &o[i]->view, PARITY_DT_F32, i, res, re);
        if (i == 0 && (row_err || !R->slot)) res->hit_corr = R->slot ? parity_hit_correlation(R, row_err) : NAN;
    }
    free(row_err);
    if (res->max_q > 1) {
        res->verdict = PARITY_VERDICT_UNFAITHFUL;
        if (res->nan_count)
            snprintf(res->detail, sizeof res->detail,
                     "%lld NaN outputs (NaN-prefilled outputs left unwritten, or NaN computed)",
                     (long long)res->nan_count);
    }
}


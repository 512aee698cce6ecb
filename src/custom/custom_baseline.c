/* The baselines matrix for declared ops: what SOL-ExecBench, KernelBench, assert_close,
 * FlashAttention's tests, Composable Kernel, hipDNN and FlashInfer would say about a kernel of an
 * op a plugin declares (docs/custom-ops.md, "Baselines"). The rules themselves are baseline.c's
 * (parity_baseline_judge, reached through a case assembled from the declared op's arrays), so a
 * declared op is judged by exactly the rules the built-in ops are; what is declared-op specific
 * is each rule's input scheme (values at the op's base sizes), K, sum |terms|, the plain
 * low-precision implementation, and which rules cannot apply.
 * Deliberately not here: the report (src/verify/report.c), parity's own judgement. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/custom/custom_impl.h"
#include "parity/baseline.h"

int parity_custom_baseline_applies(int b, int n_out, const int *reduced, int multilinear, char *why, size_t cap)
{
    if (why && cap) why[0] = '\0';
    if (b < 0 || b >= PARITY_N_BASELINES) {
        if (why) snprintf(why, cap, "no rule %d", b);
        return 0;
    }
    if (b != PARITY_BASE_HIPDNN) return 1;
    /* hipDNN's tolerance is gamma_2K times sum |products| (its sumAbsProductBound): the sum of
     * the absolute terms of an element, which the reference on |inputs| gives only when every
     * term is a product of one element of each input (a multilinear reduction). */
    int any = 0, all = 1;
    for (int o = 0; o < n_out; o++) {
        any |= reduced[o] != 0;
        all &= reduced[o] != 0;
    }
    if (multilinear && all) return 1;
    if (why)
        snprintf(why, cap, "%s", any && !multilinear
                                     ? "the declared reduction is not multilinear: sum |products| (hipDNN's S) is "
                                       "not defined"
                                     : "no reduction declared (for every output): hipDNN's tolerance is gamma_2K "
                                       "times the sum of |products| of one");
    return 0;
}

/* The plain implementation's values (FlashAttention's out_pt before its rounding to the input
 * dtype), given to baseline.c as the op's emulation: the fp32 evaluation of the reference. */
static parity_status_t emulate_plain(const parity_case_t *c, int o, const parity_format_t *acc,
                                     parity_sum_order_t order, const int64_t *rows, int64_t n_rows, double *dst)
{
    (void)acc;
    (void)order;
    const double *const *plain = c->priv;
    if (!plain || !plain[o]) return PARITY_E_UNSUPPORTED;
    int64_t cols = c->ref[o].cols;
    for (int64_t q = 0; q < n_rows; q++) memcpy(dst + q * cols, plain[o] + rows[q] * cols, (size_t)cols * sizeof *dst);
    return PARITY_OK;
}

parity_status_t parity_custom_baseline_judge(int b, const char *op_name, int in_dtype, int n_out,
                                             const int64_t *rows, const int64_t *cols, const int64_t *k,
                                             const double *const *ref, const double *const *s_acc,
                                             const double *const *plain, const int *out_dtype, const void *const *outs,
                                             parity_baseline_result_t *br)
{
    if (!op_name || !rows || !cols || !k || !ref || !outs || !br || n_out < 1 || n_out > PARITY_OP_MAX_ARGS)
        return PARITY_E_INVALID;
    parity_op_t op;
    memset(&op, 0, sizeof op);
    op.name = op_name; /* never a built-in op's name (op_abi.h): baseline.c's scatter rule is not hit */
    op.n_outputs = n_out;
    op.emulate = plain ? emulate_plain : NULL;
    parity_case_t c;
    memset(&c, 0, sizeof c);
    c.op = &op;
    c.in_dtype = (parity_dtype_t)in_dtype;
    c.n_outputs = n_out;
    c.priv = (void *)plain;
    parity_tensor_t t[PARITY_OP_MAX_ARGS];
    parity_tensor_t *tp[PARITY_OP_MAX_ARGS];
    parity_status_t st = PARITY_OK;
    for (int o = 0; o < n_out; o++) {
        parity_ref_output_t *R = &c.ref[o];
        R->name = "out";
        R->row_kind = "row";
        R->rows = rows[o];
        R->cols = cols[o];
        R->n_slots = rows[o];
        R->ref = (double *)ref[o];
        R->s_acc = s_acc ? (double *)s_acc[o] : NULL;
        R->k = malloc((size_t)(rows[o] > 0 ? rows[o] : 1) * sizeof *R->k);
        if (!R->k) st = PARITY_E_NOMEM;
        for (int64_t r = 0; R->k && r < rows[o]; r++) R->k[r] = k[o] > 0 ? k[o] : 1;
        memset(&t[o], 0, sizeof t[o]);
        t[o].view.data = (void *)outs[o];
        t[o].view.dtype = out_dtype[o];
        t[o].view.ndim = 1;
        t[o].view.shape[0] = rows[o] * cols[o];
        t[o].view.strides[0] = 1;
        tp[o] = &t[o];
    }
    if (!st) st = parity_baseline_judge(b, &c, tp, br);
    for (int o = 0; o < n_out; o++) free(c.ref[o].k);
    return st;
}

/* Each rule's fixed seed, from baseline.c (through its public API: an op outside the registry
 * with baseline workloads gets the rule's seed; the workload itself is not used here). */
uint64_t parity_custom_baseline_seed(int b)
{
    static const parity_workload_t dummy[3];
    parity_op_t op;
    memset(&op, 0, sizeof op);
    op.name = "declared";
    op.baseline_workloads = dummy;
    const parity_workload_t *wl = NULL;
    uint64_t seed = 0;
    parity_baseline_workload(&op, b, &wl, &seed);
    return seed;
}

int custom_baseline_variant(int b)
{
    switch (b) {
    case PARITY_BASE_SOL_EXECBENCH: return CV_BL_SOL;
    case PARITY_BASE_KERNELBENCH: return CV_BL_RAND01;
    case PARITY_BASE_CK: return CV_BL_INT;
    default: return CV_BL_RANDN;
    }
}

parity_status_t parity_custom_baseline_case(int b, const parity_case_t *pc, const int *out_dtype,
                                            const void *const *outs, parity_baseline_result_t *br)
{
    if (!pc || !pc->op->declared || !outs || !out_dtype || b < 0 || b >= PARITY_N_BASELINES) return PARITY_E_INVALID;
    const custom_case_t *c = custom_case_of(pc);
    const parity_custom_op_t *op = c->op;
    double *plain[PARITY_CUSTOM_MAX_ARGS] = {0};
    parity_status_t st = PARITY_OK;
    if (b == PARITY_BASE_FLASH_ATTN) { /* the reference in fp32: the plain implementation */
        int ok = 1;
        for (int o = 0; o < op->n_out; o++) ok &= (plain[o] = malloc((size_t)c->n_out[o] * sizeof(double))) != NULL;
        if (!ok) st = PARITY_E_NOMEM;
        else if (custom_reference(c, PARITY_DT_F32, NULL, plain) != PARITY_KERNEL_OK)
            for (int o = 0; o < op->n_out; o++) { /* fp64 only: out_pt is the reference rounded once */
                free(plain[o]);
                plain[o] = NULL;
            }
    }
    if (!st) {
        int64_t k_o[PARITY_OP_MAX_ARGS], rows[PARITY_OP_MAX_ARGS], cols[PARITY_OP_MAX_ARGS];
        const double *pl[PARITY_OP_MAX_ARGS], *sa[PARITY_OP_MAX_ARGS], *rf[PARITY_OP_MAX_ARGS];
        for (int o = 0; o < op->n_out && o < PARITY_OP_MAX_ARGS; o++) {
            const parity_ref_output_t *R = &pc->ref[o];
            k_o[o] = 1;
            for (int j = 0; j < op->n_red[o]; j++) k_o[o] *= c->wl->size[op->red[o][j]];
            rows[o] = R->rows;
            cols[o] = R->cols;
            pl[o] = plain[o];
            sa[o] = R->tol ? NULL : R->s_acc; /* sum |terms| where the error model has it, else |ref| */
            rf[o] = R->ref;
        }
        st = parity_custom_baseline_judge(b, op->d->name, c->dtype, op->n_out, rows, cols, k_o, rf, sa,
                                          b == PARITY_BASE_FLASH_ATTN ? pl : NULL, out_dtype, outs, br);
    }
    for (int o = 0; o < PARITY_CUSTOM_MAX_ARGS; o++) free(plain[o]);
    return st;
}

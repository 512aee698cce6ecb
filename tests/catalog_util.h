/* Shared by the op tests (include after <cmocka.h>): build a case from a workload name, find a
 * catalog kernel, run one in this process on a case, and judge its outputs the way `parity
 * check` does (fp32 accumulator model). The forked, guarded runs of src/verify/check.c are not needed
 * here: catalog kernels are trusted code. */
#ifndef PARITY_TESTS_CATALOG_UTIL_H
#define PARITY_TESTS_CATALOG_UTIL_H

#include <string.h>

#include "parity/kernel.h"
#include "parity/op.h"
#include "src/verify/verify_impl.h"

/* Case of op_name on workload wl_name ("NAME" or "NAME@NxDxV") with seed and input dtype dt;
 * wl receives the workload and must outlive the case (the case points to it). */
static inline parity_case_t *cu_build_case(const char *op_name, const char *wl_name, parity_dtype_t dt,
                                           uint64_t seed, parity_workload_t *wl)
{
    const parity_op_t *op = parity_op_find(op_name);
    assert_non_null(op);
    assert_int_equal(parity_op_workload(op, wl_name, wl), PARITY_OK);
    wl->name = wl->label[0] ? wl->label : wl->name;
    parity_case_t *c = NULL;
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    assert_int_equal(parity_case_build(op, wl, seed, dt, &c, &diag), PARITY_OK);
    return c;
}

static inline const parity_abi_kernel_t *cu_find_kernel(const char *op, const char *name)
{
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op) == 0 && strcmp(k->name, name) == 0) return k;
    }
    fail_msg("no %s kernel %s", op, name);
    return NULL;
}

/* Run k on c (one thread, seed 1); out[] receives the outputs in k's dtype (caller frees). */
static inline void cu_run_kernel(const parity_abi_kernel_t *k, const parity_case_t *c, parity_tensor_t **out)
{
    for (int a = 0; a < c->n_outputs; a++) {
        out[a] = parity_tensor_new(c->op->output_names[a], (parity_dtype_t)k->out_dtype,
                                   c->out_ndim[a], c->out_shape[a]);
        assert_non_null(out[a]);
    }
    parity_abi_tensor_t in_v[PARITY_OP_MAX_ARGS], out_v[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    parity_case_make_call(c, in_v, out_v, out, 1, 1, &call);
    assert_int_equal(k->run(&call), PARITY_KERNEL_OK);
}

/* Run k on c and judge every output: the largest err/tol (> 1 fails). */
static inline double cu_judge_kernel(const parity_abi_kernel_t *k, const parity_case_t *c)
{
    parity_tensor_t *out[PARITY_OP_MAX_ARGS] = {0};
    cu_run_kernel(k, c, out);
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    for (int a = 0; a < c->n_outputs; a++)
        parity_judge_output(&c->ref[a], &out[a]->view, PARITY_DT_F32, a, &res, NULL);
    for (int a = 0; a < c->n_outputs; a++) parity_tensor_free(out[a]);
    return res.max_q;
}

/* Every catalog kernel of op_name judged on the cases of nw workloads (cb[w] with bf16 inputs,
 * cf[w] with fp32 ones, whichever the kernel takes): a "faithful" kernel within tolerance on all
 * of them, any other over it on at least one; at least min_seen kernels. */
static inline void cu_check_catalog(const char *op_name, parity_case_t *const *cb, parity_case_t *const *cf, int nw,
                                    int min_seen)
{
    int seen = 0;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op_name) != 0) continue;
        int any_fail = 0;
        double worst = 0;
        for (int w = 0; w < nw; w++) {
            double q = cu_judge_kernel(k, k->in_dtype == PARITY_DT_F32 ? cf[w] : cb[w]);
            any_fail |= !(q <= 1);
            worst = q > worst ? q : worst;
        }
        if (any_fail == (strcmp(k->expected, "faithful") == 0))
            fail_msg("%s: worst err/tol %g, expected %s (seed 1)", k->name, worst, k->expected);
        seen++;
    }
    assert_true(seen >= min_seen);
}

#endif

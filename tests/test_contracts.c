/* The C API's written contracts (issue #40): n_threads 0 means all cores, as op.h and verify.h
 * say (it used to become 1); parity_check_opts_default keeps the CLI's default of 1 thread; a
 * kernel that ran and is not judged yet is PARITY_VERDICT_NOT_JUDGED, not faithful; a
 * parity_compare_run result lives in caller storage and only its wl is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "parity/fileflow.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"
#include "src/core/parallel.h"

/* A small rmsnorm_fwd case (its first preset at 8 x 16) for kernel k's input dtype; the case
 * borrows the workload, so wl (caller storage) must outlive it. */
static parity_case_t *small_case(const parity_abi_kernel_t *k, parity_workload_t *wlp)
{
    const parity_op_t *op = parity_op_find("rmsnorm_fwd");
    assert_non_null(op);
    char name[96];
    snprintf(name, sizeof name, "%s@8x16", op->presets[0].name);
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, name, &wl), PARITY_OK);
    *wlp = wl;
    wlp->name = wlp->label; /* re-pointed after the copy (op.h) */
    parity_diag_t diag = {{0}};
    parity_case_t *c = NULL;
    if (parity_case_build(op, wlp, 1, (parity_dtype_t)k->in_dtype, &c, &diag) != PARITY_OK)
        fail_msg("rmsnorm_fwd on %s: %s", name, diag.msg);
    return c;
}

static void opts_default_one_thread(void **state)
{
    (void)state;
    parity_check_opts_t o;
    memset(&o, 0xab, sizeof o);
    parity_check_opts_default(&o);
    assert_int_equal(o.n_threads, 1);
}

static void zero_threads_is_all_cores(void **state)
{
    (void)state;
    parity_kernel_list_t kl = {0};
    parity_diag_t diag = {{0}};
    assert_int_equal(parity_kernel_resolve("builtin:fp32", "rmsnorm_fwd", &kl, &diag), PARITY_OK);
    parity_workload_t wl;
    parity_case_t *c = small_case(kl.items[0].k, &wl);
    parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
    for (int i = 0; i < c->n_outputs; i++) {
        outs[i] = parity_tensor_new(c->op->output_names[i], (parity_dtype_t)kl.items[0].k->out_dtype,
                                    c->out_ndim[i], c->out_shape[i]);
        assert_non_null(outs[i]);
    }
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    parity_case_make_call(c, in, out, outs, 3, c->seed, &call);
    assert_int_equal(call.n_threads, 3);
    parity_case_make_call(c, in, out, outs, 1, c->seed, &call);
    assert_int_equal(call.n_threads, 1);
    unsetenv("PARITY_THREADS");
    parity_case_make_call(c, in, out, outs, 0, c->seed, &call);
    assert_int_equal(call.n_threads, parity_num_threads());
    assert_true(call.n_threads >= 1);
    setenv("PARITY_THREADS", "5", 1);
    parity_case_make_call(c, in, out, outs, 0, c->seed, &call);
    assert_int_equal(call.n_threads, 5);
    unsetenv("PARITY_THREADS");
    for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(outs[i]);
    parity_case_free(c);
    parity_kernel_list_free(&kl);
}

static void ran_is_not_judged(void **state)
{
    (void)state;
    assert_string_equal(parity_verdict_name(PARITY_VERDICT_NOT_JUDGED), "not-judged");
    assert_true(PARITY_VERDICT_NOT_JUDGED != PARITY_VERDICT_FAITHFUL);
    assert_string_equal(parity_verdict_name((parity_verdict_t)(PARITY_VERDICT_STALE_CACHE + 1)), "?");
    parity_kernel_list_t kl = {0};
    parity_diag_t diag = {{0}};
    const char *specs[2] = {"builtin:fp32", "builtin:eps_outside_sqrt"};
    const parity_verdict_t want[2] = {PARITY_VERDICT_FAITHFUL, PARITY_VERDICT_UNFAITHFUL};
    for (int s = 0; s < 2; s++)
        assert_int_equal(parity_kernel_resolve(specs[s], "rmsnorm_fwd", &kl, &diag), PARITY_OK);
    assert_int_equal(kl.n, 2);
    for (int s = 0; s < 2; s++) {
        parity_workload_t wl;
        parity_case_t *c = small_case(kl.items[s].k, &wl);
        parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
        parity_verdict_t v = PARITY_VERDICT_FAITHFUL;
        char detail[256];
        assert_int_equal(parity_run_kernel(c, &kl.items[s], 60, outs, &v, detail, sizeof detail), PARITY_OK);
        assert_int_equal(v, PARITY_VERDICT_NOT_JUDGED);
        parity_check_opts_t o;
        parity_check_opts_default(&o);
        o.noise_floor = 0;
        parity_kernel_result_t res; /* caller storage: only res.wl is freed */
        assert_int_equal(parity_compare_run(c, outs, &kl.items[s], &o, &res), PARITY_OK);
        assert_int_equal(res.n_wl, 1);
        assert_int_equal(res.wl[0].verdict, want[s]);
        assert_int_equal(res.verdict, want[s]);
        free(res.wl);
        for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(outs[i]);
        parity_case_free(c);
    }
    parity_kernel_list_free(&kl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opts_default_one_thread),
        cmocka_unit_test(zero_threads_is_all_cores),
        cmocka_unit_test(ran_is_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

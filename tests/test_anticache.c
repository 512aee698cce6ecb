/* check_anticache: the call on the judged buffers holding other contents (what the kernel sees:
 * the first and last 64 bytes of each input unchanged, about one interior element in eight
 * scaled by -2, every row touched; the judged contents restored bit for bit afterwards, in
 * place; an input the kernel changed during that call still shows as changed). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "src/verify/check_impl.h"
#include "parity/op.h"
#include "parity/verify.h"
#include "src/verify/verify_impl.h"

/* What the kernel saw of input 0 (x of rmsnorm_fwd), and whether it scribbles on input 1. */
static float *seen;
static int64_t seen_n;
static int scribble;

static int k_record(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *x = &call->inputs[0];
    seen_n = parity_tensor_numel(x);
    seen = realloc(seen, (size_t)seen_n * sizeof *seen);
    for (int64_t i = 0; i < seen_n; i++) seen[i] = (float)parity_tensor_get(x, i);
    if (scribble) parity_tensor_set((parity_abi_tensor_t *)&call->inputs[1], 3, 7.0);
    return PARITY_KERNEL_OK;
}

static const parity_abi_kernel_t K = {sizeof(parity_abi_kernel_t), "record", "rmsnorm_fwd", "",
                                      0, PARITY_DT_F32, PARITY_DT_F32, k_record, NULL};

typedef struct {
    parity_case_t *c;
    parity_tensor_t *out[PARITY_OP_MAX_ARGS];
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], outv[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    uint64_t h[PARITY_OP_MAX_ARGS];
} fixture_t;

static void setup_case(fixture_t *f, int64_t n, int64_t d, parity_dtype_t dt)
{
    const parity_op_t *op = parity_op_find("rmsnorm_fwd");
    assert_non_null(op);
    static parity_workload_t wl;
    char name[64];
    snprintf(name, sizeof name, "unit@%lldx%lld", (long long)n, (long long)d);
    assert_int_equal(parity_op_workload(op, name, &wl), PARITY_OK);
    wl.name = wl.label;
    parity_diag_t diag = {{0}};
    assert_int_equal(parity_case_build(op, &wl, 7, dt, &f->c, &diag), PARITY_OK);
    for (int i = 0; i < f->c->n_outputs; i++) {
        f->out[i] = parity_tensor_new(op->output_names[i], PARITY_DT_F32, f->c->out_ndim[i],
                                      f->c->out_shape[i]);
        assert_non_null(f->out[i]);
    }
    parity_case_make_call(f->c, f->in, f->outv, f->out, 1, 7, &f->call);
    for (int i = 0; i < f->c->n_inputs; i++) f->h[i] = parity_tensor_hash(f->c->inputs[i]);
}

static void teardown_case(fixture_t *f)
{
    for (int i = 0; i < f->c->n_outputs; i++) parity_tensor_free(f->out[i]);
    parity_case_free(f->c);
}

static void other_contents_of(parity_dtype_t dt)
{
    fixture_t f;
    int64_t n = 64, d = 256;
    setup_case(&f, n, d, dt);
    scribble = 0;
    assert_int_equal(check_same_buffers_step(f.c, &K, &f.call), 0);
    assert_int_equal(seen_n, n * d);
    const parity_abi_tensor_t *xv = &f.c->inputs[0]->view;
    int64_t changed = 0, keep = 64 / (int64_t)parity_dtype_size(dt);
    float *x = malloc((size_t)(n * d) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n * d; i++) x[i] = (float)parity_tensor_get(xv, i);
    for (int64_t i = 0; i < n * d; i++) {
        if (seen[i] == x[i]) continue;
        changed++;
        assert_true(seen[i] == -2.0f * x[i]); /* exact, and nothing else */
        assert_true(i >= keep && i < n * d - keep); /* the fingerprint bytes are untouched */
    }
    /* Gaps of 1..15 (mean 8): one in eight, within a wide margin for 16k elements. */
    assert_true(changed > n * d / 10 && changed < n * d / 6);
    for (int64_t r = 1; r + 1 < n; r++) { /* every row (but the kept ends) has changed elements */
        int64_t cr = 0;
        for (int64_t j = 0; j < d; j++) cr += seen[r * d + j] != x[r * d + j];
        assert_true(cr > 0);
    }
    free(x);
    for (int i = 0; i < f.c->n_inputs; i++) /* restored bit for bit */
        assert_true(parity_tensor_hash(f.c->inputs[i]) == f.h[i]);
    teardown_case(&f);
}

static void other_contents_f32(void **state)
{
    (void)state;
    other_contents_of(PARITY_DT_F32);
}

static void other_contents_bf16(void **state)
{
    (void)state;
    other_contents_of(PARITY_DT_BF16);
}

static void modified_input_stays_visible(void **state)
{
    (void)state;
    fixture_t f;
    setup_case(&f, 16, 64, PARITY_DT_F32);
    /* The kernel scribbles on gamma during the call: the undo must not mask it. */
    scribble = 1;
    assert_int_equal(check_same_buffers_step(f.c, &K, &f.call), 0);
    scribble = 0;
    assert_true(parity_tensor_hash(f.c->inputs[1]) != f.h[1]);
    assert_true(parity_tensor_hash(f.c->inputs[0]) == f.h[0]);
    teardown_case(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(other_contents_f32),
        cmocka_unit_test(other_contents_bf16),
        cmocka_unit_test(modified_input_stays_visible),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(seen);
    return rc;
}

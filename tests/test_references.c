/* references: hand-worked values for the fp64 references that judge the incident's ops and the
 * MoE router, computed on paper here, independently of the kernels the references grade.
 * The workload-sized cross-checks (torch float64 for every op, central differences for the
 * backward ops) are tests/oracle_references.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_impl.h"
#include "parity/op.h"

/* dE = scatter-add of dY rows by id, s_abs the same of |dY|:
 *   ids = 0 2 0 3, dY = [1 2; 3 4; -5 6; 7 8]  (V = 4, D = 2)
 *   dE[0] = (1-5, 2+6) = (-4, 8)   s_abs[0] = (6, 8)
 *   dE[1] = (0, 0)                 (no hit)
 *   dE[2] = (3, 4),  dE[3] = (7, 8)                                                          */
static void embedding_bwd_by_hand(void **state)
{
    (void)state;
    double dy[8] = {1, 2, 3, 4, -5, 6, 7, 8};
    int32_t ids[4] = {0, 2, 0, 3};
    parity_abi_tensor_t t = {0};
    t.data = dy;
    t.dtype = PARITY_DT_F64;
    t.ndim = 2;
    t.shape[0] = 4;
    t.shape[1] = 2;
    t.strides[0] = 2;
    t.strides[1] = 1;
    double dE[8] = {0}, s[8] = {0};
    assert_int_equal(parity_ref_embedding_bwd(&t, ids, NULL, dE, s, 1), PARITY_OK);
    const double want[8] = {-4, 8, 0, 0, 3, 4, 7, 8}, want_s[8] = {6, 8, 0, 0, 3, 4, 7, 8};
    for (int i = 0; i < 8; i++) {
        assert_true(dE[i] == want[i]);
        assert_true(s[i] == want_s[i]);
    }
    /* With a slot map (row-sparse dE: only ids 0, 2, 3 have rows, in that order). */
    int64_t slot[4] = {0, -1, 1, 2};
    double dEs[6] = {0};
    assert_int_equal(parity_ref_embedding_bwd(&t, ids, slot, dEs, NULL, 2), PARITY_OK);
    const double want_sl[6] = {-4, 8, 3, 4, 7, 8};
    for (int i = 0; i < 6; i++) assert_true(dEs[i] == want_sl[i]);
}

/* MoE router + combine, one token, E = 4, D = 1, logits x = (2, 1, 1, 0), expert outputs
 * y = (10, 20, 30, 40), k = 2:
 *   top-2: expert 0 (logit 2), then experts 1 and 2 tie at 1: the lower id, 1, is taken.
 *   renorm = 1: w0 = e^2/(e^2+e) = e/(e+1), w1 = 1/(e+1); out = 10 w0 + 20 w1 = 10 + 10/(e+1)
 *   renorm = 0: p = (e^2, e, e, 1)/(e+1)^2; w0 = e^2/(e+1)^2, w1 = e/(e+1)^2;
 *               out = (10 e^2 + 20 e)/(e+1)^2                                                 */
static void moe_row_by_hand(void **state)
{
    (void)state;
    const double x[4] = {2, 1, 1, 0}, y[4] = {10, 20, 30, 40}, E = exp(1.0);
    int32_t sel[2];
    double w[2], gates[4], out[1], cond[2];
    parity_ref_mrc_row(x, y, 4, 1, 2, 1, sel, w, gates, out, cond);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    /* fp64 evaluations of the closed forms: a few roundings apart at most */
    assert_true(fabs(w[0] - E / (E + 1)) <= 4e-16);
    assert_true(fabs(w[1] - 1 / (E + 1)) <= 4e-16);
    assert_true(fabs(out[0] - (10 + 10 / (E + 1))) <= 4e-15);
    assert_true(gates[0] == w[0] && gates[1] == w[1] && gates[2] == 0 && gates[3] == 0);

    parity_ref_mrc_row(x, y, 4, 1, 2, 0, sel, w, gates, out, cond);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    double n = (E + 1) * (E + 1);
    assert_true(fabs(w[0] - E * E / n) <= 4e-16);
    assert_true(fabs(w[1] - E / n) <= 4e-16);
    assert_true(fabs(out[0] - (10 * E * E + 20 * E) / n) <= 4e-15);

    /* All four tied: the two lowest ids, weights 1/2 each when renormalised. */
    const double xt[4] = {0.5, 0.5, 0.5, 0.5};
    parity_ref_mrc_row(xt, y, 4, 1, 2, 1, sel, w, gates, out, cond);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    assert_true(w[0] == 0.5 && w[1] == 0.5 && out[0] == 15);
}

/* A preset without a V dimension takes NxD as its whole shape (it was refused: V < 1). */
static void preset_shape_without_vocab(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("rmsnorm_fwd");
    assert_non_null(op);
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, "unit@4x8", &wl), PARITY_OK);
    assert_true(wl.n == 4 && wl.d == 8 && wl.v == 0);
    assert_string_equal(wl.name, "unit@4x8");
    assert_int_equal(parity_op_workload(op, "unit@4x8x0", &wl), PARITY_E_INVALID);
    assert_int_equal(parity_op_workload(op, "unit@0x8", &wl), PARITY_E_INVALID);
    /* an op whose presets have a V still needs it to be >= 1 */
    const parity_op_t *eb = parity_op_find("embedding_bwd");
    assert_int_equal(parity_op_workload(eb, "uniform@64x8x0", &wl), PARITY_E_INVALID);
    assert_int_equal(parity_op_workload(eb, "uniform@64x8", &wl), PARITY_OK);
    assert_true(wl.v == 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedding_bwd_by_hand),
        cmocka_unit_test(moe_row_by_hand),
        cmocka_unit_test(preset_shape_without_vocab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

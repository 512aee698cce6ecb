/* The op record and its typed workloads (issue #39; docs/architecture.md, "The op record"): every
 * shipped op carries its presets' parameter family, catalog tables and cost model; every preset
 * and baseline scheme carries parameters its family describes field by field; a workload without
 * parameters or an unknown preset name is an error, never a silent default; a preset at another
 * shape keeps its parameters; the baseline rules' derived schemes change value schemes only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "parity/baseline.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "src/op/registry.h"

static void test_every_op_carries_its_parts(void **state)
{
    (void)state;
    assert_true(parity_op_count() >= 13);
    for (int i = 0; i < parity_op_count(); i++) {
        const parity_op_t *op = parity_op_at(i);
        assert_non_null(op->wl_family);
        assert_true(op->wl_family->size > 0 && op->wl_family->size <= PARITY_WL_PARAMS_MAX);
        assert_true(op->wl_family->n_fields > 0 && op->wl_family->n_fields <= PARITY_WL_MAX_FIELDS);
        for (int f = 0; f < op->wl_family->n_fields; f++) {
            assert_non_null(op->wl_family->fields[f].name);
            assert_true(op->wl_family->fields[f].offset < op->wl_family->size);
        }
        const parity_cost_model_t *cost = op->cost;
        assert_non_null(cost);
        assert_non_null(cost->fn);
        /* its catalog: at least one kernel of its own, one of them expected faithful */
        int own = 0, faithful = 0;
        for (int c = 0; c < PARITY_OP_MAX_CATALOGS && op->catalog[c].table; c++)
            for (int k = 0; k < *op->catalog[c].count; k++) {
                const parity_abi_kernel_t *kk = &op->catalog[c].table[k];
                if (strcmp(kk->op, op->name) != 0) continue;
                own++;
                faithful += strcmp(kk->expected, "faithful") == 0;
            }
        if (own == 0 || faithful == 0) fail_msg("op %s: %d catalog kernels, %d faithful", op->name, own, faithful);
    }
    /* the listing (parity kernels) is every table the records carry, each once */
    int total = 0;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        assert_non_null(k);
        assert_non_null(parity_op_find(k->op));
        for (int j = 0; j < i; j++) assert_true(parity_catalog_at(j) != k);
        total++;
    }
    assert_null(parity_catalog_at(total));
}

static void test_every_preset_describes_its_parameters(void **state)
{
    (void)state;
    char buf[2048];
    for (int i = 0; i < parity_op_count(); i++) {
        const parity_op_t *op = parity_op_at(i);
        for (int w = 0; w < op->n_presets + 3; w++) {
            const parity_workload_t *wl = w < op->n_presets ? &op->presets[w] : &op->baseline_workloads[w - op->n_presets];
            if (!wl->params) fail_msg("op %s workload %s: no parameters", op->name, wl->name);
            int n = parity_workload_describe(op->wl_family, wl, 0, buf, sizeof buf);
            assert_true(n > 0 && (size_t)n < sizeof buf);
            for (int f = 0; f < op->wl_family->n_fields; f++) {
                char key[64];
                snprintf(key, sizeof key, "%s=", op->wl_family->fields[f].name);
                if (!strstr(buf, key)) fail_msg("op %s workload %s: '%s' lacks %s", op->name, wl->name, buf, key);
            }
        }
    }
}

static void test_no_silent_default(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("attention_fwd");
    parity_workload_t w;
    parity_diag_t diag = {{0}};
    /* an unknown preset name */
    assert_int_equal(parity_op_workload_ex(op, "long-casual", &w, &diag), PARITY_E_NOTFOUND);
    assert_non_null(strstr(diag.msg, "long-casual"));
    assert_null(parity_op_find_preset(op, "nope"));
    /* a workload whose parameters are missing: refused, naming it and the op */
    assert_int_equal(parity_op_workload(op, "exact", &w), PARITY_OK);
    w.params = NULL;
    w.name = "mine";
    parity_case_t *c = NULL;
    memset(&diag, 0, sizeof diag);
    assert_int_equal(parity_case_build(op, &w, 1, PARITY_DT_F32, &c, &diag), PARITY_E_INVALID);
    assert_null(c);
    assert_non_null(strstr(diag.msg, "mine"));
    assert_non_null(strstr(diag.msg, "no parameters"));
    /* a preset at another shape keeps its parameters (the softcap, the mask, the peaks) */
    assert_int_equal(parity_op_workload(op, "softcap@64x32x1", &w), PARITY_OK);
    assert_ptr_equal(w.params, parity_op_find_preset(op, "softcap")->params);
    assert_int_equal(w.n, 64);
    assert_int_equal(parity_case_build(op, &w, 1, PARITY_DT_F32, &c, &diag), PARITY_OK);
    assert_true(c->attr_values[1] == 50); /* the softcap */
    parity_case_free(c);
}

static void test_derived_schemes_change_values_only(void **state)
{
    (void)state;
    char a[2048], b[2048];
    for (int i = 0; i < parity_op_count(); i++) {
        const parity_op_t *op = parity_op_at(i);
        const parity_workload_t *base = &op->baseline_workloads[PARITY_BASE_ASSERT_CLOSE], *ck;
        uint64_t seed;
        assert_int_equal(parity_baseline_workload(op, PARITY_BASE_CK, &ck, &seed), PARITY_OK);
        assert_true(ck->params != base->params); /* its own copy */
        parity_workload_describe(op->wl_family, base, 0, a, sizeof a);
        parity_workload_describe(op->wl_family, ck, 0, b, sizeof b);
        /* field by field: value schemes normal / U[0,1) became integers, nothing else moved */
        char *sa, *sb, *pa = a, *pb = b;
        for (char *ta = strtok_r(pa, " ", &sa), *tb = strtok_r(pb, " ", &sb); ta || tb;
             ta = strtok_r(NULL, " ", &sa), tb = strtok_r(NULL, " ", &sb)) {
            assert_non_null(ta);
            assert_non_null(tb);
            if (strcmp(ta, tb) == 0) continue;
            const char *va = strchr(ta, '='), *vb = strchr(tb, '=');
            assert_true(va - ta == vb - tb && strncmp(ta, tb, (size_t)(va - ta)) == 0);
            if (!((strncmp(va, "=normal*", 8) == 0 || strncmp(va, "=uniform01*", 11) == 0) &&
                  strncmp(vb, "=int[-4,4]*", 11) == 0 && strcmp(strchr(va, '*'), strchr(vb, '*')) == 0))
                fail_msg("op %s: CK's scheme changed %s into %s", op->name, ta, tb);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_carries_its_parts),
        cmocka_unit_test(test_every_preset_describes_its_parameters),
        cmocka_unit_test(test_no_silent_default),
        cmocka_unit_test(test_derived_schemes_change_values_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

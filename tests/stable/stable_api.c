/* A program that uses only libparity's stable header (include/parity/parity.h, docs/c-api.md),
 * linked against libparity.so: it checks two built-in kernels of rmsnorm_fwd and reads their
 * verdicts through the accessors (issue #40). No struct layout of the library is used: the
 * experimental headers (verify.h, ...) are not included, which the #error below enforces. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parity/parity.h"

#if defined(PARITY_VERIFY_H) || defined(PARITY_OP_H) || defined(PARITY_KERNEL_H)
#error "parity/parity.h without PARITY_STATIC_LINKING_ONLY must not expose the struct layouts"
#endif

static int failures;
#define EXPECT(cond)                                                             \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                          \
        }                                                                        \
    } while (0)

int main(void)
{
    EXPECT(strcmp(parity_version_string(), PARITY_VERSION_STRING) == 0);
    EXPECT(parity_version_number() == PARITY_VERSION_NUMBER);

    parity_check_options_t *o = parity_check_options_new();
    EXPECT(o != NULL);
    if (!o) return 1;
    EXPECT(parity_check_options_set_seed(o, 7) == PARITY_OK);
    EXPECT(parity_check_options_set_workload(o, "unit@64x32") == PARITY_OK);
    EXPECT(parity_check_options_set_noise_floor(o, 0) == PARITY_OK);
    EXPECT(parity_check_options_set_timeout(o, 60) == PARITY_OK);
    EXPECT(parity_check_options_set_threads(o, 0) == PARITY_OK); /* all cores */
    EXPECT(parity_check_options_set_threads(o, -1) == PARITY_E_INVALID);
    EXPECT(parity_check_options_set_timeout(o, 0) == PARITY_E_INVALID);

    /* Errors: a report pointer set to NULL and a message. */
    parity_diag_t diag = {{0}};
    parity_check_report_t *r = (parity_check_report_t *)&diag; /* must become NULL */
    const char *bad[] = {"builtin:no_such_kernel"};
    EXPECT(parity_check_report_run("rmsnorm_fwd", bad, 1, o, &r, &diag) == PARITY_E_NOTFOUND);
    EXPECT(r == NULL && diag.msg[0] != 0);
    EXPECT(parity_check_report_run("no_such_op", bad, 1, o, &r, &diag) == PARITY_E_NOTFOUND);

    const char *specs[] = {"builtin:fp32", "builtin:eps_outside_sqrt"};
    parity_status_t st = parity_check_report_run("rmsnorm_fwd", specs, 2, o, &r, &diag);
    parity_check_options_free(o); /* the report does not borrow the options */
    EXPECT(st == PARITY_OK);
    if (st != PARITY_OK) {
        fprintf(stderr, "check: %s: %s\n", parity_status_str(st), diag.msg);
        return 1;
    }
    EXPECT(strcmp(parity_check_report_op(r), "rmsnorm_fwd") == 0);
    EXPECT(parity_check_report_n_kernels(r) == 2);
    const parity_verdict_t want[2] = {PARITY_VERDICT_FAITHFUL, PARITY_VERDICT_UNFAITHFUL};
    for (int k = 0; k < parity_check_report_n_kernels(r); k++) {
        const char *label = parity_check_report_kernel_label(r, k);
        parity_verdict_t v = parity_check_report_verdict(r, k);
        printf("%s: %s\n", label ? label : "(null)", parity_verdict_name(v));
        EXPECT(label != NULL && strcmp(label, specs[k]) == 0);
        EXPECT(v == want[k]);
        EXPECT(parity_check_report_n_workloads(r, k) == 1);
        for (int w = 0; w < parity_check_report_n_workloads(r, k); w++) {
            const char *name = parity_check_report_workload_name(r, k, w);
            double q = parity_check_report_workload_max_err_over_tol(r, k, w);
            printf("  %s: %s, max err/tol %.3g %s\n", name ? name : "(null)",
                   parity_verdict_name(parity_check_report_workload_verdict(r, k, w)), q,
                   parity_check_report_workload_detail(r, k, w));
            EXPECT(name != NULL && strcmp(name, "unit@64x32") == 0);
            EXPECT(parity_check_report_workload_verdict(r, k, w) == want[k]);
            EXPECT(k == 0 ? q <= 1 : q > 1);
        }
    }
    /* Out of range: documented sentinels, never a crash. */
    EXPECT(parity_check_report_kernel_label(r, 2) == NULL);
    EXPECT(parity_check_report_verdict(r, -1) == PARITY_VERDICT_NOT_JUDGED);
    EXPECT(parity_check_report_n_workloads(r, 5) == 0);
    EXPECT(parity_check_report_workload_name(r, 0, 1) == NULL);
    EXPECT(isnan(parity_check_report_workload_max_err_over_tol(r, 0, 1)));
    parity_check_report_free(r);
    parity_check_report_free(NULL);
    parity_check_options_free(NULL);
    printf("stable_api: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

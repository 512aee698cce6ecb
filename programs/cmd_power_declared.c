/* `parity power [OP] --op-plugin FILE.so`: the power self-test of an op a C plugin declares
 * (op_abi.h): generic mutants of its reference judged with the tolerance its declaration gives
 * (custom_op.h, parity_custom_power), printed as the Python package's parity.power prints its
 * table (python/parity/custom_power.py PowerTable), --json as PowerTable.to_dict() plus the
 * seed and dtype. Reached from `parity power` when --op-plugin is given (cmd_power.c).
 * Deliberately not here: the built-in ops' power figures (cmd_power.c), running kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "json_out.h"
#include "parity/custom_op.h"

#define MAX_ROWS (PARITY_CUSTOM_N_MUTANTS * PARITY_CUSTOM_MAX_WORKLOADS)

/* The table, as PowerTable.__str__: a column of 18 characters per workload, then one note per
 * distinct (mutant, description or reason) in order of first appearance. */
static void print_table(const char *op, const parity_custom_power_row_t *r, int n)
{
    const char *ws[PARITY_CUSTOM_MAX_WORKLOADS];
    int nw = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int w = 0; w < nw; w++) seen |= strcmp(ws[w], r[i].workload) == 0;
        if (!seen && nw < PARITY_CUSTOM_MAX_WORKLOADS) ws[nw++] = r[i].workload;
    }
    printf("power self-test of %s (err/tol per workload; caught when > 1; control must be <= 1)\n", op);
    printf("  %-13s", "mutant");
    for (int w = 0; w < nw; w++) printf("%18s", ws[w]);
    printf("\n");
    for (int m = 0; m < PARITY_CUSTOM_N_MUTANTS && m < n; m++) {
        printf("  %-13s", r[m].mutant);
        for (int w = 0; w < nw; w++) {
            const parity_custom_power_row_t *x = NULL;
            for (int i = 0; i < n && !x; i++)
                if (strcmp(r[i].workload, ws[w]) == 0 && strcmp(r[i].mutant, r[m].mutant) == 0) x = &r[i];
            char cell[48];
            if (!x || !x->applies) snprintf(cell, sizeof cell, "n/a");
            else if (m == 0) snprintf(cell, sizeof cell, "%.3g  %s", x->err_over_tol, x->err_over_tol <= 1 ? "ok" : "FAIL");
            else snprintf(cell, sizeof cell, "%.3g  %s", x->err_over_tol, x->caught ? "CAUGHT" : "missed");
            printf("%18s", cell);
        }
        printf("\n");
    }
    printf("\n");
    for (int i = 0; i < n; i++) {
        const char *what = r[i].applies ? r[i].description : r[i].why_not;
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = strcmp(r[j].mutant, r[i].mutant) == 0 &&
                  strcmp(r[j].applies ? r[j].description : r[j].why_not, what) == 0;
        if (!dup) printf("  %s: %s\n", r[i].mutant, what);
    }
}

int parity_cmd_power_declared(int argc, char **argv)
{
    const char *op_name = NULL, *plugin = NULL, *json = NULL, *dt = "f32";
    parity_custom_opts_t opts;
    parity_custom_opts_default(&opts);
    opts.quick = 1; /* as parity.power: the quick workloads unless one is named */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = strcmp(a, "--op-plugin") == 0 || strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0 ||
                    strcmp(a, "--seed") == 0 || strcmp(a, "--json") == 0 || strcmp(a, "--dtype") == 0;
        if (takes && !val) return cli_usage_error("power", NULL, "%s needs a value", a);
        if (strcmp(a, "--op-plugin") == 0) plugin = argv[++i];
        else if (strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0) opts.workload = argv[++i];
        else if (strcmp(a, "--seed") == 0) {
            int rc = cli_opt_seed("power", a, argv[++i], &opts.seed, NULL);
            if (rc) return rc;
        } else if (strcmp(a, "--dtype") == 0) dt = argv[++i];
        else if (strcmp(a, "--json") == 0) json = argv[++i];
        else if (strcmp(a, "--quick") == 0 || strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            /* the default already; no progress lines are printed */
        } else if (a[0] == '-')
            return cli_usage_error("power", "declared ops take --op-plugin, --workload, --dtype, --seed, --json "
                                   "(docs/custom-ops.md)", "%s: not an option for a declared op", a);
        else if (!op_name) op_name = a;
        else return cli_usage_error("power", NULL, "unexpected argument %s", a);
    }
    int dtype = strcmp(dt, "f32") == 0 ? PARITY_DT_F32 : strcmp(dt, "bf16") == 0 ? PARITY_DT_BF16
              : strcmp(dt, "f16") == 0 ? PARITY_DT_F16 : -1;
    if (dtype < 0) return cli_usage_error("power", NULL, "--dtype %s: expected f32, bf16 or f16", dt);
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    parity_custom_op_t *op = NULL;
    parity_status_t st = parity_custom_op_load(plugin, op_name, &op, &diag);
    if (st) return st == PARITY_E_NOTFOUND ? cli_usage_error("power", NULL, "%s", diag.msg)
                                           : cli_input_error("power", "%s", diag.msg);
    parity_custom_power_row_t *rows = calloc(MAX_ROWS, sizeof *rows);
    int n = 0, rc = 0;
    st = rows ? parity_custom_power(op, dtype, &opts, rows, MAX_ROWS, &n, &diag) : PARITY_E_NOMEM;
    const char *name = parity_custom_op_decl(op)->name;
    if (st) {
        rc = st == PARITY_E_INVALID ? cli_usage_error("power", NULL, "%s", diag.msg)
                                    : cli_input_error("power", "%s", st == PARITY_E_NOMEM ? "out of memory" : diag.msg);
    } else {
        print_table(name, rows, n);
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "op", name);
        cJSON_AddStringToObject(root, "dtype", dt);
        cJSON_AddNumberToObject(root, "seed", (double)opts.seed);
        cJSON *ja = cJSON_AddArrayToObject(root, "rows");
        for (int i = 0; i < n; i++) {
            const parity_custom_power_row_t *r = &rows[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "mutant", r->mutant);
            cJSON_AddStringToObject(o, "description", r->applies ? r->description : "");
            cJSON_AddStringToObject(o, "workload", r->workload);
            if (r->applies) {
                cJSON_AddBoolToObject(o, "caught", r->caught);
                cJSON_AddItemToObject(o, "err_over_tol", parity_json_num(r->err_over_tol));
                cJSON_AddNullToObject(o, "why_not");
            } else {
                cJSON_AddNullToObject(o, "caught");
                cJSON_AddNullToObject(o, "err_over_tol");
                cJSON_AddStringToObject(o, "why_not", r->why_not);
            }
            cJSON_AddItemToArray(ja, o);
            if (r->applies && strcmp(r->mutant, "control") == 0 && r->err_over_tol > 1) rc = 1; /* a false alarm */
        }
        if (json && parity_json_write(json, root) != 0) rc = cli_input_error("power", "cannot write %s", json);
        cJSON_Delete(root);
    }
    free(rows);
    parity_custom_op_free(op);
    return rc;
}

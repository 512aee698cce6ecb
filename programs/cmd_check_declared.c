/* `parity check [OP] --op-plugin FILE.so [--kernel K ...]`: kernels of an op that a C plugin
 * declares (op_abi.h), judged by the declared-op harness (custom_op.h) on workloads built from
 * the inputs' roles, with tolerances derived from the declaration. Text report on stdout,
 * --json for CI. Reached from `parity check` when --op-plugin is given (cmd_check.c).
 * Each kernel is run and judged by the check engine the built-in ops use (src/custom/custom_engine.c:
 * the declared op as an op descriptor). An unfaithful kernel gets the diagnosis line where a
 * multilinear reduction is declared. --baselines adds the detection matrix (other verifiers' rules, custom_op.h), as `parity check
 * --baselines` prints it for a built-in op.
 * --jobs N shares the (kernel, workload) units among N worker processes (custom_jobs.c); the
 * report is assembled afterwards from the results alone, so it is the same for any N.
 * Deliberately not here: the noise floor (a declared op has no catalog), MPI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "json_out.h"
#include "parity/baseline.h"
#include "parity/custom_op.h"
#include "parity/kernel.h"

static const char *dt_name(int dt)
{
    switch (dt) {
    case PARITY_DT_F32: return "f32";
    case PARITY_DT_BF16: return "bf16";
    case PARITY_DT_F16: return "f16";
    default: return "?";
    }
}

/* Worst first: the kernel's verdict is its worst workload's. */
static int severity(parity_verdict_t v)
{
    static const parity_verdict_t order[] = {PARITY_VERDICT_FAITHFUL, PARITY_VERDICT_UNSUPPORTED,
                                             PARITY_VERDICT_NONDETERMINISTIC, PARITY_VERDICT_UNFAITHFUL,
                                             PARITY_VERDICT_STALE_CACHE, PARITY_VERDICT_MODIFIED_INPUTS,
                                             PARITY_VERDICT_OOB, PARITY_VERDICT_TIMEOUT, PARITY_VERDICT_CRASHED};
    int n = (int)(sizeof order / sizeof order[0]);
    for (int i = 0; i < n; i++)
        if (order[i] == v) return i;
    return n;
}

static int worst_of(const parity_custom_result_t *r, int n)
{
    int w = 0;
    for (int i = 1; i < n; i++)
        if (severity(r[i].verdict) > severity(r[w].verdict) ||
            (severity(r[i].verdict) == severity(r[w].verdict) && r[i].max_err_over_tol > r[w].max_err_over_tol))
            w = i;
    return w;
}

static void index_text(const parity_custom_result_t *r, char *buf, size_t cap)
{
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int t = 0; t < r->worst_ndim && l < cap; t++)
        l += (size_t)snprintf(buf + l, cap - l, "%s%lld", t ? ", " : "", (long long)r->worst_index[t]);
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

static cJSON *diag_json(const parity_custom_result_t *r)
{
    const parity_diagnosis_t *d = &r->diag;
    cJSON *dg = cJSON_CreateObject();
    cJSON_AddStringToObject(dg, "workload", r->workload);
    cJSON_AddStringToObject(dg, "output", d->output);
    cJSON_AddItemToObject(dg, "effective_bits", parity_json_num(d->eff_bits));
    cJSON_AddStringToObject(dg, "closest", parity_emu_names[d->closest]);
    cJSON_AddBoolToObject(dg, "beyond_8bit", d->beyond);
    cJSON_AddBoolToObject(dg, "unresolvable", d->masked);
    if (r->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_NONE) {
        cJSON_AddStringToObject(dg, "cause", parity_cause_names[d->cause]);
        cJSON_AddStringToObject(dg, "detail", d->detail);
    }
    return dg;
}

/* The diagnosis line, worded as src/verify/report.c's for a built-in op. */
static void print_diag(const parity_custom_result_t *r)
{
    const parity_diagnosis_t *d = &r->diag;
    printf("  diagnosis (%s, %s): ", r->workload, d->output);
    if (isinf(d->eff_bits)) printf("exact on the sampled rows");
    else if (d->beyond)
        printf("error %.3g is beyond what 8-bit accumulation gives (%.3g): not an accumulator-precision problem",
               d->cand_err, d->emu_err[0]);
    else if (isnan(d->eff_bits) || (r->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_ACCUMULATOR))
        printf("relative error %.3g; accumulator emulations (sequential) 8-bit %.3g, 11-bit %.3g, fp32 %.3g",
               d->cand_err, d->emu_err[0], d->emu_err[2], d->emu_err[4]);
    else
        printf("effective accumulator ~%.1f bits, closest to %s%s", d->eff_bits, parity_emu_names[d->closest],
               d->masked ? " (weak evidence: after rounding to the output dtype, 8- and 24-bit accumulation differ "
                           "by < 1.5x on the sampled rows)" : "");
    printf("\n");
    if (r->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_NONE)
        printf("  cause: %s \xe2\x80\x94 %s\n", parity_cause_names[d->cause], d->detail);
}

/* The unfaithful workload whose diagnosis the kernel reports: the worst diagnosed one, else the
 * worst unfaithful one (whose no_diag says why there is none); -1 when none is unfaithful. */
static int diag_of(const parity_custom_result_t *r, int n)
{
    int w = -1;
    for (int i = 0; i < n; i++) {
        if (r[i].verdict != PARITY_VERDICT_UNFAITHFUL || r[i].production) continue;
        if (w < 0 || (r[i].diag.available && !r[w].diag.available) ||
            (r[i].diag.available == r[w].diag.available && r[i].max_err_over_tol > r[w].max_err_over_tol))
            w = i;
    }
    return w;
}

static cJSON *result_json(const parity_custom_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->workload);
    cJSON_AddStringToObject(o, "verdict", parity_verdict_name(r->verdict));
    cJSON_AddBoolToObject(o, "production", r->production);
    cJSON_AddItemToObject(o, "max_err_over_tol", parity_json_num(r->max_err_over_tol));
    cJSON_AddNumberToObject(o, "rows_failed", (double)r->rows_failed);
    cJSON_AddNumberToObject(o, "rows_judged", (double)r->rows_judged);
    cJSON *w = cJSON_AddObjectToObject(o, "worst");
    if (r->rows_judged) {
        cJSON_AddStringToObject(w, "output", r->worst_output);
        cJSON *ix = cJSON_AddArrayToObject(w, "index");
        for (int t = 0; t < r->worst_ndim; t++) cJSON_AddItemToArray(ix, cJSON_CreateNumber((double)r->worst_index[t]));
        cJSON_AddItemToObject(w, "got", parity_json_num(r->got));
        cJSON_AddItemToObject(w, "ref", parity_json_num(r->ref));
        cJSON_AddItemToObject(w, "tol", parity_json_num(r->tol));
    }
    cJSON_AddStringToObject(o, "tolerance", r->tolerance);
    cJSON_AddStringToObject(o, "detail", r->detail);
    if (r->diag.available) cJSON_AddItemToObject(o, "diagnosis", diag_json(r));
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    return o;
}

static cJSON *baselines_json(const parity_custom_baselines_t *bl)
{
    cJSON *b = cJSON_CreateObject();
    for (int q = 0; q < PARITY_N_BASELINES; q++) {
        cJSON *x = cJSON_AddObjectToObject(b, parity_baseline_name(q));
        cJSON_AddBoolToObject(x, "applies", bl->applies[q]);
        if (!bl->applies[q]) {
            cJSON_AddNullToObject(x, "caught");
            cJSON_AddStringToObject(x, "why", bl->why[q]);
            continue;
        }
        cJSON_AddBoolToObject(x, "caught", bl->r[q].caught);
        cJSON_AddItemToObject(x, "pass_fraction", parity_json_num(bl->r[q].pass_fraction));
        cJSON_AddItemToObject(x, "margin", parity_json_num(bl->r[q].margin));
        cJSON_AddStringToObject(x, "rule", parity_baseline_rule(q));
        cJSON_AddStringToObject(x, "detail", bl->r[q].detail);
    }
    return b;
}

/* The detection matrix, as src/verify/report.c prints it for a built-in op (without its "expected"
 * column: a declared op's kernels carry no catalog expectation), n/a where a rule cannot apply. */
static void print_matrix(const parity_kernel_list_t *kl, const parity_verdict_t *v,
                         const parity_custom_baselines_t *bl, int n)
{
    printf("detection matrix (CAUGHT = the verifier rejects the kernel; for a faithful kernel that is a false "
           "alarm; n/a = the rule cannot apply to this op)\n");
    int w = 28;
    for (int k = 0; k < n; k++)
        if ((int)strlen(kl->items[k].label) > w) w = (int)strlen(kl->items[k].label);
    printf("%-*s %-10s", w, "kernel", "parity");
    int bw[PARITY_N_BASELINES];
    for (int b = 0; b < PARITY_N_BASELINES; b++) {
        bw[b] = (int)strlen(parity_baseline_name(b)) > 6 ? (int)strlen(parity_baseline_name(b)) : 6;
        printf(" %-*s", bw[b], parity_baseline_name(b));
    }
    printf("\n");
    for (int k = 0; k < n; k++) {
        printf("%-*s %-10s", w, kl->items[k].label, v[k] == PARITY_VERDICT_FAITHFUL ? "pass" : "CAUGHT");
        for (int b = 0; b < PARITY_N_BASELINES; b++)
            printf(" %-*s", bw[b], !bl[k].applies[b] ? "n/a" : bl[k].r[b].caught ? "CAUGHT" : "pass");
        printf("\n");
    }
    printf("\nbaseline rules (each on its own inputs at the op's base sizes and its fixed seed; "
           "docs/custom-ops.md, \"Baselines\"):\n");
    for (int b = 0; b < PARITY_N_BASELINES; b++)
        if (n > 0 && bl[0].applies[b]) printf("  %-14s %s\n", parity_baseline_name(b), parity_baseline_rule(b));
    for (int b = 0; b < PARITY_N_BASELINES; b++)
        if (n > 0 && !bl[0].applies[b]) printf("  %-14s n/a: %s\n", parity_baseline_name(b), bl[0].why[b]);
    printf("\n");
}

int parity_cmd_check_declared(int argc, char **argv)
{
    const char *op_name = NULL, *plugin = NULL, *json = NULL;
    const char *kspecs[64];
    int nk = 0, quiet = 0, baselines = 0, jobs = 1;
    parity_custom_opts_t opts;
    parity_custom_opts_default(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = strcmp(a, "--op-plugin") == 0 || strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0 ||
                    strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0 || strcmp(a, "--seed") == 0 ||
                    strcmp(a, "--json") == 0 || strcmp(a, "--timeout") == 0 || strcmp(a, "--jobs") == 0 ||
                    strcmp(a, "-j") == 0;
        if (takes && !val) return cli_usage_error("check", NULL, "%s needs a value", a);
        if (strcmp(a, "--op-plugin") == 0) plugin = argv[++i];
        else if (strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0) {
            if (nk == 64) return cli_usage_error("check", NULL, "at most 64 --kernel options");
            kspecs[nk++] = argv[++i];
        } else if (strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0) opts.workload = argv[++i];
        else if (strcmp(a, "--seed") == 0) {
            int rc = cli_opt_seed("check", a, argv[++i], &opts.seed, NULL);
            if (rc) return rc;
        } else if (strcmp(a, "--timeout") == 0) {
            if (cli_parse_double(argv[++i], &opts.timeout) || !(opts.timeout > 0) || !isfinite(opts.timeout))
                return cli_usage_error("check", NULL, "--timeout %s: expected seconds > 0", val);
        } else if (strcmp(a, "--json") == 0) json = argv[++i];
        else if (strcmp(a, "--quick") == 0) opts.quick = 1;
        else if (strcmp(a, "--baselines") == 0) baselines = 1;
        else if (strcmp(a, "--jobs") == 0 || strcmp(a, "-j") == 0) {
            uint64_t j = 0;
            if (cli_parse_u64(argv[++i], &j) || j < 1 || j > 256)
                return cli_usage_error("check", NULL, "--jobs %s: expected 1..256 worker processes", val);
            jobs = (int)j;
        }
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) quiet = 1;
        else if (a[0] == '-')
            return cli_usage_error("check", "declared ops take --op-plugin, --kernel, --workload, --quick, --seed, "
                                   "--timeout, --baselines, --jobs, --json, -q (docs/custom-ops.md)", "%s: not an option for a declared op", a);
        else if (!op_name) op_name = a;
        else return cli_usage_error("check", NULL, "unexpected argument %s", a);
    }
    parity_diag_t diag;
    memset(&diag, 0, sizeof diag);
    parity_custom_op_t *op = NULL;
    parity_status_t st = parity_custom_op_load(plugin, op_name, &op, &diag);
    if (st) return st == PARITY_E_NOTFOUND ? cli_usage_error("check", NULL, "%s", diag.msg)
                                           : cli_input_error("check", "%s", diag.msg);
    const parity_abi_op_decl_t *d = parity_custom_op_decl(op);
    /* Kernels: the plugin's own for the op by default; NAME alone is one of them. */
    parity_kernel_list_t kl;
    memset(&kl, 0, sizeof kl);
    char specbuf[64][4200];
    if (nk == 0) kspecs[nk++] = plugin;
    for (int i = 0; i < nk && !st; i++) {
        const char *s = kspecs[i];
        if (!strchr(s, '/') && !strstr(s, ".so")) {
            snprintf(specbuf[i], sizeof specbuf[i], "%s:%s", plugin, s);
            s = specbuf[i];
        }
        st = parity_kernel_resolve(s, d->name, &kl, &diag);
    }
    if (st) {
        int rc = cli_input_error("check", "%s", diag.msg);
        parity_kernel_list_free(&kl);
        parity_custom_op_free(op);
        return rc;
    }
    int nw = parity_custom_op_workload_count(op);
    printf("parity check: declared op %s (%s), judged by the declared-op harness (docs/custom-ops.md)\n", d->name,
           plugin);
    if (d->description) printf("  what: %s\n", d->description);
    printf("seed %llu; workloads:", (unsigned long long)opts.seed);
    for (int w = 0; w < nw; w++)
        if (opts.workload ? strcmp(opts.workload, parity_custom_op_workload_name(op, w)) == 0
                          : !(opts.quick && parity_custom_op_workload_production(op, w)))
            printf(" %s", parity_custom_op_workload_name(op, w));
    printf("\n\n");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "parity.check/1");
    cJSON_AddStringToObject(root, "op", d->name);
    cJSON_AddBoolToObject(root, "custom_op", 1);
    cJSON_AddStringToObject(root, "op_plugin", plugin);
    cJSON_AddNumberToObject(root, "seed", (double)opts.seed);
    cJSON_AddStringToObject(root, "judge", "the check engine (src/verify), declared op as an op descriptor (src/custom/custom_engine.c)");
    cJSON *jk = cJSON_AddArrayToObject(root, "kernels");
    int n_ok = 0, rc = 0;
    parity_verdict_t *verd = calloc((size_t)(kl.n > 0 ? kl.n : 1), sizeof *verd);
    parity_custom_baselines_t *bl = baselines ? calloc((size_t)(kl.n > 0 ? kl.n : 1), sizeof *bl) : NULL;
    parity_custom_kernel_report_t *kr = calloc((size_t)(kl.n > 0 ? kl.n : 1), sizeof *kr);
    const parity_abi_kernel_t **ks = calloc((size_t)(kl.n > 0 ? kl.n : 1), sizeof *ks);
    if (!verd || !kr || !ks || (baselines && !bl)) rc = cli_input_error("check", "out of memory");
    for (int i = 0; !rc && i < kl.n; i++) ks[i] = kl.items[i].k;
    /* Every (kernel, workload) and baselines unit first, in --jobs workers; then the report, in
     * kernel order, from the results alone: the same bytes for any --jobs. */
    if (!rc) {
        if (!quiet) fprintf(stderr, "parity check: %d kernel(s) of %s, %d job(s) ...\n", kl.n, d->name, jobs);
        fflush(stdout);
        st = parity_custom_check_many(op, ks, kl.n, &opts, baselines, jobs, kr, &diag);
        if (st) rc = cli_input_error("check", "%s", diag.msg);
    }
    for (int i = 0; i < kl.n && !rc; i++) {
        const parity_abi_kernel_t *k = kl.items[i].k;
        parity_custom_result_t *res = kr[i].results;
        int nr = kr[i].n_results;
        if (kr[i].st) {
            rc = kr[i].st == PARITY_E_INVALID ? cli_usage_error("check", NULL, "%s", kr[i].msg)
                                              : cli_input_error("check", "%s", kr[i].msg);
            break;
        }
        if (bl) bl[i] = kr[i].baselines;
        int w = worst_of(res, nr);
        parity_verdict_t v = res[w].verdict;
        verd[i] = v;
        n_ok += v == PARITY_VERDICT_FAITHFUL;
        printf("kernel %s  (%s in, %s out)%s%s\n", kl.items[i].label, dt_name(k->in_dtype), dt_name(k->out_dtype),
               k->description ? "  what: " : "", k->description ? k->description : "");
        cJSON *ko = cJSON_CreateObject();
        cJSON_AddStringToObject(ko, "name", kl.items[i].label);
        cJSON_AddStringToObject(ko, "description", k->description ? k->description : "");
        cJSON_AddStringToObject(ko, "verdict", parity_verdict_name(v));
        cJSON *jw = cJSON_AddArrayToObject(ko, "workloads");
        for (int j = 0; j < nr; j++) {
            const parity_custom_result_t *r = &res[j];
            char q[32] = "-";
            if (r->rows_judged) snprintf(q, sizeof q, "%.3g", r->max_err_over_tol);
            printf("  %-12s %-17s err/tol %-9s rows failed %lld / %lld  [%s]\n", r->workload,
                   parity_verdict_name(r->verdict), q, (long long)r->rows_failed, (long long)r->rows_judged,
                   r->tolerance);
            if (r->detail[0]) printf("               %s\n", r->detail);
            else if (r->rows_judged && r->verdict != PARITY_VERDICT_FAITHFUL) {
                char ix[160];
                index_text(r, ix, sizeof ix);
                printf("               worst %s%s: got %.9g, ref %.9g, tol %.3g\n", r->worst_output, ix, r->got,
                       r->ref, r->tol);
            }
            cJSON_AddItemToArray(jw, result_json(r));
        }
        int dw = diag_of(res, nr);
        if (dw >= 0 && res[dw].diag.available) {
            print_diag(&res[dw]);
            cJSON_AddItemToObject(ko, "diagnosis", diag_json(&res[dw]));
        } else {
            if (dw >= 0) printf("  no diagnosis: %s\n", res[dw].no_diag);
            cJSON_AddNullToObject(ko, "diagnosis");
            if (dw >= 0) cJSON_AddStringToObject(ko, "no_diagnosis", res[dw].no_diag);
        }
        char repro[8600];
        const char *kn = kl.items[i].label; /* a kernel of the op plugin itself: its NAME suffices */
        size_t pl = strlen(plugin);
        if (strncmp(kn, plugin, pl) == 0 && kn[pl] == ':') kn += pl + 1;
        snprintf(repro, sizeof repro, "parity check %s --op-plugin %s --kernel %s --workload %s --seed %llu",
                 d->name, plugin, kn, res[w].workload, (unsigned long long)opts.seed);
        cJSON_AddStringToObject(ko, "worst_workload", res[w].workload);
        cJSON_AddStringToObject(ko, "reproduce", repro);
        if (bl) cJSON_AddItemToObject(ko, "baselines", baselines_json(&bl[i]));
        cJSON_AddItemToArray(jk, ko);
        printf("  verdict: %s (worst workload %s)\n  reproduce: %s\n\n", parity_verdict_name(v), res[w].workload,
               repro);
    }
    if (!rc && bl) print_matrix(&kl, verd, bl, kl.n);
    free(verd);
    free(bl);
    free(kr);
    free(ks);
    if (!rc) {
        printf("summary: %d of %d kernels faithful\n", n_ok, kl.n);
        if (json && parity_json_write(json, root) != 0) rc = cli_input_error("check", "cannot write %s", json);
        else if (n_ok < kl.n) rc = 1;
    }
    cJSON_Delete(root);
    parity_kernel_list_free(&kl);
    parity_custom_op_free(op);
    return rc;
}

/* `parity power OP`: the weakest mutant of each family that parity and each baseline rule still
 * catch (src/power/power.c builds and judges the mutants), as a table, Markdown (docs/power.md is
 * generated with it) or JSON. A shell over parity_power_run; it judges nothing itself. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json_out.h"
#include "parity/power.h"
#include "src/core/internal.h"

void parity_help_power(FILE *out)
{
    fprintf(out,
            "usage: parity power OP|all [--quick] [--workload W] [--seed S] [--json FILE]\n"
            "                    [--markdown] [--budget TERMS] [-q]\n"
            "\n"
            "How weak a defect does each verifier still catch? For OP, builds families of mutant\n"
            "outputs of known weakness from the op's fp64 reference and its emulation, judges\n"
            "each with parity's tolerance (on the op's workloads: the quick ones, then the\n"
            "production-sized ones) and with every baseline rule on that rule's own input scheme\n"
            "(docs/baselines.md), and prints the weakest mutant each one still catches:\n"
            "\n"
            "  acc-seq, acc-pair  an accumulator of m = 8..23 significant bits (fp32 has 24),\n"
            "                     sequential or pairwise; the figure is the largest m such that\n"
            "                     every accumulator of 8..m bits is caught (7: not even 8 bits)\n"
            "  drop               each term of an element lost with probability p = 1e-2..1e-6\n"
            "                     (a lost update); the smallest p caught with every larger one\n"
            "  tail               the last term of every reduction lost (a loop bound off by one)\n"
            "  tf32-in, bf16-in   the faithful fp32 kernel on inputs rounded to tf32 / bf16\n"
            "  alarm              the controls that must pass: the m = 24 (fp32) emulation and\n"
            "                     the faithful kernel; 'ALARM' there is a false alarm\n"
            "\n"
            "Larger acc figures and smaller drop rates mean a stronger verifier. Accumulator\n"
            "mutants are emulated on sampled rows (the most-hit half and a spread; the other rows\n"
            "hold the reference rounded to fp32): a catch on the sample is a catch, so parity's\n"
            "figures are lower bounds. docs/power.md explains the models and shows every op.\n"
            "\n"
            "options:\n"
            "  --quick         the quick workloads only (the production set can take minutes)\n"
            "  --seed S        seed of parity's workloads (default 1; baselines keep their own)\n"
            "  --workload W    parity on this one workload (a preset, or W@NxD[xV]) instead of\n"
            "                  the op's quick and production sets\n"
            "  --json FILE     write the figures as JSON (schema parity.power/1; '-' = stdout)\n"
            "  --markdown      print Markdown tables (what docs/power.md holds)\n"
            "  --budget TERMS  emulated terms per output and mutant (default 16777216); rows are\n"
            "                  sampled to fit. Smaller is faster and samples fewer rows\n"
            "  -q, --quiet     no progress lines on stderr\n"
            "\n"
            "declared ops (docs/custom-ops.md, \"The power self-test\"):\n"
            "  parity power [OP] --op-plugin FILE.so [--workload W] [--dtype f32|bf16|f16] [--seed S]\n"
            "               [--json FILE]\n"
            "                  generic mutants of the op's own reference judged with its derived\n"
            "                  tolerance (the table parity.power prints); the quick workloads\n"
            "\n"
            "examples:\n"
            "  parity power gemm --quick\n"
            "  parity power embedding_rmsnorm_bwd --json power.json\n"
            "  parity power all --markdown > power-tables.md\n"
            "\n"
            "exit codes: 0 printed, 2 usage error, 3 input error (missing data).\n");
}

static const char *yes_no(int v) { return v < 0 ? "n/a" : v ? "yes" : "no"; }

static void bits_str(char *buf, size_t n, int b)
{
    if (b < 0) snprintf(buf, n, "n/a");
    else if (b < PARITY_POWER_MIN_BITS) snprintf(buf, n, "none");
    else snprintf(buf, n, "%d", b);
}

static void rate_str(char *buf, size_t n, double r)
{
    if (r > 0) snprintf(buf, n, "%.0e", r);
    else snprintf(buf, n, "none");
}

static void alarm_str(char *buf, size_t n, const parity_power_cell_t *c)
{
    int a = c->alarm_fp32_acc == 1 || c->alarm_faithful == 1;
    snprintf(buf, n, "%s", a ? "ALARM" : (c->alarm_fp32_acc < 0 && c->alarm_faithful < 0) ? "n/a" : "none");
}


static void print_text(FILE *f, const parity_power_result_t *r, int markdown)
{
    const char *sep = markdown ? " | " : "  ";
    if (markdown) fprintf(f, "### %s\n\n", r->op->name);
    else fprintf(f, "parity power %s\n", r->op->name);
    for (int s = 0; s < r->n_sets; s++)
        fprintf(f, "%s%s: %d workload(s), %lld of %lld output rows emulated, %.1f s%s\n",
                markdown ? "- " : "  ", r->set_name[s], r->n_workloads[s], (long long)r->rows_judged[s],
                (long long)r->rows_total[s], r->seconds[s], s == 0 ? " (with the baselines)" : "");
    fprintf(f, "%sinputs family: %s\n\n", markdown ? "- " : "  ", r->kernel ? r->kernel : "no fp32 faithful kernel");
    if (markdown)
        fprintf(f, "| judge | set | acc-seq | acc-pair | drop | tail | tf32-in | bf16-in | alarm |\n"
                   "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    else
        fprintf(f, "  %-14s%s%-10s%s%-7s%s%-8s%s%-6s%s%-4s%s%-7s%s%-7s%s%s\n", "judge", sep, "set", sep,
                "acc-seq", sep, "acc-pair", sep, "drop", sep, "tail", sep, "tf32-in", sep, "bf16-in", sep, "alarm");
    for (int j = 0; j < PARITY_POWER_N_JUDGES; j++)
        for (int s = 0; s < r->n_sets; s++) {
            if (j > 0 && s > 0) continue; /* a baseline's own inputs: the same for both sets */
            const parity_power_cell_t *c = &r->cell[s][j];
            char bs[16], bp[16], dr[16], al[16];
            bits_str(bs, sizeof bs, c->acc_seq_bits);
            bits_str(bp, sizeof bp, c->acc_pair_bits);
            rate_str(dr, sizeof dr, c->drop_rate);
            alarm_str(al, sizeof al, c);
            const char *set = j == 0 ? r->set_name[s] : "own inputs";
            if (markdown)
                fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", parity_power_judge_name(j), set,
                        bs, bp, dr, yes_no(c->tail), yes_no(c->inputs_tf32), yes_no(c->inputs_bf16), al);
            else
                fprintf(f, "  %-14s%s%-10s%s%-7s%s%-8s%s%-6s%s%-4s%s%-7s%s%-7s%s%s\n", parity_power_judge_name(j),
                        sep, set, sep, bs, sep, bp, sep, dr, sep, yes_no(c->tail), sep, yes_no(c->inputs_tf32), sep,
                        yes_no(c->inputs_bf16), sep, al);
        }
    fputc('\n', f);
}

static cJSON *cell_json(const parity_power_cell_t *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "acc_seq_bits", c->acc_seq_bits);
    cJSON_AddNumberToObject(o, "acc_pair_bits", c->acc_pair_bits);
    cJSON_AddItemToObject(o, "drop_rate", parity_json_num(c->drop_rate));
    cJSON_AddNumberToObject(o, "tail", c->tail);
    cJSON_AddNumberToObject(o, "inputs_tf32", c->inputs_tf32);
    cJSON_AddNumberToObject(o, "inputs_bf16", c->inputs_bf16);
    cJSON_AddNumberToObject(o, "alarm_fp32_acc", c->alarm_fp32_acc);
    cJSON_AddNumberToObject(o, "alarm_faithful", c->alarm_faithful);
    cJSON *seq = cJSON_AddObjectToObject(o, "caught_seq"), *pair = cJSON_AddObjectToObject(o, "caught_pair");
    for (int b = PARITY_POWER_MIN_BITS; b <= PARITY_POWER_MAX_BITS; b++) {
        char k[8];
        snprintf(k, sizeof k, "%d", b);
        cJSON_AddNumberToObject(seq, k, c->caught_seq[b]);
        cJSON_AddNumberToObject(pair, k, c->caught_pair[b]);
    }
    cJSON *dr = cJSON_AddObjectToObject(o, "caught_drop");
    for (int i = 0; i < PARITY_POWER_N_RATES; i++) {
        char k[16];
        snprintf(k, sizeof k, "1e-%d", 2 + i);
        cJSON_AddNumberToObject(dr, k, c->caught_drop[i]);
    }
    return o;
}

static cJSON *result_json(const parity_power_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", r->op->name);
    if (r->kernel) cJSON_AddStringToObject(o, "inputs_kernel", r->kernel);
    else cJSON_AddNullToObject(o, "inputs_kernel");
    cJSON *sets = cJSON_AddArrayToObject(o, "sets");
    for (int s = 0; s < r->n_sets; s++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", r->set_name[s]);
        cJSON_AddNumberToObject(x, "workloads", r->n_workloads[s]);
        cJSON_AddNumberToObject(x, "rows_judged", (double)r->rows_judged[s]);
        cJSON_AddNumberToObject(x, "rows_total", (double)r->rows_total[s]);
        cJSON_AddNumberToObject(x, "seconds", r->seconds[s]);
        cJSON *j = cJSON_AddObjectToObject(x, "judges");
        for (int q = 0; q < PARITY_POWER_N_JUDGES; q++)
            cJSON_AddItemToObject(j, parity_power_judge_name(q), cell_json(&r->cell[s][q]));
        cJSON_AddItemToArray(sets, x);
    }
    return o;
}

int parity_cmd_power(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* an op a plugin declares: programs/cmd_power_declared.c */
        if (strcmp(argv[i], "--op-plugin") == 0) return parity_cmd_power_declared(argc, argv);
    const char *op_name = NULL, *json = NULL;
    int markdown = 0, quiet = 0;
    parity_power_opts_t o;
    parity_power_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            parity_help_power(stdout);
            return PARITY_EXIT_OK;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(a, "--markdown") == 0) {
            markdown = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--seed") == 0) {
            if (!val) return cli_usage_error("power", "--seed 1", "--seed needs a value");
            int rc = cli_opt_seed("power", a, val, &o.seed, NULL);
            if (rc) return rc;
            i++;
        } else if (strcmp(a, "--budget") == 0) {
            if (!val || cli_parse_double(val, &o.row_budget) != 0 || !(o.row_budget >= 1) ||
                !isfinite(o.row_budget))
                return cli_usage_error("power", "--budget 1048576", "--budget wants a number of terms >= 1, got '%s'",
                                       val ? val : "");
            i++;
        } else if (strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0) {
            if (!val) return cli_usage_error("power", "--workload odd-k1000@64x1000x32", "--workload needs a name");
            o.workload = val;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            if (!val) return cli_usage_error("power", "--json power.json", "--json needs a file");
            json = val;
            i++;
        } else if (a[0] == '-') {
            return cli_usage_error("power", "parity power --help", "unknown option '%s'", a);
        } else if (op_name) {
            return cli_usage_error("power", NULL, "unexpected argument '%s' (one OP per run, or all)", a);
        } else {
            op_name = a;
        }
    }
    if (!op_name) return cli_usage_error("power", "parity power gemm --quick", "no OP given");
    int all = strcmp(op_name, "all") == 0;
    if (!all && !parity_op_find(op_name)) return cli_usage_error("power", "parity ops", "no op '%s'", op_name);
    /* --workload names a workload of every op the run covers (all: each op), checked before any
     * op runs: an unknown name or a malformed NAME@NxD is a usage error, not an input error met
     * half-way through. */
    for (int i = 0; o.workload && i < parity_op_count(); i++) {
        const parity_op_t *op = all ? parity_op_at(i) : parity_op_find(op_name);
        int rc = cli_opt_workload("power", "--workload", op, o.workload, NULL);
        if (rc) return rc;
        if (!all) break;
    }
    if (!quiet) o.progress = cli_progress_stderr;
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    cJSON_AddStringToObject(root, "schema", "parity.power/1");
    cJSON_AddNumberToObject(root, "seed", (double)o.seed);
    cJSON_AddBoolToObject(root, "quick", o.quick);
    cJSON_AddNumberToObject(root, "budget", o.row_budget);
    arr = cJSON_AddArrayToObject(root, "ops");
    int rc = PARITY_EXIT_OK;
    double t0 = parity_now();
    for (int i = 0; i < parity_op_count(); i++) {
        const parity_op_t *op = all ? parity_op_at(i) : parity_op_find(op_name);
        parity_power_result_t r;
        parity_diag_t diag = {{0}};
        parity_status_t st = parity_power_run(op, &o, &r, &diag);
        if (st != PARITY_OK) {
            rc = cli_input_error("power", "%s: %s", op->name, diag.msg[0] ? diag.msg : parity_status_str(st));
            break;
        }
        if (!json || strcmp(json, "-") != 0) print_text(stdout, &r, markdown);
        fflush(stdout);
        cJSON_AddItemToArray(arr, result_json(&r));
        if (!all) break;
    }
    cJSON_AddNumberToObject(root, "seconds", parity_now() - t0);
    if (rc == PARITY_EXIT_OK && json && strcmp(json, "-") == 0) {
        char *text = cJSON_Print(root);
        if (text) printf("%s\n", text);
        free(text);
    } else if (rc == PARITY_EXIT_OK && json && parity_json_write(json, root) != 0) {
        rc = cli_input_error("power", "%s: cannot write the JSON", json);
    }
    cJSON_Delete(root);
    return rc;
}

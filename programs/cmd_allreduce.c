/* `parity allreduce`: the drift between two all-reduce setups (algorithm, rank count, per-hop
 * format) on the same logical tensor, and the "trained on 8, served on 4" table. A shell over the
 * reduce module; all arithmetic is there. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "json_out.h"
#include "parity/reduce.h"

void parity_help_allreduce(FILE *out)
{
    fprintf(out,
            "usage: parity allreduce --a SPEC [--b SPEC] [--workload W] [--n N] [--k K]\n"
            "                        [--seed S] [--ulp FMT] [--max-ulp X] [--json FILE]\n"
            "       parity allreduce --table RA:RB [--workload W] [--n N] [--k K] [--seed S]\n"
            "                        [--json FILE]\n"
            "\n"
            "Simulates the all-reduce of the same logical tensor under two setups A and B and\n"
            "reports how far apart the results are: the fraction of elements that differ, the\n"
            "distribution of |A - B| in ulps, relative error and NMSE, and each against the\n"
            "correctly rounded exact sum. Each output element is the sum of K terms; rank r of R\n"
            "holds the fp32 in-order sum of its contiguous slice of them (a row-parallel GEMM\n"
            "partial), stored in the hop format.\n"
            "\n"
            "SPEC      ALGO:R[:HOP][:acc=DTYPE][:chC]\n"
            "          ALGO ring (NCCL: chunk c starts at rank c+1), tree (pairwise halving),\n"
            "               oneshot (ranks 0..R-1 in order, rounded once), rd (Open MPI recursive\n"
            "               doubling), linear (Open MPI basic linear: R-1 down to 0), mpi_ring\n"
            "               (Open MPI ring: block b starts at rank b), rabenseifner,\n"
            "               ompi:N (Open MPI coll_tuned_allreduce_algorithm N = 1, 3, 4, 5, 6)\n"
            "          R    ranks 1..64;  HOP fp64 | fp32 | bf16 | fp16 (default fp32): every\n"
            "               value sent between ranks is rounded to it\n"
            "          acc=DTYPE  format of each addition (default fp32; fp64 with HOP fp64)\n"
            "          chC  ring channels: C contiguous slices, each with its own ring\n"
            "--b SPEC  default: the same as --a (a bit-identity check)\n"
            "--workload partial (default: bf16 GEMM partials with outlier channels),\n"
            "          normal, gradscale (1e-6..1e-3, DP gradients), outlier (1%% of elements\n"
            "          x100), intprobe (small integers: every order is exact)\n"
            "--n N     elements (default 4096); --k K terms per element (default 2048 for\n"
            "          partial, else 64); --seed S (default 1)\n"
            "--ulp FMT format whose ulps measure drift (default: the coarser hop; fp64 -> fp32)\n"
            "--max-ulp X  exit 1 when max |A - B| exceeds X ulps\n"
            "--table RA:RB  the 'trained on RA, served on RB' table: common algorithm pairs at\n"
            "          bf16 and fp32 hops, one row each\n"
            "--json FILE  the report as JSON (schema: docs/reduce.md)\n"
            "\n"
            "examples:\n"
            "  parity allreduce --a ring:8:bf16 --b oneshot:4:bf16\n"
            "  parity allreduce --a ompi:4:4 --b rd:4      (Open MPI ring vs recursive doubling)\n"
            "  parity allreduce --table 8:4\n"
            "\n"
            "exit codes: 0 reported, 1 A and B should be bit-identical but are not, or --max-ulp\n"
            "exceeded, 2 usage error, 3 I/O error.\n");
}

typedef struct {
    parity_reduce_workload_t w;
    size_t n, k;
    uint64_t seed;
} inputs_t;

/* Rank-local inputs per (R, hop), computed once per command: the table reuses them across rows. */
typedef struct {
    int ranks;
    parity_reduce_dtype_t hop;
    double *part;  /* (R, n) */
    double *exact; /* (n) exact sum rounded to hop */
} cached_t;
static cached_t g_cache[16];
static int g_ncache;

static void cache_free(void)
{
    for (int i = 0; i < g_ncache; i++) {
        free(g_cache[i].part);
        free(g_cache[i].exact);
    }
    g_ncache = 0;
}

/* The all-reduce result of spec s on the inputs, and the exact sum rounded to s's hop format. */
static parity_status_t run_spec(const inputs_t *in, const parity_reduce_spec_t *s, double *res,
                                double *exact)
{
    cached_t *c = NULL;
    for (int i = 0; i < g_ncache; i++)
        if (g_cache[i].ranks == s->ranks && g_cache[i].hop == s->hop) c = &g_cache[i];
    if (!c) {
        if (g_ncache == 16) cache_free();
        c = &g_cache[g_ncache];
        c->ranks = s->ranks;
        c->hop = s->hop;
        c->part = malloc((size_t)s->ranks * in->n * sizeof *c->part);
        c->exact = malloc(in->n * sizeof *c->exact);
        if (!c->part || !c->exact) {
            free(c->part);
            free(c->exact);
            return PARITY_E_NOMEM;
        }
        parity_status_t st = parity_reduce_inputs(in->w, in->seed, in->n, in->k, s->ranks, s->hop,
                                                  c->part, c->exact);
        if (st) {
            free(c->part);
            free(c->exact);
            return st;
        }
        for (size_t i = 0; i < in->n; i++) c->exact[i] = parity_reduce_round(s->hop, c->exact[i]);
        g_ncache++;
    }
    if (exact) memcpy(exact, c->exact, in->n * sizeof *exact);
    return parity_reduce_allreduce(s, c->part, in->n, res);
}

static parity_reduce_dtype_t coarser(parity_reduce_dtype_t a, parity_reduce_dtype_t b)
{
    static const int prec[4] = {53, 24, 8, 11};
    parity_reduce_dtype_t c = prec[a] <= prec[b] ? a : b;
    return c == PARITY_REDUCE_FP64 ? PARITY_REDUCE_FP32 : c;
}

static int write_json(const char *cmd, cJSON *root, const char *path)
{
    if (parity_json_write(path, root) != 0)
        return cli_input_error(cmd, "%s: cannot write the JSON report", path);
    return 0;
}

static void print_drift_row(const char *label, const parity_reduce_drift_t *d)
{
    printf("  %-12s %8.4f %8.2f %8.2f %8.2f %9.2f %10.3g %10.3g\n", label, d->frac_differ,
           d->p50_ulp, d->p90_ulp, d->p99_ulp, d->max_ulp, d->max_rel, d->nmse);
}

static int cmd_pair(const char *cmd, const inputs_t *in, const parity_reduce_spec_t *a,
                    const parity_reduce_spec_t *b, int ulp_set, parity_reduce_dtype_t ulp,
                    double max_ulp, const char *json)
{
    if (!ulp_set) ulp = coarser(a->hop, b->hop);
    size_t n = in->n;
    double *buf = malloc(4 * n * sizeof *buf);
    if (!buf) return cli_input_error(cmd, "out of memory");
    double *ra = buf, *ea = buf + n, *rb = buf + 2 * n, *eb = buf + 3 * n;
    parity_status_t st = run_spec(in, a, ra, ea);
    if (!st) st = run_spec(in, b, rb, eb);
    parity_reduce_drift_t dab, dae, dbe;
    if (!st) st = parity_reduce_drift(ra, rb, n, ulp, &dab);
    if (!st) st = parity_reduce_drift(ra, ea, n, ulp, &dae);
    if (!st) st = parity_reduce_drift(rb, eb, n, ulp, &dbe);
    free(buf);
    if (st) return cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
    char sa[64], sb[64];
    parity_reduce_spec_str(a, sa, sizeof sa);
    parity_reduce_spec_str(b, sb, sizeof sb);
    int expected = parity_reduce_same_order(a, b, n), identical = dab.n_differ == 0;
    printf("parity allreduce: A = %s, B = %s\n", sa, sb);
    printf("workload %s, %zu elements, K %zu terms each, seed %llu; drift in %s ulps\n",
           parity_reduce_workload_name(in->w), n, in->k, (unsigned long long)in->seed,
           parity_reduce_dtype_name(ulp));
    printf("  %-12s %8s %8s %8s %8s %9s %10s %10s\n", "", "differ", "p50ulp", "p90ulp",
           "p99ulp", "max_ulp", "max_rel", "nmse");
    print_drift_row("A vs B", &dab);
    print_drift_row("A vs exact", &dae);
    print_drift_row("B vs exact", &dbe);
    printf("  |A-B| ulps: 0: %llu  (0,1]: %llu  (1,2]: %llu  (2,4]: %llu  (4,8]: %llu  >8: %llu\n",
           (unsigned long long)dab.ulp_hist[0], (unsigned long long)dab.ulp_hist[1],
           (unsigned long long)dab.ulp_hist[2], (unsigned long long)dab.ulp_hist[3],
           (unsigned long long)dab.ulp_hist[4], (unsigned long long)dab.ulp_hist[5]);
    printf("  (exact: the exact sum of the K terms, correctly rounded to the spec's hop format;\n"
           "   rel errors use the floor %.3g = 1e-3 x rms)\n",
           dab.rel_floor);
    printf("bit-identical: %s (%s)\n", identical ? "yes" : "no",
           expected ? "expected: the same per-element reduction order and formats"
                    : "not expected: the reduction orders or formats differ");
    int rc = 0;
    if (expected && !identical) {
        printf("FAIL: A and B should agree bit for bit\n");
        rc = 1;
    }
    if (max_ulp >= 0 && !(dab.max_ulp <= max_ulp)) {
        printf("FAIL: max |A - B| %.3g ulps exceeds --max-ulp %g\n", dab.max_ulp, max_ulp);
        rc = 1;
    }
    if (rc)
        printf("reproduce: parity allreduce --a %s --b %s --workload %s --n %zu --k %zu --seed %llu\n",
               sa, sb, parity_reduce_workload_name(in->w), n, in->k,
               (unsigned long long)in->seed);
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "schema", "parity.allreduce/1");
        cJSON_AddStringToObject(root, "a", sa);
        cJSON_AddStringToObject(root, "b", sb);
        cJSON_AddStringToObject(root, "workload", parity_reduce_workload_name(in->w));
        cJSON_AddNumberToObject(root, "n", (double)n);
        cJSON_AddNumberToObject(root, "k", (double)in->k);
        cJSON_AddNumberToObject(root, "seed", (double)in->seed);
        cJSON_AddStringToObject(root, "ulp_format", parity_reduce_dtype_name(ulp));
        cJSON_AddBoolToObject(root, "expected_identical", expected);
        cJSON_AddBoolToObject(root, "identical", identical);
        cJSON_AddItemToObject(root, "a_vs_b", cli_drift_json(&dab));
        cJSON_AddItemToObject(root, "a_vs_exact", cli_drift_json(&dae));
        cJSON_AddItemToObject(root, "b_vs_exact", cli_drift_json(&dbe));
        int w = write_json(cmd, root, json);
        cJSON_Delete(root);
        if (w) return w;
    }
    return rc;
}

/* The table: for each hop format, pairs (trained, served). */
static int cmd_table(const char *cmd, const inputs_t *in, int ra, int rb, const char *json)
{
    static const char *const pairs[][2] = {
        {"ring:%d", "ring:%d"},  /* control row: the same setup twice */
        {"ring:%d", "ring:%e"},    {"ring:%d", "oneshot:%e"}, {"ring:%d", "tree:%e"},
        {"oneshot:%d", "oneshot:%e"}, {"tree:%d", "tree:%e"},  {"ring:%d", "oneshot:%d"},
        {"ring:%d", "ring:%d:ch2"}, {"ring:%e", "oneshot:%e"}};
    static const char *const dts[] = {"bf16", "fp32"};
    size_t n = in->n, np = sizeof pairs / sizeof pairs[0];
    double *buf = malloc(4 * n * sizeof *buf);
    if (!buf) return cli_input_error(cmd, "out of memory");
    cJSON *root = cJSON_CreateObject(), *rows = NULL;
    cJSON_AddStringToObject(root, "schema", "parity.allreduce.table/1");
    cJSON_AddStringToObject(root, "workload", parity_reduce_workload_name(in->w));
    cJSON_AddNumberToObject(root, "n", (double)n);
    cJSON_AddNumberToObject(root, "k", (double)in->k);
    cJSON_AddNumberToObject(root, "seed", (double)in->seed);
    rows = cJSON_AddArrayToObject(root, "rows");
    printf("trained on %d ranks, served on %d: workload %s, %zu elements, K %zu, seed %llu\n", ra,
           rb, parity_reduce_workload_name(in->w), n, in->k, (unsigned long long)in->seed);
    printf("drift |A - B| in ulps of the hop format; 'A err' / 'B err': p99 ulps against the\n"
           "correctly rounded exact sum (the floor each setup has on its own)\n\n");
    printf("| hop  | A (trained)      | B (served)       | differ | p50 | p99 | max | max rel  | A err p99 | B err p99 |\n");
    printf("|------|------------------|------------------|--------|-----|-----|-----|----------|-----------|-----------|\n");
    int rc = 0;
    for (int d = 0; d < 2 && !rc; d++)
        for (size_t p = 0; p < np && !rc; p++) {
            char ta[96], tb[96];
            parity_reduce_spec_t a, b;
            for (int side = 0; side < 2; side++) {
                char t[40], *o = side ? tb : ta;
                const char *src = pairs[p][side];
                /* %d = RA, %e = RB */
                size_t j = 0;
                for (const char *c = src; *c && j + 8 < sizeof t; c++) {
                    if (c[0] == '%' && (c[1] == 'd' || c[1] == 'e')) {
                        j += (size_t)snprintf(t + j, sizeof t - j, "%d", c[1] == 'd' ? ra : rb);
                        c++;
                    } else {
                        t[j++] = *c;
                    }
                }
                t[j] = 0;
                char *colon = strchr(strchr(t, ':') + 1, ':');
                if (colon)
                    snprintf(o, 96, "%.*s:%s%s", (int)(colon - t), t, dts[d], colon);
                else
                    snprintf(o, 96, "%s:%s", t, dts[d]);
            }
            if (parity_reduce_spec_parse(ta, &a, NULL) || parity_reduce_spec_parse(tb, &b, NULL)) {
                rc = cli_input_error(cmd, "internal: bad table spec %s / %s", ta, tb);
                break;
            }
            double *r1 = buf, *e1 = buf + n, *r2 = buf + 2 * n, *e2 = buf + 3 * n;
            parity_reduce_drift_t dab, dae, dbe;
            parity_status_t st = run_spec(in, &a, r1, e1);
            if (!st) st = run_spec(in, &b, r2, e2);
            parity_reduce_dtype_t hop = a.hop;
            if (!st) st = parity_reduce_drift(r1, r2, n, hop, &dab);
            if (!st) st = parity_reduce_drift(r1, e1, n, hop, &dae);
            if (!st) st = parity_reduce_drift(r2, e2, n, hop, &dbe);
            if (st) {
                rc = cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
                break;
            }
            parity_reduce_spec_str(&a, ta, sizeof ta);
            parity_reduce_spec_str(&b, tb, sizeof tb);
            printf("| %-4s | %-16s | %-16s | %6.3f | %3.0f | %3.0f | %3.0f | %8.2g | %9.1f | %9.1f |\n",
                   dts[d], ta, tb, dab.frac_differ, dab.p50_ulp, dab.p99_ulp, dab.max_ulp,
                   dab.max_rel, dae.p99_ulp, dbe.p99_ulp);
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "hop", dts[d]);
            cJSON_AddStringToObject(row, "a", ta);
            cJSON_AddStringToObject(row, "b", tb);
            cJSON_AddItemToObject(row, "a_vs_b", cli_drift_json(&dab));
            cJSON_AddItemToObject(row, "a_vs_exact", cli_drift_json(&dae));
            cJSON_AddItemToObject(row, "b_vs_exact", cli_drift_json(&dbe));
            cJSON_AddItemToArray(rows, row);
            if (p == 0 && dab.n_differ) {
                printf("FAIL: the control row (same setup twice) is not bit-identical\n");
                rc = 1;
            }
        }
    free(buf);
    if (!rc && json) rc = write_json(cmd, root, json);
    cJSON_Delete(root);
    return rc;
}

/* RA:RB, each a rank count 1..PARITY_REDUCE_MAX_RANKS in decimal digits (cli.h's integers). */
static int parse_table(const char *t, int *ra, int *rb)
{
    const char *c = strchr(t, ':');
    char buf[32];
    long x, y;
    if (!c || (size_t)(c - t) >= sizeof buf) return -1;
    memcpy(buf, t, (size_t)(c - t));
    buf[c - t] = 0;
    if (cli_parse_long(buf, 1, PARITY_REDUCE_MAX_RANKS, &x) || cli_parse_long(c + 1, 1, PARITY_REDUCE_MAX_RANKS, &y))
        return -1;
    *ra = (int)x;
    *rb = (int)y;
    return 0;
}

/* What parity_reduce_spec_parse (src/reduce) lets through and the CLI does not: an empty field
 * (a leading, trailing or doubled ':', which its strtok skips) and a blank or '+' (which its
 * strtol skips in a number: "ring: 8", "ring:+8"). */
static int spec_fields(const char *s, parity_diag_t *diag)
{
    const char *form = "expected ALGO:R[:HOP][:acc=DTYPE][:chC]";
    if (!*s) return parity_diag_set(diag, PARITY_E_INVALID, "empty all-reduce spec (%s)", form);
    if (s[0] == ':' || s[strlen(s) - 1] == ':' || strstr(s, "::"))
        return parity_diag_set(diag, PARITY_E_INVALID, "'%s': an empty field between ':' (%s)", s, form);
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p) || *p == '+')
            return parity_diag_set(diag, PARITY_E_INVALID, "'%s': '%c' at offset %d (%s; numbers are "
                                   "decimal digits)", s, *p, (int)(p - s), form);
    return 0;
}

int parity_cmd_allreduce(int argc, char **argv)
{
    const char *cmd = "allreduce", *hint = "parity allreduce --a ring:8:bf16 --b oneshot:4:bf16";
    const char *sa = NULL, *sb = NULL, *json = NULL, *table = NULL;
    inputs_t in = {PARITY_REDUCE_W_PARTIAL, 4096, 0, 1};
    int ulp_set = 0;
    parity_reduce_dtype_t ulp = PARITY_REDUCE_FP32;
    double max_ulp = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            parity_help_allreduce(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0)
            return cli_usage_error(cmd, hint, "unexpected argument '%s'", a);
        if (i + 1 >= argc) return cli_usage_error(cmd, hint, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--a")) sa = v;
        else if (!strcmp(a, "--b")) sb = v;
        else if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--table")) table = v;
        else if (!strcmp(a, "--workload")) {
            if (parity_reduce_workload_parse(v, &in.w))
                return cli_usage_error(cmd, "--workload partial|normal|gradscale|outlier|intprobe",
                                       "unknown workload '%s'", v);
        } else if (!strcmp(a, "--n") || !strcmp(a, "--k")) {
            long x;
            int rc = cli_opt_long(cmd, a, v, 1, 1L << 26, &x);
            if (rc) return rc;
            if (a[2] == 'n') in.n = (size_t)x;
            else in.k = (size_t)x;
        } else if (!strcmp(a, "--seed")) {
            int rc = cli_opt_seed(cmd, a, v, &in.seed, NULL);
            if (rc) return rc;
        } else if (!strcmp(a, "--ulp")) {
            int d = 0;
            while (d < 4 && strcmp(v, parity_reduce_dtype_name((parity_reduce_dtype_t)d)) != 0) d++;
            if (d == 4)
                return cli_usage_error(cmd, "--ulp bf16|fp16|fp32", "--ulp wants fp64, fp32, bf16 or fp16, got '%s'", v);
            ulp = d == PARITY_REDUCE_FP64 ? PARITY_REDUCE_FP32 : (parity_reduce_dtype_t)d;
            ulp_set = 1;
        } else if (!strcmp(a, "--max-ulp")) {
            if (cli_parse_double(v, &max_ulp) || !(max_ulp >= 0))
                return cli_usage_error(cmd, "--max-ulp 2", "--max-ulp wants a number >= 0, got '%s'", v);
        } else {
            return cli_usage_error(cmd, hint, "unknown option '%s'", a);
        }
    }
    if (in.k == 0) in.k = in.w == PARITY_REDUCE_W_PARTIAL ? 2048 : 64;
    parity_diag_t diag;
    if (table) {
        int ra, rb;
        if (sa || sb) return cli_usage_error(cmd, "parity allreduce --table 8:4", "--table takes no --a/--b");
        if (parse_table(table, &ra, &rb) != 0)
            return cli_usage_error(cmd, "--table 8:4", "--table wants RA:RB, two rank counts 1..%d in decimal "
                                   "digits, got '%s'", PARITY_REDUCE_MAX_RANKS, table);
        if (in.k < (size_t)(ra > rb ? ra : rb))
            return cli_usage_error(cmd, "--k 4096", "--k %zu is smaller than the rank count", in.k);
        int rc = cmd_table(cmd, &in, ra, rb, json);
        cache_free();
        return rc;
    }
    if (!sa) return cli_usage_error(cmd, hint, "missing --a (or --table)");
    if (!sb) sb = sa;
    parity_reduce_spec_t a, b;
    if (spec_fields(sa, &diag) || parity_reduce_spec_parse(sa, &a, &diag))
        return cli_usage_error(cmd, hint, "--a: %s", diag.msg);
    if (spec_fields(sb, &diag) || parity_reduce_spec_parse(sb, &b, &diag))
        return cli_usage_error(cmd, hint, "--b: %s", diag.msg);
    if (in.k < (size_t)a.ranks || in.k < (size_t)b.ranks)
        return cli_usage_error(cmd, "--k 4096", "--k %zu is smaller than the rank count", in.k);
    int rc = cmd_pair(cmd, &in, &a, &b, ulp_set, ulp, max_ulp, json);
    cache_free();
    return rc;
}

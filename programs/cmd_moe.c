/* `parity moe`: the drift between two MoE routing/combine setups on the same router logits and
 * expert outputs (softmax format, tie rule, combine order and arithmetic, shared expert), the
 * fraction of tokens whose top-k set differs, routing fragility under perturbed logits, and the
 * one-difference-at-a-time table. A shell over the moe module; drift metrics from reduce.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "json_out.h"
#include "parity/moe.h"
#include "parity/reduce.h"

#define SPEC_HINT "--a softmax=fp32,order=expert --b softmax=bf16,order=slot,combine=fp32acc"

void parity_help_moe(FILE *out)
{
    fprintf(out,
            "usage: parity moe [--a SPEC] [--b SPEC] [--tokens T] [--experts E] [--topk K]\n"
            "                  [--hidden D] [--sigma S] [--ties F] [--outliers N]\n"
            "                  [--outlier-factor X] [--seed S] [--perturb EPS,EPS,...]\n"
            "                  [--max-flip F] [--max-ulp U] [--json FILE]\n"
            "       parity moe --table [same workload options] [--json FILE]\n"
            "\n"
            "Simulates a mixture-of-experts layer's routing and combine for T tokens under two\n"
            "setups A and B on the same router logits and bf16 expert outputs, and reports the\n"
            "drift of the combined output (fraction of elements that differ, |A - B| in bf16\n"
            "ulps, max relative error, NMSE), each side against an fp64 reference with the same\n"
            "semantics, the fraction of tokens whose top-k SET differs, and the fraction whose\n"
            "top-k set flips when the router logits get EPS * N(0,1) added (routing fragility).\n"
            "\n"
            "SPEC      key=value,... over the reference setup; keys (default first):\n"
            "  softmax=fp32|bf16    bf16: logits and probabilities rounded to bf16, fp32 inside\n"
            "  topk=lowid|highid    which expert wins an exact tie of probabilities\n"
            "  renorm=1|0           divide the top-k weights by their sum (Mixtral) or not\n"
            "  weights=bf16|fp32    cast the weights to bf16 before the multiply (Hugging Face)\n"
            "  order=expert|slot    add the K terms in expert-id order or in top-k slot order\n"
            "  combine=bf16buf|bf16prod|fp32acc|fp32fma\n"
            "                       bf16buf: bf16(w*y) added into a bf16 buffer; bf16prod: bf16(w*y)\n"
            "                       summed in fp32, rounded once; fp32acc: fp32(w*y) summed in\n"
            "                       fp32; fp32fma: fp32 fused multiply-add\n"
            "  shared=after|before|none  the shared expert added to the bf16 routed output, used\n"
            "                       as the accumulator's start, or absent\n"
            "          reference (\"default\"): softmax=fp32,topk=lowid,renorm=1,weights=bf16,\n"
            "          order=expert,combine=bf16buf,shared=after\n"
            "--b SPEC  applied over --a's spec; default: the same as --a (a bit-identity check)\n"
            "--tokens T (4096)  --experts E (64)  --topk K (8)  --hidden D (1024)\n"
            "--sigma S  router logits fp32(S * N(0,1)) (default 1)\n"
            "--ties F   fraction of tokens whose (K+1)-th logit equals the K-th (default 0)\n"
            "--outliers N [--outlier-factor X]  N hidden channels of every expert output x X\n"
            "           (default 0, x8)\n"
            "--seed S   (default 1)\n"
            "--perturb EPS,...  perturbation sizes for the flip fraction (default 0.001,0.01,0.1)\n"
            "--max-flip F  exit 1 when the A-vs-B top-k set flip fraction or any perturbation\n"
            "           flip fraction exceeds F\n"
            "--max-ulp U  exit 1 when max |A - B| exceeds U bf16 ulps\n"
            "--table    the reference against one change at a time and two fused-kernel setups,\n"
            "           and the flip fraction against the perturbation size\n"
            "--json FILE  the report as JSON (schema: docs/moe.md), written atomically\n"
            "\n"
            "examples:\n"
            "  parity moe --b order=slot\n"
            "  parity moe --a default --b softmax=bf16,order=slot,combine=fp32acc,shared=before\n"
            "  parity moe --table --tokens 1024\n"
            "\n"
            "exit codes: 0 reported, 1 --max-flip or --max-ulp exceeded (or identical specs\n"
            "differ), 2 usage error, 3 I/O error.\n");
}

static int write_json(const char *cmd, cJSON *root, const char *path)
{
    if (parity_json_write(path, root) != 0)
        return cli_input_error(cmd, "%s: cannot write the JSON report", path);
    return 0;
}

static cJSON *config_json(cJSON *root, const parity_moe_config_t *c)
{
    cJSON_AddNumberToObject(root, "tokens", (double)c->t);
    cJSON_AddNumberToObject(root, "experts", (double)c->e);
    cJSON_AddNumberToObject(root, "topk", (double)c->k);
    cJSON_AddNumberToObject(root, "hidden", (double)c->d);
    cJSON_AddItemToObject(root, "sigma", parity_json_num(c->sigma));
    cJSON_AddItemToObject(root, "ties", parity_json_num(c->ties));
    cJSON_AddNumberToObject(root, "outliers", c->outliers);
    cJSON_AddItemToObject(root, "outlier_factor", parity_json_num(c->outlier_factor));
    cJSON_AddNumberToObject(root, "seed", (double)c->seed);
    return root;
}

/* One side's results: output, routing, and its fp64 reference (with its routing). */
typedef struct {
    double *out, *exact;
    int32_t *ids, *exact_ids;
} side_t;

static void side_free(side_t *s)
{
    free(s->out), free(s->exact), free(s->ids), free(s->exact_ids);
    memset(s, 0, sizeof *s);
}

static parity_status_t side_run(const parity_moe_config_t *c, const parity_moe_spec_t *sp,
                                side_t *s)
{
    size_t nd = c->t * c->d, nk = c->t * c->k;
    s->out = malloc(nd * sizeof *s->out);
    s->exact = malloc(nd * sizeof *s->exact);
    s->ids = malloc(nk * sizeof *s->ids);
    s->exact_ids = malloc(nk * sizeof *s->exact_ids);
    if (!s->out || !s->exact || !s->ids || !s->exact_ids) return PARITY_E_NOMEM;
    return parity_moe_run(c, sp, s->out, s->ids, s->exact, s->exact_ids);
}

typedef struct {
    parity_reduce_drift_t ab, ae, be;
    double set_ab, set_ae, set_be; /* fractions of tokens whose top-k set differs */
} pair_t;

static parity_status_t compare(const parity_moe_config_t *c, const side_t *a, const side_t *b,
                               pair_t *r)
{
    size_t nd = c->t * c->d, T = c->t, K = c->k;
    parity_status_t st = parity_reduce_drift(a->out, b->out, nd, PARITY_REDUCE_BF16, &r->ab);
    if (!st) st = parity_reduce_drift(a->out, a->exact, nd, PARITY_REDUCE_BF16, &r->ae);
    if (!st) st = parity_reduce_drift(b->out, b->exact, nd, PARITY_REDUCE_BF16, &r->be);
    r->set_ab = (double)parity_moe_set_differ(a->ids, b->ids, T, K) / (double)T;
    r->set_ae = (double)parity_moe_set_differ(a->ids, a->exact_ids, T, K) / (double)T;
    r->set_be = (double)parity_moe_set_differ(b->ids, b->exact_ids, T, K) / (double)T;
    return st;
}

static void print_drift_row(const char *label, const parity_reduce_drift_t *d, double setf)
{
    printf("  %-12s %8.4f %8.4f %8.2f %8.2f %8.2f %9.2f %10.3g %10.3g\n", label, setf,
           d->frac_differ, d->p50_ulp, d->p90_ulp, d->p99_ulp, d->max_ulp, d->max_rel, d->nmse);
}

static cJSON *pair_json(cJSON *o, const pair_t *r)
{
    cJSON_AddItemToObject(o, "topk_set_differ_a_vs_b", parity_json_num(r->set_ab));
    cJSON_AddItemToObject(o, "topk_set_differ_a_vs_exact", parity_json_num(r->set_ae));
    cJSON_AddItemToObject(o, "topk_set_differ_b_vs_exact", parity_json_num(r->set_be));
    cJSON_AddItemToObject(o, "a_vs_b", cli_drift_json(&r->ab));
    cJSON_AddItemToObject(o, "a_vs_exact", cli_drift_json(&r->ae));
    cJSON_AddItemToObject(o, "b_vs_exact", cli_drift_json(&r->be));
    return o;
}

#define MAX_EPS 16

static void repro(const parity_moe_config_t *c, const char *sa, const char *sb)
{
    printf("reproduce: parity moe --a %s --b %s --tokens %zu --experts %zu --topk %zu --hidden %zu "
           "--sigma %.17g --ties %.17g --outliers %d --outlier-factor %.17g --seed %llu\n",
           sa, sb, c->t, c->e, c->k, c->d, c->sigma, c->ties, c->outliers, c->outlier_factor,
           (unsigned long long)c->seed);
}

static int cmd_pair(const char *cmd, const parity_moe_config_t *c, const parity_moe_spec_t *a,
                    const parity_moe_spec_t *b, const double *eps, int neps, double max_flip,
                    double max_ulp, const char *json)
{
    side_t A = {0}, B = {0};
    pair_t r;
    double fa[MAX_EPS], fb[MAX_EPS];
    parity_status_t st = side_run(c, a, &A);
    if (!st) st = side_run(c, b, &B);
    if (!st) st = compare(c, &A, &B, &r);
    for (int i = 0; i < neps && !st; i++) {
        st = parity_moe_flip_frac(c, a, eps[i], &fa[i]);
        if (!st) st = parity_moe_flip_frac(c, b, eps[i], &fb[i]);
    }
    side_free(&A), side_free(&B);
    if (st) return cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
    char sa[200], sb[200];
    parity_moe_spec_str(a, sa, sizeof sa);
    parity_moe_spec_str(b, sb, sizeof sb);
    int same = parity_moe_spec_equal(a, b), identical = r.ab.n_differ == 0 && r.set_ab == 0;
    printf("parity moe: A = %s\n            B = %s\n", sa, sb);
    printf("T %zu tokens, E %zu experts, top-%zu, D %zu; logits fp32(%g N(0,1)), ties %g, "
           "outliers %d (x%g), seed %llu\n",
           c->t, c->e, c->k, c->d, c->sigma, c->ties, c->outliers, c->outlier_factor,
           (unsigned long long)c->seed);
    printf("  %-12s %8s %8s %8s %8s %8s %9s %10s %10s\n", "", "set_flip", "differ", "p50ulp",
           "p90ulp", "p99ulp", "max_ulp", "max_rel", "nmse");
    print_drift_row("A vs B", &r.ab, r.set_ab);
    print_drift_row("A vs exact", &r.ae, r.set_ae);
    print_drift_row("B vs exact", &r.be, r.set_be);
    printf("  |A-B| ulps: 0: %llu  (0,1]: %llu  (1,2]: %llu  (2,4]: %llu  (4,8]: %llu  >8: %llu\n",
           (unsigned long long)r.ab.ulp_hist[0], (unsigned long long)r.ab.ulp_hist[1],
           (unsigned long long)r.ab.ulp_hist[2], (unsigned long long)r.ab.ulp_hist[3],
           (unsigned long long)r.ab.ulp_hist[4], (unsigned long long)r.ab.ulp_hist[5]);
    printf("  (set_flip: tokens whose top-k set differs; ulps of bf16 at max(|ref|, %.3g = 1e-3 x "
           "rms);\n   exact: fp64 routing and an exact sum, rounded to bf16)\n",
           r.ab.rel_floor);
    if (neps) {
        printf("  top-k set flips under logits + eps*N(0,1):\n");
        printf("  %10s %10s %10s\n", "eps", "A", "B");
        for (int i = 0; i < neps; i++) printf("  %10g %10.4f %10.4f\n", eps[i], fa[i], fb[i]);
    }
    printf("bit-identical: %s (%s)\n", identical ? "yes" : "no",
           same ? "expected: the same spec" : "not expected: the specs differ");
    int rc = 0;
    if (same && !identical) {
        printf("FAIL: A and B are the same spec but differ\n");
        rc = 1;
    }
    if (max_ulp >= 0 && !(r.ab.max_ulp <= max_ulp)) {
        printf("FAIL: max |A - B| %.3g bf16 ulps exceeds --max-ulp %g\n", r.ab.max_ulp, max_ulp);
        rc = 1;
    }
    if (max_flip >= 0) {
        if (!(r.set_ab <= max_flip)) {
            printf("FAIL: A vs B top-k set flips %.4g exceed --max-flip %g\n", r.set_ab, max_flip);
            rc = 1;
        }
        for (int i = 0; i < neps; i++)
            if (!(fa[i] <= max_flip) || !(fb[i] <= max_flip)) {
                printf("FAIL: flips under --perturb %g (A %.4g, B %.4g) exceed --max-flip %g\n",
                       eps[i], fa[i], fb[i], max_flip);
                rc = 1;
            }
    }
    if (rc) repro(c, sa, sb);
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "schema", "parity.moe/1");
        cJSON_AddStringToObject(root, "a", sa);
        cJSON_AddStringToObject(root, "b", sb);
        config_json(root, c);
        cJSON_AddStringToObject(root, "ulp_format", "bf16");
        cJSON_AddBoolToObject(root, "expected_identical", same);
        cJSON_AddBoolToObject(root, "identical", identical);
        pair_json(root, &r);
        cJSON *pa = cJSON_AddArrayToObject(root, "perturb");
        for (int i = 0; i < neps; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "eps", parity_json_num(eps[i]));
            cJSON_AddItemToObject(o, "flip_a", parity_json_num(fa[i]));
            cJSON_AddItemToObject(o, "flip_b", parity_json_num(fb[i]));
            cJSON_AddItemToArray(pa, o);
        }
        int w = write_json(cmd, root, json);
        cJSON_Delete(root);
        if (w) return w;
    }
    return rc;
}

/* The table: the reference against one change at a time, then two whole fused-kernel setups. */
static int cmd_table(const char *cmd, const parity_moe_config_t *c, const double *eps, int neps,
                     const char *json)
{
    static const char *const rows[] = {
        "default",         "softmax=bf16",  "topk=highid",     "weights=fp32",
        "order=slot",      "combine=bf16prod", "combine=fp32acc", "combine=fp32fma",
        "shared=before",
        "weights=fp32,order=slot",                                 /* fused: slot-order bf16 sum */
        "weights=fp32,order=slot,combine=fp32acc,shared=before",   /* fused: fp32 epilogue */
        "softmax=bf16,weights=fp32,order=slot,combine=fp32acc,shared=before"};
    size_t nr = sizeof rows / sizeof rows[0];
    parity_moe_spec_t ref = parity_moe_spec_default();
    side_t A = {0};
    parity_status_t st = side_run(c, &ref, &A);
    if (st) {
        side_free(&A);
        return cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "parity.moe.table/1");
    char sref[200];
    parity_moe_spec_str(&ref, sref, sizeof sref);
    cJSON_AddStringToObject(root, "a", sref);
    config_json(root, c);
    cJSON *jrows = cJSON_AddArrayToObject(root, "rows");
    printf("MoE combine drift against the reference (%s)\n", sref);
    printf("T %zu, E %zu, top-%zu, D %zu, logits fp32(%g N(0,1)), ties %g, outliers %d (x%g), "
           "seed %llu; ulps of bf16\n\n",
           c->t, c->e, c->k, c->d, c->sigma, c->ties, c->outliers, c->outlier_factor,
           (unsigned long long)c->seed);
    printf("| B = reference + | set flip | differ | p50 | p99 | max ulp | max rel | nmse | A err p99 | B err p99 |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (size_t i = 0; i < nr && !rc; i++) {
        parity_moe_spec_t b;
        side_t B = {0};
        pair_t r;
        if (parity_moe_spec_parse(rows[i], &ref, &b, NULL)) {
            rc = cli_input_error(cmd, "internal: bad table spec %s", rows[i]);
            break;
        }
        st = side_run(c, &b, &B);
        if (!st) st = compare(c, &A, &B, &r);
        side_free(&B);
        if (st) {
            rc = cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
            break;
        }
        printf("| %s | %.4f | %.3f | %.0f | %.0f | %.0f | %.2g | %.2g | %.1f | %.1f |\n", rows[i],
               r.set_ab, r.ab.frac_differ, r.ab.p50_ulp, r.ab.p99_ulp, r.ab.max_ulp, r.ab.max_rel,
               r.ab.nmse, r.ae.p99_ulp, r.be.p99_ulp);
        char sb[200];
        parity_moe_spec_str(&b, sb, sizeof sb);
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "change", rows[i]);
        cJSON_AddStringToObject(row, "b", sb);
        pair_json(row, &r);
        cJSON_AddItemToArray(jrows, row);
        if (i == 0 && (r.ab.n_differ || r.set_ab != 0)) {
            printf("FAIL: the control row (the reference twice) is not bit-identical\n");
            rc = 1;
        }
    }
    side_free(&A);
    if (!rc && neps) {
        parity_moe_spec_t bf = ref;
        bf.softmax = PARITY_MOE_SOFTMAX_BF16;
        printf("\ntop-k set flips under router logits + eps * N(0,1) (logit sigma %g)\n\n", c->sigma);
        printf("| eps | eps/sigma | softmax=fp32 | softmax=bf16 |\n|---|---|---|---|\n");
        cJSON *jp = cJSON_AddArrayToObject(root, "perturb");
        for (int i = 0; i < neps && !rc; i++) {
            double f32, f16;
            st = parity_moe_flip_frac(c, &ref, eps[i], &f32);
            if (!st) st = parity_moe_flip_frac(c, &bf, eps[i], &f16);
            if (st) {
                rc = cli_input_error(cmd, "simulation failed: %s", parity_status_str(st));
                break;
            }
            printf("| %g | %.3g | %.4f | %.4f |\n", eps[i], c->sigma > 0 ? eps[i] / c->sigma : 0,
                   f32, f16);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "eps", parity_json_num(eps[i]));
            cJSON_AddItemToObject(o, "flip_softmax_fp32", parity_json_num(f32));
            cJSON_AddItemToObject(o, "flip_softmax_bf16", parity_json_num(f16));
            cJSON_AddItemToArray(jp, o);
        }
    }
    if (!rc && json) rc = write_json(cmd, root, json);
    cJSON_Delete(root);
    return rc;
}

static int parse_eps(const char *v, double *eps, int *neps)
{
    *neps = 0;
    if (!strcmp(v, "none")) return 0;
    double x[MAX_EPS];
    int n;
    if (cli_parse_double_list(v, x, MAX_EPS, &n) != 0) return -1;
    for (int i = 0; i < n; i++)
        if (!(x[i] >= 0) || !isfinite(x[i])) return -1;
    memcpy(eps, x, (size_t)n * sizeof *x);
    *neps = n;
    return 0;
}

int parity_cmd_moe(int argc, char **argv)
{
    const char *cmd = "moe", *hint = "parity moe " SPEC_HINT;
    const char *sa = NULL, *sb = NULL, *json = NULL;
    parity_moe_config_t c = parity_moe_config_default();
    double eps[MAX_EPS] = {0.001, 0.01, 0.1}, max_flip = -1, max_ulp = -1;
    int neps = 3, table = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            parity_help_moe(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error(cmd, hint, "unexpected argument '%s'", a);
        if (!strcmp(a, "--table")) {
            table = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, hint, "%s needs a value", a);
        const char *v = argv[++i];
        long x;
        if (!strcmp(a, "--a")) sa = v;
        else if (!strcmp(a, "--b")) sb = v;
        else if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--tokens") || !strcmp(a, "--experts") || !strcmp(a, "--topk") ||
                 !strcmp(a, "--hidden") || !strcmp(a, "--outliers")) {
            int rc = cli_opt_long(cmd, a, v, !strcmp(a, "--outliers") ? 0 : 1, 1L << 24, &x);
            if (rc) return rc;
            if (!strcmp(a, "--tokens")) c.t = (size_t)x;
            else if (!strcmp(a, "--experts")) c.e = (size_t)x;
            else if (!strcmp(a, "--topk")) c.k = (size_t)x;
            else if (!strcmp(a, "--hidden")) c.d = (size_t)x;
            else c.outliers = (int)x;
        } else if (!strcmp(a, "--sigma") || !strcmp(a, "--ties") || !strcmp(a, "--outlier-factor") ||
                   !strcmp(a, "--max-flip") || !strcmp(a, "--max-ulp")) {
            double d;
            if (cli_parse_double(v, &d) || !isfinite(d) || d < 0)
                return cli_usage_error(cmd, "--sigma 1 --ties 0.01 --max-flip 0.05",
                                       "%s wants a finite number >= 0, got '%s'", a, v);
            if (!strcmp(a, "--sigma")) c.sigma = d;
            else if (!strcmp(a, "--ties")) c.ties = d;
            else if (!strcmp(a, "--outlier-factor")) c.outlier_factor = d;
            else if (!strcmp(a, "--max-flip")) max_flip = d;
            else max_ulp = d;
        } else if (!strcmp(a, "--seed")) {
            int rc = cli_opt_seed(cmd, a, v, &c.seed, NULL);
            if (rc) return rc;
        } else if (!strcmp(a, "--perturb")) {
            if (parse_eps(v, eps, &neps))
                return cli_usage_error(cmd, "--perturb 0.001,0.01,0.1 (or none)",
                                       "bad --perturb '%s': up to %d comma-separated numbers >= 0",
                                       v, MAX_EPS);
        } else {
            return cli_usage_error(cmd, hint, "unknown option '%s'", a);
        }
    }
    parity_diag_t diag;
    if (parity_moe_config_check(&c, &diag))
        return cli_usage_error(cmd, "--tokens 4096 --experts 64 --topk 8 --hidden 1024", "%s", diag.msg);
    if (table) {
        if (sa || sb) return cli_usage_error(cmd, "parity moe --table", "--table takes no --a/--b");
        return cmd_table(cmd, &c, eps, neps, json);
    }
    parity_moe_spec_t a, b;
    if (parity_moe_spec_parse(sa ? sa : "", NULL, &a, &diag))
        return cli_usage_error(cmd, hint, "--a: %s", diag.msg);
    if (parity_moe_spec_parse(sb ? sb : "", &a, &b, &diag))
        return cli_usage_error(cmd, hint, "--b: %s", diag.msg);
    return cmd_pair(cmd, &c, &a, &b, eps, neps, max_flip, max_ulp, json);
}

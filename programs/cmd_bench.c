/* `parity bench OP --kernel K...`: check first, then time the kernels on one workload and score
 * the faithful ones against the machine's speed of light and a baseline kernel. Text on stdout,
 * progress on stderr, --json FILE (schema: docs/bench.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/bench.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"

void parity_help_bench(FILE *out)
{
    fprintf(out,
        "usage: parity bench OP --kernel K [--kernel K ...] [options]\n"
        "       parity bench --ceilings [--remeasure]\n\n"
        "Speed, scored only for faithful kernels. First the machine's ceilings (STREAM-like copy\n"
        "and triad bandwidth over arrays 4x the last-level cache, peak fp32/fp64 rate; cached per\n"
        "machine), then `parity check` on every kernel (default: the op's non-production\n"
        "workloads, no noise floor), then each kernel that ran is timed on one workload in a\n"
        "child process: warm-up runs, then N runs with the inputs regenerated (sign-flipped) and\n"
        "the caches scrubbed before each; the median and spread are reported.\n"
        "From the op's cost model (bytes that must move, flops that must happen) comes the\n"
        "speed-of-light time T_SOL = max(bytes / bandwidth, flops / peak); each kernel gets its\n"
        "achieved GB/s and GFLOP/s, the fraction T_SOL / T, and, if faithful, SOL-ExecBench's\n"
        "score S = 1 / (1 + (T - T_SOL) / (T_base - T_SOL)) against the baseline kernel\n"
        "(0.5 = as fast as the baseline, 1 = at the speed of light). Unfaithful kernels are\n"
        "timed but unscored, with the check that failed them.\n"
        "What is timed is judged: each faithful kernel first runs alone at the timed shape\n"
        "(judged against the fp64 reference), and every timed call must return those outputs\n"
        "bit for bit (judged within tolerance if declared nondeterministic); one that does not\n"
        "(work skipped on repeated calls) loses the score and fails the exit code.\n\n"
        "options:\n"
        "  --kernel K          builtin:NAME, builtin:all, PATH.so[:NAME] (as parity check)\n"
        "  --workload W        the timed workload (default: text, else the op's first preset);\n"
        "                      W@NxD[xV] times that preset at another shape\n"
        "  --baseline K        the baseline kernel (default: the op's plain faithful catalog kernel)\n"
        "  --runs N            timed runs per kernel (default 10)\n"
        "  --warmup N          untimed runs first (default 2)\n"
        "  --threads N         threads a kernel may use and the probes use (default: all cores)\n"
        "  --check-full        gate on every workload, production-sized ones too\n"
        "  --check-workload W  gate on workload W only (faster, weaker: a kernel wrong elsewhere\n"
        "                      would be scored)\n"
        "  --no-scrub          do not evict caches between runs\n"
        "  --remeasure         measure the ceilings again (and refresh the cache)\n"
        "  --no-cache          neither read nor write the ceilings cache\n"
        "  --probe-mib N       STREAM arrays of N MiB instead of 4x the last-level cache (tests)\n"
        "  --ceilings          only measure/print the ceilings\n"
        "  --seed S|fresh      inputs and check seed (default 1); fresh: drawn from the OS,\n"
        "                      printed and in the JSON\n"
        "  --timeout SEC       per kernel run in the check, and per kernel timing (default 300)\n"
        "  --json FILE         write the report as JSON (docs/bench.md)\n"
        "  -q, --quiet         no progress on stderr\n\n"
        "cache: $XDG_CACHE_HOME/parity (or ~/.cache/parity), keyed by CPU model, cores, threads.\n"
        "exit: 0 every kernel faithful, 1 a kernel is not faithful, 2 usage error, 3 input/I-O.\n\n"
        "examples:\n"
        "  parity bench embedding_rmsnorm_bwd --kernel builtin:all\n"
        "  parity bench embedding_rmsnorm_bwd --kernel ./libmine.so --json bench.json\n");
}

static void fmt_time(char *b, size_t n, double s)
{
    if (!(s > 0)) snprintf(b, n, "-");
    else if (s < 1e-3) snprintf(b, n, "%.1f us", s * 1e6);
    else if (s < 1) snprintf(b, n, "%.2f ms", s * 1e3);
    else snprintf(b, n, "%.3f s", s);
}

static void fmt_bytes(char *b, size_t n, double x)
{
    if (x >= 1e9) snprintf(b, n, "%.2f GB", x * 1e-9);
    else if (x >= 1e6) snprintf(b, n, "%.1f MB", x * 1e-6);
    else snprintf(b, n, "%.1f kB", x * 1e-3);
}

static void print_ceilings(FILE *f, const parity_ceilings_t *c)
{
    char arr[32];
    fmt_bytes(arr, sizeof arr, (double)c->array_bytes);
    fprintf(f, "machine: %s (%s), %d core(s), probes on %d thread(s), last-level cache %.0f MiB\n",
            c->model, c->device, c->cores, c->threads, (double)c->llc_bytes / (1 << 20));
    fprintf(f, "  bandwidth: copy %.2f GB/s (spread %.0f%%), triad %.2f GB/s (spread %.0f%%), "
            "arrays %s -> ceiling %.2f GB/s\n",
            c->copy_gbs, 100 * c->copy_spread, c->triad_gbs, 100 * c->triad_spread, arr, c->bw_gbs);
    fprintf(f, "  peak: fp32 %.1f GFLOP/s, fp64 %.1f GFLOP/s\n", c->peak_gflops_f32,
            c->peak_gflops_f64);
    if (c->from_cache) fprintf(f, "  (cached: %s; --remeasure to refresh)\n", c->cache_path);
    else if (c->cache_path[0]) fprintf(f, "  (measured in %.1f s, cached in %s)\n", c->seconds, c->cache_path);
    else fprintf(f, "  (measured in %.1f s, not cached)\n", c->seconds);
}

/* Why a faithful, timed kernel has no score: no faithful timed baseline, or a baseline at or
 * under the speed-of-light estimate (its data stayed in a cache larger than the bandwidth probe's
 * arrays: the score's denominator T_base - T_SOL is then not positive). */
static void unscored_why(char *why, size_t n, const parity_bench_result_t *r)
{
    if (r->baseline_row < 0) {
        snprintf(why, n, "no faithful, timed baseline");
        return;
    }
    snprintf(why, n, "the baseline ran at %.0f%% of the speed-of-light estimate (faster than the measured "
             "ceilings allow: its data stayed in cache), so no score", 100.0 * r->t_sol /
             r->rows[r->baseline_row].t_median);
}

static void reproducer(char *b, size_t n, const parity_bench_result_t *r, const parity_bench_row_t *row)
{
    snprintf(b, n, "parity check %s --kernel %s --workload %s --seed %llu", r->op->name,
             row->kr->label, row->verdict_wl[0] ? row->verdict_wl : r->wl.name,
             (unsigned long long)r->seed);
}

static void print_report(FILE *f, const parity_bench_result_t *r)
{
    const parity_cost_t *c = &r->cost;
    fprintf(f, "parity bench %s: workload %s (N=%lld D=%lld V=%lld), seed %llu, %d thread(s), "
            "%d warm-up + %d timed runs\n\n", r->op->name, r->wl.name, (long long)r->n,
            (long long)r->d, (long long)r->v, (unsigned long long)r->seed, r->n_threads, r->warmup,
            r->runs);
    print_ceilings(f, &r->ceil);
    char br[32], bw[32], bt[32], ts[32];
    fmt_bytes(br, sizeof br, c->bytes_read);
    fmt_bytes(bw, sizeof bw, c->bytes_written);
    fmt_bytes(bt, sizeof bt, c->bytes);
    fmt_time(ts, sizeof ts, r->t_sol);
    double tb = c->bytes / (r->ceil.bw_gbs * 1e9), tf = c->flops / (r->ceil.peak_gflops_f32 * 1e9);
    fprintf(f, "cost: %s moved (%s read, %s written), %.1f MFLOP %s -> T_SOL %s (%s-bound)\n",
            bt, br, bw, c->flops * 1e-6, c->flop_dtype, ts, tb >= tf ? "memory" : "compute");
    fprintf(f, "  model: %s\n", c->formula);
    fprintf(f, "check: %s\n\n", r->check_workloads);
    fprintf(f, "%-28s %-11s %10s %7s %8s %8s %7s  %s\n", "kernel", "verdict", "median", "spread",
            "GB/s", "GFLOP/s", "%SOL", "score");
    for (int i = 0; i < r->n_rows; i++) {
        const parity_bench_row_t *row = &r->rows[i];
        char label[64], tm[32], sp[16] = "-", gb[16] = "-", gf[16] = "-", sol[16] = "-";
        snprintf(label, sizeof label, "%.50s%s", row->kr->label, row->is_baseline ? " (base)" : "");
        fmt_time(tm, sizeof tm, row->timed ? row->t_median : NAN);
        if (row->timed) {
            snprintf(sp, sizeof sp, "%.0f%%", 100 * (row->t_worst - row->t_best) / row->t_median);
            snprintf(gb, sizeof gb, "%.2f", row->gbs);
            snprintf(gf, sizeof gf, "%.2f", row->gflops);
            snprintf(sol, sizeof sol, "%.1f%%", 100 * row->frac_sol);
        }
        fprintf(f, "%-28s %-11s %10s %7s %8s %8s %7s  ", label, parity_verdict_name(row->verdict),
                tm, sp, gb, gf, sol);
        if (row->scored) {
            fprintf(f, "%.3f\n", row->score);
        } else if (row->timed_outputs == 0) { /* bench's own judgement of what it timed */
            fprintf(f, "unscored: %s in the bench's judged or timed calls\n",
                    parity_verdict_name(row->verdict));
            fprintf(f, "%-28s   why: %s\n", "", row->check_detail);
        } else if (row->verdict != PARITY_VERDICT_FAITHFUL) {
            char rep[700];
            reproducer(rep, sizeof rep, r, row);
            fprintf(f, "unscored: %s on %s\n", parity_verdict_name(row->verdict),
                    row->verdict_wl[0] ? row->verdict_wl : "?");
            fprintf(f, "%-28s   see: %s\n", "", rep);
        } else if (!row->timed) {
            fprintf(f, "unscored: %s\n", row->time_detail);
        } else {
            char why[160];
            unscored_why(why, sizeof why, r);
            fprintf(f, "unscored: %s\n", why);
        }
    }
    fprintf(f, "\nscore S = 1/(1 + (T - T_SOL)/(T_base - T_SOL)); %%SOL = T_SOL/T; median of %d runs, "
            "spread = (worst - best)/median\n", r->runs);
}

static cJSON *num_or_null(double x)
{
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

static int write_json(const char *path, const parity_bench_result_t *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "parity_bench_version", 1);
    cJSON_AddStringToObject(root, "op", r->op->name);
    cJSON *w = cJSON_AddObjectToObject(root, "workload");
    cJSON_AddStringToObject(w, "name", r->wl.name);
    cJSON_AddNumberToObject(w, "n", (double)r->n);
    cJSON_AddNumberToObject(w, "d", (double)r->d);
    cJSON_AddNumberToObject(w, "v", (double)r->v);
    cJSON_AddNumberToObject(root, "seed", (double)r->seed);
    cJSON_AddNumberToObject(root, "threads", r->n_threads);
    cJSON_AddNumberToObject(root, "warmup", r->warmup);
    cJSON_AddNumberToObject(root, "runs", r->runs);
    const parity_ceilings_t *c = &r->ceil;
    cJSON *ce = cJSON_AddObjectToObject(root, "ceilings");
    cJSON_AddStringToObject(ce, "device", c->device);
    cJSON_AddStringToObject(ce, "model", c->model);
    cJSON_AddNumberToObject(ce, "cores", c->cores);
    cJSON_AddNumberToObject(ce, "threads", c->threads);
    cJSON_AddNumberToObject(ce, "llc_bytes", (double)c->llc_bytes);
    cJSON_AddNumberToObject(ce, "array_bytes", (double)c->array_bytes);
    cJSON_AddItemToObject(ce, "copy_gbs", num_or_null(c->copy_gbs));
    cJSON_AddItemToObject(ce, "triad_gbs", num_or_null(c->triad_gbs));
    cJSON_AddItemToObject(ce, "copy_spread", num_or_null(c->copy_spread));
    cJSON_AddItemToObject(ce, "triad_spread", num_or_null(c->triad_spread));
    cJSON_AddItemToObject(ce, "bw_gbs", num_or_null(c->bw_gbs));
    cJSON_AddItemToObject(ce, "peak_gflops_fp32", num_or_null(c->peak_gflops_f32));
    cJSON_AddItemToObject(ce, "peak_gflops_fp64", num_or_null(c->peak_gflops_f64));
    cJSON_AddBoolToObject(ce, "from_cache", c->from_cache);
    cJSON *co = cJSON_AddObjectToObject(root, "cost");
    cJSON_AddNumberToObject(co, "bytes_read", r->cost.bytes_read);
    cJSON_AddNumberToObject(co, "bytes_written", r->cost.bytes_written);
    cJSON_AddNumberToObject(co, "bytes", r->cost.bytes);
    cJSON_AddNumberToObject(co, "flops", r->cost.flops);
    cJSON_AddStringToObject(co, "flop_dtype", r->cost.flop_dtype ? r->cost.flop_dtype : "fp32");
    cJSON_AddStringToObject(co, "formula", r->cost.formula);
    cJSON_AddItemToObject(root, "t_sol_s", num_or_null(r->t_sol));
    cJSON_AddStringToObject(root, "check_workloads", r->check_workloads);
    if (r->baseline_row >= 0) cJSON_AddStringToObject(root, "baseline", r->rows[r->baseline_row].kr->label);
    else cJSON_AddNullToObject(root, "baseline");
    cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
    for (int i = 0; i < r->n_rows; i++) {
        const parity_bench_row_t *row = &r->rows[i];
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "kernel", row->kr->label);
        cJSON_AddStringToObject(k, "expected", row->kr->k->expected ? row->kr->k->expected : "-");
        cJSON_AddStringToObject(k, "verdict", parity_verdict_name(row->verdict));
        cJSON_AddStringToObject(k, "verdict_workload", row->verdict_wl);
        cJSON_AddStringToObject(k, "check_detail", row->check_detail);
        cJSON_AddBoolToObject(k, "baseline", row->is_baseline);
        cJSON_AddBoolToObject(k, "timed", row->timed);
        if (!row->timed) cJSON_AddStringToObject(k, "time_detail", row->time_detail);
        cJSON_AddStringToObject(k, "timed_outputs", row->timed_outputs > 0    ? "as judged"
                                                    : row->timed_outputs == 0 ? "differ"
                                                                              : "not compared");
        cJSON_AddItemToObject(k, "t_median_s", num_or_null(row->t_median));
        cJSON_AddItemToObject(k, "t_best_s", num_or_null(row->t_best));
        cJSON_AddItemToObject(k, "t_worst_s", num_or_null(row->t_worst));
        cJSON_AddItemToObject(k, "gbs", num_or_null(row->gbs));
        cJSON_AddItemToObject(k, "gflops", num_or_null(row->gflops));
        cJSON_AddItemToObject(k, "frac_sol", num_or_null(row->frac_sol));
        cJSON_AddBoolToObject(k, "scored", row->scored);
        cJSON_AddItemToObject(k, "score", row->scored ? num_or_null(row->score) : cJSON_CreateNull());
        if (!row->scored) {
            char why[800];
            if (row->timed_outputs == 0) {
                snprintf(why, sizeof why, "%s in the bench's judged or timed calls: %s",
                         parity_verdict_name(row->verdict), row->check_detail);
            } else if (row->verdict != PARITY_VERDICT_FAITHFUL) {
                char rep[700];
                reproducer(rep, sizeof rep, r, row);
                snprintf(why, sizeof why, "%s on %s; see: %s", parity_verdict_name(row->verdict),
                         row->verdict_wl, rep);
            } else if (!row->timed) {
                snprintf(why, sizeof why, "%s", row->time_detail);
            } else {
                unscored_why(why, sizeof why, r);
            }
            cJSON_AddStringToObject(k, "unscored_reason", why);
        }
        cJSON_AddItemToArray(ks, k);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return -1;
    FILE *f = fopen(path, "w");
    int rc = -1;
    if (f) {
        rc = fputs(txt, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
        if (fclose(f) != 0) rc = -1;
    }
    free(txt);
    return rc;
}

int parity_cmd_bench(int argc, char **argv)
{
    const char *op_name = NULL, *json = NULL, *kspecs[64];
    int nk = 0, quiet = 0, ceil_only = 0, seed_fresh = 0;
    parity_bench_opts_t o;
    parity_bench_opts_default(&o);
    o.check.timeout_s = 300;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
#define NEED_VAL()                                                                          \
    do {                                                                                    \
        if (!val) return cli_usage_error("bench", NULL, "%s needs a value", a);              \
        i++;                                                                                \
    } while (0)
        long l;
        if (strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0) {
            NEED_VAL();
            if (nk == 64) return cli_usage_error("bench", NULL, "at most 64 --kernel options");
            kspecs[nk++] = val;
        } else if (strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0) {
            NEED_VAL();
            if (o.workload) /* never drop one silently */
                return cli_usage_error("bench", "one run per workload", "--workload given twice ('%s', '%s')",
                                       o.workload, val);
            o.workload = val;
        } else if (strcmp(a, "--baseline") == 0) {
            NEED_VAL();
            o.baseline = val;
        } else if (strcmp(a, "--runs") == 0) {
            NEED_VAL();
            if (cli_parse_long(val, 1, 100000, &l) != 0)
                return cli_usage_error("bench", "--runs 10", "--runs wants 1..100000, got '%s'", val);
            o.time.runs = (int)l;
        } else if (strcmp(a, "--warmup") == 0) {
            NEED_VAL();
            if (cli_parse_long(val, 0, 100000, &l) != 0)
                return cli_usage_error("bench", "--warmup 2", "--warmup wants 0..100000, got '%s'", val);
            o.time.warmup = (int)l;
        } else if (strcmp(a, "--threads") == 0) {
            NEED_VAL();
            if (cli_parse_long(val, 1, 1024, &l) != 0)
                return cli_usage_error("bench", "--threads 2", "--threads wants 1..1024, got '%s'", val);
            o.time.n_threads = (int)l;
        } else if (strcmp(a, "--seed") == 0) {
            NEED_VAL();
            int rc = cli_opt_seed("bench", a, val, &o.seed, &seed_fresh);
            if (rc) return rc;
        } else if (strcmp(a, "--timeout") == 0) {
            NEED_VAL();
            double t;
            if (cli_parse_double(val, &t) != 0 || !(t > 0) || !isfinite(t))
                return cli_usage_error("bench", "--timeout 60", "--timeout wants seconds > 0, got '%s'", val);
            o.check.timeout_s = t;
            o.time.timeout_s = t;
        } else if (strcmp(a, "--json") == 0) {
            NEED_VAL();
            json = val;
        } else if (strcmp(a, "--check-workload") == 0) {
            NEED_VAL();
            o.check.workload = val;
        } else if (strcmp(a, "--probe-mib") == 0) {
            NEED_VAL();
            if (cli_parse_long(val, 1, 1 << 20, &l) != 0)
                return cli_usage_error("bench", "--probe-mib 64", "--probe-mib wants 1..1048576, got '%s'", val);
            o.ceil.array_bytes = (int64_t)l << 20;
        } else if (strcmp(a, "--check-full") == 0) {
            o.check.quick = 0;
        } else if (strcmp(a, "--no-scrub") == 0) {
            o.time.scrub_bytes = -1;
        } else if (strcmp(a, "--remeasure") == 0) {
            o.ceil.remeasure = 1;
        } else if (strcmp(a, "--no-cache") == 0) {
            o.ceil.use_cache = 0;
        } else if (strcmp(a, "--ceilings") == 0) {
            ceil_only = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (a[0] == '-') {
            return cli_usage_error("bench", "parity bench embedding_rmsnorm_bwd --kernel builtin:all",
                                   "unknown option '%s'", a);
        } else if (!op_name) {
            op_name = a;
        } else {
            return cli_usage_error("bench", NULL, "unexpected argument '%s' (one OP per run)", a);
        }
    }
    parity_diag_t diag = {{0}};
    if (ceil_only) {
        parity_ceilings_t c;
        o.ceil.n_threads = o.time.n_threads;
        parity_status_t st = parity_bench_ceilings(&o.ceil, &c, &diag);
        if (st != PARITY_OK) return cli_input_error("bench", "%s", diag.msg);
        print_ceilings(stdout, &c);
        return PARITY_EXIT_OK;
    }
    if (!op_name)
        return cli_usage_error("bench", "parity bench embedding_rmsnorm_bwd --kernel builtin:all",
                               "which op? (list them: parity ops)");
    const parity_op_t *op = parity_op_find(op_name);
    if (!op) return cli_usage_error("bench", "parity ops", "no op '%s'", op_name);
    if (nk == 0) return cli_usage_error("bench", "--kernel builtin:all", "no --kernel given");
    int wrc = 0;
    if (o.workload) wrc = cli_opt_workload("bench", "--workload", op, o.workload, NULL);
    if (!wrc && o.check.workload) wrc = cli_opt_workload("bench", "--check-workload", op, o.check.workload, NULL);
    if (wrc) return wrc;
    parity_kernel_list_t kl = {0};
    for (int i = 0; i < nk; i++) {
        parity_status_t st = parity_kernel_resolve(kspecs[i], op->name, &kl, &diag);
        if (st != PARITY_OK) {
            parity_kernel_list_free(&kl);
            const char *colon = strrchr(kspecs[i], ':'), *slash = strrchr(kspecs[i], '/');
            int named = colon && (!slash || colon > slash);
            if (st == PARITY_E_NOTFOUND && named)
                return cli_usage_error("bench", "parity kernels (lists the catalog)", "%s", diag.msg);
            return cli_input_error("bench", "%s", diag.msg);
        }
    }
    if (!quiet) o.progress = cli_progress_stderr;
    parity_bench_result_t res;
    parity_status_t st = parity_bench_run(op, &kl, &o, &res, &diag);
    if (st != PARITY_OK) {
        parity_bench_result_free(&res);
        parity_kernel_list_free(&kl);
        if (st == PARITY_E_NOTFOUND && o.baseline)
            return cli_usage_error("bench", "--baseline builtin:fp32_seq", "%s", diag.msg);
        if (st == PARITY_E_NOTFOUND)
            return cli_usage_error("bench", "parity ops", "%s", diag.msg[0] ? diag.msg : "not found");
        return cli_input_error("bench", "%s", diag.msg[0] ? diag.msg : parity_status_str(st));
    }
    if (seed_fresh)
        printf("seed %llu drawn by --seed fresh (--seed %llu replays these inputs)\n",
               (unsigned long long)o.seed, (unsigned long long)o.seed);
    print_report(stdout, &res);
    int rc = PARITY_EXIT_OK;
    for (int i = 0; i < res.n_rows; i++)
        if (res.rows[i].verdict != PARITY_VERDICT_FAITHFUL) rc = PARITY_EXIT_VERDICT;
    if (json && write_json(json, &res) != 0)
        rc = cli_input_error("bench", "%s: cannot write the JSON report", json);
    parity_bench_result_free(&res);
    parity_kernel_list_free(&kl);
    return rc;
}

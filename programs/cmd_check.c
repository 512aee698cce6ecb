/* `parity check OP --kernel K...`: is each kernel faithful to OP's fp64 reference on realistic
 * workloads? Text report on stdout, progress on stderr, --json for CI. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_mpi.h"
#include "parity/report.h"
#include "cli.h"
#include "parity/custom_op.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/verify.h"

void parity_help_check(FILE *out)
{
    fprintf(out,
        "usage: parity check OP --kernel K [--kernel K ...] [options]\n\n"
        "Runs each candidate kernel K on OP's workloads (uniform, Zipf and real-text token ids,\n"
        "gradient-scale values, outlier channels, sparse exact values and magnitude stress from\n"
        "subnormals to near overflow (docs/workloads.md), odd and production shapes), compares every\n"
        "output element with an fp64 reference, and judges it against a tolerance derived from\n"
        "the error model (terms per output, fp32 accumulation): no '99%% of elements' slack.\n"
        "Each run happens in a child process: crashes, hangs, out-of-bounds writes, modified\n"
        "inputs and nondeterminism get verdicts, the report always completes. Before the judged\n"
        "call the child calls the kernel on a decoy and on the judged buffers holding other\n"
        "contents, and a sequence at shapes N-1, N, N+1 runs in one process: a kernel that\n"
        "returns an earlier call's answer is 'stale-cache' (docs/check-json.md).\n\n"
        "kernels:\n"
        "  builtin:NAME        a catalog kernel (list: parity kernels OP)\n"
        "  builtin:all         every catalog kernel of OP (faithful variants and mutants)\n"
        "  PATH.so[:NAME]      kernels from a plugin (docs/plugins.md)\n"
        "  --op-plugin FILE.so an op FILE.so declares (op_abi.h): OP optional, kernels default to\n"
        "                      FILE.so's own (docs/custom-ops.md, \"In C\")\n\n"
        "options:\n"
        "  --workload W        one workload preset (list: parity ops OP), or W@NxD[xV] for that\n"
        "                      preset at another shape; default: all presets\n"
        "  --shape NxD[xV]     run the presets at your shape, and at (N+1)x(D+1) and (N-1)x(D-1)\n"
        "                      too (kernels tuned to one shape fail the neighbours)\n"
        "  --quick             skip production-sized workloads\n"
        "  --seed S|fresh      every random choice flows from S (default 1); fresh: a seed\n"
        "                      drawn from the OS, printed and in the JSON (--seed S replays it)\n"
        "  --baselines         also judge with other verifiers' rules and print the detection matrix\n"
        "  --json FILE         write the report as JSON (schema: docs/check-json.md)\n"
        "  --timeout SEC       per kernel run (default 120)\n"
        "  --no-floor          skip measuring the faithful variants' spread (the noise floor)\n"
        "  --threads N         threads a kernel may use (passed in the call; default 1); the\n"
        "                      floor's own variants use every core (their bits do not depend on it)\n"
        "  --jobs N            run the grid (floors, kernel x workload, baselines) in N worker\n"
        "                      processes; 0 (the default): one per core this process may use\n"
        "                      (1 per rank under MPI). Same report for any N\n"
        "  --cache DIR         keep noise floors in DIR (default $XDG_CACHE_HOME/parity, else\n"
        "                      ~/.cache/parity); a floor never changes a verdict\n"
        "  --no-cache          neither read nor write the floor cache\n"
        "  --diagnose          diagnose workloads a kernel passes too (default: failing ones)\n"
        "  -q, --quiet         no progress on stderr\n\n"
        "Under mpirun or srun (Open MPI), the ranks split the grid and rank 0 writes the report,\n"
        "byte-identical to one process's (docs/check-speed.md).\n\n"
        "exit: 0 all kernels faithful, 1 a verdict failed, 2 usage error, 3 input/I-O error.\n\n"
        "examples:\n"
        "  parity check embedding_rmsnorm_bwd --kernel builtin:all --baselines --quick\n"
        "  parity check embedding_rmsnorm_bwd --kernel builtin:bf16_accum --workload text\n"
        "  parity check embedding_rmsnorm_bwd --kernel ./libmine.so --json report.json\n");
}

/* The cores this process may run on: its affinity mask (taskset, srun -c, a container's cpuset),
 * else the online cores; 1..256. What --jobs 0 and the default use. */
static int check_cores(void)
{
    long c = -1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) c = CPU_COUNT(&set);
    if (c < 1) c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > 256 ? 256 : (int)c;
}

/* --op-plugin FILE.so: the op `name` the plugin declares (NULL: its only one) as the engine's op
 * (src/custom/custom_engine.c), judged like a built-in op but for the noise floor (a declared op
 * has no catalog: its floor is in its tolerances). Without --kernel, the plugin's own kernels of
 * the op; a bare NAME is one of them. 0, or the exit code of the error. */
static int declared_op(const char *plugin, const char *name, parity_custom_op_t **out, parity_check_opts_t *opts,
                       const char **kspecs, int *nk, char (*specbuf)[4200])
{
    parity_diag_t diag = {{0}};
    parity_status_t st = parity_custom_op_load(plugin, name, out, &diag);
    if (st) return st == PARITY_E_NOTFOUND ? cli_usage_error("check", NULL, "%s", diag.msg)
                                           : cli_input_error("check", "%s", diag.msg);
    if (opts->shape_n) {
        parity_custom_op_free(*out);
        return cli_usage_error("check", "--workload NAME (parity ops lists a declared op's workloads only in "
                               "its report)", "--shape does not apply to a declared op: its sizes are declared");
    }
    opts->noise_floor = 0;
    if (*nk == 0) kspecs[(*nk)++] = plugin;
    for (int i = 0; i < *nk; i++)
        if (!strchr(kspecs[i], '/') && !strstr(kspecs[i], ".so") && !strchr(kspecs[i], ':')) {
            snprintf(specbuf[i], 4200, "%s:%s", plugin, kspecs[i]);
            kspecs[i] = specbuf[i];
        }
    return 0;
}

int parity_cmd_check(int argc, char **argv)
{
    const char *op_name = NULL, *json = NULL, *op_plugin = NULL;
    const char *kspecs[64];
    int nk = 0, quiet = 0, seed_fresh = 0, jobs_given = 0;
    parity_check_opts_t opts;
    parity_check_opts_default(&opts);
    parity_check_exec_t exec;
    parity_check_exec_default(&exec);
    const char *cache_dir = NULL;
    int no_cache = 0;
    char cache_buf[4096];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
#define NEED_VAL()                                                                          \
    do {                                                                                    \
        if (!val) return cli_usage_error("check", NULL, "%s needs a value", a);              \
        i++;                                                                                \
    } while (0)
        if (strcmp(a, "--op-plugin") == 0) {
            NEED_VAL();
            op_plugin = val;
        } else if (strcmp(a, "--kernel") == 0 || strcmp(a, "-k") == 0) {
            NEED_VAL();
            if (nk == 64) return cli_usage_error("check", NULL, "at most 64 --kernel options");
            kspecs[nk++] = val;
        } else if (strcmp(a, "--workload") == 0 || strcmp(a, "-w") == 0) {
            NEED_VAL();
            if (opts.workload) /* never drop one silently: check runs one workload or all */
                return cli_usage_error("check", "one run per workload, or no --workload for all of them",
                                       "--workload given twice ('%s', '%s')", opts.workload, val);
            opts.workload = val;
        } else if (strcmp(a, "--seed") == 0) {
            NEED_VAL();
            int rc = cli_opt_seed("check", a, val, &opts.seed, &seed_fresh);
            if (rc) return rc;
        } else if (strcmp(a, "--json") == 0) {
            NEED_VAL();
            json = val;
        } else if (strcmp(a, "--timeout") == 0) {
            NEED_VAL();
            if (cli_parse_double(val, &opts.timeout_s) != 0 || !(opts.timeout_s > 0) || !isfinite(opts.timeout_s))
                return cli_usage_error("check", "--timeout 60", "--timeout wants seconds > 0, got '%s'", val);
        } else if (strcmp(a, "--threads") == 0) {
            NEED_VAL();
            long t;
            if (cli_parse_long(val, 1, 1024, &t) != 0)
                return cli_usage_error("check", "--threads 2", "--threads wants 1..1024, got '%s'", val);
            opts.n_threads = (int)t;
        } else if (strcmp(a, "--jobs") == 0 || strcmp(a, "-j") == 0) {
            NEED_VAL();
            long j;
            if (cli_parse_long(val, 0, 256, &j) != 0)
                return cli_usage_error("check", "--jobs 2", "--jobs wants 0..256, got '%s'", val);
            exec.jobs = j == 0 ? check_cores() : (int)j;
            jobs_given = 1;
        } else if (strcmp(a, "--cache") == 0) {
            NEED_VAL();
            if (!val[0]) return cli_usage_error("check", "--cache ~/.cache/parity", "--cache wants a folder");
            cache_dir = val;
        } else if (strcmp(a, "--no-cache") == 0) {
            no_cache = 1;
        } else if (strcmp(a, "--diagnose") == 0) {
            exec.diagnose_all = 1;
        } else if (strcmp(a, "--shape") == 0) {
            NEED_VAL();
            int64_t dims[3];
            parity_diag_t why;
            int got = cli_parse_shape(val, dims, 2, 3, &why);
            if (got < 0)
                return cli_usage_error("check", "--shape 65536x2048 or --shape 65536x2048x50257", "--shape %s",
                                       why.msg);
            opts.shape_n = dims[0];
            opts.shape_d = dims[1];
            opts.shape_v = got == 3 ? dims[2] : 0;
        } else if (strcmp(a, "--quick") == 0) {
            opts.quick = 1;
        } else if (strcmp(a, "--baselines") == 0) {
            opts.baselines = 1;
        } else if (strcmp(a, "--no-floor") == 0) {
            opts.noise_floor = 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (a[0] == '-') {
            return cli_usage_error("check", "parity check embedding_rmsnorm_bwd --kernel builtin:all",
                                   "unknown option '%s'", a);
        } else if (!op_name) {
            op_name = a;
        } else {
            return cli_usage_error("check", NULL, "unexpected argument '%s' (one OP per run)", a);
        }
    }
    if (!op_name && !op_plugin)
        return cli_usage_error("check", "parity check embedding_rmsnorm_bwd --kernel builtin:all",
                               "which op? (list them: parity ops)");
    if (cache_dir && no_cache)
        return cli_usage_error("check", NULL, "--cache and --no-cache contradict each other");
    parity_custom_op_t *cop = NULL; /* an op a plugin declares (op_abi.h, docs/custom-ops.md) */
    char specbuf[64][4200];
    const parity_op_t *op;
    if (op_plugin) {
        int rc = declared_op(op_plugin, op_name, &cop, &opts, kspecs, &nk, specbuf);
        if (rc) return rc;
        op = parity_custom_op_desc(cop);
        no_cache = 1; /* its reference lives in the plugin, which may change under the same name */
    } else {
        op = parity_op_find(op_name);
        if (!op) return cli_usage_error("check", "parity ops", "no op '%s'", op_name);
    }
    if (nk == 0)
        return cli_usage_error("check", "--kernel builtin:all", "no --kernel given");
    if (opts.workload) {
        int rc = cli_opt_workload("check", "--workload", op, opts.workload, NULL);
        if (rc) return rc;
    }
    parity_kernel_list_t kl = {0};
    parity_diag_t diag = {{0}};
    for (int i = 0; i < nk; i++) {
        parity_status_t st = parity_kernel_resolve(kspecs[i], op->name, &kl, &diag);
        if (st != PARITY_OK) {
            parity_kernel_list_free(&kl);
            /* A name that does not exist (builtin:NAME, lib.so:NAME) is a usage error; a plugin
             * that cannot be loaded or offers nothing for the op is an input error. */
            const char *colon = strrchr(kspecs[i], ':'), *slash = strrchr(kspecs[i], '/');
            int named = colon && (!slash || colon > slash);
            parity_custom_op_free(cop);
            if (st == PARITY_E_NOTFOUND && named)
                return cli_usage_error("check",
                                       strncmp(kspecs[i], "builtin:", 8) == 0
                                           ? "parity kernels (lists the catalog)"
                                           : "--kernel PATH.so (checks every kernel in it)",
                                       "%s", diag.msg);
            return cli_input_error("check", "%s", diag.msg);
        }
    }
    if (!no_cache) {
        if (cache_dir) exec.cache_dir = cache_dir;
        else if (parity_check_cache_default_dir(cache_buf, sizeof cache_buf) == 0) exec.cache_dir = cache_buf;
    }
    /* Under mpirun/srun: this process is one rank of the grid (check_mpi.c). */
    int mpi = check_mpi_begin(&exec);
    if (mpi < 0) {
        parity_kernel_list_free(&kl);
        parity_custom_op_free(cop);
        return cli_input_error("check", "MPI could not be initialised");
    }
    /* Default: one worker per core on one process, as torch uses every core; under MPI one per
     * rank (the launcher places ranks on cores; ranks x cores workers would oversubscribe). The
     * report is the same for any number (docs/check-speed.md). */
    if (!jobs_given) exec.jobs = exec.n_ranks > 1 ? 1 : check_cores();
    int lead = exec.rank == 0; /* the one process that reports */
    if (!quiet && lead) opts.progress = cli_progress_stderr;
    parity_kernel_result_t *res = NULL;
    parity_status_t st = parity_check_run_ex(op, &kl, &opts, &exec, &res, &diag);
    int rc = PARITY_EXIT_OK;
    if (st != PARITY_OK) {
        rc = cli_input_error("check", "%s", diag.msg[0] ? diag.msg : parity_status_str(st));
    } else {
        parity_report_opts_t ctx = {"check", opts.seed, opts.quick, opts.baselines, NULL, NULL, seed_fresh, op_plugin};
        if (lead) parity_report_text(stdout, op, res, kl.n, &ctx);
        for (int k = 0; k < kl.n; k++)
            if (res[k].verdict != PARITY_VERDICT_FAITHFUL) rc = PARITY_EXIT_VERDICT;
        if (lead && json && parity_report_json_write(json, op, res, kl.n, &ctx) != 0)
            rc = cli_input_error("check", "%s: cannot write the JSON report", json);
    }
    parity_check_results_free(res, kl.n);
    parity_kernel_list_free(&kl);
    parity_custom_op_free(cop);
    if (mpi) check_mpi_end(&rc);
    return rc;
}

/* `parity compare OP inputs.safetensors outputs.safetensors`: judge outputs produced anywhere,
 * with the same report and JSON as `parity check`. */
#include <stdlib.h>
#include <string.h>

#include "parity/report.h"
#include "cli.h"
#include "parity/fileflow.h"
#include "src/core/internal.h"

void parity_help_compare(FILE *out)
{
    fprintf(out,
        "usage: parity compare OP INPUTS.safetensors OUTPUTS.safetensors [--json FILE] [--no-floor]\n"
        "                      [-q]\n\n"
        "Judges outputs computed outside parity (PyTorch, Triton, CUDA, ...) on inputs written by\n"
        "`parity gen`: the inputs are regenerated from their metadata and must match byte for\n"
        "byte, so the fp64 reference is the one for exactly those inputs. OUTPUTS holds one tensor\n"
        "per output of OP (names and shapes: `parity ops OP`, or the parity.output.*.shape\n"
        "metadata of INPUTS), all F32, BF16, F16 or F64. The report and JSON are those of\n"
        "`parity check`, with the outputs file as the kernel's name.\n\n"
        "options:\n"
        "  --json FILE   write the report as JSON (schema: docs/check-json.md)\n"
        "  --no-floor    skip measuring the faithful variants' spread (the noise floor)\n"
        "  -q, --quiet   no progress on stderr (as check -q); the report on stdout is unchanged\n\n"
        "exit: 0 faithful, 1 unfaithful, 2 usage error, 3 input error (malformed or modified file,\n"
        "wrong names, shapes or dtypes).\n\n"
        "example:\n"
        "  parity gen embedding_rmsnorm_bwd --workload text --out in.safetensors\n"
        "  python my_kernel.py in.safetensors out.safetensors\n"
        "  parity compare embedding_rmsnorm_bwd in.safetensors out.safetensors --json r.json\n");
}

int parity_cmd_compare(int argc, char **argv)
{
    const char *pos[3] = {0}, *json = NULL;
    int np = 0, quiet = 0;
    parity_check_opts_t opts;
    parity_check_opts_default(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            if (i + 1 >= argc) return cli_usage_error("compare", NULL, "--json needs a value");
            json = argv[++i];
        } else if (!strcmp(a, "--no-floor")) opts.noise_floor = 0;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = 1;
        else if (a[0] == '-' && a[1]) return cli_usage_error("compare", NULL, "unknown option '%s'", a);
        else if (np < 3) pos[np++] = a;
        else return cli_usage_error("compare", NULL, "unexpected argument '%s'", a);
    }
    if (np != 3)
        return cli_usage_error("compare", "parity compare embedding_rmsnorm_bwd in.safetensors out.safetensors",
                               "needs OP, the inputs file and the outputs file");
    const parity_op_t *op = parity_op_find(pos[0]);
    if (!op) return cli_usage_error("compare", "parity ops", "no op '%s'", pos[0]);
    parity_diag_t diag = {{0}};
    parity_case_t *c;
    double t0 = parity_now();
    parity_status_t st = parity_case_load(pos[1], op, &c, &diag);
    if (st != PARITY_OK) return cli_input_error("compare", "%s", diag.msg);
    if (!quiet)
        fprintf(stderr, "%s: inputs regenerated from %s, fp64 reference (N=%lld D=%lld V=%lld) in %.1f s\n",
                c->wl->name, pos[1], (long long)c->wl->n, (long long)c->wl->d, (long long)c->wl->v,
                parity_now() - t0);
    parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
    parity_dtype_t dt;
    st = parity_outputs_load(c, pos[2], outs, &dt, &diag);
    if (st != PARITY_OK) {
        parity_case_free(c);
        return cli_input_error("compare", "%s", diag.msg);
    }
    parity_abi_kernel_t fake = {sizeof fake, pos[2], op->name, "outputs read from a file",
                                0, (int32_t)c->in_dtype, (int32_t)dt, NULL, NULL};
    parity_kernel_ref_t kr = {&fake, "", 0};
    snprintf(kr.label, sizeof kr.label, "%s", pos[2]);
    parity_kernel_result_t res;
    t0 = parity_now();
    st = parity_compare_run(c, outs, &kr, &opts, &res);
    if (!quiet && st == PARITY_OK)
        fprintf(stderr, "  %-14s %-40s %-18s err/tol %.3g (%.2f s%s)\n", c->wl->name, pos[2],
                parity_verdict_name(res.verdict), res.wl[0].max_q, parity_now() - t0,
                opts.noise_floor ? ", with the noise floor" : "");
    int rc = PARITY_EXIT_OK;
    if (st != PARITY_OK) {
        rc = cli_input_error("compare", "%s", parity_status_str(st));
    } else {
        parity_report_opts_t ctx = {"compare", c->seed, 0, 0, pos[1], NULL, 0, NULL};
        parity_report_text(stdout, op, &res, 1, &ctx);
        rc = res.verdict == PARITY_VERDICT_FAITHFUL ? PARITY_EXIT_OK : PARITY_EXIT_VERDICT;
        if (json && parity_report_json_write(json, op, &res, 1, &ctx) != 0)
            rc = cli_input_error("compare", "%s: cannot write the JSON report", json);
    }
    free(res.wl);
    for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(outs[i]);
    parity_case_free(c);
    return rc;
}

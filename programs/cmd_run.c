/* `parity run OP --kernel K --inputs IN --out OUT`: run one kernel (catalog or plugin) on inputs
 * from `parity gen` and save its outputs, e.g. to inspect them or to feed `parity compare`. */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "parity/fileflow.h"

void parity_help_run(FILE *out)
{
    fprintf(out,
        "usage: parity run OP --kernel K --inputs IN.safetensors --out OUT.safetensors [--timeout S]\n\n"
        "Runs kernel K (builtin:NAME or PATH.so[:NAME]) once, in a child process, on inputs written\n"
        "by `parity gen`, and writes its outputs (one tensor per output name) to OUT. No judgement:\n"
        "`parity compare OP IN OUT` judges them.\n\n"
        "options:\n"
        "  --kernel K     builtin:NAME (list: parity kernels OP) or PATH.so[:NAME], one kernel\n"
        "  --inputs IN    inputs written by `parity gen` (the kernel's input dtype: gen --dtype)\n"
        "  --out OUT      where to write the outputs (atomically)\n"
        "  --timeout S    seconds the kernel may run (default 120)\n\n"
        "exit: 0 outputs written, 1 the kernel crashed, hung or misbehaved (nothing written),\n"
        "2 usage error (unknown op or kernel, input dtype the kernel does not take), 3 input/I-O\n"
        "error.\n\n"
        "examples:\n"
        "  parity gen embedding_rmsnorm_bwd --workload text --out in.safetensors\n"
        "  parity run embedding_rmsnorm_bwd --kernel builtin:bf16_accum --inputs in.safetensors \\\n"
        "      --out out.safetensors\n"
        "  parity compare embedding_rmsnorm_bwd in.safetensors out.safetensors\n");
}

int parity_cmd_run(int argc, char **argv)
{
    const char *opn = NULL, *ks = NULL, *inp = NULL, *outp = NULL;
    double timeout = 120;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--kernel") && has) ks = argv[++i];
        else if (!strcmp(a, "--inputs") && has) inp = argv[++i];
        else if (!strcmp(a, "--out") && has) outp = argv[++i];
        else if (!strcmp(a, "--timeout") && has) {
            const char *v = argv[++i];
            if (cli_parse_double(v, &timeout) != 0 || !(timeout > 0) || !isfinite(timeout))
                return cli_usage_error("run", "--timeout 60", "--timeout wants seconds > 0, got '%s'", v);
        } else if (a[0] == '-') return cli_usage_error("run", NULL, "unknown option or missing value: '%s'", a);
        else if (!opn) opn = a;
        else return cli_usage_error("run", NULL, "unexpected argument '%s'", a);
    }
    if (!opn || !ks || !inp || !outp)
        return cli_usage_error("run", "parity run embedding_rmsnorm_bwd --kernel builtin:fp32_seq --inputs in.safetensors --out out.safetensors",
                               "needs OP, --kernel, --inputs and --out");
    const parity_op_t *op = parity_op_find(opn);
    if (!op) return cli_usage_error("run", "parity ops", "no op '%s'", opn);
    parity_diag_t diag = {{0}};
    parity_kernel_list_t kl = {0};
    parity_status_t st = parity_kernel_resolve(ks, op->name, &kl, &diag);
    if (st != PARITY_OK) return st == PARITY_E_NOTFOUND ? cli_usage_error("run", "parity kernels", "%s", diag.msg)
                                                        : cli_input_error("run", "%s", diag.msg);
    if (kl.n != 1) {
        parity_kernel_list_free(&kl);
        return cli_usage_error("run", NULL, "'%s' names %d kernels; name one (PATH.so:NAME)", ks, kl.n);
    }
    parity_case_t *c;
    st = parity_case_load(inp, op, &c, &diag);
    if (st != PARITY_OK) {
        parity_kernel_list_free(&kl);
        return cli_input_error("run", "%s", diag.msg);
    }
    if (kl.items[0].k->in_dtype != (int32_t)c->in_dtype) {
        fprintf(stderr, "parity run: kernel %s takes %s inputs but %s holds %s: regenerate with --dtype %s\n",
                kl.items[0].label, parity_dtype_name((parity_dtype_t)kl.items[0].k->in_dtype), inp,
                parity_dtype_name(c->in_dtype), parity_dtype_name((parity_dtype_t)kl.items[0].k->in_dtype));
        parity_case_free(c);
        parity_kernel_list_free(&kl);
        return PARITY_EXIT_USAGE;
    }
    parity_tensor_t *outs[PARITY_OP_MAX_ARGS] = {0};
    parity_verdict_t v;
    char det[256];
    st = parity_run_kernel(c, &kl.items[0], timeout, outs, &v, det, sizeof det);
    int rc = PARITY_EXIT_OK;
    if (st != PARITY_OK) rc = cli_input_error("run", "%s", parity_status_str(st));
    else if (v != PARITY_VERDICT_NOT_JUDGED) { /* ran: outputs to write, judged by compare */
        fprintf(stderr, "parity run: %s: %s (%s); nothing written\n", kl.items[0].label, parity_verdict_name(v), det);
        rc = PARITY_EXIT_VERDICT;
    } else if ((st = parity_outputs_save(c, outs, outp, &diag)) != PARITY_OK) {
        rc = cli_input_error("run", "%s", diag.msg);
    }
    for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(outs[i]);
    parity_case_free(c);
    parity_kernel_list_free(&kl);
    return rc;
}

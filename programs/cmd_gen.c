/* `parity gen OP --workload W --seed S --out inputs.safetensors`: an op's inputs for any
 * framework's kernel; `parity compare` judges the outputs. */
#include <string.h>

#include "cli.h"
#include "parity/fileflow.h"

void parity_help_gen(FILE *out)
{
    fprintf(out,
        "usage: parity gen OP [--workload W] [--seed S] [--dtype bf16|f32] --out FILE.safetensors\n"
        "                  [--reference REF.safetensors]\n\n"
        "Writes OP's inputs for workload W and seed S to a safetensors file, one tensor per input\n"
        "(names as `parity ops OP` lists them), with metadata naming the op, workload, seed, dtype,\n"
        "attributes (e.g. parity.attr.eps) and the shape each output must have\n"
        "(parity.output.NAME.shape). Run your kernel on them in any framework, save its outputs\n"
        "(one tensor per output name, F32/BF16/F16/F64) and judge them with `parity compare`.\n\n"
        "options:\n"
        "  --workload W   a workload preset of OP (default: the first, see parity ops OP), or\n"
        "                 W@NxD[xV] for that preset at another shape (sizes: decimal digits)\n"
        "  --seed S       a decimal integer (default 1); fresh: drawn from the OS (printed,\n"
        "                 and in the metadata)\n"
        "  --dtype D      dtype of the floating-point inputs: bf16 (default) or f32\n"
        "  --out FILE     where to write (atomically)\n"
        "  --reference F  also write the fp64 reference (atomically): per output NAME a dense F64\n"
        "                 tensor NAME, NAME.sum_abs (sum of |terms| per element) and NAME.sum_up\n"
        "                 (the terms' own condition), the error model's inputs, to cross-check\n"
        "                 parity's reference or compute your own metrics\n\n"
        "example (examples/pytorch/ does the whole round trip):\n"
        "  parity gen embedding_rmsnorm_bwd --workload text --out in.safetensors\n"
        "  python my_kernel.py in.safetensors out.safetensors\n"
        "  parity compare embedding_rmsnorm_bwd in.safetensors out.safetensors\n\n"
        "exit: 0 written, 2 usage error (unknown op or workload, malformed W@NxD, bad seed),\n"
        "3 I/O error.\n");
}

int parity_cmd_gen(int argc, char **argv)
{
    const char *opn = NULL, *wn = NULL, *outp = NULL, *refp = NULL, *dtn = "bf16";
    uint64_t seed = 1;
    int fresh = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "--workload") || !strcmp(a, "--seed") || !strcmp(a, "--dtype") ||
             !strcmp(a, "--out") || !strcmp(a, "--reference")) && !v)
            return cli_usage_error("gen", NULL, "%s needs a value", a);
        if (!strcmp(a, "--workload")) wn = argv[++i];
        else if (!strcmp(a, "--out")) outp = argv[++i];
        else if (!strcmp(a, "--reference")) refp = argv[++i];
        else if (!strcmp(a, "--dtype")) dtn = argv[++i];
        else if (!strcmp(a, "--seed")) {
            int rc = cli_opt_seed("gen", a, argv[++i], &seed, &fresh);
            if (rc) return rc;
        } else if (a[0] == '-') return cli_usage_error("gen", NULL, "unknown option '%s'", a);
        else if (!opn) opn = a;
        else return cli_usage_error("gen", NULL, "unexpected argument '%s'", a);
    }
    if (!opn) return cli_usage_error("gen", "parity gen embedding_rmsnorm_bwd --out in.safetensors", "which op?");
    const parity_op_t *op = parity_op_find(opn);
    if (!op) return cli_usage_error("gen", "parity ops", "no op '%s'", opn);
    if (!outp) return cli_usage_error("gen", "--out inputs.safetensors", "no --out file");
    parity_workload_t wbuf;
    int rc = cli_opt_workload("gen", "--workload", op, wn ? wn : op->presets[0].name, &wbuf);
    if (rc) return rc;
    if (wbuf.label[0]) wbuf.name = wbuf.label;
    const parity_workload_t *wl = &wbuf;
    parity_dtype_t dt;
    if (parity_dtype_from_name(dtn, &dt) != PARITY_OK || (dt != PARITY_DT_BF16 && dt != PARITY_DT_F32))
        return cli_usage_error("gen", "--dtype bf16", "--dtype must be bf16 or f32, got '%s'", dtn);
    parity_diag_t diag = {{0}};
    parity_status_t st = parity_gen_inputs(op, wl, seed, dt, outp, &diag);
    if (st != PARITY_OK) return cli_input_error("gen", "%s", diag.msg[0] ? diag.msg : parity_status_str(st));
    fprintf(stderr, "wrote %s: op %s, workload %s, seed %llu%s, %s inputs\n", outp, op->name, wl->name,
            (unsigned long long)seed, fresh ? " (drawn by --seed fresh)" : "", parity_dtype_name(dt));
    if (refp) {
        parity_case_t *c;
        st = parity_case_build(op, wl, seed, dt, &c, &diag);
        if (st == PARITY_OK) {
            st = parity_case_save_reference(c, refp, &diag);
            parity_case_free(c);
        }
        if (st != PARITY_OK) return cli_input_error("gen", "%s", diag.msg[0] ? diag.msg : parity_status_str(st));
        fprintf(stderr, "wrote %s: the fp64 reference of every output\n", refp);
    }
    return PARITY_EXIT_OK;
}

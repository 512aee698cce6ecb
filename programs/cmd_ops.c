/* `parity ops [OP]`: the op registry, with each op's inputs, outputs, error model and workloads. */
#include <string.h>

#include "cli.h"
#include "parity/op.h"

void parity_help_ops(FILE *out)
{
    fprintf(out, "usage: parity ops [OP [--workloads]]\n\n"
                 "Lists the ops parity can check; with OP, its arguments, error model and workload\n"
                 "presets (the names --workload takes; NAME@NxD or NAME@NxDxV runs a preset at\n"
                 "another shape, N tokens, D hidden size, V vocabulary, in decimal digits).\n\n"
                 "  --workloads   every preset with all of its parameters: the shape, and each field\n"
                 "                of the op family's parameter struct (value schemes as KIND*SCALE,\n"
                 "                token ids, mask, softcap, k, ...), then what each field means\n\n"
                 "exit: 0 listed, 2 usage error (no op OP, more than one OP, an unknown option).\n\n"
                 "examples:\n"
                 "  parity ops                          every op, one line each\n"
                 "  parity ops embedding_rmsnorm_bwd    its inputs, outputs, error model, workloads\n"
                 "  parity ops attention_fwd --workloads   each preset's parameters\n"
                 "  parity check embedding_rmsnorm_bwd --kernel builtin:all --workload text@1024x512\n");
}

/* Every preset of op with its parameters, as its family's field table describes them. */
static int print_workloads(const parity_op_t *op)
{
    const parity_workload_family_t *fam = op->wl_family;
    printf("%s: %d workload presets", op->name, op->n_presets);
    if (fam) printf(" (parameters: %s family)", fam->name);
    printf("\n");
    char buf[2048];
    for (int i = 0; i < op->n_presets; i++) {
        const parity_workload_t *w = &op->presets[i];
        parity_workload_describe(fam, w, 0, buf, sizeof buf);
        printf("  %s%s\n    %s\n    N=%lld D=%lld V=%lld %s\n", w->name,
               w->production ? " [production: skipped by --quick]" : "", w->summary, (long long)w->n,
               (long long)w->d, (long long)w->v, buf);
    }
    if (fam) {
        printf("fields:\n");
        for (int f = 0; f < fam->n_fields; f++)
            printf("  %-15s %s\n", fam->fields[f].name, fam->fields[f].what);
    }
    return PARITY_EXIT_OK;
}

int parity_cmd_ops(int argc, char **argv)
{
    int workloads = 0;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--workloads") == 0) workloads = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("ops", "parity ops attention_fwd --workloads", "unknown option '%s'",
                                   argv[i]);
        else if (name) return cli_usage_error("ops", "parity ops embedding_rmsnorm_bwd", "at most one OP");
        else name = argv[i];
    }
    if (workloads && !name)
        return cli_usage_error("ops", "parity ops attention_fwd --workloads", "--workloads needs an OP");
    if (name) {
        const parity_op_t *op = parity_op_find(name);
        if (!op) return cli_usage_error("ops", "parity ops", "no op '%s'", name);
        if (workloads) return print_workloads(op);
        printf("%s: %s\n  inputs: ", op->name, op->summary);
        for (int i = 0; i < op->n_inputs; i++) printf("%s%s", op->input_names[i], i + 1 < op->n_inputs ? ", " : "\n");
        printf("  outputs: ");
        for (int i = 0; i < op->n_outputs; i++) printf("%s%s", op->output_names[i], i + 1 < op->n_outputs ? ", " : "\n");
        printf("  faithful accumulator: %s\n  error model: %s\n  workloads:\n", op->faithful_accumulator,
               op->error_model);
        /* ids= only where token ids mean something: an integer input (embedding ids, targets)
         * or a preset that draws from non-uniform ids (log_softmax puts its peaks on real text). */
        int uses_ids = 0;
        for (int i = 0; i < op->n_inputs; i++) uses_ids |= !op->input_is_float[i];
        for (int i = 0; i < op->n_presets; i++)
            uses_ids |= parity_workload_has_ids(op->wl_family, op->presets[i].params, PARITY_IDS_ZIPF) ||
                        parity_workload_has_ids(op->wl_family, op->presets[i].params, PARITY_IDS_TEXT);
        for (int i = 0; i < op->n_presets; i++) {
            const parity_workload_t *w = &op->presets[i];
            char ids[24] = "";
            const parity_ids_kind_t kinds[3] = {PARITY_IDS_TEXT, PARITY_IDS_ZIPF, PARITY_IDS_UNIFORM};
            int k = 0;
            while (k < 2 && !parity_workload_has_ids(op->wl_family, w->params, kinds[k])) k++;
            if (uses_ids) snprintf(ids, sizeof ids, "ids=%-7s ", parity_ids_kind_name(kinds[k]));
            printf("    %-12s N=%-6lld D=%-5lld V=%-6lld %s%s%s\n", w->name, (long long)w->n,
                   (long long)w->d, (long long)w->v, ids, w->summary,
                   w->production ? " [skipped by --quick]" : "");
        }
        printf("  each preset's parameters: parity ops %s --workloads\n", op->name);
        return PARITY_EXIT_OK;
    }
    for (int i = 0; i < parity_op_count(); i++)
        printf("%-24s %s\n", parity_op_at(i)->name, parity_op_at(i)->summary);
    return PARITY_EXIT_OK;
}

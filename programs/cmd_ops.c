/* `parity ops [OP]`: the op registry, with each op's inputs, outputs, error model and workloads. */
#include <string.h>

#include "cli.h"
#include "parity/op.h"

void parity_help_ops(FILE *out)
{
    fprintf(out, "usage: parity ops [OP]\n\n"
                 "Lists the ops parity can check; with OP, its arguments, error model and workload\n"
                 "presets (the names --workload takes; NAME@NxD or NAME@NxDxV runs a preset at\n"
                 "another shape, N tokens, D hidden size, V vocabulary, in decimal digits).\n\n"
                 "exit: 0 listed, 2 usage error (no op OP, more than one OP).\n\n"
                 "examples:\n"
                 "  parity ops                          every op, one line each\n"
                 "  parity ops embedding_rmsnorm_bwd    its inputs, outputs, error model, workloads\n"
                 "  parity check embedding_rmsnorm_bwd --kernel builtin:all --workload text@1024x512\n");
}

static const char *ids_name(const parity_workload_t *w)
{
    switch (w->ids) {
    case PARITY_IDS_UNIFORM: return "uniform";
    case PARITY_IDS_ZIPF: return "zipf";
    case PARITY_IDS_TEXT: return "text";
    }
    return "?";
}

int parity_cmd_ops(int argc, char **argv)
{
    if (argc > 2) return cli_usage_error("ops", "parity ops embedding_rmsnorm_bwd", "at most one OP");
    if (argc == 2) {
        const parity_op_t *op = parity_op_find(argv[1]);
        if (!op) return cli_usage_error("ops", "parity ops", "no op '%s'", argv[1]);
        printf("%s: %s\n  inputs: ", op->name, op->summary);
        for (int i = 0; i < op->n_inputs; i++) printf("%s%s", op->input_names[i], i + 1 < op->n_inputs ? ", " : "\n");
        printf("  outputs: ");
        for (int i = 0; i < op->n_outputs; i++) printf("%s%s", op->output_names[i], i + 1 < op->n_outputs ? ", " : "\n");
        printf("  faithful accumulator: %s\n  error model: %s\n  workloads:\n", op->faithful_accumulator, op->error_model);
        /* ids= only where token ids mean something: an integer input (embedding ids, targets)
         * or a preset that draws from non-uniform ids (log_softmax puts its peaks on real text). */
        int uses_ids = 0;
        for (int i = 0; i < op->n_inputs; i++) uses_ids |= !op->input_is_float[i];
        for (int i = 0; i < op->n_presets; i++) uses_ids |= op->presets[i].ids != PARITY_IDS_UNIFORM;
        for (int i = 0; i < op->n_presets; i++) {
            const parity_workload_t *w = &op->presets[i];
            char ids[24] = "";
            if (uses_ids) snprintf(ids, sizeof ids, "ids=%-7s ", ids_name(w));
            printf("    %-12s N=%-6lld D=%-5lld V=%-6lld %s%s%s\n", w->name, (long long)w->n,
                   (long long)w->d, (long long)w->v, ids, w->summary,
                   w->production ? " [skipped by --quick]" : "");
        }
        return PARITY_EXIT_OK;
    }
    for (int i = 0; i < parity_op_count(); i++)
        printf("%-24s %s\n", parity_op_at(i)->name, parity_op_at(i)->summary);
    return PARITY_EXIT_OK;
}

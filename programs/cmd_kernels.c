/* `parity kernels [OP]`: the built-in catalog with each kernel's expected verdict. */
#include <string.h>

#include "cli.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/tensor.h"

void parity_help_kernels(FILE *out)
{
    fprintf(out, "usage: parity kernels [OP]\n\n"
                 "Lists the built-in catalog: faithful variants and mutants that model real bugs,\n"
                 "each with the verdict it is known to deserve, its input and output dtypes and\n"
                 "what it does. Use them as builtin:NAME (builtin:all: every kernel of the op).\n\n"
                 "exit: 0 listed, 2 usage error (no op OP, more than one OP).\n\n"
                 "examples:\n"
                 "  parity kernels                          the whole catalog, grouped by op\n"
                 "  parity kernels embedding_rmsnorm_bwd    one op's kernels (bf16_accum: the incident)\n"
                 "  parity check embedding_rmsnorm_bwd --kernel builtin:bf16_accum --workload text\n");
}

int parity_cmd_kernels(int argc, char **argv)
{
    if (argc > 2) return cli_usage_error("kernels", "parity kernels embedding_rmsnorm_bwd", "at most one OP");
    if (argc == 2 && !parity_op_find(argv[1]))
        return cli_usage_error("kernels", "parity ops", "no op '%s'", argv[1]);
    const char *last = "";
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (argc == 2 && strcmp(k->op, argv[1]) != 0) continue;
        if (strcmp(k->op, last) != 0) {
            printf("%s%s:\n", last[0] ? "\n" : "", k->op);
            last = k->op;
        }
        printf("  builtin:%-18s %-10s %s->%s  %s\n", k->name, k->expected,
               parity_dtype_name((parity_dtype_t)k->in_dtype),
               parity_dtype_name((parity_dtype_t)k->out_dtype), k->description);
    }
    return PARITY_EXIT_OK;
}

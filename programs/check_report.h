/* Text and JSON reports of a check run (shared by `parity check` and `parity compare`). */
#ifndef PARITY_CHECK_REPORT_H
#define PARITY_CHECK_REPORT_H

#include <stdio.h>

#include "parity/verify.h"

typedef struct {
    const char *command; /* "check" or "compare": how the reproducer line starts */
    uint64_t seed;
    int quick;
    int baselines;
    const char *inputs_path; /* compare: the inputs file (the reproducer names it) */
    const char *reproduce;   /* when set, the reproducer line verbatim (the Python package's
                                parity.check(...) call); NULL: the CLI's command line */
    int seed_fresh;          /* the seed was drawn by --seed fresh: the text report says so */
} check_report_ctx_t;

void check_report_text(FILE *out, const parity_op_t *op, const parity_kernel_result_t *res, int n,
                       const check_report_ctx_t *ctx);
/* Returns 0 on success, -1 if the file cannot be written (nothing half-written is left). */
int check_report_json(const char *path, const parity_op_t *op, const parity_kernel_result_t *res,
                      int n, const check_report_ctx_t *ctx);

#endif

/* Reports of a check: the text summary and the JSON (docs/check-json.md) that `parity check`,
 * `parity compare` and the Python package's parity.check / parity.compare print, for built-in
 * and declared ops alike -- one renderer, so the CLI and Python give the same bytes. */
#ifndef PARITY_REPORT_H
#define PARITY_REPORT_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/report.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stdint.h>
#include <stdio.h>

#include "parity/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *command; /* "check" or "compare": how the reproducer line starts */
    uint64_t seed;
    int quick;
    int baselines;
    const char *inputs_path; /* compare: the inputs file (the reproducer names it) */
    const char *reproduce;   /* when set, the reproducer line verbatim (the Python package's
                                parity.check(...) call); NULL: the CLI's command line */
    int seed_fresh;          /* the seed was drawn by --seed fresh: the text report says so */
    const char *op_plugin;   /* a declared op's plugin (--op-plugin): the reproducer names it */
} parity_report_opts_t;

/* The text report of n kernels' results res[0..n) on op, to out. */
void parity_report_text(FILE *out, const parity_op_t *op, const parity_kernel_result_t *res, int n,
                        const parity_report_opts_t *opts);
/* The JSON report written to path through a temporary file and a rename (nothing half-written
 * is left). 0, or -1 when the file cannot be written. */
int parity_report_json_write(const char *path, const parity_op_t *op, const parity_kernel_result_t *res, int n,
                             const parity_report_opts_t *opts);
/* The same JSON as a string, the file's bytes (malloc'd: free() it); NULL without memory. */
char *parity_report_json(const parity_op_t *op, const parity_kernel_result_t *res, int n,
                         const parity_report_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif

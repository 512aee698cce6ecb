/* The `parity compare` targets (fuzz_compare_inputs.c, fuzz_compare_outputs.c): the small case
 * both use, rmsnorm_fwd on a 4 x 8 workload, whose reference builds in microseconds. */
#ifndef PARITY_FUZZ_COMPARE_H
#define PARITY_FUZZ_COMPARE_H

#include <stdlib.h>

#include "fuzz_file.h"
#include "parity/fileflow.h"
#include "parity/op.h"
#include "parity/safetensors.h"
#include "parity/tensor.h"

#define FUZZ_OP "rmsnorm_fwd"
#define FUZZ_WORKLOAD "unit@4x8x1" /* (V = 1: "unit@4x8" is refused, V defaulting to the preset's 0) */

/* The case's inputs file as `parity gen` writes it, in slot `slot` (for the seeds and for
 * fuzz_compare_outputs' case). */
static const char *fuzz_compare_gen(int slot)
{
    const parity_op_t *op = parity_op_find(FUZZ_OP);
    static parity_workload_t wl;
    parity_diag_t d;
    if (!op || parity_op_workload(op, FUZZ_WORKLOAD, &wl) != PARITY_OK) abort();
    wl.name = wl.label;
    const char *p = fuzz_path(slot, "in.safetensors");
    if (parity_gen_inputs(op, &wl, 1, PARITY_DT_BF16, p, &d) != PARITY_OK) abort();
    return p;
}

#endif

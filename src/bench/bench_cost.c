/* Cost models: per op, the bytes that must move and the floating-point operations that must
 * happen for one invocation at a given shape. They are lower bounds on work (compulsory traffic,
 * the faithful computation with every reusable product reused), so bytes / bandwidth and
 * flops / peak are lower bounds on time: the speed of light. docs/bench.md derives each line.
 * Deliberately not here: the ceilings (bench_ceil.c) and timing (bench.c). */
#include "parity/bench.h"

#include <stdio.h>
#include <string.h>

#include "parity/tensor.h"
#include "src/op/registry.h"

/* The cost model of the op named op (ops/<family>/cost.c, through ops/registry.c), or NULL. */
static const parity_cost_model_t *find_cost(const char *op)
{
    for (int i = 0; op && i < parity_registry_op_count(); i++)
        if (strcmp(parity_registry_op(i)->name, op) == 0) return parity_registry_op(i)->cost;
    return NULL;
}

static parity_status_t cost_at(const parity_cost_model_t *m, int64_t n, int64_t d, int64_t v,
                               parity_dtype_t in_dt, parity_dtype_t out_dt,
                               const parity_abi_call_t *call, parity_cost_t *out)
{
    if (n < 0 || d < 0 || v < 0) return PARITY_E_INVALID;
    size_t bi = parity_dtype_size(in_dt), bo = parity_dtype_size(out_dt);
    if (bi == 0 || bo == 0) return PARITY_E_INVALID;
    memset(out, 0, sizeof *out);
    m->fn((double)n, (double)d, (double)v, (double)bi, (double)bo, call, out);
    out->bytes = out->bytes_read + out->bytes_written;
    out->flop_dtype = "fp32";
    return PARITY_OK;
}

parity_status_t parity_bench_cost_shape(const char *op, int64_t n, int64_t d, int64_t v,
                                        parity_dtype_t in_dt, parity_dtype_t out_dt,
                                        parity_cost_t *out)
{
    if (!op || !out || n < 0 || d < 0 || v < 0) return PARITY_E_INVALID;
    const parity_cost_model_t *m = find_cost(op);
    if (!m) return PARITY_E_NOTFOUND;
    return cost_at(m, n, d, v, in_dt, out_dt, NULL, out);
}

parity_status_t parity_bench_cost_call(const parity_abi_call_t *call, parity_cost_t *out)
{
    if (!call || !out || !call->op) return PARITY_E_INVALID;
    const parity_cost_model_t *e = find_cost(call->op);
    if (!e) return PARITY_E_NOTFOUND;
    if (e->n_in >= call->n_inputs || e->d_in >= call->n_inputs || e->v_in >= call->n_inputs ||
        e->v_out >= call->n_outputs || call->n_outputs < 1)
        return PARITY_E_INVALID;
    const parity_abi_tensor_t *tn = &call->inputs[e->n_in], *td = &call->inputs[e->d_in];
    if (tn->ndim <= e->n_axis || td->ndim <= e->d_axis || td->ndim < 2) return PARITY_E_INVALID;
    int64_t n = tn->shape[e->n_axis], d = td->shape[e->d_axis], v = 0;
    if (e->v_out >= 0 && call->outputs[e->v_out].ndim > e->v_axis)
        v = call->outputs[e->v_out].shape[e->v_axis];
    if (e->v_in >= 0 && call->inputs[e->v_in].ndim > e->v_axis) v = call->inputs[e->v_in].shape[e->v_axis];
    /* The floating-point input dtype is the D-carrying input's; the output's is output 0's. */
    return cost_at(e, n, d, v, (parity_dtype_t)td->dtype, (parity_dtype_t)call->outputs[0].dtype,
                   call, out);
}

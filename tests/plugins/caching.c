/* Test plugin: kernels for embedding_rmsnorm_bwd that answer from a memo instead of computing,
 * one per caching strategy parity must catch (tests/cli_caching.sh asserts "stale-cache"), and
 * kernels that skip work on repeated calls (tests/cli_bench.sh: parity bench must not score
 * them). Every kernel computes faithfully when it does compute. Includes only the ABI header and
 * the C library. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"
#include "plugin_fused.h"

/* A one-entry memo of the outputs. */
static float *memo_dE, *memo_dg;
static int64_t memo_ne, memo_d;

static void memo_store(const parity_abi_call_t *call)
{
    int64_t ne = call->outputs[0].shape[0] * call->outputs[0].shape[1], d = call->outputs[1].shape[0];
    free(memo_dE);
    free(memo_dg);
    memo_dE = malloc((size_t)ne * sizeof(float));
    memo_dg = malloc((size_t)d * sizeof(float));
    memo_ne = ne;
    memo_d = d;
    if (memo_dE) memcpy(memo_dE, call->outputs[0].data, (size_t)ne * sizeof(float));
    if (memo_dg) memcpy(memo_dg, call->outputs[1].data, (size_t)d * sizeof(float));
}

static int memo_load(const parity_abi_call_t *call)
{
    int64_t ne = call->outputs[0].shape[0] * call->outputs[0].shape[1], d = call->outputs[1].shape[0];
    if (!memo_dE || !memo_dg || ne != memo_ne || d != memo_d) return 0;
    memcpy(call->outputs[0].data, memo_dE, (size_t)ne * sizeof(float));
    memcpy(call->outputs[1].data, memo_dg, (size_t)d * sizeof(float));
    return 1;
}

/* Memo keyed on the input and output pointers: "same buffers, same answer". */
static const void *key_ptr[2];
static int k_memo_pointer(const parity_abi_call_t *call)
{
    if (key_ptr[0] == call->inputs[0].data && key_ptr[1] == call->outputs[0].data && memo_load(call))
        return PARITY_KERNEL_OK;
    int rc = compute(call, call->outputs[0].shape[0]);
    key_ptr[0] = call->inputs[0].data;
    key_ptr[1] = call->outputs[0].data;
    memo_store(call);
    return rc;
}

/* Memo keyed on the shapes (N, D, V): an autotuner's cache that keeps results, not plans. */
static int64_t key_shape[3] = {-1, -1, -1};
static int k_memo_shape(const parity_abi_call_t *call)
{
    int64_t n = call->inputs[0].shape[0], d = call->inputs[0].shape[1], v = call->outputs[0].shape[0];
    if (key_shape[0] == n && key_shape[1] == d && key_shape[2] == v && memo_load(call))
        return PARITY_KERNEL_OK;
    int rc = compute(call, call->outputs[0].shape[0]);
    key_shape[0] = n;
    key_shape[1] = d;
    key_shape[2] = v;
    memo_store(call);
    return rc;
}

/* Memo keyed on a fingerprint: FNV-1a of the first 64 bytes of every input, and the shapes. */
static uint64_t key_bytes;
static int have_key_bytes;
static int k_memo_first_bytes(const parity_abi_call_t *call)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < call->n_inputs; i++) {
        const parity_abi_tensor_t *t = &call->inputs[i];
        int64_t ne = 1;
        for (int j = 0; j < t->ndim; j++) ne *= t->shape[j];
        size_t es = t->dtype == PARITY_DT_BF16 ? 2 : 4, nb = (size_t)ne * es;
        const unsigned char *p = t->data;
        for (size_t b = 0; b < nb && b < 64; b++) h = (h ^ p[b]) * 0x100000001b3ULL;
        h = (h ^ (uint64_t)ne) * 0x100000001b3ULL;
    }
    if (have_key_bytes && key_bytes == h && memo_load(call)) return PARITY_KERNEL_OK;
    int rc = compute(call, call->outputs[0].shape[0]);
    key_bytes = h;
    have_key_bytes = 1;
    memo_store(call);
    return rc;
}

/* A plan cache across neighbouring shapes: the first call fixes the number of token rows the
 * plan covers, and a later call within 2 tokens of it (same D) reuses the plan, so the tokens
 * beyond it are never scattered. Correct whenever N repeats, as in a check of one shape. */
static int64_t plan_n = -1, plan_d = -1;
static int k_plan_neighbours(const parity_abi_call_t *call)
{
    int64_t n = call->inputs[0].shape[0], d = call->inputs[0].shape[1];
    if (plan_n < 0 || d != plan_d || llabs(n - plan_n) > 2) {
        plan_n = n;
        plan_d = d;
    }
    parity_abi_call_t c2 = *call;
    parity_abi_tensor_t in[4];
    for (int i = 0; i < 4 && i < call->n_inputs; i++) in[i] = call->inputs[i];
    int64_t rows = n < plan_n ? n : plan_n;
    in[0].shape[0] = rows; /* dy, x and ids viewed as the plan's rows */
    in[1].shape[0] = rows;
    in[3].shape[0] = rows;
    c2.inputs = in;
    return compute(&c2, call->outputs[0].shape[0]);
}

/* Work skipped on repeated calls: correct on the first call of a process, then returns at once
 * (the outputs keep whatever the buffers held). */
static int calls_made;
static int k_skip_repeats(const parity_abi_call_t *call)
{
    if (calls_made++ >= 1) return PARITY_KERNEL_OK;
    return compute(call, call->outputs[0].shape[0]);
}

/* Memo keyed on the output pointer alone: "this buffer already holds its answer". The decoy
 * writes into the judged buffers, so this memo sees a hit on the call after it. */
static const void *key_out;
static int k_memo_out_pointer(const parity_abi_call_t *call)
{
    if (key_out == call->outputs[0].data && memo_load(call)) return PARITY_KERNEL_OK;
    int rc = compute(call, call->outputs[0].shape[0]);
    key_out = call->outputs[0].data;
    memo_store(call);
    return rc;
}

/* Correct on the first two calls of a process: the rerun's child makes three (decoy, the call
 * on the judged buffers, the judged call). */
static int calls_made2;
static int k_skip_after_2(const parity_abi_call_t *call)
{
    if (calls_made2++ >= 2) return PARITY_KERNEL_OK;
    return compute(call, call->outputs[0].shape[0]);
}

/* The same after three calls: every child of a check makes at most three, a benchmark's timing
 * loop makes more. */
static int calls_made3;
static int k_skip_after_3(const parity_abi_call_t *call)
{
    if (calls_made3++ >= 3) return PARITY_KERNEL_OK;
    return compute(call, call->outputs[0].shape[0]);
}

static int k_control(const parity_abi_call_t *call) { return compute(call, call->outputs[0].shape[0]); }

#define OP "embedding_rmsnorm_bwd"
#define K(name, desc, fn) \
    {sizeof(parity_abi_kernel_t), name, OP, desc, 0, PARITY_DT_BF16, PARITY_DT_F32, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("control", "faithful fp32 kernel (control)", k_control),
    K("memo_pointer", "returns the outputs memoized for the same input/output pointers", k_memo_pointer),
    K("memo_shape", "returns the outputs memoized for the same shapes", k_memo_shape),
    K("memo_out_pointer", "returns the outputs memoized for the same output pointer", k_memo_out_pointer),
    K("skip_after_2", "computes on the first two calls of a process, then returns at once", k_skip_after_2),
    K("memo_first_bytes", "returns the outputs memoized for the same first 64 bytes of each input",
      k_memo_first_bytes),
    K("plan_neighbours", "reuses the first call's row plan for shapes within 2 tokens of it",
      k_plan_neighbours),
    K("skip_repeats", "computes on the first call of a process, does nothing after", k_skip_repeats),
    K("skip_after_3", "computes on the first three calls of a process, does nothing after",
      k_skip_after_3),
};

static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t),
                                           "parity_test_caching",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

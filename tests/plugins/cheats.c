/* Test plugin: kernels for embedding_rmsnorm_bwd that crash, hang, cheat or break the ABI
 * contract, one per verdict parity must give. tests/cli_plugins.sh asserts the verdicts.
 * Includes only the ABI header and the C library (plus POSIX getpid/clock_gettime). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parity/kernel_abi.h"
#include "plugin_fused.h"

static int64_t dE_elems(const parity_abi_call_t *call)
{
    return call->outputs[0].shape[0] * call->outputs[0].shape[1];
}

static int k_control(const parity_abi_call_t *call) { return compute(call, call->outputs[0].shape[0]); }

static int k_segfault(const parity_abi_call_t *call)
{
    (void)call;
    raise(SIGSEGV); /* what a wild pointer does, without relying on UB */
    return PARITY_KERNEL_OK;
}

static int k_hang(const parity_abi_call_t *call)
{
    (void)call;
    volatile int spin = 1;
    while (spin) {
    }
    return PARITY_KERNEL_OK;
}

static int k_oob(const parity_abi_call_t *call)
{
    int rc = compute(call, call->outputs[0].shape[0]);
    /* 16 floats past the end of dE: inside parity's guard region. */
    ((float *)call->outputs[0].data)[dE_elems(call) + 16] = 1.0f;
    return rc;
}

static int k_modify_dy(const parity_abi_call_t *call)
{
    int rc = compute(call, call->outputs[0].shape[0]);
    /* Scribble on the input after using it (an in-place "optimization"): a whole row of dy
     * becomes bf16/fp32 2.0. */
    const parity_abi_tensor_t *dy = &call->inputs[0];
    for (int64_t j = 0; j < dy->shape[1]; j++) {
        if (dy->dtype == PARITY_DT_BF16) ((uint16_t *)dy->data)[j] = 0x4000u;
        else ((float *)dy->data)[j] = 2.0f;
    }
    return rc;
}

static int k_negate_pair(const parity_abi_call_t *call)
{
    int rc = compute(call, call->outputs[0].shape[0]);
    /* Negates dy's elements 3 and 7 after using it: in bf16 their sign bits are bit 63 of two
     * 8-byte words, the change FNV-1a over words (parity's input hash until December 2026)
     * could not see; in fp32 the sign bits of elements 1 and 3. */
    const parity_abi_tensor_t *dy = &call->inputs[0];
    if (dy->dtype == PARITY_DT_BF16) {
        ((uint16_t *)dy->data)[3] ^= 0x8000u;
        ((uint16_t *)dy->data)[7] ^= 0x8000u;
    } else {
        ((float *)dy->data)[1] = -((float *)dy->data)[1];
        ((float *)dy->data)[3] = -((float *)dy->data)[3];
    }
    return rc;
}

static int k_nondet(const parity_abi_call_t *call)
{
    /* Output bits that depend on the process and the time: each run differs. (A static counter
     * would not do: every run happens in a fresh fork, so a counter always starts at 0.) The
     * perturbation is at most one ulp of a nonzero element, far inside the tolerance (rows no
     * token hits must stay exactly 0). */
    int rc = compute(call, call->outputs[0].shape[0]);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t s = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    uint32_t *bits = (uint32_t *)call->outputs[0].data;
    for (int64_t i = 0; i < dE_elems(call); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((bits[i] & 0x7fffffffu) != 0) bits[i] ^= (uint32_t)(s >> 63); /* keep exact zeros */
    }
    return rc;
}

static int k_partial(const parity_abi_call_t *call)
{
    /* The last row of dE is never written (a tail the launch grid does not cover). */
    return compute(call, call->outputs[0].shape[0] - 1);
}

static int k_unsupported(const parity_abi_call_t *call)
{
    (void)call;
    return PARITY_KERNEL_UNSUPPORTED;
}

static int k_exit3(const parity_abi_call_t *call)
{
    (void)call;
    exit(3);
}

static int k_error(const parity_abi_call_t *call)
{
    (void)call;
    return PARITY_KERNEL_ERROR;
}

/* Computes correctly once, then returns the first call's output forever (a cache keyed on
 * nothing): wrong for any later call with different inputs. */
static float *cache_dE, *cache_dg;
static int k_stale_cache(const parity_abi_call_t *call)
{
    int64_t ne = dE_elems(call), d = call->outputs[1].shape[0];
    if (cache_dE) {
        memcpy(call->outputs[0].data, cache_dE, (size_t)ne * sizeof(float));
        memcpy(call->outputs[1].data, cache_dg, (size_t)d * sizeof(float));
        return PARITY_KERNEL_OK;
    }
    int rc = compute(call, call->outputs[0].shape[0]);
    cache_dE = malloc((size_t)ne * sizeof(float));
    cache_dg = malloc((size_t)d * sizeof(float));
    if (cache_dE && cache_dg) {
        memcpy(cache_dE, call->outputs[0].data, (size_t)ne * sizeof(float));
        memcpy(cache_dg, call->outputs[1].data, (size_t)d * sizeof(float));
    }
    return rc;
}

#define OP "embedding_rmsnorm_bwd"
#define K(name, desc, fn) \
    {sizeof(parity_abi_kernel_t), name, OP, desc, 0, PARITY_DT_BF16, PARITY_DT_F32, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("control", "faithful fp32 kernel (control)", k_control),
    K("segfault", "raises SIGSEGV", k_segfault),
    K("hang", "infinite loop", k_hang),
    K("oob_write", "writes 16 floats past the end of dE", k_oob),
    K("modify_dy", "overwrites a row of dy after using it", k_modify_dy),
    K("negate_pair", "negates two elements of dy after using it", k_negate_pair),
    K("nondet", "output low bits depend on pid and time", k_nondet),
    K("partial_write", "never writes the last row of dE", k_partial),
    K("unsupported", "declines every call", k_unsupported),
    K("exit3", "calls exit(3)", k_exit3),
    K("error", "returns PARITY_KERNEL_ERROR", k_error),
    K("stale_cache", "returns the first call's outputs on every later call", k_stale_cache),
    K("control_after", "faithful fp32 kernel, listed after the cheats", k_control),
};

static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t),
                                           "parity_test_cheats",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

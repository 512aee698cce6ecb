/* Test plugin: built against a future ABI (abi_version 999): parity must refuse it, exit 3. */
#include <stddef.h>

#include "parity/kernel_abi.h"

static int run(const parity_abi_call_t *call)
{
    (void)call;
    return PARITY_KERNEL_OK;
}

static const parity_abi_kernel_t kernels[] = {
    {sizeof(parity_abi_kernel_t), "future", "embedding_rmsnorm_bwd", "from the future", 0,
     PARITY_DT_BF16, PARITY_DT_F32, run, NULL},
};
static const parity_abi_plugin_t plugin = {999u, sizeof(parity_abi_plugin_t), "abi999", 1, kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

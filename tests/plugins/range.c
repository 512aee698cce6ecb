/* Test plugin: gemm kernels whose bugs only the structure-and-range workloads expose
 * (docs/workloads.md). tests/cli_workloads.sh asserts that each passes every older quick
 * workload of gemm and fails the new one named beside it:
 *   zero_break   a sparsity shortcut with `break` for `continue`: stops a row's K loop at the
 *                first exact-zero A element. Dense random inputs have no exact zeros; `exact`
 *                has one in two.
 *   ftz          fp32 accumulation under flush-to-zero and denormals-are-zero (what -ffast-math
 *                or CUDA's -ftz=true give): fails `subnormal`, the documented verdict for FTZ.
 *   fp16_clamp   an "fp16-safe" epilogue that saturates C to +-65504: fails `x64`/`near-max`.
 * All read bf16 A (M,K) and B (K,N), write fp32 C (M,N) and are otherwise the naive sequential
 * fp32 loop, as `control` is. Includes only the ABI header and the C library. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/kernel_abi.h"

enum { MODE_CONTROL, MODE_ZERO_BREAK, MODE_FTZ, MODE_FP16_CLAMP };

static float bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Flush-to-zero of a result (FTZ) or an operand (DAZ): a subnormal becomes a signed zero. */
static float flush(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

static int run(const parity_abi_call_t *call, int mode)
{
    const parity_abi_tensor_t *A = &call->inputs[0], *B = &call->inputs[1];
    parity_abi_tensor_t *C = &call->outputs[0];
    if (call->n_inputs != 2 || A->dtype != PARITY_DT_BF16 || B->dtype != PARITY_DT_BF16 ||
        C->dtype != PARITY_DT_F32 || A->ndim != 2 || B->ndim != 2 || A->shape[1] != B->shape[0])
        return PARITY_KERNEL_UNSUPPORTED;
    int64_t m = A->shape[0], k = A->shape[1], n = B->shape[1];
    const uint16_t *a = (const uint16_t *)A->data, *b = (const uint16_t *)B->data;
    float *c = (float *)C->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t t = 0; t < k; t++) {
                float x = bf16_to_f32(a[i * A->strides[0] + t * A->strides[1]]);
                float y = bf16_to_f32(b[t * B->strides[0] + j * B->strides[1]]);
                if (mode == MODE_ZERO_BREAK && x == 0.0f) break; /* the bug: meant `continue` */
                if (mode == MODE_FTZ) acc = flush(acc + flush(flush(x) * flush(y)));
                else acc += x * y;
            }
            if (mode == MODE_FP16_CLAMP) acc = fminf(fmaxf(acc, -65504.0f), 65504.0f);
            c[i * C->strides[0] + j * C->strides[1]] = acc;
        }
    return PARITY_KERNEL_OK;
}

static int k_control(const parity_abi_call_t *call) { return run(call, MODE_CONTROL); }
static int k_zero_break(const parity_abi_call_t *call) { return run(call, MODE_ZERO_BREAK); }
static int k_ftz(const parity_abi_call_t *call) { return run(call, MODE_FTZ); }
static int k_fp16_clamp(const parity_abi_call_t *call) { return run(call, MODE_FP16_CLAMP); }

#define K(name, desc, fn) \
    {sizeof(parity_abi_kernel_t), name, "gemm", desc, 0, PARITY_DT_BF16, PARITY_DT_F32, fn, NULL}
static const parity_abi_kernel_t kernels[] = {
    K("control", "faithful sequential fp32 loop (control)", k_control),
    K("zero_break", "stops a row's K loop at the first exact-zero A element (break for continue)",
      k_zero_break),
    K("ftz", "fp32 accumulation with flush-to-zero and denormals-are-zero", k_ftz),
    K("fp16_clamp", "fp32 accumulation, C saturated to +-65504 (an fp16-safe epilogue)",
      k_fp16_clamp),
};

static const parity_abi_plugin_t plugin = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t),
                                           "parity_test_range",
                                           (int32_t)(sizeof kernels / sizeof kernels[0]), kernels};

const parity_abi_plugin_t *parity_plugin_entry(void) { return &plugin; }

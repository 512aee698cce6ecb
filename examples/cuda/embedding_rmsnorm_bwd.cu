/* CUDA kernels for `embedding_rmsnorm_bwd`, packaged as a parity plugin: the incident on a GPU.
 *
 * The plugin ABI hands host buffers (parity owns them, guards them, and runs every call in a
 * forked child). Each call here copies the inputs to the device, launches, and copies the
 * outputs back; the copies are part of the call (parity's timings include them).
 *
 *   fp32_atomic     one block per token: RMSNorm backward in fp32, then atomicAdd(float) into an
 *                   fp32 dE and dgamma. Faithful, but the order of the atomics is whatever the
 *                   scheduler gives: declared PARITY_KERNEL_NONDETERMINISTIC.
 *   fp32_segmented  deterministic: dx rows to a scratch buffer, tokens grouped by id (stable
 *                   counting sort on the host), one thread per (row, column) sums its segment in
 *                   token order in fp32; dgamma by one thread per column in token order.
 *   bf16_atomic     THE INCIDENT: the same row kernel, but dx is rounded to bf16 and added with
 *                   atomicAdd(__nv_bfloat16) into a bf16 dE, so every partial sum of a row is a
 *                   bf16 number (8 significant bits). Rows hit by thousands of tokens (frequent
 *                   tokens of real text) lose their small updates.
 *
 * The op (see `parity ops embedding_rmsnorm_bwd`): inputs dy (N,D), x (N,D), gamma (D),
 * ids (N, int32); outputs dE (V,D), dgamma (D); attribute eps. Per row i:
 *   r = 1/sqrt(mean_j x_ij^2 + eps), c = mean_j gamma_j dy_ij x_ij r,
 *   dx_ij = r (gamma_j dy_ij - x_ij r c),  dE[ids[i]] += dx_i,  dgamma_j += dy_ij x_ij r.
 *
 * Without a usable CUDA device every kernel returns PARITY_KERNEL_UNSUPPORTED (verdict
 * "unsupported"), so the plugin loads and reports cleanly on CPU-only machines; where the NVIDIA
 * driver is absent it says so once on stderr when parity loads it.
 *
 * Build: CMake builds it when a CUDA compiler is found (examples/CMakeLists.txt); by hand:
 *   nvcc -O2 -fmad=false -Xcompiler -fPIC -shared -I include -arch=sm_90 \
 *        examples/cuda/embedding_rmsnorm_bwd.cu -o libparity_cuda_example.so
 * (-fmad=false keeps every multiply and add separately rounded, as parity's reference assumes
 * of fp32 kernels; a fused multiply-add only makes a faithful kernel more accurate.) */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parity/kernel_abi.h"

#define THREADS 256

/* ---- device code ---------------------------------------------------------------------------- */

__device__ static float load_in(const void *p, int bf16, int64_t i)
{
    return bf16 ? __bfloat162float(((const __nv_bfloat16 *)p)[i]) : ((const float *)p)[i];
}

/* Sum over the block, in fp32 (a tree: any order is faithful for fp32 accumulation). */
__device__ static float block_sum(float v, float *sh)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float t = 0.0f;
    if (warp == 0) {
        t = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) t += __shfl_down_sync(0xffffffffu, t, off);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    t = sh[0];
    __syncthreads();
    return t;
}

enum { MODE_FP32_ATOMIC = 0, MODE_BF16_ATOMIC = 1, MODE_SCRATCH = 2 };

/* One block per token row. MODE_SCRATCH writes dx and dy*xhat rows to scratch buffers instead
 * of adding them anywhere (the deterministic variant reduces them afterwards). */
__global__ static void row_kernel(const void *dy, const void *x, const void *g, int bf16_in,
                                  const int32_t *ids, int64_t d, float eps, int mode, float *dE32,
                                  __nv_bfloat16 *dE16, float *dgamma, float *dx_out,
                                  float *t_out)
{
    __shared__ float sh[32];
    int64_t i = blockIdx.x;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        float xv = load_in(x, bf16_in, i * d + j);
        ss += xv * xv;
    }
    ss = block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)d + eps);
    float c = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        float xh = load_in(x, bf16_in, i * d + j) * r;
        c += load_in(g, bf16_in, j) * load_in(dy, bf16_in, i * d + j) * xh;
    }
    c = block_sum(c, sh) / (float)d;
    int64_t row = ids[i];
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        float dyv = load_in(dy, bf16_in, i * d + j), xh = load_in(x, bf16_in, i * d + j) * r;
        float dx = r * (load_in(g, bf16_in, j) * dyv - xh * c);
        float t = dyv * xh;
        if (mode == MODE_SCRATCH) {
            dx_out[i * d + j] = dx;
            t_out[i * d + j] = t;
        } else {
            if (mode == MODE_BF16_ATOMIC) atomicAdd(&dE16[row * d + j], __float2bfloat16(dx));
            else atomicAdd(&dE32[row * d + j], dx);
            atomicAdd(&dgamma[j], t);
        }
    }
}

/* Deterministic reduction: thread (u, j) sums dx over the tokens of unique row u in token
 * order; rows without tokens stay at the zero the buffer was cleared to. */
__global__ static void segment_kernel(const float *dx, const int32_t *perm, const int64_t *start,
                                      const int32_t *uniq, int64_t n_uniq, int64_t d, float *dE)
{
    int64_t u = blockIdx.y, j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n_uniq || j >= d) return;
    float s = 0.0f;
    for (int64_t t = start[u]; t < start[u + 1]; t++) s += dx[(int64_t)perm[t] * d + j];
    dE[(int64_t)uniq[u] * d + j] = s;
}

__global__ static void column_kernel(const float *t, int64_t n, int64_t d, float *dgamma)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d) return;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += t[i * d + j];
    dgamma[j] = s;
}

__global__ static void to_bf16(const float *src, __nv_bfloat16 *dst, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2bfloat16(src[i]);
}

/* ---- host side ------------------------------------------------------------------------------ */

static double attr(const parity_abi_call_t *call, const char *name, double dflt)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (strcmp(call->attr_names[i], name) == 0) return call->attr_values[i];
    return dflt;
}

static int contiguous(const parity_abi_tensor_t *t)
{
    int64_t s = 1;
    for (int k = t->ndim - 1; k >= 0; k--) {
        if (t->shape[k] > 1 && t->strides[k] != s) return 0;
        s *= t->shape[k];
    }
    return 1;
}

static size_t elsize(int32_t dt)
{
    return dt == PARITY_DT_F32 || dt == PARITY_DT_I32 ? 4 : dt == PARITY_DT_BF16 ? 2 : 0;
}

/* Device buffers of one call, freed together. */
typedef struct {
    void *p[12];
    int n;
} pool_t;

static void *dalloc(pool_t *pl, size_t bytes)
{
    void *p = NULL;
    if (pl->n >= 12 || cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    pl->p[pl->n++] = p;
    return p;
}

static void pool_free(pool_t *pl)
{
    for (int i = 0; i < pl->n; i++) cudaFree(pl->p[i]);
    pl->n = 0;
}

static int run(const parity_abi_call_t *call, int mode)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return PARITY_KERNEL_UNSUPPORTED;
    if (call->n_inputs < 4 || call->n_outputs < 2) return PARITY_KERNEL_UNSUPPORTED;
    const parity_abi_tensor_t *dy = &call->inputs[0], *x = &call->inputs[1], *g = &call->inputs[2],
                              *ids = &call->inputs[3];
    parity_abi_tensor_t *dE = &call->outputs[0], *dg = &call->outputs[1];
    for (int k = 0; k < 4; k++)
        if (!contiguous(&call->inputs[k])) return PARITY_KERNEL_UNSUPPORTED;
    if (!contiguous(dE) || !contiguous(dg) || dy->ndim != 2 || dE->ndim != 2 ||
        ids->dtype != PARITY_DT_I32 || !elsize(dy->dtype) || !elsize(dE->dtype))
        return PARITY_KERNEL_UNSUPPORTED;
    const int64_t n = dy->shape[0], d = dy->shape[1], v = dE->shape[0];
    const int bf16_in = dy->dtype == PARITY_DT_BF16;
    const size_t in_b = elsize(dy->dtype), out_b = elsize(dE->dtype);
    const int32_t *hid = (const int32_t *)ids->data;
    for (int64_t i = 0; i < n; i++)
        if (hid[i] < 0 || hid[i] >= v) return PARITY_KERNEL_ERROR;

    pool_t pl;
    pl.n = 0;
    int rc = PARITY_KERNEL_ERROR;
    void *ddy = dalloc(&pl, (size_t)(n * d) * in_b), *dx_ = dalloc(&pl, (size_t)(n * d) * in_b);
    void *dgm = dalloc(&pl, (size_t)d * in_b);
    int32_t *did = (int32_t *)dalloc(&pl, (size_t)n * 4);
    float *dE32 = (float *)dalloc(&pl, (size_t)(v * d) * 4), *dg32 = (float *)dalloc(&pl, (size_t)d * 4);
    __nv_bfloat16 *dE16 = NULL;
    if (!ddy || !dx_ || !dgm || !did || !dE32 || !dg32) goto out;
    if (cudaMemcpy(ddy, dy->data, (size_t)(n * d) * in_b, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dx_, x->data, (size_t)(n * d) * in_b, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dgm, g->data, (size_t)d * in_b, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(did, hid, (size_t)n * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemset(dE32, 0, (size_t)(v * d) * 4) != cudaSuccess ||
        cudaMemset(dg32, 0, (size_t)d * 4) != cudaSuccess)
        goto out;

    if (mode == MODE_BF16_ATOMIC) {
        if (!(dE16 = (__nv_bfloat16 *)dalloc(&pl, (size_t)(v * d) * 2)) ||
            cudaMemset(dE16, 0, (size_t)(v * d) * 2) != cudaSuccess)
            goto out;
    }
    if (mode == MODE_SCRATCH) {
        float *sdx = (float *)dalloc(&pl, (size_t)(n * d) * 4), *st = (float *)dalloc(&pl, (size_t)(n * d) * 4);
        if (!sdx || !st) goto out;
        row_kernel<<<(unsigned)n, THREADS>>>(ddy, dx_, dgm, bf16_in, did, d,
                                            (float)attr(call, "eps", 1e-5), MODE_SCRATCH, NULL, NULL,
                                            NULL, sdx, st);
        /* Group tokens by id: a stable counting sort on the host (n ints). */
        int64_t *cnt = (int64_t *)calloc((size_t)v + 1, sizeof *cnt);
        int32_t *perm = (int32_t *)malloc((size_t)n * sizeof *perm);
        int32_t *uniq = (int32_t *)malloc((size_t)(n ? n : 1) * sizeof *uniq);
        int64_t *ustart = (int64_t *)malloc((size_t)(n + 1) * sizeof *ustart);
        if (!cnt || !perm || !uniq || !ustart) {
            free(cnt), free(perm), free(uniq), free(ustart);
            goto out;
        }
        for (int64_t i = 0; i < n; i++) cnt[hid[i] + 1]++;
        int64_t nu = 0;
        for (int64_t r = 0; r < v; r++) {
            if (cnt[r + 1]) {
                uniq[nu] = (int32_t)r;
                ustart[nu++] = cnt[r];
            }
            cnt[r + 1] += cnt[r];
        }
        ustart[nu] = n;
        for (int64_t i = 0; i < n; i++) perm[cnt[hid[i]]++] = (int32_t)i;
        int32_t *dperm = (int32_t *)dalloc(&pl, (size_t)n * 4), *duniq = (int32_t *)dalloc(&pl, (size_t)(nu ? nu : 1) * 4);
        int64_t *dstart = (int64_t *)dalloc(&pl, (size_t)(nu + 1) * 8);
        int ok = dperm && duniq && dstart &&
                 cudaMemcpy(dperm, perm, (size_t)n * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                 cudaMemcpy(duniq, uniq, (size_t)nu * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                 cudaMemcpy(dstart, ustart, (size_t)(nu + 1) * 8, cudaMemcpyHostToDevice) == cudaSuccess;
        free(cnt), free(perm), free(uniq), free(ustart);
        if (!ok) goto out;
        if (nu > 0) {
            dim3 grid((unsigned)((d + THREADS - 1) / THREADS), (unsigned)nu);
            segment_kernel<<<grid, THREADS>>>(sdx, dperm, dstart, duniq, nu, d, dE32);
        }
        column_kernel<<<(unsigned)((d + THREADS - 1) / THREADS), THREADS>>>(st, n, d, dg32);
    } else {
        row_kernel<<<(unsigned)n, THREADS>>>(ddy, dx_, dgm, bf16_in, did, d,
                                            (float)attr(call, "eps", 1e-5), mode, dE32, dE16, dg32,
                                            NULL, NULL);
    }
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) goto out;

    /* Outputs in the declared dtype: the bf16 mutant's dE is already bf16; fp32 results are
     * rounded once when the kernel declares bf16 outputs. */
    if (mode == MODE_BF16_ATOMIC) {
        if (cudaMemcpy(dE->data, dE16, (size_t)(v * d) * 2, cudaMemcpyDeviceToHost) != cudaSuccess) goto out;
    } else if (out_b == 4) {
        if (cudaMemcpy(dE->data, dE32, (size_t)(v * d) * 4, cudaMemcpyDeviceToHost) != cudaSuccess) goto out;
    } else {
        __nv_bfloat16 *t16 = (__nv_bfloat16 *)dalloc(&pl, (size_t)(v * d) * 2);
        if (!t16) goto out;
        to_bf16<<<(unsigned)((v * d + THREADS - 1) / THREADS), THREADS>>>(dE32, t16, v * d);
        if (cudaMemcpy(dE->data, t16, (size_t)(v * d) * 2, cudaMemcpyDeviceToHost) != cudaSuccess) goto out;
    }
    if (out_b == 4) {
        if (cudaMemcpy(dg->data, dg32, (size_t)d * 4, cudaMemcpyDeviceToHost) != cudaSuccess) goto out;
    } else {
        __nv_bfloat16 *t16 = (__nv_bfloat16 *)dalloc(&pl, (size_t)d * 2);
        if (!t16) goto out;
        to_bf16<<<(unsigned)((d + THREADS - 1) / THREADS), THREADS>>>(dg32, t16, d);
        if (cudaMemcpy(dg->data, t16, (size_t)d * 2, cudaMemcpyDeviceToHost) != cudaSuccess) goto out;
    }
    rc = PARITY_KERNEL_OK;
out:
    pool_free(&pl);
    return rc;
}

static int k_fp32_atomic(const parity_abi_call_t *c) { return run(c, MODE_FP32_ATOMIC); }
static int k_fp32_segmented(const parity_abi_call_t *c) { return run(c, MODE_SCRATCH); }
static int k_bf16_atomic(const parity_abi_call_t *c) { return run(c, MODE_BF16_ATOMIC); }

static const parity_abi_kernel_t kernels[] = {
    {sizeof(parity_abi_kernel_t), "fp32_atomic", "embedding_rmsnorm_bwd",
     "CUDA: one block per token, atomicAdd(float) into fp32 dE and dgamma (order varies run to run)",
     PARITY_KERNEL_NONDETERMINISTIC, PARITY_DT_BF16, PARITY_DT_F32, k_fp32_atomic, NULL},
    {sizeof(parity_abi_kernel_t), "fp32_segmented", "embedding_rmsnorm_bwd",
     "CUDA: dx rows to scratch, tokens grouped by id, fp32 segment sums in token order (deterministic)",
     0, PARITY_DT_BF16, PARITY_DT_F32, k_fp32_segmented, NULL},
    {sizeof(parity_abi_kernel_t), "bf16_atomic", "embedding_rmsnorm_bwd",
     "CUDA: atomicAdd(__nv_bfloat16) into a bf16 dE: the incident",
     PARITY_KERNEL_NONDETERMINISTIC, PARITY_DT_BF16, PARITY_DT_BF16, k_bf16_atomic, NULL},
};

static const parity_abi_plugin_t plugin = {
    PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t), "parity_cuda_example",
    (int32_t)(sizeof kernels / sizeof kernels[0]), kernels,
};

/* Called once, in parity's own process, before any kernel runs in its children. Touching CUDA here
 * would initialise the driver before fork() (which CUDA does not survive in the children), so the
 * only question asked is whether the NVIDIA driver's control device exists: where it does not,
 * every kernel will decline, and the user is told why once instead of reading "declined" 45 times. */
extern "C" __attribute__((visibility("default"))) const parity_abi_plugin_t *parity_plugin_entry(void)
{
    static int told = 0;
    if (!told && access("/dev/nvidiactl", F_OK) != 0) {
        fprintf(stderr, "parity_cuda_example: no NVIDIA GPU on this machine (/dev/nvidiactl absent): "
                        "every kernel declines (verdict \"unsupported\"); run it where a GPU is\n");
        told = 1;
    }
    return &plugin;
}

/* Internal: the built-in catalog tables (files under kernels/) that kernel.c lists. */
#ifndef PARITY_KERNEL_IMPL_H
#define PARITY_KERNEL_IMPL_H

#include "parity/format.h"
#include "parity/kernel_abi.h"
#include "parity/tensor.h"

extern const parity_abi_kernel_t parity_catalog_embedding[];
extern const int parity_catalog_embedding_count;
extern const parity_abi_kernel_t parity_catalog_norm[];
extern const int parity_catalog_norm_count;
extern const parity_abi_kernel_t parity_catalog_embedding_fast[];
extern const int parity_catalog_embedding_fast_count;
extern const parity_abi_kernel_t parity_catalog_log_softmax[];
extern const int parity_catalog_log_softmax_count;
extern const parity_abi_kernel_t parity_catalog_moe_router_combine[];
extern const int parity_catalog_moe_router_combine_count;
extern const parity_abi_kernel_t parity_catalog_moe_router_combine_bwd[]; extern const int parity_catalog_moe_router_combine_bwd_count;
extern const parity_abi_kernel_t parity_catalog_gemm[];
extern const int parity_catalog_gemm_count;
extern const parity_abi_kernel_t parity_catalog_attention[];
extern const int parity_catalog_attention_count;

#endif

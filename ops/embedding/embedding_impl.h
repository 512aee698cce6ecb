/* Internal: what the embedding family's two files share (ops/embedding/embedding.c: the fused
 * op and the helpers; ops/embedding/embedding_plain.c: embedding_bwd and embedding_fwd). */
#ifndef PARITY_EMBEDDING_IMPL_H
#define PARITY_EMBEDDING_IMPL_H

#include <stdint.h>
#include <string.h>

#include "ops/ops_impl.h"

/* The family's workload parameters, one struct per op (docs/workloads.md; `parity ops OP
 * --workloads` prints them): the shape is the workload's N tokens, D hidden size, V vocabulary. */
typedef struct {
    parity_ids_t ids;          /* the tokens' ids, over [0, V) */
    parity_vals_t dy;          /* upstream gradient dy (N,D) */
    parity_vals_t x;           /* activations x (N,D) */
    int outliers;              /* outlier channels of x (x.kind PARITY_VALS_OUTLIER) */
    double outlier_factor;     /* their factor */
    parity_gamma_kind_t gamma; /* the norm weight (D) */
} emb_fused_params_t;
typedef struct {
    parity_ids_t ids; /* the tokens' ids, over [0, V) */
    parity_vals_t dy; /* upstream gradient dY (N,D) */
} emb_bwd_params_t;
typedef struct {
    parity_ids_t ids;      /* the tokens' ids, over [0, V) */
    parity_vals_t table;   /* the embedding table E (V,D) */
    int outliers;          /* outlier channels of E (table.kind PARITY_VALS_OUTLIER) */
    double outlier_factor; /* their factor */
} emb_fwd_params_t;
extern const parity_workload_family_t emb_fused_family, emb_bwd_family, emb_fwd_family;

/* The family's catalog tables (kernels.c, kernels_fast.c, kernels_fwd.c). */
extern const parity_abi_kernel_t parity_catalog_embedding[], parity_catalog_embedding_fast[],
    parity_catalog_embedding_fwd[];
extern const int parity_catalog_embedding_count, parity_catalog_embedding_fast_count,
    parity_catalog_embedding_fwd_count;

static inline float bf16_f32(uint16_t b) /* parity_bf16_to_fp32_1, inlined */
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline double elem(const parity_abi_tensor_t *t, int64_t i)
{
    switch (t->dtype) {
    case PARITY_DT_F32: return ((const float *)t->data)[i];
    case PARITY_DT_BF16: return bf16_f32(((const uint16_t *)t->data)[i]);
    case PARITY_DT_F64: return ((const double *)t->data)[i];
    default: return parity_tensor_get(t, i);
    }
}

/* Scatter bookkeeping: which positions feed which vocabulary row (the case's priv). */
typedef struct {
    int64_t n, d, v;
    int32_t *ids;     /* [n] */
    int64_t *hits;    /* [v] */
    int64_t *off;     /* [v + 1] CSR offsets */
    int64_t *pos;     /* [n] positions grouped by id, ascending within a group */
} scatter_t;

void emb_scatter_free(parity_case_t *c);
parity_status_t emb_scatter_build(parity_case_t *c, const int32_t *ids, int64_t n, int64_t d, int64_t v);
/* A sparse (V, D) reference whose rows are vocabulary ids, as output `out`. */
parity_status_t emb_vocab_ref_alloc(parity_case_t *c, int out, const char *name, int with_up);
/* The symmetric class's s_sym: allocated zeroed; its sum of squares to a root at the end. */
parity_status_t emb_sym_alloc(parity_ref_output_t *R);
void emb_sym_finish(parity_ref_output_t *R);
/* Generated inputs: a (rows, cols) matrix row-parallel, the workload's token ids. */
parity_tensor_t *emb_gen_matrix(const char *name, parity_dtype_t dt, int64_t rows, int64_t cols,
                                parity_vals_kind_t kind, double scale, int outliers, double factor,
                                uint64_t seed, uint64_t stream);
parity_tensor_t *emb_gen_ids(const char *name, const parity_workload_t *wl, parity_ids_t ids,
                             uint64_t seed, int64_t n, int64_t v, parity_status_t *st,
                             parity_diag_t *diag);
/* Emulated vocabulary rows (out 0) or, fused, channels (out 1) with accumulator acc. */
parity_status_t emb_scatter_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                    double *dst, int fused);
/* The terms of dE's sums (op.h terms_ref): dy (fused 0) or the fp32 dx of each position. */
parity_status_t emb_scatter_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                      const int64_t *rows, int64_t n_rows, double *sum,
                                      double *abs_sum, double *sq_sum, int fused);

#endif

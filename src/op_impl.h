/* Internal: the ops of the registry and the shared pieces of the embedding / RMSNorm family that
 * both the references and the built-in kernels use. */
#ifndef PARITY_OP_IMPL_H
#define PARITY_OP_IMPL_H

#include <stdint.h>

#include "parity/op.h"

extern const parity_op_t parity_op_embedding_rmsnorm_bwd;
extern const parity_op_t parity_op_embedding_bwd;
extern const parity_op_t parity_op_embedding_fwd;
extern const parity_op_t parity_op_rmsnorm_fwd;
extern const parity_op_t parity_op_rmsnorm_bwd;
extern const parity_op_t parity_op_log_softmax, parity_op_cross_entropy; /* op_log_softmax.c */
/* fp64 reference of one row (op_log_softmax.c); any output pointer may be NULL. */
void parity_ref_log_softmax_row(const double *x, int64_t v, int32_t target, double *logp, double *dlogits, double *loss, double *cond);
extern const parity_op_t parity_op_moe_router_combine; /* op_moe_router_combine.c: its reference row, selection margin and build counts (c->priv) */
void parity_ref_mrc_row(const double *x, const double *y, int64_t e, int64_t d, int k, int renorm, int32_t *sel, double *w, double *gates, double *out, double *cond);
double parity_mrc_margin(const double *x, int64_t e, double t);
typedef struct { int64_t snapped_rows, tied_rows; } parity_mrc_stats_t;
extern const parity_op_t parity_op_moe_router_combine_bwd; /* op_moe_router_combine_bwd.c: its fp64 reference row */ void parity_ref_mrc_bwd_row(const double *x, const double *y, const double *dout, int64_t e, int64_t d, int k, int renorm, int32_t *sel, double *w, double *q, double *g, double *dlog, double *dexp);
/* op_gemm.c: the op; its fp64 reference C (m,n) = A (m,k) . B with B given transposed (n,k),
 * s_abs = sum |a b|; the emulated K-term sum (nearest-even, parity_format_sum's results, fast). */
extern const parity_op_t parity_op_gemm, parity_op_gemm_bwd;
void parity_ref_gemm(const double *a, const double *bt, int64_t m, int64_t k, int64_t n, double *c, double *s_abs);
double parity_gemm_fast_sum(const parity_format_t *f, const double *x, int64_t n, parity_sum_order_t order);
parity_status_t parity_gemm_fast_sum_cols(const parity_format_t *f, const double *x, int64_t k, int64_t n, parity_sum_order_t order, double *out); /* n sums side by side: x (k, n) */
extern const parity_op_t parity_op_attention; /* op_attention.c; fp64 row reference, work: 5k doubles */
extern const parity_op_t parity_op_attention_bwd; /* op_attention_bwd.c; its fp64 reference (one call, any H): */
void parity_ref_attention_bwd(const double *Q, const double *K, const double *V, const double *O, const double *dO, const double *LSE, int64_t H, int64_t T, int64_t dh, double scale, double softcap, int causal, double *dQ, double *dK, double *dV);
parity_status_t parity_attention_gen(const parity_workload_t *wl, uint64_t seed, parity_dtype_t dt, parity_case_t *c, double **Q, double **K, double **V, parity_diag_t *diag);
void parity_ref_attention_row(const double *q, const double *K, const double *V, int64_t k, int64_t dh, double scale, double softcap, double *o, double *lse, double *o_sacc, double *o_sup, double *lse_sup, double *work);

/* RMSNorm's epsilon for every op of the family (as llama2.c / Llama use). */
#define PARITY_RMS_EPS 1e-5

/* Read row i of a (rows, D) float tensor (f32 or bf16 or f16) into fp32 (exact). */
void parity_row_to_f32(const parity_abi_tensor_t *t, int64_t i, float *out);
/* The catalog kernels' output store: element i of a bf16 output gets v rounded to nearest-even,
 * of an f32 one v itself. */
void parity_put_f32(parity_abi_tensor_t *o, int64_t i, float v);
/* Pairwise (tree) fp32 sum of v[0..n): halves split at n/2, 0 for n = 0. */
float parity_pairwise_f32(const float *v, int64_t n);

/* The textbook fp32 RMSNorm backward of one row, as a faithful kernel computes it:
 * sequential fp32 sums, r = 1/sqrtf(mean(x^2) + eps), c = mean(g*dy*xhat),
 * dx_j = r*(g_j*dy_j - xhat_j*c). xhat_dy (optional) receives dy_j*xhat_j (dgamma's terms).
 * ignore_gamma / eps_outside model two mutants (0 for the faithful computation). */
void parity_rms_bwd_row_f32(const float *x, const float *dy, const float *g, int64_t d, float eps,
                            float *dx, float *xhat_dy, int ignore_gamma, int eps_outside);

/* Find the index of an input/output argument of an ABI call by name (-1 if absent). */
int parity_call_input(const parity_abi_call_t *call, const char *name);
int parity_call_output(const parity_abi_call_t *call, const char *name);
double parity_call_attr(const parity_abi_call_t *call, const char *name, double dflt);

/* x[0..n) stored into v's elements [start, start + n), each rounded to v's dtype as
 * parity_tensor_set does (tensor.c). */
void parity_tensor_store_f64(parity_abi_tensor_t *v, int64_t start, const double *x, int64_t n);

#endif

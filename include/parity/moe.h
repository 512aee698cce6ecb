/* Mixture-of-experts routing and combine, emulated bit-exactly: router softmax in fp32 or bf16,
 * top-k with an explicit tie rule, optional renormalisation, and the combine of the K weighted
 * expert outputs (slot or expert-id order; bf16 buffer, bf16 products summed in fp32, fp32
 * products or fp32 FMA accumulation; shared expert before or after), plus an fp64 reference and
 * the routing's fragility under perturbed logits. docs/moe.md says which library does what.
 * Deliberately not here: the expert MLPs themselves (their outputs are a workload), threads,
 * capacity limits / token dropping, grouped (node-limited) routing. */
#ifndef PARITY_MOE_H
#define PARITY_MOE_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/moe.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shape letters, used throughout: T tokens, E experts, K experts per token (top-k), D hidden. */

typedef enum {
    PARITY_MOE_SOFTMAX_FP32 = 0, /* fp32 logits, fp32 arithmetic, fp32 probabilities */
    PARITY_MOE_SOFTMAX_BF16 = 1  /* logits rounded to bf16, fp32 arithmetic inside (as
                                    torch.softmax on a bf16 tensor), probabilities rounded to bf16 */
} parity_moe_softmax_t;

typedef enum {
    PARITY_MOE_TIE_LOWID = 0, /* among equal probabilities the lower expert id ranks first */
    PARITY_MOE_TIE_HIGHID = 1 /* the higher expert id ranks first */
} parity_moe_tie_t;

typedef enum {
    PARITY_MOE_ORDER_EXPERT = 0, /* terms added in ascending expert id (a loop over experts with
                                    index_add_, as Hugging Face's Mixtral/Qwen-MoE blocks) */
    PARITY_MOE_ORDER_SLOT = 1    /* terms added in top-k slot order: descending probability, ties
                                    by the tie rule (fused kernels that sum over the K slots) */
} parity_moe_order_t;

typedef enum {
    PARITY_MOE_COMBINE_BF16BUF = 0,  /* t_j = bf16(w_j * y_j); acc = bf16(acc + t_j) each add */
    PARITY_MOE_COMBINE_BF16PROD = 1, /* t_j = bf16(w_j * y_j); acc = fp32(acc + t_j); one final
                                        bf16 rounding */
    PARITY_MOE_COMBINE_FP32ACC = 2,  /* t_j = fp32(w_j * y_j); acc = fp32(acc + t_j); one final
                                        bf16 rounding */
    PARITY_MOE_COMBINE_FP32FMA = 3   /* acc = fp32(acc + w_j * y_j) with the exact product (an FMA
                                        in an fp32 register); one final bf16 rounding */
} parity_moe_combine_t;

typedef enum {
    PARITY_MOE_SHARED_NONE = 0,   /* no shared expert */
    PARITY_MOE_SHARED_BEFORE = 1, /* the accumulator starts at the shared expert's output s */
    PARITY_MOE_SHARED_AFTER = 2   /* out = bf16(bf16(routed sum) + s) */
} parity_moe_shared_t;

typedef enum {
    PARITY_MOE_W_FP32 = 0, /* routing weights enter the multiply as computed (fp32, or bf16
                              when the softmax is bf16) */
    PARITY_MOE_W_BF16 = 1  /* routing weights are cast to bf16 first (Hugging Face Mixtral's
                              routing_weights.to(hidden_states.dtype)) */
} parity_moe_wfmt_t;

/* One side's routing and combine arithmetic. */
typedef struct {
    parity_moe_softmax_t softmax;
    parity_moe_tie_t tie;
    int renorm;                  /* 1: top-k weights divided by their sum (Mixtral), 0: the raw
                                    probabilities (Switch, Qwen-MoE norm_topk_prob=False) */
    parity_moe_wfmt_t weights;
    parity_moe_order_t order;
    parity_moe_combine_t combine;
    parity_moe_shared_t shared;
} parity_moe_spec_t;

/* The reference setup: softmax=fp32,topk=lowid,renorm=1,weights=bf16,order=expert,
 * combine=bf16buf,shared=after (Hugging Face's eager MoE block with a shared expert). */
parity_moe_spec_t parity_moe_spec_default(void);

/* Parses "key=value,key=value,...", each key at most once, starting from *base (NULL: the
 * default). Keys and values: softmax fp32|bf16; topk lowid|highid; renorm 1|0 (yes|no);
 * weights fp32|bf16; order expert|slot; combine bf16buf|bf16prod|fp32acc|fp32fma;
 * shared none|before|after. "" and "default" give *base. PARITY_E_INVALID with diag naming the
 * key or value and the accepted ones. */
parity_status_t parity_moe_spec_parse(const char *text, const parity_moe_spec_t *base,
                                      parity_moe_spec_t *out, parity_diag_t *diag);
/* Canonical text listing every key ("softmax=fp32,topk=lowid,..."); parsing it gives it back.
 * Always NUL-terminated when cap > 0; 160 bytes always suffice. */
void parity_moe_spec_str(const parity_moe_spec_t *s, char *buf, size_t cap);
/* 1 when every field of a and b is equal (then they compute the same bits on every input),
 * else 0. Different specs may still agree bit for bit (order with K == 1, for example). */
int parity_moe_spec_equal(const parity_moe_spec_t *a, const parity_moe_spec_t *b);

/* ------------------------------------------------------------------------------------------ */
/* Building blocks (one token).                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Router probabilities p[0..E) from logits[0..E) (each an fp32 value):
 *   x_i = logits_i (fp32) or bf16(logits_i) (bf16);  m = max_i x_i;
 *   e_i = fp32(exp(fp32(x_i - m)))   (exp in double, rounded once: the correctly rounded expf
 *                                      but for rare exp ties; CUDA's expf is within 2 ulp);
 *   s = e_0 + e_1 + ... + e_{E-1}    in fp32, in that order;
 *   p_i = fp32(e_i / s), then bf16(p_i) for the bf16 softmax (a double rounding, as the kernel).
 * E >= 1; non-finite logits are not supported (their result is unspecified). */
void parity_moe_softmax(parity_moe_softmax_t kind, const double *logits, size_t e, double *p);

/* ids[0..K): the K largest of p[0..E) in slot order (descending; equal values ordered by tie).
 * 1 <= K <= E. */
void parity_moe_topk(const double *p, size_t e, size_t k, parity_moe_tie_t tie, int32_t *ids);

/* The routing of one token: softmax, top-k, then the weights w[0..K) in slot order:
 * renorm: sum = fp32 sum of the K probabilities in slot order, rounded to the probability
 * format; w_j = p_j / sum rounded to the probability format (fp32 or bf16); then cast to bf16
 * when spec->weights is bf16. */
void parity_moe_route(const parity_moe_spec_t *spec, const double *logits, size_t e, size_t k,
                      int32_t *ids, double *w);

/* The combined output out[0..D) of one token: ids[0..K) and w[0..K) in slot order, y (K, D)
 * the bf16 outputs of those experts (row j is expert ids[j]'s), shared[0..D) the bf16 shared
 * expert output (ignored, may be NULL, when spec->shared is none). Every value of out is a bf16
 * value. The arithmetic is the spec's order/combine/shared (see the enums). */
void parity_moe_combine(const parity_moe_spec_t *spec, const int32_t *ids, const double *w,
                        size_t k, const double *y, const double *shared, size_t d, double *out);

/* ------------------------------------------------------------------------------------------ */
/* Workload and whole runs.                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    size_t t, e, k, d;       /* T tokens, E experts, K per token (1..E), D hidden */
    double sigma;            /* router logits: fp32(sigma * N(0, 1)) */
    double ties;             /* fraction of tokens whose (K+1)-th largest logit is set equal to
                                the K-th (an exact tie at the top-k boundary); 0 .. 1 */
    int outliers;            /* expert outputs: N(0,1) with this many outlier channels ... */
    double outlier_factor;   /* ... scaled by this factor (the same channels for every expert) */
    uint64_t seed;
} parity_moe_config_t;

/* T 4096, E 64, K 8, D 1024, sigma 1, ties 0, outliers 0, factor 8, seed 1. */
parity_moe_config_t parity_moe_config_default(void);
/* PARITY_E_INVALID (diag says which field) unless 1 <= K <= E <= 4096, T, D >= 1, T*D and T*E
 * below 2^31, sigma finite >= 0, 0 <= ties <= 1, 0 <= outliers <= D, factor finite. */
parity_status_t parity_moe_config_check(const parity_moe_config_t *c, parity_diag_t *diag);

/* logits (T, E): the router logits, each an fp32 value; perturbed by eps >= 0:
 * fp32(l + eps * N(0, 1)) with noise from its own stream (eps 0 gives the logits unchanged). */
void parity_moe_logits(const parity_moe_config_t *c, double eps, double *logits);
/* Expert e's bf16 output for token t, out[0..D); the shared expert's when e == -1. A pure function
 * of (seed, t, e). */
void parity_moe_expert_out(const parity_moe_config_t *c, size_t t, int32_t e, double *out);

/* A whole run of spec over the config's tokens: out (T, D) the bf16 outputs (may be NULL), ids
 * (T, K) the slot-order routing (may be NULL). exact (T, D), may be NULL: the reference with the
 * same semantics (renorm, tie rule, shared expert present or not) and fp64 arithmetic: softmax in
 * double with an exact sum, top-k on those probabilities, weights in double, the output the
 * exact sum (parity_sum_exact) of the double products w_j * y_j and s, correctly rounded to
 * bf16 up to the products' rounding (2^-53 relative); exact_ids (T, K) its routing (may be
 * NULL). PARITY_E_INVALID for a bad config or spec, PARITY_E_NOMEM. */
parity_status_t parity_moe_run(const parity_moe_config_t *c, const parity_moe_spec_t *spec,
                               double *out, int32_t *ids, double *exact, int32_t *exact_ids);

/* Tokens (of n, K ids each) whose top-k SET differs between a and b (order ignored). */
size_t parity_moe_set_differ(const int32_t *a, const int32_t *b, size_t n, size_t k);

/* The fraction of tokens whose top-k set under spec changes when the logits are perturbed by eps
 * (parity_moe_logits(c, eps)): routing fragility. 0 for eps == 0. PARITY_E_INVALID for a bad
 * config or eps < 0, PARITY_E_NOMEM. */
parity_status_t parity_moe_flip_frac(const parity_moe_config_t *c, const parity_moe_spec_t *spec,
                                     double eps, double *frac);

#ifdef __cplusplus
}
#endif
#endif

/* model internals shared by model.c (loading, specs), model_forward.c (arithmetic) and
 * model_generate.c (generation). Not a public header. */
#ifndef PARITY_MODEL_IMPL_H
#define PARITY_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "parity/bisect.h"
#include "parity/format.h"
#include "parity/model.h"

/* Pointers into the mapped checkpoint; every matrix row-major (out, in). */
typedef struct {
    const float *emb;       /* (V, D) */
    const float *rms_att;   /* (L, D) */
    const float *wq;        /* (L, D, D) */
    const float *wk;        /* (L, KVD, D) */
    const float *wv;        /* (L, KVD, D) */
    const float *wo;        /* (L, D, D) */
    const float *rms_ffn;   /* (L, D) */
    const float *w1;        /* (L, F, D) */
    const float *w2;        /* (L, D, F) */
    const float *w3;        /* (L, F, D) */
    const float *rms_final; /* (D) */
    const float *wcls;      /* (V, D); == emb when shared */
} model_weights_f32_t;

/* An MoE side file (model_moe.c): the unit partition and the router of every layer. */
typedef struct {
    int E, K, n_shared, G;  /* G = (F - n_shared) / E units per routed expert */
    float scale;            /* routed scaling factor (K: a power of two, exact) */
    int32_t *perm;          /* (L, F): the n_shared shared units, then expert e's G units */
    float *router;          /* (L, E, D + 1): weights then bias, the logit scale folded in */
} model_moe_t;

struct parity_model {
    parity_model_config_t cfg;
    void *map;
    size_t map_size;
    model_weights_f32_t w;
    model_moe_t *moe;       /* NULL: dense */
};

/* The same tensors converted to the path's storage dtype, held as doubles (exact). */
typedef struct {
    double *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
} model_weights_t;

struct parity_model_runner {
    const parity_model_t *m;
    parity_model_path_t p;
    int D, F, L, H, KVH, V, S, hs, kvd;
    double *wbuf;      /* one allocation carved into w */
    model_weights_t w;
    double *kcache;    /* (L, S, KVD) */
    double *vcache;    /* (L, S, KVD) */
    /* per-position scratch */
    double *x;         /* (D) residual stream */
    double *xb;        /* (D) normed input / attention output */
    double *delta;     /* (D) sublayer output to add */
    double *q;         /* (D) */
    double *att;       /* (S) attention scores */
    double *hb, *hb2;  /* (F) */
    double *part;      /* (8 * 16) split-K and rank partials */
    double *arpart;    /* (8, D): a row-parallel GEMM's rank partials, rank-major (N <= D) */
    size_t *companions; /* (batch - 1) companion lengths, or NULL: own length */
    parity_format_t fmt_bf16, fmt_fp16;
    /* MoE (model_moe.c), NULL for a dense model */
    struct model_moe_run *moe;
    uint64_t run_seed;
    /* image prefix (model_vision.c): embeddings replacing positions [img0, img0 + n_img) */
    double *img;       /* (PARITY_MODEL_MAX_PATCHES, D) */
    size_t img0, n_img;
    double *cap_ffn;   /* (L, S, D) when set: every FFN input is copied here (moe build) */
    /* module capture (model_capture.c, docs/bisect.md): NULL when off */
    parity_capture_t *cap;
    const parity_capture_t *cap_src; /* replay: each module's inputs are taken from here */
    size_t cap_row0;                 /* the capture row of position 0 */
};

/* Module ids of the capture: 0 embed; 1 + 4l + {0 attn_norm, 1 attn, 2 ffn_norm, 3 mlp/moe};
 * 1 + 4L final_norm; 2 + 4L lm_head. */
#define MODEL_MOD_LAYER(l, k) (1 + 4 * (l) + (k))
/* Record a module's inputs (in replay mode: first overwrite them with the source's); record its
 * outputs (replay mode: into the replay tensors); record a router's top-k. b1/o1 may be NULL. */
void model_cap_in(parity_model_runner_t *r, int mod, size_t t, double *b0, double *b1);
void model_cap_out(parity_model_runner_t *r, int mod, size_t t, const double *o0, const double *o1);
void model_cap_route(parity_model_runner_t *r, int l, size_t t, const int32_t *ids,
                     const double *gates, const double *probs);

/* Rounding and arithmetic (model_math.c) shared by model_forward.c, model_moe_run.c and
 * model_vision.c. */
double model_rnd(const parity_model_runner_t *r, parity_model_dtype_t d, double x);
parity_model_dtype_t model_cmp_dtype(const parity_model_runner_t *r);
double model_exp(parity_model_dtype_t cd, double x);
double model_sqrt(parity_model_dtype_t cd, double x);
/* out[i] = ST(sum_k W[i*K + k] x[k]), i < N, with the path's split-K and (row_parallel) TP. */
void model_gemm(parity_model_runner_t *r, double *out, const double *W, const double *x, int N,
                int K, size_t rows, int row_parallel);
/* SwiGLU of n units in place: hb[i] = ST(ST(silu(hb[i])) * hb2[i]); fused_act: one rounding. */
void model_swiglu(const parity_model_runner_t *r, double *hb, const double *hb2, int n,
                  int fused_act);

/* The MoE side file (model_moe.c reads it, model_moe_build.c writes it): magic, then version. */
#define MODEL_MOE_MAGIC "PMOE"
#define MODEL_MOE_VERSION 1

/* MoE runner parts (model_moe_run.c). */
parity_status_t model_moe_runner_new(parity_model_runner_t *r, parity_diag_t *diag);
void model_moe_runner_free(parity_model_runner_t *r);
/* delta = the MoE FFN of the normed input xb at position pos of layer l. */
void model_moe_ffn(parity_model_runner_t *r, int l, int pos, const double *xb, double *delta,
                   size_t rows);
void model_moe_free(model_moe_t *moe);
/* Path-spec parts of MoE (model.c calls them). */
parity_moe_spec_t model_moe_base_spec(int fused);

const char *parity_model_dtype_name(parity_model_dtype_t d);

/* Runs positions [t0, t1) of tokens (cache holds [0, t0)), every GEMM having `rows` rows.
 * logits: (t1 - t0) * V (may be NULL); hidden: as in parity_model_forward with n_total
 * positions (may be NULL). Implemented in model_forward.c. */
void model_run_positions(parity_model_runner_t *r, const int32_t *tokens, size_t t0, size_t t1,
                         size_t rows, double *logits, double *hidden, size_t n_total);

/* GEMM row counts for a sequence of own length n (see docs/model.md, "batch"). */
size_t model_prefill_rows(const parity_model_runner_t *r, size_t n);
size_t model_decode_rows(const parity_model_runner_t *r);
/* A value that changes whenever some GEMM's split count at `rows` rows changes. */
uint64_t model_split_signature(const parity_model_runner_t *r, size_t rows);
/* 1 when the path's numbers can depend on the GEMM row count (batch heuristic active). */
int model_rows_matter(const parity_model_runner_t *r);

#endif

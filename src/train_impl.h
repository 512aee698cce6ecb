/* Internals of the training probe shared by train_model.c (model, forward, backward),
 * train.c (data, optimizers, experiment) and train_report.c (JSON, SVG). */
#ifndef PARITY_TRAIN_IMPL_H
#define PARITY_TRAIN_IMPL_H

#include "parity/tensor.h"
#include "parity/train.h"

#define TRAIN_RMS_EPS 1e-5f /* the op's attr "eps" */

typedef struct {
    float *g1;   /* (D)      pre-attention RMSNorm weight */
    float *wqkv; /* (D, 3D)  [q | k | v] columns, input-major (y = x W) */
    float *wo;   /* (D, D) */
    float *g2;   /* (D)      pre-MLP RMSNorm weight */
    float *w1;   /* (D, F) */
    float *w2;   /* (F, D) */
} train_layer_w_t;

typedef struct {
    float *x;    /* (N, D)   residual stream entering the block */
    float *r1;   /* (N)      1/rms of x */
    float *a;    /* (N, D)   RMSNorm(x) * g1 */
    float *qkv;  /* (N, 3D) */
    float *p;    /* (B, H, T, T) attention probabilities (causal, row t uses u <= t) */
    float *y;    /* (N, D)   attention output before wo */
    float *mid;  /* (N, D)   x + y wo */
    float *r2;   /* (N) */
    float *m;    /* (N, D)   RMSNorm(mid) * g2 */
    float *u;    /* (N, F)   m w1 */
    float *z;    /* (N, F)   gelu(u) */
} train_layer_a_t;

#define TRAIN_MAX_TENSORS 64

struct parity_train_model {
    parity_train_config_t cfg;
    int V, D, H, T, F, L, C, S; /* vocab, hidden, heads, context, MLP hidden, layers, head
                                   classes, class size (ids [c*S, c*S+S) form class c) */
    int nseq_max;               /* activations are sized for this many sequences */
    size_t np;
    float *params, *grads;
    int nt;
    const char *tname[TRAIN_MAX_TENSORS];
    size_t toff[TRAIN_MAX_TENSORS], tcnt[TRAIN_MAX_TENSORS];
    /* parameters (views into params) and their gradients (same offsets into grads) */
    float *wte;  /* (V, D) token embedding */
    float *g0;   /* (D)    first RMSNorm weight (the op's gamma) */
    float *wpe;  /* (T, D) learned positions, added after the first RMSNorm */
    train_layer_w_t lw[8], dlw[8];
    float *gf;   /* (D)    final RMSNorm weight */
    float *wc;   /* (D, C) class logits */
    float *wout; /* (D, V) word logits within a class */
    float *dwte, *dg0, *dwpe, *dgf, *dwc, *dwout;
    /* activations (N = nseq * T rows) */
    int32_t *ids_buf; /* (N) the op's ids */
    float *e;    /* (N, D) E[ids]: the op's x */
    float *r0;   /* (N) */
    train_layer_a_t la[8];
    float *xf;   /* (N, D) residual stream after the last block */
    float *rf;   /* (N) */
    float *f;    /* (N, D) final RMSNorm output */
    float *pc;   /* (N, C) class probabilities */
    float *pw;   /* (N, S) word probabilities within the target's class */
    /* backward scratch */
    float *dh, *dt1, *dt2; /* (N, D) */
    float *dqkv;           /* (N, 3D) */
    float *dfu;            /* (N, F) */
    float *wt;             /* transposed weight, max(D*3D, D*F) */
    float *dp;             /* (T) */
    /* candidate kernel buffers (guarded, shared memory), sized for kn rows */
    int64_t kn;
    int kin, kout;
    parity_tensor_t *k_dy, *k_x, *k_g, *k_ids, *k_dE, *k_dg;
    int64_t *hits; /* (V) scratch for max hits */
    float *wcT, *woT; /* (C, D), (V, D): transposed head weights for the backward */
};

double train_now(void);

#endif

/* Internals of the training probe shared by train_model.c (model, forward, backward),
 * train_probe.c (the floor kernel, the gradient probe), train_data.c (corpora), train.c
 * (optimizers, experiment) and train_report.c (JSON, SVG). */
#ifndef PARITY_TRAIN_IMPL_H
#define PARITY_TRAIN_IMPL_H

#include "parity/tensor.h"
#include "parity/train.h"
#include "src/core/internal.h"

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
    /* the faithful floor (train_model_set_floor): with kernel == NULL and floor_order > 0 the op
     * is computed in-process as a faithful kernel with interface floor_in -> floor_out */
    int floor_order, floor_in, floor_out;
    /* the gradient probe (train_model_set_probe): when on, every step's dE is compared with the
     * fp32 reference on the same inputs, per bucket, into probe[] */
    int probe_on, probe_in;
    parity_train_gstep_t probe[PARITY_TRAIN_BUCKETS];
    float *ref_dE, *emu16, *emu32; /* (V, D) reference dE and the two emulated accumulators */
    float *rowbuf;                 /* (5 D) rounded inputs and row outputs */
    int64_t *perm;                 /* (N) the floor's summation order */
};

/* A corpus of dense ids (train_data.c). */
typedef struct {
    int32_t *tok;     /* dense ids, rank order: 0 is the most frequent */
    int64_t n, n_train;
    int V;            /* dense vocabulary (ids actually used) */
    int raw_vocab;    /* ids used before remapping */
    int64_t *count;   /* (V) occurrences in the training split */
} corpus_t;

/* Build the corpus of `kind` (text: PARITY_E_IO when the data is missing, diag names the file;
 * synthetic: cfg->synth_tokens ids drawn from cfg->seed). Free with train_corpus_free. */
parity_status_t train_corpus_build(corpus_t *c, parity_train_data_t kind,
                                   const parity_train_config_t *cfg, parity_diag_t *diag);
void train_corpus_free(corpus_t *c);

/* The op's in-process variants (train_probe.c): the fp32 reference into dE (V, D), dg (D); the
 * floor into m->dwte, m->dg0; the probe of the step's dE (m->dwte) into m->probe. */
void train_emb_rms_bwd_ref(parity_train_model_t *m, const float *dy, int N, float *dE, float *dg);
void train_emb_rms_bwd_floor(parity_train_model_t *m, const float *dy, int N, uint64_t seed);
void train_probe_grad(parity_train_model_t *m, const float *dy, int N);
/* One row of RMSNorm backward, the reference's arithmetic (train_probe.c). */
void train_rms_bwd_row(float *dx, float *dg, const float *x, const float *dy, const float *g,
                       float r, int d);

/* Dense-id edges of the frequency-rank buckets (the last is clipped to V). */
extern const int train_bucket_edges[PARITY_TRAIN_BUCKETS + 1];

/* Floor mode: order k >= 1 selects the k-th seeded permutation; 0 turns it off. in/out are
 * PARITY_DT_F32 or PARITY_DT_BF16. PARITY_E_NOMEM when the scratch cannot be allocated. */
parity_status_t train_model_set_floor(parity_train_model_t *m, int in_dtype, int out_dtype, int order);
/* Probe on (in_dtype: the dtype the emulated accumulators round the op's inputs to, as the run's
 * kernel sees them) or off (in_dtype < 0). */
parity_status_t train_model_set_probe(parity_train_model_t *m, int in_dtype);

#endif

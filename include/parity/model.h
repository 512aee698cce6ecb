/* model: a real pretrained Llama-architecture model in llama2.c's checkpoint format
 * (stories260K.bin in the shared data), an fp64 reference forward over whole sequences, and
 * serving-style forward paths (bf16/fp16 storage, a bf16-accumulation mutant, fused residual +
 * RMSNorm, KV-cache decode, split-K, simulated tensor parallelism with a chosen all-reduce, batch
 * composition) that compose, so their drift against the reference can be measured layer by layer
 * and token by token. Generation is greedy or sampled, with run.c's prompt/BOS semantics.
 * Deliberately not here: tokenizers (tokenizer.h), metrics (metrics.h), dump formats (the CLI).
 * The arithmetic of every path is spelled out in docs/model.md. */
#ifndef PARITY_MODEL_H
#define PARITY_MODEL_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/model.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/bisect.h"
#include "parity/moe.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Checkpoints
 * ------------------------------------------------------------------------------------------- */

/* The header of a llama2.c checkpoint (7 x int32), with the sign of vocab_size decoded. */
typedef struct {
    int32_t dim;        /* D: model width */
    int32_t hidden_dim; /* F: SwiGLU hidden width */
    int32_t n_layers;   /* L */
    int32_t n_heads;    /* H: query heads */
    int32_t n_kv_heads; /* KVH: key/value heads (GQA when < H) */
    int32_t vocab_size; /* V (always positive here) */
    int32_t seq_len;    /* S: the longest sequence the model (and RoPE table) was built for */
    int shared_classifier; /* 1: logits use token_embedding (header vocab_size > 0) */
} parity_model_config_t;

typedef struct parity_model parity_model_t;

/* Maps a llama2.c "legacy" (version 0) fp32 checkpoint read-only (weights are never copied).
 * The header must be positive and consistent (dim divisible by n_heads, n_heads by n_kv_heads,
 * even head size, seq_len > 0), and the file size must equal exactly 28 bytes + the float count
 * the header implies (including the unused freq_cis tables and, for a negative vocab_size, the
 * separate classifier). Returns PARITY_OK and *out (free with parity_model_free); PARITY_E_INVALID
 * for NULL arguments; PARITY_E_IO when the file cannot be opened or mapped; PARITY_E_FORMAT with
 * diag naming the file, the field and what was expected. On error *out is NULL. */
parity_status_t parity_model_load(const char *path, parity_model_t **out, parity_diag_t *diag);

/* Unmaps and frees; NULL is a no-op. Every runner made from m must be freed first. */
void parity_model_free(parity_model_t *m);

/* The model's header; NULL for NULL. Lives as long as m. */
const parity_model_config_t *parity_model_config(const parity_model_t *m);

/* Paths of the shipped stories260K files, stories260K.bin and tok512.bin, each found by
 * parity_data_path (status.h: $PARITY_DATA, the installed data folder, the source tree's data/).
 * Either path pointer may be NULL (not looked up). PARITY_OK when every requested file was
 * found; else PARITY_E_IO with diag naming the missing file and the three places looked in. */
parity_status_t parity_model_default_files(char *model_path, size_t model_cap, char *tok_path,
                                           size_t tok_cap, parity_diag_t *diag);

/* ---------------------------------------------------------------------------------------------
 * Forward paths
 * ------------------------------------------------------------------------------------------- */

typedef enum {
    PARITY_MODEL_FP64 = 0,
    PARITY_MODEL_FP32 = 1,
    PARITY_MODEL_BF16 = 2,
    PARITY_MODEL_FP16 = 3
} parity_model_dtype_t;

typedef enum {
    PARITY_MODEL_AR_RING = 0,   /* reduce-scatter around the ring, chunk c starting at rank c+1 */
    PARITY_MODEL_AR_TREE = 1,   /* pairwise: (r0+r1)+(r2+r3), ... */
    PARITY_MODEL_AR_ONESHOT = 2 /* every rank reads all partials, sums ranks 0..R-1 in order */
} parity_model_allreduce_t;

/* One forward path. parity_model_path_default gives the fp64 reference; every field composes
 * with every other. */
typedef struct {
    parity_model_dtype_t storage; /* weights and every activation stored between ops */
    parity_model_dtype_t accum;   /* matmul accumulator (and in-op math): FP64 for the reference,
                                     FP32 for fp32/bf16/fp16 paths, BF16 for the bf16acc mutant */
    int fused_norm;               /* 1: residual add + RMSNorm fused (vLLM fused_add_rms_norm) */
    int kvcache;                  /* 1: every position computed by the decode kernel, one token
                                     at a time against the KV cache (split-KV online softmax) */
    int splitk;                   /* >= 1: every GEMM splits K into this many parts;
                                     0: one part, or the batch heuristic when batch > 0 */
    int tp;                       /* ranks R >= 1 of simulated tensor parallelism */
    parity_model_allreduce_t allreduce;
    parity_model_dtype_t hop;     /* dtype each all-reduce hop rounds to */
    int hop_set;                  /* 1 when hop was given; otherwise hop follows storage */
    int batch;                    /* 0: no batch; B >= 1: share GEMMs with B-1 companions */
    int packed;                   /* with batch: 1 packed (varlen) rows, 0 padded */
    /* MoE models only (parity_model_moe_attach): a dense model rejects them. */
    int moe_fused;                /* 1: the serving kernel ("fusedmoe"): order=slot,
                                     combine=fp32acc, weights=fp32 unless moe: says otherwise,
                                     and SwiGLU's product taken before rounding to storage */
    int moe_set;                  /* 1: moe differs from the base spec (moe:SPEC was given) */
    parity_moe_spec_t moe;        /* the effective routing/combine spec; "bf16" in its weights,
                                     combine buffer and product names means the storage dtype */
    int ep;                       /* expert-parallel ranks (1: none; 2, 4, 8 dividing E) */
    int ep_overlap;               /* 1: EP partials reduced in arrival order (comm/compute
                                     overlap), an order drawn per run (parity_model_runner_set_run_seed) */
} parity_model_path_t;

/* The fp64 reference: storage FP64, accum FP64, nothing else. */
void parity_model_path_default(parity_model_path_t *p);

/* Parses a path spec: tokens joined by '+', in any order, each at most once:
 *   ref | fp64        the reference (the default; may be combined with structural options)
 *   fp32 | bf16 | fp16   storage of weights and activations, fp32 accumulation
 *   bf16acc           bf16 storage and bf16 accumulation in every GEMM (a known-bad mutant)
 *   fused             fused residual add + RMSNorm
 *   kvcache           KV-cache incremental decode for every position
 *   splitkS           split-K with S >= 1 parts (S <= 16)
 *   tpR[:ALGO[:DTYPE]]   R ranks (1..8, dividing n_heads is checked at runner creation), ALGO
 *                     ring (default) | tree | oneshot, DTYPE the per-hop rounding fp64 | fp32 |
 *                     bf16 | fp16 (default: the storage dtype)
 *   batchB[:padded|:packed]   B >= 1 sequences per GEMM (default padded)
 *   fusedmoe          (MoE) the fused gate->dispatch->experts->combine kernel's order
 *   moe:SPEC          (MoE) routing/combine keys over the base (moe.h's grammar, ','-joined:
 *                     softmax=bf16,topk=highid,order=slot,combine=fp32acc,shared=before,...)
 *   epR[:overlap]     (MoE) R expert-parallel ranks (1, 2, 4, 8); overlap: arrival order
 * Example: "bf16+kvcache+tp4:ring:bf16+splitk2". Returns PARITY_OK, or PARITY_E_INVALID with
 * diag naming the token and what was expected (out is then the default path). */
parity_status_t parity_model_path_parse(const char *spec, parity_model_path_t *out,
                                        parity_diag_t *diag);

/* The canonical spec of p ("ref", "bf16+fused+tp4:ring:bf16", ...) into buf (always
 * NUL-terminated when cap > 0). Parsing it gives p back. */
void parity_model_path_str(const parity_model_path_t *p, char *buf, size_t cap);

/* A path bound to a model: weights converted to the storage dtype (held as doubles), scratch
 * buffers and the KV cache. Not thread-safe; make one runner per thread. */
typedef struct parity_model_runner parity_model_runner_t;

/* PARITY_E_INVALID (diag says why) for NULLs or a path the model cannot take (tp not dividing
 * n_heads or larger than hidden_dim); PARITY_E_NOMEM. */
parity_status_t parity_model_runner_new(const parity_model_t *m, const parity_model_path_t *p,
                                        parity_model_runner_t **out, parity_diag_t *diag);
void parity_model_runner_free(parity_model_runner_t *r); /* NULL is a no-op */

/* Lengths of the B-1 companion sequences that share each GEMM with this one when the path has
 * batchB (ignored otherwise). Companions are not computed: only the GEMM row count they imply
 * matters (see docs/model.md, "batch"). n must be B-1; without a call, companions have the
 * sequence's own length. PARITY_E_INVALID for NULL with n > 0 or n != B-1. */
parity_status_t parity_model_runner_set_companions(parity_model_runner_t *r, const size_t *lens,
                                                   size_t n);

/* Teacher-forced forward over tokens[0..n) (n <= seq_len, ids < vocab_size).
 * logits (caller-owned, n*V, may be NULL): logits[t*V + v], the next-token logits at t, as the
 * path stores them (e.g. bf16 values), widened to double.
 * hidden (caller-owned, (L+2)*n*D, may be NULL): slice 0 the embedding, slice l+1 the residual
 * stream after layer l, slice L+1 the final RMSNorm output; hidden[(s*n + t)*D + j].
 * PARITY_E_INVALID for NULL r/tokens, n == 0, n > seq_len or an id out of range. */
parity_status_t parity_model_forward(parity_model_runner_t *r, const int32_t *tokens, size_t n,
                                     double *logits, double *hidden);

/* log softmax of v logits at row[0..v) evaluated in double; returns the logprob of id. */
double parity_model_logprob(const double *row, size_t v, int32_t id);

/* Generation with run.c's semantics: position 0 holds prompt[0] (normally BOS); while pos < steps
 * the next token is prompt[pos+1] inside the prompt, otherwise argmax (temperature <= 0, ties to
 * the lowest id) or a sample from softmax(logits / temperature) drawn with a generator seeded by
 * seed; generation stops early when the next token is BOS (1), which is not stored.
 * out (caller-owned, steps + 1 ids) receives the whole sequence, prompt included; *n_out its
 * length (<= steps + 1). steps is capped at seq_len. A path without kvcache recomputes the whole
 * prefix at every step exactly as a cache-less server would (done incrementally when the path's
 * arithmetic cannot depend on the GEMM row count, which gives identical numbers).
 * PARITY_E_INVALID for NULLs, n_prompt == 0, n_prompt > steps or ids out of range. */
parity_status_t parity_model_generate(parity_model_runner_t *r, const int32_t *prompt,
                                      size_t n_prompt, size_t steps, double temperature,
                                      uint64_t seed, int32_t *out, size_t *n_out);

/* ---------------------------------------------------------------------------------------------
 * Mixture of experts built from the dense checkpoint (docs/moe-model.md)
 * ------------------------------------------------------------------------------------------- */

/* How a dense checkpoint is upcycled: each layer's F SwiGLU units are split into a shared expert
 * (the n_shared units of largest mean contribution) and E routed experts of (F - n_shared) / E
 * units (balanced k-means of the units' normalised w1 rows), top-k K of them per token; the
 * router is a ridge fit of the oracle top-K indicator on the FFN input, over calibration text
 * the dense fp64 reference samples itself (n_calib sequences of calib_len tokens at
 * temperature 1, seeds 1..n_calib). Everything is a pure function of the checkpoint. */
typedef struct {
    int experts;      /* E (default 8) */
    int topk;         /* K (default 4) */
    int n_shared;     /* units of the shared expert (default 108) */
    int n_calib;      /* calibration sequences (default 8) */
    int calib_len;    /* tokens per calibration sequence (default 200) */
    double beta;      /* router logit scale folded into the router (default 1.5) */
    double ridge;     /* ridge penalty of the router fit (default 1e-2) */
} parity_model_moe_opts_t;

void parity_model_moe_opts_default(parity_model_moe_opts_t *o);

/* Upcycles m (a loaded dense model) and writes the MoE side file (format in docs/moe-model.md)
 * to out_path. Deterministic: the same checkpoint gives the same bytes. PARITY_E_INVALID for bad
 * options (E*G + n_shared != F, K > E), PARITY_E_IO, PARITY_E_NOMEM. */
parity_status_t parity_model_moe_build(const parity_model_t *m, const parity_model_moe_opts_t *o,
                                       const char *out_path, parity_diag_t *diag);

/* Attaches an MoE side file to m: m becomes an MoE model (every FFN replaced by its shared
 * expert plus top-K routed experts). PARITY_E_FORMAT when the file does not match m's shape,
 * PARITY_E_IO, PARITY_E_NOMEM. Attach before creating runners. */
parity_status_t parity_model_moe_attach(parity_model_t *m, const char *path, parity_diag_t *diag);

/* The shipped side file (stories260K_moe.bin) found by parity_data_path. */
parity_status_t parity_model_moe_default_file(char *path, size_t cap, parity_diag_t *diag);

/* E and K of an MoE model (0 and 0 for a dense one). */
void parity_model_moe_shape(const parity_model_t *m, int *experts, int *topk);

/* The routing of the last forward or generation step, for positions 0..seq_len: ids (L, S, K)
 * slot order, probs (L, S, E) the router probabilities as the path computed them; S = seq_len.
 * Entries of positions not computed are stale. PARITY_E_INVALID for a dense model. */
parity_status_t parity_model_runner_routing(const parity_model_runner_t *r, const int32_t **ids,
                                            const double **probs);

/* The seed of the EP arrival order (epR:overlap): a server run; 0 by default. */
void parity_model_runner_set_run_seed(parity_model_runner_t *r, uint64_t seed);

/* ---------------------------------------------------------------------------------------------
 * A synthetic image modality (docs/moe-model.md)
 * ------------------------------------------------------------------------------------------- */

#define PARITY_MODEL_MAX_PATCHES 64

/* The image of `seed` (16x16x3-pixel patches of a smooth synthetic picture) through a 2-layer
 * vision encoder (attention + MLP per layer, deterministic weights) and a projector into the
 * embedding space, in the runner's arithmetic; its n_patch embeddings replace the token
 * embeddings at positions pos0 .. pos0 + n_patch - 1 of every following forward (n_patch 0
 * removes the image). PARITY_E_INVALID for n_patch > PARITY_MODEL_MAX_PATCHES or a range past
 * seq_len. */
parity_status_t parity_model_runner_set_image(parity_model_runner_t *r, uint64_t seed,
                                              size_t n_patch, size_t pos0);

/* The discrete image tokens of the image of `seed`: for each patch, the vocabulary id (3 and
 * above: not <unk>, <s>, </s>) whose embedding has the largest cosine with the patch's fp64
 * embedding (ties: the lower id), as a VQ tokenizer's codebook lookup.
 * They are the realized tokens scored at image positions; path-independent. */
parity_status_t parity_model_image_tokens(const parity_model_t *m, uint64_t seed, size_t n_patch,
                                          int32_t *ids, parity_diag_t *diag);

/* ---------------------------------------------------------------------------------------------
 * Module capture for `parity bisect` (docs/bisect.md)
 * ------------------------------------------------------------------------------------------- */

/* An empty capture of r's modules (embed, per layer attn_norm, attn, ffn_norm, mlp|moe, then
 * final_norm, lm_head) for `rows` token rows (the sum of the lengths of the sequences to run),
 * its path r's canonical spec. PARITY_E_NOMEM. */
parity_status_t parity_model_capture_new(const parity_model_runner_t *r, size_t rows,
                                         const char *model_name, parity_capture_t **out,
                                         parity_diag_t *diag);
/* Following forwards record every module's inputs and outputs (and the MoE routing) into cap at
 * rows row0 + position (logits must be asked for, for lm_head). With replay_src (a capture of
 * the same modules and rows, normally another path's), each module instead runs on replay_src's
 * recorded inputs and its outputs go to cap's replay tensors. cap NULL turns capture off.
 * PARITY_E_FORMAT (diag) when replay_src does not match. */
parity_status_t parity_model_runner_set_capture(parity_model_runner_t *r, parity_capture_t *cap,
                                                size_t row0, const parity_capture_t *replay_src,
                                                parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif

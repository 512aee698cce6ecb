/* The training probe: a small pre-norm transformer LM in plain C with explicit forward and
 * backward passes, fp32 master weights, SGD / SGD+momentum / AdamW, in which the fused
 * embedding-gradient + first-RMSNorm backward (op embedding_rmsnorm_bwd) is swappable for any
 * candidate kernel (catalog or plugin) through the kernel ABI. An experiment trains, per data x
 * optimizer cell, the fp32 reference, a faithful floor (K runs of a faithful kernel with each
 * candidate's interface that differs from the reference only in its fp32 summation order), the
 * candidates (same weights, same data order), and the reference with another data order (the
 * seed-to-seed noise, kept as context); a candidate departs when its distance from the
 * reference (loss, or per-frequency-bucket gradient error) exceeds the floor's by a derived margin.
 * Deliberately not here: judging a kernel op-by-op (verify.h), printing (the CLI does). */
#ifndef PARITY_TRAIN_H
#define PARITY_TRAIN_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/train.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/kernel_abi.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_TRAIN_DATA_TEXT = 0,   /* tinyshakespeare through GPT-2 BPE, ids remapped densely */
    PARITY_TRAIN_DATA_ZIPF = 1,   /* i.i.d. Zipf(s) tokens over the same vocabulary size */
    PARITY_TRAIN_DATA_UNIFORM = 2 /* i.i.d. uniform tokens over the same vocabulary size */
} parity_train_data_t;

typedef enum {
    PARITY_TRAIN_OPT_SGD = 0,  /* plain SGD */
    PARITY_TRAIN_OPT_SGDM = 1, /* SGD with (heavy-ball) momentum */
    PARITY_TRAIN_OPT_ADAMW = 2 /* AdamW (decoupled weight decay) */
} parity_train_opt_t;

/* "text", "zipf", "uniform" / "sgd", "sgdm", "adamw" (static). */
const char *parity_train_data_name(parity_train_data_t d);
const char *parity_train_opt_name(parity_train_opt_t o);

/* Everything that defines an experiment. parity_train_config_default fills the documented
 * defaults (docs/train.md); every field is plain data so a report can echo it. */
typedef struct {
    /* model */
    int d_model;  /* D, hidden size */
    int n_heads;  /* H, D % H == 0 */
    int n_layers; /* transformer blocks */
    int mlp_mult; /* MLP hidden = mlp_mult * D */
    int seq_len;  /* T, context */
    /* batch: batch_seqs sequences of seq_len tokens per step (N = batch_seqs * seq_len) */
    int batch_seqs;
    int val_seqs; /* validation sequences (fixed, evenly spaced over the held-out 10%) */
    int steps;
    int eval_every; /* validation loss every eval_every steps (and at the end) */
    uint64_t seed;  /* weights init and data order of the reference/candidate pair; the noise
                       run uses data order seed + 1 with the same weights */
    double zipf_s;
    int synth_tokens; /* length of the synthetic corpora */
    /* optimizers (docs/train.md states why these values) */
    double sgd_lr, sgd_momentum;
    double adamw_lr, adamw_beta1, adamw_beta2, adamw_eps, adamw_wd;
    int jobs; /* runs trained concurrently (threads); 1 for plugins that are not reentrant */
    double sgdm_lr; /* SGD with momentum: lr (sgd_momentum is its momentum) */
    int floor_orders; /* K: faithful-order floor runs per candidate interface, 1..PARITY_TRAIN_MAX_FLOOR */
} parity_train_config_t;

#define PARITY_TRAIN_MAX_FLOOR 8
/* False-departure probability the margin is derived for, over all measures of one cell
 * (docs/train.md, "The floor and the margin"). */
#define PARITY_TRAIN_ALPHA 0.01
/* Liger-Kernel's bf16 convergence test (test/convergence/bf16/test_mini_models.py): the
 * training loss of every one of the first 32 steps within atol 1e-3 + rtol 1e-2 |ref|, and
 * every parameter after them within 1e-2 + 1e-2 |ref|. */
#define PARITY_TRAIN_LIGER_STEPS 32
#define PARITY_TRAIN_LIGER_LOSS_ATOL 1e-3
#define PARITY_TRAIN_LIGER_LOSS_RTOL 1e-2
#define PARITY_TRAIN_LIGER_PARAM_ATOL 1e-2
#define PARITY_TRAIN_LIGER_PARAM_RTOL 1e-2

void parity_train_config_default(parity_train_config_t *cfg);
/* The production-sized preset (docs/train.md): D = 16, T = 32, 2048 sequences = 65,536 tokens
 * per step, 12 steps, validation every 3; everything else as parity_train_config_default. */
void parity_train_config_production(parity_train_config_t *cfg);

/* The departure margin M for K floor runs and a per-measure false-departure probability alpha:
 * the M with P(|Z0| > M max(|Z1|..|ZK|)) = alpha for i.i.d. normal Z (docs/train.md). */
double parity_train_margin(int k, double alpha);

/* ---- the model, exposed for tests and benches ------------------------------------------------ */

typedef struct parity_train_model parity_train_model_t;

/* A model for a vocabulary of `vocab` dense ids whose frequency rank equals the id (id 0 most
 * frequent; the class-factorized LM head groups consecutive ids). Weights drawn from `seed`.
 * Errors: PARITY_E_INVALID (bad sizes), PARITY_E_NOMEM. Free with parity_train_model_free. */
parity_status_t parity_train_model_new(const parity_train_config_t *cfg, int vocab, uint64_t seed,
                                       parity_train_model_t **out, parity_diag_t *diag);
void parity_train_model_free(parity_train_model_t *m);

/* Parameters and gradients: one fp32 allocation each, carved into named tensors; the pointers
 * are the model's (written through by training), valid until parity_train_model_free. */
size_t parity_train_model_nparams(const parity_train_model_t *m);
float *parity_train_model_params(parity_train_model_t *m);
float *parity_train_model_grads(parity_train_model_t *m);
int parity_train_model_ntensors(const parity_train_model_t *m);
/* Name ("wte", "g0", "l0.wqkv", ...), offset and element count of tensor i. */
const char *parity_train_model_tensor(const parity_train_model_t *m, int i, size_t *offset,
                                      size_t *count);

/* Per-call statistics of the swapped op. */
typedef struct {
    int64_t max_hits;     /* most occurrences of one id in the batch */
    int kernel_status;    /* PARITY_KERNEL_* of the last call (0 when no kernel) */
    int nonfinite;        /* the kernel's outputs held NaN/inf (unwritten sentinel or overflow) */
    int out_of_bounds;    /* the kernel wrote outside its outputs (guards) */
    int nonfinite_input;  /* the model handed the op non-finite dy or x (the run diverged); the
                             kernel was not called and the call returned PARITY_E_INVALID */
    /* seconds, accumulated: forward, backward (including the op), the op alone (reference or
     * kernel, with the dtype conversions), optimizer (filled by the experiment) */
    double t_forward, t_backward, t_kernel, t_optimizer;
} parity_train_stats_t;

/* Forward + backward on nseq sequences (inputs/targets: nseq * seq_len dense ids), gradients
 * into parity_train_model_grads (overwritten), mean cross-entropy into *loss.
 * kernel == NULL: the in-process fp32 reference for embedding_rmsnorm_bwd; else the kernel is
 * called through the ABI with dy, x, gamma converted to its in_dtype and dE, dgamma converted
 * back from its out_dtype. Returns PARITY_E_UNSUPPORTED when the kernel fails (status, non-finite
 * or out-of-bounds output, see stats), PARITY_E_INVALID for bad arguments or when the model's own
 * values reaching the op are non-finite (stats->nonfinite_input). */
parity_status_t parity_train_model_grad(parity_train_model_t *m, const int32_t *inputs,
                                        const int32_t *targets, int nseq,
                                        const parity_abi_kernel_t *kernel, uint64_t call_seed,
                                        double *loss, parity_train_stats_t *stats,
                                        parity_diag_t *diag);
/* Mean cross-entropy only (no gradients). */
double parity_train_model_loss(parity_train_model_t *m, const int32_t *inputs,
                               const int32_t *targets, int nseq);

/* ---- the experiment -------------------------------------------------------------------------- */

/* Frequency-rank buckets of embedding rows: dense ids [0,10), [10,100), [100,1000),
 * [1000,5000), [5000,V). */
#define PARITY_TRAIN_DRIFT_BUCKETS 5
#define PARITY_TRAIN_BUCKETS PARITY_TRAIN_DRIFT_BUCKETS

/* Gradient damage of one step in one bucket: the run's dE rows against the fp32 reference's dE
 * computed on the same step's inputs (the run's own weights and batch). */
typedef struct {
    int rows_hit;          /* rows of the bucket with at least one hit this step */
    double rel_err;        /* mean over those rows of ||dE - dE_ref|| / ||dE_ref|| */
    double cosine;         /* mean over those rows of cos(dE, dE_ref) (0 for a zero row) */
    double absorbed_bf16;  /* fraction of the step's nonzero contributions to the bucket's rows
                              that a bf16 accumulator, adding them in token order, rounds away
                              entirely (the sum equals the accumulator before the addition) */
    double absorbed_fp32;  /* the same for an fp32 accumulator */
} parity_train_gstep_t;

/* Per-row drift of the final embedding, grouped by the frequency rank of the token. */
typedef struct {
    int rank_lo, rank_hi;       /* dense ids [rank_lo, rank_hi) */
    double mean_hits_per_step;  /* mean over the bucket's rows of expected hits per step */
    double cand_drift;          /* mean ||E_cand - E_ref|| / ||E_ref - E_init|| over the rows */
    double noise_drift;         /* the same for the reference with the other data order */
    double floor_drift;         /* the same for the floor runs (largest over them) */
} parity_train_drift_t;

/* One (data, optimizer, candidate) result. Curves of the shared runs (reference, noise, floor)
 * are copied into every candidate's cell of the same (data, optimizer). */
typedef struct {
    parity_train_data_t data;
    parity_train_opt_t opt;
    int kernel;                /* index into the report's kernel labels */
    int vocab;                 /* dense vocabulary size of this cell's corpus */
    int64_t max_hits;          /* maximum hits of one row in one step (over all steps) */
    int steps_done;            /* candidate steps completed (< steps when it failed) */
    int n_eval;                /* evaluation points */
    int *eval_steps;           /* (n_eval) */
    double *train_ref, *train_cand, *train_noise; /* (steps) per-step training loss */
    double *val_ref, *val_cand, *val_noise;       /* (n_eval) */
    int n_floor;               /* K floor runs */
    double *val_floor;         /* (n_floor, n_eval) */
    double final_gap;          /* val_cand - val_ref at the last evaluation */
    double max_gap;            /* largest |val_cand - val_ref| */
    double noise_final;        /* |val_noise - val_ref| at the last evaluation (context) */
    double noise_max;          /* largest |val_noise - val_ref| (context) */
    double floor_gap[PARITY_TRAIN_MAX_FLOOR]; /* largest |val_floor_k - val_ref| */
    double floor_gap_max;      /* the largest of them */
    double margin;             /* M: a measure departs when it exceeds M times the floor's */
    double loss_ratio;         /* max_gap / floor_gap_max (inf when the floor is 0 and the gap not) */
    /* gradient damage, means over the candidate's steps (steps with no hit row left out) */
    double grad_err[PARITY_TRAIN_BUCKETS], grad_cos[PARITY_TRAIN_BUCKETS];
    double absorbed_bf16[PARITY_TRAIN_BUCKETS], absorbed_fp32[PARITY_TRAIN_BUCKETS];
    double floor_grad_err[PARITY_TRAIN_BUCKETS]; /* the largest floor run's mean rel_err */
    double grad_ratio[PARITY_TRAIN_BUCKETS];     /* grad_err / floor_grad_err */
    parity_train_gstep_t *grad_cand;  /* (steps_done, BUCKETS) every step */
    parity_train_gstep_t *grad_floor; /* (n_floor, steps, BUCKETS) */
    char departs_on[128];      /* "loss", "grad 0-9", ... comma-separated; "" when none */
    int first_departure;       /* loss: first evaluation step whose |gap| exceeds M times the
                                  floor's largest gap so far; gradient: first step whose error in
                                  a departing bucket exceeds M times the floor's mean; -1 none */
    /* Liger-Kernel's convergence rule applied to the same two runs (reference, candidate) */
    int liger_steps;           /* steps compared: min(32, steps) */
    int liger_pass;
    double liger_loss_worst;   /* max over steps of |loss_c - loss_r| / (atol + rtol |loss_r|) */
    double liger_param_worst;  /* max over parameters of the same after liger_steps updates */
    const char *verdict;       /* "within-floor", "departs", "crashed", "diverged" */
    char reason[256];          /* why, for crashed / diverged */
    parity_train_drift_t drift[PARITY_TRAIN_DRIFT_BUCKETS];
    double seconds;            /* wall time of the candidate run (not in JSON) */
    /* timings of the reference (first data order) and candidate runs (not in JSON) */
    parity_train_stats_t stats_ref, stats_cand;
    double seconds_ref, seconds_cand;
} parity_train_cell_t;

typedef struct {
    parity_train_config_t cfg;
    int n_kernels;
    char (*kernel_labels)[512]; /* (n_kernels) */
    int n_cells;               /* n_datas * n_opts * n_kernels, kernel fastest */
    parity_train_cell_t *cells;
    int text_raw_vocab;  /* GPT-2 ids used by the text corpus (remapped densely) */
    int64_t text_tokens; /* tokens in the text corpus */
} parity_train_report_t;

/* Progress callback (may be NULL): called from worker threads, serialized by the library. */
typedef void (*parity_train_progress_fn)(void *ctx, const char *line);

/* Train every (data, opt) cell for every candidate (1 <= n_cand <= 64; labels may be NULL: the
 * kernels' names). Per (data, opt): the reference, the reference with data order seed + 1,
 * cfg->floor_orders floor runs per distinct (in_dtype, out_dtype) of the candidates, and the
 * candidates; report cells are (data, opt, kernel), kernel fastest. Errors: PARITY_E_INVALID (config), PARITY_E_IO (text data missing; diag names the file),
 * PARITY_E_NOMEM. A failing candidate is not an error: its cell's verdict says so.
 * Free the report with parity_train_report_free. */
parity_status_t parity_train_run(const parity_train_config_t *cfg,
                                 const parity_abi_kernel_t *const *candidates,
                                 const char *const *labels, int n_cand,
                                 const parity_train_data_t *datas, int n_datas,
                                 const parity_train_opt_t *opts, int n_opts,
                                 parity_train_progress_fn progress, void *ctx,
                                 parity_train_report_t **out, parity_diag_t *diag);
void parity_train_report_free(parity_train_report_t *r);

/* Stable JSON report (schema "parity.train/2", docs/train.md); byte-identical for identical
 * inputs. Self-contained SVG, one panel per cell. PARITY_E_IO when the file cannot be written. */
parity_status_t parity_train_write_json(const parity_train_report_t *r, const char *path,
                                        parity_diag_t *diag);
parity_status_t parity_train_write_svg(const parity_train_report_t *r, const char *path,
                                       parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif

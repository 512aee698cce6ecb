/* logprob_rl: what the logprob mismatch between a trainer (dump A) and the rollout engine that
 * sampled the tokens (dump B) does to one GRPO/PPO step: the KL-penalty estimate k3 computed
 * with either side's logprobs, the fraction of tokens whose importance ratio leaves PPO's clip
 * range from the mismatch alone, and truncated importance weights (TIS). Definitions and
 * sources: docs/logprob-metrics.md, "RL effects". Deliberately not here: the main comparison
 * (logprob.h), whose report and JSON are unchanged by this module. */
#ifndef PARITY_LOGPROB_RL_H
#define PARITY_LOGPROB_RL_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/logprob_rl.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stdint.h>
#include <stdio.h>

#include "parity/logprob.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double clip_eps; /* PPO's epsilon: the clip range is [1 - eps, 1 + eps] (default 0.2) */
    double tis_cap;  /* TIS cap C: weights min(r, C) (default 2.0) */
} parity_logprob_rl_opts_t;

parity_logprob_rl_opts_t parity_logprob_rl_default_opts(void);

/* One slice ("overall", "modality=NAME"); r = p_A / p_B = pi_train / pi_rollout per token.
 * Means over the slice's paired tokens; NaN when it has none. */
typedef struct {
    char name[96];
    uint64_t n_tokens;
    double k3_rollout;    /* mean (r - 1) - log r: the penalty with the policy's logprobs from
                             the rollout, the reference's from the trainer (unbiased KL(B||A)) */
    double k3_trainer;    /* mean (1/r - 1) + log r: policy from the trainer, reference from the
                             rollout, still on the rollout's samples (not importance-weighted) */
    double k3_trainer_is; /* mean r ((1/r - 1) + log r): the same, importance-weighted: unbiased
                             for KL(A||B) */
    double clip_frac_low, clip_frac_high, clip_frac; /* r < 1 - eps, r > 1 + eps, either */
    double tis_mean, tis_max; /* of min(r, C) */
    double tis_frac_capped;   /* r > C */
    double tis_ess;           /* (sum w)^2 / (n sum w^2) of w = min(r, C) */
    double iw_mean;           /* mean r (untruncated; 1 in expectation) */
} parity_logprob_rl_slice_t;

typedef struct parity_logprob_rl_result parity_logprob_rl_result_t;

/* Reads both dumps to the end (from freshly opened readers; both are held in memory), pairs
 * requests by id and tokens by position up to the first token-id divergence, and computes the
 * slices overall and per modality tag of A. PARITY_E_INVALID for NULLs or eps outside (0, 1),
 * a cap below 1; reader errors are passed on; PARITY_E_NOMEM. */
parity_status_t parity_logprob_rl_compute(parity_logprob_reader_t *a, parity_logprob_reader_t *b,
                                          const parity_logprob_rl_opts_t *opts,
                                          parity_logprob_rl_result_t **out, parity_diag_t *diag);
void parity_logprob_rl_result_free(parity_logprob_rl_result_t *r); /* NULL is a no-op */
size_t parity_logprob_rl_nslices(const parity_logprob_rl_result_t *r);
const parity_logprob_rl_slice_t *parity_logprob_rl_slice(const parity_logprob_rl_result_t *r,
                                                         size_t i);

/* The table (text) and JSON (schema parity.logprobs.rl/1, written atomically). */
parity_status_t parity_logprob_rl_report_text(const parity_logprob_rl_result_t *r, FILE *f);
parity_status_t parity_logprob_rl_report_json(const parity_logprob_rl_result_t *r, const char *path,
                                              parity_diag_t *diag);

#ifdef __cplusplus
}
#endif

/* The names before issue #40 (parity/deprecated.h), for one release. */
#define PARITY_LOGPROB_RL_H_DECLARED
#include "parity/deprecated.h"
#endif

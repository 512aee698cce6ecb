/* Verifier power: how weak a defect parity and each baseline rule still catch on an op.
 * Families of mutants, weakest first within each family, are built from the op's own reference
 * and emulation (outputs, not kernels: they skip the harness and go straight to the judges):
 *   acc_seq / acc_pair  an accumulator of m = 8..23 significant bits (sequential, pairwise),
 *                       the op's emulation with terms as a faithful fp32 kernel forms them;
 *   drop                updates dropped at rate p = 1e-2..1e-6: each of an element's k terms
 *                       lost with probability p (Poisson(k p) of them), each of the element's
 *                       mean |term| = s_acc / k and a random sign;
 *   tail                the last term of every reduction dropped (a loop bound off by one),
 *                       modelled the same way (one mean |term|, random sign);
 *   inputs              the faithful fp32 catalog kernel on inputs rounded one format lower
 *                       (tf32), and two (bf16).
 * Plus two controls that must pass (a catch there is a false alarm): the fp32 accumulator's
 * emulation (m = 24) and the faithful kernel itself. Parity judges on the op's presets (the
 * quick ones, then the production ones); each baseline on its own input scheme. Deliberately
 * not here: kernels under test (parity check judges those). */
#ifndef PARITY_POWER_H
#define PARITY_POWER_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/power.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include "parity/baseline.h"
#include "parity/op.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_POWER_N_JUDGES (1 + PARITY_N_BASELINES) /* parity, then the rules in order */
#define PARITY_POWER_MIN_BITS 8
#define PARITY_POWER_MAX_BITS 23
#define PARITY_POWER_N_RATES 5 /* 1e-2 .. 1e-6 */

/* What one judge catches on one shape set. */
typedef struct {
    int acc_seq_bits;  /* largest m with every accumulator of 8..m bits caught (sequential);
                          7: not even 8 bits; -1: the op has no emulation */
    int acc_pair_bits; /* the same, pairwise order */
    double drop_rate;  /* smallest rate with every larger one of 1e-2..1e-6 caught; 0: none */
    int tail;          /* the dropped last term caught */
    int inputs_tf32, inputs_bf16; /* inputs rounded to tf32 / bf16 caught; -1: no kernel */
    int alarm_fp32_acc;  /* false alarm on the m = 24 emulation (-1: no emulation) */
    int alarm_faithful;  /* false alarm on the faithful kernel (-1: no kernel) */
    int caught_seq[PARITY_POWER_MAX_BITS + 1];  /* per m (index m), -1 where not run */
    int caught_pair[PARITY_POWER_MAX_BITS + 1];
    int caught_drop[PARITY_POWER_N_RATES];
} parity_power_cell_t;

typedef struct {
    int quick;          /* only the quick shape set */
    uint64_t seed;      /* parity's workloads (the baselines keep their own seeds) */
    double row_budget;  /* emulated terms per output and mutant (rows are sampled to fit) */
    const char *workload; /* parity on this one workload ("text", "text@NxD[xV]") as the only
                             (quick) set, or NULL for the op's presets */
    int n_threads;      /* as parity_check_opts_t.n_threads: N > 0 exactly N, 0 all cores */
    void (*progress)(void *ctx, const char *msg);
    void *progress_ctx;
} parity_power_opts_t;

typedef struct {
    const parity_op_t *op;
    int n_sets;                         /* 1 (quick) or 2 (quick, production) */
    int n_workloads[2];                 /* parity's workloads per set */
    char set_name[2][64];               /* "quick", "production", or the --workload name */
    int64_t rows_judged[2], rows_total[2]; /* parity's sampled rows out of all, per set */
    parity_power_cell_t cell[2][PARITY_POWER_N_JUDGES]; /* [set][judge] */
    double seconds[2];
    const char *kernel; /* the faithful kernel used for the inputs family (NULL: none) */
} parity_power_result_t;

/* Defaults: seed 1, both sets, 2^24 emulated terms per output and mutant, one thread. */
void parity_power_opts_default(parity_power_opts_t *o);

/* Name of judge j: "parity", then parity_baseline_name(j - 1). */
const char *parity_power_judge_name(int j);

/* Sweep the mutant families over op. PARITY_OK with r filled, or an error with diag set
 * (missing data, no memory). */
parity_status_t parity_power_run(const parity_op_t *op, const parity_power_opts_t *o,
                                 parity_power_result_t *r, parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif

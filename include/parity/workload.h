/* Workload generators: every input is a pure function of (spec, seed). Token ids uniform, Zipf(s)
 * or real text (tinyshakespeare through GPT-2 BPE); values unit-normal, gradient-scale, with
 * outlier channels, uniform [0,1) (as some public verifiers use), exact small integers or sparse
 * powers of two (docs/workloads.md).
 * Deliberately not here: which workloads an op runs (the op's presets, op.h). */
#ifndef PARITY_WORKLOAD_H
#define PARITY_WORKLOAD_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/workload.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/rng.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_IDS_UNIFORM = 0, /* each id uniform over [0, V) */
    PARITY_IDS_ZIPF = 1,    /* P(rank r) ~ r^-s over V ranks, ranks mapped to ids by a seeded
                               permutation */
    PARITY_IDS_TEXT = 2     /* tinyshakespeare.txt encoded with GPT-2 BPE (V = 50257): a window
                               of N consecutive tokens at a seed-chosen offset */
} parity_ids_kind_t;

typedef enum {
    PARITY_VALS_NORMAL = 0,    /* N(0, 1) * scale */
    PARITY_VALS_GRADSCALE = 1, /* per row a magnitude 10^U(-6,-3), times N(0,1): real backward
                                  passes carry gradients of 1e-3..1e-6 */
    PARITY_VALS_OUTLIER = 2,   /* N(0,1)*scale, with `outliers` seed-chosen channels (columns)
                                  multiplied by outlier_factor */
    PARITY_VALS_UNIFORM01 = 3, /* U[0,1) * scale (torch.rand, as KernelBench feeds kernels) */
    PARITY_VALS_INTPROBE = 4,  /* integers uniform in [-4, 4]: exact sums stay representable in
                                  fp32, so any lost addition shows */
    PARITY_VALS_ONES = 5,      /* all 1 (e.g. freshly initialised norm weights) */
    PARITY_VALS_SPARSE_POW2 = 6 /* sparse and exactly representable: 0 with probability 1/2, else
                                  ±2^e with e uniform in [-PARITY_POW2_EMAX, PARITY_POW2_EMAX],
                                  times scale (a power of two keeps it exact). Sums of products
                                  of such values are exact in fp32 up to the term counts derived
                                  in docs/workloads.md, so a dropped term, a wrong index or a
                                  missed tail is an error of at least 2^-2EMAX*scale, not noise */
} parity_vals_kind_t;

/* Largest |exponent| of PARITY_VALS_SPARSE_POW2. A product of f such values is a multiple of
 * 2^(-f*EMAX) of magnitude <= 2^(f*EMAX), so every partial sum of n products fits fp32's 24 bits
 * while n <= 2^(24 - 2*f*EMAX): with EMAX = 2, 2^20 inputs (f = 1), 2^16 products of two, 2^12
 * of three (docs/workloads.md, "exact"). */
#define PARITY_POW2_EMAX 2

typedef enum {
    PARITY_GAMMA_ONES = 0,    /* as at initialisation (and as public benchmarks use) */
    PARITY_GAMMA_TRAINED = 1, /* exp(0.5 * N(0,1)): positive, spread around 1, as after training */
    PARITY_GAMMA_NORMAL = 2   /* N(0,1) */
} parity_gamma_kind_t;

/* A named workload for an op. Shape letters: N tokens (rows of the activations), D hidden size,
 * V vocabulary size. Ops ignore fields they do not use. */
typedef struct {
    const char *name;
    const char *summary;
    int64_t n, d, v;
    parity_ids_kind_t ids;
    double zipf_s;
    parity_vals_kind_t dy_vals; /* upstream gradient */
    double dy_scale;
    parity_vals_kind_t x_vals; /* activations / inputs */
    double x_scale;
    parity_gamma_kind_t gamma;
    int outliers;          /* outlier channels in x (PARITY_VALS_OUTLIER) */
    double outlier_factor; /* their scale factor */
    int production;        /* 1: production-sized, skipped by --quick */
    char label[128];       /* storage for the name of a derived workload ("text@4097x257") */
} parity_workload_t;

/* Token ids for a workload: n ids in [0, v). For PARITY_IDS_TEXT, v must be >= 50257 and the
 * shared data must be present (PARITY_E_IO otherwise, diag names the file).
 * stream separates independent draws from one seed. */
parity_status_t parity_workload_ids(const parity_workload_t *w, uint64_t seed, int64_t n, int64_t v,
                                    int32_t *ids, parity_diag_t *diag);

/* Values of the given kind for rows [row_begin, row_end) of a rows x cols matrix, row-major,
 * into out ((row_end - row_begin) * cols doubles, exact; the caller stores them into the kernel's
 * dtype). Each row draws from its own rng stream derived from (seed, stream, row), so any split
 * of the rows (threads, chunks) gives the same values. Outlier channels depend on (seed, stream)
 * only. Row i's rng stream is ((100 + stream) << 40) ^ i: only the low 24 bits of `stream` count,
 * so use small stream numbers (two streams equal mod 2^24 give proportional matrices). */
void parity_workload_values(parity_vals_kind_t kind, double scale, int outliers,
                            double outlier_factor, uint64_t seed, uint64_t stream,
                            int64_t row_begin, int64_t row_end, int64_t cols, double *out);

/* One value of `kind` (before any scale) from rng: the hook for ops that draw their values one
 * at a time (attention, log_softmax, the MoE router). PARITY_VALS_UNIFORM01 gives U[0,1),
 * PARITY_VALS_SPARSE_POW2 its sparse powers of two, PARITY_VALS_INTPROBE an integer in [-4, 4],
 * PARITY_VALS_ONES 1, every other kind N(0,1). */
double parity_workload_draw(parity_vals_kind_t kind, parity_rng_t *rng);

/* 1 if values of `kind` are symmetric with independent signs: each value's sign is a fair coin,
 * independent of its magnitude and of every other value (N(0,1) and its scaled, gradient-scale
 * and outlier-channel forms; integers uniform in [-4, 4]; sparse +-2^e), 0 otherwise (U[0,1),
 * ones). A product with one such factor, or a function odd in such a row, is symmetric too: what
 * the error model's symmetric reduction class needs (docs/error-model.md). */
int parity_vals_symmetric(parity_vals_kind_t kind);
/* 1 when the kind is drawn from a continuous distribution (normal, gradient-scale, outlier,
 * U[0,1)): rows of it are distinct, which the per-term split across terms needs (op.h s_up2). */
int parity_vals_continuous(parity_vals_kind_t kind);

/* Gamma (norm weight) of length d. */
void parity_workload_gamma(parity_gamma_kind_t kind, uint64_t seed, int64_t d, double *out);

/* The GPT-2 token ids of tinyshakespeare.txt (cached after the first call; thread-safe).
 * *ids stays owned by the library. */
parity_status_t parity_workload_text_ids(const int32_t **ids, size_t *n, parity_diag_t *diag);

/* The raw bytes of GPT-2 token `id` for reports ("" if unavailable); *len gets the length. */
const char *parity_workload_token_text(int32_t id, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

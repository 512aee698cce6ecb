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

/* How one generated input's values are drawn: the kind, times scale. */
typedef struct {
    parity_vals_kind_t kind;
    double scale;
} parity_vals_t;

/* How token ids are drawn: the kind, and s of PARITY_IDS_ZIPF (unused otherwise). */
typedef struct {
    parity_ids_kind_t kind;
    double zipf_s;
} parity_ids_t;

/* A named workload for an op (docs/architecture.md, "Adding a workload"): the fields every op
 * shares, and `params`, the op family's own parameter struct (ops/<family>/<family>.h: which
 * values each input draws, attention's mask and softcap, the MoE router's k), which the family
 * describes field by field in its parity_workload_family_t (the op's wl_family). Presets are
 * written with designated initializers; a workload derived from a preset (another shape, a
 * baseline rule's variant) keeps its params. An op refuses a workload whose params are NULL:
 * there is no silent default. */
typedef struct parity_workload {
    const char *name;
    const char *summary;
    int64_t n, d, v;       /* the shape: the op's letters N, D, V (its summary says what each is) */
    int production;        /* 1: production-sized, skipped by --quick */
    const void *params;    /* the op family's parameter struct */
    char label[128];       /* storage for the name of a derived workload ("text@4097x257") */
} parity_workload_t;

/* The field types a family's parameter struct is made of, as its field table names them. */
typedef enum {
    PARITY_WL_VALS = 1,  /* parity_vals_t: an input's value scheme */
    PARITY_WL_IDS = 2,   /* parity_ids_t: a token-id scheme */
    PARITY_WL_GAMMA = 3, /* parity_gamma_kind_t */
    PARITY_WL_INT = 4,   /* int */
    PARITY_WL_DOUBLE = 5 /* double */
} parity_wl_field_type_t;

/* One field of a family's parameter struct: its name as `parity ops OP --workloads` prints it,
 * its type and where it is (offsetof). */
typedef struct {
    const char *name;
    parity_wl_field_type_t type;
    size_t offset;
    const char *what; /* one line: what the op does with it */
} parity_wl_field_t;

/* A field table entry for member `member` of struct type T: PARITY_WL_FIELD(T, dy, PARITY_WL_VALS,
 * "upstream gradient dy (N,D)"). */
#define PARITY_WL_FIELD(T, member, type, what) {#member, type, offsetof(T, member), what}

/* Largest parameter struct a family may have: derived workloads copy theirs into storage of this
 * size (parity_workload_own_params). */
#define PARITY_WL_PARAMS_MAX 256
#define PARITY_WL_MAX_FIELDS 16

/* An op family's workload parameters: the struct's size and its fields, every one of them (the
 * describe text, the noise-floor cache key and the baseline rules' derived schemes are read from
 * this table, so a field it omits is a field nothing else sees). */
typedef struct parity_workload_family {
    const char *name; /* "embedding", "attention" */
    size_t size;      /* sizeof the parameter struct (<= PARITY_WL_PARAMS_MAX) */
    int n_fields;
    parity_wl_field_t fields[PARITY_WL_MAX_FIELDS];
} parity_workload_family_t;

/* Storage for a derived workload's own copy of its parameters. */
typedef struct {
    union {
        double align_d;
        void *align_p;
        unsigned char bytes[PARITY_WL_PARAMS_MAX];
    } u;
} parity_wl_params_store_t;

/* The params of wl, or NULL (with why in diag, naming the workload and the op) when wl carries
 * none: an op's build starts with it. */
const void *parity_workload_params(const parity_workload_t *wl, const char *op, parity_diag_t *diag);
/* Gives w its own copy of its params (a struct of family fam) in *store, which must outlive w and
 * every copy of w, and returns it for editing; NULL when w has none. */
void *parity_workload_own_params(const parity_workload_family_t *fam, parity_workload_t *w,
                                 parity_wl_params_store_t *store);
/* Prints w's parameters, as family fam describes them, as "key=value" pairs separated by one
 * space, every field in table order: value schemes as KIND*SCALE ("normal*1", "gradscale*1e-35"),
 * ids as "zipf(1.1)", "text", "uniform"; numbers exact: the shortest %g that reads back, 2^e for a
 * power of two beyond 2^±10, or %a when hex is 1 (the cache key's form). Returns what snprintf
 * returns; "" and 0 for a workload without params. */
int parity_workload_describe(const parity_workload_family_t *fam, const parity_workload_t *w, int hex,
                             char *buf, size_t cap);
/* Applies map to every value scheme (PARITY_WL_VALS field) of params, a struct of family fam. */
void parity_workload_map_vals(const parity_workload_family_t *fam, void *params,
                              parity_vals_kind_t (*map)(parity_vals_kind_t kind, void *ctx), void *ctx);
/* Applies map to every token-id scheme (PARITY_WL_IDS field) of params, a struct of family fam. */
void parity_workload_map_ids(const parity_workload_family_t *fam, void *params,
                             parity_ids_kind_t (*map)(parity_ids_kind_t kind, void *ctx), void *ctx);
/* 1 if params (of family fam) has a token-id scheme (PARITY_WL_IDS field) of that kind. */
int parity_workload_has_ids(const parity_workload_family_t *fam, const void *params,
                            parity_ids_kind_t kind);
/* The names PARITY_VALS_*, PARITY_IDS_*, PARITY_GAMMA_* print as in the describe text. */
const char *parity_vals_kind_name(parity_vals_kind_t k);
const char *parity_ids_kind_name(parity_ids_kind_t k);
const char *parity_gamma_kind_name(parity_gamma_kind_t k);

/* Token ids: n ids in [0, v) drawn as `ids` says. For PARITY_IDS_TEXT, v must be >= 50257 and the
 * shared data must be present (PARITY_E_IO otherwise, diag names the file); `what` names the
 * workload in messages. */
parity_status_t parity_workload_ids(const char *what, parity_ids_t ids, uint64_t seed, int64_t n,
                                    int64_t v, int32_t *out, parity_diag_t *diag);

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

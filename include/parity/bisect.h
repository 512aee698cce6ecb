/* bisect: which module of a model first departs, and whether it introduced the drift or
 * inherited it. A capture (format "parity.capture/1", docs/bisect.md) holds, per module in
 * execution order, its inputs and outputs (and, for MoE blocks, the router's top-k ids and
 * gates), optionally the module's outputs REPLAYED on another capture's inputs; it is written by
 * `parity model capture` (the C model's paths) and by python/parity/_capture.py (PyTorch
 * forward hooks). parity_bisect compares two captures module by module against a per-module
 * floor. Deliberately not here: running any model (model.h fills a capture through hooks). */
#ifndef PARITY_BISECT_H
#define PARITY_BISECT_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/bisect.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_CAPTURE_SCHEMA "parity.capture/1"
#define PARITY_CAPTURE_MAX_IO 4   /* tensors per side of a module */

/* One tensor of a module, held as doubles (exact for every float dtype of the file). rows is
 * the product of every dimension but the last, width the last one. */
typedef struct {
    char *tensor;            /* its safetensors name: "<module>.in.<i>" etc. */
    char dtype[8];           /* as stored: "F64", "F32", "BF16", "F16"; integers ("I64", "I32", ...:
                                token ids, indices) exact up to 2^53, compared for equality only */
    int ndim;
    uint64_t shape[8];
    size_t rows, width;
    double *v;               /* rows * width */
} parity_capture_tensor_t;

typedef struct {
    char *name;              /* module path: "layers.0.attn", "model.layers.1.mlp" */
    char *kind;              /* "embedding", "rmsnorm", "add_rmsnorm", "attention", "mlp", "moe",
                                "linear", ... or the PyTorch class name */
    int n_in, n_out, n_replay;  /* n_replay: 0 or n_out */
    parity_capture_tensor_t in[PARITY_CAPTURE_MAX_IO], out[PARITY_CAPTURE_MAX_IO],
        replay[PARITY_CAPTURE_MAX_IO];
    /* routing (MoE blocks), topk 0 when absent: ids/gates (rows, topk), probs (rows, experts)
     * or NULL */
    int topk, experts;
    size_t route_rows;
    int32_t *route_ids;
    double *route_gates, *route_probs;
} parity_capture_module_t;

typedef struct {
    char *id;                /* unique id of this capture (replays name it) */
    char *model, *path, *producer;
    size_t rows;             /* token rows of the sequence-shaped tensors */
    size_t n_seq;
    size_t *seq_start, *seq_len;   /* sequences as row ranges (NULL when n_seq == 0) */
    char **modality;         /* per row ("text", "image"), or NULL */
    char *replay_of;         /* id of the capture whose inputs the replays used, or NULL */
    size_t n_mod, cap_mod;
    parity_capture_module_t *mod;
} parity_capture_t;

/* An empty capture (free with parity_capture_free). */
parity_capture_t *parity_capture_new(const char *model, const char *path, const char *producer);
void parity_capture_free(parity_capture_t *c);
/* Appends a module (names copied); returns it or NULL (out of memory). */
parity_capture_module_t *parity_capture_add_module(parity_capture_t *c, const char *name,
                                                   const char *kind);
/* Allocates tensor side ('i' in, 'o' out, 'r' replay) index k of (rows, width) zeros. */
parity_status_t parity_capture_alloc(parity_capture_module_t *m, char side, int k, size_t rows,
                                     size_t width);
parity_status_t parity_capture_alloc_routing(parity_capture_module_t *m, size_t rows, int topk,
                                             int experts);

/* Writes DIR/capture.json and DIR/capture.safetensors (DIR is created when missing); tensors
 * are stored as F64 (values held as doubles: exact). PARITY_E_IO names the file. */
parity_status_t parity_capture_write(const parity_capture_t *c, const char *dir, parity_diag_t *diag);
/* Reads a capture directory (or its capture.json). PARITY_E_FORMAT/PARITY_E_IO with diag naming
 * the file, the field or tensor, and what was expected (a truncated file names the tensor). */
parity_status_t parity_capture_read(const char *dir, parity_capture_t **out, parity_diag_t *diag);

/* ------------------------------------------------------------------------------------------ */
/* Bisect                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const parity_capture_t *a, *b;
    const parity_capture_t *floor;   /* a repeat of A's side (A2), or NULL */
    const parity_capture_t *golden;  /* the fp64 run, or NULL */
    double floor_factor;             /* a module departs when introduced > factor * floor */
    double flat_threshold;           /* the comparators' walk: 1 - 2<x,y>/(|x|^2+|y|^2) > this */
    const char *name_a, *name_b, *name_floor, *name_golden;  /* labels for messages (may be NULL) */
} parity_bisect_opts_t;

void parity_bisect_opts_default(parity_bisect_opts_t *o);

typedef struct {
    const char *name, *kind;
    double drift_in, drift_out;      /* relative L2 of B vs A over the inputs / outputs */
    double max_abs_out;              /* max |B - A| over the outputs */
    double cos_metric;               /* 1 - 2<a,b>/(|a|^2 + |b|^2) of the outputs */
    double introduced, inherited;
    int replayed;                    /* 1: introduced from B's replay on A's inputs; 0: estimate */
    double floor;                    /* the floor of `introduced` (0 without floor runs) */
    int floor_source;                /* 0 none, 1 repeat (--floor), 2 golden */
    double drift_golden_a, drift_golden_b;  /* outputs vs the golden (NaN without one) */
    int departs;
    int n_slices;                    /* per-modality relative L2 of the outputs */
    char slice_name[4][16];
    double slice_drift[4];
} parity_bisect_module_t;

typedef struct {
    const char *module;
    size_t row, seq, token;
    int32_t a[16], b[16];
    int k;
    double margin;                   /* A's gap between its K-th and (K+1)-th router prob; NaN
                                        when A recorded no probs */
} parity_bisect_flip_t;

typedef struct {
    size_t n_mod;
    parity_bisect_module_t *mod;
    long first;                      /* index of the first departing module, -1: none; of
                                        nested modules the innermost departing one (bisect.c) */
    long flat_first;                 /* the flat walk's first flagged module (innermost too), -1 */
    size_t *rank;                    /* module indices ranked by introduced / floor, worst first */
    size_t n_flips, cap_flips;
    parity_bisect_flip_t *flips;
    char note[1024];                 /* lines about the floor, the replays, swapped kinds,
                                        nesting, integer tensors ("" when none) */
} parity_bisect_result_t;

/* Compares o->b against o->a. PARITY_E_FORMAT (CLI exit 3) with diag naming the first mismatch
 * (model, module count, name, tensor count or shape) of captures that cannot be compared; a
 * module of another kind in B (a swapped implementation) is compared, with a note. */
parity_status_t parity_bisect(const parity_bisect_opts_t *o, parity_bisect_result_t *res,
                              parity_diag_t *diag);
void parity_bisect_result_free(parity_bisect_result_t *res);

/* Reports: text (the answer, then a per-module table and routing flips), JSON
 * (first_departing, modules, flips, flat_walk) and a self-contained HTML page with a
 * per-module plot of drift vs floor. */
void parity_bisect_print_text(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r);
void parity_bisect_print_json(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r);
void parity_bisect_print_html(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r);

#ifdef __cplusplus
}
#endif
#endif

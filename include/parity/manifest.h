/* Environment and topology manifests: a documented JSON record of what a run ran on (GPU,
 * driver, CUDA/NCCL/cuBLAS versions, TP/PP/EP/DP and the rank->device map, NCCL_* settings,
 * all-reduce implementation, fusion flags, backends, dtypes, batch invariance, sampling), capture
 * of what can be detected, and a diff ranked by how likely each difference is to cause numerical
 * drift. Schema and ranking rules: docs/manifest.md. Deliberately not here: judging drift itself. */
#ifndef PARITY_MANIFEST_H
#define PARITY_MANIFEST_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/manifest.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>

#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_MANIFEST_SCHEMA "parity.manifest/1"

typedef struct parity_manifest parity_manifest_t;

/* An empty manifest ({"schema": "parity.manifest/1"}). PARITY_E_NOMEM. */
parity_status_t parity_manifest_new(parity_manifest_t **out);
void parity_manifest_free(parity_manifest_t *m); /* NULL is a no-op */

/* Parse and validate JSON text; name (may be NULL) is used in diag ("a.json: parallel.tp: expected
 * a positive integer, got \"eight\""). PARITY_E_FORMAT for malformed JSON or a schema violation,
 * PARITY_E_INVALID for NULL arguments, PARITY_E_NOMEM. *out is NULL on failure. */
parity_status_t parity_manifest_parse(const char *text, const char *name, parity_manifest_t **out,
                                      parity_diag_t *diag);
/* Read a file and parse it: PARITY_E_IO when it cannot be read. */
parity_status_t parity_manifest_load(const char *path, parity_manifest_t **out,
                                     parity_diag_t *diag);

/* Fill what can be detected: NCCL_* and CUDA_VISIBLE_DEVICES / CUDA_VERSION / NCCL_VERSION
 * environment variables, and, when probe != 0, nvidia-smi (GPU model, driver, count) and mpirun
 * (MPI version) when they are on PATH. Never fails because a tool is missing. */
parity_status_t parity_manifest_capture(parity_manifest_t *m, int probe, parity_diag_t *diag);

/* Set a dotted key ("parallel.tp", "nccl.NCCL_ALGO", "fusion.allreduce_rmsnorm") from text: an
 * integer, a number, true/false, a comma list of integers for parallel.rank_device_map, else a
 * string. The result is validated: PARITY_E_FORMAT (diag says which field and what was expected)
 * leaves m unchanged. PARITY_E_INVALID for a key that is not SECTION.NAME. */
parity_status_t parity_manifest_set(parity_manifest_t *m, const char *key, const char *value,
                                    parity_diag_t *diag);

/* The manifest as JSON (sections and keys sorted: the same content gives the same bytes).
 * Caller frees with free(). NULL on allocation failure. */
char *parity_manifest_to_json(const parity_manifest_t *m);

/* One difference between two manifests. */
typedef struct {
    char key[128];     /* dotted path */
    char a[160], b[160]; /* values as JSON text; "(absent)" when missing on that side */
    int score;         /* 0..100: how likely this difference causes numerical drift */
    const char *reason; /* one line, static */
} parity_manifest_diff_t;

/* The differences of a and b ranked by score (highest first, then key order). *out is allocated
 * (free with free()); *n its length (0: identical). PARITY_E_INVALID, PARITY_E_NOMEM. */
parity_status_t parity_manifest_diff(const parity_manifest_t *a, const parity_manifest_t *b,
                                     parity_manifest_diff_t **out, size_t *n);
/* The score and reason the ranking rules give a dotted key. */
int parity_manifest_rank_key(const char *key, const char **reason);

#ifdef __cplusplus
}
#endif
#endif

/* Candidate kernels: the built-in catalog (faithful variants and known-bad mutants) and plugins
 * loaded from shared objects through the versioned ABI of kernel_abi.h.
 * Deliberately not here: running or judging kernels (verify.h). */
#ifndef PARITY_KERNEL_H
#define PARITY_KERNEL_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/kernel.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include "parity/kernel_abi.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A resolved candidate: the ABI entry and a label for reports ("builtin:fp32_seq",
 * "./libmine.so:fast"). */
typedef struct {
    const parity_abi_kernel_t *k;
    char label[512];
    int builtin;
} parity_kernel_ref_t;

typedef struct {
    parity_kernel_ref_t *items;
    int n;
    void **handles; /* dlopen handles to close */
    int n_handles;
} parity_kernel_list_t;

/* The catalog, all ops together. The kernels are static: never freed, valid for the process. */
int parity_catalog_count(void);
const parity_abi_kernel_t *parity_catalog_at(int i);

/* Append the kernels a spec names, for `op`:
 *   builtin:NAME     one catalog kernel of op
 *   builtin:all      every catalog kernel of op
 *   PATH.so[:NAME]   a plugin's kernels for op (or the one named NAME)
 * Errors: PARITY_E_NOTFOUND (unknown builtin / no kernel for op in the plugin),
 * PARITY_E_IO (the shared object cannot be loaded), PARITY_E_FORMAT (no entry symbol, ABI
 * version from the future, malformed table); diag names the file and what was expected.
 * Ownership: list is caller storage, zeroed before the first call ({0}); items is realloc'd at
 * every append, so a pointer to an item (parity_kernel_result_t.kr) is stale after the next
 * append. items[].k points into the catalog (static) or into a loaded plugin; plugins are never
 * unloaded (dlclose is skipped on purpose), so k stays valid for the process.
 * parity_kernel_list_free frees items and handles and leaves the list empty (NULL ok). */
parity_status_t parity_kernel_resolve(const char *spec, const char *op, parity_kernel_list_t *list,
                                      parity_diag_t *diag);
void parity_kernel_list_free(parity_kernel_list_t *list);

#ifdef __cplusplus
}
#endif
#endif

/* The built-in catalog and the plugin loader. */
#include "parity/kernel.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/op/registry.h"

/* The catalog: the tables the ops' records carry, in registry order, each table once (a table
 * shared by two ops, rmsnorm's fwd and bwd kernels, is listed at the first): the listing order. */
static const parity_abi_kernel_t *catalog_table(int t, int *n)
{
    int seen = 0;
    for (int i = 0; i < parity_registry_op_count(); i++) {
        const parity_op_t *op = parity_registry_op(i);
        for (int c = 0; c < PARITY_OP_MAX_CATALOGS && op->catalog[c].table; c++) {
            int dup = 0;
            for (int j = 0; j <= i && !dup; j++) {
                const parity_op_t *o = parity_registry_op(j);
                for (int e = 0; e < PARITY_OP_MAX_CATALOGS && !dup; e++)
                    if ((j < i || e < c) && o->catalog[e].table == op->catalog[c].table) dup = 1;
            }
            if (dup) continue;
            if (seen++ == t) {
                *n = *op->catalog[c].count;
                return op->catalog[c].table;
            }
        }
    }
    *n = 0;
    return NULL;
}

int parity_catalog_count(void)
{
    int n = 0, k;
    for (int t = 0; catalog_table(t, &k); t++) n += k;
    return n;
}

const parity_abi_kernel_t *parity_catalog_at(int i)
{
    if (i < 0) return NULL;
    int k;
    for (int t = 0;; t++) {
        const parity_abi_kernel_t *tab = catalog_table(t, &k);
        if (!tab) return NULL;
        if (i < k) return &tab[i];
        i -= k;
    }
}

static parity_status_t push(parity_kernel_list_t *l, const parity_abi_kernel_t *k,
                            const char *label, int builtin)
{
    parity_kernel_ref_t *p = realloc(l->items, (size_t)(l->n + 1) * sizeof *p);
    if (!p) return PARITY_E_NOMEM;
    l->items = p;
    p[l->n].k = k;
    p[l->n].builtin = builtin;
    snprintf(p[l->n].label, sizeof p[l->n].label, "%s", label);
    l->n++;
    return PARITY_OK;
}

static parity_status_t resolve_builtin(const char *name, const char *op, parity_kernel_list_t *l,
                                       parity_diag_t *diag)
{
    int found = 0;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (strcmp(k->op, op) != 0) continue;
        if (strcmp(name, "all") != 0 && strcmp(name, k->name) != 0) continue;
        char label[512];
        snprintf(label, sizeof label, "builtin:%s", k->name);
        parity_status_t st = push(l, k, label, 1);
        if (st != PARITY_OK) return st;
        found++;
    }
    if (!found)
        return parity_diag_set(diag, PARITY_E_NOTFOUND,
                               "no built-in kernel '%s' for op %s (list them: parity kernels %s)",
                               name, op, op);
    return PARITY_OK;
}

static parity_status_t resolve_plugin(const char *spec, const char *op, parity_kernel_list_t *l,
                                      parity_diag_t *diag)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", spec);
    const char *want = NULL;
    /* PATH[:NAME]: the last ':' after the last '/' separates a kernel name. */
    char *colon = strrchr(path, ':'), *slash = strrchr(path, '/');
    if (colon && (!slash || colon > slash)) {
        *colon = '\0';
        want = colon + 1;
    }
    /* dlopen searches the library path for a bare name: require a path so "foo.so" means ./foo.so */
    char full[4200];
    if (!strchr(path, '/')) snprintf(full, sizeof full, "./%s", path);
    else snprintf(full, sizeof full, "%s", path);
    void *h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot load shared object: %s", path,
                               dlerror());
    void **hs = realloc(l->handles, (size_t)(l->n_handles + 1) * sizeof *hs);
    if (!hs) {
        dlclose(h);
        return PARITY_E_NOMEM;
    }
    l->handles = hs;
    l->handles[l->n_handles++] = h;
    parity_plugin_entry_fn entry;
    *(void **)(&entry) = dlsym(h, PARITY_PLUGIN_ENTRY_SYMBOL);
    if (!entry)
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: no symbol '%s': a parity plugin must export "
                               "`const parity_abi_plugin_t *%s(void)` (see docs/plugins.md)",
                               path, PARITY_PLUGIN_ENTRY_SYMBOL, PARITY_PLUGIN_ENTRY_SYMBOL);
    const parity_abi_plugin_t *pl = entry();
    if (!pl)
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: %s() returned NULL", path,
                               PARITY_PLUGIN_ENTRY_SYMBOL);
    if (pl->abi_version == 0 || pl->abi_version > PARITY_ABI_VERSION)
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: abi_version %u, but this parity understands versions 1..%u: "
                               "rebuild the plugin against this parity's kernel_abi.h or upgrade "
                               "parity", path, pl->abi_version, PARITY_ABI_VERSION);
    if (pl->struct_size < offsetof(parity_abi_plugin_t, kernels) + sizeof(void *))
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: plugin struct_size %u is too small",
                               path, pl->struct_size);
    if (pl->n_kernels < 0 || pl->n_kernels > 100000 || (pl->n_kernels > 0 && !pl->kernels))
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: n_kernels %d / kernels table invalid",
                               path, pl->n_kernels);
    /* Kernel entries are kernels[0].struct_size bytes apart, so newer plugins with longer entries
     * still load; fields beyond what this parity knows are ignored. */
    size_t stride = pl->n_kernels > 0 ? pl->kernels[0].struct_size : sizeof(parity_abi_kernel_t);
    size_t min_size = offsetof(parity_abi_kernel_t, run) + sizeof(void *);
    if (pl->n_kernels > 0 && stride < min_size)
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: kernel struct_size %zu is smaller than ABI v1's %zu", path,
                               stride, min_size);
    int found = 0;
    for (int i = 0; i < pl->n_kernels; i++) {
        const parity_abi_kernel_t *k =
            (const parity_abi_kernel_t *)((const char *)pl->kernels + (size_t)i * stride);
        if (!k->name || !k->op || !k->run)
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "%s: kernel #%d has a NULL name, op or run", path, i);
        if (strcmp(k->op, op) != 0) continue;
        if (want && strcmp(want, k->name) != 0) continue;
        char label[512];
        snprintf(label, sizeof label, "%.380s:%.120s", path, k->name);
        parity_status_t st = push(l, k, label, 0);
        if (st != PARITY_OK) return st;
        found++;
    }
    if (!found)
        return parity_diag_set(diag, PARITY_E_NOTFOUND, "%s: no kernel %s%sfor op %s", path,
                               want ? want : "", want ? " " : "", op);
    return PARITY_OK;
}

parity_status_t parity_kernel_resolve(const char *spec, const char *op, parity_kernel_list_t *l,
                                      parity_diag_t *diag)
{
    if (strncmp(spec, "builtin:", 8) == 0) return resolve_builtin(spec + 8, op, l, diag);
    return resolve_plugin(spec, op, l, diag);
}

void parity_kernel_list_free(parity_kernel_list_t *l)
{
    if (!l) return;
    free(l->items);
    /* Handles stay open until exit on purpose: kernel structs and strings live in them, and a
     * report may still point at them. dlclose is safe to skip. */
    free(l->handles);
    memset(l, 0, sizeof *l);
}

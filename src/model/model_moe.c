/* model_moe: stories260K upcycled into a mixture of experts, and the MoE FFN of every forward
 * path. Building: each layer's SwiGLU units are split into a shared expert and E routed experts
 * (MoEfication's split of a dense FFN, Zhang et al. 2022, with a shared expert as DeepSeekMoE's),
 * and a linear router is fitted to the oracle top-K experts on calibration text the fp64
 * reference samples itself; the result is a small side file. Running: router GEMM, routing
 * (moe.h's softmax/top-k/renorm), dispatch to the selected experts, the combine in the path's
 * order and buffer, with expert parallelism (partials per rank, reduced in rank or arrival
 * order). Not here: capacity limits / token dropping, load-balancing losses, training.
 * This file: the path specs' MoE base, the options, the side file's reading (attach); building is
 * model_moe_build.c (it runs the forward, which runs the MoE: kept above it), running
 * model_moe_run.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_impl.h"



parity_moe_spec_t model_moe_base_spec(int fused)
{
    parity_moe_spec_t s = parity_moe_spec_default();
    if (fused) { /* vLLM/SGLang fused_moe: sum over the K slots in fp32 with fp32 weights */
        s.order = PARITY_MOE_ORDER_SLOT;
        s.combine = PARITY_MOE_COMBINE_FP32ACC;
        s.weights = PARITY_MOE_W_FP32;
    }
    return s;
}

void parity_model_moe_opts_default(parity_model_moe_opts_t *o)
{
    if (!o) return;
    o->experts = 8, o->topk = 4, o->n_shared = 108, o->n_calib = 8, o->calib_len = 200;
    o->beta = 1.5, o->ridge = 1e-2;
}

void model_moe_free(model_moe_t *moe)
{
    if (!moe) return;
    free(moe->perm);
    free(moe->router);
    free(moe);
}

void parity_model_moe_shape(const parity_model_t *m, int *experts, int *topk)
{
    if (experts) *experts = m && m->moe ? m->moe->E : 0;
    if (topk) *topk = m && m->moe ? m->moe->K : 0;
}

parity_status_t parity_model_moe_default_file(char *path, size_t cap, parity_diag_t *diag)
{
    return parity_data_path("stories260K_moe.bin", path, cap, diag);
}

/* ------------------------------------------------------------------------------------------ */
/* Side file                                                                                  */
/* ------------------------------------------------------------------------------------------ */

parity_status_t parity_model_moe_attach(parity_model_t *m, const char *path, parity_diag_t *diag)
{
    if (!m || !path) return parity_diag_set(diag, PARITY_E_INVALID, "moe attach: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open", path);
    char magic[4];
    int32_t h[7];
    float scale;
    parity_status_t st = PARITY_OK;
    model_moe_t *moe = NULL;
    const parity_model_config_t *c = &m->cfg;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, MODEL_MOE_MAGIC, 4) || fread(h, 4, 7, f) != 7 ||
        fread(&scale, 4, 1, f) != 1) {
        st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: not a parity MoE side file (magic PMOE)", path);
        goto out;
    }
    /* h: version, L, D, F, E, K, n_shared */
    if (h[0] != MODEL_MOE_VERSION || h[1] != c->n_layers || h[2] != c->dim || h[3] != c->hidden_dim ||
        h[4] < 1 || h[4] > 64 || h[5] < 1 || h[5] > h[4] || h[6] < 0 || h[6] >= h[3] ||
        (h[3] - h[6]) % h[4] || !(scale > 0 && scale < 1e6)) {
        st = parity_diag_set(diag, PARITY_E_FORMAT,
                             "%s: header (version %d, L %d, D %d, F %d, E %d, K %d, shared %d) does "
                             "not fit the model (L %d, D %d, F %d)",
                             path, h[0], h[1], h[2], h[3], h[4], h[5], h[6], c->n_layers, c->dim,
                             c->hidden_dim);
        goto out;
    }
    moe = calloc(1, sizeof *moe);
    size_t L = (size_t)c->n_layers, F = (size_t)c->hidden_dim, D = (size_t)c->dim;
    size_t E = (size_t)h[4];
    if (moe) {
        moe->perm = malloc(L * F * sizeof *moe->perm);
        moe->router = malloc(L * E * (D + 1) * sizeof *moe->router);
    }
    if (!moe || !moe->perm || !moe->router) {
        st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    moe->E = h[4], moe->K = h[5], moe->n_shared = h[6], moe->G = (h[3] - h[6]) / h[4];
    moe->scale = scale;
    for (size_t l = 0; l < L && st == PARITY_OK; l++) {
        if (fread(moe->perm + l * F, 4, F, f) != F ||
            fread(moe->router + l * E * (D + 1), 4, E * (D + 1), f) != E * (D + 1)) {
            st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: truncated at layer %zu", path, l);
            break;
        }
        /* perm must be a permutation of 0..F-1 */
        char *seen = calloc(F, 1);
        if (!seen) {
            st = parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
            break;
        }
        for (size_t i = 0; i < F; i++) {
            int32_t u = moe->perm[l * F + i];
            if (u < 0 || (size_t)u >= F || seen[u]) {
                st = parity_diag_set(diag, PARITY_E_FORMAT,
                                     "%s: layer %zu: the unit partition is not a permutation", path, l);
                break;
            }
            seen[u] = 1;
        }
        free(seen);
        for (size_t i = 0; i < E * (D + 1) && st == PARITY_OK; i++)
            if (!isfinite(moe->router[l * E * (D + 1) + i]))
                st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: layer %zu: non-finite router", path, l);
    }
    if (st == PARITY_OK && fgetc(f) != EOF)
        st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: trailing bytes after the last layer", path);
out:
    fclose(f);
    if (st != PARITY_OK) {
        model_moe_free(moe);
        return st;
    }
    model_moe_free(m->moe);
    m->moe = moe;
    return PARITY_OK;
}

/* model_capture: the model's module capture for `parity bisect` (docs/bisect.md). The forward
 * (model_forward.c, model_moe_run.c) calls three hooks at module boundaries when a capture is
 * set; with a replay source, each module's inputs are first overwritten with the source's
 * recorded inputs, so one forward pass runs every module of this path on the other capture's
 * inputs (its outputs go to the replay tensors). Modules, in execution order:
 *   embed                      out [x]
 *   layers.L.attn_norm         in [residual(, delta)]  out [residual, hidden]  (add + RMSNorm)
 *   layers.L.attn              in [hidden]  out [delta]   (QKV, RoPE, attention, wo + TP)
 *   layers.L.ffn_norm          in [residual, delta]  out [residual, hidden]
 *   layers.L.mlp | layers.L.moe   in [hidden]  out [delta]  (+ routing for moe)
 *   final_norm                 in [residual, delta]  out [residual, hidden]
 *   lm_head                    in [hidden]  out [logits] */
#include <stdio.h>
#include <string.h>

#include "src/model/model_impl.h"

static size_t n_modules(int L)
{
    return (size_t)(3 + 4 * L);
}

parity_status_t parity_model_capture_new(const parity_model_runner_t *r, size_t rows,
                                         const char *model_name, parity_capture_t **out,
                                         parity_diag_t *diag)
{
    *out = NULL;
    char spec[160];
    parity_model_path_str(&r->p, spec, sizeof spec);
    parity_capture_t *c = parity_capture_new(model_name, spec, "parity model capture");
    if (!c) return parity_diag_set(diag, PARITY_E_NOMEM, "capture: out of memory");
    c->rows = rows;
    size_t D = (size_t)r->D, V = (size_t)r->V;
    int moe = r->moe != NULL, ok = 1, E = 0, K = 0;
    parity_model_moe_shape(r->m, &E, &K);
    for (size_t i = 0; ok && i < n_modules(r->L); i++) {
        char name[64];
        const char *kind;
        int nin, nout;
        size_t win = D, wout = D;
        if (i == 0) {
            snprintf(name, sizeof name, "embed"), kind = "embedding", nin = 0, nout = 1;
        } else if (i == n_modules(r->L) - 1) {
            snprintf(name, sizeof name, "lm_head"), kind = "linear", nin = 1, nout = 1, wout = V;
        } else if (i == n_modules(r->L) - 2) {
            snprintf(name, sizeof name, "final_norm"), kind = "add_rmsnorm", nin = 2, nout = 2;
        } else {
            int l = (int)(i - 1) / 4, k = (int)(i - 1) % 4;
            static const char *const nm[4] = {"attn_norm", "attn", "ffn_norm", "mlp"};
            snprintf(name, sizeof name, "layers.%d.%s", l, k == 3 && moe ? "moe" : nm[k]);
            kind = k == 0 ? (l == 0 ? "rmsnorm" : "add_rmsnorm")
                 : k == 1 ? "attention"
                 : k == 2 ? "add_rmsnorm"
                 : moe ? "moe" : "mlp";
            nin = (k == 0 && l == 0) || k == 1 || k == 3 ? 1 : 2;
            nout = k == 0 || k == 2 ? 2 : 1;
        }
        parity_capture_module_t *m = parity_capture_add_module(c, name, kind);
        ok = m != NULL;
        for (int j = 0; ok && j < nin; j++) ok = parity_capture_alloc(m, 'i', j, rows, win) == PARITY_OK;
        for (int j = 0; ok && j < nout; j++) ok = parity_capture_alloc(m, 'o', j, rows, wout) == PARITY_OK;
        if (ok && moe && i > 0 && (i - 1) % 4 == 3)
            ok = parity_capture_alloc_routing(m, rows, K, E) == PARITY_OK;
    }
    if (!ok) {
        parity_capture_free(c);
        return parity_diag_set(diag, PARITY_E_NOMEM, "capture: out of memory");
    }
    *out = c;
    return PARITY_OK;
}

parity_status_t parity_model_runner_set_capture(parity_model_runner_t *r, parity_capture_t *cap,
                                                size_t row0, const parity_capture_t *replay_src,
                                                parity_diag_t *diag)
{
    r->cap = cap, r->cap_src = replay_src, r->cap_row0 = row0;
    if (!cap) return PARITY_OK;
    if (cap->n_mod != n_modules(r->L))
        return parity_diag_set(diag, PARITY_E_INVALID, "capture: %zu modules, this model has %zu",
                               cap->n_mod, n_modules(r->L));
    if (!replay_src) return PARITY_OK;
    if (replay_src->n_mod != cap->n_mod || replay_src->rows != cap->rows)
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "replay source: %zu modules and %zu rows, expected %zu and %zu "
                               "(a capture of this model over the same prompts)",
                               replay_src->n_mod, replay_src->rows, cap->n_mod, cap->rows);
    for (size_t i = 0; i < cap->n_mod; i++) {
        parity_capture_module_t *m = &cap->mod[i];
        const parity_capture_module_t *s = &replay_src->mod[i];
        if (strcmp(m->name, s->name) || s->n_in != m->n_in)
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "replay source: module %zu is '%s' with %d inputs, expected '%s' "
                                   "with %d", i, s->name, s->n_in, m->name, m->n_in);
        for (int k = 0; k < m->n_in; k++)
            if (s->in[k].rows * s->in[k].width != m->in[k].rows * m->in[k].width)
                return parity_diag_set(diag, PARITY_E_FORMAT,
                                       "replay source: tensor '%s' has %zu values, expected %zu",
                                       s->in[k].tensor, s->in[k].rows * s->in[k].width,
                                       m->in[k].rows * m->in[k].width);
        int need = m->n_replay == 0;
        for (int k = 0; need && k < m->n_out; k++)
            if (parity_capture_alloc(m, 'r', k, m->out[k].rows, m->out[k].width) != PARITY_OK)
                return parity_diag_set(diag, PARITY_E_NOMEM, "capture: out of memory");
    }
    return PARITY_OK;
}

static void put(parity_capture_tensor_t *t, size_t row, const double *v)
{
    if (v && t->v && row < t->rows) memcpy(t->v + row * t->width, v, t->width * sizeof *v);
}

void model_cap_in(parity_model_runner_t *r, int mod, size_t t, double *b0, double *b1)
{
    parity_capture_module_t *m = &r->cap->mod[mod];
    size_t row = r->cap_row0 + t;
    double *b[2] = {b0, b1};
    for (int k = 0; k < m->n_in && k < 2; k++) {
        if (!b[k]) continue;
        if (r->cap_src) {
            const parity_capture_tensor_t *s = &r->cap_src->mod[mod].in[k];
            if (row < s->rows) memcpy(b[k], s->v + row * s->width, s->width * sizeof(double));
        } else {
            put(&m->in[k], row, b[k]);
        }
    }
}

void model_cap_out(parity_model_runner_t *r, int mod, size_t t, const double *o0, const double *o1)
{
    parity_capture_module_t *m = &r->cap->mod[mod];
    size_t row = r->cap_row0 + t;
    const double *o[2] = {o0, o1};
    for (int k = 0; k < m->n_out && k < 2; k++) put(r->cap_src ? &m->replay[k] : &m->out[k], row, o[k]);
}

void model_cap_route(parity_model_runner_t *r, int l, size_t t, const int32_t *ids,
                     const double *gates, const double *probs)
{
    parity_capture_module_t *m = &r->cap->mod[MODEL_MOD_LAYER(l, 3)];
    size_t row = r->cap_row0 + t;
    if (r->cap_src || !m->topk || row >= m->route_rows) return;
    size_t K = (size_t)m->topk, E = (size_t)m->experts;
    memcpy(m->route_ids + row * K, ids, K * sizeof *ids);
    memcpy(m->route_gates + row * K, gates, K * sizeof *gates);
    if (m->route_probs) memcpy(m->route_probs + row * E, probs, E * sizeof *probs);
}

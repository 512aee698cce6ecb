/* capture: the in-memory form of a "parity.capture/1" directory (docs/bisect.md) and its
 * reader and writer: capture.json (the index: modules in execution order, their tensors, shapes,
 * dtypes, kinds, routing, modality, the replay's source) beside capture.safetensors (the
 * values). Every field the reader needs is checked, and a message names the file, the field or
 * tensor and what was expected. Not here: comparing captures (bisect.c). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "parity/bisect.h"
#include "parity/safetensors.h"

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

/* FNV-1a over the bits of the values: part of a capture's id. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

parity_capture_t *parity_capture_new(const char *model, const char *path, const char *producer)
{
    parity_capture_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->model = dupstr(model ? model : "");
    c->path = dupstr(path ? path : "");
    c->producer = dupstr(producer ? producer : "");
    return c;
}

static void tensor_free(parity_capture_tensor_t *t)
{
    free(t->tensor);
    free(t->v);
}

void parity_capture_free(parity_capture_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_mod; i++) {
        parity_capture_module_t *m = &c->mod[i];
        for (int k = 0; k < PARITY_CAPTURE_MAX_IO; k++) {
            tensor_free(&m->in[k]);
            tensor_free(&m->out[k]);
            tensor_free(&m->replay[k]);
        }
        free(m->name);
        free(m->kind);
        free(m->route_ids);
        free(m->route_gates);
        free(m->route_probs);
    }
    if (c->modality)
        for (size_t i = 0; i < c->rows; i++) free(c->modality[i]);
    free(c->modality);
    free(c->mod);
    free(c->seq_start);
    free(c->seq_len);
    free(c->id);
    free(c->model);
    free(c->path);
    free(c->producer);
    free(c->replay_of);
    free(c);
}

parity_capture_module_t *parity_capture_add_module(parity_capture_t *c, const char *name,
                                                   const char *kind)
{
    if (c->n_mod == c->cap_mod) {
        size_t nc = c->cap_mod ? 2 * c->cap_mod : 16;
        parity_capture_module_t *nm = realloc(c->mod, nc * sizeof *nm);
        if (!nm) return NULL;
        c->mod = nm, c->cap_mod = nc;
    }
    parity_capture_module_t *m = &c->mod[c->n_mod];
    memset(m, 0, sizeof *m);
    m->name = dupstr(name);
    m->kind = dupstr(kind);
    if (!m->name || !m->kind) {
        free(m->name);
        free(m->kind);
        return NULL;
    }
    c->n_mod++;
    return m;
}

static const char *side_word(char side)
{
    return side == 'i' ? "in" : side == 'o' ? "out" : "replay";
}

parity_status_t parity_capture_alloc(parity_capture_module_t *m, char side, int k, size_t rows,
                                     size_t width)
{
    if (k < 0 || k >= PARITY_CAPTURE_MAX_IO) return PARITY_E_INVALID;
    parity_capture_tensor_t *t = side == 'i' ? &m->in[k] : side == 'o' ? &m->out[k] : &m->replay[k];
    tensor_free(t);
    memset(t, 0, sizeof *t);
    char name[256];
    snprintf(name, sizeof name, "%s.%s.%d", m->name, side_word(side), k);
    t->tensor = dupstr(name);
    t->v = calloc(rows * width > 0 ? rows * width : 1, sizeof(double));
    if (!t->tensor || !t->v) return PARITY_E_NOMEM;
    strcpy(t->dtype, "F64");
    t->ndim = 2, t->shape[0] = rows, t->shape[1] = width, t->rows = rows, t->width = width;
    int *n = side == 'i' ? &m->n_in : side == 'o' ? &m->n_out : &m->n_replay;
    if (*n < k + 1) *n = k + 1;
    return PARITY_OK;
}

parity_status_t parity_capture_alloc_routing(parity_capture_module_t *m, size_t rows, int topk,
                                             int experts)
{
    m->route_ids = calloc(rows * (size_t)topk, sizeof *m->route_ids);
    m->route_gates = calloc(rows * (size_t)topk, sizeof *m->route_gates);
    m->route_probs = experts > 0 ? calloc(rows * (size_t)experts, sizeof *m->route_probs) : NULL;
    if (!m->route_ids || !m->route_gates || (experts > 0 && !m->route_probs)) return PARITY_E_NOMEM;
    m->topk = topk, m->experts = experts, m->route_rows = rows;
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static cJSON *tensor_json(const parity_capture_tensor_t *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tensor", t->tensor);
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddStringToObject(o, "dtype", "F64");
    return o;
}

static int mkdir_p(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

parity_status_t parity_capture_write(const parity_capture_t *c, const char *dir, parity_diag_t *diag)
{
    if (mkdir_p(dir) != 0)
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot create the capture directory: %s", dir,
                               strerror(errno));
    size_t ne = 0;
    for (size_t i = 0; i < c->n_mod; i++)
        ne += (size_t)(c->mod[i].n_in + c->mod[i].n_out + c->mod[i].n_replay) +
              (c->mod[i].topk ? 3u : 0u);
    parity_safetensors_entry_t *e = calloc(ne ? ne : 1, sizeof *e);
    uint64_t(*shapes)[2] = calloc(ne ? ne : 1, sizeof *shapes);
    char(*rnames)[280] = calloc(c->n_mod ? c->n_mod * 3 : 1, sizeof *rnames);
    if (!e || !shapes || !rnames) {
        free(e), free(shapes), free(rnames);
        return parity_diag_set(diag, PARITY_E_NOMEM, "capture: out of memory");
    }
    /* the id: the values' hash with the path and the time (a replay names it) */
    uint64_t h = 0xcbf29ce484222325ULL;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", PARITY_CAPTURE_SCHEMA);
    cJSON *jid = cJSON_AddStringToObject(root, "id", "");
    cJSON_AddStringToObject(root, "model", c->model);
    cJSON_AddStringToObject(root, "path", c->path);
    cJSON_AddStringToObject(root, "producer", c->producer);
    cJSON_AddStringToObject(root, "tensors", "capture.safetensors");
    cJSON_AddNumberToObject(root, "rows", (double)c->rows);
    if (c->n_seq) {
        cJSON *sq = cJSON_AddArrayToObject(root, "sequences");
        for (size_t s = 0; s < c->n_seq; s++) {
            cJSON *p = cJSON_CreateArray();
            cJSON_AddItemToArray(p, cJSON_CreateNumber((double)c->seq_start[s]));
            cJSON_AddItemToArray(p, cJSON_CreateNumber((double)c->seq_len[s]));
            cJSON_AddItemToArray(sq, p);
        }
    }
    if (c->modality) {
        cJSON *md = cJSON_AddArrayToObject(root, "modality");
        for (size_t i = 0; i < c->rows; i++) cJSON_AddItemToArray(md, cJSON_CreateString(c->modality[i]));
    }
    if (c->replay_of) cJSON_AddStringToObject(root, "replay_of", c->replay_of);
    cJSON *mods = cJSON_AddArrayToObject(root, "modules");
    size_t k = 0;
    for (size_t i = 0; i < c->n_mod; i++) {
        const parity_capture_module_t *m = &c->mod[i];
        cJSON *jm = cJSON_CreateObject();
        cJSON_AddStringToObject(jm, "name", m->name);
        cJSON_AddStringToObject(jm, "kind", m->kind);
        const char *keys[3] = {"inputs", "outputs", "replay"};
        const parity_capture_tensor_t *sets[3] = {m->in, m->out, m->replay};
        int counts[3] = {m->n_in, m->n_out, m->n_replay};
        for (int s = 0; s < 3; s++) {
            if (s == 2 && counts[s] == 0) continue;
            cJSON *arr = cJSON_AddArrayToObject(jm, keys[s]);
            for (int j = 0; j < counts[s]; j++) {
                const parity_capture_tensor_t *t = &sets[s][j];
                cJSON_AddItemToArray(arr, tensor_json(t));
                shapes[k][0] = t->rows, shapes[k][1] = t->width;
                e[k] = (parity_safetensors_entry_t){t->tensor, PARITY_SAFETENSORS_F64, 2, shapes[k], t->v};
                h = fnv(h, t->v, t->rows * t->width * sizeof(double));
                k++;
            }
        }
        if (m->topk) {
            cJSON *r = cJSON_AddObjectToObject(jm, "routing");
            cJSON_AddNumberToObject(r, "topk", m->topk);
            cJSON_AddNumberToObject(r, "experts", m->experts);
            const char *suf[3] = {"ids", "gates", "probs"};
            for (int s = 0; s < 3; s++) {
                if (s == 2 && !m->route_probs) continue;
                char *nm = rnames[i * 3 + (size_t)s];
                snprintf(nm, 280, "%s.route.%s", m->name, suf[s]);
                cJSON_AddStringToObject(r, suf[s], nm);
                shapes[k][0] = m->route_rows, shapes[k][1] = (uint64_t)(s == 2 ? m->experts : m->topk);
                e[k] = (parity_safetensors_entry_t){nm, s == 0 ? PARITY_SAFETENSORS_I32 : PARITY_SAFETENSORS_F64, 2, shapes[k],
                                           s == 0 ? (const void *)m->route_ids
                                                  : s == 1 ? (const void *)m->route_gates
                                                           : (const void *)m->route_probs};
                k++;
            }
        }
        cJSON_AddItemToArray(mods, jm);
    }
    char idbuf[64];
    h = fnv(h, c->path, strlen(c->path));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h = fnv(h, &ts, sizeof ts);
    snprintf(idbuf, sizeof idbuf, "%016llx", (unsigned long long)h);
    cJSON_SetValuestring(jid, c->id ? c->id : idbuf);
    char path[4200];
    snprintf(path, sizeof path, "%s/capture.safetensors", dir);
    const char *meta[2] = {"schema", PARITY_CAPTURE_SCHEMA};
    parity_status_t st = parity_safetensors_write(path, e, k, meta, 1, diag);
    free(e), free(shapes), free(rnames);
    if (st != PARITY_OK) {
        cJSON_Delete(root);
        return st;
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    snprintf(path, sizeof path, "%s/capture.json", dir);
    FILE *f = txt ? fopen(path, "wb") : NULL;
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(txt);
    if (!ok) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot write", path);
    return PARITY_OK;
}

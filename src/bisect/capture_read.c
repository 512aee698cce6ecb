/* capture_read: reads a "parity.capture/1" directory (docs/bisect.md) into a parity_capture_t.
 * The index is checked field by field and every tensor it lists against the safetensors file
 * (present, the shape the index says); a truncated tensors file is named by the safetensors
 * reader with the first tensor past its end. Every dtype is read as doubles: floats exactly,
 * integers (token ids of an embedding, indices) exactly up to 2^53; bisect.c compares integer
 * tensors for equality only, never as drift. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parity/bisect.h"
#include "parity/safetensors.h"

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap + 1);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb, cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    if (len) *len = n;
    return b;
}

typedef struct {
    const char *fn;     /* capture.json */
    const char *stfn;   /* capture.safetensors */
    parity_safetensors_file_t *st;
    parity_diag_t *diag;
} rd_t;

static parity_status_t bad(rd_t *r, const char *fmt, const char *a, const char *b)
{
    char m[600];
    snprintf(m, sizeof m, fmt, a ? a : "", b ? b : "");
    return parity_diag_set(r->diag, PARITY_E_FORMAT, "%s: %s", r->fn, m);
}

static int json_size(const cJSON *j, size_t *out)
{
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 9007199254740992.0 ||
        j->valuedouble != (double)(uint64_t)j->valuedouble)
        return -1;
    *out = (size_t)j->valuedouble;
    return 0;
}

/* One tensor entry {"tensor", "shape", "dtype"} of module `mod`, field `field`[k]. */
static parity_status_t read_tensor(rd_t *r, const cJSON *je, const char *mod, const char *field,
                                   parity_capture_tensor_t *t)
{
    char where[400];
    snprintf(where, sizeof where, "module '%s', %s", mod, field);
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(je, "tensor");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(je, "shape");
    if (!cJSON_IsString(jn) || !cJSON_IsArray(js) || cJSON_GetArraySize(js) < 1 ||
        cJSON_GetArraySize(js) > 8)
        return bad(r, "%s: expected {\"tensor\": name, \"shape\": [1..8 sizes], \"dtype\"}", where, NULL);
    t->tensor = dupstr(jn->valuestring);
    if (!t->tensor) return PARITY_E_NOMEM;
    t->ndim = cJSON_GetArraySize(js);
    int d = 0;
    size_t numel = 1;
    for (const cJSON *x = js->child; x; x = x->next, d++) {
        size_t v;
        if (json_size(x, &v) != 0) return bad(r, "%s: shape: expected non-negative integers", where, NULL);
        t->shape[d] = v;
        numel *= v;
    }
    t->width = (size_t)t->shape[t->ndim - 1];
    t->rows = t->width ? numel / t->width : 0;
    const parity_safetensors_tensor_t *st = parity_safetensors_find(r->st, t->tensor);
    if (!st)
        return parity_diag_set(r->diag, PARITY_E_FORMAT,
                               "%s: tensor '%s' (%s) is listed in %s but missing from the file", r->stfn,
                               t->tensor, where, r->fn);
    if (st->numel != numel)
        return parity_diag_set(r->diag, PARITY_E_FORMAT,
                               "%s: tensor '%s': %llu elements, but %s gives its shape as %zu "
                               "elements", r->stfn, t->tensor, (unsigned long long)st->numel, r->fn, numel);
    snprintf(t->dtype, sizeof t->dtype, "%s", parity_safetensors_dtype_name(st->dtype));
    t->v = malloc((numel ? numel : 1) * sizeof(double));
    if (!t->v) return PARITY_E_NOMEM;
    return parity_safetensors_read_f64(r->st, st, 0, numel, t->v) == PARITY_OK
               ? PARITY_OK
               : parity_diag_set(r->diag, PARITY_E_FORMAT, "%s: tensor '%s': unreadable", r->stfn, t->tensor);
}

static parity_status_t read_list(rd_t *r, const cJSON *jm, const char *key, const char *mod,
                                 parity_capture_tensor_t *ts, int *n, int required)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(jm, key);
    if (!a) {
        if (required) return bad(r, "module '%s': missing \"%s\" (a list of tensors)", mod, key);
        return PARITY_OK;
    }
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > PARITY_CAPTURE_MAX_IO)
        return bad(r, "module '%s': \"%s\" must be a list of at most 4 tensors", mod, key);
    int k = 0;
    for (const cJSON *e = a->child; e; e = e->next, k++) {
        char field[64];
        snprintf(field, sizeof field, "%s[%d]", key, k);
        parity_status_t s = read_tensor(r, e, mod, field, &ts[k]);
        *n = k + 1;
        if (s != PARITY_OK) return s;
    }
    return PARITY_OK;
}

static parity_status_t read_routing(rd_t *r, const cJSON *jr, parity_capture_module_t *m)
{
    const cJSON *jk = cJSON_GetObjectItemCaseSensitive(jr, "topk");
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(jr, "experts");
    const cJSON *ji = cJSON_GetObjectItemCaseSensitive(jr, "ids");
    const cJSON *jg = cJSON_GetObjectItemCaseSensitive(jr, "gates");
    const cJSON *jp = cJSON_GetObjectItemCaseSensitive(jr, "probs");
    size_t k, e = 0;
    if (json_size(jk, &k) != 0 || k < 1 || k > 16 || (je && json_size(je, &e) != 0) ||
        !cJSON_IsString(ji) || !cJSON_IsString(jg))
        return bad(r, "module '%s': routing: expected {\"topk\": 1..16, \"experts\", \"ids\", \"gates\"[, \"probs\"]}",
                   m->name, NULL);
    const parity_safetensors_tensor_t *ti = parity_safetensors_find(r->st, ji->valuestring);
    const parity_safetensors_tensor_t *tg = parity_safetensors_find(r->st, jg->valuestring);
    const parity_safetensors_tensor_t *tp = cJSON_IsString(jp) ? parity_safetensors_find(r->st, jp->valuestring) : NULL;
    if (!ti || !tg || (cJSON_IsString(jp) && !tp))
        return parity_diag_set(r->diag, PARITY_E_FORMAT, "%s: module '%s': a routing tensor listed in %s is missing",
                               r->stfn, m->name, r->fn);
    size_t rows = (size_t)(ti->numel / k);
    if (ti->numel != rows * k || tg->numel != ti->numel || (tp && (e == 0 || tp->numel != rows * e)))
        return parity_diag_set(r->diag, PARITY_E_FORMAT,
                               "%s: module '%s': routing tensors: expected ids and gates of (rows, %zu) "
                               "and probs of (rows, experts)", r->stfn, m->name, k);
    if (parity_capture_alloc_routing(m, rows, (int)k, tp ? (int)e : 0) != PARITY_OK) return PARITY_E_NOMEM;
    m->experts = (int)e;
    int64_t *tmp = malloc((rows * k > 0 ? rows * k : 1) * sizeof *tmp);
    if (!tmp) return PARITY_E_NOMEM;
    parity_status_t s = parity_safetensors_read_i64(r->st, ti, 0, rows * k, tmp);
    for (size_t i = 0; s == PARITY_OK && i < rows * k; i++) m->route_ids[i] = (int32_t)tmp[i];
    free(tmp);
    if (s == PARITY_OK) s = parity_safetensors_read_f64(r->st, tg, 0, rows * k, m->route_gates);
    if (s == PARITY_OK && tp) s = parity_safetensors_read_f64(r->st, tp, 0, rows * e, m->route_probs);
    if (s != PARITY_OK)
        return parity_diag_set(r->diag, PARITY_E_FORMAT,
                               "%s: module '%s': routing ids must be integers, gates and probs floats",
                               r->stfn, m->name);
    return PARITY_OK;
}

static parity_status_t parse(rd_t *r, const cJSON *root, parity_capture_t *c)
{
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!cJSON_IsString(js) || strcmp(js->valuestring, PARITY_CAPTURE_SCHEMA))
        return bad(r, "field 'schema': expected \"%s\"%s", PARITY_CAPTURE_SCHEMA,
                   cJSON_IsString(js) ? " (a newer or other format)" : "");
    const char *sf[4] = {"id", "model", "path", "producer"};
    char **dst[4] = {&c->id, &c->model, &c->path, &c->producer};
    for (int i = 0; i < 4; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, sf[i]);
        if (j && !cJSON_IsString(j)) return bad(r, "field '%s': expected a string", sf[i], NULL);
        *dst[i] = dupstr(j ? j->valuestring : "");
    }
    const cJSON *jr = cJSON_GetObjectItemCaseSensitive(root, "replay_of");
    if (jr && !cJSON_IsNull(jr)) {
        if (!cJSON_IsString(jr)) return bad(r, "field 'replay_of': expected the id of a capture", NULL, NULL);
        c->replay_of = dupstr(jr->valuestring);
    }
    if (json_size(cJSON_GetObjectItemCaseSensitive(root, "rows"), &c->rows) != 0)
        return bad(r, "field 'rows': expected the number of token rows (an integer >= 0)", NULL, NULL);
    const cJSON *jq = cJSON_GetObjectItemCaseSensitive(root, "sequences");
    if (cJSON_IsArray(jq) && cJSON_GetArraySize(jq) > 0) {
        size_t n = (size_t)cJSON_GetArraySize(jq);
        c->seq_start = calloc(n, sizeof(size_t));
        c->seq_len = calloc(n, sizeof(size_t));
        if (!c->seq_start || !c->seq_len) return PARITY_E_NOMEM;
        for (const cJSON *p = jq->child; p; p = p->next, c->n_seq++) {
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 ||
                json_size(p->child, &c->seq_start[c->n_seq]) != 0 ||
                json_size(p->child->next, &c->seq_len[c->n_seq]) != 0 ||
                c->seq_start[c->n_seq] + c->seq_len[c->n_seq] > c->rows)
                return bad(r, "field 'sequences': expected [start, length] pairs inside 'rows'", NULL, NULL);
        }
    }
    const cJSON *jmod = cJSON_GetObjectItemCaseSensitive(root, "modality");
    if (jmod && !cJSON_IsNull(jmod)) {
        if (!cJSON_IsArray(jmod) || (size_t)cJSON_GetArraySize(jmod) != c->rows)
            return bad(r, "field 'modality': expected one string per row ('rows' of them)", NULL, NULL);
        c->modality = calloc(c->rows ? c->rows : 1, sizeof *c->modality);
        if (!c->modality) return PARITY_E_NOMEM;
        size_t i = 0;
        for (const cJSON *x = jmod->child; x; x = x->next, i++) {
            if (!cJSON_IsString(x) || strlen(x->valuestring) >= 16)
                return bad(r, "field 'modality': expected short strings (\"text\", \"image\")", NULL, NULL);
            c->modality[i] = dupstr(x->valuestring);
        }
    }
    const cJSON *jm = cJSON_GetObjectItemCaseSensitive(root, "modules");
    if (!cJSON_IsArray(jm)) return bad(r, "field 'modules': expected a list of modules in execution order", NULL, NULL);
    for (const cJSON *m = jm->child; m; m = m->next) {
        const cJSON *jn = cJSON_GetObjectItemCaseSensitive(m, "name");
        const cJSON *jk = cJSON_GetObjectItemCaseSensitive(m, "kind");
        if (!cJSON_IsString(jn) || !cJSON_IsString(jk))
            return bad(r, "modules[%s]: expected \"name\" and \"kind\" strings", "", NULL);
        parity_capture_module_t *cm = parity_capture_add_module(c, jn->valuestring, jk->valuestring);
        if (!cm) return PARITY_E_NOMEM;
        parity_status_t s;
        if ((s = read_list(r, m, "inputs", cm->name, cm->in, &cm->n_in, 0)) != PARITY_OK) return s;
        if ((s = read_list(r, m, "outputs", cm->name, cm->out, &cm->n_out, 1)) != PARITY_OK) return s;
        if ((s = read_list(r, m, "replay", cm->name, cm->replay, &cm->n_replay, 0)) != PARITY_OK) return s;
        if (cm->n_out == 0) return bad(r, "module '%s': \"outputs\" is empty", cm->name, NULL);
        if (cm->n_replay && cm->n_replay != cm->n_out)
            return bad(r, "module '%s': \"replay\" must list as many tensors as \"outputs\"", cm->name, NULL);
        for (int k = 0; k < cm->n_replay; k++)
            if (cm->replay[k].rows * cm->replay[k].width != cm->out[k].rows * cm->out[k].width)
                return bad(r, "module '%s': replay tensor '%s' differs in size from its output", cm->name,
                           cm->replay[k].tensor);
        const cJSON *jrt = cJSON_GetObjectItemCaseSensitive(m, "routing");
        if (jrt && !cJSON_IsNull(jrt) && (s = read_routing(r, jrt, cm)) != PARITY_OK) return s;
    }
    return PARITY_OK;
}

parity_status_t parity_capture_read(const char *dir, parity_capture_t **out, parity_diag_t *diag)
{
    *out = NULL;
    char fn[4200], stfn[4400], base[4096];
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(base, sizeof base, "%s", dir);
        snprintf(fn, sizeof fn, "%s/capture.json", dir);
    } else {
        snprintf(fn, sizeof fn, "%s", dir);
        snprintf(base, sizeof base, "%s", dir);
        char *sl = strrchr(base, '/');
        if (sl) *sl = '\0';
        else snprintf(base, sizeof base, ".");
    }
    size_t len;
    char *txt = slurp(fn, &len);
    if (!txt) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot read the capture index (a capture is a directory with capture.json and capture.safetensors)", fn);
    cJSON *root = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: not a JSON object", fn);
    }
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    const char *tn = cJSON_IsString(jt) ? jt->valuestring : "capture.safetensors";
    if (strchr(tn, '/') || !strcmp(tn, "..")) {
        cJSON_Delete(root);
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: field 'tensors': expected a file name beside it", fn);
    }
    snprintf(stfn, sizeof stfn, "%s/%s", base, tn);
    rd_t r = {fn, stfn, NULL, diag};
    parity_status_t s = parity_safetensors_open(stfn, &r.st, diag);
    parity_capture_t *c = NULL;
    if (s == PARITY_OK) {
        c = parity_capture_new(NULL, NULL, NULL);
        if (c) {
            free(c->model), free(c->path), free(c->producer);
            c->model = c->path = c->producer = NULL;
        }
        s = c ? parse(&r, root, c) : PARITY_E_NOMEM;
        if (s == PARITY_E_NOMEM) parity_diag_set(diag, s, "%s: out of memory", fn);
    }
    parity_safetensors_close(r.st);
    cJSON_Delete(root);
    if (s != PARITY_OK) {
        parity_capture_free(c);
        return s;
    }
    *out = c;
    return PARITY_OK;
}

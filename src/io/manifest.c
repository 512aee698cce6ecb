/* Manifests: a cJSON tree validated against the parity.manifest/1 schema (docs/manifest.md),
 * capture from the environment and tools, and the ranked diff. Never prints; a missing tool is
 * not an error. Not here: any judgement of drift (the ranking is a prior, not a measurement). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parity/manifest.h"

extern char **environ;

struct parity_manifest {
    cJSON *root;
};

/* Sections of the schema and the type of their values. */
typedef enum { V_ANY, V_STRING, V_BOOL, V_POSINT, V_INT, V_NUMBER, V_INTLIST } vtype_t;
static const struct {
    const char *key;
    vtype_t type;
} FIELDS[] = {
    {"gpu.model", V_STRING},           {"gpu.driver", V_STRING},
    {"gpu.count", V_POSINT},           {"gpu.visible_devices", V_STRING},
    {"software.cuda", V_STRING},       {"software.nccl", V_STRING},
    {"software.cublas", V_STRING},     {"software.torch", V_STRING},
    {"software.mpi", V_STRING},        {"parallel.tp", V_POSINT},
    {"parallel.pp", V_POSINT},         {"parallel.ep", V_POSINT},
    {"parallel.dp", V_POSINT},         {"parallel.rank_device_map", V_INTLIST},
    {"allreduce.impl", V_STRING},      {"allreduce.algo", V_STRING},
    {"allreduce.dtype", V_STRING},     {"backends.attention", V_STRING},
    {"backends.moe", V_STRING},        {"sampling.temperature", V_NUMBER},
    {"sampling.top_p", V_NUMBER},      {"sampling.top_k", V_INT},
    {"sampling.seed", V_INT},
};
/* Sections whose every value has one type. */
static const struct {
    const char *section;
    vtype_t type;
} SECTIONS[] = {{"gpu", V_ANY},       {"software", V_STRING},       {"parallel", V_ANY},
                {"nccl", V_ANY},      {"allreduce", V_ANY},         {"fusion", V_BOOL},
                {"backends", V_STRING}, {"dtypes", V_STRING},       {"batch_invariant", V_ANY},
                {"sampling", V_ANY},  {"host", V_ANY},              {"notes", V_ANY}};

static const char *type_text(vtype_t t)
{
    switch (t) {
    case V_STRING: return "a string";
    case V_BOOL: return "true or false";
    case V_POSINT: return "a positive integer";
    case V_INT: return "an integer";
    case V_NUMBER: return "a number";
    case V_INTLIST: return "an array of non-negative integers";
    default: return "a string, number or boolean";
    }
}

static int is_int(const cJSON *v, double lo)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble < 9.007199254740992e15;
}

static int type_ok(const cJSON *v, vtype_t t)
{
    switch (t) {
    case V_STRING: return cJSON_IsString(v);
    case V_BOOL: return cJSON_IsBool(v);
    case V_POSINT: return is_int(v, 1);
    case V_INT: return is_int(v, -9.007199254740992e15);
    case V_NUMBER: return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    case V_INTLIST: {
        if (!cJSON_IsArray(v)) return 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) if (!is_int(e, 0)) return 0;
        return 1;
    }
    default: return cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v);
    }
}

static void value_text(const cJSON *v, char *buf, size_t cap)
{
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, cap, "%s", t ? t : "(absent)");
    free(t);
}

/* The first member of object o before `it` with the same key, or NULL. JSON leaves duplicate
 * keys undefined (RFC 8259, 4) and cJSON keeps them all: a manifest with "parallel" twice read
 * differently by the lookup (first) and the diff (every member), and wrote both back. */
static const cJSON *dup_before(const cJSON *o, const cJSON *it)
{
    for (const cJSON *c = o->child; c && c != it; c = c->next)
        if (!strcmp(c->string, it->string)) return c;
    return NULL;
}

static parity_status_t validate(const cJSON *root, const char *name, parity_diag_t *diag)
{
    if (!name) name = "manifest";
    if (!cJSON_IsObject(root))
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: expected a JSON object", name);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, PARITY_MANIFEST_SCHEMA) != 0)
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: schema: expected \"%s\"", name,
                               PARITY_MANIFEST_SCHEMA);
    const cJSON *sec;
    cJSON_ArrayForEach(sec, root)
    {
        if (dup_before(root, sec))
            return parity_diag_set(diag, PARITY_E_FORMAT, "%s: %s: given twice (expected each section once)", name,
                                   sec->string);
        if (!strcmp(sec->string, "schema")) continue;
        vtype_t stype = V_ANY;
        int known = 0;
        for (size_t i = 0; i < sizeof SECTIONS / sizeof SECTIONS[0]; i++)
            if (!strcmp(sec->string, SECTIONS[i].section)) known = 1, stype = SECTIONS[i].type;
        if (!cJSON_IsObject(sec))
            return parity_diag_set(diag, PARITY_E_FORMAT, "%s: %s: expected an object of settings",
                                   name, sec->string);
        (void)known; /* unknown sections are allowed (later schema additions) */
        const cJSON *v;
        cJSON_ArrayForEach(v, sec)
        {
            char key[160];
            snprintf(key, sizeof key, "%s.%s", sec->string, v->string);
            if (dup_before(sec, v))
                return parity_diag_set(diag, PARITY_E_FORMAT, "%s: %s: given twice (expected each key once)", name, key);
            vtype_t t = stype;
            for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
                if (!strcmp(key, FIELDS[i].key)) t = FIELDS[i].type;
            if (!type_ok(v, t)) {
                char got[64];
                value_text(v, got, sizeof got);
                return parity_diag_set(diag, PARITY_E_FORMAT, "%s: %s: expected %s, got %s", name,
                                       key, type_text(t), got);
            }
        }
    }
    return PARITY_OK;
}

parity_status_t parity_manifest_new(parity_manifest_t **out)
{
    if (!out) return PARITY_E_INVALID;
    *out = calloc(1, sizeof **out);
    if (!*out) return PARITY_E_NOMEM;
    (*out)->root = cJSON_CreateObject();
    if (!(*out)->root || !cJSON_AddStringToObject((*out)->root, "schema", PARITY_MANIFEST_SCHEMA)) {
        parity_manifest_free(*out);
        *out = NULL;
        return PARITY_E_NOMEM;
    }
    return PARITY_OK;
}

void parity_manifest_free(parity_manifest_t *m)
{
    if (!m) return;
    cJSON_Delete(m->root);
    free(m);
}

parity_status_t parity_manifest_parse(const char *text, const char *name, parity_manifest_t **out,
                                      parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!text || !out) return parity_diag_set(diag, PARITY_E_INVALID, "no manifest text");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: not valid JSON (near byte %zu)",
                               name ? name : "manifest", off);
    }
    parity_status_t st = validate(root, name, diag);
    if (st) {
        cJSON_Delete(root);
        return st;
    }
    *out = calloc(1, sizeof **out);
    if (!*out) {
        cJSON_Delete(root);
        return PARITY_E_NOMEM;
    }
    (*out)->root = root;
    return PARITY_OK;
}

parity_status_t parity_manifest_load(const char *path, parity_manifest_t **out,
                                     parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!path || !out) return parity_diag_set(diag, PARITY_E_INVALID, "no manifest path");
    FILE *f = fopen(path, "rb");
    if (!f) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open", path);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            if (cap >= (1u << 26)) break;
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return PARITY_E_NOMEM;
    if (err) {
        free(buf);
        return parity_diag_set(diag, PARITY_E_IO, "%s: read error", path);
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        free(buf);
        return parity_diag_set(diag, PARITY_E_FORMAT, "%s: contains a NUL byte (not JSON text)",
                               path);
    }
    parity_status_t st = parity_manifest_parse(buf, path, out, diag);
    free(buf);
    return st;
}

static cJSON *section(cJSON *root, const char *name)
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!s) s = cJSON_AddObjectToObject(root, name);
    return s;
}

static void put(cJSON *root, const char *sec, const char *key, cJSON *v)
{
    cJSON *s = section(root, sec);
    if (!s || !v) {
        cJSON_Delete(v);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(s, key)) cJSON_ReplaceItemInObjectCaseSensitive(s, key, v);
    else cJSON_AddItemToObject(s, key, v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* First line of a command's output (stderr discarded), trimmed; 0 when there is none. */
static int probe_line(const char *cmd, char *buf, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int ok = fgets(buf, (int)cap, p) != NULL;
    char rest[256];
    while (fgets(rest, sizeof rest, p)) {
    }
    int rc = pclose(p);
    if (!ok || rc != 0) return 0;
    size_t n = strlen(buf);
    while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
    return n > 0;
}

parity_status_t parity_manifest_capture(parity_manifest_t *m, int probe, parity_diag_t *diag)
{
    if (!m) return parity_diag_set(diag, PARITY_E_INVALID, "no manifest");
    /* NCCL_* in sorted order (environ's order is not stable across launchers). */
    size_t n = 0;
    for (char **e = environ; e && *e; e++) n += strncmp(*e, "NCCL_", 5) == 0;
    char **vars = calloc(n + 1, sizeof *vars);
    if (!vars) return PARITY_E_NOMEM;
    n = 0;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "NCCL_", 5) == 0) vars[n++] = *e;
    qsort(vars, n, sizeof *vars, cmp_str);
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(vars[i], '=');
        if (!eq) continue;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - vars[i]), vars[i]);
        if (!strcmp(key, "NCCL_VERSION")) put(m->root, "software", "nccl", cJSON_CreateString(eq + 1));
        else put(m->root, "nccl", key, cJSON_CreateString(eq + 1));
    }
    free(vars);
    const char *v;
    if ((v = getenv("CUDA_VISIBLE_DEVICES"))) put(m->root, "gpu", "visible_devices", cJSON_CreateString(v));
    if ((v = getenv("CUDA_VERSION"))) put(m->root, "software", "cuda", cJSON_CreateString(v));
    if (probe) {
        char line[512];
        if (probe_line("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null",
                       line, sizeof line)) {
            char *comma = strchr(line, ',');
            if (comma) {
                *comma = 0;
                const char *drv = comma + 1;
                while (*drv == ' ') drv++;
                put(m->root, "gpu", "driver", cJSON_CreateString(drv));
            }
            put(m->root, "gpu", "model", cJSON_CreateString(line));
            if (probe_line("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l",
                           line, sizeof line) && atoi(line) > 0)
                put(m->root, "gpu", "count", cJSON_CreateNumber(atoi(line)));
        }
        if (probe_line("mpirun --version 2>/dev/null | head -1", line, sizeof line))
            put(m->root, "software", "mpi", cJSON_CreateString(line));
    }
    return PARITY_OK;
}

parity_status_t parity_manifest_set(parity_manifest_t *m, const char *key, const char *value,
                                    parity_diag_t *diag)
{
    if (!m || !key || !value) return parity_diag_set(diag, PARITY_E_INVALID, "no key or value");
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || !dot[1] || strchr(dot + 1, '.') || strlen(key) >= 128 ||
        !strncmp(key, "schema", 6))
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "--set %s: expected SECTION.NAME=VALUE (e.g. parallel.tp=8)", key);
    char sec[128];
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - key), key);
    cJSON *v = NULL;
    char *end;
    double d = strtod(value, &end);
    if (!strcmp(key, "parallel.rank_device_map")) {
        v = cJSON_CreateArray();
        const char *p = value;
        while (v && *p) {
            long x = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',')) {
                cJSON_Delete(v);
                v = cJSON_CreateString(value); /* validation below names the field */
                break;
            }
            cJSON_AddItemToArray(v, cJSON_CreateNumber((double)x));
            p = *end ? end + 1 : end;
        }
    } else if (!strcmp(value, "true") || !strcmp(value, "false")) {
        v = cJSON_CreateBool(value[0] == 't');
    } else if (*value && !*end && isfinite(d) && strcmp(sec, "nccl") != 0) {
        v = cJSON_CreateNumber(d);
    } else {
        v = cJSON_CreateString(value);
    }
    if (!v) return PARITY_E_NOMEM;
    cJSON *copy = cJSON_Duplicate(m->root, 1);
    if (!copy) {
        cJSON_Delete(v);
        return PARITY_E_NOMEM;
    }
    put(copy, sec, dot + 1, v);
    char name[160];
    snprintf(name, sizeof name, "--set %s", key);
    parity_status_t st = validate(copy, name, diag);
    if (st) {
        cJSON_Delete(copy);
        return st;
    }
    cJSON_Delete(m->root);
    m->root = copy;
    return PARITY_OK;
}

/* Sorted copy of an object's members (recursively for objects). */
static cJSON *sorted(const cJSON *o)
{
    if (!cJSON_IsObject(o)) return cJSON_Duplicate(o, 1);
    size_t n = (size_t)cJSON_GetArraySize(o), i = 0;
    const cJSON **items = calloc(n + 1, sizeof *items);
    cJSON *out = cJSON_CreateObject();
    if (!items || !out) {
        free(items);
        cJSON_Delete(out);
        return NULL;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, o) items[i++] = c;
    /* "schema" first, then by key (insertion sort: manifests are small) */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0; b--) {
            const cJSON *x = items[b - 1], *y = items[b];
            int xs = !strcmp(x->string, "schema"), ys = !strcmp(y->string, "schema");
            if (ys && !xs ? 1 : (!xs && !ys && strcmp(x->string, y->string) > 0)) {
                items[b - 1] = y;
                items[b] = x;
            }
        }
    for (i = 0; i < n; i++) cJSON_AddItemToObject(out, items[i]->string, sorted(items[i]));
    free(items);
    return out;
}

char *parity_manifest_to_json(const parity_manifest_t *m)
{
    if (!m) return NULL;
    cJSON *s = sorted(m->root);
    char *t = s ? cJSON_Print(s) : NULL;
    cJSON_Delete(s);
    return t;
}

/* ------------------------------------------------------------------------------------------ */
/* Ranked diff                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Ranking rules, first match wins: a rule matches a key equal to its pattern, or starting with it
 * when the pattern ends in '.' or '_'. Scores are priors (docs/manifest.md explains each). */
static const struct {
    const char *pattern;
    int score;
    const char *reason;
} RULES[] = {
    {"parallel.tp", 100, "TP size: every row-parallel all-reduce adds a different number of partials, in a different order"},
    {"allreduce.", 95, "all-reduce implementation/algorithm: changes the per-element reduction order and per-hop rounding"},
    {"nccl.NCCL_ALGO", 90, "NCCL algorithm (ring/tree/NVLS/CollNet): changes the reduction order"},
    {"nccl.NCCL_NVLS_ENABLE", 90, "NVLink SHARP reduces inside the switch: different order and accumulation"},
    {"nccl.NCCL_COLLNET_ENABLE", 85, "in-network reduction: different order and accumulation"},
    {"dtypes.", 90, "storage or accumulation dtype: changes every rounding on that path"},
    {"batch_invariant.", 85, "batch invariance: without it results depend on batch size and composition"},
    {"parallel.ep", 80, "expert parallelism: changes the MoE combine order and where expert outputs are rounded"},
    {"backends.moe", 80, "MoE backend: combine order, weight rounding, top-k tie-breaking"},
    {"backends.attention", 80, "attention backend: softmax blocking and split-KV reduction order"},
    {"backends.", 70, "kernel backend: different blocking and reduction order"},
    {"fusion.", 75, "kernel fusion: changes where intermediates are rounded and how reductions are blocked"},
    {"gpu.model", 70, "GPU model: different kernels, tile shapes and split-K heuristics"},
    {"software.cublas", 65, "cuBLAS version: GEMM algorithm and split-K heuristics"},
    {"nccl.NCCL_PROTO", 60, "NCCL protocol (LL/LL128/Simple): chunk sizes, hence which rank starts each element's ring"},
    {"nccl.NCCL_MIN_NCHANNELS", 60, "NCCL channel count: changes the ring chunk layout"},
    {"nccl.NCCL_MAX_NCHANNELS", 60, "NCCL channel count: changes the ring chunk layout"},
    {"nccl.NCCL_ALGO_", 60, "NCCL algorithm tuning: may change the reduction order"},
    {"parallel.rank_device_map", 55, "rank->device map: changes ring neighbours and tree shape"},
    {"software.nccl", 55, "NCCL version: algorithm selection and chunking can change"},
    {"sampling.", 50, "sampling parameter: changes sampled tokens and processed logprobs, not the forward pass"},
    {"software.", 40, "library version: kernels and heuristics may change"},
    {"nccl.", 35, "other NCCL setting: transport or topology, usually no arithmetic change"},
    {"parallel.pp", 30, "pipeline parallelism: moves layers between devices, the arithmetic per layer is the same"},
    {"gpu.visible_devices", 25, "device selection: may change the rank->device map"},
    {"parallel.dp", 20, "data parallelism: no effect on one replica's forward pass (training: gradient all-reduce size)"},
    {"gpu.driver", 15, "driver version: rarely changes arithmetic"},
    {"gpu.", 20, "GPU detail"},
    {"host.", 0, "cosmetic: host identity"},
    {"notes.", 0, "cosmetic: free-form notes"},
};

int parity_manifest_rank_key(const char *key, const char **reason)
{
    if (reason) *reason = "not in the ranking table: unknown effect";
    if (!key) return 0;
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++) {
        const char *p = RULES[i].pattern;
        size_t n = strlen(p);
        int prefix = p[n - 1] == '.' || p[n - 1] == '_';
        if (prefix ? strncmp(key, p, n) == 0 : strcmp(key, p) == 0) {
            if (reason) *reason = RULES[i].reason;
            return RULES[i].score;
        }
    }
    return 10;
}

typedef struct {
    parity_manifest_diff_t *d;
    size_t n, cap;
} dlist_t;

static int add_diff(dlist_t *l, const char *key, const cJSON *a, const cJSON *b)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        parity_manifest_diff_t *d = realloc(l->d, cap * sizeof *d);
        if (!d) return -1;
        l->d = d;
        l->cap = cap;
    }
    parity_manifest_diff_t *e = &l->d[l->n++];
    snprintf(e->key, sizeof e->key, "%s", key);
    value_text(a, e->a, sizeof e->a);
    value_text(b, e->b, sizeof e->b);
    e->score = parity_manifest_rank_key(key, &e->reason);
    return 0;
}

/* Walk the keys of a (and then the keys of b missing in a) at one level. */
static int diff_level(dlist_t *l, const char *prefix, const cJSON *a, const cJSON *b)
{
    for (int side = 0; side < 2; side++) {
        const cJSON *x = side ? b : a, *y = side ? a : b, *c;
        cJSON_ArrayForEach(c, x)
        {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(y, c->string);
            if (side && o) continue; /* seen from a's side */
            char key[128];
            snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", c->string);
            if (!*prefix && !strcmp(c->string, "schema")) continue;
            if (cJSON_IsObject(c) && (!o || cJSON_IsObject(o))) {
                cJSON empty;
                memset(&empty, 0, sizeof empty);
                empty.type = cJSON_Object;
                const cJSON *ca = side ? (o ? o : &empty) : c, *cb = side ? c : (o ? o : &empty);
                if (diff_level(l, key, ca, cb)) return -1;
            } else if (!o || !cJSON_Compare(c, o, 1)) {
                if (add_diff(l, key, side ? o : c, side ? c : o)) return -1;
            }
        }
    }
    return 0;
}

static int cmp_diff(const void *x, const void *y)
{
    const parity_manifest_diff_t *a = x, *b = y;
    if (a->score != b->score) return b->score - a->score;
    return strcmp(a->key, b->key);
}

parity_status_t parity_manifest_diff(const parity_manifest_t *a, const parity_manifest_t *b,
                                     parity_manifest_diff_t **out, size_t *n)
{
    if (out) *out = NULL;
    if (n) *n = 0;
    if (!a || !b || !out || !n) return PARITY_E_INVALID;
    dlist_t l = {NULL, 0, 0};
    if (diff_level(&l, "", a->root, b->root)) {
        free(l.d);
        return PARITY_E_NOMEM;
    }
    if (l.n) qsort(l.d, l.n, sizeof *l.d, cmp_diff);
    *out = l.d;
    *n = l.n;
    return PARITY_OK;
}

/* Declared ops (op_abi.h): loading a plugin's declaration, validating it, the workloads made
 * from the inputs' roles and their values. The same roles and workloads as the Python package's
 * parity.Op (docs/custom-ops.md); the values come from parity's own generator (rng.h), not
 * numpy's, so a C-declared op and a Python-declared one see different draws of the same laws.
 * Deliberately not here: tolerances (custom_tol.c), running and judging kernels (the check
 * engine, through custom_engine.c). */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "src/core/internal.h"
#include "src/custom/custom_impl.h"
#include "parity/format.h"
#include "parity/rng.h"
#include "parity/workload.h"

size_t custom_dtype_size(int dtype)
{
    switch (dtype) {
    case PARITY_DT_F64: case PARITY_DT_I64: return 8;
    case PARITY_DT_F32: case PARITY_DT_I32: return 4;
    case PARITY_DT_BF16: case PARITY_DT_F16: return 2;
    default: return 1;
    }
}

int custom_is_float_role(int role) { return role != PARITY_ROLE_TOKEN_IDS; }

const char *parity_custom_role_name(int role)
{
    static const char *const names[] = {"token_ids", "activation", "gradient", "weight", "norm_weight", "logits",
                                        "mask"};
    return role >= 0 && role < (int)(sizeof names / sizeof names[0]) ? names[role] : "?";
}

int64_t custom_numel(const parity_custom_op_t *op, const custom_arg_t *a, const int64_t *size)
{
    (void)op;
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= size[a->dim[i]];
    return n;
}

void custom_tensor(const parity_custom_op_t *op, const custom_arg_t *a, const int64_t *size, void *data,
                   int dtype, parity_abi_tensor_t *t)
{
    (void)op;
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dtype;
    t->ndim = a->ndim;
    t->name = a->name;
    int64_t st = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        t->shape[i] = size[a->dim[i]];
        t->strides[i] = st; /* contiguous, row-major */
        st *= t->shape[i];
    }
}

static int find_dim(const parity_custom_op_t *op, const char *name)
{
    for (int i = 0; name && i < op->n_dims; i++)
        if (strcmp(op->dim_name[i], name) == 0) return i;
    return -1;
}

static parity_status_t parse_arg(parity_custom_op_t *op, const char *what, const char *name, int ndim,
                                 const char *const *dims, custom_arg_t *a, parity_diag_t *diag)
{
    const char *opn = op->d->name;
    if (!name) return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: an %s has no name", opn, what);
    if (ndim < 0 || ndim > PARITY_ABI_MAX_DIMS)
        return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: %s %s: ndim %d outside 0..%d", opn, what, name,
                               ndim, PARITY_ABI_MAX_DIMS);
    a->name = name;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        a->dim[i] = find_dim(op, dims[i]);
        if (a->dim[i] < 0)
            return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: %s %s: dimension %s has no sizes in dims[]",
                                   opn, what, name, dims[i] ? dims[i] : "(null)");
    }
    return PARITY_OK;
}

/* Entries of a table are table[0].struct_size bytes apart (as kernel_abi.h's kernels). */
#define AT(T, base, i) ((const T *)((const char *)(base) + (size_t)(i) * (base)[0].struct_size))

static parity_status_t parse(parity_custom_op_t *op, parity_diag_t *diag)
{
    const parity_abi_op_decl_t *d = op->d;
    if (!d->name || (!d->reference && !op->ref))
        return parity_diag_set(diag, PARITY_E_FORMAT, "declared op: name or reference missing");
    if (d->n_dims < 1 || d->n_dims > PARITY_CUSTOM_MAX_ARGS || d->n_inputs < 1 ||
        d->n_inputs > PARITY_CUSTOM_MAX_ARGS || d->n_outputs < 1 || d->n_outputs > PARITY_CUSTOM_MAX_ARGS ||
        d->n_attrs < 0 || (d->n_attrs > 0 && (!d->attr_names || !d->attr_values)))
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "op %s: n_dims %d, n_inputs %d, n_outputs %d must be 1..%d; n_attrs %d", d->name,
                               d->n_dims, d->n_inputs, d->n_outputs, PARITY_CUSTOM_MAX_ARGS, d->n_attrs);
    /* Tables are strided by their first entry's struct_size: it must cover ABI v1's fields. */
    if (!d->dims || !d->inputs || !d->outputs ||
        d->dims[0].struct_size < offsetof(parity_abi_op_dim_t, fixed) + sizeof(int32_t) ||
        d->inputs[0].struct_size < offsetof(parity_abi_op_input_t, vocab) + sizeof(void *) ||
        d->outputs[0].struct_size < offsetof(parity_abi_op_output_t, reduced) + PARITY_ABI_MAX_DIMS * sizeof(void *))
        return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: dims/inputs/outputs tables missing, or their "
                               "struct_size smaller than op ABI v1's", d->name);
    op->n_dims = d->n_dims;
    int64_t base[PARITY_CUSTOM_MAX_ARGS], prod[PARITY_CUSTOM_MAX_ARGS];
    int fixed[PARITY_CUSTOM_MAX_ARGS];
    for (int i = 0; i < d->n_dims; i++) {
        const parity_abi_op_dim_t *dm = AT(parity_abi_op_dim_t, d->dims, i);
        if (!dm->name || dm->n_sizes < 1 || !dm->sizes)
            return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: dims[%d] needs a name and at least one size",
                                   d->name, i);
        op->dim_name[i] = dm->name;
        base[i] = prod[i] = dm->sizes[0];
        for (int j = 0; j < dm->n_sizes; j++) {
            if (dm->sizes[j] < 1 || dm->sizes[j] > ((int64_t)1 << 31))
                return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: dimension %s: size %lld outside 1..2^31",
                                       d->name, dm->name, (long long)dm->sizes[j]);
            if (dm->sizes[j] > prod[i]) prod[i] = dm->sizes[j];
        }
        fixed[i] = op->fixed[i] = dm->fixed != 0;
    }
    op->n_in = d->n_inputs;
    op->n_out = d->n_outputs;
    int has_ids = 0, has_act = 0;
    for (int i = 0; i < op->n_in; i++) {
        const parity_abi_op_input_t *x = AT(parity_abi_op_input_t, d->inputs, i);
        parity_status_t st = parse_arg(op, "input", x->name, x->ndim, x->dims, &op->in[i], diag);
        if (st) return st;
        if (x->role < PARITY_ROLE_TOKEN_IDS || x->role > PARITY_ROLE_MASK)
            return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: input %s: role %d unknown (op_abi.h)", d->name,
                                   x->name, x->role);
        op->role[i] = x->role;
        op->vocab[i] = -1;
        if (x->role == PARITY_ROLE_TOKEN_IDS) {
            op->vocab[i] = find_dim(op, x->vocab ? x->vocab : "V");
            if (op->vocab[i] < 0)
                return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: input %s: token ids need the size of "
                                       "dimension %s", d->name, x->name, x->vocab ? x->vocab : "V");
            has_ids = 1;
        }
        if (x->role == PARITY_ROLE_ACTIVATION) has_act = 1;
    }
    op->multilinear = (d->flags & PARITY_OP_MULTILINEAR) != 0;
    for (int i = 0; i < op->n_out; i++) {
        const parity_abi_op_output_t *y = AT(parity_abi_op_output_t, d->outputs, i);
        parity_status_t st = parse_arg(op, "output", y->name, y->ndim, y->dims, &op->out[i], diag);
        if (st) return st;
        if (y->n_reduced < 0 || y->n_reduced > PARITY_ABI_MAX_DIMS)
            return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: output %s: n_reduced %d", d->name, y->name,
                                   y->n_reduced);
        op->n_red[i] = y->n_reduced;
        for (int j = 0; j < y->n_reduced; j++) {
            op->red[i][j] = find_dim(op, y->reduced[j]);
            if (op->red[i][j] < 0)
                return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: output %s: reduced dimension %s unknown",
                                       d->name, y->name, y->reduced[j] ? y->reduced[j] : "(null)");
            for (int t = 0; op->multilinear && t < op->out[i].ndim; t++)
                if (op->out[i].dim[t] == op->red[i][j])
                    return parity_diag_set(diag, PARITY_E_FORMAT, "op %s: output %s: %s is one of its dimensions, "
                                           "so it is not summed into it", d->name, y->name, y->reduced[j]);
        }
    }
    /* The workloads, as parity.Op.workloads() (python/parity/custom.py). */
    custom_workload_t *w = op->wl;
#define ADD(nm, var, pr, sz)                                                             \
    do {                                                                                 \
        snprintf(w[op->n_wl].name, sizeof w[0].name, "%s", nm);                          \
        w[op->n_wl].variant = var;                                                       \
        w[op->n_wl].production = pr;                                                     \
        memcpy(w[op->n_wl].size, sz, sizeof(int64_t) * PARITY_CUSTOM_MAX_ARGS);         \
        op->n_wl++;                                                                      \
    } while (0)
    ADD("base", CV_BASE, 0, base);
    if (has_ids) ADD("zipf", CV_ZIPF, 0, base);
    if (has_ids) ADD("text", CV_TEXT, 0, base);
    if (has_act) ADD("outlier-ch", CV_OUTLIER, 0, base);
    int64_t odd[PARITY_CUSTOM_MAX_ARGS] = {0};
    int differs = 0;
    for (int i = 0; i < op->n_dims; i++) {
        odd[i] = fixed[i] ? base[i] : base[i] % 2 == 0 ? base[i] + 1 : base[i] + 2; /* tails of tiles */
        differs |= prod[i] != base[i];
    }
    ADD("odd", CV_BASE, 0, odd);
    ADD("magnitude", CV_MAGNITUDE, 0, base);
    if (differs) ADD("production", CV_BASE, 1, prod);
#undef ADD
    return PARITY_OK;
}

/* custom_impl.h: the declaration loaded and parsed (parity_custom_op_load adds the descriptor). */
parity_status_t custom_op_load(const char *path, const char *name, parity_custom_op_t **out,
                               parity_diag_t *diag)
{
    *out = NULL;
    char full[4200];
    /* dlopen searches the library path for a bare name: "foo.so" means ./foo.so (as kernel.c) */
    snprintf(full, sizeof full, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
    if (!h) return parity_diag_set(diag, PARITY_E_IO, "%s: cannot load shared object: %s", path, dlerror());
    parity_op_entry_fn entry;
    *(void **)(&entry) = dlsym(h, PARITY_OP_ENTRY_SYMBOL);
    const parity_abi_op_table_t *tb = entry ? entry() : NULL;
    parity_status_t st = PARITY_OK;
    if (!tb)
        st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: no symbol '%s' (or it returned NULL): a plugin that "
                             "declares ops exports `const parity_abi_op_table_t *%s(void)` (op_abi.h, "
                             "docs/custom-ops.md)", path, PARITY_OP_ENTRY_SYMBOL, PARITY_OP_ENTRY_SYMBOL);
    else if (tb->op_abi_version == 0 || tb->op_abi_version > PARITY_OP_ABI_VERSION)
        st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: op_abi_version %u, but this parity understands 1..%u: "
                             "rebuild the plugin against this parity's op_abi.h", path, tb->op_abi_version,
                             PARITY_OP_ABI_VERSION);
    else if (tb->struct_size < offsetof(parity_abi_op_table_t, ops) + sizeof(void *) || tb->n_ops < 1 ||
             !tb->ops || tb->ops[0].struct_size < offsetof(parity_abi_op_decl_t, reference) + sizeof(void *))
        st = parity_diag_set(diag, PARITY_E_FORMAT, "%s: op table malformed (struct_size, n_ops %d, ops)", path,
                             tb->n_ops);
    const parity_abi_op_decl_t *d = NULL;
    for (int i = 0; !st && i < tb->n_ops; i++) {
        const parity_abi_op_decl_t *c = AT(parity_abi_op_decl_t, tb->ops, i);
        if (name ? (c->name && strcmp(c->name, name) == 0) : tb->n_ops == 1) d = c;
    }
    if (!st && !d)
        st = name ? parity_diag_set(diag, PARITY_E_NOTFOUND, "%s: declares no op named %s", path, name)
                  : parity_diag_set(diag, PARITY_E_NOTFOUND, "%s: declares %d ops: name one", path, tb->n_ops);
    parity_custom_op_t *op = st ? NULL : calloc(1, sizeof *op);
    if (!st && !op) st = PARITY_E_NOMEM;
    if (!st) {
        op->handle = h;
        op->d = d;
        st = parse(op, diag);
    }
    if (st) {
        free(op);
        dlclose(h);
        return st;
    }
    *out = op;
    return PARITY_OK;
}

/* custom_impl.h: the declaration parsed (parity_custom_op_declare adds the descriptor). */
parity_status_t custom_op_declare(const parity_abi_op_decl_t *decl, parity_custom_ref_fn ref, void *arg,
                                  parity_custom_op_t **out, parity_diag_t *diag)
{
    *out = NULL;
    if (!decl || (!ref && !decl->reference))
        return parity_diag_set(diag, PARITY_E_INVALID, "declared op: no declaration, or no reference");
    parity_custom_op_t *op = calloc(1, sizeof *op);
    if (!op) return PARITY_E_NOMEM;
    op->d = decl;
    op->ref = ref;
    op->ref_arg = arg;
    parity_status_t st = parse(op, diag);
    if (st) {
        free(op);
        return st;
    }
    *out = op;
    return PARITY_OK;
}

static void given_free(parity_custom_op_t *op)
{
    for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) {
        free(op->given[i]);
        free(op->given_ids[i]);
        op->given[i] = NULL;
        op->given_ids[i] = NULL;
    }
    op->given_wl.name[0] = 0;
}

parity_status_t parity_custom_op_given(parity_custom_op_t *op, const char *name, const int64_t *sizes,
                                       const void *const *inputs, parity_diag_t *diag)
{
    return parity_custom_op_given_drawn(op, name, sizes, inputs, NULL, diag);
}

parity_status_t parity_custom_op_given_drawn(parity_custom_op_t *op, const char *name, const int64_t *sizes,
                                             const void *const *inputs, const char *draw, parity_diag_t *diag)
{
    given_free(op);
    if (!name) return PARITY_OK;
    if (!name[0] || strlen(name) >= sizeof op->given_wl.name)
        return parity_diag_set(diag, PARITY_E_INVALID, "given inputs: a workload name of 1..%d characters",
                               (int)sizeof op->given_wl.name - 1);
    custom_workload_t *g = &op->given_wl;
    memset(g, 0, sizeof *g);
    static const struct {
        const char *name;
        int variant;
    } draws[] = {{"base", CV_BASE}, {"outlier-ch", CV_OUTLIER}, {"magnitude", CV_MAGNITUDE}};
    g->draw = -1;
    for (size_t k = 0; draw && k < sizeof draws / sizeof draws[0]; k++)
        if (!strcmp(draw, draws[k].name)) g->draw = draws[k].variant;
    if (draw && g->draw < 0)
        return parity_diag_set(diag, PARITY_E_INVALID, "given inputs: draw %s: expected base, outlier-ch or magnitude",
                               draw);
    for (int d = 0; d < op->n_dims; d++) {
        if (sizes[d] < 1 || sizes[d] > ((int64_t)1 << 31))
            return parity_diag_set(diag, PARITY_E_INVALID, "given inputs: dimension %s of size %lld outside 1..2^31",
                                   op->dim_name[d], (long long)sizes[d]);
        g->size[d] = sizes[d];
    }
    g->variant = CV_GIVEN;
    for (int i = 0; i < op->n_in; i++) {
        int is_float = custom_is_float_role(op->role[i]);
        if (!inputs[i] && is_float && g->draw >= 0) continue; /* drawn from its role (values()) */
        if (!inputs[i]) {
            given_free(op);
            return parity_diag_set(diag, PARITY_E_INVALID, "given inputs: no values for input %s%s", op->in[i].name,
                                   is_float ? " (and no draw)" : " (token ids are never drawn here)");
        }
        int64_t n = custom_numel(op, &op->in[i], g->size);
        size_t bytes = (size_t)(n > 0 ? n : 1) * 8;
        void *p = malloc(bytes);
        if (!p) {
            given_free(op);
            return PARITY_E_NOMEM;
        }
        memcpy(p, inputs[i], (size_t)n * 8);
        if (is_float) op->given[i] = p;
        else op->given_ids[i] = p;
    }
    snprintf(g->name, sizeof g->name, "%s", name);
    return PARITY_OK;
}

const custom_case_t *custom_case_of(const parity_case_t *c) { return &((const desc_priv_t *)c->priv)->cc; }

void parity_custom_op_free(parity_custom_op_t *op)
{
    if (!op) return;
    given_free(op);
    if (op->handle) dlclose(op->handle);
    free(op);
}

const parity_abi_op_decl_t *parity_custom_op_decl(const parity_custom_op_t *op) { return op->d; }
const parity_op_t *parity_custom_op_desc(const parity_custom_op_t *op) { return &op->desc; }
int parity_custom_op_workload_count(const parity_custom_op_t *op) { return op->n_wl; }
const char *parity_custom_op_workload_name(const parity_custom_op_t *op, int w) { return op->wl[w].name; }
int parity_custom_op_workload_production(const parity_custom_op_t *op, int w) { return op->wl[w].production; }

void parity_custom_opts_default(parity_custom_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->timeout = 120;
}

/* ---- values ---------------------------------------------------------------------------- */
static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ^ 0xff; /* a separator, so ("ab","c") and ("a","bc") differ */
}

static void values(const custom_case_t *c, int i, parity_rng_t *rng, double *a, int64_t *ids)
{
    const parity_custom_op_t *op = c->op;
    const custom_arg_t *x = &op->in[i];
    const int64_t *size = c->wl->size;
    int64_t n = c->n_in[i], rows = x->ndim ? size[x->dim[0]] : 1, cols = x->ndim ? size[x->dim[x->ndim - 1]] : 1;
    int64_t per_row = rows > 0 ? n / rows : n;
    int role = op->role[i], var = c->wl->variant;
    if (var == CV_GIVEN && (ids || op->given[i])) { /* the caller's values (parity_custom_op_given) */
        if (ids) memcpy(ids, op->given_ids[i], (size_t)n * sizeof *ids);
        else memcpy(a, op->given[i], (size_t)n * sizeof *a);
        return;
    }
    if (var == CV_GIVEN) var = c->wl->draw; /* a float input the caller left to its role */
    if (role == PARITY_ROLE_TOKEN_IDS) {
        int64_t v = size[op->vocab[i]];
        if (var == CV_ZIPF) { /* Zipf s = 1.1 over a permuted vocabulary, by inverse CDF */
            double *cdf = malloc((size_t)v * sizeof *cdf);
            int64_t *perm = malloc((size_t)v * sizeof *perm);
            if (!cdf || !perm) { /* fall back to uniform ids rather than fail a workload */
                for (int64_t j = 0; j < n; j++) ids[j] = (int64_t)parity_rng_below(rng, (uint64_t)v);
            } else {
                double s = 0;
                for (int64_t t = 0; t < v; t++) cdf[t] = (s += pow((double)(t + 1), -1.1));
                for (int64_t t = 0; t < v; t++) perm[t] = t;
                for (int64_t t = v - 1; t > 0; t--) { /* Fisher-Yates: frequent tokens are not low ids */
                    int64_t r = (int64_t)parity_rng_below(rng, (uint64_t)t + 1), tmp = perm[t];
                    perm[t] = perm[r];
                    perm[r] = tmp;
                }
                for (int64_t j = 0; j < n; j++) {
                    double u = parity_rng_uniform(rng) * s;
                    int64_t lo = 0, hi = v - 1;
                    while (lo < hi) {
                        int64_t mid = (lo + hi) / 2;
                        if (cdf[mid] < u) lo = mid + 1; else hi = mid;
                    }
                    ids[j] = perm[lo];
                }
            }
            free(cdf);
            free(perm);
        } else {
            for (int64_t j = 0; j < n; j++) ids[j] = (int64_t)parity_rng_below(rng, (uint64_t)v);
        }
        return;
    }
    if (role == PARITY_ROLE_MASK) { /* a mask stays a mask, under every scheme */
        for (int64_t j = 0; j < n; j++) a[j] = parity_rng_uniform(rng) < 0.9;
        if (var >= CV_BL_RANDN) return;
    } else if (var >= CV_BL_RANDN) { /* a baseline verifier's scheme: the float roles are not its concern */
        if (var == CV_BL_RAND01) /* torch.rand */
            for (int64_t j = 0; j < n; j++) a[j] = parity_rng_uniform(rng);
        else if (var == CV_BL_INT) /* CK's integers */
            for (int64_t j = 0; j < n; j++) a[j] = (double)parity_rng_below(rng, 9) - 4.0;
        else if (var == CV_BL_SOL && role == PARITY_ROLE_NORM_WEIGHT) /* SOL: gamma = 1 */
            for (int64_t j = 0; j < n; j++) a[j] = 1.0;
        else /* torch.randn */
            parity_rng_normals(rng, a, n, 1.0);
        return;
    } else {
        parity_rng_normals(rng, a, n, 1.0); /* the ziggurat (src/core/rng.c), in bulk */
    }
    if (role == PARITY_ROLE_GRADIENT)
        for (int64_t r = 0; r < rows; r++) {
            double g = pow(10.0, -6.0 + 3.0 * parity_rng_uniform(rng)); /* parity's gradient scale */
            for (int64_t j = 0; j < per_row; j++) a[r * per_row + j] *= g;
        }
    else if (role == PARITY_ROLE_WEIGHT)
        for (int64_t j = 0; j < n; j++) a[j] *= 0.02;
    else if (role == PARITY_ROLE_NORM_WEIGHT)
        for (int64_t j = 0; j < n; j++) a[j] = 1.0 + 0.1 * a[j];
    else if (role == PARITY_ROLE_LOGITS && cols > 0)
        for (int64_t r = 0; r < n / cols; r++) {
            for (int64_t j = 0; j < cols; j++) a[r * cols + j] *= 3.0;
            for (int h = 0; h < 2; h++) /* two confident tokens per row */
                a[r * cols + (int64_t)parity_rng_below(rng, (uint64_t)cols)] = 15.0 + parity_rng_normal(rng);
        }
    if (var == CV_OUTLIER && role == PARITY_ROLE_ACTIVATION && x->ndim > 0)
        for (int h = 0; h < 4 && h < cols; h++) { /* LLM.int8-style outlier channels (may repeat) */
            /* the last channel always among them: the tail a tiled reduction forgets to add then
             * carries a row's largest terms instead of one typical term in cols */
            int64_t ch = h == 0 ? cols - 1 : (int64_t)parity_rng_below(rng, (uint64_t)cols);
            for (int64_t r = 0; r < n / cols; r++) a[r * cols + ch] *= 80.0;
        }
    if (var == CV_MAGNITUDE && x->ndim >= 2) { /* exact power-of-two scale per row: exponent stress */
        int e = c->dtype == PARITY_DT_F16 ? 6 : 24;
        for (int64_t r = 0; r < rows; r++) {
            double s = ldexp(1.0, (int)parity_rng_below(rng, (uint64_t)(2 * e + 1)) - e);
            for (int64_t j = 0; j < per_row; j++) a[r * per_row + j] *= s;
        }
    }
}

/* Real-text token ids (the `text` workload, as python/parity/custom.py _text_ids): a window of n
 * consecutive GPT-2 ids of parity's corpus (the built-in ops' text generator, workload.h) at an
 * offset drawn from rng, relabelled by frequency rank within the window (the most frequent token
 * is 0; ties by ascending id, as numpy's stable argsort of np.unique) and folded into [0, v) by
 * rank modulo v, so that only rare tokens fold when v is smaller than the distinct tokens. */
static int cmp_rank(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (count, id) pairs: count descending, then id ascending */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static parity_status_t text_ids(parity_rng_t *rng, int64_t n, int64_t v, int64_t *ids, parity_diag_t *diag)
{
    const int32_t *t;
    size_t tn;
    parity_status_t st = parity_workload_text_ids(&t, &tn, diag);
    if (st) return st;
    if (tn == 0) return parity_diag_set(diag, PARITY_E_IO, "the text corpus has no tokens");
    int32_t vmax = 0;
    for (size_t j = 0; j < tn; j++) vmax = t[j] > vmax ? t[j] : vmax;
    size_t off = (size_t)parity_rng_below(rng, tn);
    int64_t *cnt = calloc((size_t)vmax + 1, sizeof *cnt), *pairs = NULL, *rank = NULL;
    int64_t nd = 0;
    if (cnt)
        for (int64_t j = 0; j < n; j++) cnt[t[(off + (size_t)j) % tn]]++;
    for (int32_t id = 0; cnt && id <= vmax; id++) nd += cnt[id] > 0;
    pairs = cnt ? malloc((size_t)(nd > 0 ? nd : 1) * 2 * sizeof *pairs) : NULL;
    rank = pairs ? malloc(((size_t)vmax + 1) * sizeof *rank) : NULL;
    if (!rank) {
        free(cnt);
        free(pairs);
        return PARITY_E_NOMEM;
    }
    int64_t q = 0;
    for (int32_t id = 0; id <= vmax; id++)
        if (cnt[id]) {
            pairs[2 * q] = cnt[id];
            pairs[2 * q + 1] = id;
            q++;
        }
    qsort(pairs, (size_t)nd, 2 * sizeof *pairs, cmp_rank);
    for (int64_t r = 0; r < nd; r++) rank[pairs[2 * r + 1]] = r;
    for (int64_t j = 0; j < n; j++) ids[j] = rank[t[(off + (size_t)j) % tn]] % v;
    free(cnt);
    free(pairs);
    free(rank);
    return PARITY_OK;
}

/* x[0..n) stored in dtype into out, and exact[j] = the stored value read back (exact may be x:
 * each element is read before it is overwritten). */
static void store(int dtype, const parity_format_t *f, const double *x, int64_t n, void *out, double *exact)
{
    if (dtype == PARITY_DT_BF16) {
        /* bf16: the tensor module's bulk store (integer operations, the same bits as the general
         * encoder: tests/test_check_fill.c), then the exact values read back */
        parity_abi_tensor_t view;
        memset(&view, 0, sizeof view);
        view.dtype = PARITY_DT_BF16;
        view.data = out;
        parity_tensor_store_f64(&view, 0, x, n);
        for (int64_t j = 0; j < n; j++) exact[j] = parity_bf16_bits_to_f32(((const uint16_t *)out)[j]);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        double v = x[j];
        if (dtype == PARITY_DT_F32) {
            float s = (float)v;
            ((float *)out)[j] = s;
            exact[j] = s;
        } else {
            uint32_t b = parity_format_encode(f, v, NULL, NULL);
            ((uint16_t *)out)[j] = (uint16_t)b;
            exact[j] = parity_format_decode(f, b);
        }
    }
}

double custom_decode(int dtype, const void *data, int64_t i)
{
    switch (dtype) {
    case PARITY_DT_F64: return ((const double *)data)[i];
    case PARITY_DT_F32: return ((const float *)data)[i];
    case PARITY_DT_BF16: return parity_bf16_to_fp32_1(((const uint16_t *)data)[i]);
    case PARITY_DT_F16: {
        float f;
        parity_fp16_to_fp32((const uint16_t *)data + i, &f, 1);
        return f;
    }
    default: return NAN;
    }
}

parity_status_t custom_case_inputs(custom_case_t *c, uint64_t seed, parity_diag_t *diag)
{
    const parity_custom_op_t *op = c->op;
    parity_format_t f;
    memset(&f, 0, sizeof f);
    if (c->dtype == PARITY_DT_BF16 || c->dtype == PARITY_DT_F16)
        parity_format_get(c->dtype == PARITY_DT_BF16 ? "bf16" : "fp16", &f, NULL);
    else if (c->dtype != PARITY_DT_F32)
        return parity_diag_set(diag, PARITY_E_INVALID, "declared ops take f32, bf16 or f16 float inputs "
                               "(kernel in_dtype %d)", c->dtype);
    for (int i = 0; i < op->n_in; i++) {
        int64_t n = c->n_in[i] = custom_numel(op, &op->in[i], c->wl->size);
        parity_rng_t rng;
        uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, op->d->name), c->wl->name), op->in[i].name);
        parity_rng_seed(&rng, seed, h);
        if (!custom_is_float_role(op->role[i])) {
            if (!(c->ids[i] = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t)))) return PARITY_E_NOMEM;
            if (c->wl->variant == CV_TEXT) {
                parity_status_t st = text_ids(&rng, n, c->wl->size[op->vocab[i]], c->ids[i], diag);
                if (st) return st;
            } else {
                values(c, i, &rng, NULL, c->ids[i]);
            }
            continue;
        }
        c->exact[i] = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
        c->store[i] = malloc((size_t)(n > 0 ? n : 1) * custom_dtype_size(c->dtype));
        if (!c->exact[i] || !c->store[i]) return PARITY_E_NOMEM;
        values(c, i, &rng, c->exact[i], NULL); /* drawn in place, then rounded to dtype */
        store(c->dtype, &f, c->exact[i], n, c->store[i], c->exact[i]);
    }
    return PARITY_OK;
}

void custom_case_free(custom_case_t *c)
{
    for (int i = 0; i < PARITY_CUSTOM_MAX_ARGS; i++) {
        free(c->exact[i]);
        free(c->ids[i]);
        free(c->store[i]);
        free(c->ref[i]);
        free(c->tol[i]);
        free(c->s_acc[i]);
    }
    memset(c, 0, sizeof *c);
}

parity_status_t parity_custom_op_input(const parity_custom_op_t *op, int w, int i, uint64_t seed, int dtype,
                                       void *out, int64_t cap, int64_t *n, parity_diag_t *diag)
{
    if (!op || w < 0 || w >= op->n_wl || i < 0 || i >= op->n_in || !n)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_custom_op_input: workload %d or input %d out of range",
                               w, i);
    custom_case_t c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.wl = &op->wl[w];
    c.dtype = dtype;
    parity_status_t st = custom_case_inputs(&c, seed, diag);
    if (!st) {
        *n = c.n_in[i];
        if (out && cap < c.n_in[i]) st = parity_diag_set(diag, PARITY_E_INVALID, "input %s has %lld elements",
                                                         op->in[i].name, (long long)c.n_in[i]);
        else if (out)
            memcpy(out, custom_is_float_role(op->role[i]) ? (void *)c.exact[i] : (void *)c.ids[i],
                   (size_t)c.n_in[i] * 8);
    }
    custom_case_free(&c);
    return st;
}

/* ---- the declaration for other languages (python/parity/custom_plugin.py) ----------------- */
static const char *const ROLE_NAMES[] = {"token_ids", "activation", "gradient", "weight", "norm_weight", "logits",
                                         "mask"};

char *parity_custom_op_json(const parity_custom_op_t *op)
{
    const parity_abi_op_decl_t *d = op->d;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", d->name);
    cJSON_AddStringToObject(root, "description", d->description ? d->description : "");
    cJSON_AddBoolToObject(root, "multilinear", op->multilinear);
    cJSON *dims = cJSON_AddObjectToObject(root, "dims");
    cJSON *fixed = cJSON_AddArrayToObject(root, "fixed");
    for (int i = 0; i < op->n_dims; i++) {
        const parity_abi_op_dim_t *dm = AT(parity_abi_op_dim_t, d->dims, i);
        cJSON *a = cJSON_AddArrayToObject(dims, dm->name);
        for (int j = 0; j < dm->n_sizes; j++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)dm->sizes[j]));
        if (dm->fixed) cJSON_AddItemToArray(fixed, cJSON_CreateString(dm->name));
    }
    cJSON *ins = cJSON_AddArrayToObject(root, "inputs");
    for (int i = 0; i < op->n_in; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", op->in[i].name);
        cJSON_AddStringToObject(x, "role", ROLE_NAMES[op->role[i]]);
        cJSON *a = cJSON_AddArrayToObject(x, "dims");
        for (int t = 0; t < op->in[i].ndim; t++) cJSON_AddItemToArray(a, cJSON_CreateString(op->dim_name[op->in[i].dim[t]]));
        if (op->vocab[i] >= 0) cJSON_AddStringToObject(x, "vocab", op->dim_name[op->vocab[i]]);
        cJSON_AddItemToArray(ins, x);
    }
    cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
    for (int o = 0; o < op->n_out; o++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", op->out[o].name);
        cJSON *a = cJSON_AddArrayToObject(x, "dims");
        for (int t = 0; t < op->out[o].ndim; t++) cJSON_AddItemToArray(a, cJSON_CreateString(op->dim_name[op->out[o].dim[t]]));
        cJSON *r = cJSON_AddArrayToObject(x, "reduced");
        for (int t = 0; t < op->n_red[o]; t++) cJSON_AddItemToArray(r, cJSON_CreateString(op->dim_name[op->red[o][t]]));
        cJSON_AddItemToArray(outs, x);
    }
    cJSON *at = cJSON_AddObjectToObject(root, "attrs");
    for (int a = 0; a < d->n_attrs; a++) cJSON_AddNumberToObject(at, d->attr_names[a], d->attr_values[a]);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

int parity_custom_op_reference(const parity_custom_op_t *op, const int64_t *sizes, int dtype, const void *const *inputs,
                               void *const *outputs)
{
    if (!op || !sizes || !inputs || !outputs || (dtype != PARITY_DT_F64 && dtype != PARITY_DT_F32))
        return PARITY_KERNEL_ERROR;
    parity_abi_tensor_t in[PARITY_CUSTOM_MAX_ARGS], ou[PARITY_CUSTOM_MAX_ARGS];
    for (int i = 0; i < op->n_in; i++)
        custom_tensor(op, &op->in[i], sizes, (void *)inputs[i], custom_is_float_role(op->role[i]) ? dtype : PARITY_DT_I64,
                      &in[i]);
    for (int o = 0; o < op->n_out; o++) custom_tensor(op, &op->out[o], sizes, outputs[o], dtype, &ou[o]);
    return custom_call_reference(op, in, ou);
}

int custom_call_reference(const parity_custom_op_t *op, parity_abi_tensor_t *in, parity_abi_tensor_t *ou)
{
    parity_abi_call_t call;
    memset(&call, 0, sizeof call);
    call.abi_version = PARITY_ABI_VERSION;
    call.struct_size = sizeof call;
    call.op = op->d->name;
    call.n_inputs = op->n_in;
    call.n_outputs = op->n_out;
    call.inputs = in;
    call.outputs = ou;
    call.n_attrs = op->d->n_attrs;
    call.attr_names = op->d->attr_names;
    double attrs[PARITY_CUSTOM_MAX_PARAMS];
    call.attr_values = op->d->n_attrs <= PARITY_CUSTOM_MAX_PARAMS ? custom_trial_attrs(op, attrs) : op->d->attr_values;
    call.seed = 1;
    call.n_threads = 1;
    return op->ref ? op->ref(op->ref_arg, &call) : op->d->reference(&call);
}
